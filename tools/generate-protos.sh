#!/usr/bin/env bash
# Regenerates the Swift code for Protos/ into Sources/LedgerSchema/Generated.
#
# Needs protoc (Debian: protobuf-compiler) and protoc-gen-swift of the swift-protobuf
# version Package.swift depends on: built from the package's own dependency checkout
# (`swift build -c release --product protoc-gen-swift`, about a minute the first time)
# unless PROTOC_GEN_SWIFT points to one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq protobuf-compiler
  else echo "protoc is missing: sudo apt-get install protobuf-compiler" >&2; exit 1; fi
fi

plugin=${PROTOC_GEN_SWIFT:-}
if [ -z "$plugin" ]; then
  swift build -c release --product protoc-gen-swift >&2
  plugin="$(swift build -c release --show-bin-path)/protoc-gen-swift"
fi

out=Sources/LedgerSchema/Generated
rm -rf "$out" && mkdir -p "$out"
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_out="$out" --swift_opt=Visibility=Public --swift_opt=FileNaming=PathToUnderscores \
  -I Protos $(find Protos -name '*.proto' | sort)
echo "generated: $(ls "$out" | tr '\n' ' ')"
