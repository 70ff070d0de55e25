#!/bin/sh
# A stand-in for the `claude` CLI in agentd's tests (crates/cli/tests/cli/
# claude_code_failures.rs): it misbehaves on purpose, or hands over to the
# real CLI, one behaviour per start.
#
# agentd starts the CLI with a cleared environment, so a test points a model's
# `command` at a small wrapper that sets these and execs this script:
#   FAKE_CLAUDE_STATE  a directory; each start appends "<pid> <args>" to its
#                      `starts` file (the pid agentd started: the real CLI's
#                      for `real`, else this script's, the real CLI below it)
#   FAKE_CLAUDE_PLAN   behaviours by start, space-separated; the last repeats:
#                      real     exec the real CLI ($FAKE_CLAUDE_REAL)
#                      crash    relay the first turn to the real CLI; on the
#                               second user message stop it, print
#                               system/init and exit 3 (a crash mid-turn)
#                      notjson  the same, but print a non-JSON line and wait
#                               for stdin to close
#                      toolong  the same, but print a 65 MiB line
#                      slowflush  the real CLI, but its transcript reaches
#                               agentd's config dir 400 ms after each
#                               `result` line (a CLI slow to write it)
#   FAKE_CLAUDE_REAL   the real `claude`
# Every misbehaviour first writes FAKE-STDERR-<behaviour> to stderr.
set -u
state="${FAKE_CLAUDE_STATE:?}"
echo "$$ $*" >>"$state/starts"
n=$(wc -l <"$state/starts")
behaviour=""
i=0
for b in ${FAKE_CLAUDE_PLAN:?}; do
    i=$((i + 1))
    behaviour="$b"
    [ "$i" -ge "$n" ] && break
done

misbehave() {
    echo '{"type":"system","subtype":"init","session_id":"fake-'"$behaviour"'","model":"fake","tools":[],"mcp_servers":[]}'
    echo "fake-claude: about to misbehave" >&2
    echo "FAKE-STDERR-$behaviour" >&2
    case "$behaviour" in
    crash)
        exit 3
        ;;
    notjson)
        echo 'Error: this is not JSON {'
        ;;
    toolong)
        # 65 MiB, then a newline: over agentd's 64 MiB cap.
        head -c 68157440 /dev/zero | tr '\0' 'x'
        echo
        ;;
    esac
    # A real CLI in trouble may keep running: wait for agentd to close stdin.
    cat >/dev/null
    exit 0
}

case "$behaviour" in
real)
    exec "${FAKE_CLAUDE_REAL:?}" "$@"
    ;;
slowflush)
    # The real CLI writes into a shadow config dir, copied over late.
    target="${CLAUDE_CONFIG_DIR:?}"
    shadow="$state/shadow.$$"
    mkdir -p "$shadow"
    cp -a "$target/." "$shadow/"
    mkfifo "$state/out.$$"
    # (A background job's stdin is /dev/null unless given one.)
    exec 4<&0
    CLAUDE_CONFIG_DIR="$shadow" "${FAKE_CLAUDE_REAL:?}" "$@" <&4 >"$state/out.$$" &
    real=$!
    exec 4<&-
    while IFS= read -r line; do
        printf '%s\n' "$line"
        case "$line" in
        '{"type":"result"'*)
            (
                sleep 0.4
                mkdir -p "$target/projects"
                cp -a "$shadow/projects/." "$target/projects/"
            ) &
            ;;
        esac
    done <"$state/out.$$"
    wait "$real"
    ;;
crash | notjson | toolong)
    # Relay stdin to the real CLI until the second turn, and its stdout
    # through `cat`: the real CLI makes its stdout non-blocking, which would
    # be ours too if it inherited it.
    mkfifo "$state/in.$$" "$state/out.$$"
    cat "$state/out.$$" &
    relay=$!
    "${FAKE_CLAUDE_REAL:?}" "$@" <"$state/in.$$" >"$state/out.$$" &
    real=$!
    exec 3>"$state/in.$$"
    turns=0
    while IFS= read -r line; do
        case "$line" in
        *'"type":"user"'*) turns=$((turns + 1)) ;;
        esac
        if [ "$turns" -ge 2 ]; then
            exec 3>&-
            kill "$real" 2>/dev/null
            wait "$real" "$relay"
            misbehave
        fi
        printf '%s\n' "$line" >&3
    done
    exec 3>&-
    wait "$real" "$relay"
    ;;
*)
    echo "fake-claude: unknown behaviour $behaviour" >&2
    exit 2
    ;;
esac
