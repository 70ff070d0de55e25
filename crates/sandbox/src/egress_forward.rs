//! The egress forwarder: the only way out of a sandbox whose profile has a
//! network allowlist.
//!
//! The sandbox keeps its own network namespace (loopback only), so clients
//! inside are pointed at `http://127.0.0.1:EGRESS_PORT` (`HTTP_PROXY` and
//! friends) and this forwarder copies each connection to the host proxy's
//! unix socket (bound in at [`EGRESS_SOCKET`]). It is the trampoline's own
//! executable (the sealed in-memory copy of `agentd-sandbox`, or agentd
//! itself, see `enter_exe`), handed in by the trampoline as descriptor 3 (as
//! for a serving sandbox) and run as [`FORWARDER`]: never a file on disk,
//! which could have been swapped since the server started, and a sandbox may
//! hold nothing else that could do this. The proxy on the host decides what may pass;
//! the forwarder only carries bytes.
//!
//! It starts before every program of such a sandbox: a shell command's
//! first line ([`shell_command`]), or the program it execs ([`exec_prefix`],
//! for MCP servers); either way the program does not keep descriptor 3. It
//! binds first and forks after, so nothing starts before the port listens;
//! the serving child drops the command's stdio (or the output pipes would
//! stay open) and dies with the sandbox.
#![allow(unsafe_code)] // fork, dup2 and setsid: each call says why it is sound
use std::borrow::Cow;
use std::ffi::OsString;
use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::command::BwrapSpec;

/// The hidden first argument that makes the executable a forwarder.
pub(crate) const FORWARD: &str = "__egress-forward";

/// The port the forwarder listens on inside the sandbox.
pub const EGRESS_PORT: u16 = 3128;

/// Where the host proxy's socket appears inside a sandbox.
pub const EGRESS_SOCKET: &str = "/run/agentd/egress.sock";

/// The forwarder inside a sandbox: the executable handed in as descriptor 3.
pub const FORWARDER: &str = "/proc/self/fd/3";

/// Connections carried at once; the host proxy has its own, lower, cap.
const MAX_CONNECTIONS: usize = 256;

/// Exit status when the forwarder cannot start (the command never runs).
const CANNOT_FORWARD: i32 = 125;

/// `command` as a sandbox of `spec` runs it: after the forwarder, when the
/// sandbox has one.
pub(crate) fn shell_command<'a>(spec: Option<&BwrapSpec>, command: &'a str) -> Cow<'a, str> {
    match spec {
        Some(spec) if spec.forwarder => Cow::Owned(format!(
            "{FORWARDER} {FORWARD} {EGRESS_PORT} {EGRESS_SOCKET} || exit {CANNOT_FORWARD}; exec 3<&-\n{command}"
        )),
        _ => Cow::Borrowed(command),
    }
}

/// What goes before a program's argv for the forwarder to start and then
/// exec it.
pub(crate) fn exec_prefix() -> [String; 5] {
    [
        FORWARDER.to_string(),
        FORWARD.to_string(),
        EGRESS_PORT.to_string(),
        EGRESS_SOCKET.to_string(),
        "--".to_string(),
    ]
}

/// Runs the forwarder (`PORT SOCKET [-- PROGRAM ARG…]`, the arguments
/// after [`FORWARD`]); never returns. With a program, execs it once the
/// forwarder serves; else exits.
pub(crate) fn run(args: &[OsString]) -> ! {
    let (port, socket, program) = match parse(args) {
        Ok(parsed) => parsed,
        Err(err) => fail(&err),
    };
    if let Err(err) = start(port, Path::new(socket)) {
        fail(&err.to_string());
    }
    let Some((program, argv)) = program.split_first() else {
        std::process::exit(0)
    };
    // The executable stays out of the program (as out of a shell's command).
    // SAFETY: fcntl on a descriptor number; EBADF is harmless.
    unsafe { libc::fcntl(crate::serve::SELF_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(program).args(argv).exec();
    eprintln!("agentd: {}: {err}", program.to_string_lossy());
    std::process::exit(127)
}

fn fail(err: &str) -> ! {
    eprintln!("agentd: the network proxy forwarder cannot start: {err}");
    std::process::exit(CANNOT_FORWARD)
}

fn parse(args: &[OsString]) -> Result<(u16, &OsString, &[OsString]), String> {
    let usage = || "usage: __egress-forward PORT SOCKET [-- PROGRAM ARG…]".to_string();
    let [port, socket, rest @ ..] = args else {
        return Err(usage());
    };
    let port = port
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or_else(usage)?;
    let program = match rest.split_first() {
        None => &[][..],
        Some((dashes, program)) if dashes == "--" && !program.is_empty() => program,
        Some(_) => return Err(usage()),
    };
    Ok((port, socket, program))
}

/// Binds the port and leaves a child serving it.
fn start(port: u16, socket: &Path) -> io::Result<()> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    // SAFETY: this process is single-threaded (it was just exec'd), so the
    // child may do anything after fork.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            if detach().is_ok() {
                serve(&listener, socket);
            }
            std::process::exit(0)
        }
        // The listener is close-on-exec: the program never holds it.
        _ => Ok(()),
    }
}

/// Leaves the command's session and stdio: nothing of the command waits on us.
fn detach() -> io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    use std::os::fd::AsRawFd;
    for fd in 0..3 {
        // SAFETY: duplicating a descriptor we own onto the standard ones.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: plain system call; failing only means we stay in the group.
    unsafe { libc::setsid() };
    Ok(())
}

fn serve(listener: &TcpListener, socket: &Path) {
    let open = Arc::new(AtomicUsize::new(0));
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (socket, slot) = (socket.to_path_buf(), open.clone());
        let spawned = std::thread::Builder::new().spawn(move || {
            if let Ok(upstream) = UnixStream::connect(&socket) {
                splice(client, upstream);
            }
            slot.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            // The client was dropped with the closure; its slot goes too.
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Copies both ways until each side has ended.
fn splice(client: TcpStream, upstream: UnixStream) {
    let (Ok(mut client_read), Ok(mut upstream_write)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let to_upstream = std::thread::spawn(move || {
        let _ = io::copy(&mut client_read, &mut upstream_write);
        let _ = upstream_write.shutdown(std::net::Shutdown::Write);
    });
    let (mut upstream_read, mut client_write) = (upstream, client);
    let _ = io::copy(&mut upstream_read, &mut client_write);
    let _ = client_write.shutdown(std::net::Shutdown::Write);
    let _ = to_upstream.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_with_and_without_a_program() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        let plain = args(&["3128", "/s"]);
        let (port, socket, program) = parse(&plain).unwrap();
        assert_eq!(
            (port, socket.to_str(), program.len()),
            (3128, Some("/s"), 0)
        );
        let with = args(&["3128", "/s", "--", "node", "server.js"]);
        let (_, _, program) = parse(&with).unwrap();
        assert_eq!(program, args(&["node", "server.js"]));
        for bad in [
            &["x", "/s"][..],
            &["3128"],
            &["3128", "/s", "node"],
            &["1", "/s", "--"],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?}");
        }
        let prefix = exec_prefix();
        assert_eq!(
            parse(&args(&[&prefix[2], &prefix[3], "--", "x"]))
                .unwrap()
                .0,
            EGRESS_PORT
        );
    }
}
