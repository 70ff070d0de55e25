// Drives `agentd acp` with the real ACP client (@agentclientprotocol/sdk):
// one connection runs three prompts (an edit and a command allowed once, a
// write rejected, a command cancelled mid-turn), then sets the `plan` mode
// (a write tried under it) and another model (a last prompt); a second
// connection loads the session. Prints what it sees as JSON lines for crates/cli/tests/cli/acp.rs.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const acp = await import(process.env.ACP_SDK);
const out = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const answers = process.env.ANSWERS.split(",");
const cwd = process.env.CWD;
let phase = "setup";

function start() {
  const child = spawn(process.env.AGENTD, ["acp"], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  return { child, exited, stream };
}

function editor() {
  return acp
    .client({ name: "agentd-acp-test" })
    .onNotification(acp.methods.client.session.update, async ({ params, agent }) => {
      out({ kind: "update", phase, update: params.update });
      // Cancel once the command is running.
      const update = params.update;
      if (phase === "cancel" && update.sessionUpdate === "tool_call_update" && update.status === "in_progress") {
        await agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
      }
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      const optionId = answers.shift();
      out({ kind: "permission", phase, request: params, answer: optionId });
      return { outcome: { outcome: "selected", optionId } };
    });
}

const initialize = (ctx) =>
  ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
  });

const first = start();
const sessionId = await editor().connectWith(first.stream, async (ctx) => {
  out({ kind: "initialize", result: await initialize(ctx) });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  out({ kind: "new", result: session });
  for (const [name, text] of [["edit", "edit and run"], ["reject", "write the secret"], ["cancel", "sleep now"]]) {
    phase = name;
    const result = await ctx.request(acp.methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: [{ type: "text", text }],
    });
    out({ kind: "stop", phase, result });
  }
  const sessionId = session.sessionId;
  const prompt = async (text) =>
    out({ kind: "stop", phase, result: await ctx.request(acp.methods.agent.session.prompt, {
      sessionId, prompt: [{ type: "text", text }] }) });
  // A mode looser than the profile's is refused; `plan` is taken.
  phase = "plan";
  const looser = await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "bypassPermissions" })
    .then(() => null, (error) => JSON.stringify(error));
  out({ kind: "looser", phase, error: looser });
  out({ kind: "set_mode", phase, result: await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "plan" }) });
  await prompt("plan the note");
  phase = "model";
  const chosen = { sessionId, configId: "model", value: process.env.MODEL };
  out({ kind: "set_model", phase, result: await ctx.request(acp.methods.agent.session.setConfigOption, chosen) });
  await prompt("which model");
  // The agent's question comes as a permission request with its options.
  phase = "question";
  await prompt("ask me");
  return sessionId;
});
first.child.stdin.end();
out({ kind: "exit", code: await first.exited });

const second = start();
await editor().connectWith(second.stream, async (ctx) => {
  await initialize(ctx);
  phase = "load";
  const result = await ctx.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
  out({ kind: "loaded", result });
});
second.child.stdin.end();
out({ kind: "exit", code: await second.exited });
