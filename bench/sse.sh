#!/usr/bin/env bash
# SSE load on `agentd serve` (bench/RESULTS.md, "SSE streams"): idle streams held
# open and RSS per stream, then events/s and append-to-delivery latency.
# Usage: bench/sse.sh [--streams N] [--parallel P] [--clients K] [--calls C]
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stream is a socket in this process and one in the server.
ulimit -n "$(ulimit -Hn)"
cargo build --release -p agentd-cli -p agentd-testkit -p agentd-bench
exec target/release/sse --agentd target/release/agentd "$@"
