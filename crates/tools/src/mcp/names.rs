//! Tool names as the model sees them: `mcp__<server>__<tool>`, limited to
//! `[A-Za-z0-9_-]` and 64 characters (the Anthropic API's rule).

/// Longest tool name the Anthropic API accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// The name a server's tool is offered under. Other characters become `_`;
/// an over-long name keeps its start and ends in a hash of the whole, so two
/// long names that share a prefix stay apart.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    if full.len() <= MAX_TOOL_NAME {
        return full;
    }
    // All ASCII after sanitising, so byte slicing is safe.
    let hash = fnv1a(format!("{server}\0{tool}").as_bytes());
    format!("{}_{hash:08x}", &full[..MAX_TOOL_NAME - 9])
}

fn sanitize(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    name.chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect()
}

/// 32-bit FNV-1a: stable across builds, unlike std's hasher, so names stay
/// the same in stored transcripts.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_sanitised() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(
            tool_name("my server", "get.env/x"),
            "mcp__my_server__get_env_x"
        );
        assert_eq!(tool_name("fs", "read-file_2"), "mcp__fs__read-file_2");
        assert_eq!(tool_name("é", "ü"), "mcp______");
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_distinguishing_hash() {
        let long = "a".repeat(80);
        let first = tool_name("server", &format!("{long}1"));
        let second = tool_name("server", &format!("{long}2"));
        assert_eq!(first.len(), MAX_TOOL_NAME);
        assert_eq!(second.len(), MAX_TOOL_NAME);
        assert_ne!(first, second);
        assert!(first.starts_with("mcp__server__aaa"));
        assert_eq!(first, tool_name("server", &format!("{long}1")));
        let exactly = "b".repeat(MAX_TOOL_NAME - "mcp__s__".len());
        assert_eq!(tool_name("s", &exactly), format!("mcp__s__{exactly}"));
    }
}
