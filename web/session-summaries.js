// Pure logic of the live session list and the session settings (no DOM, no
// fetch), so node's test runner covers it (web/test/session-summaries.test.mjs).
//
// The list stays live from two sources: the open session's own event stream
// (its status and cost change as its events arrive), and a poll of the first
// page of `GET /v1/sessions` for the others — often while one of them works,
// seldom while all are idle.

/** Poll this often while a listed session runs or waits for someone. */
export const BUSY_POLL_MS = 3_000;
/** And this often while every listed session is idle. */
export const IDLE_POLL_MS = 15_000;

/** How long until the next poll of the list. */
export function pollDelay(sessions) {
  const busy = sessions.some((s) => s.status && s.status !== 'idle');
  return busy ? BUSY_POLL_MS : IDLE_POLL_MS;
}

/**
 * A fresh first page merged into the list as shown: the page's sessions (new
 * ones included) replace theirs, older pages already loaded stay after it,
 * and a session gone from the page but newer than its last is gone from the
 * server (deleted elsewhere). Sessions are newest first by created_at, id.
 */
export function mergeFirstPage(current, page, pageFull) {
  const fresh = new Set(page.map((s) => s.id));
  const last = page[page.length - 1];
  const older = current.filter((s) => !fresh.has(s.id) && pageFull && last && isOlder(s, last));
  return page.concat(older);
}

function isOlder(a, b) {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at;
  return a.id < b.id;
}

/** What a list item shows of a session: an item whose key is unchanged is kept as it is. */
export function itemKey(session) {
  const cost = session.totals ? session.totals.cost_usd : 0;
  return JSON.stringify([session.title, session.status, cost, session.updated_at]);
}

/** The transcript's state for the list: `idle`, `running` or `waiting`, as the server says them. */
export function listStatus(state) {
  return state === 'running' || state === 'waiting' ? state : 'idle';
}

/** Anthropic's least thinking budget, and the most agentd takes (as in config validation). */
export const THINKING_MIN = 1024;
export const THINKING_MAX = 1_000_000;
export const THINKING_DEFAULT = 8192;

/**
 * The `thinking` of a PATCH body from the header's controls: null (the
 * profile's or model's default) when off, else {budget_tokens}; an error
 * message for a budget out of bounds.
 */
export function thinkingPatch(enabled, budgetText) {
  if (!enabled) return { thinking: null };
  const text = String(budgetText).trim();
  const budget = Number(text);
  if (!/^\d+$/.test(text) || budget < THINKING_MIN || budget > THINKING_MAX) {
    return { error: `The thinking budget must be a whole number of tokens from ${THINKING_MIN} to ${THINKING_MAX}.` };
  }
  return { thinking: { budget_tokens: budget } };
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
