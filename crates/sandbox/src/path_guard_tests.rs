use std::os::unix::fs::symlink;

use super::*;

/// `root/ws` is the workspace, `root/outside` a sibling holding a secret.
struct Fixture {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    guard: PathGuard,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::write(outside.join("secret"), "s3cret").unwrap();
    let guard = PathGuard::new(&ws, &[]).unwrap();
    let ws = ws.canonicalize().unwrap();
    let outside = outside.canonicalize().unwrap();
    Fixture {
        _root: root,
        ws,
        outside,
        guard,
    }
}

fn assert_outside(guard: &PathGuard, path: &str) {
    match guard.resolve(path) {
        Err(PathError::Outside { path: named }) => assert_eq!(named, path),
        other => panic!("{path:?} should be outside, got {other:?}"),
    }
}

#[test]
fn relative_paths_join_the_workspace() {
    let f = fixture();
    assert_eq!(
        f.guard.resolve("src/main.rs").unwrap(),
        f.ws.join("src/main.rs")
    );
    assert_eq!(
        f.guard.resolve("./src/../src/main.rs").unwrap(),
        f.ws.join("src/main.rs")
    );
}

#[test]
fn absolute_paths_inside_are_allowed() {
    let f = fixture();
    let absolute = f.ws.join("src/main.rs");
    assert_eq!(
        f.guard.resolve(absolute.to_str().unwrap()).unwrap(),
        absolute
    );
}

#[test]
fn the_workspace_itself_is_allowed() {
    let f = fixture();
    assert_eq!(f.guard.resolve(".").unwrap(), f.ws);
    assert_eq!(f.guard.resolve(f.ws.to_str().unwrap()).unwrap(), f.ws);
    assert_eq!(f.guard.resolve("src/..").unwrap(), f.ws);
    assert_eq!(f.guard.display(&f.ws), ".");
    assert_eq!(f.guard.display(&f.ws.join("src/main.rs")), "src/main.rs");
}

#[test]
fn parent_escapes_are_refused() {
    let f = fixture();
    assert_outside(&f.guard, "../x");
    assert_outside(&f.guard, "..");
    assert_outside(&f.guard, "src/../../outside/secret");
    assert_outside(&f.guard, "missing/../../x");
}

#[test]
fn system_and_home_paths_are_refused() {
    let f = fixture();
    assert_outside(&f.guard, "/etc/passwd");
    assert_outside(&f.guard, "/");
    assert_outside(&f.guard, "~/.ssh/id_rsa");
    assert_outside(&f.guard, "~");
}

#[test]
fn error_message_names_the_path() {
    let f = fixture();
    let message = f.guard.resolve("/etc/passwd").unwrap_err().to_string();
    assert!(
        message.contains("/etc/passwd") && message.contains("outside the workspace"),
        "{message}"
    );
}

#[test]
fn empty_nul_and_tilde_user_are_invalid() {
    let f = fixture();
    for path in ["", "a\0b", "~root/.bashrc"] {
        assert!(
            matches!(f.guard.resolve(path), Err(PathError::Invalid { .. })),
            "{path:?}"
        );
    }
}

#[test]
fn symlinked_file_pointing_out_is_refused() {
    let f = fixture();
    symlink(f.outside.join("secret"), f.ws.join("link")).unwrap();
    assert_outside(&f.guard, "link");
}

#[test]
fn symlinked_directory_pointing_out_is_refused() {
    let f = fixture();
    symlink(&f.outside, f.ws.join("dirlink")).unwrap();
    assert_outside(&f.guard, "dirlink");
    assert_outside(&f.guard, "dirlink/secret");
    assert_outside(&f.guard, "dirlink/new-file");
    assert_outside(&f.guard, "dirlink/new/nested/file");
}

#[test]
fn relative_symlink_pointing_out_is_refused() {
    let f = fixture();
    symlink("../outside/secret", f.ws.join("src/rel")).unwrap();
    // ws/src/../outside does not exist, so this one resolves inside.
    assert_eq!(
        f.guard.resolve("src/rel").unwrap(),
        f.ws.join("outside/secret")
    );
    symlink("../../outside/secret", f.ws.join("src/rel2")).unwrap();
    assert_outside(&f.guard, "src/rel2");
}

#[test]
fn dangling_symlink_pointing_out_is_refused() {
    let f = fixture();
    symlink(f.outside.join("not-yet"), f.ws.join("dangling")).unwrap();
    assert_outside(&f.guard, "dangling");
}

#[test]
fn symlink_chains_are_followed() {
    let f = fixture();
    symlink(&f.outside, f.ws.join("hop2")).unwrap();
    symlink("hop2", f.ws.join("hop1")).unwrap();
    assert_outside(&f.guard, "hop1/secret");

    symlink("src", f.ws.join("inner2")).unwrap();
    symlink("inner2", f.ws.join("inner1")).unwrap();
    assert_eq!(
        f.guard.resolve("inner1/main.rs").unwrap(),
        f.ws.join("src/main.rs")
    );
}

#[test]
fn symlink_loops_are_invalid() {
    let f = fixture();
    symlink("loop-b", f.ws.join("loop-a")).unwrap();
    symlink("loop-a", f.ws.join("loop-b")).unwrap();
    assert!(matches!(
        f.guard.resolve("loop-a"),
        Err(PathError::Invalid { .. })
    ));
}

#[test]
fn dotdot_after_symlink_uses_the_link_target() {
    let f = fixture();
    std::fs::create_dir_all(f.outside.join("deep")).unwrap();
    symlink(f.outside.join("deep"), f.ws.join("deeplink")).unwrap();
    // Textually `ws/deeplink/../src` would be `ws/src`; really it is `outside/src`.
    assert_outside(&f.guard, "deeplink/../src");
}

#[test]
fn missing_nested_path_is_allowed() {
    let f = fixture();
    assert_eq!(
        f.guard.resolve("a/b/c/new.txt").unwrap(),
        f.ws.join("a/b/c/new.txt")
    );
    assert_eq!(
        f.guard.resolve("a/b/../c.txt").unwrap(),
        f.ws.join("a/c.txt")
    );
}

#[test]
fn path_through_a_file_is_invalid() {
    let f = fixture();
    assert!(matches!(
        f.guard.resolve("src/main.rs/x"),
        Err(PathError::Invalid { .. })
    ));
}

#[test]
fn extra_roots_are_allowed_and_missing_ones_ignored() {
    let f = fixture();
    let guard = PathGuard::new(&f.ws, &[f.outside.clone(), f.ws.join("does-not-exist")]).unwrap();
    assert_eq!(
        guard
            .resolve(f.outside.join("secret").to_str().unwrap())
            .unwrap(),
        f.outside.join("secret")
    );
    assert_eq!(guard.extra_roots(), std::slice::from_ref(&f.outside));
    assert_outside(&guard, "/etc/passwd");
}

#[test]
fn workspace_reached_through_a_symlink_is_canonicalized() {
    let f = fixture();
    let alias = f.outside.join("ws-alias");
    symlink(&f.ws, &alias).unwrap();
    let guard = PathGuard::new(&alias, &[]).unwrap();
    assert_eq!(guard.workspace(), f.ws);
    assert_eq!(
        guard
            .resolve(alias.join("src/main.rs").to_str().unwrap())
            .unwrap(),
        f.ws.join("src/main.rs")
    );
}
