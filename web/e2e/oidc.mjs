// The web UI signs in through an identity provider: a real browser, a real
// `agentd serve` with [server.oidc], and the testkit's provider (started by
// crates/cli/tests/cli/web_oidc.rs). The sign-in page offers "Sign in with
// <name>", the provider signs its user in at once, and the browser lands in
// the app as that user.
//
// Env: AGENTD_URL, AGENTD_USER (the provider's user), AGENTD_IDP_NAME,
// AGENTD_E2E_OUT (screenshots), CHROMIUM, NODE_PATH (playwright-core).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './browser.mjs';
import { Failure, check, until, visible } from './assert.mjs';

const URL = process.env.AGENTD_URL;
const USER = process.env.AGENTD_USER;
const NAME = process.env.AGENTD_IDP_NAME;
const OUT = process.env.AGENTD_E2E_OUT || 'target/ui-screenshots';
if (!URL || !USER || !NAME) {
  console.error('oidc.mjs needs AGENTD_URL, AGENTD_USER and AGENTD_IDP_NAME');
  process.exit(2);
}
mkdirSync(OUT, { recursive: true });

const { context, page, close } = await launch();
const pageErrors = [];
page.on('pageerror', (err) => pageErrors.push(err.message));
const tid = (id) => page.getByTestId(id);

async function run() {
  await page.goto(URL);
  const button = tid('signin-oidc');
  await visible(button, 'the "Sign in with" button');
  const label = (await button.textContent()).trim();
  check(label === `Sign in with ${NAME}`, `the button says "${label}"`);
  // The token form stays for API tokens.
  await visible(tid('signin-token'), 'the token field');
  await page.screenshot({ path: join(OUT, 'oidc-signin.png') });

  await button.click();
  // Through the provider and back: the app, signed in as the provider's user.
  await visible(tid('new-session'), 'the app after signing in', 30_000);
  await until(`the top bar to name ${USER}`, async () => (await page.locator('header.topbar .user').textContent()).trim() === USER);
  check(new globalThis.URL(page.url()).origin === new globalThis.URL(URL).origin, `landed on ${page.url()}, not on agentd`);
  const cookies = await context.cookies(URL);
  const session = cookies.find((c) => c.name === 'agentd_session');
  check(session && session.httpOnly && session.sameSite === 'Strict', `the sign-in cookie: ${JSON.stringify(session)}`);
  check(!cookies.some((c) => c.name === 'agentd_oidc' && c.value), 'the flow cookie was not cleared');
  const me = await page.evaluate(async () => (await fetch('/v1/auth/me')).json());
  check(me.user === USER && me.auth === 'token', `GET /v1/auth/me: ${JSON.stringify(me)}`);
  // Signed in for real: a session can be made.
  await tid('new-session').click();
  await visible(tid('composer'), 'a new session');
  await page.screenshot({ path: join(OUT, 'oidc-signed-in.png') });
  check(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
}

try {
  await run();
  console.log('ok   oidc sign-in through the identity provider');
  await close();
} catch (err) {
  await page.screenshot({ path: join(OUT, 'oidc-failure.png') }).catch(() => {});
  console.error(`FAIL oidc sign-in: ${err instanceof Failure ? err.message : err.stack}`);
  await close();
  process.exit(1);
}
