#!/usr/bin/env bash
# Installs what agentd's build, tests and sandbox need and the machine lacks.
# Debian packages come from apt (as root), among them chromium for the web
# UI's browser test; the claude CLI (a peer and test fixture), the
# TypeScript Agent SDK, the MCP test servers and playwright-core (drives that
# chromium; it never downloads a browser of its own) from npm into .tools/,
# and schemathesis (the OpenAPI test), the `anthropic` SDK (the /v1/messages
# test) and the Python Agent SDK from PyPI into the venv .tools/venv.
# Idempotent: a no-op when all is present. AGENTD_SKIP_CLAUDE=1 (`make run`)
# skips what only the tests and benchmarks need (the claude CLI, the SDKs,
# schemathesis).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# The egress allowlist tests run curl in the sandbox, with a certificate
# made by openssl.
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# The confinement race test swaps `.git` from inside a sandbox with python3.
[ -x /usr/bin/python3 ] || need_apt+=(python3)
# The `agentd chat` tests drive it in a real terminal: tmux.
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
# Its venv module, for schemathesis (tests only).
if [ "${AGENTD_SKIP_CLAUDE:-0}" != 1 ] && ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
  need_apt+=(python3-venv)
fi

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

# npm packages for .tools/: the claude CLI, the TypeScript Agent SDK (its test
# runs it with agentd as the CLI), the MCP servers the MCP tests run, and
# playwright-core for the web UI test. Pinned; one npm call for whatever is
# missing.
AGENT_SDK_TS_VERSION=0.3.332
MCP_EVERYTHING_VERSION=2026.8.31
MCP_FILESYSTEM_VERSION=2026.8.31
PLAYWRIGHT_CORE_VERSION=1.65.1
# The Agent Client Protocol client that drives `agentd acp` in its test.
ACP_SDK_VERSION=2.4.0
# The Vercel AI SDK (`ai`): its UI message stream reader drives the AI SDK test.
AI_SDK_VERSION=7.0.173
need_npm=()
if [ "${AGENTD_SKIP_CLAUDE:-0}" != 1 ] && [ ! -x .tools/node_modules/.bin/claude ]; then
  need_npm+=(@anthropic-ai/claude-code)
fi
# Installed version of a package in .tools, or nothing.
installed_version() {
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch {}' \
    "$PWD/.tools/node_modules/$1/package.json"
}
if [ "${AGENTD_SKIP_CLAUDE:-0}" != 1 ] &&
  [ "$(installed_version @anthropic-ai/claude-agent-sdk)" != "$AGENT_SDK_TS_VERSION" ]; then
  need_npm+=("@anthropic-ai/claude-agent-sdk@$AGENT_SDK_TS_VERSION")
fi
[ "$(installed_version @modelcontextprotocol/server-everything)" = "$MCP_EVERYTHING_VERSION" ] ||
  need_npm+=("@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION")
[ "$(installed_version @modelcontextprotocol/server-filesystem)" = "$MCP_FILESYSTEM_VERSION" ] ||
  need_npm+=("@modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION")
[ "$(installed_version playwright-core)" = "$PLAYWRIGHT_CORE_VERSION" ] ||
  need_npm+=("playwright-core@$PLAYWRIGHT_CORE_VERSION")
[ "$(installed_version @agentclientprotocol/sdk)" = "$ACP_SDK_VERSION" ] ||
  need_npm+=("@agentclientprotocol/sdk@$ACP_SDK_VERSION")
[ "$(installed_version ai)" = "$AI_SDK_VERSION" ] ||
  need_npm+=("ai@$AI_SDK_VERSION")

if [ ${#need_npm[@]} -gt 0 ]; then
  echo "install-deps: installing ${need_npm[*]} into .tools/" >&2
  mkdir -p .tools
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix .tools --save-exact --no-audit --no-fund --loglevel=error "${need_npm[@]}" >/dev/null
fi

# schemathesis for the OpenAPI test (crates/cli/tests/cli/schemathesis.rs),
# pinned, in its own venv; only the tests need it (`make run` skips it).
SCHEMATHESIS_VERSION=4.32.5
if [ "${AGENTD_SKIP_CLAUDE:-0}" != 1 ] &&
  [ "$(.tools/venv/bin/st --version 2>/dev/null)" != "st, version $SCHEMATHESIS_VERSION" ]; then
  echo "install-deps: installing schemathesis $SCHEMATHESIS_VERSION into .tools/venv" >&2
  mkdir -p .tools
  [ -x .tools/venv/bin/pip ] || /usr/bin/python3 -m venv .tools/venv
  .tools/venv/bin/pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# PyPI packages for .tools/venv, pinned; one pip call for whatever is
# missing: the official `anthropic` SDK, for the test of agentd's
# Anthropic-compatible /v1/messages (crates/cli/tests/cli/anthropic_api.rs),
# and the Python Agent SDK (crates/cli/tests/cli/agent_sdk.rs and the
# bench's bench/agent_sdk.py; ~400 MB, as its wheel bundles a claude binary).
ANTHROPIC_SDK_VERSION=2.14.0
AGENT_SDK_PY_VERSION=0.2.189
# Installed version of a package in .tools/venv, or nothing.
venv_version() {
  .tools/venv/bin/python -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' \
    "$1" 2>/dev/null || true
}
need_pip=()
if [ "${AGENTD_SKIP_CLAUDE:-0}" != 1 ]; then
  [ "$(venv_version anthropic)" = "$ANTHROPIC_SDK_VERSION" ] ||
    need_pip+=("anthropic==$ANTHROPIC_SDK_VERSION")
  [ "$(venv_version claude-agent-sdk)" = "$AGENT_SDK_PY_VERSION" ] ||
    need_pip+=("claude-agent-sdk==$AGENT_SDK_PY_VERSION")
fi
if [ ${#need_pip[@]} -gt 0 ]; then
  echo "install-deps: installing ${need_pip[*]} into .tools/venv" >&2
  mkdir -p .tools
  [ -x .tools/venv/bin/pip ] || /usr/bin/python3 -m venv .tools/venv
  .tools/venv/bin/python -m pip install --quiet --disable-pip-version-check "${need_pip[@]}"
fi
