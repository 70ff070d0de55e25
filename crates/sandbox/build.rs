//! `AGENTD_SANDBOX_BUILD`: a digest of this crate's sources. agentd starts
//! sandboxes through a small helper executable only when the helper reports
//! the same digest: every argument and message format between the two is
//! defined in these sources, so the same digest means they agree.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
    let mut files = Vec::new();
    collect(Path::new("src"), &mut files);
    files.sort();
    // FNV-1a: stable across toolchains, unlike std's hasher.
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let name = file.to_string_lossy().into_owned().into_bytes();
        for byte in name.iter().chain(&[0]).chain(&bytes) {
            digest ^= u64::from(*byte);
            digest = digest.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=AGENTD_SANDBOX_BUILD={version}-{digest:016x}");
}

fn collect(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
