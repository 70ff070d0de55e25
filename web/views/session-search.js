// Finding sessions in the sidebar: a search box (full text over titles and
// transcripts, debounced), filter chips (pinned, archived, a tag), each
// result's snippet with the searched words marked, and the pin / archive /
// tags actions of a session. The list itself stays in ./sessions.js, which
// asks `query()` for the parameters of its requests.

import { api, sessionPath } from '../api.js';
import { h } from '../dom.js';
import { promptDialog } from './dialog.js';
import { notify } from './toast.js';

const DEBOUNCE_MS = 250;

export class SessionSearch {
  /** onChange() when what to list changed (a new search or filter). */
  constructor({ onChange }) {
    this.onChange = onChange;
    this.text = '';
    this.pinned = false;
    this.archived = false;
    this.tag = '';
    this.timer = null;
    this.input = h('input', {
      type: 'search',
      class: 'session-search-input',
      testid: 'session-search',
      placeholder: 'Search sessions',
      'aria-label': 'Search sessions',
      maxlength: 500,
      oninput: () => this.typed(),
      onkeydown: (event) => {
        if (event.key === 'Escape' && this.input.value) {
          this.input.value = '';
          this.typed();
        }
      },
    });
    this.pinnedChip = this.chip('Pinned', 'filter-pinned', () => (this.pinned = !this.pinned));
    this.archivedChip = this.chip('Archived', 'filter-archived', () => (this.archived = !this.archived));
    this.tagChip = h('button', { type: 'button', class: 'chip', testid: 'filter-tag', hidden: true, 'aria-pressed': 'true', onclick: () => this.filterTag('') });
    this.error = h('p', { class: 'session-search-error', testid: 'session-search-error', role: 'status', hidden: true });
    this.el = h(
      'div',
      { class: 'session-search', role: 'search' },
      this.input,
      h('div', { class: 'chips' }, this.pinnedChip, this.archivedChip, this.tagChip),
      this.error,
    );
  }

  chip(label, testid, toggle) {
    const button = h('button', {
      type: 'button',
      class: 'chip',
      testid,
      'aria-pressed': 'false',
      onclick: () => {
        toggle();
        button.setAttribute('aria-pressed', String(button.getAttribute('aria-pressed') !== 'true'));
        this.changed();
      },
    }, label);
    return button;
  }

  /** Whether words are searched (results best match first). */
  searching() {
    return Boolean(this.text);
  }

  /** Whether a search or a filter narrows the list. */
  active() {
    return Boolean(this.text || this.pinned || this.archived || this.tag);
  }

  /** The list's query parameters, each starting with `&`. */
  query() {
    const params = new URLSearchParams();
    if (this.text) params.set('q', this.text);
    if (this.pinned) params.set('pinned', 'true');
    if (this.archived) params.set('archived', 'true');
    if (this.tag) params.set('tag', this.tag);
    const text = params.toString();
    return text ? `&${text}` : '';
  }

  /** A search the server refused (no word in it, say): said under the box. */
  showError(message) {
    this.error.textContent = message || '';
    this.error.hidden = !message;
  }

  typed() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const text = this.input.value.trim();
      if (text === this.text) return;
      this.text = text;
      this.changed();
    }, DEBOUNCE_MS);
  }

  filterTag(tag) {
    this.tag = tag;
    this.tagChip.hidden = !tag;
    this.tagChip.textContent = tag ? `#${tag} ✕` : '';
    this.changed();
  }

  changed() {
    this.showError('');
    this.onChange();
  }

  /** The snippet of a search result, the searched words marked. */
  snippet(session) {
    if (!session.snippet) return null;
    return h('span', { class: 'session-snippet', testid: 'session-snippet' }, marked(session.snippet, this.text));
  }

  /** A session's tags, each a button that filters the list by it. */
  tags(session) {
    if (!session.tags || session.tags.length === 0) return null;
    return h(
      'span',
      { class: 'session-tags' },
      session.tags.map((tag) => h('button', { type: 'button', class: 'tag', testid: 'session-tag', onclick: () => this.filterTag(tag) }, `#${tag}`)),
    );
  }

  /** Pin, archive and tag buttons of a session; `changed(updated)` after each. */
  actions(session, changed) {
    const title = session.title || 'Untitled session';
    const update = async (body) => {
      try {
        changed(await api('PATCH', sessionPath(session.id), body));
      } catch (err) {
        notify(`Cannot change “${title}”: ${err.message}`);
      }
    };
    const pin = h('button', {
      type: 'button',
      class: `icon-button${session.pinned ? ' on' : ''}`,
      testid: 'session-pin',
      'aria-pressed': String(Boolean(session.pinned)),
      'aria-label': `${session.pinned ? 'Unpin' : 'Pin'} ${title}`,
      title: session.pinned ? 'Unpin' : 'Pin',
      onclick: () => update({ pinned: !session.pinned }),
    }, session.pinned ? '★' : '☆');
    const archive = h('button', {
      type: 'button',
      class: 'icon-button',
      testid: 'session-archive',
      'aria-label': `${session.archived ? 'Unarchive' : 'Archive'} ${title}`,
      title: session.archived ? 'Unarchive' : 'Archive',
      onclick: () => update({ archived: !session.archived }),
    }, session.archived ? '⇧' : '⇩');
    const tags = h('button', {
      type: 'button',
      class: 'icon-button',
      testid: 'session-tags',
      'aria-label': `Tags of ${title}`,
      title: 'Tags',
      onclick: async () => {
        const text = await promptDialog('Tags', 'Tags, separated by spaces or commas', (session.tags || []).join(' '));
        if (typeof text !== 'string') return;
        update({ tags: text.split(/[\s,]+/).filter(Boolean).map((t) => t.toLowerCase()) });
      },
    }, '#');
    return [pin, archive, tags];
  }
}

/** `text` as nodes, the words of `query` (case-insensitive) in `<mark>`. */
export function marked(text, query) {
  const words = (query.match(/[\p{L}\p{N}]+/gu) || []).map((w) => w.toLowerCase());
  if (words.length === 0) return [text];
  const pattern = new RegExp(`(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})`, 'giu');
  return text.split(pattern).map((part, i) => (i % 2 === 1 ? h('mark', null, part) : part));
}
