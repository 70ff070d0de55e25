//! Per-user series of `/metrics`: turns started, spend, and refusals by the
//! limit that refused. Process-wide, like the process itself: one server per
//! process.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

#[derive(Debug, Default)]
struct Counters {
    turns: u64,
    spend_usd: f64,
    /// By limit: `max_running_turns`, `not_granted`, …
    refusals: BTreeMap<String, u64>,
}

static USERS: Mutex<BTreeMap<String, Counters>> = Mutex::new(BTreeMap::new());

fn with(user: &str, update: impl FnOnce(&mut Counters)) {
    if let Ok(mut users) = USERS.lock() {
        update(users.entry(user.to_string()).or_default());
    }
}

pub fn turn_started(user: &str) {
    with(user, |c| c.turns += 1);
}

pub fn spent(user: &str, usd: f64) {
    if usd > 0.0 {
        with(user, |c| c.spend_usd += usd);
    }
}

pub fn refused(user: &str, limit: &str) {
    with(user, |c| {
        *c.refusals.entry(limit.to_string()).or_default() += 1
    });
}

/// A label value with `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub fn render(out: &mut String) {
    let Ok(users) = USERS.lock() else { return };
    let header = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    };
    header(out, "agentd_user_turns_total", "Turns started, by user.");
    for (user, c) in users.iter() {
        let _ = writeln!(
            out,
            "agentd_user_turns_total{{user=\"{}\"}} {}",
            label(user),
            c.turns
        );
    }
    header(
        out,
        "agentd_user_spend_usd_total",
        "Model spend in USD, by user.",
    );
    for (user, c) in users.iter() {
        let _ = writeln!(
            out,
            "agentd_user_spend_usd_total{{user=\"{}\"}} {}",
            label(user),
            c.spend_usd
        );
    }
    header(
        out,
        "agentd_user_refusals_total",
        "Requests refused by a grant, quota or rate limit, by user and limit.",
    );
    for (user, c) in users.iter() {
        for (limit, n) in &c.refusals {
            let (user, limit) = (label(user), label(limit));
            let _ = writeln!(
                out,
                "agentd_user_refusals_total{{user=\"{user}\",limit=\"{limit}\"}} {n}"
            );
        }
    }
}
