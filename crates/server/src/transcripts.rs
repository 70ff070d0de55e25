//! The transcripts of recently active sessions, kept decoded between turns.
//!
//! Every turn gives the model the whole transcript. Reading and decoding it
//! from the store costs in proportion to the session's length; with this
//! cache a turn reads only the messages from the last one it saw on.
//!
//! The cache is a shortcut, never a source of truth: each read asks the store
//! for the messages from the cached last position on and uses the cache only
//! when the first of them is still the cached last message (same id at the
//! same position). Rewinding deletes that message and new messages get new
//! ids, so a rewound or re-written transcript reads in full again, and what
//! another node appended comes back with the rows. Only an import keeps ids:
//! deleting a session through this server forgets its entry, so a session
//! deleted and imported again reads whole. (One deleted and re-imported by
//! another process, edited but ending in the same message, is not noticed
//! until the entry is evicted or the server restarts.)
//!
//! Each entry also keeps the transcript as the model's requests serialised
//! it (a [`WireCache`]), so a turn's first request serialises only what the
//! turn before did not send. That cache checks every message it serves
//! against the one it serialised, so it needs none of the above to be right.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use agentd_model::WireCache;
use agentd_protocol::{ContentBlock, Message};
use agentd_store::{Store, StoreError, StoredMessage};

/// Sessions kept, least recently read first, and the bytes of text they may
/// hold together; a transcript larger than a quarter of that is not kept.
const MAX_SESSIONS: usize = 256;
const MAX_BYTES: usize = 192 << 20;
/// What an entry holds per byte of its transcript's text: the transcript,
/// and its wire cache's copy of the messages and their JSON.
const HELD_PER_BYTE: usize = 3;

#[derive(Default)]
pub struct Transcripts {
    entries: Mutex<VecDeque<Entry>>,
}

struct Entry {
    session_id: String,
    messages: Arc<Vec<StoredMessage>>,
    /// The model's requests' serialised form of it, for the session's next
    /// turn (see [`Transcripts::read`]).
    wire: Arc<WireCache>,
    bytes: usize,
}

impl Transcripts {
    /// `session_id`'s whole transcript, in order, as the store has it now,
    /// and the wire cache kept with it (see [`WireCache`]; a new one when the
    /// transcript is not kept): the turn's model requests serialise only
    /// what the turn before did not send.
    pub async fn read(
        &self,
        store: &dyn Store,
        session_id: &str,
    ) -> Result<(Arc<Vec<StoredMessage>>, Arc<WireCache>), StoreError> {
        let Some(entry) = self.take(session_id) else {
            return self.read_all(store, session_id, Arc::default()).await;
        };
        let Some(last) = entry.messages.last() else {
            return self.read_all(store, session_id, entry.wire).await;
        };
        let tail = store.messages_from(session_id, last.position).await?;
        let Some((first, new)) = tail.split_first().filter(|(first, _)| first.id == last.id) else {
            return self.read_all(store, session_id, entry.wire).await;
        };
        debug_assert_eq!(first.position, last.position);
        let mut messages = entry.messages;
        let bytes = entry.bytes + new.iter().map(|m| approx_bytes(&m.message)).sum::<usize>();
        Arc::make_mut(&mut messages).extend_from_slice(new);
        self.keep(session_id, &messages, entry.wire.clone(), bytes);
        Ok((messages, entry.wire))
    }

    /// `wire`: what was serialised of the transcript before, kept: it
    /// checks each message against what it serialised.
    async fn read_all(
        &self,
        store: &dyn Store,
        session_id: &str,
        wire: Arc<WireCache>,
    ) -> Result<(Arc<Vec<StoredMessage>>, Arc<WireCache>), StoreError> {
        let messages = Arc::new(store.messages(session_id).await?);
        let bytes = messages.iter().map(|m| approx_bytes(&m.message)).sum();
        self.keep(session_id, &messages, wire.clone(), bytes);
        Ok((messages, wire))
    }

