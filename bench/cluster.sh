#!/usr/bin/env bash
# Fan-out across cluster nodes (bench/RESULTS.md, "Cluster"): starts a
# throwaway PostgreSQL (scripts/postgres.sh), builds release binaries and runs
# target/release/cluster with the given flags, e.g.
#   bench/cluster.sh                       # 1 vs 3 nodes, the recorded run
#   bench/cluster.sh --nodes 1,2,3 --sessions 60
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
export AGENTD_PG_STATE="${TMPDIR:-/tmp}/agentd-bench-postgres.$$"
trap 'scripts/postgres.sh stop' EXIT
env_line="$(scripts/postgres.sh start)"
export "${env_line?}"
"$CARGO" build --release -p agentd-cli -p agentd-testkit -p agentd-bench
target_dir=${CARGO_TARGET_DIR:-target}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
"$target_dir/release/cluster" --agentd "$target_dir/release/agentd" "$@"
