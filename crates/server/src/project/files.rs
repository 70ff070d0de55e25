//! Reading a workspace's files for the server: through the workspace's open
//! descriptor, as the agent's user, links followed only while they stay
//! beneath it, only regular files, each capped.

use std::io;
use std::path::{Component, Path, PathBuf};

use agentd_sandbox::confined::{self, ConfinedError, FsIdentity, Root};
use rustix::fs::{FileType, OFlags};

/// The most of one project file that is read.
pub const MAX_PROJECT_FILE_BYTES: u64 = 256 * 1024;

/// A workspace, opened, and whom its files are read as.
#[derive(Debug, Clone)]
pub struct ProjectFiles {
    root: Root,
    identity: Option<FsIdentity>,
}

impl ProjectFiles {
    pub fn new(root: Root, identity: Option<FsIdentity>) -> Self {
        Self { root, identity }
    }

    /// The workspace's path, for messages and the sandbox's view.
    pub fn workspace(&self) -> &Path {
        self.root.path()
    }

    /// The text of `rel` (relative to the workspace), `None` when there is
    /// no such file; an error says why one that is there cannot be used.
    pub fn read(&self, rel: &Path) -> Result<Option<String>, String> {
        let rel = normalize(rel).ok_or("it leads outside the workspace")?;
        let read = self.as_user(|| {
            Ok(confined::read_regular(
                self.root.fd(),
                &rel,
                MAX_PROJECT_FILE_BYTES,
            ))
        });
        text_of(read.map_err(ConfinedError::Io).and_then(|bytes| bytes))
    }

    /// The entries of the directory `rel`: names and whether each is a
    /// directory (links left out), sorted; empty when it is missing.
    pub fn list(&self, rel: &Path) -> Vec<(String, bool)> {
        let Some(rel) = normalize(rel) else {
            return Vec::new();
        };
        let listed = self.as_user(|| Ok(confined::list_dir(self.root.fd(), &rel)));
        let Ok(Ok(entries)) = listed else {
            return Vec::new();
        };
        let mut names: Vec<(String, bool)> = entries
            .into_iter()
            .filter_map(|entry| {
                let kind = confined::file_type(entry.stat.as_ref()?);
                let is_dir = match kind {
                    FileType::Directory => true,
                    FileType::RegularFile => false,
                    _ => return None,
                };
                Some((entry.name.into_string().ok()?, is_dir))
            })
            .collect();
        names.sort();
        names
    }

    /// A file of a directory above the workspace (`dir` absolute), opened
    /// from `/` through real directories only, as the agent's user.
    pub fn read_above(&self, dir: &Path, name: &str) -> Result<Option<String>, String> {
        let read = self.as_user(|| {
            let dir = confined::open_absolute_no_links(dir, OFlags::PATH | OFlags::DIRECTORY)?;
            Ok(confined::read_regular(
                std::os::fd::AsFd::as_fd(&dir),
                Path::new(name),
                MAX_PROJECT_FILE_BYTES,
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
