// The open session's model and extended thinking, in its header: each change
// is a `PATCH /v1/sessions/{id}` and applies from the session's next turn.

import { api, sessionPath } from '../api.js';
import { h, fill } from '../dom.js';
import { catalog, modelLabel } from '../catalog.js';
import { THINKING_DEFAULT, THINKING_MAX, THINKING_MIN, thinkingPatch } from '../session-summaries.js';
import { notify } from './toast.js';

export class SessionSettings {
  /** session: the session view; onChanged(session) after a PATCH took. */
  constructor(session, { onChanged }) {
    this.session = session;
    this.onChanged = onChanged;
    this.model = h('select', { class: 'compact-select', testid: 'session-model', 'aria-label': 'Model of the next turns', title: 'Model of the next turns', onchange: () => this.setModel() });
    this.fillModels([{ id: session.model, model: session.model }]);
    const own = session.thinking;
    this.thinking = h('input', { type: 'checkbox', testid: 'session-thinking', checked: Boolean(own), onchange: () => this.thinkingToggled() });
    this.budget = h('input', {
      type: 'number',
      class: 'budget-input',
      testid: 'session-thinking-budget',
      'aria-label': 'Thinking budget (tokens)',
      title: `Thinking budget, ${THINKING_MIN}–${THINKING_MAX} tokens`,
      min: THINKING_MIN,
      max: THINKING_MAX,
      step: 1024,
      value: own ? own.budget_tokens : THINKING_DEFAULT,
      hidden: !own,
      onchange: () => this.setThinking(),
    });
    const toggle = h('label', { class: 'thinking-toggle', title: "Extended thinking of this session; off: the profile's or model's default" }, this.thinking, h('span', null, 'Think'));
    this.el = h('div', { class: 'session-settings' }, this.model, toggle, this.budget);
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

  thinkingToggled() {
    this.budget.hidden = !this.thinking.checked;
    if (this.thinking.checked) this.budget.focus();
    this.setThinking();
  }

  async setThinking() {
    const { thinking, error } = thinkingPatch(this.thinking.checked, this.budget.value);
    if (error) {
      notify(error);
      return;
    }
    await this.patch({ thinking }, () => {
      const own = this.session.thinking;
      this.thinking.checked = Boolean(own);
      this.budget.hidden = !own;
      if (own) this.budget.value = own.budget_tokens;
    });
  }

  /** PATCH, and on failure say why and show what the session still has. */
  async patch(body, revert) {
    try {
      this.session = await api('PATCH', sessionPath(this.session.id), body);
      this.onChanged(this.session);
    } catch (err) {
      notify(`Not changed: ${err.message}`);
      revert();
    }
  }
}
