#!/usr/bin/env node
// A tiny MCP stdio server for agentd's tests (no dependencies): tools that
// echo, crash, hang, read the environment and try the network.
//   node fixture-server.mjs [--startup-delay-ms N]
// It writes `fixture-started-<id>` into its working directory when it starts
// and `fixture-exited-<id>` when its stdin closes, so tests can see restarts
// and polite shutdowns.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import net from "node:net";
import readline from "node:readline";

const instance = randomUUID().slice(0, 8);
const delayAt = process.argv.indexOf("--startup-delay-ms");
const startupDelayMs = delayAt > 0 ? Number(process.argv[delayAt + 1]) : 0;
const cancelled = [];

console.error(`fixture ${instance}: started, startup delay ${startupDelayMs} ms`);
writeFileSync(`fixture-started-${instance}`, "");

const tools = [
  {
    name: "echo",
    description: "Echo the text back.",
    inputSchema: {
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
    },
    annotations: { readOnlyHint: true },
  },
  { name: "instance", description: "This process's id.", inputSchema: { type: "object" } },
  { name: "crash", description: "Exit at once.", inputSchema: { type: "object" } },
  { name: "hang", description: "Never answer.", inputSchema: { type: "object" } },
  {
    name: "cancellations",
    description: "Request ids the client cancelled.",
    inputSchema: { type: "object" },
  },
  {
    name: "env",
    description: "The value of an environment variable.",
    inputSchema: { type: "object", properties: { name: { type: "string" } } },
  },
  {
    name: "connect",
    description: "Try a TCP connection.",
    inputSchema: {
      type: "object",
      properties: { host: { type: "string" }, port: { type: "number" } },
    },
  },
];

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const text = (id, value, isError = false) =>
  send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: value }], isError } });

function connect(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(2000);
    socket.on("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.on("timeout", () => {
      socket.destroy();
      resolve("error: timeout");
    });
    socket.on("error", (err) => resolve(`error: ${err.code || err.message}`));
  });
}

async function callTool(id, name, args) {
  switch (name) {
    case "echo":
      return text(id, `echo: ${args.text}`);
    case "instance":
      return text(id, instance);
    case "crash":
      console.error(`fixture ${instance}: crashing on purpose`);
      process.exit(3);
      return;
    case "hang":
      console.error(`fixture ${instance}: hanging`);
      return;
    case "cancellations":
      return text(id, JSON.stringify(cancelled));
    case "env":
      return text(id, process.env[args.name] ?? "(unset)");
    case "connect":
      return text(id, await connect(args.host, args.port));
    default:
      return send({ jsonrpc: "2.0", id, error: { code: -32602, message: `unknown tool ${name}` } });
  }
}

async function handle(message) {
  const { id, method, params } = message;
  switch (method) {
    case "initialize":
      if (startupDelayMs > 0) await new Promise((done) => setTimeout(done, startupDelayMs));
      return send({
        jsonrpc: "2.0",
        id,
        result: {
          protocolVersion: params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "agentd-fixture", version: "1.0.0" },
        },
      });
    case "notifications/cancelled":
      cancelled.push(params.requestId);
      return;
    case "ping":
      return send({ jsonrpc: "2.0", id, result: {} });
    case "tools/list":
      return send({ jsonrpc: "2.0", id, result: { tools } });
    case "tools/call":
      return callTool(id, params.name, params.arguments ?? {});
    default:
      if (id !== undefined) {
        send({ jsonrpc: "2.0", id, error: { code: -32601, message: `no method ${method}` } });
      }
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (line.trim()) handle(JSON.parse(line));
});
lines.on("close", () => {
  writeFileSync(`fixture-exited-${instance}`, "");
  process.exit(0);
});
