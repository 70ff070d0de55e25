// Inline permission requests and questions: the agent waits for these.

import { h, fill } from '../dom.js';

function describeInput(input) {
  if (input && typeof input === 'object') {
    if (typeof input.command === 'string') return input.command;
    if (typeof input.file_path === 'string') return input.file_path;
  }
  return JSON.stringify(input, null, 2);
}

const DECISIONS = { allow: 'Allowed', allow_session: 'Allowed for this session', deny: 'Denied' };

export class PermissionCard {
  /** send(body) posts the answer; it rejects with the server's error. */
  constructor({ request_id, tool, input, reason }, send) {
    this.send = send;
    this.open = true;
    this.status = h('p', { class: 'request-status', role: 'status' });
    const button = (testid, label, body, cls) =>
      h('button', { type: 'button', class: cls, testid, onclick: () => this.answer(body) }, label);
    this.actions = h(
      'div',
      { class: 'request-actions' },
      button('permission-allow', 'Allow', { decision: 'allow' }, 'primary'),
      button('permission-allow-session', 'Allow for this session', { decision: 'allow', remember: 'session' }),
      button('permission-deny', 'Deny', { decision: 'deny' }, 'danger'),
    );
    this.el = h(
      'div',
      { class: 'permission-card', testid: 'permission-card', dataset: { requestId: request_id, state: 'open' }, role: 'group', 'aria-label': `Permission to use ${tool}` },
      h('p', { class: 'request-title' }, h('strong', null, tool), ' needs your permission', reason ? `: ${reason}` : '.'),
      h('pre', { class: 'request-input' }, describeInput(input)),
      this.actions,
      this.status,
    );
  }

  async answer(body) {
    this.setBusy(true);
    this.status.textContent = 'Sending…';
    try {
      await this.send(body);
      if (this.open) this.status.textContent = 'Answered; waiting for the agent…';
    } catch (err) {
      this.status.textContent = `Could not answer: ${err.message}`;
      // Answered elsewhere or too late: the buttons stay off.
      this.setBusy(['already_answered', 'not_waiting'].includes(err.code));
    }
  }

  setBusy(busy) {
    for (const b of this.actions.querySelectorAll('button')) b.disabled = busy;
  }

  resolve({ decision, by }) {
    this.open = false;
    this.el.dataset.state = decision;
    this.actions.remove();
    this.status.textContent = `${DECISIONS[decision] || decision} (${by})`;
  }

  /** The turn ended with the request still open. */
  close() {
    if (!this.open) return;
    this.open = false;
    this.el.dataset.state = 'closed';
    this.actions.remove();
    this.status.textContent = 'No longer waiting: the turn ended.';
  }
}

export class QuestionCard {
  constructor({ request_id, questions }, send) {
    this.send = send;
    this.open = true;
    this.questions = Array.isArray(questions) ? questions : [];
    this.inputs = this.questions.map((q) => this.questionFields(q));
    this.error = h('p', { class: 'request-status', role: 'status' });
    this.submit = h('button', { type: 'submit', class: 'primary', testid: 'question-submit' }, 'Send answer');
    this.form = h('form', { class: 'question-form' }, this.inputs.map((i) => i.el), h('div', { class: 'request-actions' }, this.submit), this.error);
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.answer();
    });
    this.el = h('div', { class: 'question-card', testid: 'question-card', dataset: { requestId: request_id, state: 'open' }, role: 'group', 'aria-label': 'Question from the agent' }, this.form);
  }

  questionFields(q) {
    const multi = Boolean(q.multiSelect);
    const options = (q.options || []).map((o) => {
      const label = String(o.label ?? '');
      const parts = [h('span', { class: 'option-label' }, label), o.description ? h('small', null, String(o.description)) : null];
      if (multi) {
        const box = h('input', { type: 'checkbox', value: label });
        return { label, el: h('label', { class: 'option', testid: 'question-option' }, box, parts), chosen: () => box.checked };
      }
      const button = h('button', { type: 'button', class: 'option', testid: 'question-option', 'aria-pressed': 'false' }, parts);
      return { label, el: button, button, chosen: () => button.getAttribute('aria-pressed') === 'true' };
    });
    if (!multi) {
      for (const o of options) {
        o.button.addEventListener('click', () => {
          for (const other of options) other.button.setAttribute('aria-pressed', String(other === o));
        });
      }
    }
    const text = h('input', { type: 'text', class: 'question-text', testid: 'question-text', placeholder: 'Or answer in your own words', 'aria-label': `Your own answer to: ${q.question}` });
    const el = h(
      'fieldset',
      { class: 'question' },
      h('legend', null, q.header ? h('span', { class: 'question-header' }, String(q.header)) : null, String(q.question ?? '')),
      h('div', { class: multi ? 'options options-multi' : 'options', role: multi ? null : 'group' }, options.map((o) => o.el)),
      text,
    );
    return {
      el,
      question: String(q.question ?? ''),
      value: () => {
        const own = text.value.trim();
        if (own) return own;
        const chosen = options.filter((o) => o.chosen()).map((o) => o.label);
        if (multi) return chosen.length ? chosen : null;
        return chosen[0] ?? null;
      },
    };
  }

  async answer() {
    const answers = {};
    for (const field of this.inputs) {
      const value = field.value();
      if (value == null) {
        this.error.textContent = 'Pick an option or write an answer for each question.';
        return;
      }
      answers[field.question] = value;
    }
    this.submit.disabled = true;
    this.error.textContent = 'Sending…';
    try {
      await this.send({ answers });
      if (this.open) this.error.textContent = 'Answered; waiting for the agent…';
    } catch (err) {
      this.error.textContent = `Could not answer: ${err.message}`;
      this.submit.disabled = ['already_answered', 'not_waiting'].includes(err.code);
    }
  }

  resolve({ answers, by }) {
    this.open = false;
    this.el.dataset.state = answers ? 'answered' : 'unanswered';
    const summary = answers
      ? Object.entries(answers).map(([q, a]) => h('li', null, h('span', { class: 'muted' }, `${q} `), h('strong', null, Array.isArray(a) ? a.join(', ') : String(a))))
      : [h('li', null, `Not answered (${by}).`)];
    fill(this.el, h('p', { class: 'request-title' }, 'Question answered'), h('ul', { class: 'answers' }, summary));
  }

  close() {
    if (!this.open) return;
    this.open = false;
    this.el.dataset.state = 'closed';
    this.submit.disabled = true;
    this.error.textContent = 'No longer waiting: the turn ended.';
  }
}
