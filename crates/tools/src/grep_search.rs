//! The search behind `Grep`: walk, match with grep-searcher, and format the
//! results the way ripgrep would print them.
use std::fs::File;
use std::path::PathBuf;

use agentd_sandbox::PathGuard;
use agentd_sandbox::confined;
use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use rustix::fs::Stat;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::host_fs::{confirmed_entry, modified};
use crate::tool_result::truncate_line;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OutputMode {
    Content,
    FilesWithMatches,
    Count,
}

#[derive(Debug, Clone)]
pub(crate) struct SearchOptions {
    pub mode: OutputMode,
    pub line_numbers: bool,
    pub before: usize,
    pub after: usize,
    pub multiline: bool,
    pub head_limit: Option<usize>,
    /// Stop collecting content once the output passes this many characters.
    pub char_budget: usize,
}

pub(crate) fn search(
    options: &SearchOptions,
    matcher: &RegexMatcher,
    walk: ignore::Walk,
    guard: &PathGuard,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let context = |lines| match options.mode {
        OutputMode::Content => lines,
        _ => 0,
    };
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .multi_line(options.multiline)
        .before_context(context(options.before))
        .after_context(context(options.after))
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut content = ContentOutput::new(options);
    let mut files: Vec<(Stat, PathBuf)> = Vec::new();
    let mut counts: Vec<(PathBuf, u64)> = Vec::new();

    for entry in walk.flatten() {
        if cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        let Some((file, stat)) = open_searchable(&entry, guard) else {
            continue;
        };
        // A mount's files as the sandbox shows them.
        let shown = guard.sandbox_view(entry.path()).display().to_string();
        // Unreadable files are skipped, like ripgrep does.
        match options.mode {
            OutputMode::Content => {
                let mut sink = ContentSink {
                    path: &shown,
                    out: &mut content,
                    started: false,
                };
                let _ = searcher.search_file(matcher, &file, &mut sink);
                if content.full {
                    break;
                }
            }
            mode => {
                let stop_at_first = mode == OutputMode::FilesWithMatches;
                let mut sink = CountSink {
                    matches: 0,
                    stop_at_first,
                };
                if searcher.search_file(matcher, &file, &mut sink).is_err() || sink.matches == 0 {
                    continue;
                }
                if stop_at_first {
                    files.push((stat, guard.sandbox_view(entry.path())));
                } else {
                    counts.push((guard.sandbox_view(entry.path()), sink.matches));
                }
            }
        }
    }
    Ok(match options.mode {
        OutputMode::Content => content.render(),
        OutputMode::FilesWithMatches => render_files(files, options.head_limit),
        OutputMode::Count => render_counts(counts, options.head_limit),
    })
}

/// The file behind a walk entry, opened beneath its root (so its name is
/// confirmed there now, whatever the walker was shown): a regular file as it
/// is, a link only when it leads to a regular file inside the allowed roots.
/// Anything else (a pipe, a device, a name that no longer resolves beneath
/// the root) is skipped, never opened by path.
fn open_searchable(entry: &ignore::DirEntry, guard: &PathGuard) -> Option<(File, Stat)> {
    let kind = entry.file_type()?;
    if kind.is_file() {
        return guard.confined(entry.path(), confined::open_regular).ok();
    }
    if kind.is_symlink() {
        // The guard resolves the link (an absolute one inside the workspace
        // is fine), and what it names is opened beneath its root.
        confirmed_entry(guard, entry.path())?;
        let resolved = guard.resolve(entry.path().to_str()?).ok()?;
        return guard.confined(&resolved, confined::open_regular).ok();
    }
    None
}

fn render_files(mut files: Vec<(Stat, PathBuf)>, head_limit: Option<usize>) -> String {
    if files.is_empty() {
        return "No files found".into();
    }
    files.sort_by(|a, b| {
        modified(&b.0)
            .cmp(&modified(&a.0))
            .then_with(|| a.1.cmp(&b.1))
    });
    let total = files.len();
    let shown = head_limit.unwrap_or(total).min(total);
    let mut lines = vec![format!("Found {total} file{}", plural(total))];
    lines.extend(
        files
            .iter()
            .take(shown)
            .map(|(_, path)| path.display().to_string()),
    );
    if shown < total {
        lines.push(format!("[head_limit: showing {shown} of {total} files]"));
    }
    lines.join("\n")
}

