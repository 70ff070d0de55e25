// Finding sessions in the web UI, in a real browser against a real `agentd
// serve` (started by crates/cli/tests/cli/web_search.rs, which made the
// sessions first: one whose tool printed SEARCH_WORD, the others not).
// Type the word: only that session shows, with the snippet; open it; pin
// it, archive another, find that one under "Archived".
//
// Env: AGENTD_URL, AGENTD_TOKEN, AGENTD_E2E_OUT, CHROMIUM, NODE_PATH,
// SEARCH_WORD, SEARCH_SESSION (the session to find), OTHER_SESSION.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './browser.mjs';
import { Failure, check, until, visible } from './assert.mjs';

const { AGENTD_URL: URL, AGENTD_TOKEN: TOKEN, SEARCH_WORD: WORD, SEARCH_SESSION: FOUND, OTHER_SESSION: OTHER } = process.env;
const OUT = process.env.AGENTD_E2E_OUT || 'target/ui-screenshots';
if (!URL || !TOKEN || !WORD || !FOUND || !OTHER) {
  console.error('search.mjs needs AGENTD_URL, AGENTD_TOKEN, SEARCH_WORD, SEARCH_SESSION and OTHER_SESSION');
  process.exit(2);
}
mkdirSync(OUT, { recursive: true });

const { page, close } = await launch();
const pageErrors = [];
page.on('pageerror', (err) => pageErrors.push(err.message));
const tid = (id) => page.getByTestId(id);
const itemOf = (id) => page.locator(`[data-testid="session-item"][data-session-id="${id}"]`);
const listedIds = () => tid('session-item').evaluateAll((items) => items.map((li) => li.dataset.sessionId));

const scenarios = [];
const scenario = (name, fn) => scenarios.push({ name, fn });

scenario('sign in: every session is listed', async () => {
  await page.goto(URL);
  await tid('signin-token').fill(TOKEN);
  await tid('signin-submit').click();
  await visible(tid('session-search'), 'the search box');
  await until('both sessions in the list', async () => (await listedIds()).includes(FOUND) && (await listedIds()).includes(OTHER));
});

scenario('typing a word only a tool printed leaves its session, with the snippet', async () => {
  await tid('session-search').pressSequentially(WORD.toLowerCase(), { delay: 30 });
  await until('only the matching session', async () => {
    const ids = await listedIds();
    return ids.length === 1 && ids[0] === FOUND;
  });
  const snippet = itemOf(FOUND).getByTestId('session-snippet');
  await visible(snippet, 'the snippet');
  const marked = await snippet.locator('mark').allTextContents();
  check(marked.some((m) => m.toLowerCase() === WORD.toLowerCase()), `the word is marked in the snippet (${marked})`);
  await page.screenshot({ path: join(OUT, 'search-results.png') });
});

scenario('a search with no word says so', async () => {
  await tid('session-search').fill('***');
  await visible(tid('session-search-error'), 'the search error');
  check(/word/.test(await tid('session-search-error').textContent()), 'the error asks for a word');
  check((await listedIds()).length === 0, 'nothing is listed for it');
  await tid('session-search').fill(WORD);
  await until('the result again, the error gone', async () => JSON.stringify(await listedIds()) === JSON.stringify([FOUND]) && (await tid('session-search-error').isHidden()));
});

scenario('a result opens its session', async () => {
  await itemOf(FOUND).locator('a.session-link').click();
  await until('the URL names the session', async () => page.url().includes(FOUND));
  await visible(tid('composer'), 'the conversation');
  await until('the transcript shows the tool output', async () => (await tid('message-log').textContent()).includes(WORD));
});

scenario('pin it: pinned first once the search is cleared', async () => {
  await itemOf(FOUND).getByTestId('session-pin').click();
  await until('the pin pressed', async () => (await itemOf(FOUND).getByTestId('session-pin').getAttribute('aria-pressed')) === 'true');
  await tid('session-search').fill('');
  await until('the pinned session first of all', async () => {
    const ids = await listedIds();
    return ids.length > 1 && ids[0] === FOUND;
  });
  await tid('filter-pinned').click();
  await until('only the pinned session', async () => JSON.stringify(await listedIds()) === JSON.stringify([FOUND]));
  await tid('filter-pinned').click();
});

scenario('archive another: it leaves the list, and shows under Archived', async () => {
  await until('the other session listed', async () => (await listedIds()).includes(OTHER));
  await itemOf(OTHER).getByTestId('session-archive').click();
  await until('the archived session gone', async () => !(await listedIds()).includes(OTHER));
  await tid('filter-archived').click();
  await until('only the archived session', async () => JSON.stringify(await listedIds()) === JSON.stringify([OTHER]));
  await page.screenshot({ path: join(OUT, 'search-archived.png') });
});

let failed = false;
for (const { name, fn } of scenarios) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (err) {
    failed = true;
    console.log(`FAIL ${name}: ${err instanceof Failure ? err.message : err.stack}`);
    await page.screenshot({ path: join(OUT, 'search-failure.png') }).catch(() => {});
    break;
  }
}
if (pageErrors.length) {
  failed = true;
  console.log(`FAIL page errors: ${pageErrors.join('; ')}`);
}
await close();
process.exit(failed ? 1 : 0);
