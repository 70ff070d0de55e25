//! Per-session workspaces: one private directory per session under a root.
use std::fs;
use std::io::{self, ErrorKind};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

const MAX_ID_BYTES: usize = 128;

/// Create (or reopen) `<root>/<session_id>` with mode 0700 and return it.
///
/// `session_id` must be one safe path component: 1–128 ASCII letters, digits,
/// `-`, `_` or `.`, not starting with `.`. An existing entry is reused only if
/// it is a real directory (not a symlink); its mode is reset to 0700. `root`
/// is created (mode 0700) if missing.
pub fn create_workspace(root: &Path, session_id: &str) -> io::Result<PathBuf> {
    validate_session_id(session_id)?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)?;
    let dir = root.join(session_id);
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            let meta = fs::symlink_metadata(&dir)?;
            if !meta.file_type().is_dir() {
                return Err(io::Error::new(
                    ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", dir.display()),
                ));
            }
        }
        Err(err) => return Err(err),
    }
    // The umask could only have narrowed 0700, but an existing one may be wider.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

fn validate_session_id(id: &str) -> io::Result<()> {
    let valid = !id.is_empty()
        && id.len() <= MAX_ID_BYTES
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(io::Error::new(
            ErrorKind::InvalidInput,
            format!(
                "invalid session id {id:?}: use 1-{MAX_ID_BYTES} letters, digits, '-', '_' or '.', not starting with '.'"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn creates_a_private_directory_and_reuses_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("workspaces");
        let dir = create_workspace(&root, "0193-abc_def.1").unwrap();
        assert_eq!(dir, root.join("0193-abc_def.1"));
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root), 0o700);
        fs::write(dir.join("kept"), "x").unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(create_workspace(&root, "0193-abc_def.1").unwrap(), dir);
        assert_eq!(mode(&dir), 0o700);
        assert!(dir.join("kept").exists());
    }

    #[test]
    fn rejects_ids_that_are_not_one_plain_component() {
        let tmp = tempfile::tempdir().unwrap();
        let long = "a".repeat(MAX_ID_BYTES + 1);
        for id in [
            "", ".", "..", "../x", "a/b", "/abs", ".hidden", "a\0b", "a b", "é", &long,
        ] {
            let err = create_workspace(tmp.path(), id).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{id:?}");
        }
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn refuses_a_symlink_or_file_in_the_way() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        fs::create_dir(&target).unwrap();
        let before = mode(&target);
        std::os::unix::fs::symlink(&target, tmp.path().join("linked")).unwrap();
        fs::write(tmp.path().join("file"), "").unwrap();
        assert!(create_workspace(tmp.path(), "linked").is_err());
        assert!(create_workspace(tmp.path(), "file").is_err());
        assert_eq!(mode(&target), before, "the link target was not touched");
    }
}
