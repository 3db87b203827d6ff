#!/usr/bin/env bash
# The benchmark report (BENCHMARKS.md): installs what the peers and the reference need when
# missing (PostgreSQL, libpq-dev, libsqlite3-dev, xmllint, the import's parsing reference, and
# etcd for the failover benchmark; gcc and liblmdb-dev come with setup.sh),
# builds healthledgerd and the benchmark package (Benchmarks/) in release, and runs
# `healthledger-bench`. Arguments go to it:
#   tools/bench.sh                          the full report, printed
#   tools/bench.sh --quick                  a short run (under two minutes once built)
#   tools/bench.sh --write BENCHMARKS.md    the full report, written with its plot
#   tools/bench.sh ledger --only history    the ledger-only scenarios
# Run from anywhere; the reference script is ../shared/tools/limits.sh from the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh

need=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/include/postgresql/libpq-fe.h ] || need+=(libpq-dev)
[ -f /usr/include/sqlite3.h ] || need+=(libsqlite3-dev)
command -v xmllint >/dev/null 2>&1 || need+=(libxml2-utils)
[ -x /usr/bin/etcd ] || [ -x /usr/local/bin/etcd ] || need+=(etcd-server)
. tools/apt.sh
install_missing bench ${need[@]+"${need[@]}"}
# Debian's postgresql package starts a cluster of its own; the benchmark starts a throw-away
# one and needs none running.

swift build -c release --product healthledgerd
swift build -c release --product healthledger
swift build -c release --package-path Benchmarks --product healthledger-bench
exec Benchmarks/.build/release/healthledger-bench "$@"
