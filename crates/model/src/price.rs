//! What model calls cost: a built-in list-price table (US dollars per million
//! tokens) for current Anthropic and OpenAI models.
//!
//! Names match by prefix on a `-` boundary, so dated snapshots
//! (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) and aliases (`-latest`)
//! find their family; the longest matching entry wins (`gpt-4o-mini` before
//! `gpt-4o`). Router prefixes like `anthropic/` are ignored, and dotted Claude
//! names (`claude-sonnet-4.5`, as OpenRouter writes them) are accepted. Unknown
//! models cost 0: the table is an estimate, not a bill.

use agentd_protocol::Usage;

/// List prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    pub cache_read_per_mtok: f64,
    pub cache_write_per_mtok: f64,
}

impl Price {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self {
            input_per_mtok: input,
            output_per_mtok: output,
            cache_read_per_mtok: cache_read,
            cache_write_per_mtok: cache_write,
        }
    }

    /// Anthropic: cache reads at 10% of input, 5-minute cache writes at 125%.
    const fn anthropic(input: f64, output: f64) -> Self {
        Self::new(input, output, input * 0.1, input * 1.25)
    }

    /// OpenAI: cached input at its own rate; caching itself is free.
    const fn openai(input: f64, cached: f64, output: f64) -> Self {
        Self::new(input, output, cached, input)
    }

    /// The cost of `usage` at this price, in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let mtok = |tokens: u64| tokens as f64 / 1_000_000.0;
        mtok(usage.input_tokens) * self.input_per_mtok
            + mtok(usage.output_tokens) * self.output_per_mtok
            + mtok(usage.cache_read_tokens) * self.cache_read_per_mtok
            + mtok(usage.cache_write_tokens) * self.cache_write_per_mtok
    }
}

const TABLE: &[(&str, Price)] = &[
    // Anthropic. Opus 4.5 and later are priced lower than Opus 4 and 4.1.
    ("claude-opus-4-6", Price::anthropic(5.0, 25.0)),
    ("claude-opus-4-5", Price::anthropic(5.0, 25.0)),
    ("claude-opus-4-1", Price::anthropic(15.0, 75.0)),
    ("claude-opus-4", Price::anthropic(15.0, 75.0)),
    ("claude-sonnet-4", Price::anthropic(3.0, 15.0)),
    ("claude-haiku-4", Price::anthropic(1.0, 5.0)),
    ("claude-3-7-sonnet", Price::anthropic(3.0, 15.0)),
    ("claude-3-5-sonnet", Price::anthropic(3.0, 15.0)),
    ("claude-3-5-haiku", Price::anthropic(0.8, 4.0)),
    ("claude-3-opus", Price::anthropic(15.0, 75.0)),
    ("claude-3-haiku", Price::new(0.25, 1.25, 0.03, 0.30)),
    // OpenAI.
    ("gpt-5", Price::openai(1.25, 0.125, 10.0)),
    ("gpt-5.1", Price::openai(1.25, 0.125, 10.0)),
    ("gpt-5-mini", Price::openai(0.25, 0.025, 2.0)),
    ("gpt-5-nano", Price::openai(0.05, 0.005, 0.4)),
    ("gpt-4.1", Price::openai(2.0, 0.5, 8.0)),
    ("gpt-4.1-mini", Price::openai(0.4, 0.1, 1.6)),
    ("gpt-4.1-nano", Price::openai(0.1, 0.025, 0.4)),
    ("gpt-4o", Price::openai(2.5, 1.25, 10.0)),
    ("gpt-4o-mini", Price::openai(0.15, 0.075, 0.6)),
    ("o1", Price::openai(15.0, 7.5, 60.0)),
    ("o1-mini", Price::openai(1.1, 0.55, 4.4)),
    ("o3", Price::openai(2.0, 0.5, 8.0)),
    ("o3-mini", Price::openai(1.1, 0.55, 4.4)),
    ("o4-mini", Price::openai(1.1, 0.275, 4.4)),
];

