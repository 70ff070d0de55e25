// Browser notifications: when a session that is not in view (or any session
// while the tab is hidden) starts waiting for an answer — a permission
// request or a question — a `Notification` says so; clicking it opens that
// session. Off until the bell is clicked: the permission is asked for from
// that click (browsers want a user gesture). While on, it asks the server
// which sessions wait (`GET /v1/sessions?status=waiting`) every few seconds,
// also while the tab is hidden: all of the user's sessions, not only the
// ones the session list has loaded or its search shows.

import { api } from '../api.js';
import { h } from '../dom.js';
import { sessionHref } from './sessions.js';
import { notify } from './toast.js';

const STORAGE_KEY = 'agentd.notifications';
/** How often the waiting sessions are asked for while notifications are on. */
export const POLL_MS = 3000;
const WAITING = '/v1/sessions?status=waiting&limit=200';

/**
 * The sessions that started waiting since `before` (id → status), and were
 * not the one in view unless the tab is hidden. Pure: tested without a DOM.
 */
export function newlyWaiting(before, sessions, activeId, hidden) {
  return sessions.filter((s) => s.status === 'waiting' && before.get(s.id) !== 'waiting' && (hidden || s.id !== activeId));
}

/** `Notification.requestPermission()`, also where it only takes a callback (older Safari). */
function requestPermission() {
  return new Promise((resolve) => {
    let settled = false;
    const done = (value) => {
      if (!settled) resolve(value);
      settled = true;
    };
    try {
      const promise = Notification.requestPermission(done);
      if (promise && typeof promise.then === 'function') promise.then(done, () => done('denied'));
    } catch {
      done('denied');
    }
  });
}

export class Notifier {
  /** getActive(): the id of the session in view, or null. fetchWaiting(): the waiting sessions. */
  constructor({ getActive, fetchWaiting = async () => (await api('GET', WAITING)).sessions }) {
    this.getActive = getActive;
    this.fetchWaiting = fetchWaiting;
    // id → status, as last asked; null until the first answer (it only learns what waits already).
    this.statuses = null;
    this.timer = null;
    this.destroyed = false;
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
    clearTimeout(this.timer);
    this.statuses = null;
    if (on) this.poll();
  }

  async toggle() {
    if (this.on) {
      this.sync(false);
      return;
    }
    const permission = Notification.permission === 'granted' ? 'granted' : await requestPermission();
    if (permission !== 'granted') {
      notify('Notifications are blocked for this site; allow them in the browser to be told when a session needs you.');
      this.sync(false);
      return;
    }
    this.sync(true);
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
  }

  /** Ask which sessions wait now; the next ask is scheduled. */
  async poll() {
    clearTimeout(this.timer);
    try {
      const waiting = await this.fetchWaiting();
      if (this.on) this.observe(waiting);
    } catch {
      // Offline or signed out: try again later.
    }
    if (this.on && !this.destroyed) this.timer = setTimeout(() => this.poll(), POLL_MS);
  }

  /** `waiting`: every session that waits now (any other does not). */
  observe(waiting) {
    const before = this.statuses;
    this.statuses = new Map(waiting.map((s) => [s.id, s.status]));
    // The first look only learns what waits already: nothing is new yet.
    if (!before || !this.on) return;
    for (const session of newlyWaiting(before, waiting, this.getActive(), document.hidden)) this.show(session);
  }

  show(session) {
    const title = `${session.title || 'Untitled session'} needs an answer`;
    const options = { body: 'The agent waits for a permission or an answer to its question.', tag: `agentd-${session.id}` };
    const open = () => {
      window.focus();
      location.hash = sessionHref(session.id);
    };
    let note;
    try {
      note = new Notification(title, options);
    } catch {
      // Android Chrome: only a service worker may show one (the page has
      // none of its own; one already registered is used).
      navigator.serviceWorker?.getRegistration?.()
        .then((registration) => registration && registration.showNotification(title, options))
        .catch(() => {});
      return;
    }
    note.onclick = () => {
      open();
      note.close();
    };
  }
}
