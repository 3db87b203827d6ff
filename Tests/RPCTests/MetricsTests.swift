import Foundation
import HealthLedgerRPC
import HealthLedgerSDK
import Ledger
import LedgerSchema
import NIOCore
import NIOPosix
import SwiftProtobuf
import Testing

/// `healthledgerd`'s Prometheus endpoint, scraped over HTTP from a daemon of its own: what it
/// counts for calls, streams, connections and group commits, and that a closed connection's
/// stream stops (its gauge falls back and the call is counted with the code it ended with).
@Suite("The metrics endpoint")
struct MetricsTests {
    @Test("/metrics counts calls by method and code, open streams and connections, and group commits; a closed connection's stream ends")
    func scrape() async throws {
        try await withTestServer { server in
            let daemon = try await DaemonProcess(dataDirectory: server.directory, metrics: true)
            defer { daemon.stop() }
            let metricsPort = try #require(daemon.metricsPort)

            let empty = try await HTTPGet.fetch(port: metricsPort, path: "/metrics")
            #expect(empty.status == 200 && empty.headers["content-type"] == "text/plain; version=0.0.4")
            #expect(Scrape(empty.body).value("healthledger_open_connections") == 0)
            let missing = try await HTTPGet.fetch(port: metricsPort, path: "/metric")
            #expect(missing.status == 404 && missing.body == "not found\n")

            let owner = HealthStore(configuration: .init(port: daemon.port, credential: server.ownerCredential))
            try await owner.save(Samples.heartRate(70, at: 0))
            for _ in 0..<3 { _ = try await owner.ping() }
            let stranger = HealthStore(configuration: .init(port: daemon.port, credential: "hl1:alice:0000000000000000:AAAA"))
            _ = await expectRPCError(.unauthenticated, nil, "ping with an unknown credential") { _ = try await stranger.ping() }
            await stranger.close()

            // Polled until the stranger's connection is gone: the server learns of its close
            // when its event loop reads it, which may come after the close returns here.
            var scrape = try await Scrape.fetch(metricsPort, until: { $0.value("healthledger_open_connections") == 1 })
            #expect(scrape.value(#"healthledger_rpc_calls_total{method="healthledger.v1.Ledger/Save",code="ok"}"#) == 1)
            #expect(scrape.value(#"healthledger_rpc_calls_total{method="healthledger.v1.Ledger/Ping",code="ok"}"#) == 3)
            #expect(scrape.value(#"healthledger_rpc_calls_total{method="healthledger.v1.Ledger/Ping",code="unauthenticated"}"#) == 1)
            #expect(scrape.value(#"healthledger_rpc_call_duration_seconds_count{method="healthledger.v1.Ledger/Ping"}"#) == 4)
            // The smallest bucket is 100 µs, for calls as short as a ping; the largest 10 s.
            #expect(scrape.has(#"healthledger_rpc_call_duration_seconds_bucket{method="healthledger.v1.Ledger/Ping",le="0.0001"}"#))
            #expect(scrape.value(#"healthledger_rpc_call_duration_seconds_bucket{method="healthledger.v1.Ledger/Ping",le="10.0"}"#) == 4)
            // The one save was one group commit of one request.
            #expect(scrape.value("healthledger_group_commit_requests_count") == 1)
            #expect(scrape.value(#"healthledger_group_commit_requests_bucket{le="1.0"}"#) == 1)
            #expect(scrape.value("healthledger_group_commit_seconds_count") == 1)
            #expect(scrape.value("healthledger_open_streams") == 0)
            #expect(scrape.value("healthledger_open_connections") == 1)

            // A watch on a connection of its own: one open stream, two connections.
            let raw = try await RawConnection(port: daemon.port)
            try await raw.send(try ProtocolStatementTests.request(
                1, .watchChanges, server.ownerCredential, Healthledger_V1_ChangeQueryRequest.with { $0.type = ProtocolStatementTests.heartRate }))
            let first = try #require(await ProtocolStatementTests.next(raw))
            guard case .message = first.kind else { Issue.record("the watch sent \(first) first"); return }
            scrape = try await Scrape.fetch(metricsPort)
            #expect(scrape.value("healthledger_open_streams") == 1)
            #expect(scrape.value("healthledger_open_connections") == 2)

            // Closing that connection ends the watch on the server: the stream is no longer
            // open and the call is counted, cancelled. (Polled: the server learns of the close
            // when its event loop reads it, and counts the call when its task has ended, which
            // may come after the stream is no longer counted open.)
            await raw.close()
            let cancelledWatches = #"healthledger_rpc_calls_total{method="healthledger.v1.Ledger/WatchChanges",code="cancelled"}"#
            scrape = try await Scrape.fetch(metricsPort, until: {
                $0.value("healthledger_open_streams") == 0 && $0.value("healthledger_open_connections") == 1 && $0.value(cancelledWatches) != nil
            })
            #expect(scrape.value("healthledger_open_streams") == 0)
            #expect(scrape.value("healthledger_open_connections") == 1)
            #expect(scrape.value(cancelledWatches) == 1)

            await owner.close()
            scrape = try await Scrape.fetch(metricsPort, until: { $0.value("healthledger_open_connections") == 0 })
            #expect(scrape.value("healthledger_open_connections") == 0)
        }
    }

