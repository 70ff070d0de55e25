//! The directory walk shared by `Glob` and `Grep`: ripgrep's rules (respect
//! `.gitignore`/`.ignore`, even outside a git repository), hidden files
//! included so `.github/…` can be found, `.git` itself skipped, symlinks
//! listed but never followed.
use std::path::Path;

use ignore::WalkBuilder;

use crate::context::HiddenPaths;

/// Characters that make a path component a glob rather than a literal name.
const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}'];

/// `hidden` paths (and everything below a hidden directory) are skipped.
pub(crate) fn walker(base: &Path, hidden: &HiddenPaths) -> WalkBuilder {
    let hidden = hidden.clone();
    let mut builder = WalkBuilder::new(base);
    builder
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .ignore(true)
        .follow_links(false)
        .filter_entry(move |entry| {
            entry.file_name() != ".git" && (entry.depth() == 0 || !hidden.is_hidden(entry.path()))
        });
    builder
}

/// Split a glob pattern into its leading literal directories and the rest, so
/// `src/**/*.rs` walks `src` and `/abs/dir/*.md` walks `/abs/dir`.
/// Returns `(literal_prefix, glob_rest)`; the rest is empty for a plain path.
pub(crate) fn split_literal_prefix(pattern: &str) -> (String, String) {
    let components: Vec<&str> = pattern.split('/').collect();
    let first_glob = components
        .iter()
        .position(|component| component.contains(GLOB_META));
    match first_glob {
        None => (pattern.to_string(), String::new()),
        Some(index) => {
            let prefix = components[..index].join("/");
            let prefix = if prefix.is_empty() && pattern.starts_with('/') {
                "/".into()
            } else {
                prefix
            };
            (prefix, components[index..].join("/"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_prefix_is_split_off() {
        let split = |pattern: &str| split_literal_prefix(pattern);
        assert_eq!(split("**/*.rs"), ("".into(), "**/*.rs".into()));
        assert_eq!(split("src/**/*.rs"), ("src".into(), "**/*.rs".into()));
        assert_eq!(split("/abs/dir/*.md"), ("/abs/dir".into(), "*.md".into()));
        assert_eq!(split("/*"), ("/".into(), "*".into()));
        assert_eq!(split("../x/*"), ("../x".into(), "*".into()));
        assert_eq!(split("Cargo.toml"), ("Cargo.toml".into(), "".into()));
    }
}
