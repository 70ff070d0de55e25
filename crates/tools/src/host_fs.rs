//! What the file tools need from `agentd_sandbox::confined`: every host file
//! operation on an agent path runs through [`PathGuard::confined`] (beneath a
//! root's descriptor, as the agent's user), never by path string, so a link
//! swapped in after `PathGuard::resolve` cannot lead it out. This module
//! words its errors for the model and names file types.
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined::{self, ConfinedError};
use rustix::fs::{FileType, Stat};
use rustix::io::Errno;

use crate::ToolContext;
use crate::input::resolve_path;

/// A file a tool call works on: its path, resolved through the guard, and
/// that path as shown in messages.
pub(crate) struct Target {
    pub guard: PathGuard,
    pub path: PathBuf,
    pub shown: String,
}

impl Target {
    /// The path the model gave in `field`, or why it is refused.
    pub(crate) fn resolve(ctx: &ToolContext, field: &str, path: &str) -> Result<Self, String> {
        let path = resolve_path(ctx, field, path)?;
        Ok(Self {
            shown: ctx.guard.display(&path),
            guard: ctx.guard.clone(),
            path,
        })
    }
}

/// The kind of `stat`.
pub(crate) fn kind_of(stat: &Stat) -> FileType {
    confined::file_type(stat)
}

/// When `stat`'s file was last modified, for sorting (newest first).
pub(crate) fn modified(stat: &Stat) -> impl Ord + use<> {
    (stat.st_mtime, stat.st_mtime_nsec)
}

/// Whether `err` is the file (or a directory on its way) not existing.
pub(crate) fn is_not_found(err: &ConfinedError) -> bool {
    err.io_kind() == Some(ErrorKind::NotFound)
}

/// Whether `err` says the path names a directory.
pub(crate) fn is_directory(err: &ConfinedError) -> bool {
    matches!(err, ConfinedError::Kind { found, .. } if *found == confined::kind_name(FileType::Directory))
}

/// `err`, met while trying to `verb` (e.g. "read") `shown`, in words. Tools
/// word a missing file or a wrong kind their own way before falling back here.
pub(crate) fn describe(err: &ConfinedError, verb: &str, shown: &str) -> String {
    match err {
        ConfinedError::Escapes => format!(
            "{shown} leads outside the workspace (through a symbolic link); only paths inside it \
             can be used"
        ),
        ConfinedError::Kind { found, wanted } => format!("{shown} is {found}, not {wanted}"),
        ConfinedError::ReadOnly => {
            format!("{shown} is on a read-only mount; it cannot be changed")
        }
        ConfinedError::TooLarge { size, limit } => {
            format!("cannot {verb} {shown}: it is {size} bytes, more than the {limit} allowed")
        }
        ConfinedError::Io(io) => {
            let errno = io.raw_os_error().map(Errno::from_raw_os_error);
            match io.kind() {
                ErrorKind::NotFound => format!("{shown} does not exist"),
                ErrorKind::PermissionDenied => format!("permission denied: {shown}"),
                ErrorKind::NotADirectory => {
                    format!("cannot {verb} {shown}: a part of the path is not a directory")
                }
                // `openat2` gave up after repeated concurrent renames.
                ErrorKind::WouldBlock => format!(
                    "cannot {verb} {shown}: the directories on its path kept changing; try again"
                ),
                _ if errno == Some(Errno::LOOP) => format!(
                    "cannot {verb} {shown}: it goes through a link that is not followed here \
                     (a /proc magic link, or too many links)"
                ),
                _ => format!("cannot {verb} {shown}: {io}"),
            }
        }
    }
}

/// The metadata of `path` itself (a final link not followed), confirmed to
/// lie beneath its root now; `None` when it does not.
pub(crate) fn confirmed_entry(guard: &PathGuard, path: &Path) -> Option<Stat> {
    guard.confined(path, confined::lstat_beneath).ok()
}
