//! Finds the input files behind the paths a user gives: single files of any supported kind, or
//! output folders walked recursively, each file offered to the formats of the catalog in turn
//! (see each format's `detect`).

use std::fs;
use std::path::{Path, PathBuf};

use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{read_head, Candidate, Catalog, Source};

/// Expands the user's inputs into sources, in a stable order, with unique names; each with the
/// index of the format (in `catalog`) that claimed it.
pub fn discover(inputs: &[PathBuf], catalog: &Catalog) -> Result<Vec<(usize, Source)>> {
    let mut sources: Vec<(usize, Source)> = Vec::new();
    let mut push = |format: usize, path: PathBuf, name: String, kind| {
        let index = sources.len();
        sources.push((
            format,
            Source {
                index,
                path,
                name,
                kind,
            },
        ));
    };
    for input in inputs {
        let meta = fs::metadata(input).map_err(|e| MemqError::io(input, e))?;
        if meta.is_dir() {
            let root_name = input
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| input.display().to_string());
            let mut files = Vec::new();
            walk(input, &mut files)?;
            files.sort();
            let mut primary = false;
            for path in files {
                let head = read_head(&path, 64).unwrap_or_default();
                let candidate = Candidate {
                    path: &path,
                    head: &head,
                    in_folder: true,
                };
                if let Some((format, kind)) = catalog.detect(&candidate) {
                    primary |= catalog.formats()[format].is_primary(kind);
                    let rel = path.strip_prefix(input).unwrap_or(&path);
                    let name = format!("{root_name}/{}", rel.display());
                    push(format, path, name, kind);
                }
            }
            if !primary {
                return Err(MemqError::input(
                    input,
                    Location::None,
                    "no msMemScope dumps (memscope_dump_*.csv|db) or snapshot pickles found in this folder",
                ));
            }
        } else {
            let head = read_head(input, 64).map_err(|e| MemqError::io(input, e))?;
            let candidate = Candidate {
                path: input,
                head: &head,
                in_folder: false,
            };
            let (format, kind) = catalog.detect(&candidate).ok_or_else(|| {
                MemqError::input(input, Location::None, "not a file memq can read")
            })?;
            let name = input
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| input.display().to_string());
            push(format, input.clone(), name, kind);
        }
    }
    // Unique names: a second `x.csv` becomes `x.csv#2`.
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for (_, s) in &mut sources {
        let n = seen.entry(s.name.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            s.name = format!("{}#{}", s.name, n);
        }
    }
    Ok(sources)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| MemqError::io(dir, e))? {
        let entry = entry.map_err(|e| MemqError::io(dir, e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| MemqError::io(&path, e))?;
        if ft.is_dir() {
            walk(&path, out)?;
        } else if ft.is_file() {
            out.push(path);
        }
    }
    Ok(())
}
