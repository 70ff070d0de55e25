//! Tests of the bubblewrap arguments and the environment.
use super::*;

#[test]
fn bwrap_lookup_fails_closed_when_absent() {
    let empty = tempfile::tempdir().unwrap();
    let path_var = std::ffi::OsString::from(empty.path());
    assert_eq!(find_bwrap_in(Some(&path_var), &[empty.path()]), None);
    assert_eq!(find_bwrap_in(None, &[]), None);
}

#[test]
fn bwrap_lookup_searches_path_first() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("bwrap");
    std::fs::write(&fake, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path_var = std::ffi::OsString::from(dir.path());
    assert_eq!(
        find_bwrap_in(Some(&path_var), &[Path::new("/usr/bin")]),
        Some(fake)
    );
}

#[test]
fn policy_env_overrides_and_invalid_names_are_skipped() {
    let mut policy = Policy::new("/ws");
    policy.env.insert("TERM".into(), "xterm".into());
    policy.env.insert("BAD=NAME".into(), "x".into());
    policy.env.insert("EXTRA".into(), "1".into());
    let vars = environment(&policy);
    assert!(vars.contains(&("TERM".into(), "xterm".into())));
    assert!(vars.contains(&("HOME".into(), "/ws".into())));
    assert!(vars.contains(&("EXTRA".into(), "1".into())));
    assert!(!vars.iter().any(|(key, _)| key.contains('=')));
    assert_eq!(vars.iter().filter(|(key, _)| key == "TERM").count(), 1);
}

fn args_of(policy: &Policy) -> Vec<OsString> {
    bwrap_args(policy).unwrap().0
}

#[test]
fn read_only_paths_are_ordered_around_the_workspace_bind() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    let mut policy = Policy::new(&ws);
    policy.read_only_paths = vec![ws.join(".git"), root.path().to_path_buf()];
    let args = args_of(&policy);
    let position = |value: &Path| {
        args.iter()
            .position(|arg| arg == value.as_os_str())
            .unwrap()
    };
    let workspace_bind = args.iter().position(|arg| arg == "--bind-fd").unwrap();
    assert!(position(root.path()) < workspace_bind);
    assert!(position(&ws.join(".git")) > workspace_bind);
}

/// The destinations of `flag` (a `--bind-fd`/`--ro-bind-fd` or path bind).
fn binds_of(args: &[OsString], flag: &str) -> Vec<PathBuf> {
    args.windows(3)
        .filter(|w| w[0] == flag)
        .map(|w| PathBuf::from(&w[2]))
        .collect()
}

#[test]
fn git_hooks_and_config_are_bound_read_only_after_the_workspace() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap();
    std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
    let mut policy = Policy::new(&ws);
    let (args, binds) = bwrap_args(&policy).unwrap();
    // Missing pieces are created so they can be bound.
    assert!(ws.join(".git/hooks").is_dir() && ws.join(".git/config").is_file());
    let read_only = binds_of(&args, "--ro-bind-fd");
    assert!(read_only.contains(&ws.join(".git/hooks")));
    assert!(read_only.contains(&ws.join(".git/config")));
    assert_eq!(
        binds_of(&args, "--bind-fd"),
        vec![ws.clone(), ws.join(".git")]
    );
    // Sources inside the workspace are recorded relative to it.
    let inside: Vec<_> = binds
        .iter()
        .filter_map(|bind| match &bind.source {
            Source::InWorkspace(rel) => Some(rel.clone()),
            Source::Path(_) | Source::Mount(_) => None,
        })
        .collect();
    assert_eq!(
        inside,
        [".git", ".git/hooks", ".git/config"].map(PathBuf::from)
    );
    assert!(!binds_of(&args, "--bind").iter().any(|p| p.starts_with(&ws)));

    policy.allow_git_config = true;
    let args = args_of(&policy);
    assert_eq!(binds_of(&args, "--bind-fd"), vec![ws.clone()]);
    assert!(binds_of(&args, "--ro-bind-fd").is_empty());
}

