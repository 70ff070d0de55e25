// Applies a session's events (DESIGN §8) to the message log, one at a time,
// in seq order. Every turn is a <section>: the user's message, what the
// agent did (messages, tool cards, requests, markers), and a status footer.
// Subagent events (parent_call_id) go inside their Task card.

import { h } from '../dom.js';
import { AssistantMessage, userMessage } from './message.js';
import { ToolCard } from './toolcard.js';
import { PermissionCard, QuestionCard } from './requests.js';
import { turnStatus, setTurnStatus, compactionMarker, checkpointMarker, errorNote, truncationNote } from './markers.js';
import { todoItems } from './todos.js';
import { commandRanMarker } from './commands.js';

const ZERO = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0 };

function addUsage(into, u, cost) {
  into.input_tokens += u.input_tokens || 0;
  into.output_tokens += u.output_tokens || 0;
  into.cache_read_tokens += u.cache_read_tokens || 0;
  into.cache_write_tokens += u.cache_write_tokens || 0;
  into.cost_usd += cost || 0;
}

export class Transcript {
  /**
   * log: the role="log" element. hooks: {actions, onState(state), onUsage(totals),
   * onTodos(todos), onSession(fields), onTurnAdded(el), onTurnFinished(event), onFiles()}.
   */
  constructor(log, hooks) {
    this.log = log;
    this.hooks = hooks;
    this.turns = new Map();
    this.current = null;
    this.tools = new Map();
    this.subScopes = new Map();
    this.requests = new Map();
    this.commandRuns = new Set();
    this.open = new Set();
    this.finishedTotals = { ...ZERO };
    this.runningTotals = { ...ZERO };
    this.contextTokens = 0;
  }

  apply(ev) {
    switch (ev.type) {
      case 'turn.started':
        this.startTurn(ev);
        break;
      case 'message.delta': {
        const scope = this.scope(ev);
        this.streaming(scope).delta(ev.index, ev.kind, ev.text);
        break;
      }
      case 'message.completed': {
        const scope = this.scope(ev);
        if (!ev.parent_call_id) scope.turn.changed = true;
        const message = this.streaming(scope);
        message.complete(ev.message);
        if (message.empty) message.el.remove();
        scope.streaming = null;
        break;
      }
      case 'tool.started': {
        const scope = this.scope(ev);
        if (!ev.parent_call_id) scope.turn.changed = true;
        this.endStreaming(scope);
        const card = new ToolCard(ev);
        card.turn = scope.turn;
        scope.container.append(card.el);
        this.tools.set(ev.call_id, card);
        if (card.subagent) this.subScopes.set(ev.call_id, { container: card.subagent, streaming: null, turn: scope.turn });
        break;
      }
      case 'tool.output': {
        const card = this.tools.get(ev.call_id);
        if (card) card.output(ev.stream, ev.text);
        break;
      }
      case 'output.truncated': {
        const card = ev.call_id && this.tools.get(ev.call_id);
        if (card) card.attach(truncationNote(ev), { below: true });
        else this.scope(ev).container.append(truncationNote(ev));
        break;
      }
      case 'tool.finished': {
        const card = this.tools.get(ev.call_id);
        if (card) card.finish(ev);
        if (card && card.name !== 'Read' && card.name !== 'Grep' && card.name !== 'Glob') this.hooks.onFiles();
        break;
      }
      case 'permission.requested':
      case 'question.asked':
        this.request(ev);
        break;
      case 'permission.resolved':
      case 'question.answered': {
        const card = this.requests.get(ev.request_id);
        if (card) card.resolve(ev);
        this.open.delete(ev.request_id);
        this.emitState();
        break;
      }
      case 'todo.updated':
        if (ev.parent_call_id) {
          const scope = this.scope(ev);
          scope.container.append(h('ol', { class: 'todo-items inline-todos' }, todoItems(ev.todos || [])));
        } else {
          this.hooks.onTodos(ev.todos || []);
        }
        break;
      case 'usage':
        addUsage(this.runningTotals, ev, ev.cost_usd);
        if (!ev.parent_call_id && ev.context_tokens) this.contextTokens = ev.context_tokens;
        this.emitUsage();
        break;
      case 'compaction':
        this.container().append(compactionMarker(ev));
        if (ev.tokens_after) this.contextTokens = ev.tokens_after;
        this.emitUsage();
        break;
      case 'checkpoint.created': {
        // Taken just before the call that starts changing files: show it above that card.
        const body = this.container();
        const marker = checkpointMarker(ev, this.hooks.actions);
        const last = body.lastElementChild;
        if (last && last.dataset.testid === 'tool-card' && last.dataset.status === 'running') body.insertBefore(marker, last);
        else body.append(marker);
        break;
      }
      case 'command.ran':
        // A user's run outside any turn: between the turns. Its transcript
        // message (turn_id = run_id) is this marker, not earlier history.
        this.commandRuns.add(ev.run_id);
        this.log.append(commandRanMarker(ev));
        break;
      case 'turn.finished':
        this.finishTurn(ev);
        break;
      case 'session.updated':
        this.hooks.onSession(ev);
        break;
      case 'error':
        this.container().append(errorNote(ev));
        break;
      default:
        break;
    }
  }

