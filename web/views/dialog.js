// Modal dialogs on <dialog>: focus moves in, Escape cancels, focus returns.

import { h } from '../dom.js';

/**
 * Show a modal with `body` nodes and Yes/No buttons; resolves with the value
 * of `onYes()` (or true) when confirmed, null when cancelled.
 */
export function modal({ title, body = [], yes = 'OK', no = 'Cancel', danger = false, onYes, yesTestid = 'confirm-yes' }) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const error = h('p', { class: 'dialog-error', role: 'alert', hidden: true });
    const yesButton = h('button', { type: 'submit', class: danger ? 'danger' : 'primary', testid: yesTestid }, yes);
    const noButton = h('button', { type: 'button', testid: 'confirm-no', value: 'cancel' }, no);
    const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', { id: titleId }, title),
      body,
      error,
      h('div', { class: 'dialog-actions' }, noButton, yesButton),
    );
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId }, form);
    let result = null;
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      yesButton.disabled = true;
      try {
        result = onYes ? await onYes() : true;
        if (result == null) result = true;
        dialog.close();
      } catch (err) {
        error.textContent = err.message;
        error.hidden = false;
        yesButton.disabled = false;
      }
    });
    noButton.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(result);
    });
    document.body.append(dialog);
    dialog.showModal();
    const first = dialog.querySelector('input, select, textarea');
    (first || noButton).focus();
  });
}

export function confirmDialog(title, message, { yes = 'Yes', danger = false } = {}) {
  return modal({ title, body: [h('p', null, message)], yes, no: 'Cancel', danger }).then(Boolean);
}

/** Ask for one line of text; resolves with it, or null. */
export function promptDialog(title, label, value = '') {
  const input = h('input', { type: 'text', value, required: true, maxlength: 200, testid: 'prompt-input' });
  return modal({
    title,
    body: [h('label', { class: 'field' }, h('span', null, label), input)],
    yes: 'Save',
    onYes: () => input.value.trim(),
  });
}
