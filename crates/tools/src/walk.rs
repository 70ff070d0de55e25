//! The directory walk shared by `Glob` and `Grep`: ripgrep's rules (respect
//! `.gitignore`/`.ignore`, even outside a git repository), hidden files
//! included so `.github/…` can be found, `.git` itself skipped, symlinks
//! listed but never followed.
//!
//! The walker lists directories by path, so a directory swapped for a link
//! meanwhile can make it list another place: nothing it yields is trusted.
//! Directories are entered only when confirmed beneath the root, ignore files
//! are read through the path guard ([`IgnoreFiles`]), and the tools confirm
//! or open every file they report through the guard too.
use std::path::Path;

use agentd_sandbox::PathGuard;
use ignore::overrides::Override;
use ignore::{DirEntry, WalkBuilder};

use crate::context::HiddenPaths;
use crate::ignore_files::IgnoreFiles;

/// Characters that make a path component a glob rather than a literal name.
const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}'];

/// A walk of `base`. `hidden` paths (and everything below a hidden
/// directory) are skipped; `overrides` are globs that choose files, deciding
/// before the ignore files do (as ripgrep's `-g`).
pub(crate) fn walker(
    base: &Path,
    guard: &PathGuard,
    hidden: &HiddenPaths,
    overrides: Option<Override>,
) -> WalkBuilder {
    let hidden = hidden.clone();
    let ignore_files = IgnoreFiles::new(guard.clone());
    let mut builder = WalkBuilder::new(base);
    // The crate's own ignore-file reading is off: `IgnoreFiles` does it.
    builder
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false);
    if let Some(overrides) = &overrides {
        builder.overrides(overrides.clone());
    }
    builder.filter_entry(move |entry| admit(entry, &hidden, overrides.as_ref(), &ignore_files));
    builder
}

/// Whether the walk keeps `entry` (and, for a directory, enters it).
fn admit(
    entry: &DirEntry,
    hidden: &HiddenPaths,
    overrides: Option<&Override>,
    ignore_files: &IgnoreFiles,
) -> bool {
    if entry.depth() == 0 {
        return true;
    }
    if entry.file_name() == ".git" || hidden.is_hidden(entry.path()) {
        return false;
    }
    let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
    let chosen_by_glob =
        overrides.is_some_and(|overrides| !overrides.matched(entry.path(), is_dir).is_none());
    if !chosen_by_glob && ignore_files.is_ignored(entry.path(), is_dir) {
        return false;
    }
    !is_dir || ignore_files.admits_dir(entry.path())
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

    /// A tree whose ignore files exercise every precedence rule.
    fn ignore_tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let files = [
            (".gitignore", "*.log\nbuild/\n/top-only.txt\n"),
            (".ignore", "!debug.log\n"),
            (".git/info/exclude", "notes.md\n"),
            ("sub/.gitignore", "!keep.log\n*.tmp\n"),
            ("sub/deeper/.ignore", "*.md\n"),
            ("a.log", ""),
            ("debug.log", ""),
            ("notes.md", ""),
            ("top-only.txt", ""),
            ("main.txt", ""),
            ("build/x.txt", ""),
            ("sub/keep.log", ""),
            ("sub/b.log", ""),
            ("sub/c.tmp", ""),
            ("sub/top-only.txt", ""),
            ("sub/deeper/readme.md", ""),
            ("sub/deeper/code.rs", ""),
        ];
        for (name, content) in files {
            let path = tmp.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        tmp
    }

    fn walked(builder: &WalkBuilder, base: &Path) -> Vec<String> {
        let mut paths: Vec<String> = builder
            .build()
            .flatten()
            .filter(|entry| entry.depth() > 0)
            .map(|entry| {
                entry
                    .path()
                    .strip_prefix(base)
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        paths.sort();
        paths
    }

    /// The ignore files, read through the guard, filter as the `ignore`
    /// crate's own reading of them does (with and without a `glob`).
    #[test]
    fn ignore_files_keep_the_crate_s_rules() {
        let tmp = ignore_tree();
        let base = tmp.path().canonicalize().unwrap();
        let guard = PathGuard::new(&base, &[]).unwrap();
        let mut native = WalkBuilder::new(&base);
        native
            .hidden(false)
            .parents(false)
            .git_global(false)
            .require_git(false)
            .filter_entry(|entry| entry.file_name() != ".git");
        let globs = |root: &Path| {
            let mut overrides = ignore::overrides::OverrideBuilder::new(root);
            overrides.add("*.log").unwrap();
            overrides.build().unwrap()
        };
        for overrides in [None, Some(globs(&base))] {
            let ours = walker(&base, &guard, &HiddenPaths::default(), overrides.clone());
            if let Some(overrides) = overrides {
                native.overrides(overrides);
            }
            assert_eq!(walked(&ours, &base), walked(&native, &base));
        }
        let ours = walked(&walker(&base, &guard, &HiddenPaths::default(), None), &base);
        assert!(ours.contains(&"debug.log".to_string()), "{ours:?}");
        assert!(ours.contains(&"sub/keep.log".to_string()), "{ours:?}");
        for gone in [
            "a.log",
            "notes.md",
            "build",
            "sub/c.tmp",
            "sub/deeper/readme.md",
        ] {
            assert!(!ours.contains(&gone.to_string()), "{gone} in {ours:?}");
        }
    }

    /// Searching a subdirectory still applies the ignore files above it, up
    /// to the root.
    #[test]
    fn ignore_files_above_the_base_apply() {
        let tmp = ignore_tree();
        let base = tmp.path().canonicalize().unwrap();
        let guard = PathGuard::new(&base, &[]).unwrap();
        let sub = base.join("sub");
        let found = walked(&walker(&sub, &guard, &HiddenPaths::default(), None), &sub);
        assert_eq!(
            found,
            [
                ".gitignore",
                "deeper",
                "deeper/.ignore",
                "deeper/code.rs",
                "keep.log",
                "top-only.txt"
            ]
        );
    }
}
