//! The egress forwarder: the only way out of a sandbox whose profile has a
//! network allowlist.
//!
//! The sandbox keeps its own network namespace (loopback only), so clients
//! inside are pointed at `http://127.0.0.1:EGRESS_PORT` (`HTTP_PROXY` and
//! friends) and this forwarder, started by the command's shell before the
//! command, copies each connection to the host proxy's unix socket (bound
//! into the sandbox at [`EGRESS_SOCKET`]). It is the server's own executable
//! (bound read-only at [`FORWARDER`]): a sandbox may hold nothing else that
//! could do this. The proxy on the host decides what may pass.
//!
//! It binds first and forks after, so the command never starts before the
//! port listens; the child drops the command's stdio (or the output pipes
//! would stay open) and dies with the sandbox.
#![allow(unsafe_code)] // fork, dup2 and setsid: each call says why it is sound
use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// The hidden first argument that makes the executable a forwarder.
pub(crate) const FORWARD: &str = "__egress-forward";

/// The port the forwarder listens on inside the sandbox.
pub const EGRESS_PORT: u16 = 3128;

/// Where the host proxy's socket appears inside a sandbox.
pub const EGRESS_SOCKET: &str = "/run/agentd/egress.sock";

/// Where the forwarder (the server's executable) appears inside a sandbox.
pub const FORWARDER: &str = "/run/agentd/agentd";

/// The shell line that starts the forwarder before `command`.
pub(crate) fn wrap_command(command: &str) -> String {
    format!("{FORWARDER} {FORWARD} {EGRESS_PORT} {EGRESS_SOCKET} || exit 125\n{command}")
}

/// Runs the forwarder (`args` after [`FORWARD`]); never returns.
pub(crate) fn run(args: &[std::ffi::OsString]) -> ! {
    let code = match forward(args) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("agentd: the network proxy forwarder cannot start: {err}");
            125
        }
    };
    std::process::exit(code)
}

fn forward(args: &[std::ffi::OsString]) -> io::Result<()> {
    let [port, socket] = args else {
        return Err(io::Error::other("usage: __egress-forward PORT SOCKET"));
    };
    let port: u16 = port
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| io::Error::other("bad port"))?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
    // SAFETY: this process is single-threaded (it was just exec'd), so the
    // child may do anything after fork.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            detach()?;
            serve(&listener, Path::new(socket));
            std::process::exit(0)
        }
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
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            if let Ok(upstream) = UnixStream::connect(&socket) {
                splice(client, upstream);
            }
        });
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
