#!/usr/bin/env python3
"""A HealthLedger client in Python, generated from Protos/ alone with grpcio-tools.

Run by Tests/RPCTests/GRPCPythonTests.swift against a real server: it generates the client
code from the proto files, calls unary and streaming methods, a deadline, a cancel, a bad
credential, the read paths the test lists (as a read-denied app, printing each answer for the
test to compare with our protocol's), a revocation that ends a stream, health and reflection,
and prints one JSON object with what it saw.

    ledger_client.py --protos DIR --port N --owner CRED --app CRED --app-bundle ID --revoked-app CRED --reads FILE
"""
import argparse
import glob
import json
import os
import sys
import tempfile
import threading
import uuid


def generate(protos, out):
    """Compiles every .proto under `protos` into `out` and puts it on the import path."""
    import grpc_tools
    from grpc_tools import protoc

    included = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = sorted(os.path.relpath(p, protos) for p in glob.glob(os.path.join(protos, "**", "*.proto"), recursive=True))
    status = protoc.main(["protoc", f"-I{protos}", f"-I{included}", f"--python_out={out}", f"--grpc_python_out={out}", *files])
    if status != 0:
        sys.exit(f"grpc_tools.protoc failed on {files}")
    sys.path.insert(0, out)


def failure(error):
    """A gRPC error as the test compares it: code, message, HealthKit's code."""
    health = dict(error.trailing_metadata() or ()).get("healthledger-error-code")
    return {"code": error.code().value[0], "message": error.details(), "health": int(health) if health else None}


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--protos", "--owner", "--app", "--app-bundle", "--revoked-app", "--reads"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    out = tempfile.mkdtemp(prefix="healthledger-python-")
    generate(args.protos, out)
    import grpc
    from google.protobuf import descriptor_pool, message_factory
    from healthledger.v1 import objects_pb2, rpc_pb2, rpc_pb2_grpc

    def bearer(credential):
        return (("authorization", f"Bearer {credential}"),)

    channel = grpc.insecure_channel(f"127.0.0.1:{args.port}")
    stub = rpc_pb2_grpc.LedgerStub(channel)
    seen = {}

    # Unary.
    pong = stub.Ping(rpc_pb2.PingRequest(data=b"from python"), metadata=bearer(args.owner))
    seen["ping"] = {"ledger": pong.ledger_id, "principal": pong.principal, "data": pong.data.decode()}

    # A write by the app, then a stream in batches of two.
    source = objects_pb2.SourceRevision(source=objects_pb2.Source(bundle_identifier=args.app_bundle, name="Python"))
    samples = [
        objects_pb2.HealthObject(
            uuid=uuid.uuid4().bytes, type="HKQuantityTypeIdentifierHeartRate", source_revision=source, start_us=1_700_000_000_000_000 + i * 60_000_000,
            end_us=1_700_000_000_000_000 + i * 60_000_000, quantity=objects_pb2.QuantitySampleBody(quantity=objects_pb2.Quantity(value=70 + i, unit="count/min")))
        for i in range(3)
    ]
    saved = stub.Save(rpc_pb2.SaveRequest(objects=samples), metadata=bearer(args.app))
    seen["saved"] = [outcome.disposition for outcome in saved.outcomes]
    batches = stub.QuerySamples(rpc_pb2.SampleQueryRequest(type="HKQuantityTypeIdentifierHeartRate", batch_size=2), metadata=bearer(args.owner))
    seen["query_batches"] = [len(batch.objects) for batch in batches]
    seen["saved_uuids"] = [sample.uuid.hex() for sample in samples]

    # A deadline ends a watch, which never ends by itself; a cancel ends another.
    watch = rpc_pb2.ChangeQueryRequest(type="HKQuantityTypeIdentifierHeartRate")
    try:
        for _ in stub.WatchChanges(watch, metadata=bearer(args.owner), timeout=0.5):
            pass
        seen["deadline"] = "no error"
    except grpc.RpcError as error:
        seen["deadline"] = error.code().name
    call = stub.WatchChanges(watch, metadata=bearer(args.owner))
    first = next(call)
    call.cancel()
    try:
        for _ in call:
            pass
        seen["cancel"] = "no error"
    except grpc.RpcError as error:
        seen["cancel"] = error.code().name
    seen["cancel_first_batch"] = len(first.added)

    # Credentials that do not authenticate.
    for name, metadata in (("unknown_credential", bearer("hl1:alice:nope:nope")), ("no_credential", ())):
        try:
            stub.Ping(rpc_pb2.PingRequest(), metadata=metadata)
            seen[name] = "no error"
        except grpc.RpcError as error:
            seen[name] = failure(error)

    # The read paths, as the test lists them: each answer's messages (hex) or its failure.
    pool = descriptor_pool.Default()
    answers = []
    with open(args.reads) as file:
        reads = json.load(file)
    for read in reads:
        request_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("healthledger.v1." + read["request"]))
        request = request_class.FromString(bytes.fromhex(read["payload"]))
        method = getattr(stub, read["method"])
        try:
            if read["streaming"]:
                messages = [message.SerializeToString().hex() for message in method(request, metadata=bearer(args.app))]
            else:
                messages = [method(request, metadata=bearer(args.app)).SerializeToString().hex()]
            answers.append({"messages": messages})
        except grpc.RpcError as error:
            answers.append({"failure": failure(error)})
    seen["reads"] = answers

    # Revoking a credential ends its running stream.
    revoked_id = args.revoked_app.split(":")[2]
    stream = stub.WatchChanges(watch, metadata=bearer(args.revoked_app))
    next(stream)
    stub.RevokeLedgerCredential(rpc_pb2.LedgerCredentialRequest(credential_id=revoked_id), metadata=bearer(args.owner))
    try:
        for _ in stream:
            pass
        seen["revocation"] = "no error"
    except grpc.RpcError as error:
        seen["revocation"] = failure(error)

    # Health and reflection, with the packages' own clients.
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    health = health_pb2_grpc.HealthStub(channel)
    seen["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(health.Check(health_pb2.HealthCheckRequest(service="")).status)
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    database = ProtoReflectionDescriptorDatabase(channel)
    seen["reflection_services"] = list(database.get_services())
    service = DescriptorPool(database).FindServiceByName("healthledger.v1.Ledger")
    seen["reflection_methods"] = sorted(f"{method.name}:{int(method.server_streaming)}" for method in service.methods)

    print(json.dumps(seen))


if __name__ == "__main__":
    main()
