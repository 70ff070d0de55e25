//! Link flags of agentd's executables.
//!
//! - Packed relative relocations (`DT_RELR`) where the build machine's glibc
//!   has them (2.36+; the binary then needs one as new to start): the
//!   position-independent agentd has ~79 000 relocations, and the packed form
//!   is a few KiB the loader walks instead of 1.9 MB of entries it reads at
//!   every start (sandboxes, one-shot runs).
//! - `agentd-sandbox` without debug information: agentd copies it into
//!   memory once at start-up (`agentd_sandbox::enter_exe`), so it stays small.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" {
        return;
    }
    println!("cargo:rustc-link-arg-bin=agentd-sandbox=-Wl,--strip-debug");
    if env == "gnu" && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc (`ldd --version`'s first line ends in its
/// version) is 2.36 or newer.
fn glibc_has_relr() -> bool {
    let Ok(out) = Command::new("ldd").arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().last())
        .unwrap_or_default();
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    matches!(
        (parts.next().flatten(), parts.next().flatten()),
        (Some(major), Some(minor)) if (major, minor) >= (2, 36)
    )
}
