//! Release builds embed `web/` (see `src/http/web.rs`): rebuild when a file
//! there is added or removed, which the embedded `include_bytes!` alone does
//! not notice. Debug builds read `web/` from disk and need no rebuild.

fn main() {
    if std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_none() {
        println!("cargo:rerun-if-changed=../../web");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
