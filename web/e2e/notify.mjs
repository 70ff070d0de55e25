// Browser notifications (web/views/notifier.js), driven by
// crates/cli/tests/cli/web_notify.rs: with the notification permission
// granted and `window.Notification` spied on, a session in the background
// that asks for a permission produces a notification — also one older than
// the session list's first page — once, and clicking it opens that session.
// The session in view produces none while the tab is visible.
//
// Env: as run.mjs (AGENTD_URL, AGENTD_TOKEN, AGENTD_E2E_OUT, CHROMIUM, NODE_PATH).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './browser.mjs';
import { check, until, visible } from './assert.mjs';

const URL = process.env.AGENTD_URL;
const TOKEN = process.env.AGENTD_TOKEN;
const OUT = process.env.AGENTD_E2E_OUT || 'target/ui-screenshots';
if (!URL || !TOKEN) {
  console.error('notify.mjs needs AGENTD_URL and AGENTD_TOKEN');
  process.exit(2);
}
mkdirSync(OUT, { recursive: true });
// The notifier asks which sessions wait every 3 s.
const NOTICE_WAIT = 20_000;
const TWO_POLLS = 7_000;

async function api(method, path, body) {
  const response = await fetch(`${URL}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  check(response.ok, `${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const { context, page, close } = await launch();
let failed = false;
try {
  await context.grantPermissions(['notifications'], { origin: new globalThis.URL(URL).origin });
  // Record every notification the page makes; permission stays the browser's.
  await context.addInitScript(() => {
    const Real = window.Notification;
    window.__notes = [];
    class Spy {
      constructor(title, options = {}) {
        this.title = title;
        this.tag = options.tag;
        this.body = options.body;
        this.onclick = null;
        this.closed = false;
        window.__notes.push(this);
      }
      close() {
        this.closed = true;
      }
      static get permission() {
        return Real.permission;
      }
      static requestPermission(...args) {
        return Real.requestPermission(...args);
      }
    }
    window.Notification = Spy;
  });
  const tid = (id) => page.getByTestId(id);
  const notes = () => page.evaluate(() => window.__notes.map((n) => ({ title: n.title, tag: n.tag, closed: n.closed })));

  // The background session is older than the list's first page (50).
  const background = await api('POST', '/v1/sessions', { title: 'Background job' });
  for (let n = 0; n < 55; n += 1) await api('POST', '/v1/sessions', { title: `Filler ${n}` });

  await page.goto(URL);
  await visible(tid('signin-token'), 'the sign-in form');
  await tid('signin-token').fill(TOKEN);
  await tid('signin-submit').click();
  await visible(tid('new-session'), 'the session list');

  const bell = tid('notify-toggle');
  await visible(bell, 'the notification bell');
  check((await bell.getAttribute('aria-pressed')) === 'false', 'notifications start off');
  await bell.click();
  await until('the bell to be on', async () => (await bell.getAttribute('aria-pressed')) === 'true');
  console.log('ok - the bell turns notifications on (permission granted)');

  // The session in view asks for a permission while the user looks at it.
  await tid('new-session').click();
  await visible(tid('composer'), 'the composer');
  const inView = await page.evaluate(() => decodeURIComponent(location.hash.replace('#/s/', '')));
  await api('POST', `/v1/sessions/${inView}/messages`, { content: 'touch it' });
  await visible(page.getByTestId('permission-card'), 'the permission card of the session in view');
  await page.waitForTimeout(TWO_POLLS);
  check((await notes()).length === 0, `none for the session in view (${JSON.stringify(await notes())})`);
  console.log('ok - the session in view waiting makes no notification');

  // Another session, in the background and not on the list's first page, asks for a permission.
  check(!(await page.getByText('Background job').count()), 'the background session is not listed yet');
  await api('POST', `/v1/sessions/${background.id}/messages`, { content: 'touch it' });
  const notice = await until(
    'a notification for the background session',
    async () => (await notes()).find((n) => n.tag === `agentd-${background.id}`),
    NOTICE_WAIT,
  ).catch(async (err) => {
    // Say what the server had waiting, to tell the server's part from the page's.
    const waiting = await api('GET', '/v1/sessions?status=waiting&limit=200');
    throw new Error(`${err.message}; waiting: ${JSON.stringify(waiting.sessions.map((x) => [x.id, x.title]))}`);
  });
  check(notice.title.includes('Background job') && notice.title.includes('needs an answer'), `the notification names the session (${notice.title})`);
  // Still waiting a few polls later: no second notification.
  await page.waitForTimeout(TWO_POLLS);
  const all = await notes();
  check(all.length === 1 && all[0].tag === notice.tag, `one notification in all (${JSON.stringify(all)})`);
  await page.screenshot({ path: join(OUT, 'notify-background.png') });
  console.log('ok - a background session waiting for a permission makes one notification');

  // Clicking it opens the session.
  await page.evaluate((tag) => window.__notes.find((n) => n.tag === tag).onclick(), notice.tag);
  await until('the session to open', async () => page.url().includes(`#/s/${background.id}`));
  await visible(page.getByTestId('permission-card'), 'the permission card of the opened session');
  check((await notes()).find((n) => n.tag === notice.tag).closed, 'the notification was closed');
  console.log('ok - clicking the notification opens that session');

  check((await notes()).length === 1, 'opening another session makes no notification');

  // Answer both, so the turns end before the server stops.
  await page.getByTestId('permission-deny').first().click();
  const pending = await api('GET', `/v1/sessions/${inView}/pending`).catch(() => null);
  for (const request of pending?.pending ?? []) {
    await api('POST', `/v1/sessions/${inView}/permissions/${request.request_id}`, { decision: 'deny' });
  }
} catch (err) {
  failed = true;
  console.error(`not ok - ${err.message}`);
  await page.screenshot({ path: join(OUT, 'notify-failure.png') }).catch(() => {});
} finally {
  await close();
}
process.exit(failed ? 1 : 0);
