// Web UI render bench: how long a browser takes from navigation to a long
// conversation fully rendered (every event applied, markdown rendered).
//
//   cargo build -p agentd-cli && node bench/ui-render.mjs [turns] [steps per turn]
//
// Builds a session through the API against the scripted model server —
// `turns` turns of `steps` model calls, each a short markdown reply with a
// code span and a sandboxed Bash call (~7 events a step) — then loads it in
// headless chromium 5 times and prints the median. Needs what the UI's e2e
// test needs (chromium, .tools/node_modules/playwright-core).
// CPUPROFILE=file.cpuprofile saves a CPU profile of the last run (DevTools format).

import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServers } from '../web/e2e/harness.mjs';
import { launch } from '../web/e2e/browser.mjs';

const TURNS = Number(process.argv[2] || 8);
const STEPS = Number(process.argv[3] || 41);
const RUNS = 5;

function script() {
  const replies = [];
  for (let t = 0; t < TURNS; t++) {
    for (let s = 0; s < STEPS; s++) {
      const when = s === 0 ? { last_user_contains: `BENCH-TURN-${t} ` } : { last_tool_result_contains: `t${t}-s${s - 1}-done` };
      replies.push({
        when,
        content: [
          { type: 'text', text: `Step **${s}** of turn ${t}: checking \`src/module_${s}.rs\` and running the next command.\n\n- it compiles\n- it has tests` },
          { type: 'tool_use', name: 'Bash', input: { command: `echo t${t}-s${s}-done` } },
        ],
      });
    }
    replies.push({
      when: { last_tool_result_contains: `t${t}-s${STEPS - 1}-done` },
      content: [{ type: 'text', text: `## Turn ${t} done\n\n\`\`\`rust\nfn main() {\n    println!("turn ${t}");\n}\n\`\`\`\n\nAll ${STEPS} steps passed.` }],
    });
  }
  return { replies };
}

const toml = `[server]
auth = "none"
[models.default]
provider = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{URL}"
[profiles.default]
mode = "bypass"
max_turns = ${STEPS + 5}
`;

async function call(base, method, path, body) {
  const response = await fetch(base + path, {
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response.status === 204 ? null : response.json();
}

async function waitIdle(base, id) {
  for (;;) {
    const session = await call(base, 'GET', `/v1/sessions/${id}`);
    if (session.status === 'idle' && session.queued_turns === 0) return session;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const dir = mkdtempSync(join(tmpdir(), 'agentd-ui-bench-'));
const scriptPath = join(dir, 'script.json');
writeFileSync(scriptPath, JSON.stringify(script()));
const servers = await startServers({ scriptPath, toml, log: 'warn' });
let browser;
try {
  const base = servers.url;
  const session = await call(base, 'POST', '/v1/sessions', { title: 'UI render bench' });
  const built = Date.now();
  for (let t = 0; t < TURNS; t++) {
    await call(base, 'POST', `/v1/sessions/${session.id}/messages`, { content: `BENCH-TURN-${t} go` });
    await waitIdle(base, session.id);
  }
  const { last_seq: events } = await waitIdle(base, session.id);
  console.log(`session: ${TURNS} turns × ${STEPS} steps = ${events} events (built in ${((Date.now() - built) / 1000).toFixed(1)} s)`);

  browser = await launch();
  const { page } = browser;
  const times = [];
  for (let run = 0; run < RUNS; run++) {
    await page.goto('about:blank');
    let cdp;
    if (process.env.CPUPROFILE && run === RUNS - 1) {
      cdp = await page.context().newCDPSession(page);
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.setSamplingInterval', { interval: 100 });
      await cdp.send('Profiler.start');
    }
    await page.goto(`${base}/#/s/${session.id}`);
    await page.waitForFunction((n) => document.querySelector('[data-testid="message-log"]')?.dataset.lastSeq === String(n), events, { timeout: 120_000, polling: 'raf' });
    // Two frames later the batched markdown render and layout are done.
    const ms = await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now())))));
    if (cdp) {
      const { profile } = await cdp.send('Profiler.stop');
      writeFileSync(process.env.CPUPROFILE, JSON.stringify(profile));
    }
    const cards = await page.locator('[data-testid="tool-card"]').count();
    if (cards !== TURNS * STEPS) throw new Error(`rendered ${cards} tool cards, expected ${TURNS * STEPS}`);
    times.push(ms);
    console.log(`run ${run + 1}: ${ms.toFixed(0)} ms`);
  }
  times.sort((a, b) => a - b);
  console.log(`navigation → ${events} events rendered: median ${times[Math.floor(RUNS / 2)].toFixed(0)} ms (min ${times[0].toFixed(0)}, max ${times[RUNS - 1].toFixed(0)})`);
} finally {
  if (browser) await browser.close();
  servers.stop();
  rmSync(dir, { recursive: true, force: true });
}
