#![allow(clippy::unwrap_used)]
use std::path::{Path, PathBuf};

use super::*;

/// `tmp` with `data` (the data dir), `ws` (a workspace root), `proj` (a
/// project), `shared/data`, `users` (a `{user}` base) and `alice` (a
/// mountable root of alice's), all canonical.
struct Layout {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for dir in ["data", "ws", "proj", "shared/data", "users", "alice"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        Self { _tmp: tmp, root }
    }

    fn p(&self, rel: &str) -> String {
        let path = if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        };
        path.display().to_string()
    }

    /// The table of `extra` with the layout's workspace root and project.
    fn table(&self, extra: &str) -> Result<MountTable, String> {
        let toml = format!(
            "[workspaces]\nroots = [\"{}\"]\n\
             [[projects]]\nname = \"p\"\npath = \"{}\"\n{extra}",
            self.p("ws"),
            self.p("proj")
        );
        let config = Config::parse(&toml).unwrap();
        MountTable::resolve(&config, &self.root.join("data"))
    }
}

fn profile_mount(host: &str) -> String {
    format!("[profiles.default]\nmounts = [{{ host = \"{host}\", path = \"/mnt/m\" }}]\n")
}

#[test]
fn hosts_and_roots_are_resolved_once_to_canonical_paths() {
    let l = Layout::new();
    std::os::unix::fs::symlink(l.root.join("shared"), l.root.join("via")).unwrap();
    let table = l
        .table(&format!(
            "[profiles.default]\nmounts = [{{ host = \"{}\", path = \"/mnt/d\" }}, \
             {{ host = \"{}/{{user}}/keep\", path = \"/keep\", mode = \"rw\" }}]\n\
             [users.alice]\nmountable = [\"{}\"]\n\
             mounts = [{{ host = \"{}\", path = \"/mnt/a\" }}]\n\
             [mounts]\nallowed = [\"{}\"]\n",
            l.p("via/data"),
            l.p("users"),
            l.p("alice"),
            l.p("alice"),
            l.p("via")
        ))
        .unwrap();
    let hosts: Vec<ConfigHost> = table
        .configured("default", "alice")
        .map(|m| m.host.clone())
        .collect();
    assert_eq!(
        hosts,
        [
            ConfigHost::Fixed(l.root.join("shared/data")),
            ConfigHost::PerUser {
                base: l.root.join("users"),
                below: vec![USER.into(), "keep".into()],
            },
            ConfigHost::Fixed(l.root.join("alice")),
        ]
    );
    assert_eq!(table.configured("default", "bob").count(), 2);
    assert_eq!(table.configured("other", "bob").count(), 0);
    // Roots are the canonical directories: the link is not one.
    let problem = |user: &str, rel: &str| table.session_host_problem(user, &l.root.join(rel));
    assert_eq!(problem("bob", "shared/data"), None);
    assert!(problem("bob", "via/data").is_some());
    assert_eq!(problem("alice", "alice"), None);
    assert!(problem("bob", "alice").unwrap().contains("mountable roots"));
}

#[test]
fn no_host_may_hold_or_lie_in_the_data_dir_a_workspace_root_or_a_project() {
    let l = Layout::new();
    for host in ["data", "data/workspaces", "ws", "ws/one", "proj/src", ""] {
        std::fs::create_dir_all(l.root.join(host)).unwrap();
        let err = l.table(&profile_mount(&l.p(host))).unwrap_err();
        assert!(err.contains("holds or lies in"), "{host}: {err}");
    }
    let err = l.table(&profile_mount(&l.p("missing"))).unwrap_err();
    assert!(err.contains("cannot be resolved"), "{err}");
    assert!(l.table(&profile_mount(&l.p("shared/data"))).is_ok());
    // Nor a session's, whatever its roots.
    let table = l
        .table(&format!("[mounts]\nallowed = [\"{}\"]\n", l.p("shared")))
        .unwrap();
    assert!(
        table
            .session_host_problem("bob", &l.root.join("shared/data"))
            .is_none()
    );
    // A root that lies in the data dir is refused outright.
    let err = l
        .table(&format!("[mounts]\nallowed = [\"{}\"]\n", l.p("data")))
        .unwrap_err();
    assert!(err.contains("lies in agentd's data dir"), "{err}");
}

