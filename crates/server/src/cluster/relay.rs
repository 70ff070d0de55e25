//! Events another node appended, published to the streams here from the
//! notification itself when it carried them (no read of the events table,
//! no decode and re-encode: the stored JSON is what the streams send).

use std::collections::HashMap;
use std::sync::Mutex;

use agentd_protocol::EventEnvelope;
use agentd_store::postgres::cluster::{Appended, Relayed};

use crate::registry::{LiveEvent, Registry};

/// Publish a session's appends heard in one batch (in commit order, so in
/// `seq` order). Returns the range `(after, upto]` to read from the table
/// instead when they did not carry their events or left a gap; `None` when
/// done (or nobody here watches the session, or its turn runs here and its
/// worker publishes).
pub(super) fn publish(
    registry: &Registry,
    session: String,
    appends: &[Appended],
) -> Option<(String, u64, u64)> {
    let handle = registry.watched(&session)?;
    if handle.runs_here() {
        return None;
    }
    let first = appends.iter().map(|a| a.first).min()?;
    let last = appends.iter().map(|a| a.last).max()?;
    let read_instead = Some((session, first.saturating_sub(1), last));
    let mut carried = Vec::with_capacity(appends.len());
    let mut next = first;
    for append in appends {
        if append.first != next {
            return read_instead;
        }
        next = append.last + 1;
        carried.push(append.relayed()?);
    }
    for relayed in carried.into_iter().flatten() {
        match live_event(relayed) {
            Some(event) => handle.publish_encoded(event),
            None => return read_instead,
        }
    }
    None
}

/// The event as the hub sends it; `None` if its type is not one this
/// version knows.
fn live_event(relayed: Relayed<'_>) -> Option<LiveEvent> {
    Some(LiveEvent {
        seq: relayed.seq,
        kind: static_kind(relayed.kind, &relayed.json)?,
        json: relayed.json,
    })
}

/// Type names seen so far, as the `&'static str` the hub keeps.
static KINDS: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);

/// The SSE `event:` name of a carried event, decoded once per type.
fn static_kind(kind: &str, json: &str) -> Option<&'static str> {
    let mut kinds = KINDS.lock().unwrap_or_else(|e| e.into_inner());
    let kinds = kinds.get_or_insert_with(HashMap::new);
    if let Some(known) = kinds.get(kind) {
        return Some(known);
    }
    let envelope: EventEnvelope = serde_json::from_str(json).ok()?;
    let name = envelope.event.type_name();
    (name == kind).then(|| *kinds.entry(kind.to_string()).or_insert(name))
}

#[cfg(test)]
mod tests {
    use super::static_kind;

    #[test]
    fn a_type_is_known_by_decoding_its_first_event() {
        let delta = r#"{"seq":1,"session_id":"s","at":"2026-11-27T10:00:00Z","type":"message.delta","turn_id":"t","index":0,"kind":"text","text":"x"}"#;
        assert_eq!(static_kind("message.delta", delta), Some("message.delta"));
        // Known from then on; a name that does not match its JSON is refused.
        assert_eq!(static_kind("message.delta", "{}"), Some("message.delta"));
        assert_eq!(static_kind("usage", delta), None);
    }
}
