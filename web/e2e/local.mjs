// Runs the browser test as crates/cli/tests/cli/web_ui.rs does, without cargo
// test: `node web/e2e/local.mjs` (needs target/debug/agentd and
// target/debug/agentd-model-server). With --serve it
// only starts the servers and prints the URL and a token, for trying the UI.

import { spawn } from 'node:child_process';
import { mkdirSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServers, e2eFiles, REPO } from './harness.mjs';

const servers = await startServers(e2eFiles());
const stop = () => servers.stop();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stop();
    process.exit(130);
  });
}

if (process.argv.includes('--serve')) {
  console.log(`agentd UI: ${servers.url}\ntoken: ${servers.token}\nserver log: ${servers.serverLog}\nCtrl-C stops.`);
} else {
  const out = process.env.AGENTD_E2E_OUT || join(REPO, 'target/ui-screenshots');
  mkdirSync(out, { recursive: true });
  const child = spawn(process.execPath, [join(REPO, 'web/e2e/run.mjs')], {
    stdio: 'inherit',
    env: {
      ...process.env,
      AGENTD_URL: servers.url,
      AGENTD_TOKEN: servers.token,
      AGENTD_USER: servers.user,
      AGENTD_DATA_DIR: servers.dataDir,
      AGENTD_E2E_OUT: out,
      NODE_PATH: join(REPO, '.tools/node_modules'),
      CHROMIUM: process.env.CHROMIUM || '/usr/bin/chromium',
    },
  });
  child.on('exit', (code) => {
    if (code !== 0) {
      copyFileSync(servers.serverLog, join(out, 'server.log'));
      console.error(`agentd serve's log: ${join(out, 'server.log')}`);
    }
    stop();
    process.exit(code ?? 1);
  });
}
