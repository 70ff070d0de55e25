// The workspace panel: browse a session's files, view text with
// highlighting, download anything. Read-only, like the API behind it.

import { api, sessionPath } from '../api.js';
import { h, fill } from '../dom.js';
import * as fmt from '../format.js';
import { highlight, langForPath } from '../render/highlight.js';

/** Text longer than this is shown cut (the download has it all). */
const VIEW_CHARS = 1_000_000;

const join = (dir, name) => (dir ? `${dir.replace(/\/$/, '')}/${name}` : name);
const parent = (path) => path.split('/').slice(0, -1).join('/');

export class Workspace {
  constructor({ onVisibility }) {
    this.onVisibility = onVisibility;
    this.sessionId = null;
    this.path = '';
    this.filePath = null;
    this.crumbs = h('div', { class: 'crumbs', 'aria-label': 'Folder' });
    this.list = h('ul', { class: 'file-list', 'aria-label': 'Files' });
    this.viewTitle = h('span', { class: 'file-name' });
    this.download = h('a', { class: 'button small', testid: 'file-download', download: '' }, 'Download');
    this.viewBody = h('div', { class: 'file-view', testid: 'file-view', tabindex: '0' });
    this.viewer = h(
      'section',
      { class: 'file-viewer', hidden: true, 'aria-label': 'File' },
      h('div', { class: 'viewer-head' }, this.viewTitle, this.download, h('button', { type: 'button', class: 'small', onclick: () => this.closeFile() }, 'Close')),
      this.viewBody,
    );
    const close = h('button', { type: 'button', class: 'icon-button', 'aria-label': 'Close the workspace panel', onclick: () => this.hide() }, '✕');
    const refresh = h('button', { type: 'button', class: 'small', onclick: () => this.refresh() }, 'Refresh');
    this.el = h(
      'aside',
      { class: 'workspace', id: 'workspace', hidden: true, 'aria-label': 'Workspace files' },
      h('div', { class: 'workspace-head' }, h('h2', null, 'Workspace'), refresh, close),
      this.crumbs,
      this.list,
      this.viewer,
    );
  }

  get visible() {
    return !this.el.hidden;
  }

  setSession(id) {
    if (id === this.sessionId) return;
    this.sessionId = id;
    this.path = '';
    this.closeFile();
    fill(this.list);
    if (this.visible) this.refresh();
  }

  toggle() {
    if (this.visible) this.hide();
    else this.show();
  }

  show() {
    this.el.hidden = false;
    this.onVisibility(true);
    this.refresh();
  }

  hide() {
    this.el.hidden = true;
    this.onVisibility(false);
  }

  refreshSoon() {
    if (!this.visible) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), 300);
  }

  async refresh() {
    if (!this.sessionId) {
      fill(this.list, h('li', { class: 'muted' }, 'Open a session to see its files.'));
      return;
    }
    await this.load(this.path);
  }

  async load(path) {
    const session = this.sessionId;
    let data;
    try {
      data = await api('GET', sessionPath(session, path ? `/files?path=${encodeURIComponent(path)}` : '/files'));
    } catch (err) {
      if (session !== this.sessionId) return;
      if (path && err.status === 404) return this.load(parent(path));
      fill(this.list, h('li', { class: 'muted' }, `Cannot list ${path || 'the workspace'}: ${err.message}`));
      return;
    }
    if (session !== this.sessionId) return;
    this.path = path;
    this.renderCrumbs();
    const rows = [];
    if (path) rows.push(h('li', null, h('button', { type: 'button', class: 'file-row', testid: 'file-up', onclick: () => this.load(parent(path)) }, h('span', { class: 'file-icon', 'aria-hidden': 'true' }, '↰'), '..')));
    for (const entry of data.entries) {
      const full = join(path, entry.name);
      const isDir = entry.kind === 'dir';
      rows.push(
        h(
          'li',
          null,
          h(
            'button',
            {
              type: 'button',
              class: 'file-row',
              testid: 'file-entry',
              dataset: { path: full, kind: entry.kind },
              'aria-current': full === this.filePath ? 'true' : null,
              onclick: () => (isDir ? this.load(full) : this.open(full)),
            },
            h('span', { class: 'file-icon', 'aria-hidden': 'true' }, isDir ? '▸' : entry.kind === 'symlink' ? '↪' : '·'),
            h('span', { class: 'file-label' }, isDir ? `${entry.name}/` : entry.name),
            isDir ? null : h('span', { class: 'file-size muted' }, fmt.bytes(entry.size)),
          ),
        ),
      );
    }
    if (!data.entries.length) rows.push(h('li', { class: 'muted' }, 'Empty folder.'));
    if (data.truncated) rows.push(h('li', { class: 'muted' }, 'More entries are not shown.'));
    fill(this.list, rows);
  }

  renderCrumbs() {
    const parts = this.path ? this.path.split('/') : [];
    const items = [h('button', { type: 'button', class: 'link-button', onclick: () => this.load('') }, 'workspace')];
    parts.forEach((name, i) => {
      const to = parts.slice(0, i + 1).join('/');
      items.push(' / ', h('button', { type: 'button', class: 'link-button', onclick: () => this.load(to) }, name));
    });
    fill(this.crumbs, items);
  }

  contentUrl(path) {
    return sessionPath(this.sessionId, `/files/content?path=${encodeURIComponent(path)}`);
  }

  async open(path) {
    const url = this.contentUrl(path);
    this.filePath = path;
    this.viewer.hidden = false;
    this.viewTitle.textContent = path;
    this.download.href = url;
    this.download.setAttribute('download', path.split('/').pop());
    fill(this.viewBody, h('p', { class: 'muted' }, 'Loading…'));
    let response;
    try {
      response = await fetch(url, { credentials: 'same-origin' });
    } catch (err) {
      fill(this.viewBody, h('p', { class: 'muted' }, `Cannot load it: ${err.message}`));
      return;
    }
    if (this.filePath !== path) return;
    if (response.status === 400) {
      // A symlink to a folder: browse it instead.
      this.closeFile();
      return this.load(path);
    }
    if (!response.ok) {
      const why = response.status === 413 ? 'It is too large to show; download it.' : `The server answered ${response.status}.`;
      fill(this.viewBody, h('p', { class: 'muted' }, why));
      return;
    }
    const type = response.headers.get('content-type') || '';
    if (type.startsWith('image/')) {
      fill(this.viewBody, h('img', { src: url, alt: path, class: 'file-image' }));
      return;
    }
    if (!type.startsWith('text/')) {
      fill(this.viewBody, h('p', { class: 'muted' }, `A binary file (${type || 'unknown type'}); download it to open it.`));
      return;
    }
    const text = await response.text();
    if (this.filePath !== path) return;
    const shown = text.length > VIEW_CHARS ? text.slice(0, VIEW_CHARS) : text;
    fill(
      this.viewBody,
      h('pre', { class: 'file-text' }, h('code', null, highlight(shown, langForPath(path)))),
      text.length > VIEW_CHARS ? h('p', { class: 'muted' }, 'Cut here; download the file for the rest.') : null,
    );
  }

  closeFile() {
    this.filePath = null;
    this.viewer.hidden = true;
    fill(this.viewBody);
  }
}

