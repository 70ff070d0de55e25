# The two commands of the README. Both install what is missing first.
CARGO ?= cargo
BIND ?= 127.0.0.1:7878

.PHONY: run test deps build check bench

deps:
	@AGENTD_SKIP_CLAUDE=$(if $(filter run,$(MAKECMDGOALS)),1,0) ./scripts/install-deps.sh

build:
	$(CARGO) build --release -p agentd-cli

run: deps build
	BIND=$(BIND) ./scripts/run.sh

check:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# A clean build with incremental caches is twice the size (5.2 GiB against
# 2.4 GiB for the whole test build) and no faster; CI always builds clean.
# Set CARGO_INCREMENTAL=1 in the environment to keep them.
CARGO_INCREMENTAL ?= 0
check test: export CARGO_INCREMENTAL := $(CARGO_INCREMENTAL)

# The store tests run against SQLite and a throwaway PostgreSQL that
# scripts/test.sh starts (installing PostgreSQL if missing) and stops.
test: deps check
	CARGO=$(CARGO) ./scripts/test.sh

# Release-mode benchmarks; figures and commands are recorded in bench/RESULTS.md.
# `peer` compares agentd with the claude CLI (installed by deps), directly and
# as the Python Agent SDK's CLI, and rewrites the "Peer comparison" and
# "Agent SDK: agentd as the CLI" sections of bench/RESULTS.md; `cluster` prints fan-out
# across 1 and 3 nodes on a throwaway PostgreSQL.
bench: deps
	$(CARGO) build --release -p agentd-cli -p agentd-testkit -p agentd-bench
	./target/release/turns 100
	CARGO=$(CARGO) ./bench/peer.sh --write-results
	CARGO=$(CARGO) ./bench/cluster.sh
