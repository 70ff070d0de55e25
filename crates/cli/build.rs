//! agentd's executables are linked with packed relative relocations
//! (`DT_RELR`, glibc ≥ 2.36): the position-independent agentd has ~79 000
//! of them, and the packed form is a few KiB the loader walks instead of
//! 1.9 MB of entries it reads at every start (sandboxes, one-shot runs).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
