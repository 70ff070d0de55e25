// One session's conversation: header with usage, the plan, the message log
// fed by the event stream, the connection banner and the composer.

import { api, sessionPath, requestId } from '../api.js';
import { h } from '../dom.js';
import { afterFrame } from '../frame.js';
import * as fmt from '../format.js';
import { SessionStream } from '../stream.js';
import { Transcript } from './transcript.js';
import { TodoPanel } from './todos.js';
import { historySection } from './history.js';
import { modal } from './dialog.js';
import { notify } from './toast.js';
import { sessionHref } from './sessions.js';
import { SessionSettings } from './session-settings.js';
import { listStatus } from '../session-summaries.js';
import { Attachments, messageContent } from '../attach.js';
import { CommandsPanel } from './commands.js';

const STATE_TEXT = { idle: 'Idle', running: 'Working…', waiting: 'Waiting for you' };

export class Conversation {
  /** session: the session object; app: {sessions, workspace}. */
  constructor(session, app) {
    this.session = session;
    this.app = app;
    this.id = session.id;
    this.loadSeq = session.last_seq || 0;
    this.reconciled = false;
    this.stick = true;
    this.build();
    this.transcript = new Transcript(this.log, {
      actions: {
        answerPermission: (requestId, body) => api('POST', sessionPath(this.id, `/permissions/${encodeURIComponent(requestId)}`), body),
        answerQuestion: (requestId, body) => api('POST', sessionPath(this.id, `/questions/${encodeURIComponent(requestId)}`), body),
        rewind: (checkpointId) => this.rewind(checkpointId).catch((err) => notify(`Rewind failed: ${err.message}`)),
        fork: (checkpointId) => this.fork(checkpointId).catch((err) => notify(`Fork failed: ${err.message}`)),
      },
      onState: (state) => this.setState(state),
      onUsage: (totals) => this.setUsage(totals),
      onTodos: (todos) => this.todos.update(todos),
      onSession: (fields) => this.setTitle(fields.title),
      onTurnAdded: (el) => this.watchSize(el),
      onTurnFinished: () => this.refreshSoon(),
      onFiles: () => this.app.workspace.refreshSoon(),
    });
    this.transcriptLoad = api('GET', sessionPath(this.id, '/messages')).catch(() => null);
    this.stream = new SessionStream(this.id, {
      onEvent: (ev) => this.onEvent(ev),
      onState: (state, err) => this.setConnection(state, err),
    }).start();
    if (this.loadSeq === 0) this.reconcile();
    this.onKey = (event) => {
      if (event.key !== 'Escape' || event.defaultPrevented || document.querySelector('dialog[open]')) return;
      if (this.transcript.state === 'idle') return;
      event.preventDefault();
      this.interrupt();
    };
    document.addEventListener('keydown', this.onKey);
  }