#[test]
fn no_git_dir_means_nothing_is_created_or_bound() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap();
    let (args, binds) = bwrap_args(&Policy::new(&ws)).unwrap();
    assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 0);
    assert!(binds_of(&args, "--ro-bind-fd").is_empty());
    assert_eq!(binds.len(), 1, "the workspace alone");
}

#[test]
fn a_gitfile_is_bound_read_only_and_a_git_link_is_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap();
    std::fs::write(ws.join(".git"), "gitdir: /elsewhere\n").unwrap();
    let args = args_of(&Policy::new(&ws));
    assert!(binds_of(&args, "--ro-bind-fd").contains(&ws.join(".git")));

    std::fs::remove_file(ws.join(".git")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join(".git")).unwrap();
    let args = args_of(&Policy::new(&ws));
    assert_eq!(binds_of(&args, "--bind-fd"), vec![ws.clone()]);
    assert!(binds_of(&args, "--ro-bind-fd").is_empty());
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing made through the link"
    );
}

#[test]
fn a_workspace_deep_under_tmp_gets_a_read_only_shield() {
    assert_eq!(
        tmp_shield(Path::new("/tmp/ci/target/ws")),
        Some(PathBuf::from("/tmp/ci"))
    );
    assert_eq!(
        tmp_shield(Path::new("/tmp/ws")),
        None,
        "nothing between /tmp and it"
    );
    assert_eq!(tmp_shield(Path::new("/home/u/ws")), None);
    let root = tempfile::tempdir_in("/tmp").unwrap();
    let ws = root.path().canonicalize().unwrap().join("target/ws");
    std::fs::create_dir_all(&ws).unwrap();
    let args = args_of(&Policy::new(&ws));
    let tmpfs: Vec<usize> = (0..args.len()).filter(|&i| args[i] == "--tmpfs").collect();
    let bind = args.iter().position(|a| a == "--bind-fd").unwrap();
    let remounts: Vec<usize> = (0..args.len())
        .filter(|&i| args[i] == "--remount-ro")
        .collect();
    assert_eq!(
        args[tmpfs[1] + 1],
        root.path().canonicalize().unwrap().as_os_str()
    );
    assert!(tmpfs[1] < bind && bind < remounts[0]);
    assert_eq!(args[remounts[0] + 1], args[tmpfs[1] + 1]);
}

#[test]
fn the_ssh_agent_socket_alone_is_bound_read_only() {
    let ws = tempfile::tempdir().unwrap();
    let host = tempfile::tempdir().unwrap();
    let socket = host.path().join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mut policy = Policy::new(ws.path().canonicalize().unwrap());
    policy.ssh_agent = Some(socket.clone());
    let (args, binds) = bwrap_args(&policy).unwrap();
    assert_eq!(
        binds_of(&args, "--ro-bind-fd"),
        vec![PathBuf::from(SSH_AGENT_SOCKET)]
    );
    let bind = binds.last().unwrap();
    assert!(bind.socket && bind.source == Source::Path(socket.clone()));
    assert!(environment(&policy).contains(&("SSH_AUTH_SOCK".into(), SSH_AGENT_SOCKET.into())));
    // A regular file (or nothing) where the socket should be is not bound.
    std::fs::write(host.path().join("file"), "").unwrap();
    for path in [host.path().join("file"), host.path().join("missing")] {
        policy.ssh_agent = Some(path);
        let (args, binds) = bwrap_args(&policy).unwrap();
        assert!(binds_of(&args, "--ro-bind-fd").is_empty());
        assert_eq!(binds.len(), 1);
    }
    policy.unsandboxed = true;
    policy.ssh_agent = Some(socket.clone());
    let host_path = socket.display().to_string();
    assert!(environment(&policy).contains(&("SSH_AUTH_SOCK".into(), host_path)));
}

#[test]
fn network_is_shared_only_when_allowed() {
    let ws = tempfile::tempdir().unwrap();
    let mut policy = Policy::new(ws.path());
    assert!(!args_of(&policy).iter().any(|arg| arg == "--share-net"));
    policy.network = true;
    assert!(args_of(&policy).iter().any(|arg| arg == "--share-net"));
}

