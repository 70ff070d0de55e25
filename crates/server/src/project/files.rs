//! Reading a workspace's files for the server: through the workspace's open
//! descriptor, as the agent's user, links followed only while they stay
//! beneath it, only regular files, each capped.

use std::io::{self, Read as _};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use agentd_sandbox::confined::{self, ConfinedError, FsIdentity, Root};
use rustix::fs::{FileType, OFlags};

/// The most of one project file that is read.
pub const MAX_PROJECT_FILE_BYTES: u64 = 256 * 1024;
/// The most entries of one directory looked at.
pub const MAX_LISTED: usize = 1_000;

/// Whether a Read deny rule protects a (real, absolute) path.
pub type Hidden = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// A workspace, opened, and whom its files are read as.
#[derive(Clone)]
pub struct ProjectFiles {
    root: Root,
    identity: Option<FsIdentity>,
    hidden: Option<Hidden>,
}

impl std::fmt::Debug for ProjectFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectFiles")
            .field("root", &self.root.path())
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl ProjectFiles {
    pub fn new(root: Root, identity: Option<FsIdentity>) -> Self {
        Self {
            root,
            identity,
            hidden: None,
        }
    }

    /// Refuse files a Read deny rule protects: what `hidden` says of the
    /// place a file was actually opened at (a link to `.env` is `.env`).
    pub fn with_hidden(mut self, hidden: Hidden) -> Self {
        self.hidden = Some(hidden);
        self
    }

    /// The workspace's path, for messages and the sandbox's view.
    pub fn workspace(&self) -> &Path {
        self.root.path()
    }

    /// The text of `rel` (relative to the workspace), `None` when there is
    /// no such file; an error says why one that is there cannot be used.
    pub fn read(&self, rel: &Path) -> Result<Option<String>, String> {
        let rel = normalize(rel).ok_or("it leads outside the workspace")?;
        let read = self.as_user(|| Ok(self.read_checked(self.root.fd(), &rel, None)));
        text_of(read.map_err(ConfinedError::Io).and_then(|bytes| bytes))
    }

    /// `rel` parsed as JSON, with its text; `None` when it is missing, or
    /// unusable (the reason added to `warnings`).
    pub fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        rel: &str,
        warnings: &mut Vec<String>,
    ) -> Option<(T, String)> {
        let text = match self.read(Path::new(rel)) {
            Ok(text) => text?,
            Err(reason) => {
                warnings.push(format!("{rel}: {reason}"));
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(value) => Some((value, text)),
            Err(err) => {
                warnings.push(format!("{rel} is not valid: {err}"));
                None
            }
        }
    }

    /// `rel` beneath `dir`, only a regular file, owned by `owners` when
    /// given, not one a deny rule hides, capped.
    fn read_checked(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        rel: &Path,
        owners: Option<&[u32]>,
    ) -> Result<Vec<u8>, ConfinedError> {
        let (file, stat) = confined::open_regular(dir, rel)?;
        if owners.is_some_and(|owners| !owners.contains(&stat.st_uid)) {
            return Err(ConfinedError::Io(io::Error::other(
                "it belongs to another user",
            )));
        }
        if let Some(hidden) = &self.hidden {
            use std::os::fd::AsRawFd;
            let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
            if hidden(&real) {
                return Err(ConfinedError::Io(io::Error::other(
                    "a Read deny rule protects it",
                )));
            }
        }
        let size = stat.st_size as u64;
        if size > MAX_PROJECT_FILE_BYTES {
            return Err(ConfinedError::TooLarge {
                size,
                limit: MAX_PROJECT_FILE_BYTES,
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(MAX_PROJECT_FILE_BYTES).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The entries of the directory `rel`: names and whether each is a
    /// directory (links left out), sorted; empty when it is missing.
    pub fn list(&self, rel: &Path) -> Vec<(String, bool)> {
        let Some(rel) = normalize(rel) else {
            return Vec::new();
        };
        let listed = self.as_user(|| Ok(list_capped(self.root.fd(), &rel)));
        let Ok(Ok(mut names)) = listed else {
            return Vec::new();
        };
        names.sort();
        names
    }

    /// A file of a directory above the workspace (`dir` absolute), opened
    /// from `/` through real directories only, as the agent's user.
    /// Only a file of root's or the agent's own counts: in a directory
    /// others' agents may write, theirs could speak to this one.
    pub fn read_above(&self, dir: &Path, name: &str) -> Result<Option<String>, String> {
        let own = self
            .identity
            .map_or_else(|| rustix::process::geteuid().as_raw(), |who| who.uid);
        let read = self.as_user(|| {
            let dir = confined::open_absolute_no_links(dir, OFlags::PATH | OFlags::DIRECTORY)?;
            let owners = [0, own];
            Ok(self.read_checked(
                std::os::fd::AsFd::as_fd(&dir),
                Path::new(name),
                Some(&owners),
            ))
        });
        text_of(read.map_err(ConfinedError::Io).and_then(|bytes| bytes))
    }

    /// The value of a `{{file:PATH}}` placeholder: the file's text, or a
    /// note the model and the operator can see saying why there is none.
    pub fn template_file(&self, name: &str) -> String {
        match self.read(Path::new(name)) {
            Ok(Some(text)) => text,
            Ok(None) => format!("[agentd: {{{{file:{name}}}}}: no such file in the workspace]"),
            Err(reason) => format!("[agentd: {{{{file:{name}}}}} cannot be read: {reason}]"),
        }
    }

    fn as_user<T>(&self, work: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        confined::as_user(self.identity, work)
    }
}

/// The regular files and directories of `rel` beneath `dir`, at most
/// [`MAX_LISTED`] entries looked at (links and the rest left out).
fn list_capped(
    dir: std::os::fd::BorrowedFd<'_>,
    rel: &Path,
) -> Result<Vec<(String, bool)>, ConfinedError> {
    let fd = confined::open_dir(dir, rel)?;
    let mut listing = rustix::fs::Dir::read_from(&fd).map_err(io::Error::from)?;
    let mut names = Vec::new();
    for entry in std::iter::from_fn(|| listing.read()).take(MAX_LISTED + 2) {
        let Ok(entry) = entry else { break };
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        let flags = rustix::fs::AtFlags::SYMLINK_NOFOLLOW;
        let Ok(stat) = rustix::fs::statat(&fd, name, flags) else {
            continue;
        };
        match confined::file_type(&stat) {
            FileType::Directory => names.push((name.to_string(), true)),
            FileType::RegularFile => names.push((name.to_string(), false)),
            _ => {}
        }
    }
    Ok(names)
}

/// `rel` without `.` and with `..` applied, when it stays inside (and is
/// not absolute).
pub fn normalize(rel: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn text_of(read: Result<Vec<u8>, ConfinedError>) -> Result<Option<String>, String> {
    match read {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| "it is not UTF-8 text".to_string()),
        Err(err) if err.io_kind() == Some(io::ErrorKind::NotFound) => Ok(None),
        Err(ConfinedError::Io(err)) if err.raw_os_error() == Some(libc::ENOTDIR) => Ok(None),
        Err(err) => Err(err.to_string()),
    }
}
