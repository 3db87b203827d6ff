#!/usr/bin/env bash
# Regenerates the Swift code for Protos/ into Sources/LedgerSchema/Generated.
#
# Needs protoc (Debian: protobuf-compiler) and protoc-gen-swift built from
# swift-protobuf 1.39.0, the version Package.swift depends on. The plugin is built
# once into .build-tools/ (about a minute) unless PROTOC_GEN_SWIFT points to one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if ! command -v protoc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq protobuf-compiler
  else echo "protoc is missing: sudo apt-get install protobuf-compiler" >&2; exit 1; fi
fi

plugin=${PROTOC_GEN_SWIFT:-}
if [ -z "$plugin" ]; then
  tools="$root/.build-tools"
  plugin="$tools/swift-protobuf/.build/release/protoc-gen-swift"
  if [ ! -x "$plugin" ]; then
    mkdir -p "$tools"
    [ -d "$tools/swift-protobuf" ] || git clone -q --depth 1 --branch 1.39.0 \
      https://github.com/apple/swift-protobuf.git "$tools/swift-protobuf"
    (cd "$tools/swift-protobuf" && swift build -c release --product protoc-gen-swift)
  fi
fi

out=Sources/LedgerSchema/Generated
rm -rf "$out" && mkdir -p "$out"
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_out="$out" --swift_opt=Visibility=Public --swift_opt=FileNaming=PathToUnderscores \
  -I Protos $(find Protos -name '*.proto' | sort)
echo "generated: $(ls "$out" | tr '\n' ' ')"
