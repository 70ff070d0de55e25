use agentd_store::prelude::*;
use std::collections::HashMap;
use std::time::Instant;

use agentd_protocol::{
    CompactionTrigger, DeltaKind, ErrorInfo, Event, EventEnvelope, Message, OutputStream,
    TurnFinished, TurnStatus, Usage,
};
use agentd_store::StoreError;
use serde_json::json;

use crate::{delta, session, store};

fn every_event_kind() -> Vec<Event> {
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 3,
        cache_read_tokens: 2,
        cache_write_tokens: 1,
    };
    vec![
        Event::TurnStarted {
            turn_id: "t1".into(),
            message: Message::user_text("go"),
        },
        Event::MessageDelta {
            parent_call_id: None,
            turn_id: "t1".into(),
            index: 1,
            kind: DeltaKind::Thinking,
            text: "hm".into(),
        },
        Event::MessageCompleted {
            parent_call_id: None,
            turn_id: "t1".into(),
            message: Message::assistant(vec![]),
        },
        Event::ToolStarted {
            parent_call_id: None,
            turn_id: "t1".into(),
            call_id: "c1".into(),
            name: "Bash".into(),
            input: json!({"command": "ls"}),
        },
        Event::ToolOutput {
            call_id: "c1".into(),
            stream: OutputStream::Stderr,
            text: "err".into(),
        },
        Event::ToolFinished {
            call_id: "c1".into(),
            is_error: false,
            output: "ok".into(),
            duration_ms: 12,
        },
        Event::PermissionRequested {
            parent_call_id: None,
            request_id: "r1".into(),
            call_id: "c1".into(),
            tool: "Bash".into(),
            input: json!({"command": "rm -rf /"}),
            reason: "dangerous".into(),
        },
        Event::PermissionResolved {
            request_id: "r1".into(),
            decision: "deny".into(),
            by: "user".into(),
        },
        Event::QuestionAsked {
            request_id: "q1".into(),
            call_id: "c2".into(),
            questions: json!([{"question": "which?"}]),
            parent_call_id: Some("task_1".into()),
        },
        Event::TodoUpdated {
            call_id: "c3".into(),
            todos: vec![agentd_protocol::Todo {
                content: "write tests".into(),
                status: agentd_protocol::TodoStatus::InProgress,
                active_form: Some("Writing tests".into()),
            }],
            parent_call_id: None,
        },
        Event::QuestionAnswered {
            by: "user:alice".into(),
            request_id: "q1".into(),
            answers: json!({"which?": "that"}),
        },
        Event::Usage {
            parent_call_id: None,
            usage,
            cost_usd: 0.1 + 0.2,
            context_tokens: 13,
        },
        Event::Compaction {
            trigger: CompactionTrigger::Auto,
            tokens_before: 1000,
            tokens_after: 100,
            summary: Some("we talked".into()),
        },
        Event::CheckpointCreated {
            checkpoint_id: "cp1".into(),
            files: vec!["a.rs".into()],
        },
        Event::TurnFinished(TurnFinished {
            turn_id: "t1".into(),
            status: TurnStatus::Completed,
            result: Some("done".into()),
            usage,
            cost_usd: 0.123_456_789_012_345_67,
            num_model_calls: 2,
            duration_ms: 99,
            error: None,
            agent_status: None,
        }),
        Event::SessionUpdated {
            title: Some("t".into()),
            status: "idle".into(),
        },
        Event::Error(ErrorInfo {
            code: "overloaded".into(),
            message: "try later".into(),
            retryable: true,
        }),
    ]
}

#[tokio::test]
async fn appended_events_read_back_identical_with_seq_in_order() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let events = every_event_kind();
    let mut returned = Vec::new();
    for e in &events {
        returned.push(store.append_event(&s.id, e).await.unwrap());
    }
    let seqs: Vec<_> = returned.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert!(returned.iter().all(|e| e.session_id == s.id));

    let read = store.events_after(&s.id, 0, 1000).await.unwrap();
    assert_eq!(read, returned);

    // The `type` column is the wire name.
    let types: Vec<String> = crate::strings(
        &store,
        "SELECT type FROM events WHERE session_id = $1 ORDER BY seq",
        &s.id,
    )
    .await;
    let names: Vec<_> = events.iter().map(|e| e.type_name()).collect();
    assert_eq!(types, names);

    let session = store.get_session(&s.id).await.unwrap().unwrap();
    assert_eq!(session.last_seq, events.len() as u64);
}

