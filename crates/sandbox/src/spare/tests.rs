use super::*;

fn key(workspace: &str, runtime: RuntimeId) -> Key {
    Key {
        spec: BwrapSpec {
            bwrap: "/usr/bin/bwrap".into(),
            args: vec!["--bind".into(), workspace.into(), workspace.into()],
            binds: Vec::new(),
            secret_env: Default::default(),
            run_as: None,
            forwarder: false,
        },
        limits: Limits::default(),
        runtime,
    }
}

#[test]
fn places_are_claimed_once_per_key_and_never_beyond_capacity() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let key = |workspace| key(workspace, runtime.handle().id());
    let mut pool = Pool {
        capacity: 2,
        idle: DEFAULT_IDLE,
        entries: Vec::new(),
        next_id: 0,
        sweeping: false,
    };
    let first = pool.reserve(key("/a")).unwrap();
    assert_eq!(pool.reserve(key("/a")), None, "one per key");
    let second = pool.reserve(key("/b")).unwrap();
    assert_eq!(pool.reserve(key("/c")), None, "full");

    // The command turned what the first spare would be into what the
    // second one is: the first place is given up.
    assert!(!pool.settle(first, key("/b"), Vec::new()));
    assert_eq!(pool.entries.len(), 1);
    assert!(pool.settle(second, key("/b2"), vec![None]));
    assert!(!pool.settle(first, key("/a"), Vec::new()), "gone");
    assert!(pool.reserve(key("/b")).is_some());
}

fn args(paths: &[&std::path::Path]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--setenv".into(), "X".into(), "1".into()];
    for path in paths {
        args.extend(["--bind".into(), path.into(), path.into()]);
    }
    args
}

#[test]
fn a_replaced_or_removed_bind_source_changes_identity() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let args = args(&[root.path(), &ws]);
    let before = bind_identities(&args);
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(Option::is_some));
    assert_eq!(bind_identities(&args), before, "unchanged");
    std::fs::write(ws.join("file"), "content").unwrap();
    assert_eq!(bind_identities(&args), before, "contents do not count");

    std::fs::rename(&ws, root.path().join("ws.old")).unwrap();
    std::fs::create_dir(&ws).unwrap();
    let replaced = bind_identities(&args);
    assert_eq!(replaced[0], before[0]);
    assert_ne!(replaced[1], before[1]);

    std::fs::remove_dir(&ws).unwrap();
    assert_eq!(bind_identities(&args)[1], None);
}

#[test]
fn variables_that_act_on_the_reader_keep_a_policy_cold() {
    let env = |key: &str| std::collections::BTreeMap::from([(key.to_string(), "x".to_string())]);
    assert!(reader_is_transparent(&env("CARGO_HOME")));
    for key in [
        "BASH_ENV",
        "TMOUT",
        "SHELLOPTS",
        "LD_PRELOAD",
        "BASH_FUNC_f%%",
    ] {
        assert!(!reader_is_transparent(&env(key)), "{key}");
    }
}
