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

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || {
      apt-get update -qq >/dev/null && apt-get install -y -qq "${need[@]}" >/dev/null
    }
  else
    echo "setup: missing system packages: ${need[*]}" >&2
    echo "setup: install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi

command -v swift >/dev/null 2>&1 || { echo "setup: Swift 6 is required (https://swift.org/install)" >&2; exit 1; }
