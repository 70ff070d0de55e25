// The web UI's end-to-end test: a real browser against a real `agentd serve`
// (started by crates/cli/tests/cli/web_ui.rs, or by web/e2e/local.mjs) whose
// model plays web/e2e/script.json. One line per scenario; the first failure
// ends the run with a message, a screenshot and a non-zero exit.
//
// Env: AGENTD_URL, AGENTD_TOKEN, AGENTD_E2E_OUT (screenshots), CHROMIUM,
// NODE_PATH (for playwright-core).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch, DESKTOP, PHONE } from './browser.mjs';
import { startProxy } from './proxy.mjs';
import { Failure, WAIT, check, until, visible, sleep } from './assert.mjs';

const URL = process.env.AGENTD_URL;
const TOKEN = process.env.AGENTD_TOKEN;
const OUT = process.env.AGENTD_E2E_OUT || 'target/ui-screenshots';
if (!URL || !TOKEN) {
  console.error('run.mjs needs AGENTD_URL and AGENTD_TOKEN (see web/e2e/local.mjs)');
  process.exit(2);
}
mkdirSync(OUT, { recursive: true });

// ---- the run ----

const { context, page, close } = await launch();
const dialogs = [];
const pageErrors = [];
const cspViolations = [];
page.on('dialog', (dialog) => {
  dialogs.push(dialog.message());
  dialog.dismiss().catch(() => {});
});
page.on('pageerror', (err) => pageErrors.push(err.message));
page.on('console', (message) => {
  if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
});

const tid = (id) => page.getByTestId(id);
const log = () => tid('message-log');
const lastTurn = () => page.locator('section.turn').last();
const turnWith = (text) => page.locator('section.turn').filter({ has: page.getByTestId('message-user').filter({ hasText: text }) });

async function shot(name, size = DESKTOP) {
  if (size !== DESKTOP) await page.setViewportSize(size);
  await sleep(250);
  await page.screenshot({ path: join(OUT, `${name}.png`) });
  if (size !== DESKTOP) await page.setViewportSize(DESKTOP);
}

async function send(text) {
  const before = await page.locator('section.turn').count();
  await tid('composer').fill(text);
  await tid('composer').press('Enter');
  await until(`the turn of “${text}” to start`, async () => (await page.locator('section.turn').count()) > before);
}

async function turnStatus(turn, status, timeout = WAIT) {
  await until(`turn status ${status}`, async () => (await turn.getByTestId('turn-status').getAttribute('data-status')) === status, timeout).catch(async (err) => {
    const now = await turn.getByTestId('turn-status').getAttribute('data-status').catch(() => '?');
    throw new Failure(`${err.message}; it is ${now}`);
  });
}

async function textOf(locator) {
  return (await locator.textContent()) || '';
}

const scenarios = [];
const scenario = (name, fn) => scenarios.push({ name, fn });
let mainSessionId = null;

scenario('the sign-in page turns a bad token away', async () => {
  await page.goto(URL);
  await visible(tid('signin-token'), 'the sign-in form');
  await shot('signin-desktop');
  await shot('signin-phone', PHONE);
  await tid('signin-token').fill('agentd_not_a_real_token');
  await tid('signin-submit').click();
  await visible(tid('signin-error'), 'the sign-in error');
  check(/not accepted/.test(await textOf(tid('signin-error'))), 'the error says the token was not accepted');
});

scenario('sign in with a token: a cookie, nothing in storage', async () => {
  await tid('signin-token').fill(TOKEN);
  await tid('signin-submit').click();
  await visible(tid('new-session'), 'the session list');
  const cookies = await context.cookies(URL);
  check(cookies.some((c) => c.httpOnly), 'an HttpOnly session cookie is set');
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
  check(!stored.includes(TOKEN.slice(8, 24)), 'the token is not in localStorage or sessionStorage');
  await visible(tid('signout'), 'the sign-out button');
});

// The list item of a session, and what it shows.
const itemOf = (id) => page.locator(`[data-testid="session-item"][data-session-id="${id}"]`);
const listed = async (id) => ({ status: await textOf(itemOf(id).getByTestId('session-status')), cost: await textOf(itemOf(id).getByTestId('session-cost')) });

