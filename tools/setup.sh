#!/usr/bin/env bash
# Installs the system packages HealthLedger needs, when they are missing.
# Used by tools/run-server.sh and tools/test.sh; safe to run repeatedly.
set -euo pipefail

need=()
[ -f /usr/include/lmdb.h ] || need+=(liblmdb-dev)
[ -f /usr/include/libxml2/libxml/parser.h ] || need+=(libxml2-dev)
[ -f /usr/include/protobuf-c/protobuf-c.h ] || need+=(libprotobuf-c-dev)
command -v protoc-c >/dev/null 2>&1 || need+=(protobuf-c-compiler)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v gcc >/dev/null 2>&1 || need+=(gcc)

. "$(dirname "$0")/apt.sh"
install_missing setup ${need[@]+"${need[@]}"}

command -v swift >/dev/null 2>&1 || { echo "setup: Swift 6 is required (https://swift.org/install)" >&2; exit 1; }