  startTurn(ev) {
    const turn = this.makeTurn(ev.turn_id);
    turn.el.insertBefore(userMessage(ev.message), turn.body);
    this.current = turn;
    this.runningTotals = { ...ZERO };
    this.emitState();
  }

  makeTurn(turnId) {
    const body = h('div', { class: 'turn-body' });
    const status = turnStatus();
    const el = h('section', { class: 'turn', dataset: { turnId: turnId || '' }, 'aria-label': 'Turn' }, body, status);
    const turn = { id: turnId, el, body, status, streaming: null, finished: null, changed: false, container: body };
    turn.turn = turn;
    this.log.append(el);
    this.hooks.onTurnAdded(el);
    if (turnId) this.turns.set(turnId, turn);
    return turn;
  }

  /**
   * The turn an event belongs to. An event without a turn id goes to the
   * running turn; with none running (a turn that failed to start sends only
   * error and turn.finished) a new turn is opened, and adopted by the first
   * turn id that follows.
   */
  turnFor(turnId) {
    if (turnId && this.turns.has(turnId)) return this.turns.get(turnId);
    const current = this.current;
    if (current && !current.finished && (!turnId || !current.id)) {
      if (turnId) {
        current.id = turnId;
        current.el.dataset.turnId = turnId;
        this.turns.set(turnId, current);
      }
      return current;
    }
    const turn = this.makeTurn(turnId);
    this.current = turn;
    return turn;
  }

  /** Where an event's content goes: its turn, or its Task card for a subagent. */
  scope(ev) {
    if (ev.parent_call_id && this.subScopes.has(ev.parent_call_id)) return this.subScopes.get(ev.parent_call_id);
    return this.turnFor(ev.turn_id);
  }

  container() {
    return this.turnFor(null).body;
  }

  streaming(scope) {
    if (!scope.streaming) {
      scope.streaming = new AssistantMessage();
      scope.container.append(scope.streaming.el);
    }
    return scope.streaming;
  }

  endStreaming(scope) {
    if (!scope.streaming) return;
    scope.streaming.done();
    if (scope.streaming.empty) scope.streaming.el.remove();
    scope.streaming = null;
  }

  request(ev) {
    const isQuestion = ev.type === 'question.asked';
    const send = (body) => (isQuestion ? this.hooks.actions.answerQuestion(ev.request_id, body) : this.hooks.actions.answerPermission(ev.request_id, body));
    const card = isQuestion ? new QuestionCard(ev, send) : new PermissionCard(ev, send);
    card.turn = this.scope(ev).turn;
    const tool = this.tools.get(ev.call_id);
    if (tool) tool.attach(card.el);
    else this.scope(ev).container.append(card.el);
    this.requests.set(ev.request_id, card);
    this.open.add(ev.request_id);
    this.emitState();
  }

  finishTurn(ev) {
    const turn = this.turnFor(ev.turn_id);
    turn.finished = ev;
    this.endStreaming(turn);
    for (const [callId, scope] of this.subScopes) {
      if (scope.turn === turn) {
        this.endStreaming(scope);
        this.subScopes.delete(callId);
      }
    }
    for (const card of this.tools.values()) if (card.turn === turn) card.stop(ev.status);
    for (const [id, card] of this.requests) {
      if (card.turn === turn) {
        card.close();
        this.open.delete(id);
      }
    }
    setTurnStatus(turn.status, ev.status, ev);
    addUsage(this.finishedTotals, ev.usage || {}, ev.cost_usd);
    this.runningTotals = { ...ZERO };
    this.emitUsage();
    this.emitState();
    this.hooks.onTurnFinished(ev);
  }

  /** idle | running | waiting, as the events tell it. */
  get state() {
    if (!this.current || this.current.finished) return 'idle';
    return this.open.size > 0 ? 'waiting' : 'running';
  }

  get runningTurnId() {
    return this.current && !this.current.finished ? this.current.id : null;
  }

  emitState() {
    const state = this.state;
    if (this.current && !this.current.finished) setTurnStatus(this.current.status, state);
    this.hooks.onState(state);
  }

  emitUsage() {
    const total = { ...this.finishedTotals };
    addUsage(total, this.runningTotals, this.runningTotals.cost_usd);
    total.context_tokens = this.contextTokens;
    this.hooks.onUsage(total);
  }

  /**
   * After a rewind (or on load): turns that wrote to the transcript but are
   * no longer in it are shown as rewound.
   */
  markRewound(transcriptTurnIds) {
    for (const turn of this.turns.values()) {
      const gone = Boolean(turn.finished && turn.changed && !transcriptTurnIds.has(turn.id));
      turn.el.classList.toggle('rewound', gone);
      let note = turn.el.querySelector(':scope > .rewound-note');
      if (gone && !note) {
        note = h('p', { class: 'rewound-note' }, 'Rewound: this turn is no longer part of the conversation.');
        turn.el.prepend(note);
      } else if (!gone && note) {
        note.remove();
      }
    }
  }
}
