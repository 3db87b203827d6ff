#!/usr/bin/env bash
# Starts healthledgerd on its embedded default: LMDB under ./data (or $HEALTHLEDGER_DATA_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
swift build -c release --product healthledgerd
exec .build/release/healthledgerd "$@"
