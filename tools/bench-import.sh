#!/usr/bin/env bash
# The Apple Health import benchmark: installs xmllint (Debian's libxml2-utils, the parsing
# reference) when missing, and runs `healthledger-bench import` through tools/bench.sh.
# Arguments go to it, e.g. `tools/bench-import.sh --records 3500000`.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/apt.sh
command -v xmllint >/dev/null 2>&1 || install_missing bench-import libxml2-utils
exec tools/bench.sh import "$@"
