//! Commands that run other commands, and variables that change what runs.

use super::bash::W;
use super::syms::Sym;

/// What a command's first word tells about the command it runs.
pub(crate) enum Wrap {
    /// An ordinary command.
    None,
    /// A transparent wrapper (`timeout 5 …`, `nice …`, `env A=1 …`): the command really run
    /// starts at word `skip`; `assigns` are the variables `env` sets.
    Strip { skip: usize, assigns: Vec<String> },
    /// Runs further commands, which are checked as commands of their own while the wrapper
    /// itself still needs a rule (`xargs`, `find -exec`, `sudo`).
    Runs(Vec<Vec<W>>),
    /// Runs a shell script given as text (`sh -c '…'`, `eval …`).
    Script(String),
    /// Runs something we cannot tell.
    Unknown(String),
}

/// Variables whose value changes which program runs or injects code into it. Setting them
/// (before a command, alone, through `env`, `export`/`declare`/…, or as a `for` variable)
/// makes the command impossible to allow by rule: it always needs approval.
const DANGEROUS_VARS: &[&str] = &[
    "PATH",
    "BASH_ENV",
    "ENV",
    "IFS",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "GLOBIGNORE",
    "CDPATH",
    "HOME",
    "ZDOTDIR",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "GCONV_PATH",
    "LESSOPEN",
    "LESSCLOSE",
    "SSH_ASKPASS",
    "SHELL",
    "RUSTC_WRAPPER",
    "RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC",
];
/// Prefixes of such variables (compared case-insensitively).
const DANGEROUS_PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_", "BASH_FUNC_", "NPM_CONFIG_"];

/// Why setting `name` makes a command impossible to allow, if it does.
pub(crate) fn sets_var(name: &str) -> Option<String> {
    let upper = name.to_ascii_uppercase();
    let dangerous =
        DANGEROUS_VARS.contains(&name) || DANGEROUS_PREFIXES.iter().any(|p| upper.starts_with(p));
    dangerous.then(|| format!("it sets {name}, which can change what runs"))
}

