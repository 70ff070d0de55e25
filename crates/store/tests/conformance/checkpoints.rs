//! Content-addressed blobs, checkpoints and compactions.

use agentd_store::prelude::*;
use agentd_store::{CheckpointRecord, CompactionRecord, StoreError};
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::{session, store};

/// A time the databases keep exactly (milliseconds), `ms` after a fixed start.
pub fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_700_000_000_000 + ms).unwrap()
}

pub fn checkpoint(
    id: &str,
    session_id: &str,
    position: i64,
    created_at: DateTime<Utc>,
) -> CheckpointRecord {
    CheckpointRecord {
        id: id.into(),
        session_id: session_id.into(),
        turn_id: Some(format!("turn-{id}")),
        message_position: position,
        manifest_hash: format!("manifest-{id}"),
        base_checkpoint_id: None,
        files: vec!["src/main.rs".into(), "docs/ünïcödé 🦀.md".into()],
        stats: json!({"files": 2, "bytes": 1234, "added": 10, "removed": 3}),
        created_at,
    }
}

pub fn compaction(
    id: &str,
    session_id: &str,
    first_kept: i64,
    created_at: DateTime<Utc>,
) -> CompactionRecord {
    CompactionRecord {
        id: id.into(),
        session_id: session_id.into(),
        turn_id: None,
        trigger: "auto".into(),
        summary: format!("summary {id}: we talked about ünïcödé 🦀\n\"quoted\""),
        context: vec![
            agentd_protocol::Message::user_text(format!("summary {id}")),
            agentd_protocol::Message::assistant(vec![agentd_protocol::ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Read".into(),
                input: serde_json::json!({"file_path": "a.txt"}),
            }]),
        ],
        first_kept_position: first_kept,
        tokens_before: 180_000,
        tokens_after: 12_345,
        created_at,
    }
}

fn hash(i: usize) -> String {
    format!("{i:064x}")
}

