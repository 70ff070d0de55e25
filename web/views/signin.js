// The sign-in page: a token is pasted once and traded for an HttpOnly
// cookie; the page never stores it.

import { api } from '../api.js';
import { h } from '../dom.js';
import { addSsoButton } from './sso.js';

export function signinView({ onSignedIn, message }) {
  const token = h('input', {
    id: 'signin-token',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    placeholder: 'agentd_…',
    testid: 'signin-token',
  });
  const error = h('p', { class: 'signin-error', role: 'alert', testid: 'signin-error', hidden: !message }, message || '');
  const submit = h('button', { type: 'submit', class: 'primary', testid: 'signin-submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin-card', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'agentd'),
    h('p', { class: 'muted' }, 'Sign in with an API token from ', h('code', null, 'agentd tokens create --user NAME'), '.'),
    h('label', { for: 'signin-token' }, 'Token'),
    token,
    error,
    submit,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    error.hidden = true;
    try {
      const me = await api('POST', '/v1/auth/login', { token: token.value.trim() });
      token.value = '';
      onSignedIn(me);
    } catch (err) {
      error.textContent = err.status === 401 ? 'That token was not accepted.' : `Sign-in failed: ${err.message}`;
      error.hidden = false;
      token.select();
    } finally {
      submit.disabled = false;
    }
  });
  const intro = form.querySelector('p.muted');
  addSsoButton(form, intro);
  const view = h('main', { class: 'signin' }, form);
  queueMicrotask(() => token.focus());
  return view;
}
