// The commands panel in a real browser (driven by
// crates/cli/tests/cli/web_commands.rs): the session's `vm` command is a
// danger-styled button with inputs from its schema; cancelling the confirm
// step runs nothing; confirming runs it, shows its output, and puts a
// `command.ran` marker in the log that a reload replays.
//
// Env: AGENTD_URL, AGENTD_TOKEN, AGENTD_SESSION (a session of the token's
// user with the recorder in its workspace), AGENTD_E2E_OUT, CHROMIUM, NODE_PATH.

import { join } from 'node:path';
import { launch } from './browser.mjs';
import { Failure, check, until, visible } from './assert.mjs';

const { AGENTD_URL: URL, AGENTD_TOKEN: TOKEN, AGENTD_SESSION: SESSION } = process.env;
const OUT = process.env.AGENTD_E2E_OUT || 'target/ui-screenshots';
if (!URL || !TOKEN || !SESSION) {
  console.error('commands.mjs needs AGENTD_URL, AGENTD_TOKEN and AGENTD_SESSION');
  process.exit(2);
}

const { page, close } = await launch();
const pageErrors = [];
page.on('pageerror', (err) => pageErrors.push(err.message));
const tid = (id) => page.getByTestId(id);
const vm = () => page.locator('[data-testid="command"][data-command="vm"]');
const markers = () => tid('message-log').getByTestId('command-ran');

async function openSession() {
  await page.goto(`${URL}/#/s/${SESSION}`);
  await visible(tid('message-log'), 'the conversation');
}

const steps = [
  ['sign in', async () => {
    await page.goto(URL);
    await tid('signin-token').fill(TOKEN);
    await tid('signin-submit').click();
    await visible(tid('new-session'), 'the session list');
  }],
  ['the session shows its command as a dangerous button with schema inputs', async () => {
    await openSession();
    await visible(tid('commands-panel'), 'the commands panel');
    await tid('commands-panel').locator('summary').click();
    await visible(vm(), 'the vm command');
    const button = vm().getByTestId('command-run');
    check(/danger/.test(await button.getAttribute('class')), 'a mutating command is styled as dangerous');
    const actions = await vm().getByTestId('command-arg-action').locator('option').allTextContents();
    check(actions.join(',') === 'status,reset', `the enum is a choice (${actions})`);
    check((await vm().getByTestId('command-arg-vm').getAttribute('max')) === '999', 'the integer input has the maximum');
  }],
  ['cancelling the confirm step runs nothing', async () => {
    await vm().getByTestId('command-arg-action').selectOption('reset');
    await vm().getByTestId('command-arg-vm').fill('102');
    await vm().getByTestId('command-arg-name').fill('web-1');
    await vm().getByTestId('command-run').click();
    await visible(tid('confirm-no'), 'the confirm step');
    await tid('confirm-no').click();
    await page.waitForTimeout(500);
    check((await markers().count()) === 0, 'nothing ran');
  }],
  ['confirming runs it: output in the panel, the run in the log', async () => {
    await vm().getByTestId('command-run').click();
    await visible(tid('confirm-yes'), 'the confirm step');
    await tid('confirm-yes').click();
    await until('the output', async () => /recorded 4 arguments/.test(await tid('command-output').first().textContent()));
    check((await tid('command-output').first().getAttribute('data-exit-code')) === '0', 'exit code 0');
    await until('the command.ran marker', async () => (await markers().count()) === 1);
    check(/qm reset 102 web-1/.test(await markers().first().textContent()), 'the marker shows the argv');
    await page.screenshot({ path: join(OUT, 'commands-desktop.png') });
  }],
  ['a reload replays the run', async () => {
    await page.reload();
    await visible(tid('message-log'), 'the conversation');
    await until('the replayed marker', async () => (await markers().count()) === 1);
    await page.waitForTimeout(500);
    check((await page.locator('section.history').count()) === 0, 'the run is not shown again as earlier history');
    check(pageErrors.length === 0, `page errors: ${pageErrors.join(' | ')}`);
  }],
];

let exitCode = 0;
for (const [i, [name, fn]] of steps.entries()) {
  try {
    await fn();
    console.log(`ok ${i + 1} - ${name}`);
  } catch (err) {
    const file = join(OUT, `commands-failure-${i + 1}.png`);
    await page.screenshot({ path: file }).catch(() => {});
    console.log(`not ok ${i + 1} - ${name}: ${err instanceof Failure ? err.message : err.stack}`);
    exitCode = 1;
    break;
  }
}
await close();
process.exit(exitCode);
