#!/usr/bin/env bash
# Runs the whole test suite (installing missing system packages first).
#
# Tests run one at a time: many start a server (and some child processes) of their own, and
# on a two-core machine tests run side by side starve each other past their calls'
# deadlines. Serially the suite takes about a minute and a half here.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh

# The real clients and components the tests drive: a gRPC client in another language
# (Tests/GRPCClients: Python's grpcio with its code generator, health and reflection clients),
# a browser on the owner's web app (Tests/WebClients: headless Chromium through Selenium), and
# etcd under a cluster of servers (ClusterTests starts three members on loopback).
. tools/apt.sh
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ -x /usr/bin/etcd ] || [ -x /usr/local/bin/etcd ] || missing+=(etcd-server)
install_missing test.sh ${missing[@]+"${missing[@]}"}
python_packages=(grpcio grpcio-tools grpcio-health-checking grpcio-reflection selenium)
if ! python3 -c "import grpc, grpc_tools, grpc_health, grpc_reflection, selenium" 2>/dev/null; then
    command -v python3 >/dev/null 2>&1 || install_missing test.sh python3
    python3 -m pip --version >/dev/null 2>&1 || install_missing test.sh python3-pip
    echo "test.sh: installing ${python_packages[*]} from PyPI" >&2
    # Debian marks its Python as managed by apt; these packages are for the tests alone.
    python3 -m pip install --quiet --break-system-packages "${python_packages[@]}" 2>/dev/null ||
        python3 -m pip install --quiet "${python_packages[@]}"
fi

swift build --build-tests
swift test --skip-build --no-parallel "$@"
[[ $# -gt 0 ]] && exit 0

# The encrypted pass: the server and command-line suites again, every ledger encrypted at rest
# under one master key (the tests' servers and the tools they start read it from
# HEALTHLEDGER_MASTER_KEY_FILE). Left out: the suites that make their own keys or clear
# ledgers on purpose, and the one test that rewrites a clear log's bytes in place.
key_dir=$(mktemp -d)
trap 'rm -rf "$key_dir"' EXIT
.build/debug/healthledger admin new-master-key "$key_dir/master.key" >/dev/null
echo "test.sh: the encrypted pass (RPCTests with HEALTHLEDGER_MASTER_KEY_FILE)"
HEALTHLEDGER_MASTER_KEY_FILE="$key_dir/master.key" swift test --skip-build --no-parallel --filter RPCTests \
    --skip 'EncryptionTests|LegacyLedgerTests|TreeHeadTests/rewrittenHistory'
