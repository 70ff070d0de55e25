// Short notices in one polite live region.

import { h } from '../dom.js';

let region = null;

export function notify(text, ms = 5000) {
  if (!region || !region.isConnected) {
    region = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite', testid: 'toasts' });
    document.body.append(region);
  }
  const item = h('p', { class: 'toast' }, text);
  region.append(item);
  setTimeout(() => item.remove(), ms);
}
