#!/usr/bin/env bash
# Starts healthledgerd on its embedded default: LMDB under ./data (or $HEALTHLEDGER_DATA_DIR),
# encrypted at rest under the master key in $HEALTHLEDGER_MASTER_KEY_FILE, by default
# ~/.config/healthledger/master.key, made on first start (outside the data directory: keep it
# apart from the data and its backups). Pass --master-key-file to use another.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
swift build -c release --product healthledgerd
if [[ " $* " != *" --master-key-file"* ]]; then
    export HEALTHLEDGER_MASTER_KEY_FILE="${HEALTHLEDGER_MASTER_KEY_FILE:-${XDG_CONFIG_HOME:-$HOME/.config}/healthledger/master.key}"
    if [[ ! -e "$HEALTHLEDGER_MASTER_KEY_FILE" ]]; then
        mkdir -p -m 700 "$(dirname "$HEALTHLEDGER_MASTER_KEY_FILE")"
        # 32 random bytes as 64 hex digits, readable by its owner only (as `healthledger admin new-master-key` makes it).
        (umask 077 && od -An -vtx1 -N32 /dev/urandom | tr -d ' \n' > "$HEALTHLEDGER_MASTER_KEY_FILE" && echo >> "$HEALTHLEDGER_MASTER_KEY_FILE")
        echo "run-server.sh: made the master key $HEALTHLEDGER_MASTER_KEY_FILE; the ledgers are encrypted under it: keep it safe, apart from the data directory and its backups" >&2
    fi
fi
exec .build/release/healthledgerd "$@"
