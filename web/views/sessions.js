// The session list (sidebar): title, status, last activity, cost; new,
// rename and delete. It stays live: the open session patches its item from
// its event stream, and the first page is polled for the others (often while
// one of them works; see ../session-summaries.js), but not while searching.

import { api, sessionPath } from '../api.js';
import { h, fill } from '../dom.js';
import * as fmt from '../format.js';
import { cursorAfterPoll, itemKey, mergeFirstPage, mergeFirstResults, pollDelay, streamedSince } from '../session-summaries.js';
import { modal, promptDialog } from './dialog.js';
import { NewChatOptions } from './new-chat.js';
import { SessionSearch } from './session-search.js';
import { notify } from './toast.js';

const PAGE = 50;

export function sessionHref(id) {
  return `#/s/${encodeURIComponent(id)}`;
}

export class SessionList {
  /** onDeleted(id) and onRenamed(session) after those happen here. */
  constructor({ onDeleted, onRenamed }) {
    this.onDeleted = onDeleted;
    this.onRenamed = onRenamed;
    this.sessions = [];
    this.activeId = null;
    this.nextCursor = null;
    // The open session's status as its event stream last told it, and when.
    this.streamed = null;
    this.list = h('ul', { class: 'session-list', 'aria-label': 'Sessions' });
    this.more = h('button', { type: 'button', class: 'link-button', hidden: true, onclick: () => this.loadMore() }, 'Show older sessions');
    this.empty = h('p', { class: 'muted empty-note', hidden: true }, 'No sessions yet.');
    this.createButton = h('button', { type: 'button', class: 'primary new-session', testid: 'new-session', onclick: () => this.create() }, '+ New session');
    this.options = new NewChatOptions();
    // A new search or filter lists from scratch.
    this.search = new SessionSearch({ onChange: () => {
      this.sessions = [];
      this.nextCursor = null;
      this.poll();
    } });
    this.el = h('nav', { class: 'sidebar', id: 'sidebar', 'aria-label': 'Sessions' }, h('div', { class: 'sidebar-head' }, this.createButton, this.options.el), this.search.el, this.list, this.empty, this.more);
    this.timer = null;
    this.onVisible = () => {
      if (!document.hidden) this.poll();
    };
    document.addEventListener('visibilitychange', this.onVisible);
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
    document.removeEventListener('visibilitychange', this.onVisible);
  }

  /** The first page again, merged into the list; the next poll is scheduled. */
  async refresh() {
    clearTimeout(this.timer);
    try {
      const sentAt = performance.now();
      const query = this.search.query();
      let page;
      try {
        page = await api('GET', `/v1/sessions?limit=${PAGE}${query}`);
      } catch (err) {
        if (err.status === 400 && query) {
          this.search.showError(err.message);
          this.sessions = [];
          this.render();
        }
        throw err;
      }
      // An answer to a search since changed is dropped.
      if (query !== this.search.query()) return this.sessions;
      const streamed = streamedSince(this.streamed, this.activeId, sentAt);
      // Search results are in their own order (best match first): only the
      // first page is replaced; a filtered list is in the list's order.
      this.sessions = this.search.searching()
        ? mergeFirstResults(this.sessions, page.sessions, PAGE, streamed)
        : mergeFirstPage(this.sessions, page.sessions, Boolean(page.next_cursor), streamed);
      this.nextCursor = cursorAfterPoll(this.sessions.length, this.nextCursor, page.next_cursor, PAGE);
      this.render();
      return this.sessions;
    } finally {
      this.schedule();
    }
  }

  poll() {
    this.refresh().catch(() => {});
  }

  /** The next poll; none while searching (a search runs again when changed, or when the tab shows again). */
  schedule() {
    clearTimeout(this.timer);
    if (this.destroyed || this.search.searching()) return;
    this.timer = setTimeout(() => {
      if (document.hidden) this.schedule();
      else this.poll();
    }, pollDelay(this.sessions, this.activeId));
  }

  async loadMore() {
    if (!this.nextCursor) return;
    const page = await api('GET', `/v1/sessions?limit=50&cursor=${encodeURIComponent(this.nextCursor)}${this.search.query()}`);
    const known = new Set(this.sessions.map((s) => s.id));
    this.sessions.push(...page.sessions.filter((s) => !known.has(s.id)));
    this.nextCursor = page.next_cursor;
    this.render();
  }

  find(id) {
    return this.sessions.find((s) => s.id === id) || null;
  }

  setActive(id) {
    const left = this.activeId && this.find(this.activeId);
    this.activeId = id;
    this.streamed = null;
    // The session left now counts for the poll's pace: while it works, the
    // list follows it by polling.
    if (left && left.status !== 'idle') this.schedule();
    for (const li of this.list.children) {
      if (li.dataset.sessionId === id) li.firstChild.setAttribute('aria-current', 'page');
      else li.firstChild.removeAttribute('aria-current');
    }
  }

