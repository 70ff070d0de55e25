//! Where a turn's events begin in the session's event log, for clients that
//! replay one turn (the AI SDK's resumable chat stream): the store keeps no
//! seq per turn, so the start is found from the turn's `started_at`.

use agentd_store::TurnRecord;
use chrono::{DateTime, Duration, Utc};

use super::{SessionResult, SessionService};

/// Room for clocks that step back between the turn's record and its first
/// event (both stamped by servers of the same cluster).
const CLOCK_SLACK_SECONDS: i64 = 5;

impl SessionService {
    /// The session's running turn, as the store records it (on any node).
    pub async fn running_turn(&self, session_id: &str) -> SessionResult<Option<TurnRecord>> {
        let running = self.store().running_turns().await?;
        Ok(running
            .into_iter()
            .filter(|turn| turn.session_id == session_id)
            .max_by_key(|turn| turn.started_at))
    }

    /// The turn an earlier request with `client_request_id` started.
    pub async fn turn_of_request(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> SessionResult<Option<TurnRecord>> {
        Ok(self
            .store()
            .find_turn(session_id, client_request_id)
            .await?)
    }

    /// A seq at or before the first event of a turn started at
    /// `started_at`: a binary search on the events' times up to `last_seq`,
    /// so a long session is not read from its start.
    pub async fn seq_before(
        &self,
        session_id: &str,
        started_at: DateTime<Utc>,
        last_seq: u64,
    ) -> SessionResult<u64> {
        let bound = started_at - Duration::seconds(CLOCK_SLACK_SECONDS);
        let (mut low, mut high) = (0, last_seq);
        while low < high {
            let middle = low + (high - low) / 2;
            let next = self.store().events_after(session_id, middle, 1).await?;
            match next.first() {
                Some(event) if event.at < bound => low = middle + 1,
                _ => high = middle,
            }
        }
        Ok(low)
    }
}
