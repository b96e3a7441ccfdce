//! On Linux, links the `memq` binary as a position-dependent executable. The binary
//! carries DataFusion's ~215 000 relative relocations; as a PIE the loader applies them and
//! copies ~870 pages of `.data.rel.ro` at every start, which dominated small ingests and
//! one-shot `memq sql` calls (`memq --version`: 4.6 ms as a PIE, 1.7 ms without). The price is
//! that the executable's own image is not randomised (libraries, heap, stack and mmap still are).

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=memq=-no-pie");
    }
}
