//! Link settings of the `memq` binary. memq is linked as a position-independent executable
//! (PIE, the toolchain's default), so its own code — including the bundled SQLite that parses
//! untrusted `.db` files — is loaded at a random address (ASLR: an exploit in it cannot rely on fixed addresses). It was
//! linked `-no-pie` before to save start-up time; docs/robustness.md ("Binary hardening") has
//! the measurements and why that time cannot be had back in a PIE: the loader must write the
//! ~3.2 MiB of `.data.rel.ro` (DataFusion's and Arrow's vtables and static tables) to relocate
//! it, one copy-on-write page fault per 4 KiB page (~1 000 faults, ~3 ms), whatever the format
//! of the relocation table.
//!
//! `MEMQ_RELR=1` packs the relative relocations (`-z pack-relative-relocs`, DT_RELR): a 6 MB
//! smaller binary and ~5 % less start-up work, but the binary then needs glibc ≥ 2.36, which
//! older cluster images lack, so it is not the default.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MEMQ_RELR");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && std::env::var_os("MEMQ_RELR").is_some_and(|v| v == "1") {
        println!("cargo:rustc-link-arg-bin=memq=-Wl,-z,pack-relative-relocs");
    }
}