    /// Forget `session_id`'s transcript (the session was deleted).
    pub fn forget(&self, session_id: &str) {
        self.take(session_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self, session_id: &str) -> Option<Entry> {
        let mut entries = self.lock();
        let index = entries.iter().position(|e| e.session_id == session_id)?;
        entries.remove(index)
    }

    /// Remember `messages` as `session_id`'s transcript (an empty one is not
    /// worth a place: it reads in one cheap query).
    fn keep(
        &self,
        session_id: &str,
        messages: &Arc<Vec<StoredMessage>>,
        wire: Arc<WireCache>,
        bytes: usize,
    ) {
        if messages.is_empty() || bytes * HELD_PER_BYTE > MAX_BYTES / 4 {
            return;
        }
        let mut entries = self.lock();
        entries.retain(|e| e.session_id != session_id);
        let held = |bytes: usize| bytes * HELD_PER_BYTE;
        let mut total: usize = entries.iter().map(|e| held(e.bytes)).sum::<usize>() + held(bytes);
        while entries.len() >= MAX_SESSIONS || total > MAX_BYTES {
            let Some(evicted) = entries.pop_front() else {
                break;
            };
            total -= held(evicted.bytes);
        }
        entries.push_back(Entry {
            session_id: session_id.to_string(),
            messages: messages.clone(),
            wire,
            bytes,
        });
    }
}

/// About the bytes a message holds: its strings, and some for the record
/// around them and per block.
fn approx_bytes(message: &Message) -> usize {
    256 + message
        .content
        .iter()
        .map(|block| {
            96 + match block {
                ContentBlock::Text { text } => text.len(),
                ContentBlock::Thinking {
                    thinking,
                    signature,
                } => thinking.len() + signature.as_ref().map_or(0, String::len),
                ContentBlock::ToolUse { id, name, input } => {
                    id.len() + name.len() + json_heap_bytes(input)
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    images,
                    ..
                } => {
                    tool_use_id.len()
                        + content.len()
                        + images.iter().map(json_heap_bytes).sum::<usize>()
                }
                ContentBlock::Image { source } | ContentBlock::Document { source, .. } => {
                    json_heap_bytes(source)
                }
            }
        })
        .sum::<usize>()
}

/// The bytes of a JSON value's strings and keys, roughly.
fn json_heap_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(json_heap_bytes).sum::<usize>() + 8,
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len() + json_heap_bytes(v) + 16)
            .sum(),
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::store_with_session;

    async fn append(store: &Arc<dyn Store>, session: &str, text: &str) {
        store
            .append_message(session, None, &Message::user_text(text))
            .await
            .unwrap();
    }

    /// A session's wire cache lives as long as its transcript is kept,
    /// through appends and a rewind (it checks what it serves itself), and
    /// goes with it.
    #[tokio::test]
    async fn the_wire_cache_is_kept_with_the_transcript() {
        let (store, session) = store_with_session().await;
        let cache = Transcripts::default();
        let wire_of =
            async |cache: &Transcripts| cache.read(store.as_ref(), &session).await.unwrap().1;
        append(&store, &session, "a").await;
        let wire = wire_of(&cache).await;
        append(&store, &session, "b").await;
        assert!(Arc::ptr_eq(&wire, &wire_of(&cache).await));
        store.truncate_history(&session, 1).await.unwrap();
        append(&store, &session, "c").await;
        assert!(Arc::ptr_eq(&wire, &wire_of(&cache).await));
        cache.forget(&session);
        assert!(!Arc::ptr_eq(&wire, &wire_of(&cache).await));
    }

    fn texts(messages: &[StoredMessage]) -> Vec<String> {
        messages.iter().map(|m| m.message.text()).collect()
    }

    /// A cached transcript follows appends, a rewind followed by as many new
    /// messages (same count, same last position), and another writer.
    #[tokio::test]
    async fn a_cached_transcript_is_always_the_stored_one() {
        let (store, session) = store_with_session().await;
        let cache = Transcripts::default();
        for text in ["a", "b", "c"] {
            append(&store, &session, text).await;
        }
        assert_eq!(
            texts(&cache.read(store.as_ref(), &session).await.unwrap().0),
            ["a", "b", "c"]
        );
        append(&store, &session, "d").await;
        assert_eq!(
            texts(&cache.read(store.as_ref(), &session).await.unwrap().0),
            ["a", "b", "c", "d"]
        );
        // Rewind to before "c", then write two messages again: the same
        // count and last position as the cached transcript.
        store.truncate_history(&session, 3).await.unwrap();
        append(&store, &session, "x").await;
        append(&store, &session, "y").await;
        let (read, _) = cache.read(store.as_ref(), &session).await.unwrap();
        assert_eq!(texts(&read), ["a", "b", "x", "y"]);
        assert_eq!(*read, store.messages(&session).await.unwrap());
        // Rewound to nothing.
        store.truncate_history(&session, 1).await.unwrap();
        assert!(
            cache
                .read(store.as_ref(), &session)
                .await
                .unwrap()
                .0
                .is_empty()
        );
        append(&store, &session, "z").await;
        assert_eq!(
            texts(&cache.read(store.as_ref(), &session).await.unwrap().0),
            ["z"]
        );
        // A deleted session (which an import could bring back with the same
        // ids) is forgotten.
        cache.forget(&session);
        assert!(cache.take(&session).is_none());
    }

    #[test]
    fn the_cache_keeps_to_its_budget() {
        let cache = Transcripts::default();
        let message = |bytes: usize| StoredMessage {
            id: uuid::Uuid::now_v7().to_string(),
            session_id: String::new(),
            turn_id: None,
            position: 1,
            message: Message::user_text("x".repeat(bytes)),
            created_at: chrono::Utc::now(),
        };
        for i in 0..MAX_SESSIONS + 10 {
            let messages = Arc::new(vec![message(10)]);
            cache.keep(&format!("s{i}"), &messages, Arc::default(), 100);
        }
        assert_eq!(cache.lock().len(), MAX_SESSIONS);
        assert!(cache.take("s0").is_none(), "the least recent went first");
        // An eighth of what may be held each, with their wire caches.
        let big = MAX_BYTES / 8 / HELD_PER_BYTE;
        for i in 0..10 {
            let messages = Arc::new(vec![message(big)]);
            cache.keep(
                &format!("big{i}"),
                &messages,
                Arc::default(),
                approx_bytes(&messages[0].message),
            );
        }
        assert!(cache.take("big9").is_some(), "the latest is kept");
        let held: usize = cache.lock().iter().map(|e| e.bytes * HELD_PER_BYTE).sum();
        assert!(held <= MAX_BYTES, "{held}");
        let huge = Arc::new(vec![message(MAX_BYTES / 2 / HELD_PER_BYTE)]);
        cache.keep("huge", &huge, Arc::default(), MAX_BYTES / 2 / HELD_PER_BYTE);
        assert!(cache.take("huge").is_none());
    }
}