scenario('one click on "New session" starts a chat; its choices are inline, not a modal', async () => {
  await tid('new-session-options').click();
  await visible(tid('new-session-profile'), 'the inline choices');
  const profiles = await tid('new-session-profile').locator('option').allTextContents();
  check(profiles.includes('default'), `the profile list has default (${profiles})`);
  const models = await tid('new-session-model').locator('option').allTextContents();
  check(models.some((m) => m.startsWith('quick')), `the model list has the granted models (${models})`);
  await tid('new-session-profile').selectOption('default');
  await shot('new-session-options-desktop');
  await tid('new-session-options').click();
  await tid('new-session').click();
  await visible(tid('composer'), 'the composer');
  check((await page.locator('dialog').count()) === 0, 'no dialog was opened');
  const item = tid('session-item').filter({ has: page.locator('[aria-current="page"]') });
  await visible(item, 'the new session in the list');
  mainSessionId = await item.getAttribute('data-session-id');
  check(mainSessionId && page.url().includes(mainSessionId), 'the URL names the session');
  const shown = await listed(mainSessionId);
  check(shown.status === 'idle' && shown.cost === '$0', `a new session is idle and free (${JSON.stringify(shown)})`);
});

scenario('Shift+Enter makes a new line, Enter sends; text streams; a Bash card shows its output', async () => {
  await tid('composer').fill('E2E-HELLO');
  await tid('composer').press('Shift+Enter');
  await tid('composer').pressSequentially('say hi');
  check((await tid('composer').inputValue()) === 'E2E-HELLO\nsay hi', 'Shift+Enter adds a newline without sending');
  check((await page.locator('section.turn').count()) === 0, 'nothing was sent yet');
  await tid('composer').press('Enter');
  const turn = lastTurn();
  await until('the list to show the session running', async () => (await listed(mainSessionId)).status === 'running');
  // Streaming: text shows while the turn still runs.
  const seenRunning = await until('streamed text', async () => {
    const text = await textOf(turn.getByTestId('message-assistant').first()).catch(() => '');
    if (!text.includes('Streaming')) return false;
    return { status: await turn.getByTestId('turn-status').getAttribute('data-status'), text };
  });
  check(seenRunning.status !== 'completed', 'text was shown before the turn ended');
  const bash = turn.locator('[data-testid="tool-card"][data-call-id="bash_hello"]');
  await visible(bash, 'the Bash tool card');
  await until('the Bash card to finish ok', async () => (await bash.getAttribute('data-status')) === 'ok');
  check((await textOf(bash.getByTestId('tool-name'))) === 'Bash', 'the card names the tool');
  check((await textOf(bash.getByTestId('tool-input'))).includes('echo hello-from-bash'), 'the card shows the input');
  check((await textOf(bash.getByTestId('tool-output'))).includes('hello-from-bash'), 'the card shows the output');
  check(/\d/.test(await textOf(bash.getByTestId('tool-duration'))), 'the card shows the duration');
  await visible(turn.getByText('HELLO-DONE'), 'the reply after the tool call');
  await turnStatus(turn, 'completed');
  // The list follows without a reload: idle again, and what the turn cost.
  const after = await until('the list to show the turn ended', async () => {
    const shown = await listed(mainSessionId);
    return shown.status === 'idle' && shown.cost !== '$0' && shown;
  });
  check(/^\$\d/.test(after.cost), `the list shows the cost (${after.cost})`);
  // Markdown: bold, inline code, a highlighted code block, a list; thinking collapsed.
  const reply = turn.getByTestId('message-assistant').first();
  check((await reply.locator('strong').count()) >= 1 && (await reply.locator('ul > li').count()) === 2, 'markdown is rendered');
  check((await reply.locator('.code-block .tok-kw').count()) > 0, 'the code block is highlighted');
  const thinking = turn.getByTestId('thinking');
  check((await thinking.count()) === 1 && !(await thinking.evaluate((d) => d.open)), 'thinking is there, collapsed');
  const todos = tid('todo-item');
  check((await todos.count()) === 3, 'the plan has three items');
  check((await todos.nth(1).getAttribute('data-status')) === 'in_progress', 'the plan shows what is in progress');
  check(/\$/.test(await textOf(tid('usage'))), `usage and cost are shown (${await textOf(tid('usage'))})`);
  await shot('conversation-desktop');
  await shot('conversation-phone', PHONE);
  await page.emulateMedia({ colorScheme: 'dark' });
  await shot('conversation-dark-desktop');
  await page.emulateMedia({ colorScheme: 'light' });
});

