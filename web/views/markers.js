// Markers in the conversation: turn status, compaction, checkpoints, errors.

import { h, fill } from '../dom.js';
import * as fmt from '../format.js';

const STATUS_TEXT = {
  running: 'Working…',
  waiting: 'Waiting for you',
  completed: 'Completed',
  interrupted: 'Interrupted',
  failed: 'Failed',
  max_turns: 'Stopped: too many model calls',
  timeout: 'Stopped: timed out',
  budget_exceeded: 'Stopped: budget exceeded',
  circuit_breaker: 'Stopped: repeated failures',
};

export function turnStatus() {
  return h('footer', { class: 'turn-status', testid: 'turn-status', dataset: { status: 'running' }, 'aria-live': 'off' }, STATUS_TEXT.running);
}

/** Fill a turn's footer from its turn.finished event (or a live status). */
export function setTurnStatus(el, status, finished) {
  el.dataset.status = status;
  const parts = [h('strong', null, STATUS_TEXT[status] || status)];
  if (finished) {
    if (finished.agent_status) parts.push(h('span', null, `agent: ${finished.agent_status}`));
    if (finished.duration_ms != null) parts.push(h('span', null, fmt.duration(finished.duration_ms)));
    const u = finished.usage || {};
    parts.push(h('span', null, `${fmt.tokens(u.input_tokens)} in · ${fmt.tokens(u.output_tokens)} out`));
    parts.push(h('span', null, fmt.cost(finished.cost_usd)));
    if (finished.error && finished.error.message) parts.push(h('span', { class: 'turn-error' }, finished.error.message));
  }
  fill(el, parts);
}

export function compactionMarker({ trigger, tokens_before, tokens_after, summary }) {
  return h(
    'div',
    { class: 'marker compaction-marker', testid: 'compaction-marker', role: 'note' },
    h('span', { class: 'marker-label' }, `Context compacted (${trigger}): ${fmt.tokens(tokens_before)} → ${fmt.tokens(tokens_after)} tokens`),
    summary ? h('details', null, h('summary', null, 'Summary the agent kept'), h('div', { class: 'marker-summary' }, summary)) : null,
  );
}

/** actions.rewind(id, marker) / actions.fork(id) */
export function checkpointMarker({ checkpoint_id, files }, actions) {
  const list = Array.isArray(files) ? files : [];
  const label = list.length ? `Checkpoint · ${list.length} file${list.length === 1 ? '' : 's'} changed since the last one` : 'Checkpoint';
  const marker = h(
    'div',
    { class: 'marker checkpoint-marker', testid: 'checkpoint-marker', dataset: { checkpointId: checkpoint_id }, role: 'note' },
    h('span', { class: 'marker-label', title: list.join('\n') }, label),
  );
  marker.append(
    h(
      'span',
      { class: 'marker-actions' },
      h('button', { type: 'button', class: 'small', testid: 'rewind', title: 'Put files and history back as they were here', onclick: () => actions.rewind(checkpoint_id, marker) }, 'Rewind'),
      h('button', { type: 'button', class: 'small', testid: 'fork', title: 'A new session from this point', onclick: () => actions.fork(checkpoint_id) }, 'Fork'),
    ),
  );
  return marker;
}

export function errorNote({ code, message }) {
  return h('div', { class: 'error-note', dataset: { code } }, h('strong', null, 'Error'), ` ${message || code}`);
}

/** Live output stopped at a limit (`output.truncated`); results still follow. */
export function truncationNote({ limit, limit_bytes }) {
  const size = fmt.bytes(limit_bytes);
  const text = limit === 'turn'
    ? `Live output stopped: this turn streamed its limit of ${size}. Final messages and results still follow.`
    : `Live output stopped after ${size}. The result keeps the start and the end.`;
  return h('div', { class: 'marker truncation-note', testid: 'output-truncated', role: 'note', dataset: { limit } }, text);
}
