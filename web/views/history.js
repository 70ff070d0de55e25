// Messages that are in a session's transcript but not in its event log (a
// fork starts with its parent's transcript and no events), shown read-only.

import { h } from '../dom.js';
import { AssistantMessage, userMessage } from './message.js';
import { ToolCard } from './toolcard.js';

export function historySection(messages) {
  const section = h('section', { class: 'history', 'aria-label': 'Earlier conversation' }, h('p', { class: 'history-note' }, 'Earlier conversation, from the transcript'));
  const cards = new Map();
  for (const { message } of messages) {
    const content = (message && message.content) || [];
    if (message.role === 'user') {
      if (content.some((b) => b.type === 'text')) section.append(userMessage(message));
      for (const b of content) {
        const card = b.type === 'tool_result' && cards.get(b.tool_use_id);
        if (card) card.finish({ is_error: b.is_error, output: typeof b.content === 'string' ? b.content : JSON.stringify(b.content), duration_ms: null });
      }
    } else {
      const reply = new AssistantMessage();
      reply.complete(message);
      if (!reply.empty) section.append(reply.el);
      for (const b of content) {
        if (b.type !== 'tool_use') continue;
        const card = new ToolCard({ call_id: b.id, name: b.name, input: b.input });
        cards.set(b.id, card);
        section.append(card.el);
      }
    }
  }
  for (const card of cards.values()) card.stop('stopped');
  return section;
}
