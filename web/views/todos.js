// The agent's plan, as TodoWrite last wrote it.

import { h, fill } from '../dom.js';

const ICON = { pending: '○', in_progress: '◐', completed: '✓' };

export function todoItems(todos) {
  return todos.map((t) =>
    h(
      'li',
      { class: 'todo-item', testid: 'todo-item', dataset: { status: t.status } },
      h('span', { class: 'todo-icon', 'aria-hidden': 'true' }, ICON[t.status] || '•'),
      h('span', { class: 'visually-hidden' }, `${t.status.replace('_', ' ')}: `),
      t.status === 'in_progress' && t.activeForm ? t.activeForm : t.content,
    ),
  );
}

export class TodoPanel {
  constructor() {
    this.count = h('span', { class: 'muted' });
    this.list = h('ol', { class: 'todo-items' });
    this.el = h(
      'details',
      { class: 'todo-panel', testid: 'todo-list', hidden: true, open: true },
      h('summary', null, 'Plan ', this.count),
      this.list,
    );
  }

  update(todos) {
    const items = Array.isArray(todos) ? todos : [];
    this.el.hidden = items.length === 0;
    const done = items.filter((t) => t.status === 'completed').length;
    this.count.textContent = `${done}/${items.length} done`;
    // A finished plan folds away; a new or changing one opens again.
    this.el.open = done < items.length;
    fill(this.list, todoItems(items));
  }
}
