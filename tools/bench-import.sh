#!/usr/bin/env bash
# The Apple Health import benchmark, with both parsers compared and a quarter of the file as
# well: `healthledger-bench import` through tools/bench.sh (which installs xmllint, Debian's
# libxml2-utils, the parsing reference, when missing). Arguments go to it, e.g.
# `tools/bench-import.sh --records 3500000`. The report (tools/bench.sh) has the import too.
set -euo pipefail
cd "$(dirname "$0")/.."
exec tools/bench.sh import "$@"