scenario('approve a permission request and the turn goes on', async () => {
  await send('E2E-APPROVE write the file');
  const turn = lastTurn();
  const card = turn.getByTestId('permission-card');
  await visible(card, 'the permission request');
  await turnStatus(turn, 'waiting');
  check((await textOf(card)).includes('src/hello.py'), 'the request shows the command');
  await shot('permission-desktop');
  await card.getByTestId('permission-allow').click();
  await visible(turn.getByText('APPROVE-DONE'), 'the reply after the approved call');
  await turnStatus(turn, 'completed');
  check((await card.getAttribute('data-state')) === 'allow', 'the request shows it was allowed');
  const bash = turn.locator('[data-testid="tool-card"][data-call-id="bash_write"]');
  check((await bash.getAttribute('data-status')) === 'ok', 'the approved call ran');
  check((await textOf(bash.getByTestId('tool-output'))).includes('def greet'), 'the approved call shows its output');
});

scenario('deny a permission request', async () => {
  await send('E2E-DENY remove src');
  const turn = lastTurn();
  await visible(turn.getByTestId('permission-card'), 'the permission request');
  await turn.getByTestId('permission-deny').click();
  await visible(turn.getByText('DENY-DONE'), 'the reply after the denial');
  await turnStatus(turn, 'completed');
  check((await turn.getByTestId('permission-card').getAttribute('data-state')) === 'deny', 'the request shows it was denied');
  check((await turn.locator('[data-call-id="bash_rm"]').getAttribute('data-status')) === 'error', 'the denied call is marked failed');
});

scenario('allow for this session: the same call does not ask again', async () => {
  await send('E2E-REMEMBER run it twice');
  const turn = lastTurn();
  await visible(turn.getByTestId('permission-card'), 'the permission request');
  await turn.getByTestId('permission-allow-session').click();
  await visible(turn.getByText('REMEMBER-DONE'), 'the reply after both calls');
  check((await turn.getByTestId('tool-card').count()) === 2, 'both calls ran');
  check((await turn.getByTestId('permission-card').count()) === 1, 'only the first call asked');
});

scenario('answer a question; the answer reaches the model', async () => {
  await send('E2E-ASK pick a color');
  const turn = lastTurn();
  const card = turn.getByTestId('question-card');
  await visible(card, 'the question');
  const [color, sizes] = [card.locator('fieldset').nth(0), card.locator('fieldset').nth(1)];
  check((await color.getByTestId('question-option').count()) === 2, 'both colors are offered');
  check((await sizes.locator('input[type="checkbox"]').count()) === 3, 'the multi-select question has checkboxes');
  check((await card.getByTestId('question-text').count()) === 2, 'each question takes free text');
  const onScreen = await card.getByTestId('question-submit').evaluate((el) => {
    const box = el.getBoundingClientRect();
    const log = el.closest('[role="log"]').getBoundingClientRect();
    return box.top >= log.top && box.bottom <= log.bottom;
  });
  check(onScreen, 'the log followed the new question to its end');
  await shot('question-desktop');
  await color.getByTestId('question-option').filter({ hasText: 'Teal' }).click();
  check((await color.getByTestId('question-option').filter({ hasText: 'Teal' }).getAttribute('aria-pressed')) === 'true', 'the choice shows as pressed');
  await card.getByTestId('question-submit').click();
  await visible(card.getByText(/each question/), 'a note that every question needs an answer');
  await sizes.getByTestId('question-option').filter({ hasText: 'Small' }).click();
  await sizes.getByTestId('question-option').filter({ hasText: 'Large' }).click();
  await card.getByTestId('question-submit').click();
  await visible(turn.getByText('ANSWER-TEAL'), 'the reply that depends on the answer');
  check((await turn.getByText('ANSWER-OTHER').count()) === 0, 'the model saw Teal');
  check((await textOf(card)).includes('Small, Large'), `the card shows the answers (${await textOf(card)})`);
  await turnStatus(turn, 'completed');
});

// A real 1×1 PNG; crates/cli/tests/cli/web_ui.rs finds it in the recorded model request.
const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

