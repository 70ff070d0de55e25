#!/usr/bin/env bash
# agentd vs the `claude` CLI on the same scripted conversation (bench/RESULTS.md,
# "Peer comparison"), and both as the Python Agent SDK's CLI ("Agent SDK:
# agentd as the CLI"). Installs the CLI and the SDK into .tools/ if missing,
# builds release binaries, then runs target/release/peer with the given flags, e.g.
#   bench/peer.sh --write-results     # the full comparison, recorded in RESULTS.md
#   bench/peer.sh --only sdk --write-results   # the Agent SDK section alone
#   bench/peer.sh --smoke             # tiny run to keep the harness working
#   bench/peer.sh --only cluster      # cross-node delivery and failover (PostgreSQL)
set -euo pipefail
cd "$(dirname "$0")/.."
if { [ ! -x .tools/node_modules/.bin/claude ] && [ -z "${AGENTD_CLAUDE_BIN:-}" ]; } ||
  ! .tools/venv/bin/python -c 'import claude_agent_sdk' 2>/dev/null; then
  ./scripts/install-deps.sh
fi
CARGO=${CARGO:-cargo}
"$CARGO" build --release -p agentd-cli -p agentd-testkit -p agentd-bench
# The cluster rows run several nodes on a throwaway PostgreSQL (as
# bench/cluster.sh), unless a database is given or `--only` leaves them out.
wants_cluster=1
prev=
for arg in "$@"; do
  if [ "$prev" = --only ] && [[ ",$arg," != *,cluster,* ]]; then wants_cluster=0; fi
  prev=$arg
done
if [ "$wants_cluster" = 1 ] && [ -z "${AGENTD_TEST_POSTGRES_URL:-}" ]; then
  export AGENTD_PG_STATE="${TMPDIR:-/tmp}/agentd-peer-postgres.$$"
  trap 'scripts/postgres.sh stop' EXIT
  env_line="$(scripts/postgres.sh start)"
  export "${env_line?}"
fi
# 10 000 SSE streams need two sockets each on this machine (client and server).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
"${CARGO_TARGET_DIR:-target}/release/peer" "$@"
