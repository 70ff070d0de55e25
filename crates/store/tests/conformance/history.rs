//! `truncate_history`: rewinding the transcript, with the checkpoints and
//! compactions that no longer fit; and what an export holds afterwards.

use agentd_protocol::Message;
use agentd_store::prelude::*;
use agentd_store::{Store, StoredMessage};
use chrono::{DateTime, Duration, Utc};

use super::checkpoints::{at, checkpoint, compaction};
use crate::{session, store};

async fn append(store: &impl Store, session_id: &str, text: &str) -> StoredMessage {
    store
        .append_message(session_id, Some("t"), &Message::user_text(text))
        .await
        .unwrap()
}

fn positions(messages: &[StoredMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.position).collect()
}

async fn checkpoint_ids(store: &impl Store, session_id: &str) -> Vec<String> {
    let listed = store.list_checkpoints(session_id).await.unwrap();
    listed.into_iter().map(|c| c.id).collect()
}

async fn compaction_ids(store: &crate::TestStore, session_id: &str) -> Vec<String> {
    crate::strings(
        store,
        "SELECT id FROM compactions WHERE session_id = $1 ORDER BY id",
        session_id,
    )
    .await
}

#[tokio::test]
async fn truncating_drops_later_messages_checkpoints_and_compactions() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    let other = session(&store, "alice").await;
    let mut messages = Vec::new();
    for i in 1..=6 {
        messages.push(append(&store, &s.id, &format!("m{i}")).await);
    }
    append(&store, &other.id, "elsewhere").await;
    // Rewinding to the checkpoint at position 4 deletes messages 4, 5, 6.
    let first_deleted: DateTime<Utc> = messages[3..].iter().map(|m| m.created_at).min().unwrap();
    let long_ago = messages[0].created_at - Duration::seconds(60);
    let before = |ms: i64| first_deleted - Duration::milliseconds(ms);

    for (id, position) in [
        ("cp-1", 1),
        ("cp-3", 3),
        ("cp-4", 4),
        ("cp-5", 5),
        ("cp-6", 6),
    ] {
        let created = long_ago + Duration::milliseconds(position);
        store
            .create_checkpoint(&checkpoint(id, &s.id, position, created))
            .await
            .unwrap();
    }
    store
        .create_checkpoint(&checkpoint("cp-other", &other.id, 9, long_ago))
        .await
        .unwrap();
    for (id, first_kept, created) in [
        // Summarises messages 1 and 2, from before the deleted ones: kept.
        ("c-keep", 3, before(2)),
        // Keeps messages from 4 on, which are gone: only its summary is left
        // of its context, and that is still true.
        ("c-at", 4, before(1)),
        // Keeps messages from 5 on: they are gone, it goes.
        ("c-later", 5, long_ago),
        // Created at the first deleted message: it may summarise it.
        ("c-same-ms", 2, first_deleted),
        ("c-after", 2, first_deleted + Duration::seconds(1)),
    ] {
        store
            .add_compaction(&compaction(id, &s.id, first_kept, created))
            .await
            .unwrap();
    }
    store
        .add_compaction(&compaction("c-other", &other.id, 9, at(0)))
        .await
        .unwrap();
    let updated_before = store.get_session(&s.id).await.unwrap().unwrap().updated_at;

    assert_eq!(store.truncate_history(&s.id, 4).await.unwrap(), 3);

    assert_eq!(store.messages(&s.id).await.unwrap(), messages[..3]);
    assert_eq!(
        checkpoint_ids(&store, &s.id).await,
        ["cp-1", "cp-3", "cp-4"]
    );
    assert_eq!(compaction_ids(&store, &s.id).await, ["c-at", "c-keep"]);
    assert_eq!(
        store.latest_compaction(&s.id).await.unwrap().unwrap().id,
        "c-at"
    );
    let session = store.get_session(&s.id).await.unwrap().unwrap();
    assert!(session.updated_at >= updated_before);
    // Other sessions are untouched.
    assert_eq!(store.messages(&other.id).await.unwrap().len(), 1);
    assert_eq!(checkpoint_ids(&store, &other.id).await, ["cp-other"]);
    assert_eq!(compaction_ids(&store, &other.id).await, ["c-other"]);

    // Positions go on without a gap.
    assert_eq!(append(&store, &s.id, "m4'").await.position, 4);
    assert_eq!(append(&store, &s.id, "m5'").await.position, 5);
    assert_eq!(
        positions(&store.messages(&s.id).await.unwrap()),
        [1, 2, 3, 4, 5]
    );
}

