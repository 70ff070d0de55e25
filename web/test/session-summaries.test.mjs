// The pure logic of the live session list, the new-chat choices and the
// thinking control (web/session-summaries.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  BUSY_POLL_MS, IDLE_POLL_MS, THINKING_MAX, THINKING_MIN,
  cursorAfterPoll, itemKey, listStatus, mergeFirstPage, mergeFirstResults, newSessionBody, pollDelay, streamedSince, thinkingDefaultText, thinkingPatch,
} from '../session-summaries.js';

const s = (id, created_at, extra = {}) => ({ id, created_at, status: 'idle', title: id, totals: { cost_usd: 0 }, updated_at: created_at, ...extra });

test('the list is polled often while a session works, seldom when all are idle', () => {
  assert.equal(pollDelay([]), IDLE_POLL_MS);
  assert.equal(pollDelay([s('a', '1'), s('b', '2')]), IDLE_POLL_MS);
  assert.equal(pollDelay([s('a', '1'), s('b', '2', { status: 'running' })]), BUSY_POLL_MS);
  assert.equal(pollDelay([s('a', '1', { status: 'waiting' })]), BUSY_POLL_MS);
  assert.ok(BUSY_POLL_MS < IDLE_POLL_MS);
});

test('the open session working does not make the list polled often: its stream keeps it current', () => {
  const list = [s('a', '1'), s('b', '2', { status: 'running' })];
  assert.equal(pollDelay(list, 'b'), IDLE_POLL_MS);
  assert.equal(pollDelay(list, 'a'), BUSY_POLL_MS);
  assert.equal(pollDelay([...list, s('c', '3', { status: 'waiting' })], 'b'), BUSY_POLL_MS);
});

test("a poll sent before the open session's stream told its status does not put the old one back", () => {
  const shown = [s('b', '2', { status: 'idle' }), s('a', '1')];
  // The poll left while b ran; b finished (its stream said idle) before the answer came.
  const streamed = { id: 'b', status: 'idle', at: 200 };
  const page = [s('b', '2', { status: 'running', totals: { cost_usd: 0.2 } }), s('a', '1', { status: 'running' })];
  const merged = mergeFirstPage(shown, page, false, streamedSince(streamed, 'b', 100));
  assert.equal(merged[0].status, 'idle');
  assert.equal(merged[0].totals.cost_usd, 0.2, 'the rest of the poll is taken');
  assert.equal(merged[1].status, 'running', 'other sessions take the poll');
  // A poll sent after the stream's news is newer: it is taken whole.
  assert.equal(streamedSince(streamed, 'b', 300), null);
  assert.equal(mergeFirstPage(shown, page, false, streamedSince(streamed, 'b', 300))[0].status, 'running');
  // The stream of a session no longer open says nothing.
  assert.equal(streamedSince(streamed, 'a', 100), null);
  assert.equal(streamedSince(null, 'b', 100), null);
});

test('"Show older sessions" stays hidden once every page is loaded', () => {
  // Only the first page shown: its cursor, null when it is the last.
  assert.equal(cursorAfterPoll(50, null, 'c50', 50), 'c50');
  assert.equal(cursorAfterPoll(10, 'old', null, 50), null);
  // Older pages loaded up to the last one (cursor null): a poll does not bring it back.
  assert.equal(cursorAfterPoll(120, null, 'c50', 50), null);
  // Older pages loaded with more to come: their cursor stays.
  assert.equal(cursorAfterPoll(100, 'c100', 'c50', 50), 'c100');
});

test('a fresh first page replaces its sessions and keeps older pages already shown', () => {
  const shown = [s('c', '3', { status: 'running' }), s('b', '2'), s('a', '1')];
  const page = [s('d', '4'), s('c', '3', { status: 'idle', totals: { cost_usd: 0.5 } })];
  const merged = mergeFirstPage(shown, page, true);
  assert.deepEqual(merged.map((x) => x.id), ['d', 'c', 'b', 'a']);
  assert.equal(merged[1].status, 'idle');
  assert.equal(merged[1].totals.cost_usd, 0.5);
});

test('a session missing from a fresh page it would be in was deleted elsewhere', () => {
  const shown = [s('c', '3'), s('b', '2'), s('a', '1')];
  assert.deepEqual(mergeFirstPage(shown, [s('c', '3'), s('a', '1')], true).map((x) => x.id), ['c', 'a']);
  // The last page: nothing older exists.
  assert.deepEqual(mergeFirstPage(shown, [s('c', '3')], false).map((x) => x.id), ['c']);
  // Same created_at: the id orders them, as on the server.
  const tied = [s('y', '5'), s('x', '5')];
  assert.deepEqual(mergeFirstPage(tied, [s('y', '5')], true).map((x) => x.id), ['y', 'x']);
  // Pinned first: a loaded unpinned session newer than the pinned last one
  // of the page is still after it, and kept.
  const pinned = [s('old', '1', { pinned: true }), s('new', '9'), s('older', '0')];
  assert.deepEqual(mergeFirstPage(pinned, [s('old', '1', { pinned: true })], true).map((x) => x.id), ['old', 'new', 'older']);
});

