// Pure logic of the live session list and the session settings (no DOM, no
// fetch), so node's test runner covers it (web/test/session-summaries.test.mjs).

import { ago } from './format.js';
//
// The list stays live from two sources: the open session's own event stream
// (its status and cost change as its events arrive), and a poll of the first
// page of `GET /v1/sessions` for the others — often while one of them works,
// seldom while all are idle.

/** Poll this often while a listed session runs or waits for someone. */
export const BUSY_POLL_MS = 3_000;
/** And this often while every listed session is idle. */
export const IDLE_POLL_MS = 15_000;

/**
 * How long until the next poll of the list. The open session (`openId`) does
 * not count: its own event stream keeps its item current.
 */
export function pollDelay(sessions, openId = null) {
  const busy = sessions.some((s) => s.id !== openId && s.status && s.status !== 'idle');
  return busy ? BUSY_POLL_MS : IDLE_POLL_MS;
}

/**
 * The "Show older sessions" cursor after a poll of the first page: the
 * page's own while only that page is shown, else the one of the older pages
 * already loaded (`null` once the last of them is).
 */
export function cursorAfterPoll(shownCount, shownCursor, pageCursor, pageSize) {
  return shownCount <= pageSize ? pageCursor : shownCursor;
}

/**
 * A fresh first page merged into the list as shown: the page's sessions (new
 * ones included) replace theirs, older pages already loaded stay after it,
 * and a session gone from the page but before its last in the list's order
 * is gone from the server (deleted elsewhere). The order is the server's:
 * pinned first, then newest first by created_at, id.
 */
export function mergeFirstPage(current, page, pageFull, streamed = null) {
  const fresh = new Set(page.map((s) => s.id));
  const last = page[page.length - 1];
  const older = current.filter((s) => !fresh.has(s.id) && pageFull && last && comesAfter(s, last));
  return page.map((s) => keepStreamed(s, streamed)).concat(older);
}

/**
 * A fresh first page of search results (best match first, `pageSize` of
 * them) in place of the first one shown: the results of further pages
 * already loaded stay after it, less those now on the first.
 */
export function mergeFirstResults(current, page, pageSize, streamed = null) {
  const fresh = new Set(page.map((s) => s.id));
  const further = current.slice(pageSize).filter((s) => !fresh.has(s.id));
  return page.map((s) => keepStreamed(s, streamed)).concat(further);
}

/**
 * What the open session's stream last told of its status (`{id, status, at}`),
 * when it told it after a fetch sent at `sentAt`: then the fetch is older
 * and must not overwrite it. Else null.
 */
export function streamedSince(streamed, openId, sentAt) {
  return streamed && streamed.id === openId && streamed.at >= sentAt ? streamed : null;
}

/**
 * `streamed`: `{id, status}` of the open session when its event stream told
 * its status after the poll was sent; the poll's older status loses.
 */
function keepStreamed(session, streamed) {
  return streamed && session.id === streamed.id ? { ...session, status: streamed.status } : session;
}

/** Whether `a` is after `b` in the list: pinned first, then newest first. */
function comesAfter(a, b) {
  if (Boolean(a.pinned) !== Boolean(b.pinned)) return !a.pinned;
  if (a.created_at !== b.created_at) return a.created_at < b.created_at;
  return a.id < b.id;
}

/**
 * What a list item shows of a session at `now`: an item whose key is
 * unchanged is kept as it is. The age ("5 minutes ago") is in it, so an item
 * is rebuilt when time alone changes what it says.
 */
export function itemKey(session, now = Date.now()) {
  const cost = session.totals ? session.totals.cost_usd : 0;
  const found = [session.pinned, session.archived, session.tags, session.snippet];
  return JSON.stringify([session.title, session.status, cost, session.updated_at, ago(session.updated_at, now), found]);
}

/** The transcript's state for the list: `idle`, `running` or `waiting`, as the server says them. */
export function listStatus(state) {
  return state === 'running' || state === 'waiting' ? state : 'idle';
}

/** Anthropic's least thinking budget, and the most agentd takes (as in config validation). */
export const THINKING_MIN = 1024;
export const THINKING_MAX = 1_000_000;

/**
 * The `thinking` of a PATCH body from the header's budget field: empty is
 * null (back to the default: the profile's or model's budget, or none), a
 * number is the session's own budget; an error message for one out of bounds.
 */
export function thinkingPatch(budgetText) {
  const text = String(budgetText).trim();
  if (text === '') return { thinking: null };
  const budget = Number(text);
  if (!/^\d+$/.test(text) || budget < THINKING_MIN || budget > THINKING_MAX) {
    return { error: `The thinking budget must be a whole number of tokens from ${THINKING_MIN} to ${THINKING_MAX}, or empty for the default.` };
  }
  return { thinking: { budget_tokens: budget } };
}

/** What an empty budget field means for the session (its `default_thinking`). */
export function thinkingDefaultText(defaultThinking) {
  return defaultThinking ? `default (${defaultThinking.budget_tokens})` : 'default (off)';
}

/**
 * The body of `POST /v1/sessions` for a one-click new chat with the inline
 * choices: only what differs from the server's defaults is sent, and a
 * project that brings its own profile sends none.
 */
export function newSessionBody(choices, catalog) {
  const body = {};
  const project = choices.project && catalog.projects.find((p) => p.name === choices.project);
  if (project) body.project = project.name;
  if (choices.profile && choices.profile !== catalog.defaultProfile && !(project && project.profile)) body.profile = choices.profile;
  if (choices.model && choices.model !== catalog.defaultModel) body.model = choices.model;
  return body;
}