scenario('paste and drop images into the composer: thumbnails, sent, shown in the transcript', async () => {
  // The browser's own paste and drop events, carrying a file as a real one would.
  await tid('composer').evaluate((composer, b64) => {
    const file = () => new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], 'pixel.png', { type: 'image/png' });
    const carrying = () => {
      const data = new DataTransfer();
      data.items.add(file());
      return data;
    };
    composer.dispatchEvent(new ClipboardEvent('paste', { clipboardData: carrying(), bubbles: true, cancelable: true }));
    composer.dispatchEvent(new DragEvent('drop', { dataTransfer: carrying(), bubbles: true, cancelable: true }));
  }, PNG_B64);
  await until('two thumbnails before sending', async () => (await tid('attachment').count()) === 2);
  await tid('attachments').getByRole('button', { name: 'Remove attachment 2' }).click();
  await until('one thumbnail left', async () => (await tid('attachment').count()) === 1);
  await send('E2E-IMAGE what is in this picture?');
  const turn = lastTurn();
  await visible(turn.getByText('IMAGE-DONE'), 'the reply to the image');
  const thumb = turn.getByTestId('message-user').getByTestId('message-image');
  await visible(thumb, 'the thumbnail in the transcript');
  check((await thumb.evaluate((img) => img.naturalWidth)) === 1, 'the thumbnail is the decoded image');
  check(await tid('attachments').isHidden(), 'the composer has no attachment left');
  await shot('attachment-desktop');
});

scenario("a subagent's calls nest under its Task card", async () => {
  await send('E2E-TASK delegate');
  const turn = lastTurn();
  await visible(turn.getByText('TASK-DONE'), 'the reply after the subagent');
  const task = turn.locator('[data-testid="tool-card"][data-call-id="task_1"]');
  const nested = task.locator('[data-testid="tool-card"][data-call-id="sub_bash"]');
  check((await nested.count()) === 1, "the subagent's Bash card is inside the Task card");
  check((await nested.getAttribute('data-status')) === 'ok', "the subagent's call finished");
  check((await textOf(task.getByTestId('tool-output').last())).includes('SUB-REPORT'), "the Task card shows the subagent's report");
});

scenario('the workspace panel lists, shows and downloads files', async () => {
  await tid('workspace-toggle').click();
  const dir = page.locator('[data-testid="file-entry"][data-path="src"]');
  await visible(dir, 'the src folder');
  check((await dir.getAttribute('data-kind')) === 'dir', 'src is a folder');
  await dir.click();
  const file = page.locator('[data-testid="file-entry"][data-path="src/hello.py"]');
  await visible(file, 'src/hello.py');
  await file.click();
  await until('the file content', async () => (await textOf(tid('file-view'))).includes('def greet'));
  check((await tid('file-view').locator('.tok-kw').count()) > 0, 'the file is highlighted');
  const href = await tid('file-download').getAttribute('href');
  check(href && href.includes('path=src%2Fhello.py'), `the download link names the file (${href})`);
  const downloaded = await page.evaluate(async (url) => (await fetch(url)).text(), href);
  check(downloaded.includes('return "approved"'), 'the download link serves the file');
  await shot('workspace-desktop');
  await shot('workspace-phone', PHONE);
  await tid('workspace-toggle').click();
});

scenario('fork at a checkpoint: a new session with the conversation so far', async () => {
  const marker = turnWith('E2E-APPROVE').getByTestId('checkpoint-marker');
  await visible(marker, 'the checkpoint of the approved call');
  await marker.getByTestId('fork').click();
  await until('the fork to open', async () => !page.url().includes(mainSessionId));
  await until('the fork to be titled', async () => (await textOf(tid('conversation-title'))).startsWith('Fork of'));
  await visible(page.locator('.history').getByText('E2E-HELLO'), "the fork's history");
  check((await page.locator('.history').getByText('E2E-APPROVE').count()) === 0, 'the fork ends before the checkpoint');
  check((await tid('session-item').count()) === 2, 'both sessions are listed');
  await tid('session-item').filter({ has: page.locator(`a[href$="${mainSessionId}"]`) }).locator('a').click();
  await visible(turnWith('E2E-APPROVE'), 'the original session again');
});