  build() {
    this.titleEl = h('h2', { class: 'conv-title', testid: 'conversation-title' }, this.session.title || 'Untitled session');
    this.stateEl = h('span', { class: 'conv-state', testid: 'session-state' }, STATE_TEXT.idle);
    this.usageEl = h('span', { class: 'usage', testid: 'usage', title: '' }, '');
    this.settings = new SessionSettings(this.session, { onChanged: (session) => this.app.sessions.patch(this.id, session) });
    this.todos = new TodoPanel();
    // Busy while the history replays, so screen readers announce only what is new.
    this.log = h('div', { class: 'log', role: 'log', 'aria-live': 'polite', 'aria-busy': this.loadSeq > 0 ? 'true' : null, 'aria-label': 'Conversation', tabindex: '0', testid: 'message-log', dataset: { lastSeq: '0' } });
    // Follow new content until the reader scrolls up; reaching the end again
    // resumes following. Content growing below never counts as scrolling away.
    this.lastScrollTop = 0;
    this.log.addEventListener('scroll', () => {
      const top = this.log.scrollTop;
      if (top + this.log.clientHeight >= this.log.scrollHeight - 48) this.stick = true;
      else if (top < this.lastScrollTop) this.stick = false;
      this.lastScrollTop = top;
    });
    this.banner = h('div', { class: 'connection-banner', role: 'status', testid: 'connection-banner', hidden: true });
    this.composer = h('textarea', {
      class: 'composer-input',
      testid: 'composer',
      rows: '2',
      placeholder: 'Message the agent — Enter sends, Shift+Enter for a new line',
      'aria-label': 'Message',
    });
    this.composer.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.altKey && !event.isComposing) {
        event.preventDefault();
        this.send();
      }
    });
    // Images pasted or dropped into the composer go with the next message.
    this.attachments = new Attachments(this.composer, notify);
    this.sendButton = h('button', { type: 'submit', class: 'primary', testid: 'send' }, 'Send');
    this.interruptButton = h('button', { type: 'button', class: 'danger', testid: 'interrupt', hidden: true, title: 'Stop the running turn (Escape)', onclick: () => this.interrupt() }, 'Stop');
    const form = h('form', { class: 'composer', 'aria-label': 'Send a message' }, this.attachments.el, this.composer, h('div', { class: 'composer-actions' }, this.interruptButton, this.sendButton));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.send();
    });
    this.el = h(
      'div',
      { class: 'conversation', dataset: { sessionId: this.id, state: 'idle' } },
      h('header', { class: 'conv-head' }, this.titleEl, h('div', { class: 'conv-meta' }, this.stateEl, this.usageEl, this.settings.el)),
      this.todos.el,
      this.log,
      this.banner,
      new CommandsPanel(this.id, notify).el,
      form,
    );
  }

  onEvent(ev) {
    this.transcript.apply(ev);
    this.log.dataset.lastSeq = String(ev.seq);
    if (!this.reconciled && ev.seq >= this.loadSeq) this.reconcile();
    // While the history replays, scrolling would force a layout per frame;
    // reconcile() scrolls once at the end.
    if (this.reconciled) afterFrame(this.scrollDown);
  }

  scrollDown = () => {
    if (this.stick) this.log.scrollTop = this.log.scrollHeight;
  };

  followEnd() {
    afterFrame(this.scrollDown);
  }

  /**
   * The newest turn can grow after we scrolled to it (an off-screen turn is
   * laid out at an estimated size until it is shown): follow it.
   */
  watchSize(turnEl) {
    if (!this.resizes) this.resizes = new ResizeObserver(() => this.reconciled && this.followEnd());
    this.resizes.disconnect();
    this.resizes.observe(turnEl);
  }

  /** Once the replay has caught up: show transcript-only history, mark rewound turns. */
  async reconcile() {
    this.reconciled = true;
    this.log.removeAttribute('aria-busy');
    afterFrame(this.scrollDown);
    const data = await this.transcriptLoad;
    if (!data || this.closed) return;
    const seen = this.transcript.turns;
    const missing = data.messages.filter((m) => !m.turn_id || (!seen.has(m.turn_id) && !this.transcript.commandRuns.has(m.turn_id)));
    if (missing.length) this.log.prepend(historySection(missing));
    this.transcript.markRewound(new Set(data.messages.map((m) => m.turn_id)));
    afterFrame(this.scrollDown);
  }

  setState(state) {
    this.el.dataset.state = state;
    this.stateEl.textContent = STATE_TEXT[state] || state;
    this.interruptButton.hidden = state === 'idle';
    // The list follows at once (once the replay is over, its states are history).
    if (this.reconciled) this.app.sessions.streamStatus(this.id, listStatus(state));
    if (this.stateShown !== state) {
      this.stateShown = state;
      this.refreshSoon();
    }
  }

  setUsage(t) {
    const parts = [`${fmt.tokens(t.input_tokens)} in`, `${fmt.tokens(t.output_tokens)} out`, fmt.cost(t.cost_usd)];
    if (t.context_tokens) parts.push(`context ${fmt.tokens(t.context_tokens)}`);
    this.usageEl.textContent = parts.join(' · ');
    this.usageEl.title = `cache read ${t.cache_read_tokens}, cache write ${t.cache_write_tokens} tokens`;
    const listed = this.app.sessions.find(this.id);
    if (this.reconciled && listed) this.app.sessions.patch(this.id, { totals: { ...listed.totals, cost_usd: t.cost_usd } });
  }

  setTitle(title, { fromList = false } = {}) {
    if (!title) return;
    this.titleEl.textContent = title;
    document.title = `${title} · agentd`;
    if (!fromList) this.app.sessions.patch(this.id, { title });
  }

  setConnection(state, err) {
    if (state === 'open') {
      this.banner.hidden = true;
    } else if (state === 'gone') {
      this.banner.textContent = err && err.status === 404 ? 'This session no longer exists.' : 'Signed out.';
      this.banner.hidden = false;
    } else {
      this.banner.textContent = 'Connection lost — reconnecting…';
      this.banner.hidden = false;
    }
  }

  /** The session list entry follows the session (status, title, cost). */
  refreshSoon() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(async () => {
      try {
        const sentAt = performance.now();
        const session = await api('GET', sessionPath(this.id));
        if (session.title) this.setTitle(session.title, { fromList: true });
        this.app.sessions.patch(this.id, session, sentAt);
      } catch {
        // The next event or the list's own refresh tries again.
      }
    }, 400);
  }

  async send() {
    const text = this.composer.value;
    const images = this.attachments.images;
    if (!text.trim() && !images.length) return;
    const body = { content: messageContent(text, images), client_request_id: requestId() };
    if (this.transcript.state !== 'idle') body.queue = true;
    this.sendButton.disabled = true;
    try {
      const answer = await api('POST', sessionPath(this.id, '/messages'), body);
      this.composer.value = '';
      this.attachments.clear();
      this.stick = true;
      if (answer && answer.state === 'queued') notify('Queued: it runs when the current turn ends.');
    } catch (err) {
      notify(`Not sent: ${err.message}`);
    } finally {
      this.sendButton.disabled = false;
      this.composer.focus();
    }
  }

  async interrupt() {
    try {
      await api('POST', sessionPath(this.id, '/interrupt'));
    } catch (err) {
      if (err.code !== 'no_turn_running') notify(`Could not stop the turn: ${err.message}`);
    }
  }

  async rewind(checkpointId) {
    const done = await modal({
      title: 'Rewind to this checkpoint?',
      body: [h('p', null, 'The workspace files go back to how they were here, and this turn and everything after it leave the conversation the agent sees.')],
      yes: 'Rewind',
      danger: true,
      onYes: () => api('POST', sessionPath(this.id, '/rewind'), { checkpoint_id: checkpointId }),
    });
    if (!done) return;
    notify(`Rewound: ${done.files_restored.length} file(s) restored, ${done.messages_removed} message(s) removed.`);
    const data = await api('GET', sessionPath(this.id, '/messages'));
    this.transcript.markRewound(new Set(data.messages.map((m) => m.turn_id)));
    this.app.workspace.refreshSoon();
  }

  /** A new session holding the conversation as it was at this checkpoint. */
  async fork(checkpointId) {
    const [{ checkpoints }, { messages }] = await Promise.all([
      api('GET', sessionPath(this.id, '/checkpoints')),
      api('GET', sessionPath(this.id, '/messages')),
    ]);
    const checkpoint = checkpoints.find((c) => c.id === checkpointId);
    if (!checkpoint) throw new Error('this checkpoint is gone');
    const before = messages.filter((m) => m.position < checkpoint.message_position);
    if (!before.length) {
      notify('Nothing before this checkpoint to fork: it is the start of the conversation.');
      return;
    }
    const session = await api('POST', sessionPath(this.id, '/fork'), { at_message_id: before[before.length - 1].id });
    await this.app.sessions.refresh();
    notify(`Forked into “${session.title || 'a new session'}”.`);
    location.hash = sessionHref(session.id);
  }

  focus() {
    this.composer.focus();
  }

  destroy() {
    this.closed = true;
    this.stream.close();
    if (this.resizes) this.resizes.disconnect();
    clearTimeout(this.refreshTimer);
    document.removeEventListener('keydown', this.onKey);
  }
}