#[tokio::test]
async fn events_after_pages_by_seq() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    for i in 0..10 {
        store
            .append_event(&s.id, &delta(&i.to_string()))
            .await
            .unwrap();
    }
    let seqs = |v: Vec<EventEnvelope>| v.into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.events_after(&s.id, 3, 4).await.unwrap()),
        [4, 5, 6, 7]
    );
    assert_eq!(
        seqs(store.events_after(&s.id, 7, 100).await.unwrap()),
        [8, 9, 10]
    );
    assert!(store.events_after(&s.id, 10, 100).await.unwrap().is_empty());
    assert!(
        store
            .events_after(&s.id, u64::MAX, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.events_after(&s.id, 0, 0).await.unwrap().is_empty());
    assert!(
        store
            .events_after("unknown", 0, 100)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn append_to_unknown_session_is_not_found() {
    let (_dir, store) = store().await;
    let err = store.append_event("nope", &delta("x")).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert_eq!(crate::count_rows(&store, "events", "nope").await, 0);
}

#[tokio::test]
async fn large_and_unicode_payloads_round_trip() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let unit = "ab\u{e9}✓🦀\n\"\\";
    let big = unit.repeat(5 * 1024 * 1024 / unit.len() + 1);
    assert!(big.len() >= 5 * 1024 * 1024);
    let unicode = "héllo wörld — 日本語 — 🦀🚀 — \u{202e}rtl — \u{0}\u{1f} — \u{fffd}";
    let sent = [
        store.append_event(&s.id, &delta(&big)).await.unwrap(),
        store.append_event(&s.id, &delta(unicode)).await.unwrap(),
    ];
    let read = store.events_after(&s.id, 0, 10).await.unwrap();
    assert_eq!(read, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_appends_to_one_session_are_gapless() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let mut tasks = Vec::new();
    for t in 0..20 {
        let store = store.clone();
        let id = s.id.clone();
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..50 {
                let e = store
                    .append_event(&id, &delta(&format!("{t}-{i}")))
                    .await
                    .unwrap();
                seqs.push(e.seq);
            }
            seqs
        }));
    }
    let mut returned = Vec::new();
    for t in tasks {
        let seqs = t.await.unwrap();
        // Each task sees its own appends in increasing order.
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        returned.extend(seqs);
    }
    returned.sort_unstable();
    assert_eq!(returned, (1..=1000).collect::<Vec<_>>());

    let stored: Vec<_> = store
        .events_after(&s.id, 0, 5000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(stored, (1..=1000).collect::<Vec<_>>());
    assert_eq!(
        store.get_session(&s.id).await.unwrap().unwrap().last_seq,
        1000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn many_sessions_append_at_once() {
    let (_dir, store) = store().await;
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(session(&store, "alice").await.id);
    }
    let mut tasks = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        // Two writers per session, interleaving with all the others.
        for w in 0..2 {
            let store = store.clone();
            let id = id.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    let text = format!("{n}/{w}/{i}");
                    store.append_event(&id, &delta(&text)).await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    for id in &ids {
        let events = store.events_after(id, 0, 1000).await.unwrap();
        let seqs: Vec<_> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=50).collect::<Vec<_>>(), "session {id}");
        // Nothing leaked in from another session.
        let n = ids.iter().position(|x| x == id).unwrap();
        let mut per_writer: HashMap<String, usize> = HashMap::new();
        for e in events {
            let Event::MessageDelta { text, .. } = e.event else {
                panic!("unexpected event");
            };
            let mut parts = text.split('/');
            assert_eq!(parts.next().unwrap(), n.to_string());
            *per_writer
                .entry(parts.next().unwrap().to_owned())
                .or_default() += 1;
        }
        assert_eq!(per_writer.len(), 2);
        assert!(per_writer.values().all(|&c| c == 25));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoned_appends_leave_no_gap() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    let mut tasks = Vec::new();
    for t in 0..20 {
        let store = store.clone();
        let id = s.id.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..50 {
                store
                    .append_event(&id, &delta(&format!("{t}-{i}")))
                    .await
                    .unwrap();
            }
        }));
    }
    // Callers that stop waiting mid-append (a client that went away).
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    for t in tasks.iter().step_by(3) {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    let last = store.get_session(&s.id).await.unwrap().unwrap().last_seq;
    let seqs: Vec<_> = store
        .events_after(&s.id, 0, 5000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=last).collect::<Vec<_>>());
    assert_eq!(
        store
            .append_event(&s.id, &delta("after"))
            .await
            .unwrap()
            .seq,
        last + 1
    );
}

/// Not an assertion on speed: prints rough figures (run with --nocapture).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_throughput_printout() {
    let (_dir, store) = store().await;
    let event = delta("a typical coalesced text delta of some tens of bytes");
    let one = session(&store, "alice").await.id;

    let n = crate::PRINTOUT_EVENTS * 3 / 20;
    let start = Instant::now();
    for _ in 0..n {
        store.append_event(&one, &event).await.unwrap();
    }
    let sequential = n as f64 / start.elapsed().as_secs_f64();

    let mut rates = Vec::new();
    for sessions in [1, 100] {
        let mut ids = Vec::new();
        for _ in 0..sessions {
            ids.push(session(&store, "alice").await.id);
        }
        let tasks_per_session = if sessions == 1 { 16 } else { 1 };
        let per_task = crate::PRINTOUT_EVENTS / (sessions * tasks_per_session);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for id in &ids {
            for _ in 0..tasks_per_session {
                let store = store.clone();
                let id = id.clone();
                let event = event.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..per_task {
                        store.append_event(&id, &event).await.unwrap();
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
        let total = per_task * sessions * tasks_per_session;
        rates.push(total as f64 / start.elapsed().as_secs_f64());
    }
    eprintln!(
        "{} append_event: {sequential:.0}/s one caller; {:.0}/s 16 tasks on one session; \
         {:.0}/s 100 sessions at once",
        crate::BACKEND,
        rates[0],
        rates[1]
    );
}

#[tokio::test]
async fn append_events_stores_a_batch_in_order() {
    let (_dir, store) = store().await;
    let s = session(&store, "alice").await;
    store.append_event(&s.id, &delta("first")).await.unwrap();
    assert!(store.append_events(&s.id, &[]).await.unwrap().is_empty());
    let batch: Vec<Event> = (0..50).map(|i| delta(&format!("b{i}"))).collect();
    let stored = store.append_events(&s.id, &batch).await.unwrap();
    assert_eq!(
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (2..=51).collect::<Vec<_>>()
    );
    assert_eq!(
        stored.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        batch
    );
    assert!(stored.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(store.events_after(&s.id, 1, 100).await.unwrap(), stored);
    assert_eq!(
        store.get_session(&s.id).await.unwrap().unwrap().last_seq,
        51
    );

    let err = store.append_events("nope", &batch).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert_eq!(crate::count_rows(&store, "events", "nope").await, 0);
}
