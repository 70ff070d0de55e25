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

"$CARGO" test --workspace "$@"
