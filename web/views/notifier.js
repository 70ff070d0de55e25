// Browser notifications: when a session that is not in view (or any session
// while the tab is hidden) starts waiting for an answer — a permission
// request or a question — a `Notification` says so; clicking it opens that
// session. Off until the bell is clicked: the permission is asked for from
// that click (browsers want a user gesture). The sessions' states come from
// the session list, which keeps polling while the tab is hidden when this is on.

import { h } from '../dom.js';
import { sessionHref } from './sessions.js';
import { notify } from './toast.js';

const STORAGE_KEY = 'agentd.notifications';

/**
 * The sessions that started waiting since `before` (id → status), and were
 * not the one in view unless the tab is hidden. Pure: tested without a DOM.
 */
export function newlyWaiting(before, sessions, activeId, hidden) {
  return sessions.filter((s) => s.status === 'waiting' && before.get(s.id) !== 'waiting' && (hidden || s.id !== activeId));
}

export class Notifier {
  /** getActive(): the id of the session in view, or null. */
  constructor({ getActive }) {
    this.getActive = getActive;
    this.statuses = null;
    this.supported = typeof window.Notification === 'function';
    this.bell = h('button', { type: 'button', class: 'icon-button notify-toggle', testid: 'notify-toggle', 'aria-pressed': 'false', onclick: () => this.toggle() }, '🔔');
    this.sync(this.wanted() && this.supported && Notification.permission === 'granted');
    if (!this.supported) this.bell.hidden = true;
  }

  wanted() {
    try {
      return localStorage.getItem(STORAGE_KEY) === 'on';
    } catch {
      return false;
    }
  }

  sync(on) {
    this.on = on;
    this.bell.setAttribute('aria-pressed', String(on));
    this.bell.title = on ? 'Notifications on: click to turn off' : 'Notify me when a session needs an answer';
    this.bell.setAttribute('aria-label', this.bell.title);
    try {
      localStorage.setItem(STORAGE_KEY, on ? 'on' : 'off');
    } catch {
      // Storage refused (private mode): the setting lasts for this page.
    }
  }

  async toggle() {
    if (this.on) {
      this.sync(false);
      return;
    }
    const permission = Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
    if (permission !== 'granted') {
      notify('Notifications are blocked for this site; allow them in the browser to be told when a session needs you.');
      this.sync(false);
      return;
    }
    this.sync(true);
  }

  /** The session list as it now is (after a poll, or a stream's update). */
  observe(sessions) {
    const before = this.statuses;
    this.statuses = new Map(sessions.map((s) => [s.id, s.status]));
    // The first look only learns what waits already: nothing is new yet.
    if (!before || !this.on) return;
    for (const session of newlyWaiting(before, sessions, this.getActive(), document.hidden)) this.show(session);
  }

  show(session) {
    const title = session.title || 'Untitled session';
    const note = new Notification(`${title} needs an answer`, {
      body: 'The agent waits for a permission or an answer to its question.',
      tag: `agentd-${session.id}`,
    });
    note.onclick = () => {
      window.focus();
      location.hash = sessionHref(session.id);
      note.close();
    };
  }
}