#[test]
fn a_workspace_other_than_the_pinned_one_is_refused() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let meta = std::fs::metadata(&ws).unwrap();
    let mut policy = Policy::new(&ws);
    policy.workspace_pin = Some((meta.dev(), meta.ino()));
    assert!(bwrap_args(&policy).is_ok(), "the pinned directory binds");

    // Replaced by another directory at the same path: not bound.
    std::fs::rename(&ws, dir.path().join("old")).unwrap();
    std::fs::create_dir(&ws).unwrap();
    let err = bwrap_args(&policy).unwrap_err().to_string();
    assert!(err.contains("replaced"), "{err}");
}

#[test]
fn an_egress_bridge_keeps_the_sandbox_offline_and_points_clients_at_the_forwarder() {
    let ws = tempfile::tempdir().unwrap();
    let socket = ws.path().join("proxy.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mut policy = Policy::new(ws.path());
    policy.env.insert("NO_PROXY".into(), "*".into());
    policy.egress = Some(crate::EgressBridge { socket });
    let (args, binds) = bwrap_args(&policy).unwrap();
    assert!(!args.iter().any(|arg| arg == "--share-net"));
    assert!(args.iter().any(|arg| arg == crate::EGRESS_SOCKET));
    let vars = environment(&policy);
    let proxy = format!("http://127.0.0.1:{}", crate::EGRESS_PORT);
    for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        assert!(vars.contains(&(key.into(), proxy.clone())), "{key}");
    }
    assert!(vars.contains(&("NO_PROXY".into(), String::new())));
    // The forwarder is the running executable, handed in by descriptor:
    // nothing of it is bound from the file system, which could be swapped.
    assert_eq!(binds.len(), 2, "the workspace and the socket: {binds:?}");
    assert!(binds[1].socket);
    let spec = BwrapSpec::new("/usr/bin/bwrap".into(), &policy).unwrap();
    assert!(spec.launch().exe);
    let argv: Vec<_> = spec
        .exec(&["node", "s.js"])
        .as_std()
        .get_args()
        .map(ToOwned::to_owned)
        .collect();
    let at = argv.iter().position(|arg| arg == "--").unwrap();
    assert_eq!(argv[at + 1], crate::FORWARDER);
    assert_eq!(argv[at + 5..], ["--", "node", "s.js"]);
    // A shell's command starts the forwarder itself (once).
    let bash: Vec<_> = spec
        .shell("x")
        .as_std()
        .get_args()
        .map(ToOwned::to_owned)
        .collect();
    assert_eq!(bash[bash.len() - 4..], ["--", "bash", "-c", "x"]);
    let shell = crate::egress_forward::shell_command(Some(&spec), "pip install x");
    assert!(shell.starts_with(crate::FORWARDER) && shell.ends_with("\npip install x"));

    // With the host's network, or unsandboxed: no proxy, no forwarder.
    for (network, unsandboxed) in [(true, false), (false, true)] {
        policy.network = network;
        policy.unsandboxed = unsandboxed;
        let vars = environment(&policy);
        assert!(!vars.iter().any(|(key, _)| key == "HTTP_PROXY"));
        if network {
            let spec = BwrapSpec::new("/usr/bin/bwrap".into(), &policy).unwrap();
            assert!(!spec.forwarder && !spec.launch().exe);
            assert!(!spec.args.iter().any(|arg| arg == crate::EGRESS_SOCKET));
            assert_eq!(crate::egress_forward::shell_command(Some(&spec), "x"), "x");
        }
    }
}

#[test]
fn without_network_there_is_neither_proxy_nor_socket() {
    let ws = tempfile::tempdir().unwrap();
    let policy = Policy::new(ws.path());
    let args = args_of(&policy);
    assert!(!args.iter().any(|arg| arg == "--share-net"));
    assert!(!args.iter().any(|arg| arg == crate::EGRESS_SOCKET));
    assert!(
        !BwrapSpec::new("/usr/bin/bwrap".into(), &policy)
            .unwrap()
            .forwarder
    );
    let vars = environment(&policy);
    assert!(
        !vars
            .iter()
            .any(|(key, _)| key.to_ascii_lowercase().ends_with("_proxy"))
    );
}
