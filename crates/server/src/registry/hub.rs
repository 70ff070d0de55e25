//! A session's event hub: a bounded broadcast of live events to its streams.
//!
//! Like `tokio::sync::broadcast` (a subscriber sees every event sent after it
//! subscribed; one more than [`HUB_CAPACITY`] behind lags and is told so; the
//! sender never waits), but its buffer holds only the events some subscriber
//! has yet to read, and grows from nothing. tokio's allocates every slot at
//! creation (~20 KiB at 512 slots), which was most of an idle live session's
//! memory; an idle hub here is a few words.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::LiveEvent;

/// Live events buffered per session; a subscriber further behind is dropped
/// and reconnects from its last id.
pub const HUB_CAPACITY: usize = 512;

/// Above this many slots, an emptied buffer is given back (after a burst).
const KEPT_SLOTS: usize = 16;

#[derive(Default)]
pub struct Hub {
    state: Mutex<State>,
    /// Woken at each send; every waiting subscriber looks.
    sent: Notify,
}

#[derive(Default)]
struct State {
    /// Events not yet read by every subscriber, oldest first.
    queue: VecDeque<Queued>,
    /// Position of `queue[0]` in the hub's sequence of sends.
    head: u64,
    subscribers: usize,
}

struct Queued {
    event: Arc<LiveEvent>,
    /// Subscribers yet to read it.
    unread: usize,
}

/// The subscriber fell this many events behind; they are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lagged(pub u64);

impl State {
    fn tail(&self) -> u64 {
        self.head + self.queue.len() as u64
    }

    /// Drop the events every subscriber has read.
    fn trim(&mut self) {
        while self.queue.front().is_some_and(|q| q.unread == 0) {
            self.queue.pop_front();
            self.head += 1;
        }
        if self.queue.is_empty() && self.queue.capacity() > KEPT_SLOTS {
            self.queue = VecDeque::new();
        }
    }
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscriber_count(&self) -> usize {
        self.lock().subscribers
    }

    /// A subscriber that gets the events sent from now on.
    pub fn subscribe(self: &Arc<Self>) -> Subscriber {
        let mut state = self.lock();
        state.subscribers += 1;
        Subscriber {
            hub: self.clone(),
            next: state.tail(),
        }
    }

    /// The event at `*next` for a subscriber, moving it on; `None` when it
    /// has read everything sent.
    fn take(&self, next: &mut u64) -> Option<Result<Arc<LiveEvent>, Lagged>> {
        let mut state = self.lock();
        if *next < state.head {
            let missed = state.head - *next;
            *next = state.head;
            return Some(Err(Lagged(missed)));
        }
        let index = (*next - state.head) as usize;
        let queued = state.queue.get_mut(index)?;
        queued.unread -= 1;
        let event = queued.event.clone();
        *next += 1;
        state.trim();
        Some(Ok(event))
    }

    /// Send `event` to the subscribers there are (none: nothing is kept).
    pub fn send(&self, event: Arc<LiveEvent>) {
        {
            let mut state = self.lock();
            if state.subscribers == 0 {
                return;
            }
            if state.queue.len() == HUB_CAPACITY {
                // The slowest subscribers lag: they see it at their next recv.
                state.queue.pop_front();
                state.head += 1;
            }
            let unread = state.subscribers;
            state.queue.push_back(Queued { event, unread });
        }
        self.sent.notify_waiters();
    }
}

/// One stream's place in its session's hub; dropping it releases what it
/// had not read.
pub struct Subscriber {
    hub: Arc<Hub>,
    /// Position of the next event to read.
    next: u64,
}

impl Subscriber {
    /// The next event; `Err(Lagged)` once if events were lost to the bound.
    /// Cancel safe: nothing changes unless it returns.
    pub async fn recv(&mut self) -> Result<Arc<LiveEvent>, Lagged> {
        let Subscriber { hub, next } = self;
        // Events already waiting: take them without touching the Notify.
        if let Some(received) = hub.take(next) {
            return received;
        }
        loop {
            let sent = hub.sent.notified();
            tokio::pin!(sent);
            // Registered before looking, so a send in between still wakes us.
            sent.as_mut().enable();
            if let Some(received) = hub.take(next) {
                return received;
            }
            sent.await;
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        let from = self.next.saturating_sub(state.head) as usize;
        for queued in state.queue.iter_mut().skip(from) {
            queued.unread -= 1;
        }
        state.subscribers -= 1;
        state.trim();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn event(seq: u64) -> Arc<LiveEvent> {
        Arc::new(LiveEvent {
            seq,
            kind: "x",
            json: String::new(),
        })
    }

    async fn next(sub: &mut Subscriber) -> Result<u64, Lagged> {
        sub.recv().await.map(|e| e.seq)
    }

    #[tokio::test]
    async fn each_subscriber_sees_what_was_sent_after_it_subscribed() {
        let hub = Arc::new(Hub::default());
        hub.send(event(0));
        let mut a = hub.subscribe();
        hub.send(event(1));
        let mut b = hub.subscribe();
        hub.send(event(2));
        assert_eq!(next(&mut a).await, Ok(1));
        assert_eq!(next(&mut a).await, Ok(2));
        assert_eq!(next(&mut b).await, Ok(2));
        assert!(hub.lock().queue.is_empty(), "read by all: released");
        let waiting = tokio::spawn(async move { next(&mut b).await });
        tokio::task::yield_now().await;
        hub.send(event(3));
        assert_eq!(waiting.await.unwrap(), Ok(3));
    }

    #[tokio::test]
    async fn a_subscriber_too_far_behind_lags_and_the_buffer_stays_bounded() {
        let hub = Arc::new(Hub::default());
        let mut slow = hub.subscribe();
        let mut fast = hub.subscribe();
        for seq in 0..(HUB_CAPACITY as u64 + 3) {
            hub.send(event(seq));
            assert_eq!(next(&mut fast).await, Ok(seq));
        }
        assert_eq!(hub.lock().queue.len(), HUB_CAPACITY);
        assert_eq!(next(&mut slow).await, Err(Lagged(3)));
        assert_eq!(next(&mut slow).await, Ok(3));
        drop(slow);
        assert!(
            hub.lock().queue.is_empty(),
            "a dropped subscriber's share goes"
        );
        assert_eq!(
            hub.lock().queue.capacity(),
            0,
            "the burst's buffer is given back"
        );
        drop(fast);
        assert_eq!(hub.subscriber_count(), 0);
        hub.send(event(9));
        assert!(
            hub.lock().queue.is_empty(),
            "nothing kept without subscribers"
        );
    }
}