fn render_counts(counts: Vec<(PathBuf, u64)>, head_limit: Option<usize>) -> String {
    if counts.is_empty() {
        return "No matches found".into();
    }
    let total_matches: u64 = counts.iter().map(|(_, count)| count).sum();
    let total_files = counts.len();
    let shown = head_limit.unwrap_or(total_files).min(total_files);
    let mut lines: Vec<String> = counts
        .iter()
        .take(shown)
        .map(|(path, count)| format!("{}:{count}", path.display()))
        .collect();
    if shown < total_files {
        lines.push(format!(
            "[head_limit: showing {shown} of {total_files} files]"
        ));
    }
    lines.push(format!(
        "\nFound {total_matches} matching line{} in {total_files} file{}",
        plural(total_matches as usize),
        plural(total_files)
    ));
    lines.join("\n")
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Lines of content-mode output, with the limits that stop the search.
struct ContentOutput {
    lines: Vec<String>,
    chars: usize,
    line_numbers: bool,
    with_context: bool,
    head_limit: Option<usize>,
    char_budget: usize,
    /// Set when a limit was reached; the search stops.
    full: bool,
    stop_note: Option<String>,
}

impl ContentOutput {
    fn new(options: &SearchOptions) -> Self {
        Self {
            lines: Vec::new(),
            chars: 0,
            line_numbers: options.line_numbers,
            with_context: options.before > 0 || options.after > 0,
            head_limit: options.head_limit,
            char_budget: options.char_budget,
            full: false,
            stop_note: None,
        }
    }

    /// Add a line; false once a limit is reached.
    fn push(&mut self, line: String) -> bool {
        if self.full {
            return false;
        }
        if self
            .head_limit
            .is_some_and(|limit| self.lines.len() >= limit)
        {
            self.full = true;
            self.stop_note = Some(format!(
                "[head_limit reached: showing the first {} lines]",
                self.lines.len()
            ));
            return false;
        }
        if !self.lines.is_empty() && self.chars + line.len() + 1 > self.char_budget {
            self.full = true;
            self.stop_note = Some(
                "[output limit reached; narrow the search with path, glob, type or head_limit]"
                    .into(),
            );
            return false;
        }
        self.chars += line.len() + 1;
        self.lines.push(line);
        true
    }

    fn format(&self, path: &str, number: Option<u64>, separator: char, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes);
        let text = truncate_line(text.trim_end_matches('\n').trim_end_matches('\r'));
        match number.filter(|_| self.line_numbers) {
            Some(number) => format!("{path}{separator}{number}{separator}{text}"),
            None => format!("{path}{separator}{text}"),
        }
    }

    fn render(self) -> String {
        if self.lines.is_empty() {
            return "No matches found".into();
        }
        let mut text = self.lines.join("\n");
        if let Some(note) = self.stop_note {
            text.push('\n');
            text.push_str(&note);
        }
        text
    }
}

struct ContentSink<'a> {
    path: &'a str,
    out: &'a mut ContentOutput,
    /// Whether this file has produced output yet (for the `--` between files).
    started: bool,
}

impl ContentSink<'_> {
    fn push(&mut self, line: String) -> bool {
        if !self.started {
            self.started = true;
            if self.out.with_context && !self.out.lines.is_empty() && !self.out.push("--".into()) {
                return false;
            }
        }
        self.out.push(line)
    }
}

impl Sink for ContentSink<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        let first = found.line_number();
        for (index, line) in found.lines().enumerate() {
            let number = first.map(|first| first + index as u64);
            let formatted = self.out.format(self.path, number, ':', line);
            if !self.push(formatted) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        let formatted = self
            .out
            .format(self.path, context.line_number(), '-', context.bytes());
        Ok(self.push(formatted))
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        Ok(self.push("--".into()))
    }
}

/// Counts matching lines (or stops at the first, for files_with_matches).
struct CountSink {
    matches: u64,
    stop_at_first: bool,
}

impl Sink for CountSink {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        _found: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        self.matches += 1;
        Ok(!self.stop_at_first)
    }
}
