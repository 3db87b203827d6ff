#!/usr/bin/env bash
# Runs the whole test suite (installing missing system packages first).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
swift build --build-tests
exec swift test --skip-build "$@"
