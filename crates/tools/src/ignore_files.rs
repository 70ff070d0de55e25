//! The ignore files of the Glob and Grep walks (`.ignore`, `.gitignore`,
//! `.git/info/exclude`), read through the path guard. The `ignore` crate
//! would open them by path, following links: a `.gitignore` that is a FIFO
//! would block the walk forever, one linked to `/dev/zero` would grow without
//! end, and a directory swapped for a link would have another workspace's
//! read. Here they are read beneath the root, regular files only, bounded,
//! with the crate's precedence (`.ignore` over `.gitignore` over
//! `.git/info/exclude`, a deeper directory's rule over a shallower one's), and
//! only from directories inside the allowed roots.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{Mode, OFlags};

/// Larger ignore files are left unused.
const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;
/// A directory's ignore files, strongest first.
const IGNORE_FILES: [&str; 3] = [".ignore", ".gitignore", ".git/info/exclude"];

/// One directory's rules, in the order of `IGNORE_FILES`.
struct DirRules {
    /// The directory was confirmed to be one, beneath its root.
    present: bool,
    matchers: [Gitignore; 3],
}

/// The ignore rules met during one walk, loaded once per directory.
pub(crate) struct IgnoreFiles {
    guard: PathGuard,
    dirs: Mutex<HashMap<PathBuf, Arc<DirRules>>>,
}

impl IgnoreFiles {
    pub(crate) fn new(guard: PathGuard) -> Self {
        Self {
            guard,
            dirs: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the walk may enter `dir`: it is a directory beneath its root
    /// now (not a link swapped in) that the agent's user may list. Its ignore
    /// files are loaded on the way.
    pub(crate) fn admits_dir(&self, dir: &Path) -> bool {
        self.rules(dir).present
    }

    /// Whether the ignore files of the directories above `path` ignore it.
    pub(crate) fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut verdicts: [Option<bool>; 3] = [None; 3];
        let above = path
            .ancestors()
            .skip(1)
            .take_while(|dir| self.guard.is_allowed(dir));
        for dir in above {
            let rules = self.rules(dir);
            for (verdict, matcher) in verdicts.iter_mut().zip(&rules.matchers) {
                if verdict.is_none() {
                    *verdict = match matcher.matched(path, is_dir) {
                        Match::None => None,
                        Match::Ignore(_) => Some(true),
                        Match::Whitelist(_) => Some(false),
                    };
                }
            }
            if verdicts.iter().all(Option::is_some) {
                break;
            }
        }
        verdicts.into_iter().flatten().next().unwrap_or(false)
    }

    fn rules(&self, dir: &Path) -> Arc<DirRules> {
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(rules) = dirs.get(dir) {
            return rules.clone();
        }
        let rules = Arc::new(load(&self.guard, dir));
        dirs.insert(dir.to_path_buf(), rules.clone());
        rules
    }
}

fn load(guard: &PathGuard, dir: &Path) -> DirRules {
    let texts = guard.confined(dir, |root, relative| {
        // A real directory (not a link) beneath the root that the agent's
        // user may list: the walker lists as the server's user, so it can't tell.
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        confined::open_beneath(root, relative, flags, Mode::empty())?;
        // A missing, special or oversized ignore file just adds no rules.
        Ok(IGNORE_FILES.map(|name| {
            confined::read_regular(root, &relative.join(name), MAX_IGNORE_FILE_BYTES).ok()
        }))
    });
    match texts {
        Ok(texts) => DirRules {
            present: true,
            matchers: texts.map(|text| matcher(dir, text.as_deref())),
        },
        Err(_) => DirRules {
            present: false,
            matchers: [Gitignore::empty(), Gitignore::empty(), Gitignore::empty()],
        },
    }
}

/// The rules of one ignore file, relative to `dir`; lines that are not valid
/// globs are skipped, as the `ignore` crate does.
fn matcher(dir: &Path, text: Option<&[u8]>) -> Gitignore {
    let Some(text) = text else {
        return Gitignore::empty();
    };
    let text = String::from_utf8_lossy(text);
    let mut builder = GitignoreBuilder::new(dir);
    for (index, line) in text.lines().enumerate() {
        // Git ignores a byte order mark at the start of the file.
        let line = if index == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}