scenario('rewind to a checkpoint: files and history go back', async () => {
  const marker = turnWith('E2E-APPROVE').getByTestId('checkpoint-marker');
  await marker.getByTestId('rewind').click();
  await visible(tid('confirm-no'), 'the rewind confirmation');
  await tid('confirm-no').click();
  check((await page.locator('.turn.rewound').count()) === 0, 'cancelling does nothing');
  await marker.getByTestId('rewind').click();
  await tid('confirm-yes').click();
  await until('the rewound turns to be marked', async () => (await turnWith('E2E-APPROVE').getAttribute('class')).includes('rewound'));
  check(!(await turnWith('E2E-HELLO').getAttribute('class')).includes('rewound'), 'earlier turns stay');
  const files = await page.evaluate(async (id) => (await (await fetch(`/v1/sessions/${id}/files`)).json()).entries.map((e) => e.name), mainSessionId);
  check(!files.includes('src'), `the files are back as they were (${files})`);
});

scenario('rename a session', async () => {
  const item = tid('session-item').filter({ has: page.locator('[aria-current="page"]') });
  await item.getByTestId('session-rename').click();
  await tid('prompt-input').fill('Renamed by the e2e test');
  await tid('confirm-yes').click();
  await until('the new title in the list', async () => (await textOf(item.getByTestId('session-title'))) === 'Renamed by the e2e test');
  check((await textOf(tid('conversation-title'))) === 'Renamed by the e2e test', 'the open conversation shows it too');
});

scenario('model and thinking of the open session change from its header', async () => {
  check((await tid('session-model').inputValue()) === 'default', 'the header shows the model');
  await tid('session-model').selectOption('quick');
  const read = () => page.evaluate(async (id) => (await fetch(`/v1/sessions/${id}`)).json(), mainSessionId);
  await until('the model to be changed on the server', async () => (await read()).model === 'quick');
  const budget = tid('session-thinking-budget');
  await until('the header to show the new model\'s default budget', async () => (await budget.getAttribute('placeholder')) === 'default (2048)');
  check((await budget.inputValue()) === '', 'no budget of its own yet');
  await budget.fill('500');
  await budget.press('Enter');
  await budget.blur();
  await visible(page.getByText(/1024 to 1000000, or empty for the default/), 'a note that the budget is out of bounds');
  check((await read()).thinking === null, 'nothing stored');
  await budget.fill('4096');
  await budget.blur();
  await until('the budget to be stored', async () => {
    const session = await read();
    return session.thinking && session.thinking.budget_tokens === 4096;
  });
  await shot('session-settings-desktop');
  // Emptied: back to the default, which the field says again.
  await budget.fill('');
  await budget.blur();
  await until('thinking back to the default', async () => (await read()).thinking === null);
  check((await budget.getAttribute('placeholder')) === 'default (2048)', 'the default is told');
  await tid('session-model').selectOption('default');
  await until('the model back to the default', async () => (await read()).model === 'default');
  await until('the default model\'s (no thinking) to be told', async () => (await budget.getAttribute('placeholder')) === 'default (off)');
});

scenario('interrupt a long Bash call with the button', async () => {
  await tid('new-session').click();
  await until('the second session to open', async () => !page.url().includes(mainSessionId) && (await page.locator('section.turn').count()) === 0);
  await send('E2E-SLEEP wait');
  const turn = lastTurn();
  const card = turn.locator('[data-call-id="bash_sleep"]');
  await visible(card, 'the sleeping Bash card');
  await visible(tid('interrupt'), 'the stop button');
  await tid('interrupt').click();
  await turnStatus(turn, 'interrupted', 10_000);
  check((await card.getAttribute('data-status')) === 'error', 'the interrupted call is marked');
  check(await tid('interrupt').isHidden(), 'the stop button goes away');
});

scenario('a turn of a session that is not open shows in the list without a reload', async () => {
  const before = await listed(mainSessionId);
  const url = page.url();
  // As another client (the CLI, another tab) would.
  const status = await page.evaluate(async (id) => {
    const body = JSON.stringify({ content: 'E2E-ELSEWHERE from another client' });
    return (await fetch(`/v1/sessions/${id}/messages`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body })).status;
  }, mainSessionId);
  check(status === 202, `the message was taken (${status})`);
  const after = await until('the list to show the other turn ended', async () => {
    const shown = await listed(mainSessionId);
    return shown.status === 'idle' && shown.cost !== before.cost && shown;
  }, 30_000);
  check(page.url() === url, 'no navigation happened');
  check(after.cost !== before.cost, `its cost went up (${before.cost} → ${after.cost})`);
});

