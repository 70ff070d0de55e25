// The session list (sidebar): title, status, last activity, cost; new,
// rename and delete.

import { api, sessionPath } from '../api.js';
import { h, fill } from '../dom.js';
import * as fmt from '../format.js';
import { modal, promptDialog } from './dialog.js';

const REFRESH_MS = 15_000;

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
    this.list = h('ul', { class: 'session-list', 'aria-label': 'Sessions' });
    this.more = h('button', { type: 'button', class: 'link-button', hidden: true, onclick: () => this.loadMore() }, 'Show older sessions');
    this.empty = h('p', { class: 'muted empty-note', hidden: true }, 'No sessions yet.');
    const create = h('button', { type: 'button', class: 'primary new-session', testid: 'new-session', onclick: () => this.create() }, '+ New session');
    this.el = h('nav', { class: 'sidebar', id: 'sidebar', 'aria-label': 'Sessions' }, h('div', { class: 'sidebar-head' }, create), this.list, this.empty, this.more);
    this.timer = setInterval(() => {
      if (!document.hidden) this.refresh().catch(() => {});
    }, REFRESH_MS);
  }

  destroy() {
    clearInterval(this.timer);
  }

  async refresh() {
    const page = await api('GET', '/v1/sessions?limit=50');
    this.sessions = page.sessions;
    this.nextCursor = page.next_cursor;
    this.render();
    return this.sessions;
  }

  async loadMore() {
    if (!this.nextCursor) return;
    const page = await api('GET', `/v1/sessions?limit=50&cursor=${encodeURIComponent(this.nextCursor)}`);
    const known = new Set(this.sessions.map((s) => s.id));
    this.sessions.push(...page.sessions.filter((s) => !known.has(s.id)));
    this.nextCursor = page.next_cursor;
    this.render();
  }

  find(id) {
    return this.sessions.find((s) => s.id === id) || null;
  }

  setActive(id) {
    this.activeId = id;
    for (const li of this.list.children) {
      if (li.dataset.sessionId === id) li.firstChild.setAttribute('aria-current', 'page');
      else li.firstChild.removeAttribute('aria-current');
    }
  }

  /** Merge what a session's events told us (title, status, totals). */
  patch(id, fields) {
    const session = this.find(id);
    if (!session) return;
    Object.assign(session, fields);
    const li = this.list.querySelector(`li[data-session-id="${CSS.escape(id)}"]`);
    if (li) li.replaceWith(this.item(session));
  }

  render() {
    fill(this.list, this.sessions.map((s) => this.item(s)));
    this.empty.hidden = this.sessions.length > 0;
    this.more.hidden = !this.nextCursor;
  }

  item(session) {
    const title = session.title || 'Untitled session';
    const link = h(
      'a',
      { class: 'session-link', href: sessionHref(session.id), 'aria-current': session.id === this.activeId ? 'page' : null },
      h('span', { class: 'session-title', testid: 'session-title' }, title),
      h(
        'span',
        { class: 'session-meta' },
        h('span', { class: `status-dot status-${session.status}` }, session.status),
        h('span', { title: fmt.dateTime(session.updated_at) }, fmt.ago(session.updated_at)),
        h('span', { class: 'session-cost' }, fmt.cost(session.totals && session.totals.cost_usd)),
      ),
    );
    const rename = h('button', { type: 'button', class: 'icon-button', testid: 'session-rename', 'aria-label': `Rename ${title}`, title: 'Rename', onclick: () => this.rename(session) }, '✎');
    const remove = h('button', { type: 'button', class: 'icon-button', testid: 'session-delete', 'aria-label': `Delete ${title}`, title: 'Delete', onclick: () => this.remove(session) }, '✕');
    return h('li', { class: 'session-item', testid: 'session-item', dataset: { sessionId: session.id } }, link, h('div', { class: 'session-actions' }, rename, remove));
  }

  async create() {
    const [profiles, models, projects] = await Promise.all([
      api('GET', '/v1/profiles'),
      api('GET', '/v1/models'),
      api('GET', '/v1/projects').catch(() => ({ projects: [] })),
    ]);
    // A project brings its directory (and maybe its profile) instead of a new empty workspace.
    const project = projects.projects.length
      ? h(
          'select',
          { testid: 'new-session-project', name: 'project' },
          [h('option', { value: '' }, 'None: a new empty workspace')].concat(projects.projects.map((p) => h('option', { value: p.name }, p.name))),
        )
      : null;
    const profile = h(
      'select',
      { testid: 'new-session-profile', name: 'profile' },
      profiles.profiles.map((p) => h('option', { value: p.name, selected: p.name === profiles.default }, p.name)),
    );
    const model = h(
      'select',
      { testid: 'new-session-model', name: 'model' },
      models.models.map((m) => h('option', { value: m.id, selected: m.id === models.default }, m.id === m.model ? m.id : `${m.id} (${m.model})`)),
    );
    const title = h('input', { type: 'text', name: 'title', maxlength: 200, placeholder: 'from the first message' });
    const created = await modal({
      title: 'New session',
      body: [
        project && h('label', { class: 'field' }, h('span', null, 'Project'), project),
        h('label', { class: 'field' }, h('span', null, 'Profile'), profile),
        h('label', { class: 'field' }, h('span', null, 'Model'), model),
        h('label', { class: 'field' }, h('span', null, 'Title (optional)'), title),
      ],
      yes: 'Create',
      yesTestid: 'new-session-create',
      onYes: () => {
        const chosen = project && projects.projects.find((p) => p.name === project.value);
        const body = { model: model.value };
        if (chosen) body.project = chosen.name;
        if (!(chosen && chosen.profile)) body.profile = profile.value;
        if (title.value.trim()) body.title = title.value.trim();
        return api('POST', '/v1/sessions', body);
      },
    });
    if (!created) return;
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
