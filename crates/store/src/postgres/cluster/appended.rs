//! The `agentd_events` notification of one append, and the events it carries.
//!
//! Payload: `<session> <first seq> <last seq> <at ms>`, then, when the batch
//! fits PostgreSQL's 8000-byte limit, one line per event: `\n<type> <data>`
//! (`data` is the stored JSON text, which never holds a raw newline). Other
//! nodes publish those events straight to their streams: no read of the
//! events table, no decode and re-encode. A batch too big to carry sends the
//! header alone and the listener reads the range from the table.

use chrono::{DateTime, Utc};

/// PostgreSQL refuses a `NOTIFY` payload of 8000 bytes or more; this leaves
/// room for the header (the session id and three numbers).
const MAX_PAYLOAD: usize = 7900;

/// The lines appended to the header for `events` (`types[i]`, `data[i]`),
/// or an empty string when they would not fit.
pub(crate) fn carried(session_id: &str, types: &[&str], data: &[String]) -> String {
    let size: usize = types
        .iter()
        .zip(data)
        .map(|(t, d)| t.len() + d.len() + 2)
        .sum();
    if size + session_id.len() > MAX_PAYLOAD {
        return String::new();
    }
    let mut body = String::with_capacity(size);
    for (kind, json) in types.iter().zip(data) {
        body.push('\n');
        body.push_str(kind);
        body.push(' ');
        body.push_str(json);
    }
    body
}

/// One append as another node hears of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub session_id: String,
    pub first: u64,
    pub last: u64,
    /// The payload after the header: the events' lines, if carried.
    at_ms: Option<i64>,
    body: String,
}

/// A carried event, ready for live streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed<'a> {
    pub seq: u64,
    /// Its `type`, for the SSE `event:` line.
    pub kind: &'a str,
    /// The whole envelope's JSON, as `serde_json` writes an `EventEnvelope`.
    pub json: String,
}

impl Appended {
    /// `None` for a payload this version cannot read.
    pub fn parse(payload: &str) -> Option<Self> {
        let (header, body) = match payload.split_once('\n') {
            Some((header, body)) => (header, body),
            None => (payload, ""),
        };
        let mut parts = header.split(' ');
        let session_id = parts.next()?.to_string();
        let first = parts.next()?.parse().ok()?;
        let last = parts.next()?.parse().ok()?;
        let at_ms = parts.next().and_then(|at| at.parse().ok());
        Some(Self {
            session_id,
            first,
            last,
            at_ms,
            body: body.to_string(),
        })
    }

    /// The events in `first..=last`, in order; `None` when the notification
    /// did not carry them all (the range must then be read from the table).
    pub fn relayed(&self) -> Option<Vec<Relayed<'_>>> {
        let at_ms = self.at_ms?;
        if self.body.is_empty() || self.last < self.first {
            return None;
        }
        let at: DateTime<Utc> = DateTime::from_timestamp_millis(at_ms)?;
        let at = serde_json::to_string(&at).ok()?;
        let session = serde_json::to_string(&self.session_id).ok()?;
        let mut events = Vec::new();
        for (seq, line) in (self.first..=self.last).zip(self.body.split('\n')) {
            let (kind, data) = line.split_once(' ')?;
            // `{"type":…}` becomes `{"seq":…,"session_id":…,"at":…,"type":…}`.
            let fields = data.strip_prefix('{')?;
            if fields.starts_with('}') {
                return None;
            }
            let json = format!("{{\"seq\":{seq},\"session_id\":{session},\"at\":{at},{fields}");
            events.push(Relayed { seq, kind, json });
        }
        let expected = usize::try_from(self.last - self.first + 1).ok()?;
        (events.len() == expected && self.body.split('\n').count() == expected).then_some(events)
    }
}

#[cfg(test)]
mod tests {
    use agentd_protocol::{Event, EventEnvelope};

    use super::{Appended, carried};

    fn payload(session: &str, first: u64, at_ms: i64, events: &[Event]) -> String {
        let types: Vec<&str> = events.iter().map(Event::type_name).collect();
        let data: Vec<String> = events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        let last = first + events.len() as u64 - 1;
        format!(
            "{session} {first} {last} {at_ms}{}",
            carried(session, &types, &data)
        )
    }

    fn delta(text: &str) -> Event {
        Event::MessageDelta {
            turn_id: "t1".into(),
            index: 0,
            kind: agentd_protocol::DeltaKind::Text,
            text: text.into(),
            parent_call_id: None,
        }
    }

    #[test]
    fn carried_events_are_the_envelopes_serde_writes() {
        let events = [delta("a \"quoted\"\nline"), delta("b")];
        let at_ms = 1_795_000_000_123;
        let appended = Appended::parse(&payload("s1", 7, at_ms, &events)).unwrap();
        assert_eq!((appended.first, appended.last), (7, 8));
        let relayed = appended.relayed().unwrap();
        assert_eq!(relayed.len(), 2);
        for (i, (got, event)) in relayed.iter().zip(&events).enumerate() {
            let envelope = EventEnvelope {
                seq: 7 + i as u64,
                session_id: "s1".into(),
                at: chrono::DateTime::from_timestamp_millis(at_ms).unwrap(),
                event: event.clone(),
            };
            assert_eq!(got.seq, envelope.seq);
            assert_eq!(got.kind, "message.delta");
            assert_eq!(got.json, serde_json::to_string(&envelope).unwrap());
        }
    }

    #[test]
    fn a_batch_too_big_or_a_short_payload_is_read_from_the_table() {
        let big = delta(&"x".repeat(8000));
        let appended = Appended::parse(&payload("s1", 1, 5, &[big])).unwrap();
        assert_eq!((appended.first, appended.last), (1, 1));
        assert_eq!(appended.relayed(), None);
        // The header alone (an older node's notification).
        let old = Appended::parse("s1 3 4").unwrap();
        assert_eq!((old.first, old.last), (3, 4));
        assert_eq!(old.relayed(), None);
        // Fewer lines than the range says.
        let short = Appended::parse("s1 3 4 5\nmessage.delta {\"type\":\"message.delta\"}");
        assert_eq!(short.unwrap().relayed(), None);
        assert_eq!(Appended::parse("s1 x 4"), None);
    }
}
