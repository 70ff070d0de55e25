// The pure logic of the live session list, the new-chat choices and the
// thinking control (web/session-summaries.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  BUSY_POLL_MS, IDLE_POLL_MS, THINKING_MAX, THINKING_MIN,
  itemKey, listStatus, mergeFirstPage, newSessionBody, pollDelay, thinkingPatch,
} from '../session-summaries.js';

const s = (id, created_at, extra = {}) => ({ id, created_at, status: 'idle', title: id, totals: { cost_usd: 0 }, updated_at: created_at, ...extra });

test('the list is polled often while a session works, seldom when all are idle', () => {
  assert.equal(pollDelay([]), IDLE_POLL_MS);
  assert.equal(pollDelay([s('a', '1'), s('b', '2')]), IDLE_POLL_MS);
  assert.equal(pollDelay([s('a', '1'), s('b', '2', { status: 'running' })]), BUSY_POLL_MS);
  assert.equal(pollDelay([s('a', '1', { status: 'waiting' })]), BUSY_POLL_MS);
  assert.ok(BUSY_POLL_MS < IDLE_POLL_MS);
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
});

test('an item is rebuilt only when what it shows changed', () => {
  const a = s('a', '1');
  assert.equal(itemKey(a), itemKey({ ...a, last_seq: 99 }));
  assert.notEqual(itemKey(a), itemKey({ ...a, status: 'running' }));
  assert.notEqual(itemKey(a), itemKey({ ...a, totals: { cost_usd: 0.01 } }));
  assert.notEqual(itemKey(a), itemKey({ ...a, title: 'renamed' }));
});

test("the transcript's states map to the list's", () => {
  assert.equal(listStatus('running'), 'running');
  assert.equal(listStatus('waiting'), 'waiting');
  assert.equal(listStatus('idle'), 'idle');
  assert.equal(listStatus('failed'), 'idle');
});

test('the thinking control makes a PATCH body, or says what is wrong', () => {
  assert.deepEqual(thinkingPatch(false, 'anything'), { thinking: null });
  assert.deepEqual(thinkingPatch(true, ' 4096 '), { thinking: { budget_tokens: 4096 } });
  assert.deepEqual(thinkingPatch(true, String(THINKING_MIN)), { thinking: { budget_tokens: THINKING_MIN } });
  assert.deepEqual(thinkingPatch(true, String(THINKING_MAX)), { thinking: { budget_tokens: THINKING_MAX } });
  for (const bad of ['', '1023', String(THINKING_MAX + 1), '2048.5', '-4096', 'lots', '1e4']) {
    assert.match(thinkingPatch(true, bad).error, /1024 to 1000000/, bad);
  }
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
