"""An Agent SDK app, as people write them, run with agentd as its CLI.

`driver.py SCENARIO` runs one scenario with the Python `claude-agent-sdk`
(`cli_path` = $AGENTD_CLAUDE, `cwd` = $WORKSPACE) and prints every message
the SDK hands the app as a JSON line: {"turn": N, "class": ..., "data": ...}.
What callbacks saw is printed as {"callback": ..., ...} lines.
"""

import asyncio
import dataclasses
import json
import os
import sys

from claude_agent_sdk import (
    AgentDefinition,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    create_sdk_mcp_server,
    query,
    tool,
)
from claude_agent_sdk.types import PermissionResultAllow, PermissionResultDeny


def emit(**fields):
    print(json.dumps(fields, default=str), flush=True)


def show(turn, message):
    data = dataclasses.asdict(message) if dataclasses.is_dataclass(message) else message
    emit(turn=turn, **{"class": type(message).__name__, "data": data})


def options(**extra):
    return ClaudeAgentOptions(
        cli_path=os.environ["AGENTD_CLAUDE"], cwd=os.environ["WORKSPACE"], **extra
    )


async def one_message(text):
    yield {"type": "user", "message": {"role": "user", "content": text}}


async def run_query(prompt, **extra):
    try:
        async for message in query(prompt=one_message(prompt), options=options(**extra)):
            show(1, message)
    except Exception as error:  # as the app would see a failed run
        emit(raised=type(error).__name__, message=str(error))


async def scenario_query():
    mode = os.environ.get("PERMISSION_MODE")
    await run_query(os.environ["PROMPT"], permission_mode=mode)


async def scenario_client():
    async with ClaudeSDKClient(options(include_partial_messages=True)) as client:
        for turn, prompt in [(1, "first turn"), (2, "second turn")]:
            await client.query(prompt)
            async for message in client.receive_response():
                show(turn, message)
        await client.query("slow turn")
        interrupted = False
        async for message in client.receive_response():
            show(3, message)
            # Stop it once the answer is under way.
            if not interrupted and type(message).__name__ == "StreamEvent":
                interrupted = True
                await client.interrupt()
                emit(callback="interrupt")


async def scenario_mode():
    """The first question switches the session to bypassPermissions, as a
    "don't ask again" button would: later calls of the same turn run."""
    holder = {}

    async def can_use_tool(name, tool_input, context):
        emit(callback="can_use_tool", tool=name, input=tool_input)
        await holder["client"].set_permission_mode("bypassPermissions")
        return PermissionResultAllow()

    async with ClaudeSDKClient(options(can_use_tool=can_use_tool)) as client:
        holder["client"] = client
        await client.query(os.environ["PROMPT"])
        async for message in client.receive_response():
            show(1, message)


async def scenario_permissions():
    async def can_use_tool(name, tool_input, context):
        command = tool_input.get("command", "")
        emit(callback="can_use_tool", tool=name, input=tool_input)
        if "rm " in command:
            return PermissionResultDeny(message="no deleting in this app")
        if "original" in command:
            rewritten = dict(tool_input, command=command.replace("original", "rewritten"))
            return PermissionResultAllow(updated_input=rewritten)
        return PermissionResultAllow()

    await run_query(os.environ["PROMPT"], can_use_tool=can_use_tool)


async def scenario_ask():
    """A callback that answers the agent's question, and stops the turn
    with its deny of the next call."""
    async def can_use_tool(name, tool_input, context):
        emit(callback="can_use_tool", tool=name, input=tool_input)
        if name == "AskUserQuestion":
            question = tool_input["questions"][0]["question"]
            return PermissionResultAllow(
                updated_input=dict(tool_input, answers={question: "Blue"}))
        return PermissionResultDeny(message="stop here", interrupt=True)

    await run_query(os.environ["PROMPT"], can_use_tool=can_use_tool)


async def scenario_hook():
    async def guard(hook_input, tool_use_id, context):
        emit(callback="PreToolUse", tool=hook_input.get("tool_name"),
             input=hook_input.get("tool_input"), tool_use_id=tool_use_id)
        if "forbidden" in json.dumps(hook_input.get("tool_input")):
            return {"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "the app's hook refuses this",
            }}
        return {}

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}
    await run_query(os.environ["PROMPT"], hooks=hooks, permission_mode="bypassPermissions")


async def scenario_mcp():
    @tool("add", "Add two integers", {"a": int, "b": int})
    async def add(args):
        emit(callback="add", args=args)
        return {"content": [{"type": "text", "text": f"the sum is {args['a'] + args['b']}"}]}

    server = create_sdk_mcp_server("calc", tools=[add])
    await run_query(os.environ["PROMPT"], mcp_servers={"calc": server},
                    allowed_tools=["mcp__calc__add"])


async def scenario_agents():
    reviewer = AgentDefinition(description="Reviews a change",
                               prompt="You are the REVIEWER defined by the app.", tools=["Read"])
    await run_query(os.environ["PROMPT"], agents={"reviewer": reviewer},
                    permission_mode="bypassPermissions")


async def scenario_resume():
    await run_query(os.environ["PROMPT"], resume=os.environ["RESUME"])


SCENARIOS = {
    "query": scenario_query,
    "client": scenario_client,
    "permissions": scenario_permissions,
    "hook": scenario_hook,
    "ask": scenario_ask,
    "mode": scenario_mode,
    "mcp": scenario_mcp,
    "resume": scenario_resume,
    "agents": scenario_agents,
}

if __name__ == "__main__":
    asyncio.run(SCENARIOS[sys.argv[1]]())