#[test]
fn user_directories_are_kept_apart_from_every_other_mount() {
    let l = Layout::new();
    let template = |base: &str| {
        format!(
            "[profiles.default]\nmounts = [{{ host = \"{}/{{user}}\", path = \"/p\" }}]\n",
            l.p(base)
        )
    };
    // A mountable root over the users' base would let bob ask for alice's.
    for root in ["users", ""] {
        let extra = format!(
            "{}[mounts]\nallowed = [\"{}\"]\n",
            template("users"),
            l.p(root)
        );
        let err = l.table(&extra).unwrap_err();
        assert!(err.contains("`{user}` directories are"), "{root}: {err}");
    }
    std::fs::create_dir_all(l.root.join("users/alice/persistent")).unwrap();
    let extra = format!(
        "{}[users.bob]\nmountable = [\"{}\"]\n",
        template("users"),
        l.p("users/alice")
    );
    assert!(l.table(&extra).is_err());
    // So would a fixed mount over it, or a second base inside it.
    let extra = format!(
        "{}[users.bob]\nmounts = [{{ host = \"{}\", path = \"/a\" }}]\n",
        template("users"),
        l.p("users/alice")
    );
    let err = l.table(&extra).unwrap_err();
    assert!(err.contains("`{user}` directories are"), "{err}");
    let extra = format!(
        "[profiles.default]\nmounts = [{{ host = \"{}/{{user}}\", path = \"/p\" }}, \
         {{ host = \"{}/{{user}}\", path = \"/q\" }}]\n",
        l.p("users"),
        l.p("users/alice")
    );
    let err = l.table(&extra).unwrap_err();
    assert!(err.contains("one in the other"), "{err}");
    // A base where sessions work is refused; so is `/`.
    assert!(l.table(&template("data")).is_err());
    let err = l.table(&template("ws")).unwrap_err();
    assert!(err.contains("workspace root"), "{err}");
    let root_template = "[profiles.default]\nmounts = [{ host = \"/{user}\", path = \"/p\" }]\n";
    assert!(l.table(root_template).unwrap_err().contains("`/`"));
    assert!(l.table(&template("users")).is_ok());
}

#[test]
fn mounts_need_the_sandbox() {
    let l = Layout::new();
    let extra = format!(
        "[profiles.open]\nsandbox = \"off\"\nmounts = [{{ host = \"{}\", path = \"/m\" }}]\n",
        l.p("shared/data")
    );
    let err = l.table(&extra).unwrap_err();
    assert!(err.contains("need the sandbox"), "{err}");
}

#[test]
fn overlapping_is_by_whole_components() {
    assert!(overlaps(Path::new("/a/b"), Path::new("/a")));
    assert!(overlaps(Path::new("/a"), Path::new("/a/b")));
    assert!(!overlaps(Path::new("/ab"), Path::new("/a")));
}

/// Whether a host outside the mountable roots exists is not told.
#[test]
fn a_host_outside_the_roots_gets_the_same_answer_whether_it_exists_or_not() {
    use crate::config::{MountMode, MountSpec};
    use crate::session::SessionError;
    let l = Layout::new();
    std::fs::create_dir_all(l.root.join("data/secret-project")).unwrap();
    let table = l
        .table(&format!("[mounts]\nallowed = [\"{}\"]\n", l.p("shared")))
        .unwrap();
    let ask = |host: String| {
        let spec = MountSpec {
            host,
            path: "/mnt/x".into(),
            mode: MountMode::Ro,
        };
        crate::mounts::checked_session_mounts(&table, "alice", &[spec], None).unwrap_err()
    };
    let kind = |err: &SessionError| match err {
        SessionError::Forbidden(_) => "forbidden",
        SessionError::Invalid(_) => "invalid",
        _ => "other",
    };
    let existing = ask(l.p("data/secret-project"));
    let missing = ask(l.p("data/no-such-project"));
    assert_eq!(
        kind(&existing),
        kind(&missing),
        "existence oracle: {existing:?} vs {missing:?}"
    );
}

/// What the configuration mounts read-only no session may mount writable,
/// though it lies in the caller's mountable roots; read-only it may.
#[test]
fn a_read_only_configured_host_is_never_a_writable_session_mount() {
    use crate::config::{MountMode, MountSpec};
    let l = Layout::new();
    std::fs::create_dir_all(l.root.join("shared/data/config")).unwrap();
    let extra = format!(
        "{}[mounts]\nallowed = [\"{}\"]\n",
        profile_mount(&l.p("shared/data/config")),
        l.p("shared")
    );
    let table = l.table(&extra).unwrap();
    let ask = |host: String, mode| {
        let spec = MountSpec {
            host,
            path: "/mnt/x".into(),
            mode,
        };
        crate::mounts::checked_session_mounts(&table, "alice", &[spec], None)
    };
    for host in [l.p("shared/data/config"), l.p("shared/data")] {
        let err = ask(host.clone(), MountMode::Rw).unwrap_err().to_string();
        assert!(err.contains("read-only"), "{host}: {err}");
        assert!(ask(host, MountMode::Ro).is_ok());
    }
}
