//! The pool of spare sandboxes: which are waiting, for which policy, and
//! since when; a spare's identity (its [`Key`]) and what it is made of.

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::process::Child;
use tokio::runtime::Id as RuntimeId;

use super::{MAX_READER_COMMAND_BYTES, POOL, Taken, USED, discard, sweep};
use crate::command::BwrapSpec;
use crate::policy::Limits;
use crate::run::GroupKiller;
use crate::served::{self, Channel, Served};

pub(super) fn lock() -> MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) struct Pool {
    pub(super) capacity: usize,
    pub(super) idle: Duration,
    pub(super) entries: Vec<Entry>,
    pub(super) next_id: u64,
    pub(super) sweeping: bool,
}

impl Pool {
    /// Spares idle too long, and places claimed that long ago whose spare
    /// never came (its runtime shut down, say).
    pub(super) fn remove_expired(&mut self, now: Instant) -> Vec<Spare> {
        let idle = self.idle;
        self.entries
            .extract_if(.., |entry| {
                now.saturating_duration_since(entry.since) >= idle
            })
            .filter_map(|entry| entry.spare)
            .collect()
    }

    /// Claim a place under `key`; `None` when the pool is full or holds a
    /// spare (waiting or starting) for it already.
    pub(super) fn reserve(&mut self, key: Key) -> Option<u64> {
        if self.entries.len() >= self.capacity || self.entries.iter().any(|entry| entry.key == key)
        {
            return None;
        }
        Some(self.push(key, Vec::new(), None))
    }

    /// Add an entry under the next id, and return that.
    pub(super) fn push(&mut self, key: Key, binds: BindIdentities, spare: Option<Spare>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let since = Instant::now();
        self.entries.push(Entry {
            id,
            key,
            binds,
            since,
            spare,
            setting_up: false,
        });
        id
    }

    /// Give place `id` the key and binds its spare is about to start with;
    /// false (and the place given up) when the place is gone or another
    /// holds that key.
    pub(super) fn settle(&mut self, id: u64, key: Key, binds: BindIdentities) -> bool {
        let taken = self
            .entries
            .iter()
            .any(|entry| entry.id != id && entry.key == key);
        if taken {
            self.entries.retain(|entry| entry.id != id);
            return false;
        }
        let Some(entry) = self.entries.iter_mut().find(|entry| entry.id == id) else {
            return false;
        };
        entry.key = key;
        entry.binds = binds;
        entry.setting_up = true;
        true
    }

    pub(super) fn ensure_sweeper(&mut self) {
        if self.sweeping {
            return;
        }
        let started = std::thread::Builder::new()
            .name("agentd-spare-sweeper".into())
            .spawn(sweep);
        match started {
            Ok(_) => self.sweeping = true,
            Err(err) => {
                tracing::warn!(%err, "no spare sandbox sweeper; idle spares expire only on lookup");
            }
        }
    }
}

/// (device, inode) of each bind source, `None` for one that is gone.
pub(crate) type BindIdentities = Vec<Option<(u64, u64)>>;

/// What must be equal for a spare to serve a command, besides its binds.
pub(crate) struct Key {
    pub(super) spec: BwrapSpec,
    pub(super) limits: Limits,
    pub(super) runtime: RuntimeId,
}

/// Keys are equal when their sandboxes would be made the same way; what
/// their descriptor-bound sources are now is checked when one is taken.
impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.is(&other.spec, &other.limits, other.runtime)
    }
}

impl Eq for Key {}

impl Key {
    pub(super) fn is(&self, spec: &BwrapSpec, limits: &Limits, runtime: RuntimeId) -> bool {
        self.spec.same_shape(spec) && self.limits == *limits && self.runtime == runtime
    }
}

pub(super) struct Entry {
    pub(super) id: u64,
    pub(super) key: Key,
    /// The bind sources' identities from just before the spare was started
    /// (empty until then).
    pub(super) binds: BindIdentities,
    /// When the spare was ready, or the place claimed while it starts.
    pub(super) since: Instant,
    /// `None` while it is being started.
    pub(super) spare: Option<Spare>,
    /// Its start is under way (not just queued for the starter thread).
    pub(super) setting_up: bool,
}

/// A started sandbox waiting for a command.
pub(crate) struct Spare {
    pub(crate) group: GroupKiller,
    pub(crate) child: Child,
    pub(crate) reader: Reader,
}

/// How a spare takes its command.
pub(crate) enum Reader {
    /// The write end of the reader shell's stdin.
    Shell(OwnedFd),
    /// A serving sandbox's channel.
    Server(Channel),
}

impl Spare {
    /// Whether it can take `command`; one it cannot starts cold, and the
    /// spare waits for the next.
    pub(super) fn takes(&self, command: &str) -> bool {
        command.len()
            <= match self.reader {
                Reader::Shell(_) => MAX_READER_COMMAND_BYTES,
                Reader::Server(_) => crate::serve::MAX_COMMAND_BYTES,
            }
    }

    /// Hand it `command`; `None` (and the spare killed) when it has died or
    /// cannot take it.
    pub(super) fn run(mut self, command: &str, key: Key, binds: BindIdentities) -> Option<Taken> {
        if !matches!(self.child.try_wait(), Ok(None)) {
            if let Reader::Server(channel) = &self.reader
                && channel.unused()
            {
                served::ended_unused();
            }
            discard(self);
            return None;
        }
        let Spare {
            group,
            child,
            reader,
        } = self;
        let taken = match reader {
            Reader::Shell(stdin) => {
                // The pipe is empty and the command fits in PIPE_BUF: all or nothing.
                let written =
                    rustix::io::write(&stdin, command.as_bytes()).is_ok_and(|n| n == command.len());
                // End of input (`stdin` drops here): the reader runs the command.
                written.then_some(Taken::Child(child, group))
            }
            Reader::Server(channel) => {
                match Served::start(group, child, channel, key, binds, command) {
                    Ok(served) => Some(Taken::Served(served)),
                    Err(err) => {
                        tracing::debug!(%err, "a serving sandbox did not take the command");
                        None
                    }
                }
            }
        };
        // A spare that did not take the command is killed (with `child`'s drop).
        if taken.is_some() {
            USED.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }
}
