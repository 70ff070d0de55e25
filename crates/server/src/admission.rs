//! Turns each user has had accepted on this node and not yet ended (running
//! or queued), counted from the moment of the `202`: the store learns of a
//! turn only when it starts, so without this a burst of POSTs, or turns
//! queued behind a running one, would all pass `max_running_turns` and
//! `turns_per_hour`. A user's admissions are taken one at a time, so a check
//! and the turn it lets in are one step.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// Who had a turn accepted: the turn is checked again, as them, if it waited
/// in a queue (a grant may have been taken back meanwhile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub is_admin: bool,
}

#[derive(Debug, Default)]
pub struct Admissions {
    in_flight: Mutex<HashMap<String, u64>>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Admissions {
    /// Hold while checking and accepting a turn of `user`'s.
    pub async fn serialize(&self, user: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            // Locks nobody holds or waits for are dropped, so the map stays small.
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            locks.entry(user.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// `user`'s turns accepted here and not ended.
    pub fn in_flight(&self, user: &str) -> u64 {
        let counts = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(user).copied().unwrap_or(0)
    }

    pub fn admitted(&self, user: &str) {
        let mut counts = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(user.to_string()).or_default() += 1;
    }

    pub fn ended(&self, user: &str) {
        let mut counts = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_counted_from_admission_to_end() {
        let admissions = Admissions::default();
        admissions.admitted("alice");
        admissions.admitted("alice");
        admissions.admitted("bob");
        assert_eq!(admissions.in_flight("alice"), 2);
        admissions.ended("alice");
        admissions.ended("alice");
        admissions.ended("alice");
        assert_eq!(admissions.in_flight("alice"), 0);
        assert_eq!(admissions.in_flight("bob"), 1);
    }

    #[tokio::test]
    async fn one_users_admissions_wait_for_each_other_not_for_others() {
        let admissions = Admissions::default();
        let held = admissions.serialize("alice").await;
        let other = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            admissions.serialize("bob"),
        )
        .await;
        assert!(other.is_ok(), "bob does not wait for alice");
        let same = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            admissions.serialize("alice"),
        )
        .await;
        assert!(same.is_err(), "alice's second admission waits");
        drop(held);
        admissions.serialize("alice").await;
    }
}
