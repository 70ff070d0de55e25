//! Runs the shell parser safely: bounded nesting, a thread with a large stack (the parser
//! recurses), and panics caught. Every failure is an error, which the policy treats as Ask.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{OnceLock, mpsc};

use brush_parser::ast;

use super::bash::{Part, analyze_here};

/// Commands nesting deeper than this (counted roughly) are not parsed: the parser recurses
/// and a hostile command must not overflow the stack.
const MAX_NESTING: usize = 200;
/// Stack for the parser thread (virtual; only what is used is committed).
const PARSER_STACK: usize = 64 << 20;

/// Parses `src` and returns its simple commands, or why it could not be parsed.
pub(crate) fn analyze(src: &str, pattern: bool) -> Result<Vec<Part>, String> {
    if nesting_depth(src) > MAX_NESTING {
        return Err("the command nests too deeply to check".to_owned());
    }
    let (reply, answer) = mpsc::sync_channel(1);
    let job = Job {
        src: src.to_owned(),
        pattern,
        reply,
    };
    // The parser thread, or (if it could not be started) one for this call.
    let job = match parser() {
        Some(jobs) => match jobs.send(job) {
            Ok(()) => return answer.recv().unwrap_or_else(|_| Err(failed())),
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    let worker = parser_thread()
        .spawn(move || analyze_caught(&job.src, job.pattern))
        .map_err(|e| format!("could not start the shell parser: {e}"))?;
    worker.join().unwrap_or_else(|_| Err(failed()))
}

/// A command to parse and where its answer goes.
struct Job {
    src: String,
    pattern: bool,
    reply: mpsc::SyncSender<Result<Vec<Part>, String>>,
}

/// The one long-lived parser thread, started on first use: a thread with a
/// stack this size per command cost a mapping and a clone each time, more
/// than parsing a typical command.
fn parser() -> Option<&'static mpsc::Sender<Job>> {
    static PARSER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    PARSER
        .get_or_init(|| {
            let (jobs, inbox) = mpsc::channel::<Job>();
            parser_thread()
                .spawn(move || {
                    for job in inbox {
                        let _ = job.reply.send(analyze_caught(&job.src, job.pattern));
                    }
                })
                .ok()
                .map(|_| jobs)
        })
        .as_ref()
}

fn parser_thread() -> std::thread::Builder {
    let thread = std::thread::Builder::new().name("bash-rule-parser".to_owned());
    thread.stack_size(PARSER_STACK)
}

/// [`analyze_here`], a panic in it made an error (the thread goes on).
fn analyze_caught(src: &str, pattern: bool) -> Result<Vec<Part>, String> {
    catch_unwind(AssertUnwindSafe(|| analyze_here(src, pattern))).unwrap_or_else(|_| Err(failed()))
}

fn failed() -> String {
    "the shell parser failed".to_owned()
}

/// A rough upper bound of how deeply `src` nests (brackets and compound commands).
fn nesting_depth(src: &str) -> usize {
    let chars: Vec<char> = src.chars().collect();
    let (mut depth, mut max, mut at_start, mut i) = (0usize, 0usize, true, 0);
    while let Some(&c) = chars.get(i) {
        match c {
            '(' | '{' => {
                depth += 1;
                max = max.max(depth);
                at_start = true;
                i += 1;
            }
            ')' | '}' => {
                depth = depth.saturating_sub(1);
                at_start = false;
                i += 1;
            }
            ';' | '&' | '|' | '\n' => {
                at_start = true;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            _ => {
                let start = i;
                while chars
                    .get(i)
                    .is_some_and(|c| !c.is_whitespace() && !"(){};&|".contains(*c))
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if at_start {
                    match word.as_str() {
                        "if" | "case" | "while" | "until" | "for" | "select" => {
                            depth += 1;
                            max = max.max(depth);
                        }
                        "fi" | "esac" | "done" => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                }
                at_start = matches!(
                    word.as_str(),
                    "then" | "do" | "else" | "elif" | "!" | "time" | "if" | "while" | "until"
                );
            }
        }
    }
    max
}

pub(crate) fn parse(src: &str) -> Result<ast::Program, String> {
    let options = brush_parser::ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(src.as_bytes()), &options);
    match catch_unwind(AssertUnwindSafe(|| parser.parse_program())) {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(failed()),
    }
}
