"""The Python Agent SDK driving each CLI it is given on the bench script
(bench/src/peer/sdk.rs runs it with .tools/venv/bin/python; bench/RESULTS.md,
"Agent SDK: agentd as the CLI").

    agent_sdk.py --cli NAME=PATH [--cli NAME=PATH …] --cwd DIR --model-url URL
                 [--runs N] [--turns N]

cold: `query()` from the call to its `Result` message (the SDK starts the CLI,
the CLI runs the whole turn), N runs per CLI interleaved, after one unmeasured
run each. warm: one `ClaudeSDKClient`, turns 1..N after an unmeasured turn 0,
each from `query()` to its `Result`; host time is that minus the model
server's busy time over the turn (its `GET /_testkit/stats`). Prints one JSON
object: {NAME: {"cold_ms": [...], "warm_ms": [...], "warm_host_ms": [...],
"requests_per_turn": R}, "sdk_version": V}.
"""

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path

import claude_agent_sdk
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, query

# The file every turn of bench/src/peer/processes.rs's script edits.
FILE = "src/main.txt"


def options(cli, cwd):
    return ClaudeAgentOptions(
        cli_path=cli, cwd=cwd, permission_mode="bypassPermissions"
    )


def model_stats(url):
    with urllib.request.urlopen(f"{url}/_testkit/stats") as response:
        return json.load(response)


def check(name, result, before, cwd):
    """The turn ran the whole script: the model's last reply, and the edit."""
    if not isinstance(result, ResultMessage) or result.is_error:
        sys.exit(f"{name}: the turn did not succeed: {result!r}")
    if "BENCH-DONE" not in (result.result or ""):
        sys.exit(f"{name}: the turn did not finish the script: {result.result!r}")
    if (Path(cwd) / FILE).read_text() == before:
        sys.exit(f"{name}: the turn did not edit {FILE}")


async def cold_one(name, cli, cwd):
    before = (Path(cwd) / FILE).read_text()
    started = time.perf_counter()
    elapsed, result = None, None
    async for message in query(prompt="bench turn", options=options(cli, cwd)):
        if isinstance(message, ResultMessage) and elapsed is None:
            elapsed = time.perf_counter() - started
            result = message
    check(name, result, before, cwd)
    return elapsed * 1000


async def warm(name, cli, cwd, url, turns):
    walls, hosts, requests = [], [], 0
    async with ClaudeSDKClient(options=options(cli, cwd)) as client:
        for turn in range(turns + 1):
            before = (Path(cwd) / FILE).read_text()
            stats = model_stats(url)
            started = time.perf_counter()
            await client.query(f"bench turn {turn}")
            result = None
            async for message in client.receive_response():
                if isinstance(message, ResultMessage):
                    result = message
            wall = time.perf_counter() - started
            after = model_stats(url)
            check(name, result, before, cwd)
            if turn > 0:
                busy = (after["busy_ns"] - stats["busy_ns"]) / 1e9
                walls.append(wall * 1000)
                hosts.append(max(wall - busy, 0) * 1000)
                requests += after["requests"] - stats["requests"]
    return walls, hosts, requests / max(turns, 1)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", action="append", required=True, help="NAME=PATH")
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    clis = dict(spec.split("=", 1) for spec in args.cli)
    out = {name: {"cold_ms": []} for name in clis}
    for run in range(args.runs + 1):
        for name, cli in clis.items():
            ms = await cold_one(name, cli, args.cwd)
            if run > 0:
                out[name]["cold_ms"].append(ms)
    for name, cli in clis.items():
        walls, hosts, per_turn = await warm(
            name, cli, args.cwd, args.model_url, args.turns
        )
        out[name].update(warm_ms=walls, warm_host_ms=hosts, requests_per_turn=per_turn)
    out["sdk_version"] = claude_agent_sdk.__version__
    print(json.dumps(out))


asyncio.run(main())
