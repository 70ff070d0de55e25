#!/usr/bin/env bash
# `make run`: start agentd serve on embedded SQLite. On the first run it makes an
# API token for you (printed once; only its hash is stored) so the API is usable
# at once. Everything else comes from agentd.toml / AGENTD_* as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
agentd=./target/release/agentd
bind=${BIND:-127.0.0.1:7878}

if [ -z "$("$agentd" tokens ls 2>/dev/null | tail -n +2)" ]; then
  user=${USER:-$(id -un)}
  token=$("$agentd" tokens create --user "$user" --name make-run 2>/dev/null)
  echo "agentd: created an API token for user $user (shown only now):"
  echo "    $token"
  echo "agentd: try: curl -H 'Authorization: Bearer $token' http://$bind/v1/sessions"
fi
echo "agentd: serving http://$bind (API spec at http://$bind/openapi.json)"
exec "$agentd" serve --bind "$bind"
