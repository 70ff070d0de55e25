// User and assistant messages. Assistant text arrives as deltas and is
// re-rendered as markdown once per frame; thinking is collapsed.

import { h } from '../dom.js';
import { nextFrame } from '../frame.js';
import { renderMarkdown } from '../render/markdown.js';
import { imageThumbnails } from '../attach.js';

export function userMessage(message) {
  const text = (message && message.content ? message.content : [])
    .filter((b) => b.type === 'text')
    .map((b) => b.text)
    .join('\n');
  const images = imageThumbnails(message && message.content);
  return h('div', { class: 'msg msg-user', testid: 'message-user' }, text ? h('div', { class: 'msg-text' }, text) : null, images);
}

class TextBlock {
  constructor() {
    this.text = '';
    this.el = h('div', { class: 'md' });
    this.render = () => this.el.replaceChildren(renderMarkdown(this.text));
  }

  set(text) {
    this.text = text;
    nextFrame(this.render);
  }
}

class ThinkingBlock {
  constructor() {
    this.text = '';
    this.body = h('div', { class: 'thinking-text' });
    this.el = h('details', { class: 'thinking', testid: 'thinking' }, h('summary', null, 'Thinking'), this.body);
  }

  set(text) {
    this.text = text;
    this.body.textContent = text;
  }
}

export class AssistantMessage {
  constructor() {
    this.blocks = new Map();
    this.el = h('div', { class: 'msg msg-assistant', testid: 'message-assistant', 'aria-busy': 'true' });
  }

  block(index, kind) {
    let block = this.blocks.get(index);
    if (block && block.kind === kind) return block;
    const fresh = kind === 'thinking' ? new ThinkingBlock() : new TextBlock();
    fresh.kind = kind;
    if (block) block.el.replaceWith(fresh.el);
    else {
      // Keep blocks in their index order.
      const later = [...this.blocks.entries()].filter(([i]) => i > index).sort((a, b) => a[0] - b[0])[0];
      if (later) this.el.insertBefore(fresh.el, later[1].el);
      else this.el.append(fresh.el);
    }
    this.blocks.set(index, fresh);
    return fresh;
  }

  delta(index, kind, text) {
    const block = this.block(index, kind === 'thinking' ? 'thinking' : 'text');
    block.set(block.text + text);
  }

  /** The final message replaces what the deltas built. */
  complete(message) {
    const content = (message && message.content) || [];
    content.forEach((b, index) => {
      if (b.type === 'text') this.block(index, 'text').set(b.text);
      else if (b.type === 'thinking' && b.thinking) this.block(index, 'thinking').set(b.thinking);
    });
    this.done();
  }

  done() {
    this.el.removeAttribute('aria-busy');
  }

  get empty() {
    return [...this.blocks.values()].every((b) => !b.text);
  }
}
