//! What an append tells the other nodes on [`super::EVENTS_CHANNEL`]:
//! `<session> <first> <last> <at>`, then, when they fit in a notification,
//! the events' stored data, a line each (compact JSON has no raw newline).
//! A node publishes carried events as they are, with no read of the events
//! table; without them it reads the range. An append sends one notification
//! per run of events that fit together ([`NoticeChunks`]): few enough that
//! commits, which PostgreSQL serializes while they queue notifications, stay
//! short.

use agentd_protocol::{Event, EventEnvelope};
use chrono::DateTime;

/// Data lines of one notification at most: PostgreSQL refuses a payload of
/// 8 000 bytes or more, and the head (session id, seqs, time) comes first.
const MAX_BODY: usize = 7800;

/// An append's events cut into notifications: the ordinals (from 1) of each
/// one's first and last event, and its body (`\n` and the data lines, or
/// nothing for one event too large to carry).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct NoticeChunks {
    pub firsts: Vec<i64>,
    pub lasts: Vec<i64>,
    pub bodies: Vec<String>,
}

impl NoticeChunks {
    pub(crate) fn of(data: &[String]) -> Self {
        let mut chunks = Self::default();
        for (ordinal, line) in (1_i64..).zip(data) {
            let fits = line.len() < MAX_BODY;
            let open = chunks.bodies.last_mut().zip(chunks.lasts.last_mut());
            if let Some((body, last)) = open.filter(|(body, _)| {
                !body.is_empty() && fits && body.len() + 1 + line.len() <= MAX_BODY
            }) {
                body.push('\n');
                body.push_str(line);
                *last = ordinal;
                continue;
            }
            chunks.firsts.push(ordinal);
            chunks.lasts.push(ordinal);
            chunks.bodies.push(if fits {
                format!("\n{line}")
            } else {
                String::new()
            });
        }
        chunks
    }
}

/// One append, as another node heard of it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsNotice {
    pub session_id: String,
    pub first: u64,
    pub last: u64,
    /// `first..=last`, in order, or empty: read them from the table.
    pub carried: Vec<EventEnvelope>,
}

impl EventsNotice {
    /// `None` for a payload that is not an append's (or is damaged). Carried
    /// data that does not decode, or does not cover the range exactly, is
    /// dropped: the range is read from the table instead.
    pub fn parse(payload: &str) -> Option<Self> {
        let (head, data) = match payload.split_once('\n') {
            Some((head, data)) => (head, Some(data)),
            None => (payload, None),
        };
        let mut parts = head.split(' ');
        let session_id = parts.next().filter(|s| !s.is_empty())?.to_string();
        let first: u64 = parts.next()?.parse().ok()?;
        let last: u64 = parts.next()?.parse().ok()?;
        if first == 0 || last < first {
            return None;
        }
        let at = parts
            .next()
            .and_then(|ms| ms.parse().ok())
            .and_then(DateTime::from_timestamp_millis);
        let carried = match (at, data) {
            (Some(at), Some(data)) => carried(&session_id, first, last, at, data),
            _ => Vec::new(),
        };
        Some(Self {
            session_id,
            first,
            last,
            carried,
        })
    }
}

fn carried(
    session_id: &str,
    first: u64,
    last: u64,
    at: DateTime<chrono::Utc>,
    data: &str,
) -> Vec<EventEnvelope> {
    let lines = data.split('\n');
    let decoded: Option<Vec<EventEnvelope>> = (first..=last)
        .zip(lines.clone())
        .map(|(seq, line)| {
            let event: Event = serde_json::from_str(line).ok()?;
            Some(EventEnvelope {
                seq,
                session_id: session_id.to_string(),
                at,
                event,
            })
        })
        .collect();
    match decoded {
        Some(events)
            if events.len() as u64 == last - first + 1 && lines.count() == events.len() =>
        {
            events
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> String {
        serde_json::to_string(&Event::MessageDelta {
            turn_id: "t".into(),
            index: 0,
            kind: agentd_protocol::DeltaKind::Text,
            text: text.into(),
            parent_call_id: None,
        })
        .unwrap()
    }

    #[test]
    fn a_notice_carries_its_events_or_only_their_range() {
        let payload = format!("s1 4 5 1717000000123\n{}\n{}", delta("a\nb"), delta("c"));
        let notice = EventsNotice::parse(&payload).unwrap();
        assert_eq!((notice.first, notice.last), (4, 5));
        let seqs: Vec<u64> = notice.carried.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [4, 5]);
        assert_eq!(notice.carried[0].at.timestamp_millis(), 1_717_000_000_123);
        assert!(
            matches!(&notice.carried[0].event, Event::MessageDelta { text, .. } if text == "a\nb")
        );

        let bare = EventsNotice::parse("s1 4 5 1717000000123").unwrap();
        assert!(bare.carried.is_empty(), "too large to carry");
        let older = EventsNotice::parse("s1 4 5").unwrap();
        assert_eq!((older.first, older.last), (4, 5), "a node without `at`");
    }

    #[test]
    fn an_append_is_cut_into_notifications_that_fit() {
        let small = delta("a");
        let big = "x".repeat(MAX_BODY);
        let half = "y".repeat(MAX_BODY / 2);
        let data = [
            small.clone(),
            small.clone(),
            big.clone(),
            half.clone(),
            half.clone(),
        ];
        let chunks = NoticeChunks::of(&data);
        assert_eq!(chunks.firsts, [1, 3, 4, 5]);
        assert_eq!(chunks.lasts, [2, 3, 4, 5]);
        assert_eq!(chunks.bodies[0], format!("\n{small}\n{small}"));
        assert_eq!(chunks.bodies[1], "", "too large: the range only");
        assert_eq!(
            chunks.bodies[2],
            format!("\n{half}"),
            "two halves and a newline do not fit"
        );
        assert!(chunks.bodies.iter().all(|b| b.len() <= MAX_BODY));
        // What a node hears back: the same events.
        let payload = format!("s1 7 8 1717000000123{}", chunks.bodies[0]);
        assert_eq!(EventsNotice::parse(&payload).unwrap().carried.len(), 2);
    }

    #[test]
    fn carried_data_that_does_not_fit_the_range_is_read_from_the_table() {
        let one = format!("s1 4 5 1717000000123\n{}", delta("a"));
        assert!(EventsNotice::parse(&one).unwrap().carried.is_empty());
        let three = format!("s1 4 5 1717000000123\n{0}\n{0}\n{0}", delta("a"));
        assert!(EventsNotice::parse(&three).unwrap().carried.is_empty());
        let garbage = "s1 4 5 1717000000123\n{\"type\":\"message.delta\"\n}";
        assert!(EventsNotice::parse(garbage).unwrap().carried.is_empty());
        for bad in ["", "s1", "s1 x 5", "s1 5 4", "s1 0 0", " 1 2"] {
            assert_eq!(EventsNotice::parse(bad), None, "{bad:?}");
        }
    }
}
