// The open session's model and extended thinking, in its header: each change
// is a `PATCH /v1/sessions/{id}` and applies from the session's next turn.

import { api, sessionPath } from '../api.js';
import { h, fill } from '../dom.js';
import { catalog, modelLabel } from '../catalog.js';
import { THINKING_MAX, THINKING_MIN, thinkingDefaultText, thinkingPatch } from '../session-summaries.js';
import { notify } from './toast.js';

export class SessionSettings {
  /** session: the session view; onChanged(session) after a PATCH took. */
  constructor(session, { onChanged }) {
    this.session = session;
    this.onChanged = onChanged;
    this.model = h('select', { class: 'compact-select', testid: 'session-model', 'aria-label': 'Model of the next turns', title: 'Model of the next turns', onchange: () => this.setModel() });
    this.fillModels([{ id: session.model, model: session.model }]);
    // The session's own budget, or empty for the default (its profile's or
    // model's budget, or none), which the placeholder tells.
    this.budget = h('input', {
      type: 'number',
      class: 'budget-input',
      testid: 'session-thinking-budget',
      'aria-label': 'Thinking budget in tokens; empty for the default',
      title: `Extended thinking of this session: ${THINKING_MIN}–${THINKING_MAX} tokens, or empty for the profile's or model's default`,
      min: THINKING_MIN,
      max: THINKING_MAX,
      step: 1024,
      onchange: () => this.setThinking(),
    });
    this.showThinking();
    const label = h('label', { class: 'thinking-toggle' }, h('span', null, 'Thinking'), this.budget);
    this.el = h('div', { class: 'session-settings' }, this.model, label);
    catalog()
      .then((found) => this.fillModels(found.models))
      .catch(() => {});
  }

  /** The models the caller is granted, and the session's own even if it is not among them. */
  fillModels(models) {
    const list = models.some((m) => m.id === this.session.model) ? models : [{ id: this.session.model, model: this.session.model }].concat(models);
    fill(this.model, list.map((m) => h('option', { value: m.id, selected: m.id === this.session.model }, modelLabel(m))));
  }

  async setModel() {
    await this.patch({ model: this.model.value }, () => {
      this.model.value = this.session.model;
    });
  }

  /** The session's own budget in the field, its default in the placeholder. */
  showThinking() {
    const own = this.session.thinking;
    this.budget.value = own ? String(own.budget_tokens) : '';
    this.budget.placeholder = thinkingDefaultText(this.session.default_thinking);
  }

  async setThinking() {
    // A number input reads '' for text that is no number: not "the default".
    const text = this.budget.validity.badInput ? 'not a number' : this.budget.value;
    const { thinking, error } = thinkingPatch(text);
    if (error) {
      notify(error);
      return;
    }
    await this.patch({ thinking }, () => this.showThinking());
  }

  /** PATCH, and on failure say why and show what the session still has. */
  async patch(body, revert) {
    try {
      this.session = await api('PATCH', sessionPath(this.session.id), body);
      // A new model can bring another default budget.
      this.showThinking();
      this.onChanged(this.session);
    } catch (err) {
      notify(`Not changed: ${err.message}`);
      revert();
    }
  }
}