/// `export PATH=…`, `declare -x LD_PRELOAD=…`, `printf -v PATH …`, `read IFS`, namerefs.
pub(crate) fn declaration_blocker(words: &[W], pattern: bool) -> Option<String> {
    let name = words.first()?.lit.as_deref()?;
    let args = &words[1..];
    if name == "printf" {
        // `printf -v NAME …` assigns NAME.
        let var = args
            .windows(2)
            .find(|p| p[0].lit.as_deref() == Some("-v"))?[1]
            .lit
            .as_deref()?;
        return sets_var(var);
    }
    if matches!(name, "read" | "mapfile" | "readarray" | "getopts") {
        // These assign to the variables they name.
        return args.iter().find_map(|w| sets_var(w.lit.as_deref()?));
    }
    if !matches!(
        name,
        "export" | "declare" | "typeset" | "local" | "readonly"
    ) {
        return None;
    }
    let nameref = args.iter().any(|w| {
        w.lit
            .as_deref()
            .is_some_and(|l| l.starts_with('-') && !l.starts_with("--") && l.contains('n'))
    });
    if nameref && name != "export" {
        return Some(format!(
            "`{name} -n` makes a name that can set any variable"
        ));
    }
    args.iter().find_map(|w| {
        let Some(lit) = w.lit.as_deref() else {
            return (!pattern).then(|| format!("`{name}` with an expansion can set any variable"));
        };
        sets_var(lit.split_once('=')?.0.trim_end_matches('+'))
    })
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn unknown(name: &str) -> Wrap {
    Wrap::Unknown(format!("cannot tell which command `{name}` runs"))
}

pub(crate) fn classify(words: &[W], pattern: bool) -> Wrap {
    let Some(name) = words.first().and_then(|w| w.lit.as_deref()) else {
        return Wrap::None;
    };
    let base = name.rsplit('/').next().unwrap_or(name);
    let wrap = match base {
        "timeout" => transparent(words, &["-s", "--signal", "-k", "--kill-after"], 1, false),
        "nice" => transparent(words, &["-n", "--adjustment"], 0, false),
        "nohup" | "builtin" | "setsid" => transparent(words, &[], 0, false),
        "busybox" => transparent(words, &[], 0, false),
        "ionice" => transparent(words, &["-c", "-n", "--class", "--classdata"], 0, false),
        "stdbuf" => transparent(
            words,
            &["-i", "-o", "-e", "--input", "--output", "--error"],
            0,
            false,
        ),
        "time" => transparent(words, &["-f", "--format", "-o", "--output"], 0, false),
        "exec" => transparent(words, &["-a"], 0, false),
        "command" => {
            if words[1..]
                .iter()
                .any(|w| matches!(w.lit.as_deref(), Some("-v" | "-V")))
            {
                Wrap::None
            } else {
                transparent(words, &[], 0, false)
            }
        }
        "env" => transparent(words, &["-u", "--unset", "-C", "--chdir"], 0, true),
        "sudo" | "doas" => runs(
            words,
            &[
                "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group",
            ],
            false,
        ),
        "xargs" => runs(
            words,
            &[
                "-a",
                "-d",
                "-E",
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
            true,
        ),
        "find" => find(words),
        "eval" => match words[1..]
            .iter()
            .map(|w| w.lit.as_deref())
            .collect::<Option<Vec<_>>>()
        {
            Some(args) if args.is_empty() => Wrap::None,
            Some(args) => Wrap::Script(args.join(" ")),
            None => Wrap::Unknown("`eval` of an expansion can run anything".to_owned()),
        },
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "mksh" => shell(words),
        // `trap 'cmd' SIGNAL` runs `cmd` later; `watch` runs its arguments with `sh -c`.
        "trap" => match words.get(1).map(|w| w.lit.as_deref()) {
            Some(Some("--" | "-l" | "-p")) | None => Wrap::None,
            Some(Some(script)) => Wrap::Script(script.to_owned()),
            Some(None) => Wrap::Unknown("`trap` of an expansion can run anything".to_owned()),
        },
        "watch" => match skip_options(words, &["-n", "--interval"], false, &mut Vec::new()) {
            Ok(i) if i < words.len() => match words[i..]
                .iter()
                .map(|w| w.lit.as_deref())
                .collect::<Option<Vec<_>>>()
            {
                Some(args) => Wrap::Script(args.join(" ")),
                None => Wrap::Unknown("`watch` of an expansion can run anything".to_owned()),
            },
            Ok(_) => Wrap::None,
            Err(w) => w,
        },
        _ => Wrap::None,
    };
    match wrap {
        // A pattern only looks through a wrapper when it names the command it runs
        // (`Bash(timeout 5 make)`); `Bash(timeout *)` stays a rule about `timeout`.
        Wrap::Strip { skip, .. } if pattern && words[skip].lit.is_none() => Wrap::None,
        Wrap::Unknown(_) if pattern => Wrap::None,
        other => other,
    }
}

/// Skips the options of a wrapper; returns the index of its command, if any.
fn skip_options(
    words: &[W],
    with_arg: &[&str],
    env: bool,
    assigns: &mut Vec<String>,
) -> Result<usize, Wrap> {
    let name = words[0].lit.as_deref().unwrap_or_default();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let Some(lit) = w.lit.as_deref() else {
            return Err(unknown(name));
        };
        if lit == "--" {
            return Ok(i + 1);
        }
        if env && (lit.starts_with("-S") || lit.starts_with("--split-string")) {
            return Err(Wrap::Unknown(
                "`env -S` splits a string into a command".to_owned(),
            ));
        }
        if lit.starts_with('-') && lit.len() > 1 {
            i += if with_arg.contains(&lit) { 2 } else { 1 };
        } else if lit == "-" && env {
            i += 1;
        } else if env && is_assignment(lit) {
            assigns.push(
                lit.split_once('=')
                    .map(|(n, _)| n.to_owned())
                    .unwrap_or_default(),
            );
            i += 1;
        } else {
            return Ok(i);
        }
    }
    Ok(i)
}

fn transparent(words: &[W], with_arg: &[&str], positional: usize, env: bool) -> Wrap {
    let mut assigns = Vec::new();
    match skip_options(words, with_arg, env, &mut assigns) {
        Ok(i) if i + positional < words.len() => Wrap::Strip {
            skip: i + positional,
            assigns,
        },
        Ok(_) => Wrap::None,
        Err(w) => w,
    }
}

fn runs(words: &[W], with_arg: &[&str], input_args: bool) -> Wrap {
    match skip_options(words, with_arg, false, &mut Vec::new()) {
        Ok(i) if i < words.len() => {
            let mut inner = words[i..].to_vec();
            if input_args {
                inner.push(W::new(
                    vec![Sym::opaque("<arguments read by xargs>", false)],
                    "…",
                ));
            }
            Wrap::Runs(vec![inner])
        }
        Ok(_) => Wrap::None,
        Err(w) => w,
    }
}

fn find(words: &[W]) -> Wrap {
    let mut commands = Vec::new();
    let mut i = 1;
    while i < words.len() {
        if matches!(
            words[i].lit.as_deref(),
            Some("-exec" | "-execdir" | "-ok" | "-okdir")
        ) {
            let mut cmd = Vec::new();
            i += 1;
            while let Some(w) = words.get(i) {
                i += 1;
                match w.lit.as_deref() {
                    Some(";" | "+") => break,
                    Some("{}") => cmd.push(W::new(vec![Sym::opaque("{}", false)], "{}")),
                    _ => cmd.push(w.clone()),
                }
            }
            if !cmd.is_empty() {
                commands.push(cmd);
            }
        } else {
            i += 1;
        }
    }
    if commands.is_empty() {
        Wrap::None
    } else {
        Wrap::Runs(commands)
    }
}

fn shell(words: &[W]) -> Wrap {
    let name = words[0].lit.as_deref().unwrap_or_default();
    let mut has_c = false;
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let Some(lit) = w.lit.as_deref() else {
            return unknown(name);
        };
        if lit == "--" {
            i += 1;
            break;
        }
        if matches!(lit, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
        } else if (lit.starts_with('-') || lit.starts_with('+')) && lit.len() > 1 {
            has_c |= !lit.starts_with("--") && lit.contains('c');
            i += 1;
        } else {
            break;
        }
    }
    if !has_c {
        return Wrap::None;
    }
    match words.get(i) {
        Some(w) => match &w.lit {
            Some(script) => Wrap::Script(script.clone()),
            None => Wrap::Unknown(format!("`{name} -c` with an expansion can run anything")),
        },
        None => Wrap::None,
    }
}