#[tokio::test]
async fn truncating_past_the_end_or_from_the_start() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    for i in 1..=3 {
        append(&store, &s.id, &format!("m{i}")).await;
    }
    store
        .create_checkpoint(&checkpoint("cp-1", &s.id, 1, at(0)))
        .await
        .unwrap();
    store
        .create_checkpoint(&checkpoint("cp-3", &s.id, 3, at(1)))
        .await
        .unwrap();
    // A compaction newer than every message, summarising none of the ones
    // that would be deleted (there are none).
    store
        .add_compaction(&compaction("c", &s.id, 3, Utc::now() + Duration::hours(1)))
        .await
        .unwrap();

    // Nothing at or after position 4: nothing changes.
    assert_eq!(store.truncate_history(&s.id, 4).await.unwrap(), 0);
    assert_eq!(store.messages(&s.id).await.unwrap().len(), 3);
    assert_eq!(checkpoint_ids(&store, &s.id).await, ["cp-1", "cp-3"]);
    assert!(store.latest_compaction(&s.id).await.unwrap().is_some());
    assert_eq!(store.truncate_history(&s.id, 100).await.unwrap(), 0);
    assert_eq!(append(&store, &s.id, "m4").await.position, 4);

    // From the first message: the transcript is empty, the checkpoint at 1
    // (the state rewound to) stays, and numbering starts again at 1.
    assert_eq!(store.truncate_history(&s.id, 1).await.unwrap(), 4);
    assert!(store.messages(&s.id).await.unwrap().is_empty());
    assert_eq!(checkpoint_ids(&store, &s.id).await, ["cp-1"]);
    assert!(store.latest_compaction(&s.id).await.unwrap().is_none());
    assert_eq!(append(&store, &s.id, "again").await.position, 1);
    // An empty transcript truncates to nothing.
    assert_eq!(store.truncate_history(&s.id, 0).await.unwrap(), 1);
    assert_eq!(store.truncate_history(&s.id, 0).await.unwrap(), 0);
    assert_eq!(append(&store, &s.id, "again").await.position, 1);
}

/// Exports leave checkpoints and compactions out; the transcript they hold is
/// the truncated one, gapless, and goes on from there after an import.
#[tokio::test]
async fn a_truncated_session_exports_consistently() {
    let (_a, from) = store().await;
    let (_b, to) = store().await;
    let s = session(&from, "alice").await;
    for i in 1..=5 {
        append(&from, &s.id, &format!("m{i}")).await;
    }
    from.create_checkpoint(&checkpoint("cp", &s.id, 3, at(0)))
        .await
        .unwrap();
    from.add_compaction(&compaction("c", &s.id, 2, at(0)))
        .await
        .unwrap();
    from.put_blobs(&[("manifest-cp".into(), b"m".to_vec())])
        .await
        .unwrap();
    assert_eq!(from.truncate_history(&s.id, 3).await.unwrap(), 3);

    let export = from.export_session(&s.id).await.unwrap().unwrap();
    assert_eq!(positions(&export.messages), [1, 2]);
    to.import_session(&export).await.unwrap();
    assert_eq!(to.export_session(&s.id).await.unwrap().unwrap(), export);
    assert!(to.list_checkpoints(&s.id).await.unwrap().is_empty());
    assert!(to.latest_compaction(&s.id).await.unwrap().is_none());
    assert_eq!(
        to.missing_blobs(&["manifest-cp".into()])
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(append(&to, &s.id, "m3").await.position, 3);
    assert_eq!(append(&from, &s.id, "m3").await.position, 3);
}

/// A database of version 2 (with the old, unused checkpoints table) migrates:
/// sessions are kept, checkpoints get their new shape.
#[tokio::test]
async fn a_version_2_database_upgrades() {
    let guard = crate::database_at_version(
        2,
        &[
            "INSERT INTO sessions (id, owner, workspace, model, profile, created_at, updated_at) \
             VALUES ('s1', 'alice', '/w', 'm', 'p', 1, 1)",
            "INSERT INTO checkpoints (id, session_id, message_position, files, created_at) \
             VALUES ('old', 's1', 1, '{}', 1)",
        ],
    )
    .await;
    let store = crate::reopen(&guard).await;
    assert!(store.get_session("s1").await.unwrap().is_some());
    assert!(store.list_checkpoints("s1").await.unwrap().is_empty());
    let record = checkpoint("new", "s1", 1, at(0));
    store.create_checkpoint(&record).await.unwrap();
    assert_eq!(store.list_checkpoints("s1").await.unwrap(), [record]);
    store
        .add_compaction(&compaction("c", "s1", 1, at(0)))
        .await
        .unwrap();
    assert!(store.latest_compaction("s1").await.unwrap().is_some());
}

#[tokio::test]
async fn a_turns_first_message_position() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    append(&store, &s.id, "before").await;
    for text in ["first of t2", "second of t2"] {
        store
            .append_message(&s.id, Some("t2"), &Message::user_text(text))
            .await
            .unwrap();
    }
    assert_eq!(store.turn_position(&s.id, "t2").await.unwrap(), Some(2));
    assert_eq!(store.turn_position(&s.id, "t9").await.unwrap(), None);
    assert_eq!(store.turn_position("nope", "t2").await.unwrap(), None);
}
