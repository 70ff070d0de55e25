//! Output redirections: which ones write files, and how they appear in a command's symbols.

use brush_parser::ast;

use super::bash::{Analyzer, merge};
use super::syms::{Sym, literal};

/// An output redirection to a file.
#[derive(Debug, Clone)]
pub(crate) struct Redir {
    pub op: String,
    pub target: Vec<Sym>,
    pub raw: String,
}

impl Analyzer {
    /// Adds a compound command's redirections to the inherited ones.
    pub(crate) fn redirect_list(
        &mut self,
        list: Option<&ast::RedirectList>,
        inherited: &[Redir],
        display: impl FnOnce() -> String,
    ) -> Vec<Redir> {
        let mut out = inherited.to_vec();
        let mut blocker = None;
        for r in list.map(|l| l.0.as_slice()).unwrap_or_default() {
            self.redirect(r, &mut out, &mut blocker);
        }
        if let Some(why) = blocker {
            self.blocked(display(), why);
        }
        out
    }

    pub(crate) fn redirect(
        &mut self,
        r: &ast::IoRedirect,
        out: &mut Vec<Redir>,
        blocker: &mut Option<String>,
    ) {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as Target;
        match r {
            ast::IoRedirect::File(fd, kind, target) => match target {
                Target::Filename(w) => {
                    let write = matches!(kind, K::Write | K::Append | K::Clobber | K::ReadAndWrite);
                    let (syms, b) = if write {
                        self.reproducing(|a| a.word(&w.value))
                    } else {
                        self.word(&w.value)
                    };
                    merge(blocker, b);
                    if write {
                        push_write(out, *fd, &kind.to_string(), syms, r.to_string());
                    }
                }
                Target::Duplicate(w) => {
                    let (syms, b) = self.reproducing(|a| a.word(&w.value));
                    merge(blocker, b);
                    let to_fd = literal(&syms)
                        .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
                    if matches!(kind, K::DuplicateOutput) && !to_fd {
                        // `>& file` writes stdout and stderr to a file.
                        push_write(out, *fd, ">&", syms, r.to_string());
                    }
                }
                Target::ProcessSubstitution(_, sub) => self.in_nested(|a| a.list(&sub.list, &[])),
                Target::Fd(_) => {}
            },
            ast::IoRedirect::OutputAndError(w, append) => {
                let (syms, b) = self.reproducing(|a| a.word(&w.value));
                merge(blocker, b);
                let op = if *append { "&>>" } else { "&>" };
                push_write(out, None, op, syms, r.to_string());
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    merge(blocker, self.heredoc(&doc.doc.value));
                }
            }
            ast::IoRedirect::HereString(_, w) => merge(blocker, self.word(&w.value).1),
        }
    }
}

fn push_write(
    out: &mut Vec<Redir>,
    fd: Option<ast::IoFd>,
    op: &str,
    target: Vec<Sym>,
    raw: String,
) {
    let harmless = literal(&target)
        .is_some_and(|t| matches!(t.as_str(), "/dev/null" | "/dev/stdout" | "/dev/stderr"));
    if harmless {
        return;
    }
    let op = match fd {
        Some(fd) if fd != 1 => format!("{fd}{op}"),
        _ => op.to_owned(),
    };
    out.push(Redir { op, target, raw });
}

pub(crate) fn with_redirs(words: &[Sym], redirs: &[Redir]) -> Vec<Sym> {
    let mut out = words.to_vec();
    for r in redirs {
        if !out.is_empty() {
            out.push(Sym::Sep);
        }
        out.push(Sym::Redir(r.op.clone()));
        out.push(Sym::Sep);
        out.extend_from_slice(&r.target);
    }
    out
}
