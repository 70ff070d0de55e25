//! SIGTERM ends `agentd serve` within `[server] shutdown_deadline_s`
//! whatever it waits for: here its PostgreSQL has stopped, 100 clients
//! stream events and a sandboxed command runs. The exit code says the
//! shutdown was not clean (7): the turn could not be recorded and the node
//! could not leave the cluster. Runs its own PostgreSQL (see `serve_db_down`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_db_down::Cluster;
use crate::serve_harness;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_harness::Harness;

const DEADLINE_S: u64 = 5;
/// What the process may take past the deadline to be gone.
const MARGIN: Duration = Duration::from_secs(3);
const CLIENTS: usize = 100;

#[tokio::test]
async fn sigterm_with_the_database_gone_ends_within_the_deadline() {
    let cluster = Cluster::start().await;
    let toml = format!(
        "[server]\nauth = \"none\"\nshutdown_deadline_s = {DEADLINE_S}\n\
         max_streams_per_user = {}\n\
         [profiles.default]\nmode = \"bypass\"\n\
         [database]\nurl = \"{}\"\n",
        CLIENTS + 10,
        cluster.url
    );
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "wait"}, "content": [
                {"type": "tool_use", "name": "Bash",
                 "input": {"command": "echo sleeping; sleep 600"}}
            ]}
        ]}),
        &toml,
    )
    .await;
    let mut server = h.start().await;
    let id = server.session().await;
    let mut streams = Vec::new();
    for _ in 0..CLIENTS {
        streams.push(server.events(&id, None).await);
    }
    server.message(&id, "wait for a long time").await;
    let watcher = streams.first_mut().unwrap();
    loop {
        let event = watcher.next().await.expect("stream ended");
        if event.event == "tool.output"
            && event.data["text"]
                .as_str()
                .is_some_and(|t| t.contains("sleeping"))
        {
            break;
        }
    }

    cluster.stop().await;
    let asked = Instant::now();
    server.signal("TERM").await;
    let code = server.exit_code().await;
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(DEADLINE_S) + MARGIN,
        "exited after {took:?}, deadline {DEADLINE_S} s\n{}",
        server.log()
    );
    assert_eq!(code, 7, "{}", server.log());
    let log = server.log();
    assert!(log.contains("shutdown gave up on"), "{log}");
    // Every stream ended with the process.
    for mut stream in streams {
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            while stream.next().await.is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "a stream outlived the server");
    }
}
