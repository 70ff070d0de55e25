// Markdown for untrusted model output: markdown-parse.js builds the tree and
// this turns it into DOM nodes with createElement/textContent only, so raw
// HTML in the text stays text, and links keep only http(s) and mailto URLs
// (anything else shows as plain text).

import { highlight } from './highlight.js';
import { parseMarkdown, parseInline } from './markdown-parse.js';

/** Markdown text → a DocumentFragment of safe nodes. */
export function renderMarkdown(src) {
  const frag = document.createDocumentFragment();
  for (const block of parseMarkdown(src)) frag.append(renderBlock(block, false));
  return frag;
}

function renderBlock(block, tight) {
  switch (block.type) {
    case 'para': {
      if (tight) return renderInlineInto(document.createElement('span'), block.text, 'li-text');
      return renderInlineInto(document.createElement('p'), block.text);
    }
    case 'heading':
      return renderInlineInto(document.createElement(`h${block.level}`), block.text);
    case 'hr':
      return document.createElement('hr');
    case 'quote': {
      const el = document.createElement('blockquote');
      for (const child of block.children) el.append(renderBlock(child, false));
      return el;
    }
    case 'list': {
      const el = document.createElement(block.ordered ? 'ol' : 'ul');
      if (block.ordered && block.start !== 1) el.setAttribute('start', String(block.start));
      for (const item of block.items) {
        const li = document.createElement('li');
        for (const child of item) li.append(renderBlock(child, !block.loose));
        el.append(li);
      }
      return el;
    }
    case 'table':
      return renderTable(block);
    case 'code':
      return renderCode(block.text, block.lang);
    default:
      return document.createTextNode('');
  }
}

function renderInlineInto(el, text, className) {
  if (className) el.className = className;
  appendInline(el, parseInline(text));
  return el;
}

function appendInline(parent, nodes) {
  for (const node of nodes) {
    switch (node.type) {
      case 'text':
        parent.append(document.createTextNode(node.text));
        break;
      case 'br':
        parent.append(document.createElement('br'));
        break;
      case 'code': {
        const el = document.createElement('code');
        el.textContent = node.text;
        parent.append(el);
        break;
      }
      case 'em':
      case 'strong':
      case 'del': {
        const el = document.createElement(node.type);
        appendInline(el, node.children);
        parent.append(el);
        break;
      }
      case 'link': {
        const el = document.createElement('a');
        el.href = node.href;
        el.target = '_blank';
        el.rel = 'noopener noreferrer nofollow';
        appendInline(el, node.children);
        parent.append(el);
        break;
      }
      case 'span': {
        const el = document.createElement('span');
        el.className = 'unsafe-link';
        el.title = 'Link not followed: only http(s) and mailto links are allowed';
        appendInline(el, node.children);
        parent.append(el);
        break;
      }
      default:
        break;
    }
  }
}

function renderTable(block) {
  const wrap = document.createElement('div');
  wrap.className = 'table-wrap';
  const table = document.createElement('table');
  const head = table.createTHead().insertRow();
  block.header.forEach((cell, i) => {
    const th = document.createElement('th');
    if (block.aligns[i]) th.className = `align-${block.aligns[i]}`;
    renderInlineInto(th, cell);
    head.append(th);
  });
  const body = table.createTBody();
  for (const row of block.rows) {
    const tr = body.insertRow();
    block.header.forEach((_, i) => {
      const td = tr.insertCell();
      if (block.aligns[i]) td.className = `align-${block.aligns[i]}`;
      renderInlineInto(td, row[i] || '');
    });
  }
  wrap.append(table);
  return wrap;
}

/** A fenced code block with its language and a copy button. */
export function renderCode(text, lang) {
  const wrap = document.createElement('div');
  wrap.className = 'code-block';
  const head = document.createElement('div');
  head.className = 'code-head';
  const label = document.createElement('span');
  label.textContent = lang || 'text';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'copy';
  copy.textContent = 'Copy';
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      copy.textContent = 'Copied';
    } catch {
      copy.textContent = 'Copy failed';
    }
    setTimeout(() => (copy.textContent = 'Copy'), 1500);
  });
  head.append(label, copy);
  const pre = document.createElement('pre');
  const code = document.createElement('code');
  code.append(highlight(text, lang));
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}