test('a search polled again keeps the further pages loaded', () => {
  const shown = [s('a', '1'), s('b', '2'), s('c', '3'), s('d', '4')];
  // Pages of two: a, b first, c, d loaded after; b has left the first page.
  const merged = mergeFirstResults(shown, [s('a', '1'), s('c', '3', { status: 'running' })], 2);
  assert.deepEqual(merged.map((x) => x.id), ['a', 'c', 'd']);
  assert.equal(merged[1].status, 'running');
  // Only the first page shown: the new one replaces it.
  assert.deepEqual(mergeFirstResults(shown.slice(0, 2), [s('d', '4')], 2).map((x) => x.id), ['d']);
});

test('an item is rebuilt only when what it shows changed', () => {
  const a = s('a', '2026-01-01T10:00:00Z');
  const now = Date.parse('2026-01-01T10:00:05Z');
  assert.equal(itemKey(a, now), itemKey({ ...a, last_seq: 99 }, now));
  assert.notEqual(itemKey(a, now), itemKey({ ...a, status: 'running' }, now));
  assert.notEqual(itemKey(a, now), itemKey({ ...a, totals: { cost_usd: 0.01 } }, now));
  assert.notEqual(itemKey(a, now), itemKey({ ...a, title: 'renamed' }, now));
});

test('"last activity" moves on with time alone: "just now" becomes minutes ago', () => {
  const a = s('a', '2026-01-01T10:00:00Z');
  const at = (iso) => itemKey(a, Date.parse(iso));
  assert.equal(at('2026-01-01T10:00:05Z'), at('2026-01-01T10:00:20Z'), 'still "just now"');
  assert.notEqual(at('2026-01-01T10:00:05Z'), at('2026-01-01T10:03:00Z'));
  assert.notEqual(at('2026-01-01T10:03:00Z'), at('2026-01-01T10:09:00Z'));
});

test("the transcript's states map to the list's", () => {
  assert.equal(listStatus('running'), 'running');
  assert.equal(listStatus('waiting'), 'waiting');
  assert.equal(listStatus('idle'), 'idle');
  assert.equal(listStatus('failed'), 'idle');
});

test('the thinking budget field makes a PATCH body, or says what is wrong', () => {
  // Empty: back to the default, whatever that is.
  assert.deepEqual(thinkingPatch(''), { thinking: null });
  assert.deepEqual(thinkingPatch('  '), { thinking: null });
  assert.deepEqual(thinkingPatch(' 4096 '), { thinking: { budget_tokens: 4096 } });
  assert.deepEqual(thinkingPatch(String(THINKING_MIN)), { thinking: { budget_tokens: THINKING_MIN } });
  assert.deepEqual(thinkingPatch(String(THINKING_MAX)), { thinking: { budget_tokens: THINKING_MAX } });
  for (const bad of ['0', '1023', String(THINKING_MAX + 1), '2048.5', '-4096', 'lots', '1e4']) {
    assert.match(thinkingPatch(bad).error, /1024 to 1000000, or empty for the default/, bad);
  }
});

test('an empty budget field tells what the default is: a budget, or no thinking', () => {
  assert.equal(thinkingDefaultText({ budget_tokens: 8192 }), 'default (8192)');
  assert.equal(thinkingDefaultText(null), 'default (off)');
  assert.equal(thinkingDefaultText(undefined), 'default (off)');
});

test('a one-click new chat sends only what differs from the defaults', () => {
  const catalog = {
    defaultProfile: 'default',
    defaultModel: 'sonnet',
    projects: [{ name: 'demo', profile: null }, { name: 'pinned', profile: 'deep' }],
  };
  assert.deepEqual(newSessionBody({ project: '', profile: 'default', model: 'sonnet' }, catalog), {});
  assert.deepEqual(newSessionBody({ project: '', profile: 'deep', model: 'haiku' }, catalog), { profile: 'deep', model: 'haiku' });
  assert.deepEqual(newSessionBody({ project: 'demo', profile: 'deep', model: 'sonnet' }, catalog), { project: 'demo', profile: 'deep' });
  // A project on a profile of its own: no profile is sent (the server would refuse another).
  assert.deepEqual(newSessionBody({ project: 'pinned', profile: 'other', model: 'sonnet' }, catalog), { project: 'pinned' });
  assert.deepEqual(newSessionBody({ project: 'gone', profile: 'default', model: 'sonnet' }, catalog), {});
});
