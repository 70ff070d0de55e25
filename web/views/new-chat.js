// The inline choices of "New session" (no modal): project, profile and model,
// folded under the button. A click on "New session" starts a chat at once
// with whatever they say, the server's defaults until changed.

import { h, fill } from '../dom.js';
import { catalog, modelLabel } from '../catalog.js';
import { newSessionBody } from '../session-summaries.js';

export class NewChatOptions {
  constructor() {
    this.catalog = null;
    this.summary = h('summary', { testid: 'new-session-options', title: 'Project, profile and model of new sessions' }, 'Defaults');
    this.fields = h('div', { class: 'new-chat-fields' });
    this.el = h('details', { class: 'new-chat-options' }, this.summary, this.fields);
    this.el.addEventListener('toggle', () => {
      if (this.el.open) this.load();
    });
  }

  /** Fill the choices (once); an error shows in place of them. */
  async load() {
    if (this.catalog) return;
    let found;
    try {
      found = await catalog();
    } catch (err) {
      fill(this.fields, h('p', { class: 'muted', role: 'alert' }, `Cannot load the choices: ${err.message}`));
      return;
    }
    if (this.catalog) return;
    this.catalog = found;
    const onChange = () => this.describe();
    this.project = found.projects.length
      ? select('new-session-project', [{ value: '', label: 'No project: a new workspace' }].concat(found.projects.map((p) => ({ value: p.name, label: p.name }))), '', onChange)
      : null;
    this.profile = select('new-session-profile', found.profiles.map((p) => ({ value: p.name, label: p.name })), found.defaultProfile, onChange);
    this.model = select('new-session-model', found.models.map((m) => ({ value: m.id, label: modelLabel(m) })), found.defaultModel, onChange);
    fill(
      this.fields,
      this.project && field('Project', this.project),
      field('Profile', this.profile),
      field('Model', this.model),
    );
    this.describe();
  }

  /** The summary line says what a new session gets. */
  describe() {
    const c = this.choices();
    const chosen = this.catalog && c.project && this.catalog.projects.find((p) => p.name === c.project);
    // A project with a profile of its own runs on that one.
    this.profile.disabled = Boolean(chosen && chosen.profile);
    const profile = chosen && chosen.profile ? chosen.profile : c.profile;
    fill(this.summary, [c.project, profile, c.model].filter(Boolean).join(' · ') || 'Defaults');
  }

  choices() {
    return {
      project: this.project ? this.project.value : '',
      profile: this.profile ? this.profile.value : '',
      model: this.model ? this.model.value : '',
    };
  }

  /** The `POST /v1/sessions` body; `{}` (the defaults) before the choices were ever opened. */
  body() {
    return this.catalog ? newSessionBody(this.choices(), this.catalog) : {};
  }
}

function select(testid, options, selected, onchange) {
  return h('select', { testid, onchange }, options.map((o) => h('option', { value: o.value, selected: o.value === selected }, o.label)));
}

function field(label, control) {
  return h('label', { class: 'field compact' }, h('span', null, label), control);
}
