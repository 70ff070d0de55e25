//! `[server] max_streams_per_user`: how many event streams one user may hold
//! open on this node. Each stream holds a [`StreamSlot`] until it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

pub struct StreamLimit {
    max: usize,
    open: Mutex<HashMap<String, usize>>,
}

impl StreamLimit {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for one more stream of `user`; `None` at the limit.
    pub fn open(self: &Arc<Self>, user: &str) -> Option<StreamSlot> {
        let mut open = self.lock();
        let count = open.entry(user.to_string()).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            limit: self.clone(),
            user: user.to_string(),
        })
    }
}

/// One open stream of a user; dropped when the stream ends.
pub struct StreamSlot {
    limit: Arc<StreamLimit>,
    user: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.limit.lock();
        if let Some(count) = open.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_at_the_limit_gets_a_slot_again_once_one_ends() {
        let limit = StreamLimit::new(2);
        let a = limit.open("alice");
        let b = limit.open("alice");
        assert!(a.is_some() && b.is_some());
        assert!(limit.open("alice").is_none());
        assert!(limit.open("bob").is_some(), "the limit is per user");
        drop(a);
        assert!(limit.open("alice").is_some());
        drop(b);
        assert!(limit.lock().get("alice").is_none());
    }
}
