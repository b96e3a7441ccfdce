//! Compiles every `sql/**/*.sql` analysis into the binary: writes `$OUT_DIR/sql_library.rs`, a
//! list of (relative path, text) pairs built with `include_str!`.
//!
//! On Linux it also links the `memq` binary as a position-dependent executable. The binary
//! carries DataFusion's ~215 000 relative relocations; as a PIE the loader applies them and
//! copies ~870 pages of `.data.rel.ro` at every start, which dominated small ingests and
//! one-shot `memq sql` calls (`memq --version`: 4.6 ms as a PIE, 1.7 ms without). The price is
//! that the executable's own image is not randomised (libraries, heap, stack and mmap still are).

use std::fs;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "sql") {
            out.push(path);
        }
    }
}

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=memq=-no-pie");
    }
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let sql = root.join("sql");
    println!("cargo:rerun-if-changed=sql");
    let mut files = Vec::new();
    collect(&sql, &mut files);
    files.sort();
    let mut code = String::from("/// Every analysis file under `sql/`: (path relative to `sql/`, text).\npub const SQL_FILES: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f
            .strip_prefix(&sql)
            .expect("file is under sql/")
            .to_string_lossy()
            .replace('\\', "/");
        code.push_str(&format!(
            "    ({rel:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    code.push_str("];\n");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("sql_library.rs");
    fs::write(out, code).expect("OUT_DIR is writable");
}
