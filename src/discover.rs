//! Finds the input files behind the paths a user gives: single files of any supported kind, or
//! msMemScope output folders walked recursively (`**/memscope_dump_*.csv|db`,
//! `python_trace_*.csv`, `memory_compare_*.csv`, `config.json`) and snapshot pickles.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Location, MemqError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    MemscopeCsv,
    MemscopeDb,
    PythonTrace,
    MemoryCompare,
    Config,
    Snapshot,
}

impl SourceKind {
    pub fn label(self) -> &'static str {
        match self {
            SourceKind::MemscopeCsv => "memscope_csv",
            SourceKind::MemscopeDb => "memscope_db",
            SourceKind::PythonTrace => "python_trace",
            SourceKind::MemoryCompare => "memory_compare",
            SourceKind::Config => "config",
            SourceKind::Snapshot => "snapshot",
        }
    }
}

/// One input file and the name its rows carry in the `source` column.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub name: String,
    pub kind: SourceKind,
}

/// Expands the user's inputs into sources, in a stable order, with unique names.
pub fn discover(inputs: &[PathBuf]) -> Result<Vec<Source>> {
    let mut sources: Vec<Source> = Vec::new();
    for input in inputs {
        let meta = fs::metadata(input).map_err(|e| MemqError::io(input, e))?;
        if meta.is_dir() {
            let before = sources.len();
            let root_name = input
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| input.display().to_string());
            let mut files = Vec::new();
            walk(input, &mut files)?;
            files.sort();
            for path in files {
                if let Some(kind) = kind_in_folder(&path) {
                    let rel = path.strip_prefix(input).unwrap_or(&path);
                    let name = format!("{root_name}/{}", rel.display());
                    sources.push(Source { path, name, kind });
                }
            }
            if !sources[before..].iter().any(|s| {
                matches!(
                    s.kind,
                    SourceKind::MemscopeCsv | SourceKind::MemscopeDb | SourceKind::Snapshot
                )
            }) {
                return Err(MemqError::input(
                    input,
                    Location::None,
                    "no msMemScope dumps (memscope_dump_*.csv|db) or snapshot pickles found in this folder",
                ));
            }
        } else {
            let kind = kind_of_file(input)?;
            let name = input
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| input.display().to_string());
            sources.push(Source {
                path: input.clone(),
                name,
                kind,
            });
        }
    }
    // Unique names: a second `x.csv` becomes `x.csv#2`.
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for s in &mut sources {
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

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn has_ext(path: &Path, exts: &[&str]) -> bool {
    path.extension()
        .map(|e| exts.iter().any(|x| e.eq_ignore_ascii_case(x)))
        .unwrap_or(false)
}

/// The kind of a file met while walking a folder, by its name only; other files are skipped.
fn kind_in_folder(path: &Path) -> Option<SourceKind> {
    let name = file_name(path);
    if name.starts_with("memscope_dump") || name.starts_with("leaks_dump") {
        if has_ext(path, &["csv"]) {
            return Some(SourceKind::MemscopeCsv);
        }
        if has_ext(path, &["db"]) {
            return Some(SourceKind::MemscopeDb);
        }
    }
    if name.starts_with("python_trace") && has_ext(path, &["csv"]) {
        return Some(SourceKind::PythonTrace);
    }
    if name.starts_with("memory_compare") && has_ext(path, &["csv"]) {
        return Some(SourceKind::MemoryCompare);
    }
    if name == "config.json" {
        return Some(SourceKind::Config);
    }
    if has_ext(path, &["pickle", "pkl", "pk"]) {
        return Some(SourceKind::Snapshot);
    }
    // Other CSV files count when their header is a dump's (renamed or copied dumps).
    if has_ext(path, &["csv"]) && sniff(path).is_some_and(|h| h.starts_with("ID,Event,")) {
        return Some(SourceKind::MemscopeCsv);
    }
    None
}

/// The first bytes of a file as text, BOM removed.
fn sniff(path: &Path) -> Option<String> {
    let mut head = [0u8; 64];
    let n = fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .ok()?;
    let text = String::from_utf8_lossy(&head[..n]).into_owned();
    Some(text.trim_start_matches('\u{feff}').to_string())
}

/// The kind of a file named directly: by extension, then by its first bytes.
fn kind_of_file(path: &Path) -> Result<SourceKind> {
    if crate::snapshot::is_pickle(path) {
        return Ok(SourceKind::Snapshot);
    }
    if has_ext(path, &["db", "sqlite", "sqlite3"]) {
        return Ok(SourceKind::MemscopeDb);
    }
    if has_ext(path, &["json"]) {
        return Ok(SourceKind::Config);
    }
    let mut head = [0u8; 64];
    let n = fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| MemqError::io(path, e))?;
    let head = &head[..n];
    if head.starts_with(b"SQLite format 3\0") {
        return Ok(SourceKind::MemscopeDb);
    }
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}');
    if text.starts_with("FuncInfo") {
        return Ok(SourceKind::PythonTrace);
    }
    if text.starts_with(",,,Base") {
        return Ok(SourceKind::MemoryCompare);
    }
    Ok(SourceKind::MemscopeCsv)
}
