//! A transcript's messages as a provider's request serialised them, kept
//! across model calls: each call sends the whole transcript, and without
//! this serialised all of it again (a few hundred KB by a long session's
//! end, about a millisecond a call).
//!
//! The engine hands one with each request: a turn's own, or one its caller
//! keeps for the session across turns. A kept entry serves only while its
//! message is equal to the transcript's at the same place (a comparison of
//! bytes, far cheaper than escaping them again); from the first that is
//! not, everything is made again, so a compaction, a rewind or a turn run
//! elsewhere costs one whole serialisation, never a stale byte. A request's
//! last message is never kept (it may still grow: the engine merges a
//! message of the same role into it). Only the Anthropic client fills it
//! (OpenAI-format bodies are serialised whole), so its entries are in that
//! format.

use std::sync::{Mutex, MutexGuard, PoisonError};

use agentd_protocol::Message;
use serde_json::value::RawValue;

/// Serialised messages of one transcript.
#[derive(Debug, Default)]
pub struct WireCache(Mutex<Kept>);

#[derive(Debug, Default)]
pub(crate) struct Kept {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    /// What was serialised: the entry serves only a message equal to it.
    message: Message,
    /// `None`: the message sends nothing (all of its blocks are dropped).
    wire: Option<Box<RawValue>>,
}

/// What is kept does not change what a request asks for: any two are equal.
impl PartialEq for WireCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl WireCache {
    /// Forget everything kept: the transcript was rewritten.
    pub fn clear(&self) {
        self.lock().entries.clear();
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The serialised forms of every message of `messages` but the last,
    /// made by `serialise` where not kept from an earlier call
    /// (`Ok(None)`: the message sends nothing). A message that cannot be
    /// serialised is an error, and nothing from it on is kept.
    pub(crate) fn prefix(
        &self,
        messages: &[Message],
        serialise: impl Fn(&Message) -> serde_json::Result<Option<Box<RawValue>>>,
    ) -> serde_json::Result<MutexGuard<'_, Kept>> {
        let mut kept = self.lock();
        let prefix = &messages[..messages.len().saturating_sub(1)];
        let valid = kept
            .entries
            .iter()
            .zip(prefix)
            .take_while(|(entry, message)| entry.message == **message)
            .count();
        kept.entries.truncate(valid);
        for message in &prefix[valid..] {
            kept.entries.push(Entry {
                message: message.clone(),
                wire: serialise(message)?,
            });
        }
        Ok(kept)
    }
}

impl Kept {
    /// The kept messages that send something, in order.
    pub(crate) fn wire(&self) -> impl Iterator<Item = &RawValue> {
        self.entries
            .iter()
            .filter_map(|entry| entry.wire.as_deref())
    }
}
