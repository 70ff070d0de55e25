// Which sessions a browser notification is shown for (web/views/notifier.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newlyWaiting } from '../views/notifier.js';

const s = (id, status) => ({ id, status });

test('a session that starts waiting out of view is new', () => {
  const before = new Map([['a', 'running'], ['b', 'running']]);
  const got = newlyWaiting(before, [s('a', 'waiting'), s('b', 'waiting')], 'b', false);
  assert.deepEqual(got.map((x) => x.id), ['a']);
});

test('the session in view counts while the tab is hidden', () => {
  const before = new Map([['b', 'running']]);
  assert.deepEqual(newlyWaiting(before, [s('b', 'waiting')], 'b', true).map((x) => x.id), ['b']);
});

test('one that was waiting already, or is not waiting, is not new', () => {
  const before = new Map([['a', 'waiting']]);
  assert.deepEqual(newlyWaiting(before, [s('a', 'waiting'), s('c', 'running')], null, true), []);
  // A session first seen waiting (new to the list) is new.
  assert.deepEqual(newlyWaiting(before, [s('d', 'waiting')], null, false).map((x) => x.id), ['d']);
});
