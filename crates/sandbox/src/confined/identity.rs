//! Doing file operations as the agent's user: the calling thread's
//! file-system uid and gid are switched for the duration of one operation
//! (`setfsuid`/`setfsgid`, and no supplementary groups), so the kernel checks
//! permissions as it would for the agent's own processes, and what is created
//! belongs to the agent. Only this thread changes: Linux credentials are per
//! thread, and these calls (unlike `setuid`) are not broadcast by libc.
#![allow(unsafe_code)]

use std::io;

/// The uid and gid file operations run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsIdentity {
    pub uid: u32,
    pub gid: u32,
}

impl FsIdentity {
    /// Run `work` on this thread as this identity, then switch back, also
    /// when `work` panics. A server that is not root cannot switch (and
    /// needs not: its agent work runs as its own uid), so then `work` runs
    /// as it is.
    pub fn run<T>(&self, work: impl FnOnce() -> T) -> io::Result<T> {
        if !rustix::process::geteuid().is_root() || self.uid == 0 {
            return Ok(work());
        }
        let _restore = Switched::to(*self)?;
        Ok(work())
    }
}

/// `work` on this thread as `identity` when there is one (else as it is):
/// a path it resolves must then be one that user may walk to, whatever a
/// root server could reach.
pub fn as_user<T>(
    identity: Option<FsIdentity>,
    work: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    match identity {
        Some(identity) => identity.run(work)?,
        None => work(),
    }
}

/// Restores root's file-system identity and groups on drop.
struct Switched {
    groups: Vec<rustix::process::Gid>,
}

impl Switched {
    fn to(identity: FsIdentity) -> io::Result<Self> {
        let groups = rustix::process::getgroups()?;
        rustix::thread::set_thread_groups(&[])?;
        let switched = Switched { groups };
        // SAFETY: setfsgid/setfsuid take plain integers and only change this
        // thread's credentials; they return the previous id, never fail loudly.
        unsafe {
            libc::setfsgid(identity.gid);
            libc::setfsuid(identity.uid);
        }
        // A second call returns the id now in force: the way to check.
        // SAFETY: as above.
        let (uid, gid) = unsafe { (libc::setfsuid(identity.uid), libc::setfsgid(identity.gid)) };
        if uid as u32 != identity.uid || gid as u32 != identity.gid {
            return Err(io::Error::other(format!(
                "cannot act as uid {} gid {}",
                identity.uid, identity.gid
            )));
        }
        Ok(switched)
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        // SAFETY: as in `to`; a root thread can always switch back to 0.
        unsafe {
            libc::setfsuid(0);
            libc::setfsgid(0);
        }
        if let Err(err) = rustix::thread::set_thread_groups(&self.groups) {
            tracing::error!(%err, "cannot restore the thread's groups");
        }
    }
}
