#!/usr/bin/env bash
# Runs the whole test suite (installing missing system packages first).
#
# Tests run one at a time: many start a server (and some child processes) of their own, and
# on a two-core machine tests run side by side starve each other past their calls'
# deadlines. Serially the suite takes about a minute and a half here.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
swift build --build-tests
exec swift test --skip-build --no-parallel "$@"