    @Test("each call writes one info line: method, ledger, principal, status and duration, never a value or a secret")
    func callLogLines() async throws {
        try await withTestServer { server in
            let daemon = try await DaemonProcess(dataDirectory: server.directory)
            defer { daemon.stop() }
            let owner = HealthStore(configuration: .init(port: daemon.port, credential: server.ownerCredential))
            let app = HealthStore(configuration: .init(port: daemon.port, credential: server.appCredential))
            let stranger = HealthStore(configuration: .init(port: daemon.port, credential: "hl1:alice:0123456789abcdef:nope"))
            let admin = HealthStore(configuration: .init(port: daemon.port, credential: try server.store.issueOperatorCredential(label: "log test")))
            try await owner.save(Samples.heartRate(187.5, at: 0))
            _ = try await app.ping()
            await expectRPCError(.unauthenticated) { _ = try await stranger.ping() }
            _ = try await admin.credentials(ledger: "alice")
            // A ledger id no ledger has, with a line break: the line stays one line.
            await expectRPCError(.invalidArgument) { _ = try await admin.credentials(ledger: "x\ny=z") }
            var calls: [String] = []
            while calls.count < 5, let line = await daemon.nextLine() {
                if line.hasSuffix(" call") { calls.append(line) }
            }
            #expect(calls.count == 5, "\(calls)")
            let escaped = calls.filter { line in line.contains("ledger.id=x_y=z principal=operator") }
            #expect(escaped.count == 1, "\(calls)")
            // Found by what they say, not by order: a call's line is written after its answer
            // leaves, so the next call's may come first.
            func line(_ matching: (String) -> Bool) -> String { calls.first(where: matching) ?? "" }
            let save = line { $0.contains("Ledger/Save") }
            let ping = line { $0.contains("Ledger/Ping") && !$0.contains("principal=-") }
            let refused = line { $0.contains("principal=-") }
            #expect(save.contains("rpc.method=healthledger.v1.Ledger/Save") && save.contains("principal=owner") && save.contains("rpc.status=ok"), "\(save)")
            #expect(save.contains("ledger.id=alice") && save.contains(" info ") && save.contains("duration_us="), "\(save)")
            // The whole line, as the daemon's log handler writes any line: time, level, label,
            // the fields in the order of their names, the source, the message.
            let whole = #/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ info healthledgerd: duration_us=\d+ ledger\.id=alice principal=owner rpc\.method=healthledger\.v1\.Ledger/Save rpc\.status=ok \[HealthLedgerServer\] call$/#
            #expect(save.wholeMatch(of: whole) != nil, "\(save)")
            #expect(ping.contains("rpc.method=healthledger.v1.Ledger/Ping") && ping.contains("principal=app com.example.walk"), "\(ping)")
            #expect(refused.contains("principal=-") && refused.contains("rpc.status=unauthenticated"), "\(refused)")
            // An operator's call names the operator, and the ledger its request names.
            let listing = line { $0.contains("Ledger/ListCredentials") }
            #expect(listing.contains("ledger.id=alice principal=operator rpc.method=healthledger.v1.Ledger/ListCredentials rpc.status=ok"), "\(listing)")
            for line in calls { #expect(!line.contains("187.5") && !line.contains(server.ownerCredential) && !line.contains("nope"), "\(line)") }
            await owner.close()
            await app.close()
            await stranger.close()
            await admin.close()
        }
    }

}

/// One scrape of `/metrics`: each sample line's series (name and labels) and value.
struct Scrape {
    let values: [String: Double]

    init(_ text: String) {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        self.values = values
    }

    func value(_ series: String) -> Double? { values[series] }
    func has(_ series: String) -> Bool { values[series] != nil }

    /// Scrapes until `done` holds (at most 2,400 times, 50 ms apart: two minutes, a guard
    /// against hanging that no loaded machine comes near, not a deadline the test relies on),
    /// and returns the last scrape.
    static func fetch(_ port: Int, until done: (Scrape) -> Bool = { _ in true }) async throws -> Scrape {
        var scrape = Scrape(try await HTTPGet.fetch(port: port, path: "/metrics").body)
        for _ in 0..<2_400 where !done(scrape) {
            try await Task.sleep(for: .milliseconds(50))
            scrape = Scrape(try await HTTPGet.fetch(port: port, path: "/metrics").body)
        }
        return scrape
    }
}

/// A minimal HTTP/1.1 GET over NIO: the status, the headers (names lowercased) and the body,
/// read to its `Content-Length`.
enum HTTPGet {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    static func fetch(port: Int, path: String) async throws -> Response {
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Collector(continuation: continuation)) }
            }
            .connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: port)).get()
        defer { channel.close(promise: nil) }
        try await channel.writeAndFlush(channel.allocator.buffer(string: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        var received: [UInt8] = []
        for await chunk in stream {
            received += chunk.readableBytesView
            if let response = parse(received) { return response }
        }
        throw Incomplete(received: received.count)
    }

    struct Incomplete: Error { var received: Int }

    private static func parse(_ bytes: [UInt8]) -> Response? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.indices.dropLast(3).first(where: { bytes[$0..<$0 + 4].elementsEqual(separator) }) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        guard let statusLine = head.first, let status = Int(statusLine.split(separator: " ")[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let body = bytes[(end + 4)...]
        guard let length = headers["content-length"].flatMap(Int.init), body.count >= length else { return nil }
        return Response(status: status, headers: headers, body: String(decoding: body.prefix(length), as: UTF8.self))
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let continuation: AsyncStream<ByteBuffer>.Continuation

        init(continuation: AsyncStream<ByteBuffer>.Continuation) { self.continuation = continuation }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) { continuation.yield(unwrapInboundIn(data)) }
        func channelInactive(context: ChannelHandlerContext) { continuation.finish() }
    }
}
