use std::os::unix::fs::symlink;

use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    root: Root,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/file"), "inside").unwrap();
    std::fs::write(tmp.path().join("secret"), "outside").unwrap();
    let root = Root::open(&ws).unwrap();
    Fixture {
        _tmp: tmp,
        ws,
        root,
    }
}

type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> io::Result<OwnedFd>;

fn read_with(open: Opener, fx: &Fixture, rel: &str) -> io::Result<String> {
    let fd = open(fx.root.fd(), Path::new(rel), OFlags::RDONLY, Mode::empty())?;
    use std::os::fd::AsRawFd;
    std::fs::read_to_string(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The same verdicts from `openat2` and from the walk.
#[test]
fn both_ways_keep_links_inside_and_refuse_the_rest() {
    let fx = fixture();
    symlink("sub/file", fx.ws.join("rel_inside")).unwrap();
    symlink("sub/../sub/file", fx.ws.join("dotdot_inside")).unwrap();
    symlink("../secret", fx.ws.join("rel_out")).unwrap();
    symlink(fx.ws.join("sub/file"), fx.ws.join("abs_inside")).unwrap();
    symlink("/proc/self/root/etc/hostname", fx.ws.join("magic")).unwrap();
    symlink("loop", fx.ws.join("loop")).unwrap();
    for open in [open_beneath as Opener, open_beneath_by_walk as Opener] {
        assert_eq!(read_with(open, &fx, "sub/file").unwrap(), "inside");
        assert_eq!(read_with(open, &fx, "rel_inside").unwrap(), "inside");
        assert_eq!(read_with(open, &fx, "dotdot_inside").unwrap(), "inside");
        assert_eq!(read_with(open, &fx, "./sub/./file").unwrap(), "inside");
        for escaping in [
            "rel_out",
            "../secret",
            "sub/../../secret",
            "abs_inside",
            "magic",
        ] {
            let err = read_with(open, &fx, escaping).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EXDEV), "{escaping}: {err}");
        }
        let err = read_with(open, &fx, "loop").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
        assert!(
            open(
                fx.root.fd(),
                Path::new("/etc/hostname"),
                OFlags::RDONLY,
                Mode::empty()
            )
            .is_err()
        );
        // O_NOFOLLOW refuses a link in the last component, as open(2) does.
        let nofollow = open(
            fx.root.fd(),
            Path::new("rel_inside"),
            OFlags::RDONLY | OFlags::NOFOLLOW,
            Mode::empty(),
        );
        assert_eq!(nofollow.unwrap_err().raw_os_error(), Some(libc::ELOOP));
    }
}

#[test]
fn only_regular_files_are_opened_and_fifos_never_block() {
    let fx = fixture();
    let fifo = fx.ws.join("fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
    match open_regular(fx.root.fd(), Path::new("fifo")) {
        Err(ConfinedError::Kind { found, .. }) => assert_eq!(found, "a FIFO (named pipe)"),
        other => panic!("{other:?}"),
    }
    match open_regular(fx.root.fd(), Path::new("sub")) {
        Err(ConfinedError::Kind { found, .. }) => assert_eq!(found, "a directory"),
        other => panic!("{other:?}"),
    }
    let err = read_regular(fx.root.fd(), Path::new("sub/file"), 3).unwrap_err();
    assert!(
        matches!(err, ConfinedError::TooLarge { size: 6, limit: 3 }),
        "{err}"
    );
    assert_eq!(
        read_regular(fx.root.fd(), Path::new("sub/file"), 6).unwrap(),
        b"inside"
    );
}

#[test]
fn writes_replace_atomically_and_never_follow_a_link() {
    let fx = fixture();
    let written = write_atomic(fx.root.fd(), Path::new("new/deep/file"), b"one", true).unwrap();
    assert_eq!(written, Written::Created);
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("new/deep/file")).unwrap(),
        "one"
    );
    std::fs::set_permissions(
        fx.ws.join("new/deep/file"),
        std::os::unix::fs::PermissionsExt::from_mode(0o751),
    )
    .unwrap();
    let written = write_atomic(fx.root.fd(), Path::new("new/deep/file"), b"two", false).unwrap();
    assert_eq!(written, Written::Replaced);
    let meta = std::fs::metadata(fx.ws.join("new/deep/file")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o751
    );

    // A link at the name is refused; one in a parent must stay inside.
    symlink("../secret", fx.ws.join("out_link")).unwrap();
    assert!(write_atomic(fx.root.fd(), Path::new("out_link"), b"x", false).is_err());
    symlink("..", fx.ws.join("up")).unwrap();
    let err = write_atomic(fx.root.fd(), Path::new("up/secret"), b"x", true).unwrap_err();
    assert!(matches!(err, ConfinedError::Escapes), "{err}");
    assert_eq!(
        std::fs::read_to_string(fx._tmp.path().join("secret")).unwrap(),
        "outside"
    );
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(fx.ws.join("new/deep"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["file"]);
}

#[test]
fn listing_looks_at_entries_through_the_directory() {
    let fx = fixture();
    symlink("/etc", fx.ws.join("sub/link")).unwrap();
    let mut entries = list_dir(fx.root.fd(), Path::new("sub")).unwrap();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let kinds: Vec<_> = entries
        .iter()
        .map(|e| {
            (
                e.name.to_string_lossy().into_owned(),
                file_type(e.stat.as_ref().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("file".to_string(), FileType::RegularFile),
            ("link".to_string(), FileType::Symlink)
        ]
    );
    assert!(matches!(
        list_dir(fx.root.fd(), Path::new("sub/link")),
        Err(ConfinedError::Escapes)
    ));
    assert_eq!(
        read_link(fx.root.fd(), Path::new("sub/link")).unwrap(),
        Path::new("/etc")
    );
}
