// A card per tool call: name, input, live output, status and duration. A
// Task card holds its subagent's messages and calls.

import { h, fill } from '../dom.js';
import { nextFrame } from '../frame.js';
import * as fmt from '../format.js';
import { renderMarkdown } from '../render/markdown.js';
import { highlight } from '../render/highlight.js';

/** Live output kept per card; older output is cut (the final output replaces it anyway). */
const LIVE_OUTPUT_CHARS = 200_000;
const LONG_INPUT = 400;

/** The one line that says what a call does. */
function summary(name, input) {
  if (!input || typeof input !== 'object') return '';
  const pick = input.command ?? input.file_path ?? input.path ?? input.pattern ?? input.url ?? input.description ?? input.query ?? input.skill ?? input.bash_id ?? input.shell_id;
  if (typeof pick === 'string') return pick.split('\n')[0].slice(0, 200);
  if (name === 'TodoWrite' && Array.isArray(input.todos)) return `${input.todos.length} items`;
  return '';
}

function inputText(name, input) {
  if (input && typeof input === 'object' && typeof input.command === 'string' && Object.keys(input).length <= 4) {
    return { text: input.command, lang: 'sh' };
  }
  if (typeof input === 'string') return { text: input, lang: null };
  return { text: JSON.stringify(input, null, 2), lang: 'json' };
}

export class ToolCard {
  constructor({ call_id, name, input }) {
    this.callId = call_id;
    this.name = name;
    this.live = '';
    this.finished = false;
    const shown = inputText(name, input);
    this.inputEl = h('pre', { class: 'tool-input', testid: 'tool-input' }, h('code', null, highlight(shown.text, shown.lang)));
    const collapsed = shown.text.length > LONG_INPUT || shown.text.split('\n').length > 10 || name === 'AskUserQuestion' || name === 'TodoWrite';
    const inputWrap = collapsed
      ? h('details', { class: 'tool-io' }, h('summary', null, 'Input'), this.inputEl)
      : h('div', { class: 'tool-io' }, this.inputEl);
    this.outputEl = h('pre', { class: 'tool-output', testid: 'tool-output', hidden: true, tabindex: '0' });
    this.durationEl = h('span', { class: 'tool-duration', testid: 'tool-duration' }, 'running…');
    this.statusEl = h('span', { class: 'tool-status', 'aria-label': 'running' });
    this.requests = h('div', { class: 'tool-requests' });
    this.el = h(
      'article',
      { class: 'tool-card', testid: 'tool-card', dataset: { callId: call_id, status: 'running', tool: name } },
      h(
        'header',
        { class: 'tool-head' },
        this.statusEl,
        h('span', { class: 'tool-name', testid: 'tool-name' }, name),
        // The input speaks for itself when shown in full.
        h('span', { class: 'tool-summary' }, collapsed ? summary(name, input) : ''),
        this.durationEl,
      ),
      inputWrap,
      this.requests,
      this.outputEl,
    );
    if (name === 'Task') {
      this.subagent = h('div', { class: 'subagent', 'aria-label': 'Subagent' });
      this.el.insertBefore(this.subagent, this.outputEl);
    }
    // Follow the tail of live output only: reading scrollHeight forces a
    // layout, which a replay of hundreds of finished cards must not pay.
    this.scroll = () => {
      if (!this.finished) this.outputEl.scrollTop = this.outputEl.scrollHeight;
    };
  }

  /** Permission and question cards of this call sit inside it; notes about
   * its output (`below`) after the output. */
  attach(node, { below = false } = {}) {
    if (below) this.el.append(node);
    else this.requests.append(node);
  }

  output(stream, text) {
    if (this.finished) return;
    this.outputEl.hidden = false;
    this.live += text;
    if (this.live.length > LIVE_OUTPUT_CHARS) {
      this.live = this.live.slice(-LIVE_OUTPUT_CHARS);
      fill(this.outputEl, '… (earlier output cut)\n', this.live);
    } else if (stream === 'stderr') {
      this.outputEl.append(h('span', { class: 'stderr' }, text));
    } else {
      this.outputEl.append(text);
    }
    nextFrame(this.scroll);
  }

  finish({ is_error, output, duration_ms }) {
    this.finished = true;
    this.setStatus(is_error ? 'error' : 'ok');
    this.durationEl.textContent = duration_ms == null ? '' : fmt.duration(duration_ms);
    const text = output == null ? this.live : String(output);
    if (this.name === 'Task' && !is_error && text) {
      this.outputEl.replaceWith((this.outputEl = h('div', { class: 'tool-output md', testid: 'tool-output' }, renderMarkdown(text))));
    } else {
      fill(this.outputEl, text);
      this.outputEl.hidden = !text;
    }
  }

  /** The turn ended while this call was still running. */
  stop(status) {
    if (this.finished) return;
    this.finished = true;
    this.setStatus('error');
    this.durationEl.textContent = status === 'interrupted' ? 'interrupted' : 'stopped';
  }

  setStatus(status) {
    this.el.dataset.status = status;
    this.statusEl.setAttribute('aria-label', status === 'ok' ? 'succeeded' : status === 'error' ? 'failed' : 'running');
  }
}
