//! Splits a shell command into the simple commands it would run (with `brush-parser`).
//!
//! Every simple command anywhere in the program becomes a [`Part`]: those in pipelines,
//! lists, subshells, groups, `if`/`while`/`for`/`case` bodies, function bodies, command and
//! process substitutions (also inside double quotes, here-documents and `${x:-…}`), the
//! command a transparent wrapper runs (`timeout 5 rm x` → `rm x`), and the commands handed
//! to `xargs`, `find -exec`, `sudo`, `sh -c '…'` and `eval`.
//!
//! The same analysis reads `Bash(...)` rule patterns (`pattern == true`), where an unquoted
//! `*` is the wildcard, so a pattern and the command it was written for produce the same
//! symbols.

use brush_parser::ast;

pub(crate) use super::parse::analyze;
use super::parse::parse;
use super::redirs::{Redir, with_redirs};
use super::syms::{Sym, join_words, literal};
use super::wrappers::{self, Wrap};

/// How deep command substitutions, `sh -c` and `eval` may nest before we give up (Ask).
const MAX_DEPTH: usize = 8;

/// One simple command of a shell program.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    /// The command as written (for messages).
    pub display: String,
    /// What allow rules must match: the command without its variable assignments and
    /// transparent wrappers, followed by its output redirections.
    pub allow_seq: Vec<Sym>,
    /// Every spelling deny rules are tried against: each wrapper level, with and without
    /// redirections, and with the program's directory dropped (`/bin/rm` → `rm`).
    pub deny_seqs: Vec<Vec<Sym>>,
    /// Why no rule may allow this command (it can run code we cannot see).
    pub blocker: Option<String>,
    /// False for things that run nothing by themselves (`X=1`, `[[ -f a ]]`).
    pub needs_rule: bool,
    /// Written directly in the analysed text (not derived from a substitution or wrapper).
    pub top: bool,
}

/// A word of a simple command.
#[derive(Debug, Clone)]
pub(crate) struct W {
    pub syms: Vec<Sym>,
    pub lit: Option<String>,
    pub raw: String,
}

impl W {
    pub(crate) fn new(syms: Vec<Sym>, raw: impl Into<String>) -> Self {
        Self {
            lit: literal(&syms),
            syms,
            raw: raw.into(),
        }
    }
}

pub(crate) fn analyze_here(src: &str, pattern: bool) -> Result<Vec<Part>, String> {
    let program = parse(src)?;
    let mut a = Analyzer {
        pattern,
        depth: 0,
        reproduced: false,
        parts: Vec::new(),
    };
    a.program(&program);
    Ok(a.parts)
}

pub(crate) struct Analyzer {
    pub pattern: bool,
    depth: usize,
    /// Whether parts found now are reproduced by rendering an enclosing part (they sit in
    /// its words, or its wrapper runs them), so a session rule need not list them.
    reproduced: bool,
    parts: Vec<Part>,
}

pub(crate) fn merge(blocker: &mut Option<String>, more: Option<String>) {
    if blocker.is_none() {
        *blocker = more;
    }
}

impl Analyzer {
    /// Records something that runs code we cannot inspect.
    pub(crate) fn blocked(&mut self, display: impl Into<String>, why: impl Into<String>) {
        self.parts.push(Part {
            display: display.into(),
            allow_seq: Vec::new(),
            deny_seqs: Vec::new(),
            blocker: Some(why.into()),
            needs_rule: true,
            top: !self.reproduced,
        });
    }

    /// Analyses a nested program (`$(…)`, `sh -c '…'`, `eval …`).
    pub(crate) fn nested_program(&mut self, src: &str) {
        if self.depth >= MAX_DEPTH {
            self.blocked(src, "commands nest too deeply to check");
            return;
        }
        match parse(src) {
            Ok(program) => self.in_nested(|a| a.program(&program)),
            Err(e) => self.blocked(src, format!("could not parse `{src}`: {e}")),
        }
    }

    pub(crate) fn in_nested(&mut self, f: impl FnOnce(&mut Self)) {
        self.depth += 1;
        f(self);
        self.depth -= 1;
    }

