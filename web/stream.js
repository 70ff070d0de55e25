// A session's event stream (SSE). EventSource resumes by itself with
// Last-Event-ID after a dropped connection; when it gives up (an HTTP error,
// say the server restarted and answered 503) we open a new one with
// ?after=<last seq>. Events are applied once each, in seq order.

import { api, sessionPath } from './api.js';

export const EVENT_TYPES = [
  'turn.started', 'message.delta', 'message.completed', 'tool.started', 'tool.output',
  'output.truncated', 'tool.finished', 'permission.requested', 'permission.resolved', 'question.asked',
  'question.answered', 'todo.updated', 'usage', 'compaction', 'checkpoint.created',
  'command.ran', 'turn.finished', 'session.updated', 'error',
];

const MAX_BACKOFF_MS = 15_000;

export class SessionStream {
  /**
   * onEvent(envelope) for each new event; onState('open'|'reconnecting'|'gone').
   */
  constructor(sessionId, { onEvent, onState }) {
    this.sessionId = sessionId;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastSeq = 0;
    this.source = null;
    this.closed = false;
    this.backoff = 500;
    this.timer = null;
    this.handle = (message) => this.receive(message);
  }

  start() {
    this.open();
    return this;
  }

  open() {
    if (this.closed) return;
    const after = this.lastSeq > 0 ? `?after=${this.lastSeq}` : '';
    const source = new EventSource(sessionPath(this.sessionId, `/events${after}`));
    this.source = source;
    for (const type of EVENT_TYPES) source.addEventListener(type, this.handle);
    source.onopen = () => {
      this.backoff = 500;
      this.onState('open');
    };
    source.onerror = () => {
      if (this.closed || source !== this.source) return;
      if (source.readyState === EventSource.CLOSED) this.recover();
      else this.onState('reconnecting');
    };
  }

  receive(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    // Replay and live overlap only at the seams; a seq seen once is skipped.
    if (typeof event.seq !== 'number' || event.seq <= this.lastSeq) return;
    this.lastSeq = event.seq;
    this.onEvent(event);
  }

  /** EventSource gave up: find out why, then try again later (or stop). */
  recover() {
    this.onState('reconnecting');
    this.detach();
    clearTimeout(this.timer);
    this.timer = setTimeout(async () => {
      if (this.closed) return;
      try {
        await api('GET', sessionPath(this.sessionId));
      } catch (err) {
        if (err.status === 404 || err.status === 401) {
          this.onState('gone', err);
          this.close();
          return;
        }
      }
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
      this.open();
    }, this.backoff);
  }

  detach() {
    if (!this.source) return;
    for (const type of EVENT_TYPES) this.source.removeEventListener(type, this.handle);
    this.source.onopen = null;
    this.source.onerror = null;
    this.source.close();
    this.source = null;
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.detach();
  }
}