scenario('interrupt streaming text with Escape', async () => {
  await send('E2E-SLOWTEXT go slowly');
  const turn = lastTurn();
  await visible(turn.getByText(/slow003/), 'the first slow words');
  await page.keyboard.press('Escape');
  await turnStatus(turn, 'interrupted', 10_000);
  check(!(await textOf(turn)).includes('slow200'), 'the text stopped early');
});

scenario('reload mid-turn: the rest arrives, exactly once', async () => {
  await send('E2E-RELOAD stream ticks');
  await visible(lastTurn().getByText(/tick010/), 'the first ticks');
  await page.reload();
  await visible(log().getByText(/RELOAD-END/), 'the end of the reply after the reload', 30_000);
  await turnStatus(lastTurn(), 'completed');
  const text = await textOf(log());
  const ticks = text.match(/tick\d{3}/g) || [];
  check(ticks.length === 150, `every tick once: ${ticks.length} ticks for 150`);
  check(new Set(ticks).size === 150, 'no tick twice');
  check((text.match(/RELOAD-END/g) || []).length === 1, 'the end marker once');
  check((await tid('message-user').filter({ hasText: 'E2E-RELOAD' }).count()) === 1, 'the user message once');
});

scenario('a dropped connection: a banner, then the stream resumes where it stopped', async () => {
  check(await tid('connection-banner').isHidden(), 'no banner while connected');
  const proxy = await startProxy(URL);
  const resumes = [];
  // EventSource resumes with Last-Event-ID by itself; after it gives up the
  // UI reopens with ?after=. Either must name the last event seen.
  const onRequest = async (request) => {
    if (!request.url().includes('/events')) return;
    const after = new globalThis.URL(request.url()).searchParams.get('after');
    const lastId = (await request.allHeaders())['last-event-id'];
    if (lastId || after) resumes.push(Number(lastId || after));
  };
  page.on('request', onRequest);
  try {
    // Same host, so the same cookie; the page now reaches agentd through the proxy.
    await page.goto(proxy.url + new globalThis.URL(page.url()).hash);
    await visible(log().getByText(/RELOAD-END/), 'the conversation through the proxy');
    await send('E2E-DROP stream through a flaky network');
    await visible(lastTurn().getByText(/drop010/), 'the first words');
    proxy.cut();
    await visible(tid('connection-banner'), 'the banner while disconnected');
    check((await tid('connection-banner').getAttribute('role')) === 'status', 'the banner is a status region');
    await shot('disconnected-desktop');
    await sleep(1000);
    proxy.restore();
    await until('the banner to go once reconnected', async () => await tid('connection-banner').isHidden(), 30_000);
    await visible(lastTurn().getByText(/DROP-END/), 'the rest of the reply', 30_000);
    await turnStatus(lastTurn(), 'completed');
    check(resumes.length > 0 && resumes.every((seq) => seq > 0), `the stream resumed after the last event seen (${resumes})`);
    const words = (await textOf(lastTurn())).match(/drop\d{3}/g) || [];
    check(words.length === 200 && new Set(words).size === 200, `every word once: ${words.length} words, ${new Set(words).size} distinct, for 200`);
  } finally {
    page.off('request', onRequest);
    await page.goto(URL + new globalThis.URL(page.url()).hash);
    proxy.close();
  }
  await visible(log().getByText(/DROP-END/), 'the conversation back on the direct URL');
});

scenario('hostile markup in a reply stays inert', async () => {
  await page.evaluate(() => {
    window.__pwned = undefined;
  });
  await send('E2E-XSS show me');
  const turn = lastTurn();
  await visible(turn.getByText(/XSS-DONE/), 'the hostile reply');
  await turnStatus(turn, 'completed');
  await sleep(500);
  const reply = turn.getByTestId('message-assistant');
  check(dialogs.length === 0, `no dialog opened (${dialogs})`);
  check((await page.evaluate(() => window.__pwned)) === undefined, 'no injected code ran');
  check((await reply.locator('img, script, iframe, object, embed').count()) === 0, 'no element came from the markup');
  check((await textOf(reply)).includes('<img src=x'), 'the markup shows as text');
  const hrefs = await reply.locator('a').evaluateAll((links) => links.map((a) => a.getAttribute('href')));
  check(hrefs.every((href) => /^https?:/.test(href)), `only http(s) links (${hrefs})`);
  check(hrefs.includes('https://example.com/safe'), 'the safe link is a link');
  check((await reply.getByText('click me').count()) === 1, 'the javascript: link is plain text');
  await shot('hostile-reply-desktop');
});