    pub(crate) fn reproducing<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let old = self.reproduced;
        self.reproduced = true;
        let out = f(self);
        self.reproduced = old;
        out
    }

    fn program(&mut self, p: &ast::Program) {
        for list in &p.complete_commands {
            self.list(list, &[]);
        }
    }

    pub(crate) fn list(&mut self, l: &ast::CompoundList, redirs: &[Redir]) {
        for ast::CompoundListItem(and_or, _) in &l.0 {
            self.pipeline(&and_or.first, redirs);
            for next in &and_or.additional {
                let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
                self.pipeline(p, redirs);
            }
        }
    }

    fn pipeline(&mut self, p: &ast::Pipeline, redirs: &[Redir]) {
        for c in &p.seq {
            self.command(c, redirs);
        }
    }

    fn command(&mut self, c: &ast::Command, redirs: &[Redir]) {
        match c {
            ast::Command::Simple(sc) => self.simple(sc, redirs),
            ast::Command::Compound(cc, list) => {
                let redirs = self.redirect_list(list.as_ref(), redirs, || cc.to_string());
                self.compound(cc, &redirs);
            }
            ast::Command::Function(f) => {
                let ast::FunctionBody(cc, list) = &f.body;
                let redirs = self.redirect_list(list.as_ref(), redirs, || f.to_string());
                self.compound(cc, &redirs);
            }
            ast::Command::ExtendedTest(t, list) => {
                let display = || format!("[[ {} ]]", t.expr);
                let _ = self.redirect_list(list.as_ref(), redirs, display);
                let mut blocker = None;
                self.test_expr(&t.expr, &mut blocker);
                if let Some(why) = blocker {
                    self.blocked(display(), why);
                }
            }
        }
    }

    fn compound(&mut self, cc: &ast::CompoundCommand, redirs: &[Redir]) {
        use ast::CompoundCommand as C;
        match cc {
            C::Arithmetic(a) => self.arith_command(&a.expr.value),
            C::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arith_command(&e.value);
                }
                self.list(&f.body.list, redirs);
            }
            C::BraceGroup(b) => self.list(&b.list, redirs),
            C::Subshell(s) => self.list(&s.list, redirs),
            C::ForClause(f) => {
                let mut blocker = wrappers::sets_var(&f.variable_name);
                for w in f.values.iter().flatten() {
                    merge(&mut blocker, self.word(&w.value).1);
                }
                if let Some(why) = blocker {
                    self.blocked(format!("for {} in …", f.variable_name), why);
                }
                self.list(&f.body.list, redirs);
            }
            C::CaseClause(c) => {
                let mut blocker = self.word(&c.value.value).1;
                for item in &c.cases {
                    for w in &item.patterns {
                        merge(&mut blocker, self.word(&w.value).1);
                    }
                }
                if let Some(why) = blocker {
                    self.blocked(format!("case {} in …", c.value), why);
                }
                for item in &c.cases {
                    if let Some(l) = &item.cmd {
                        self.list(l, redirs);
                    }
                }
            }
            C::IfClause(i) => {
                self.list(&i.condition, redirs);
                self.list(&i.then, redirs);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, redirs);
                    }
                    self.list(&e.body, redirs);
                }
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0, redirs);
                self.list(&w.1.list, redirs);
            }
            C::Coprocess(c) => self.command(&c.body, redirs),
        }
    }

    fn arith_command(&mut self, expr: &str) {
        if let Some(why) = self.arith(expr) {
            self.blocked(format!("(( {expr} ))"), why);
        }
    }

    fn test_expr(&mut self, e: &ast::ExtendedTestExpr, blocker: &mut Option<String>) {
        use ast::BinaryPredicate as B;
        use ast::ExtendedTestExpr as T;
        match e {
            T::And(a, b) | T::Or(a, b) => {
                self.test_expr(a, blocker);
                self.test_expr(b, blocker);
            }
            T::Not(a) | T::Parenthesized(a) => self.test_expr(a, blocker),
            T::UnaryTest(pred, w) => {
                if matches!(
                    pred,
                    ast::UnaryPredicate::ShellVariableIsSetAndAssigned
                        | ast::UnaryPredicate::ShellVariableIsSetAndNameRef
                ) {
                    merge(
                        blocker,
                        Some("`[[ -v … ]]` can evaluate arithmetic".to_owned()),
                    );
                }
                merge(blocker, self.word(&w.value).1);
            }
            T::BinaryTest(pred, a, b) => {
                if matches!(
                    pred,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                ) {
                    merge(
                        blocker,
                        Some(
                            "arithmetic in `[[ … ]]` can run commands hidden in variables"
                                .to_owned(),
                        ),
                    );
                }
                merge(blocker, self.word(&a.value).1);
                merge(blocker, self.word(&b.value).1);
            }
        }
    }

    fn simple(&mut self, sc: &ast::SimpleCommand, inherited: &[Redir]) {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut blocker = None;
        let mut pending: Vec<Pending> = Vec::new();
        let mut redirs = inherited.to_vec();
        let prefix = sc.prefix.iter().flat_map(|p| p.0.iter());
        let suffix = sc.suffix.iter().flat_map(|s| s.0.iter());
        for item in prefix {
            match item {
                Item::AssignmentWord(a, _) => merge(&mut blocker, self.assignment(a)),
                Item::IoRedirect(r) => self.redirect(r, &mut redirs, &mut blocker),
                Item::Word(w) => pending.push(self.w(&w.value)),
                Item::ProcessSubstitution(kind, sub) => pending.push(self.process_subst(kind, sub)),
            }
        }
        if let Some(w) = &sc.word_or_name {
            pending.push(self.w(&w.value));
        }
        for item in suffix {
            match item {
                // `export A=1`: an ordinary argument (see `declaration_blocker`).
                Item::AssignmentWord(_, w) | Item::Word(w) => pending.push(self.w(&w.value)),
                Item::IoRedirect(r) => self.redirect(r, &mut redirs, &mut blocker),
                Item::ProcessSubstitution(kind, sub) => pending.push(self.process_subst(kind, sub)),
            }
        }
        for p in &mut pending {
            merge(&mut blocker, p.blocker.take());
        }
        let words: Vec<W> = pending.into_iter().map(|p| p.word).collect();
        if words.is_empty() {
            // Only assignments and redirections: runs nothing, unless it truncates a file
            // or sets a variable that changes what later commands run.
            if blocker.is_some() || !redirs.is_empty() {
                let allow_seq = with_redirs(&[], &redirs);
                self.parts.push(Part {
                    display: sc.to_string(),
                    deny_seqs: vec![allow_seq.clone()],
                    allow_seq,
                    blocker,
                    needs_rule: true,
                    top: !self.reproduced,
                });
            }
            return;
        }
        merge(
            &mut blocker,
            wrappers::declaration_blocker(&words, self.pattern),
        );
        self.push_command(&words, &redirs, blocker);
    }

    /// Records a command (after its assignments) and whatever its wrappers run.
    pub(crate) fn push_command(
        &mut self,
        words: &[W],
        redirs: &[Redir],
        mut blocker: Option<String>,
    ) {
        let mut levels: Vec<&[W]> = vec![words];
        let mut cur = words;
        loop {
            match wrappers::classify(cur, self.pattern) {
                Wrap::None => break,
                Wrap::Strip { skip, assigns } => {
                    for name in assigns {
                        merge(&mut blocker, wrappers::sets_var(&name));
                    }
                    cur = &cur[skip..];
                    levels.push(cur);
                }
                Wrap::Runs(inner) => {
                    self.reproducing(|a| {
                        a.in_nested(|a| {
                            for cmd in inner {
                                a.push_command(&cmd, &[], None);
                            }
                        });
                    });
                    break;
                }
                Wrap::Script(src) => {
                    self.reproducing(|a| a.nested_program(&src));
                    break;
                }
                Wrap::Unknown(why) => {
                    if !self.pattern {
                        merge(&mut blocker, Some(why));
                    }
                    break;
                }
            }
        }
        let seq_of = |ws: &[W]| join_words(ws.iter().map(|w| w.syms.as_slice()));
        let mut deny_seqs = Vec::new();
        for level in &levels {
            let bare = seq_of(level);
            deny_seqs.push(with_redirs(&bare, redirs));
            if !redirs.is_empty() {
                deny_seqs.push(bare);
            }
            if let Some(base) = level
                .first()
                .and_then(|w| w.lit.as_deref())
                .and_then(|l| l.rsplit_once('/').map(|(_, b)| b).filter(|b| !b.is_empty()))
            {
                let mut renamed = vec![W::new(base.chars().map(Sym::Ch).collect(), base)];
                renamed.extend_from_slice(&level[1..]);
                deny_seqs.push(seq_of(&renamed));
            }
        }
        let primary = levels.last().copied().unwrap_or(words);
        let mut display: Vec<&str> = primary.iter().map(|w| w.raw.as_str()).collect();
        display.extend(redirs.iter().map(|r| r.raw.as_str()));
        self.parts.push(Part {
            display: display.join(" "),
            allow_seq: with_redirs(&seq_of(primary), redirs),
            deny_seqs,
            blocker,
            needs_rule: true,
            top: !self.reproduced,
        });
    }

    fn process_subst(
        &mut self,
        kind: &ast::ProcessSubstitutionKind,
        sub: &ast::SubshellCommand,
    ) -> Pending {
        self.reproducing(|a| a.in_nested(|a| a.list(&sub.list, &[])));
        let raw = format!("{kind}({})", sub.list);
        Pending {
            word: W::new(vec![Sym::opaque(raw.clone(), false)], raw),
            blocker: None,
        }
    }

    fn w(&mut self, raw: &str) -> Pending {
        let (syms, blocker) = self.reproducing(|a| a.word(raw));
        Pending {
            word: W::new(syms, raw),
            blocker,
        }
    }
}

/// A word and anything in it that stops rules from allowing the command.
struct Pending {
    word: W,
    blocker: Option<String>,
}