#[tokio::test]
async fn blobs_are_stored_once_and_read_back_byte_exact() {
    let (_guard, store) = store().await;
    let binary: Vec<u8> = (0..=255u8).cycle().take(3 * 1024 * 1024 + 7).collect();
    store
        .put_blobs(&[
            ("h-binary".into(), binary.clone()),
            ("h-empty".into(), Vec::new()),
            ("h-text".into(), b"fn main() {}\n".to_vec()),
            // The same hash twice in one call.
            ("h-text".into(), b"fn main() {}\n".to_vec()),
        ])
        .await
        .unwrap();
    assert_eq!(store.get_blob("h-binary").await.unwrap().unwrap(), binary);
    assert_eq!(store.get_blob("h-empty").await.unwrap().unwrap(), b"");
    assert_eq!(
        store.get_blob("h-text").await.unwrap().unwrap(),
        b"fn main() {}\n"
    );
    assert!(store.get_blob("h-none").await.unwrap().is_none());

    // A hash already stored is skipped, not rewritten; new ones in the same
    // call are stored.
    store
        .put_blobs(&[
            ("h-text".into(), b"other".to_vec()),
            ("h-new".into(), vec![0, 1, 0]),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.get_blob("h-text").await.unwrap().unwrap(),
        b"fn main() {}\n"
    );
    assert_eq!(store.get_blob("h-new").await.unwrap().unwrap(), [0, 1, 0]);
    store.put_blobs(&[]).await.unwrap();

    let sizes = crate::strings(
        &store,
        "SELECT CAST(size AS TEXT) FROM blobs WHERE hash = $1",
        "h-binary",
    )
    .await;
    assert_eq!(sizes, [binary.len().to_string()]);
    let count = crate::strings(
        &store,
        "SELECT CAST(COUNT(*) AS TEXT) FROM blobs WHERE '' = $1",
        "",
    )
    .await;
    assert_eq!(count, ["4"]);
}

/// More hashes than SQLite takes bound parameters (32 766) in one statement.
#[tokio::test]
async fn missing_blobs_answers_for_tens_of_thousands_of_hashes() {
    let (_guard, store) = store().await;
    const N: usize = 45_000;
    let stored: Vec<(String, Vec<u8>)> = (0..N)
        .filter(|i| i % 3 == 0)
        .map(|i| (hash(i), i.to_le_bytes().to_vec()))
        .collect();
    store.put_blobs(&stored).await.unwrap();

    // Newest first, with some repeated: the answer keeps the order given and
    // names each hash once.
    let mut asked: Vec<String> = (0..N).rev().map(hash).collect();
    asked.extend((0..10).map(hash));
    let missing = store.missing_blobs(&asked).await.unwrap();
    let expected: Vec<String> = (0..N).rev().filter(|i| i % 3 != 0).map(hash).collect();
    assert_eq!(missing.len(), expected.len());
    assert_eq!(missing, expected);

    assert!(store.missing_blobs(&[]).await.unwrap().is_empty());
    let stored_hashes: Vec<String> = stored.iter().map(|(h, _)| h.clone()).collect();
    assert!(
        store
            .missing_blobs(&stored_hashes)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.get_blob(&hash(300)).await.unwrap().unwrap(),
        300usize.to_le_bytes()
    );
}

/// A checkpoint stored with its new blobs: both there afterwards, a blob
/// already stored kept as it was; for an unknown session, no checkpoint.
#[tokio::test]
async fn a_checkpoint_goes_in_with_its_blobs() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    store
        .put_blobs(&[("h-old".into(), b"old".to_vec())])
        .await
        .unwrap();
    let record = checkpoint("cp-1", &s.id, 1, at(10));
    let blobs = [
        ("h-old".to_string(), b"rewritten?".to_vec()),
        ("h-file".to_string(), vec![0, 159, 146, 150]),
        ("manifest-cp-1".to_string(), b"manifest".to_vec()),
    ];
    store
        .create_checkpoint_with_blobs(&record, &blobs)
        .await
        .unwrap();
    let listed = store.list_checkpoints(&s.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], record);
    assert_eq!(store.get_blob("h-old").await.unwrap().unwrap(), b"old");
    assert_eq!(
        store.get_blob("h-file").await.unwrap().unwrap(),
        [0, 159, 146, 150]
    );
    assert_eq!(
        store.get_blob("manifest-cp-1").await.unwrap().unwrap(),
        b"manifest"
    );
    let ghost = checkpoint("cp-2", "nope", 1, at(20));
    let err = store
        .create_checkpoint_with_blobs(&ghost, &blobs[1..])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(store.get_checkpoint("cp-2").await.unwrap().is_none());
    // An id is used once, with or without blobs.
    let again = store
        .create_checkpoint_with_blobs(&record, &[])
        .await
        .unwrap_err();
    assert!(matches!(again, StoreError::Database(ref m) if m.contains("already exists")));
}

#[tokio::test]
async fn checkpoints_round_trip_oldest_first() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    let other = session(&store, "alice").await;
    // Created out of order; listed by time, then id.
    let third = CheckpointRecord {
        base_checkpoint_id: Some("cp-a".into()),
        turn_id: None,
        files: Vec::new(),
        stats: json!(null),
        ..checkpoint("cp-c", &s.id, 7, at(300))
    };
    let first = checkpoint("cp-a", &s.id, 1, at(100));
    let second_b = checkpoint("cp-b2", &s.id, 4, at(200));
    let second_a = checkpoint("cp-b1", &s.id, 4, at(200));
    for record in [&third, &first, &second_b, &second_a] {
        store.create_checkpoint(record).await.unwrap();
    }
    store
        .create_checkpoint(&checkpoint("cp-other", &other.id, 1, at(50)))
        .await
        .unwrap();

    let listed = store.list_checkpoints(&s.id).await.unwrap();
    assert_eq!(
        listed,
        [first.clone(), second_a, second_b.clone(), third.clone()]
    );
    // What the next checkpoint is made against: the last, the last keyframe.
    let latest = store.latest_checkpoints(&s.id).await.unwrap();
    assert_eq!(latest.last.as_ref(), Some(&third));
    assert_eq!(latest.keyframe.as_ref(), Some(&second_b));
    assert_eq!(
        store.latest_checkpoints("nope").await.unwrap(),
        Default::default()
    );
    let other_latest = store.latest_checkpoints(&other.id).await.unwrap();
    assert_eq!(other_latest.last, other_latest.keyframe);
    assert!(other_latest.last.is_some());
    assert_eq!(store.get_checkpoint("cp-c").await.unwrap().unwrap(), third);
    assert_eq!(store.get_checkpoint("cp-a").await.unwrap().unwrap(), first);
    assert!(store.get_checkpoint("cp-none").await.unwrap().is_none());
    assert!(store.list_checkpoints("nope").await.unwrap().is_empty());
    assert_eq!(store.list_checkpoints(&other.id).await.unwrap().len(), 1);

    // An id is used once.
    let err = store
        .create_checkpoint(&checkpoint("cp-a", &s.id, 9, at(400)))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Database(ref m) if m.contains("already exists")),
        "{err}"
    );
    assert_eq!(store.get_checkpoint("cp-a").await.unwrap().unwrap(), first);
}