scenario('a failing model call: the error shows and the turn is failed', async () => {
  await send('E2E-FAIL please');
  const turn = lastTurn();
  await turnStatus(turn, 'failed');
  await visible(turn.locator('.error-note'), 'the error note');
  check((await textOf(turn.getByTestId('turn-status'))).includes('Failed'), 'the footer says the turn failed');
  check(await tid('interrupt').isHidden(), 'nothing left to stop');
});

scenario('compacting the conversation leaves a marker', async () => {
  await send('/compact');
  const turn = lastTurn();
  await visible(turn.getByTestId('compaction-marker'), 'the compaction marker');
  await turnStatus(turn, 'completed');
  check(/compacted \(manual\)/.test(await textOf(turn.getByTestId('compaction-marker'))), 'the marker says how it was triggered');
});

scenario('a project from "New session": its greeting opens it, and asking again opens the same', async () => {
  await tid('new-session-options').click();
  await visible(tid('new-session-project'), 'the project choice');
  await tid('new-session-project').selectOption('demo');
  await tid('new-session').click();
  await visible(tid('composer'), 'the composer');
  await until('the greeting', async () => (await textOf(log())).includes('Welcome to the demo project.'));
  const count = await tid('session-item').count();
  const url = page.url();
  // The choice stays for the next click (no reload: choices live in the page).
  await page.evaluate(() => {
    location.hash = '';
  });
  await visible(page.getByText('No session open'), 'the empty view');
  await tid('new-session').click();
  await until('the same session', async () => page.url() === url);
  check((await tid('session-item').count()) === count, 'no second entry in the list');
  await tid('new-session-project').selectOption('');
});

scenario('the session list on a phone', async () => {
  await page.setViewportSize(PHONE);
  await page.getByRole('button', { name: 'Sessions' }).click();
  await visible(tid('session-item'), 'the sessions on a phone');
  await sleep(250);
  await page.screenshot({ path: join(OUT, 'sessions-phone.png') });
  await page.keyboard.press('Escape');
  const menu = page.getByRole('button', { name: 'Sessions' });
  check((await menu.getAttribute('aria-expanded')) === 'false', 'Escape closes the session drawer');
  await page.setViewportSize(DESKTOP);
});

scenario('delete a session after confirming', async () => {
  const count = await tid('session-item').count();
  const item = tid('session-item').filter({ has: page.locator('[aria-current="page"]') });
  const id = await item.getAttribute('data-session-id');
  await item.getByTestId('session-delete').click();
  await tid('confirm-no').click();
  check((await tid('session-item').count()) === count, 'cancelling keeps it');
  await item.getByTestId('session-delete').click();
  await tid('confirm-yes').click();
  await until('the session to leave the list', async () => (await tid('session-item').count()) === count - 1);
  const status = await page.evaluate(async (sid) => (await fetch(`/v1/sessions/${sid}`)).status, id);
  check(status === 404, `the session is gone on the server (${status})`);
  await visible(page.getByText('No session open'), 'the empty view');
});

scenario('sign out', async () => {
  await tid('signout').click();
  await visible(tid('signin-token'), 'the sign-in page');
  await page.reload();
  await visible(tid('signin-token'), 'the sign-in page after a reload');
  const status = await page.evaluate(async () => (await fetch('/v1/auth/me')).status);
  check(status === 401, `signed out on the server too (${status})`);
});

scenario('no script errors and no CSP violations', async () => {
  check(pageErrors.length === 0, `page errors: ${pageErrors.join(' | ')}`);
  check(cspViolations.length === 0, `CSP violations: ${cspViolations.join(' | ')}`);
});

let passed = 0;
let exitCode = 0;
for (const [i, { name, fn }] of scenarios.entries()) {
  const started = Date.now();
  try {
    await fn();
    passed++;
    console.log(`ok ${i + 1} - ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (err) {
    const file = join(OUT, `failure-${i + 1}.png`);
    await page.screenshot({ path: file }).catch(() => {});
    console.log(`not ok ${i + 1} - ${name}: ${err instanceof Failure ? err.message : err.stack}`);
    console.log(`  screenshot: ${file}`);
    exitCode = 1;
    break;
  }
}
await close();
console.log(`${passed} passed, ${exitCode ? 1 : 0} failed`);
process.exit(exitCode);
