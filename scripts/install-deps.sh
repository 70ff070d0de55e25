#!/usr/bin/env bash
# Installs what agentd's build, tests and sandbox need and the machine lacks.
# Debian packages come from apt (as root); the claude CLI (a peer and test
# fixture) from npm into .tools/. Idempotent: a no-op when all is present.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing ${need_apt[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "install-deps: missing ${need_apt[*]}; install them (e.g. sudo apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

if [ "${AGENTD_SKIP_CLAUDE:-0}" != 1 ] && [ ! -x .tools/node_modules/.bin/claude ]; then
  echo "install-deps: installing @anthropic-ai/claude-code into .tools/" >&2
  mkdir -p .tools
  npm install --prefix .tools --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code >/dev/null
fi