#[tokio::test]
async fn checkpoints_and_compactions_of_an_unknown_session_are_not_found() {
    let (_guard, store) = store().await;
    let err = store
        .create_checkpoint(&checkpoint("cp", "nope", 1, at(0)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = store
        .add_compaction(&compaction("c", "nope", 1, at(0)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = store.truncate_history("nope", 1).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert!(store.get_checkpoint("cp").await.unwrap().is_none());
    assert!(store.latest_compaction("nope").await.unwrap().is_none());
}

#[tokio::test]
async fn the_latest_compaction_is_the_newest() {
    let (_guard, store) = store().await;
    let s = session(&store, "alice").await;
    let other = session(&store, "alice").await;
    assert!(store.latest_compaction(&s.id).await.unwrap().is_none());

    let newest = CompactionRecord {
        turn_id: Some("t9".into()),
        trigger: "manual".into(),
        tokens_before: u64::try_from(i64::MAX).unwrap(),
        tokens_after: 0,
        ..compaction("c-2", &s.id, 40, at(2_000))
    };
    store.add_compaction(&newest).await.unwrap();
    // Added later, but older.
    store
        .add_compaction(&compaction("c-1", &s.id, 20, at(1_000)))
        .await
        .unwrap();
    store
        .add_compaction(&compaction("c-x", &other.id, 5, at(9_000)))
        .await
        .unwrap();
    assert_eq!(
        store.latest_compaction(&s.id).await.unwrap().unwrap(),
        newest
    );

    // In one millisecond the id decides.
    let tie = compaction("c-3", &s.id, 50, at(2_000));
    store.add_compaction(&tie).await.unwrap();
    assert_eq!(store.latest_compaction(&s.id).await.unwrap().unwrap(), tie);

    let err = store.add_compaction(&tie).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Database(ref m) if m.contains("already exists")),
        "{err}"
    );
    let err = store
        .add_compaction(&CompactionRecord {
            tokens_after: u64::MAX,
            ..compaction("c-big", &s.id, 1, at(0))
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Database(_)), "{err}");
}

#[tokio::test]
async fn checkpoints_and_compactions_go_with_their_session_but_blobs_stay() {
    let (_guard, store) = store().await;
    let doomed = session(&store, "alice").await;
    let kept = session(&store, "alice").await;
    for s in [&doomed, &kept] {
        store
            .create_checkpoint(&checkpoint(&format!("cp-{}", s.id), &s.id, 1, at(0)))
            .await
            .unwrap();
        store
            .add_compaction(&compaction(&format!("c-{}", s.id), &s.id, 1, at(0)))
            .await
            .unwrap();
    }
    store
        .put_blobs(&[("h".into(), b"shared".to_vec())])
        .await
        .unwrap();

    assert!(store.delete_session(&doomed.id).await.unwrap());
    for table in ["checkpoints", "compactions"] {
        assert_eq!(
            crate::count_rows(&store, table, &doomed.id).await,
            0,
            "{table}"
        );
        assert_eq!(
            crate::count_rows(&store, table, &kept.id).await,
            1,
            "{table}"
        );
    }
    assert!(store.list_checkpoints(&doomed.id).await.unwrap().is_empty());
    assert!(store.latest_compaction(&doomed.id).await.unwrap().is_none());
    assert!(
        store
            .get_checkpoint(&format!("cp-{}", doomed.id))
            .await
            .unwrap()
            .is_none()
    );
    // Blobs are shared between sessions: deleting one leaves them.
    assert_eq!(store.get_blob("h").await.unwrap().unwrap(), b"shared");
}
