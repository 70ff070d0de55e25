// The session's commands (`[[commands]]`): one button each, inputs from the
// argument schema, a confirm step for commands that change things, and the
// output. A run is also a `command.ran` event: commandRanMarker shows it in
// the log, where reloads and other tabs see it too.

import { api, sessionPath } from '../api.js';
import { h, fill } from '../dom.js';
import * as fmt from '../format.js';
import { modal } from './dialog.js';

export class CommandsPanel {
  constructor(sessionId, notify) {
    this.sessionId = sessionId;
    this.notify = notify;
    this.list = h('div', { class: 'command-list' });
    this.output = h('pre', { class: 'command-output', testid: 'command-output', hidden: true });
    this.el = h(
      'details',
      { class: 'commands-panel', testid: 'commands-panel', hidden: true },
      h('summary', null, 'Commands'),
      this.list,
      this.output,
    );
    this.load();
  }

  async load() {
    let listed;
    try {
      listed = await api('GET', sessionPath(this.sessionId, '/commands'));
    } catch {
      return;
    }
    const commands = listed.commands || [];
    fill(this.list, commands.map((command) => this.form(command)));
    this.el.hidden = commands.length === 0;
  }

  form(command) {
    const inputs = Object.entries(command.parameters.properties || {}).map(([name, schema]) => [name, schema, inputFor(name, schema)]);
    const dangerous = command.mutating || command.confirm;
    const button = h('button', {
      type: 'submit',
      class: dangerous ? 'danger' : 'primary',
      testid: 'command-run',
      title: command.argv.join(' '),
    }, command.name);
    const form = h(
      'form',
      { class: 'command', testid: 'command', dataset: { command: command.name, dangerous: String(dangerous) } },
      h('span', { class: 'command-description' }, command.description),
      inputs.map(([name, schema, input]) => h('label', { class: 'field' }, h('span', null, schema.description || name), input)),
      button,
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const args = Object.fromEntries(inputs.map(([name, schema, input]) => [name, valueOf(schema, input)]));
      if (dangerous) {
        const yes = await modal({
          title: `Run ${command.name}?`,
          body: [h('p', null, command.description), h('code', { class: 'command-argv' }, command.argv.join(' ')), h('pre', null, JSON.stringify(args, null, 2))],
          yes: 'Run',
          danger: true,
        });
        if (!yes) return;
      }
      button.disabled = true;
      try {
        const result = await api('POST', sessionPath(this.sessionId, `/commands/${encodeURIComponent(command.name)}`), { arguments: args, confirmed: dangerous });
        this.show(result);
      } catch (err) {
        this.notify(`${command.name}: ${err.message}`);
      } finally {
        button.disabled = false;
      }
    });
    return form;
  }

  show(result) {
    this.output.hidden = false;
    this.output.dataset.exitCode = String(result.exit_code ?? '');
    fill(this.output, runText(result));
  }
}

function inputFor(name, schema) {
  const props = { name, testid: `command-arg-${name}`, required: schema.type !== 'boolean' };
  if (schema.enum) return h('select', props, schema.enum.map((value) => h('option', { value: String(value) }, String(value))));
  if (schema.type === 'boolean') return h('input', { ...props, type: 'checkbox' });
  if (schema.type === 'integer' || schema.type === 'number') {
    return h('input', { ...props, type: 'number', min: schema.minimum, max: schema.maximum, step: schema.type === 'integer' ? '1' : 'any' });
  }
  return h('input', { ...props, type: 'text', pattern: schema.pattern, maxlength: schema.maxLength, autocomplete: 'off', spellcheck: 'false' });
}

function valueOf(schema, input) {
  if (schema.type === 'boolean') return input.checked;
  if (schema.type === 'integer' || schema.type === 'number') return Number(input.value);
  if (schema.enum && typeof schema.enum[0] !== 'string') return JSON.parse(input.value);
  return input.value;
}

function runText(run) {
  const status = run.timed_out ? 'timed out' : run.exit_code == null ? 'killed' : `exit code ${run.exit_code}`;
  const parts = [`${status} · ${fmt.duration(run.duration_ms)}`];
  if (run.stdout) parts.push(run.stdout + (run.truncated ? '\n[stdout truncated]' : ''));
  if (run.stderr) parts.push(`stderr:\n${run.stderr}`);
  return parts.join('\n');
}

/** A `command.ran` event in the log. */
export function commandRanMarker(ev) {
  return h(
    'div',
    { class: 'marker command-ran', testid: 'command-ran', role: 'note', dataset: { command: ev.command, exitCode: String(ev.exit_code ?? '') } },
    h('strong', null, `${ev.by || 'someone'} ran ${ev.command}`),
    h('code', { class: 'command-argv' }, (ev.argv || []).join(' ')),
    h('pre', { class: 'command-output' }, runText(ev)),
  );
}
