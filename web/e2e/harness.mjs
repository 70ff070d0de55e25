// Starts what crates/cli/tests/cli/web_ui.rs starts — the scripted model server
// and `agentd serve` with a fresh data dir and an API token — for running
// the browser test (local.mjs) and the UI bench by hand.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function firstLine(child, what) {
  return new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => fail(new Error(`${what}: no output within 30 s`)), 30_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      // Keep reading so the child never blocks on a full pipe.
      lines.on('line', () => {});
      ok(line);
    });
    child.once('exit', (code) => fail(new Error(`${what} exited (${code}) before printing its URL`)));
  });
}

/**
 * scriptPath: the model's script; toml: agentd.toml text ({URL} = model server).
 * Returns {url, token, user, dataDir, stop()}.
 */
export async function startServers({ scriptPath, toml, user = 'alice', log = 'info' }) {
  const agentd = process.env.AGENTD_BIN || join(REPO, 'target/debug/agentd');
  if (!existsSync(agentd)) throw new Error(`${agentd} is missing: cargo build -p agentd-cli`);
  const modelServer = process.env.AGENTD_MODEL_SERVER_BIN || join(dirname(agentd), 'agentd-model-server');
  if (!existsSync(modelServer)) throw new Error(`${modelServer} is missing: cargo build -p agentd-testkit`);
  const dataDir = mkdtempSync(join(tmpdir(), 'agentd-ui-'));
  // A project lies outside the data dir (agentd refuses one inside it).
  const projectDir = mkdtempSync(join(tmpdir(), 'agentd-ui-project-'));
  const children = [];
  const stop = () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(projectDir, { recursive: true, force: true });
  };
  try {
    const model = spawn(modelServer, ['--script', scriptPath], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(model);
    const modelUrl = (await firstLine(model, 'agentd-model-server')).trim();
    const config = join(dataDir, 'agentd.toml');
    writeFileSync(config, toml.replaceAll('{URL}', modelUrl).replaceAll('{PROJECT}', projectDir));
    const env = {
      PATH: process.env.PATH,
      HOME: dataDir,
      AGENTD_DATA_DIR: dataDir,
      AGENTD_CONFIG: config,
      AGENTD_LOG: log,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: modelUrl,
    };
    const token = execFileSync(agentd, ['tokens', 'create', '--user', user], { env, cwd: dataDir, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    const serverLog = join(dataDir, 'server.log');
    const server = spawn(agentd, ['serve', '--bind', '127.0.0.1:0'], { env, cwd: dataDir, stdio: ['ignore', 'pipe', openSync(serverLog, 'w')] });
    children.push(server);
    const line = await firstLine(server, 'agentd serve');
    const url = line.split(/\s+/).find((w) => w.startsWith('http://'));
    if (!url) throw new Error(`no URL in ${JSON.stringify(line)}`);
    return { url, token, user, dataDir, serverLog, stop };
  } catch (err) {
    stop();
    throw err;
  }
}

export function e2eFiles() {
  const dir = join(REPO, 'web/e2e');
  return { scriptPath: join(dir, 'script.json'), toml: readFileSync(join(dir, 'agentd.toml'), 'utf8') };
}
