//! A turn fenced out (its node lost the turn's lease): the sink stores
//! nothing more of it and fails every later call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use agentd_protocol::{Event, EventEnvelope, Message, TurnStatus};
use agentd_store::sqlite::SqliteStore;
use agentd_store::{
    CompactionRecord, EventLog, Fence, LogAppend, LogEntry, StoreError, StoreResult, StoredMessage,
    TranscriptStore,
};
use async_trait::async_trait;
use tokio::runtime::Handle;

use super::StoreSink;
use super::tests::{event, finished};
use crate::test_support::sqlite_with_session;
use agentd_engine::TurnSink;

/// SQLite, whose fenced appends are refused once `lost` is set (as
/// PostgreSQL's are once another node took the lease). Counts the appends
/// tried after that; an unfenced append is a bug here.
struct LosesLease {
    inner: SqliteStore,
    lost: AtomicBool,
    refused: AtomicUsize,
}

#[async_trait]
impl EventLog for LosesLease {
    async fn append_event(&self, _: &str, _: &Event) -> StoreResult<EventEnvelope> {
        unreachable!("a fenced sink appends fenced")
    }

    async fn append_events(&self, _: &str, _: &[Event]) -> StoreResult<Vec<EventEnvelope>> {
        unreachable!("a fenced sink appends fenced")
    }

    async fn append_log(&self, _: &str, _: &[LogEntry<'_>]) -> LogAppend {
        unreachable!("a fenced sink appends fenced")
    }

    async fn append_log_fenced(
        &self,
        session_id: &str,
        fence: &Fence,
        entries: &[LogEntry<'_>],
    ) -> LogAppend {
        if self.lost.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return LogAppend::new(Vec::new(), Some(fence.lost(session_id)));
        }
        self.inner
            .append_log_fenced(session_id, fence, entries)
            .await
    }

    async fn events_after(
        &self,
        session_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventEnvelope>> {
        self.inner.events_after(session_id, after, limit).await
    }
}

#[async_trait]
impl TranscriptStore for LosesLease {
    async fn append_message(
        &self,
        _: &str,
        _: Option<&str>,
        _: &Message,
    ) -> StoreResult<StoredMessage> {
        unreachable!("a fenced sink appends fenced")
    }

    async fn messages(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>> {
        self.inner.messages(session_id).await
    }

    async fn messages_from(&self, session_id: &str, from: u64) -> StoreResult<Vec<StoredMessage>> {
        self.inner.messages_from(session_id, from).await
    }

    async fn add_compaction(&self, record: &CompactionRecord) -> StoreResult<()> {
        self.inner.add_compaction(record).await
    }

    async fn add_compaction_fenced(
        &self,
        record: &CompactionRecord,
        fence: &Fence,
    ) -> StoreResult<()> {
        self.inner.add_compaction_fenced(record, fence).await
    }

    async fn latest_compaction(&self, session_id: &str) -> StoreResult<Option<CompactionRecord>> {
        self.inner.latest_compaction(session_id).await
    }

    async fn turn_position(&self, session_id: &str, turn_id: &str) -> StoreResult<Option<i64>> {
        self.inner.turn_position(session_id, turn_id).await
    }

    async fn truncate_history(&self, session_id: &str, from: i64) -> StoreResult<u64> {
        self.inner.truncate_history(session_id, from).await
    }
}

#[tokio::test]
async fn a_lost_lease_stores_nothing_more_and_fails_every_later_call() {
    let (inner, session) = sqlite_with_session().await;
    let store = Arc::new(LosesLease {
        inner,
        lost: AtomicBool::new(false),
        refused: AtomicUsize::new(0),
    });
    let fence = Fence {
        node_id: "n1".into(),
        turn_id: "t".into(),
    };
    let sink = StoreSink::fenced(
        store.clone(),
        session.clone(),
        Some(fence),
        None,
        &Handle::current(),
    );
    sink.emit(event(0)).await.unwrap();
    sink.append_message("t", &Message::user_text("kept"))
        .await
        .unwrap();
    sink.flush().await.unwrap();
    assert!(sink.lease_lost().is_none());

    // Another node takes the turn over: a batch of events and messages.
    store.lost.store(true, Ordering::SeqCst);
    sink.emit(event(1)).await.unwrap();
    sink.append_message("t", &Message::user_text("lost"))
        .await
        .unwrap();
    sink.emit(event(2)).await.unwrap();
    assert!(sink.flush().await.is_err());
    let lost = sink.lease_lost().expect("the loss is known");
    assert!(matches!(lost, StoreError::LeaseLost(_)), "{lost}");

    // Nothing of the batch is stored, and nothing later is even tried.
    let stored = |store: Arc<LosesLease>, session: String| async move {
        let events = store.events_after(&session, 0, 100).await.unwrap().len();
        let messages = store.messages(&session).await.unwrap().len();
        (events, messages)
    };
    assert_eq!(stored(store.clone(), session.clone()).await, (1, 1));
    assert!(sink.emit(event(3)).await.is_err());
    assert!(
        sink.append_message("t", &Message::user_text("later"))
            .await
            .is_err()
    );
    assert!(sink.flush().await.is_err());
    // Not even a `failed` end: the node that took the turn records it.
    assert!(
        sink.finish_turn(&finished(TurnStatus::Failed))
            .await
            .is_err()
    );
    assert_eq!(stored(store.clone(), session).await, (1, 1));
    assert_eq!(
        store.refused.load(Ordering::SeqCst),
        1,
        "one refusal, no retry"
    );
}
