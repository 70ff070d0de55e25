// One turn through the TypeScript Agent SDK's query() with agentd as the
// CLI (crates/cli/tests/cli/agent_sdk_ts.rs). Prints every SDK message as a
// JSON line on stdout; the test asserts on them.
//   AGENT_SDK_TS   the SDK's sdk.mjs
//   AGENTD_CLAUDE  the link named `claude` to the agentd binary
//   PROMPT, CWD    the turn's message and working directory
const sdk = await import(process.env.AGENT_SDK_TS);

const messages = sdk.query({
  prompt: process.env.PROMPT,
  options: {
    pathToClaudeCodeExecutable: process.env.AGENTD_CLAUDE,
    cwd: process.env.CWD,
    permissionMode: 'bypassPermissions',
    allowDangerouslySkipPermissions: true,
    // The CLI's stderr, for the test's failure message.
    stderr: (data) => process.stderr.write(data),
  },
});
for await (const message of messages) {
  process.stdout.write(JSON.stringify(message) + '\n');
}