/// Context windows in tokens, matched like prices.
const WINDOWS: &[(&str, u64)] = &[
    ("claude", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
];

/// The context window of `model` in tokens, if the table knows it.
pub fn context_window(model: &str) -> Option<u64> {
    lookup(WINDOWS, model)
}

/// The list price of `model`, if the table knows it.
pub fn price_for(model: &str) -> Option<Price> {
    lookup(TABLE, model)
}

fn lookup<T: Copy>(table: &[(&str, T)], model: &str) -> Option<T> {
    let name = model.trim().to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or(&name);
    let name = if name.starts_with("claude") {
        name.replace('.', "-")
    } else {
        name.to_string()
    };
    table
        .iter()
        .filter(|(prefix, _)| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| *value)
}

/// The cost of `usage` on `model` in US dollars; 0 for unknown models.
pub fn cost_usd(model: &str, usage: &Usage) -> f64 {
    price_for(model).map_or(0.0, |price| price.cost(usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_price(model: &str) -> Option<f64> {
        price_for(model).map(|p| p.input_per_mtok)
    }

    #[test]
    fn context_windows() {
        assert_eq!(context_window("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("gpt-4.1-nano"), Some(1_047_576));
        assert_eq!(context_window("llama3"), None);
    }

    #[test]
    fn matches_families_snapshots_and_aliases() {
        assert_eq!(input_price("claude-sonnet-4-5"), Some(3.0));
        assert_eq!(input_price("claude-sonnet-4-5-20250929"), Some(3.0));
        assert_eq!(input_price("claude-sonnet-4-20250514"), Some(3.0));
        assert_eq!(input_price("claude-opus-4-1-20250805"), Some(15.0));
        assert_eq!(input_price("claude-opus-4-20250514"), Some(15.0));
        assert_eq!(input_price("claude-opus-4-5-20251101"), Some(5.0));
        assert_eq!(input_price("claude-haiku-4-5"), Some(1.0));
        assert_eq!(input_price("claude-3-7-sonnet-latest"), Some(3.0));
        assert_eq!(input_price("claude-3-5-sonnet-20241022"), Some(3.0));
        assert_eq!(input_price("claude-3-5-haiku-20241022"), Some(0.8));
        assert_eq!(input_price("gpt-4o"), Some(2.5));
        assert_eq!(input_price("gpt-4o-2024-08-06"), Some(2.5));
        assert_eq!(input_price("gpt-4o-mini-2024-07-18"), Some(0.15));
        assert_eq!(input_price("gpt-4.1"), Some(2.0));
        assert_eq!(input_price("gpt-4.1-mini"), Some(0.4));
        assert_eq!(input_price("gpt-4.1-nano-2025-04-14"), Some(0.1));
        assert_eq!(input_price("o3"), Some(2.0));
        assert_eq!(input_price("o3-mini"), Some(1.1));
        assert_eq!(input_price("o4-mini-2025-04-16"), Some(1.1));
        assert_eq!(input_price("gpt-5"), Some(1.25));
        assert_eq!(input_price("gpt-5-mini"), Some(0.25));
        assert_eq!(input_price("gpt-5-nano"), Some(0.05));
        assert_eq!(input_price("gpt-5.1"), Some(1.25));
    }

    #[test]
    fn accepts_router_spellings() {
        assert_eq!(input_price("anthropic/claude-sonnet-4.5"), Some(3.0));
        assert_eq!(input_price("anthropic/claude-3.5-haiku"), Some(0.8));
        assert_eq!(input_price("openai/gpt-4o-mini"), Some(0.15));
        assert_eq!(input_price("Claude-Sonnet-4-5"), Some(3.0));
    }

    #[test]
    fn unknown_models_have_no_price() {
        assert_eq!(price_for("llama3.1:8b"), None);
        assert_eq!(price_for("gpt-4omni"), None);
        assert_eq!(price_for("o3x"), None);
        assert_eq!(price_for(""), None);
        let usage = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(cost_usd("my-local-model", &usage), 0.0);
    }

    #[test]
    fn cost_adds_all_token_kinds() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 2_000_000,
            cache_write_tokens: 400_000,
        };
        // 3 + 1.5 + 0.6 + 1.5
        let cost = cost_usd("claude-sonnet-4-5", &usage);
        assert!((cost - 6.6).abs() < 1e-9, "{cost}");
        // gpt-4o: 2.5 + 1.0 + 2.5 + 1.0 (writes billed as input; OpenAI reports none)
        let cost = cost_usd("gpt-4o", &usage);
        assert!((cost - 7.0).abs() < 1e-9, "{cost}");
        assert_eq!(cost_usd("gpt-4o", &Usage::default()), 0.0);
    }
}
