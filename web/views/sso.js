// "Sign in with <provider>" on the sign-in page, when the server has an
// identity provider (`[server.oidc]`; told by GET /v1/auth/methods, which
// needs no sign-in). The link leaves the page: the provider sends the
// browser back to /v1/auth/oidc/callback, which sets the cookie.

import { api } from '../api.js';
import { h } from '../dom.js';

/** Adds the provider's button to `card` (before `before`) if there is one. */
export async function addSsoButton(card, before) {
  let methods;
  try {
    methods = await api('GET', '/v1/auth/methods');
  } catch {
    return; // An older server, or none reachable: the token form stays.
  }
  if (!methods || !methods.oidc) return;
  const next = location.pathname + location.hash;
  const href = `${methods.oidc.login_url}?next=${encodeURIComponent(next)}`;
  const link = h('a', { class: 'button primary', href, testid: 'signin-oidc' }, `Sign in with ${methods.oidc.name}`);
  card.insertBefore(h('p', { class: 'signin-sso' }, link), before);
}
