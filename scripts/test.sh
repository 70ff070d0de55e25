#!/usr/bin/env bash
# `make test`'s cargo step: start a throwaway PostgreSQL (scripts/postgres.sh),
# run the workspace tests with AGENTD_TEST_POSTGRES_URL pointing at it, and
# stop it afterwards, whether the tests pass or not.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"

# One cluster per run, so concurrent runs do not share one.
export AGENTD_PG_STATE="${TMPDIR:-/tmp}/agentd-test-postgres.$$"
trap 'scripts/postgres.sh stop' EXIT
trap 'exit 130' INT TERM

started=$(date +%s)
env_line="$(scripts/postgres.sh start)"
export "${env_line?}"
echo "test.sh: PostgreSQL for the tests at ${AGENTD_TEST_POSTGRES_URL} ($(($(date +%s) - started))s to start)" >&2

# Keep cargo's output and end with one total line, so the last line says how
# many tests ran (cargo's own last line is the doc tests' count, often 0).
log="$(mktemp)"
trap 'scripts/postgres.sh stop; rm -f "$log"' EXIT
status=0
"$CARGO" test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
sum() { grep -oE "[0-9]+ $1" "$log" | awk '{ total += $1 } END { print total + 0 }'; }
passed=$(sum passed)
failed=$(sum failed)
# The web UI's unit tests (node's test runner; the browser tests are in cargo's).
if [ $# -eq 0 ]; then
  node_log="$(mktemp)"
  node --test web/test/ 2>&1 | tee "$node_log" || status=1
  passed=$((passed + $(awk '/^# pass /{print $3}' "$node_log")))
  failed=$((failed + $(awk '/^# fail /{print $3}' "$node_log")))
  rm -f "$node_log"
fi
# The peer benchmark's smoke run, so the harness does not rot (numbers ignored);
# `--compare` with the same build runs the cold scenario's A/B path too.
if [ $# -eq 0 ]; then
  if "$CARGO" build -q -p agentd-testkit --bin agentd-model-server -p agentd-bench --bin peer && target/debug/peer --smoke --compare target/debug/agentd > /dev/null; then
    echo "test.sh: bench smoke run (target/debug/peer --smoke --compare) ok"
    passed=$((passed + 1))
  else
    echo "test.sh: bench smoke run (target/debug/peer --smoke --compare) FAILED" >&2
    failed=$((failed + 1))
    status=1
  fi
fi
# The cluster fan-out benchmark's smoke run (1 and 3 nodes on the test PostgreSQL).
if [ $# -eq 0 ]; then
  if "$CARGO" build -q -p agentd-testkit --bin agentd-model-server -p agentd-bench --bin cluster \
    && target/debug/cluster --agentd target/debug/agentd --smoke > /dev/null; then
    echo "test.sh: bench smoke run (target/debug/cluster --smoke) ok"
    passed=$((passed + 1))
  else
    echo "test.sh: bench smoke run (target/debug/cluster --smoke) FAILED" >&2
    failed=$((failed + 1))
    status=1
  fi
fi
echo "tests: $passed passed, $failed failed"
exit "$status"
