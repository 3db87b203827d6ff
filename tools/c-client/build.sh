#!/usr/bin/env bash
# Builds the HealthLedger reference C client.
#
# Generates the protobuf-c code for healthledger/v1/{objects,ledger,rpc}.proto and compiles
# healthledger-client.c against it. Everything goes to $BUILD_DIR (default:
# <repo>/.build-c-client, ignored by git as .build*/); nothing in the source tree is
# written. Safe to run repeatedly. The last line printed is the client binary's path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
protos="$here/../../Protos"
build_dir="${BUILD_DIR:-$(dirname "$0")/../../.build-c-client}"

missing() {
  echo "error: $1 is missing. Install it with: apt-get install libprotobuf-c-dev protobuf-c-compiler" >&2
  exit 1
}
command -v gcc >/dev/null 2>&1 || { echo "error: gcc is missing (apt-get install gcc)" >&2; exit 1; }
command -v protoc-c >/dev/null 2>&1 || missing "protoc-c"
printf '#include <protobuf-c/protobuf-c.h>\n' | gcc -E -x c - >/dev/null 2>&1 || missing "protobuf-c/protobuf-c.h"

mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
proto_copy="$build_dir/proto"
gen="$build_dir/gen"
rm -rf "$proto_copy" "$gen"
mkdir -p "$proto_copy/healthledger/v1" "$gen"

# protoc-c before 1.5 rejects proto3 `optional` fields, so generate from a copy of the
# protos with that label removed. The wire format is unchanged: a field the client leaves
# at its default (e.g. SampleQueryRequest.start_us) is simply not written, which the
# server reads as absent, and decoding is the same either way.
for name in objects ledger rpc; do
  sed -E 's/^([[:space:]]*)optional[[:space:]]+/\1/' \
    "$protos/healthledger/v1/$name.proto" > "$proto_copy/healthledger/v1/$name.proto"
done
protoc-c --c_out="$gen" -I "$proto_copy" healthledger/v1/objects.proto healthledger/v1/ledger.proto healthledger/v1/rpc.proto

binary="$build_dir/healthledger-client"
gcc -std=c11 -O2 -Wall -Wextra -I "$gen" \
  "$here/healthledger-client.c" \
  "$gen/healthledger/v1/objects.pb-c.c" "$gen/healthledger/v1/ledger.pb-c.c" "$gen/healthledger/v1/rpc.pb-c.c" \
  -lprotobuf-c -o "$binary.tmp"
mv -f "$binary.tmp" "$binary"
echo "$binary"