  /** The open session's status, as its event stream tells it (newer than any poll sent before). */
  streamStatus(id, status) {
    this.streamed = { id, status, at: performance.now() };
    this.patch(id, { status });
  }

  /**
   * Merge what is known of a session (title, status, totals). `sentAt`: when
   * the request that read `fields` was sent; a status its stream told since wins.
   */
  patch(id, fields, sentAt = null) {
    const session = this.find(id);
    if (!session) return;
    Object.assign(session, fields);
    const streamed = sentAt == null ? null : streamedSince(this.streamed, id, sentAt);
    if (streamed) session.status = streamed.status;
    const li = this.list.querySelector(`li[data-session-id="${CSS.escape(id)}"]`);
    if (li && li.dataset.key !== itemKey(session)) li.replaceWith(this.item(session));
  }

  /** Items whose summary did not change are kept (with their focus); ages are as of now. */
  render() {
    const now = Date.now();
    const kept = new Map(Array.from(this.list.children, (li) => [li.dataset.sessionId, li]));
    const items = this.sessions.map((s) => {
      const li = kept.get(s.id);
      return li && li.dataset.key === itemKey(s, now) ? li : this.item(s, now);
    });
    if (items.length !== this.list.children.length || items.some((li, i) => this.list.children[i] !== li)) fill(this.list, items);
    this.empty.hidden = this.sessions.length > 0;
    this.empty.textContent = this.search.active() ? 'No sessions found.' : 'No sessions yet.';
    this.more.hidden = !this.nextCursor;
  }

  item(session, now = Date.now()) {
    const title = session.title || 'Untitled session';
    const link = h(
      'a',
      { class: 'session-link', href: sessionHref(session.id), 'aria-current': session.id === this.activeId ? 'page' : null },
      h('span', { class: 'session-title', testid: 'session-title' }, title),
      h(
        'span',
        { class: 'session-meta' },
        h('span', { class: `status-dot status-${session.status}`, testid: 'session-status' }, session.status),
        h('span', { title: fmt.dateTime(session.updated_at), testid: 'session-ago' }, fmt.ago(session.updated_at, now)),
        h('span', { class: 'session-cost', testid: 'session-cost' }, fmt.cost(session.totals && session.totals.cost_usd)),
      ),
      this.search.snippet(session),
    );
    const rename = h('button', { type: 'button', class: 'icon-button', testid: 'session-rename', 'aria-label': `Rename ${title}`, title: 'Rename', onclick: () => this.rename(session) }, '✎');
    const remove = h('button', { type: 'button', class: 'icon-button', testid: 'session-delete', 'aria-label': `Delete ${title}`, title: 'Delete', onclick: () => this.remove(session) }, '✕');
    // Pinning or archiving moves the session: the list is fetched again.
    const changed = (updated) => {
      this.patch(session.id, updated);
      this.onRenamed(updated);
      this.poll();
    };
    const actions = this.search.actions(session, changed);
    return h(
      'li',
      { class: `session-item${session.pinned ? ' pinned' : ''}`, testid: 'session-item', dataset: { sessionId: session.id, key: itemKey(session, now) } },
      link,
      h('div', { class: 'session-actions' }, actions, rename, remove),
      this.search.tags(session),
    );
  }

  /** One click: a new chat at once, with the inline choices (the defaults until changed). */
  async create() {
    this.createButton.disabled = true;
    let created;
    try {
      created = await api('POST', '/v1/sessions', this.options.body());
    } catch (err) {
      notify(`Cannot start a session: ${err.message}`);
      return;
    } finally {
      this.createButton.disabled = false;
    }
    // A single-session project answers with the session it already has.
    if (!this.sessions.some((s) => s.id === created.id)) this.sessions.unshift(created);
    this.render();
    location.hash = sessionHref(created.id);
  }

  async rename(session) {
    const title = await promptDialog('Rename session', 'Title', session.title || '');
    if (!title) return;
    const updated = await api('PATCH', sessionPath(session.id), { title });
    this.patch(session.id, updated);
    this.onRenamed(updated);
  }

  async remove(session) {
    const ok = await modal({
      title: 'Delete session?',
      body: [h('p', null, `“${session.title || 'Untitled session'}”, its transcript and its workspace will be deleted. This cannot be undone.`)],
      yes: 'Delete',
      danger: true,
      onYes: () => api('DELETE', sessionPath(session.id)),
    });
    if (!ok) return;
    this.sessions = this.sessions.filter((s) => s.id !== session.id);
    this.render();
    this.onDeleted(session.id);
  }
}
