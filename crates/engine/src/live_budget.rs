//! Bounds on live output stored as events. Every `message.delta` and
//! `tool.output` is stored and sent to every client, so a command printing
//! 200 MB would otherwise become 200 MB of events. Each tool call may stream
//! up to its own limit, and a whole turn (subagents and external calls
//! included) up to the turn's; past a limit the text is dropped and one
//! `output.truncated` says so. Results and final messages are not counted:
//! they are capped elsewhere and always recorded.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use agentd_protocol::OutputLimit;

/// Default bytes of live output one tool call may stream (1 MiB).
pub const DEFAULT_TOOL_OUTPUT_STREAM_BYTES: u64 = 1 << 20;
/// Default bytes of live deltas and tool output one turn may stream (16 MiB).
pub const DEFAULT_TURN_STREAM_BYTES: u64 = 16 << 20;

/// The turn's share, used by all of its runs at once.
#[derive(Debug, Default)]
pub(crate) struct TurnStreamBudget {
    used: AtomicU64,
    noticed: AtomicBool,
}

impl TurnStreamBudget {
    /// Takes up to `wanted` of what is left under `limit`; returns what it took.
    fn claim(&self, wanted: u64, limit: u64) -> u64 {
        let mut granted = 0;
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                granted = wanted.min(limit.saturating_sub(used));
                Some(used + granted)
            });
        granted
    }
}

/// What of a piece of live text may be stored.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Admitted<'t> {
    /// The part to store (all of it, a prefix, or nothing).
    pub text: &'t str,
    /// A limit was reached now and this stream must say so once.
    pub notice: Option<(OutputLimit, u64)>,
}

/// One stream of live text (a tool call's output, a model call's deltas)
/// against its own limit, if any, and the turn's.
#[derive(Debug)]
pub(crate) struct LiveStream<'a> {
    turn: &'a TurnStreamBudget,
    turn_limit: u64,
    own_limit: Option<u64>,
    sent: u64,
    stopped: bool,
}

impl<'a> LiveStream<'a> {
    pub(crate) fn new(turn: &'a TurnStreamBudget, turn_limit: u64, own_limit: Option<u64>) -> Self {
        Self {
            turn,
            turn_limit,
            own_limit,
            sent: 0,
            stopped: false,
        }
    }

    /// Once stopped, everything later is dropped without a look.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    pub(crate) fn admit<'t>(&mut self, text: &'t str) -> Admitted<'t> {
        if self.stopped {
            return Admitted {
                text: "",
                notice: None,
            };
        }
        let own_room = self
            .own_limit
            .map_or(u64::MAX, |limit| limit.saturating_sub(self.sent));
        let wanted = floor_char_boundary(text, clamp(own_room, text.len()));
        let granted = self.turn.claim(wanted as u64, self.turn_limit) as usize;
        let kept = floor_char_boundary(text, granted);
        self.sent += kept as u64;
        let notice = if granted < wanted {
            self.stopped = true;
            // The turn's notice is sent once, by the first stream to reach it.
            let first = !self.turn.noticed.swap(true, Ordering::SeqCst);
            first.then_some((OutputLimit::Turn, self.turn_limit))
        } else if wanted < text.len() {
            self.stopped = true;
            self.own_limit.map(|limit| (OutputLimit::ToolCall, limit))
        } else {
            None
        };
        Admitted {
            text: &text[..kept],
            notice,
        }
    }
}

fn clamp(room: u64, len: usize) -> usize {
    usize::try_from(room).map_or(len, |room| room.min(len))
}

/// The largest index `<= at` that starts a character of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    (0..=at)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(admitted: &Admitted<'_>) -> (String, Option<(OutputLimit, u64)>) {
        (admitted.text.to_string(), admitted.notice)
    }

    #[test]
    fn a_call_streams_up_to_its_limit_then_says_so_once() {
        let turn = TurnStreamBudget::default();
        let mut call = LiveStream::new(&turn, 1000, Some(10));
        assert_eq!(kept(&call.admit("abcdef")), ("abcdef".into(), None));
        assert_eq!(
            kept(&call.admit("ghijkl")),
            ("ghij".into(), Some((OutputLimit::ToolCall, 10)))
        );
        assert!(call.stopped());
        assert_eq!(kept(&call.admit("more")), (String::new(), None));
    }

    #[test]
    fn a_piece_that_exactly_fills_the_limit_is_not_a_cut() {
        let turn = TurnStreamBudget::default();
        let mut call = LiveStream::new(&turn, 1000, Some(4));
        assert_eq!(kept(&call.admit("abcd")), ("abcd".into(), None));
        assert_eq!(
            kept(&call.admit("e")),
            (String::new(), Some((OutputLimit::ToolCall, 4)))
        );
    }

    #[test]
    fn cuts_never_split_a_character() {
        let turn = TurnStreamBudget::default();
        let mut call = LiveStream::new(&turn, 1000, Some(4));
        // "é" is two bytes: the third and fourth bytes of "aéé" would split one.
        let admitted = call.admit("aéé");
        assert_eq!(admitted.text, "aé");
        assert_eq!(admitted.notice, Some((OutputLimit::ToolCall, 4)));
    }

    #[test]
    fn the_turn_limit_spans_calls_and_is_noticed_once_per_turn() {
        let turn = TurnStreamBudget::default();
        let mut first = LiveStream::new(&turn, 10, Some(8));
        assert_eq!(kept(&first.admit("12345678")), ("12345678".into(), None));
        let mut second = LiveStream::new(&turn, 10, Some(8));
        assert_eq!(
            kept(&second.admit("abcd")),
            ("ab".into(), Some((OutputLimit::Turn, 10)))
        );
        // Model deltas (no limit of their own) and later calls: nothing, silently.
        let mut deltas = LiveStream::new(&turn, 10, None);
        assert_eq!(kept(&deltas.admit("hello")), (String::new(), None));
        assert!(deltas.stopped());
        let mut third = LiveStream::new(&turn, 10, Some(8));
        assert_eq!(kept(&third.admit("x")), (String::new(), None));
    }

    #[test]
    fn deltas_count_against_the_turn() {
        let turn = TurnStreamBudget::default();
        let mut deltas = LiveStream::new(&turn, 6, None);
        assert_eq!(kept(&deltas.admit("hello ")), ("hello ".into(), None));
        assert_eq!(
            kept(&deltas.admit("world")),
            (String::new(), Some((OutputLimit::Turn, 6)))
        );
    }

    #[test]
    fn parallel_calls_never_exceed_the_turn_limit_together() {
        let turn = TurnStreamBudget::default();
        let total: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let mut call = LiveStream::new(&turn, 1000, Some(600));
                        (0..100)
                            .map(|_| call.admit("0123456789").text.len())
                            .sum::<usize>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(total, 1000);
    }
}
