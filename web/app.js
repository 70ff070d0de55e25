// agentd web UI: decides between the sign-in page and the app, and routes
// #/s/<session id> to a conversation.

import { api, sessionPath, setUnauthorizedHandler } from './api.js';
import { h, fill } from './dom.js';
import { signinView } from './views/signin.js';
import { SessionList } from './views/sessions.js';
import { Conversation } from './views/conversation.js';
import { Workspace } from './views/workspace.js';
import { Notifier } from './views/notifier.js';
import { notify } from './views/toast.js';

const root = document.getElementById('app');
let app = null;

/** Who is signed in: {user, auth}, or null. */
async function whoAmI() {
  try {
    return await api('GET', '/v1/auth/me');
  } catch (err) {
    if (err.status === 401) return null;
    if (err.status === 404) {
      // A server without cookie sign-in: the API itself says whether we may.
      try {
        await api('GET', '/v1/sessions?limit=1');
        return { user: 'local', auth: 'none' };
      } catch (inner) {
        if (inner.status === 401) return null;
        throw inner;
      }
    }
    throw err;
  }
}

async function boot() {
  let me;
  try {
    me = await whoAmI();
  } catch (err) {
    fill(root, h('main', { class: 'signin' }, h('div', { class: 'signin-card' }, h('h1', null, 'agentd'), h('p', { role: 'alert' }, `The server cannot be reached: ${err.message}`), h('button', { type: 'button', class: 'primary', onclick: boot }, 'Try again'))));
    return;
  }
  if (me) startApp(me);
  else showSignin();
}

function showSignin(message) {
  if (app) app.destroy();
  app = null;
  document.title = 'Sign in · agentd';
  fill(root, signinView({ onSignedIn: (me) => startApp(me), message }));
}

setUnauthorizedHandler(() => {
  if (app) showSignin('You were signed out. Sign in again.');
});

function startApp(me) {
  if (app) app.destroy();
  app = new App(me);
  fill(root, app.el);
  app.route();
}

class App {
  /** me: {user, auth} from /v1/auth/me. */
  constructor({ user, auth }) {
    this.user = user;
    this.conversation = null;
    this.notifier = new Notifier({ getActive: () => this.sessions.activeId });
    this.sessions = new SessionList({
      onDeleted: (id) => this.deleted(id),
      onRenamed: (session) => {
        if (this.conversation && this.conversation.id === session.id) this.conversation.setTitle(session.title, { fromList: true });
      },
    });
    this.workspace = new Workspace({
      onVisibility: (shown) => {
        this.workspaceToggle.setAttribute('aria-expanded', String(shown));
        // The log got narrower or wider: keep following its end.
        if (this.conversation) this.conversation.followEnd();
      },
    });
    this.main = h('main', { class: 'main', id: 'main' });
    this.menu = h('button', { type: 'button', class: 'icon-button menu-button', 'aria-label': 'Sessions', 'aria-controls': 'sidebar', 'aria-expanded': 'false', onclick: () => this.toggleSidebar() }, '☰');
    this.workspaceToggle = h('button', { type: 'button', class: 'small', testid: 'workspace-toggle', 'aria-controls': 'workspace', 'aria-expanded': 'false', disabled: true, onclick: () => this.workspace.toggle() }, 'Files');
    // Only a cookie sign-in can be signed out of; other modes have none.
    const signout = auth && auth !== 'token' ? null : h('button', { type: 'button', class: 'small', testid: 'signout', onclick: () => this.signOut() }, 'Sign out');
    this.el = h(
      'div',
      { class: 'shell' },
      h('a', { class: 'skip-link', href: '#main' }, 'Skip to the conversation'),
      h('header', { class: 'topbar' }, this.menu, h('span', { class: 'brand' }, 'agentd'), h('span', { class: 'spacer' }), this.workspaceToggle, this.notifier.bell, h('span', { class: 'user muted', title: 'Signed in as' }, user), signout),
      h('div', { class: 'layout' }, this.sessions.el, this.main, this.workspace.el),
    );
    this.onHash = () => this.route();
    window.addEventListener('hashchange', this.onHash);
    // On a phone the session list is a drawer: Escape or a tap outside closes it.
    this.onKey = (event) => {
      if (event.key === 'Escape' && this.el.classList.contains('sidebar-open')) {
        event.preventDefault();
        this.toggleSidebar(false);
        this.menu.focus();
      }
    };
    document.addEventListener('keydown', this.onKey);
    this.main.addEventListener('click', () => this.toggleSidebar(false));
    this.sessions.refresh().catch((err) => notify(`Cannot list sessions: ${err.message}`));
  }

  toggleSidebar(open = !this.el.classList.contains('sidebar-open')) {
    this.el.classList.toggle('sidebar-open', open);
    this.menu.setAttribute('aria-expanded', String(open));
  }

  async route() {
    const match = /^#\/s\/([^/]+)$/.exec(location.hash);
    const id = match ? decodeURIComponent(match[1]) : null;
    this.toggleSidebar(false);
    if (this.conversation && this.conversation.id === id) return;
    if (this.conversation) this.conversation.destroy();
    this.conversation = null;
    this.sessions.setActive(id);
    this.workspace.setSession(id);
    this.workspaceToggle.disabled = !id;
    if (!id) {
      document.title = 'agentd';
      fill(this.main, h('div', { class: 'empty-state' }, h('h2', null, 'No session open'), h('p', { class: 'muted' }, 'Pick a session from the list, or start a new one.')));
      if (window.matchMedia('(max-width: 760px)').matches) this.toggleSidebar(true);
      return;
    }
    let session;
    try {
      session = await api('GET', sessionPath(id));
    } catch (err) {
      fill(this.main, h('div', { class: 'empty-state' }, h('h2', null, 'Session not available'), h('p', { class: 'muted' }, err.status === 404 ? 'It does not exist, or it is not yours.' : err.message)));
      return;
    }
    // Another navigation may have happened while we waited.
    if (location.hash !== `#/s/${match[1]}` || (this.conversation && this.conversation.id === id)) return;
    this.conversation = new Conversation(session, this);
    document.title = `${session.title || 'Untitled session'} · agentd`;
    fill(this.main, this.conversation.el);
    this.conversation.focus();
  }

  deleted(id) {
    if (this.conversation && this.conversation.id === id) location.hash = '';
  }

  async signOut() {
    try {
      await api('POST', '/v1/auth/logout');
    } catch (err) {
      notify(`Sign-out failed: ${err.message}`);
      return;
    }
    history.replaceState(null, '', location.pathname);
    showSignin();
  }

  destroy() {
    if (this.conversation) this.conversation.destroy();
    this.sessions.destroy();
    this.notifier.destroy();
    window.removeEventListener('hashchange', this.onHash);
    document.removeEventListener('keydown', this.onKey);
  }
}

boot();
