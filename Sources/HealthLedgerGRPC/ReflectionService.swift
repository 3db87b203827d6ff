import Foundation
import GRPCCore
import GRPCProtobuf
import SwiftProtobuf

/// `grpc.reflection.v1.ServerReflection` (and the same under `v1alpha`, which older tools
/// still ask): the services this endpoint serves and the descriptors of every file they use,
/// so that grpcurl, Postman and every language's reflection client call HealthLedger without
/// its proto files. The descriptors are Protos/ and the two standard services, compiled by
/// `tools/generate-protos.sh` (``ServedDescriptors``).
struct ReflectionService: RegistrableRPCService {
    /// The services listed, in this order.
    static let services = ["healthledger.v1.Ledger", "healthledger.v1.Replication", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"]

    private let catalogue: DescriptorCatalogue

    init() throws {
        catalogue = try DescriptorCatalogue(base64: ServedDescriptors.fileDescriptorSet)
    }

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        for service in ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"] {
            router.registerHandler(
                forMethod: MethodDescriptor(fullyQualifiedService: service, method: "ServerReflectionInfo"),
                deserializer: ProtobufDeserializer<Grpc_Reflection_V1_ServerReflectionRequest>(),
                serializer: ProtobufSerializer<Grpc_Reflection_V1_ServerReflectionResponse>()
            ) { [catalogue] requests, _ in
                StreamingServerResponse { writer in
                    for try await request in requests.messages {
                        try await writer.write(catalogue.answer(request))
                    }
                    return [:]
                }
            }
        }
    }
}

/// The served files, and which file defines each symbol.
struct DescriptorCatalogue: Sendable {
    private let files: [String: Google_Protobuf_FileDescriptorProto]
    private let serialized: [String: Data]
    /// Fully qualified names (without the leading dot) of messages, enums, services and
    /// methods, to the file that defines them.
    private let symbols: [String: String]

    init(base64: String) throws {
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
            throw RPCError(code: .internalError, message: "the served descriptors are not base64")
        }
        let set = try Google_Protobuf_FileDescriptorSet(serializedBytes: data)
        var files: [String: Google_Protobuf_FileDescriptorProto] = [:]
        var serialized: [String: Data] = [:]
        var symbols: [String: String] = [:]
        for file in set.file {
            files[file.name] = file
            serialized[file.name] = try file.serializedData()
            let prefix = file.package.isEmpty ? "" : file.package + "."
            func addMessages(_ messages: [Google_Protobuf_DescriptorProto], _ scope: String) {
                for message in messages {
                    let name = scope + message.name
                    symbols[name] = file.name
                    for nested in message.enumType { symbols[name + "." + nested.name] = file.name }
                    addMessages(message.nestedType, name + ".")
                }
            }
            addMessages(file.messageType, prefix)
            for type in file.enumType { symbols[prefix + type.name] = file.name }
            for service in file.service {
                symbols[prefix + service.name] = file.name
                for method in service.method { symbols[prefix + service.name + "." + method.name] = file.name }
            }
        }
        self.files = files
        self.serialized = serialized
        self.symbols = symbols
    }

    func answer(_ request: Grpc_Reflection_V1_ServerReflectionRequest) -> Grpc_Reflection_V1_ServerReflectionResponse {
        var response = Grpc_Reflection_V1_ServerReflectionResponse()
        response.validHost = request.host
        response.originalRequest = request
        switch request.messageRequest {
        case .listServices?:
            response.listServicesResponse = .with { $0.service = ReflectionService.services.map { name in .with { $0.name = name } } }
        case .fileByFilename(let name)?:
            response.messageResponse = files[name] == nil ? notFound("no file named '\(name.prefix(200))'") : withDependencies(of: name)
        case .fileContainingSymbol(let symbol)?:
            let name = symbol.hasPrefix(".") ? String(symbol.dropFirst()) : symbol
            response.messageResponse = symbols[name].map(withDependencies(of:)) ?? notFound("no symbol named '\(symbol.prefix(200))'")
        case .fileContainingExtension(let request)?:
            response.messageResponse = notFound("no extension \(request.extensionNumber) of '\(request.containingType.prefix(200))': these files declare none")
        case .allExtensionNumbersOfType(let type)?:
            let name = type.hasPrefix(".") ? String(type.dropFirst()) : type
            response.messageResponse =
                symbols[name] == nil
                ? notFound("no message named '\(type.prefix(200))'") : .allExtensionNumbersResponse(.with { $0.baseTypeName = name })
        case nil:
            response.messageResponse = .errorResponse(
                .with {
                    $0.errorCode = Int32(Status.Code.invalidArgument.rawValue)
                    $0.errorMessage = "the request names none of list_services, file_by_filename, file_containing_symbol, file_containing_extension, all_extension_numbers_of_type"
                })
        }
        return response
    }

    /// The file, then every file it imports, directly or not (each once).
    private func withDependencies(of name: String) -> Grpc_Reflection_V1_ServerReflectionResponse.OneOf_MessageResponse {
        var order: [String] = []
        var seen: Set<String> = []
        var pending = [name]
        while let next = pending.popLast() {
            guard seen.insert(next).inserted, let file = files[next] else { continue }
            order.append(next)
            pending.append(contentsOf: file.dependency.reversed())
        }
        return .fileDescriptorResponse(.with { $0.fileDescriptorProto = order.compactMap { serialized[$0] } })
    }

    private func notFound(_ message: String) -> Grpc_Reflection_V1_ServerReflectionResponse.OneOf_MessageResponse {
        .errorResponse(
            .with {
                $0.errorCode = Int32(Status.Code.notFound.rawValue)
                $0.errorMessage = message
            })
    }
}
