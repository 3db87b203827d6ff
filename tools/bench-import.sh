#!/usr/bin/env bash
# The Apple Health import benchmark: installs xmllint (Debian's libxml2-utils, the parsing
# reference) when missing, and runs `healthledger-bench import` through tools/bench.sh.
# Arguments go to it, e.g. `tools/bench-import.sh --records 3500000`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v xmllint >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq libxml2-utils >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq libxml2-utils >/dev/null; }
  else
    echo "bench-import: install xmllint with: sudo apt-get install -y libxml2-utils" >&2
    exit 1
  fi
fi
exec tools/bench.sh import "$@"
