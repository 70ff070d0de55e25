#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the store tests.
#
#   scripts/postgres.sh start   # install PostgreSQL if missing, start a cluster
#   scripts/postgres.sh stop    # stop it and remove its directory
#   scripts/postgres.sh env     # print the env file of the running cluster
#
# The cluster lives in a temp dir, listens on 127.0.0.1 on a free port (unix
# socket in the same dir) and trusts local connections. `start` prints and
# writes (to $AGENTD_PG_STATE/env) AGENTD_TEST_POSTGRES_URL=postgres://…/agentd_test.
# Running as root, the cluster belongs to the `postgres` user (initdb refuses
# root). Both commands are idempotent.
set -euo pipefail

STATE="${AGENTD_PG_STATE:-${TMPDIR:-/tmp}/agentd-test-postgres}"
DB=agentd_test

say() { echo "postgres.sh: $*" >&2; }

pg_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

install_postgres() {
    say "installing PostgreSQL (Debian package postgresql)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
}

# Run a command as the cluster's owner.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$OWNER" -- "$@"
    else
        "$@"
    fi
}

# A free port below the kernel's ephemeral range: a test that stops the
# cluster and starts it again on the same port (serve_db_down) must not find it
# taken meanwhile by another test's outgoing connection.
free_port() {
    local low
    low="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
    [ "$low" -gt 20000 ] 2>/dev/null || low=32768
    python3 - "$low" <<'EOF' 2>/dev/null && return 0
import random, socket, sys
low = int(sys.argv[1])
for _ in range(200):
    port = random.randrange(10000, low)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit(1)
EOF
    # No python: pick a random port in the same range that nothing listens on.
    local port
    for _ in $(seq 50); do
        port=$((10000 + RANDOM % (low - 10000)))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

is_running() {
    [ -f "$STATE/env" ] && [ -d "$STATE/data" ] || return 1
    local bin
    bin="$(pg_bindir)" || return 1
    as_owner "$bin/pg_ctl" -D "$STATE/data" status >/dev/null 2>&1
}

start() {
    local bin
    if ! bin="$(pg_bindir)"; then
        install_postgres
        bin="$(pg_bindir)" || { say "initdb/pg_ctl not found after installing"; exit 1; }
    fi
    OWNER="$(id -un)"
    if [ "$(id -u)" -eq 0 ]; then
        OWNER=postgres
        id "$OWNER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$OWNER"
    fi

    if is_running; then
        cat "$STATE/env"
        return 0
    fi
    # Left over from a run that died: start afresh.
    stop_quietly

    mkdir -p "$STATE"
    chmod 0755 "$STATE"
    [ "$(id -u)" -ne 0 ] || chown "$OWNER" "$STATE"
    local port
    port="$(free_port)"
    as_owner "$bin/initdb" -D "$STATE/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 --no-sync >"$STATE/initdb.log" 2>&1 \
        || as_owner "$bin/initdb" -D "$STATE/data" -U postgres -A trust -E UTF8 \
            --locale=C --no-sync >"$STATE/initdb.log" 2>&1 \
        || { cat "$STATE/initdb.log" >&2; exit 1; }
    # Speed over durability: the cluster is thrown away after the tests.
    as_owner "$bin/pg_ctl" -D "$STATE/data" -l "$STATE/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $STATE -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
        start >/dev/null \
        || { cat "$STATE/server.log" >&2; exit 1; }
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAt \
        -c "CREATE DATABASE $DB" >/dev/null
    local url="postgres://postgres@127.0.0.1:$port/$DB"
    echo "AGENTD_TEST_POSTGRES_URL=$url" >"$STATE/env"
    chmod 0644 "$STATE/env"
    cat "$STATE/env"
}

stop_quietly() {
    local bin
    if [ -d "$STATE/data" ] && bin="$(pg_bindir)"; then
        OWNER="$(stat -c %U "$STATE/data")"
        as_owner "$bin/pg_ctl" -D "$STATE/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$STATE"
}

case "${1:-}" in
start) start ;;
stop) stop_quietly ;;
env) cat "$STATE/env" ;;
*)
    echo "usage: $0 start|stop|env" >&2
    exit 2
    ;;
esac
