//! The ingest cache of `memq [INPUT...]`: raw dumps, folders and pickles are ingested
//! once into `$XDG_CACHE_HOME/memq/datasets/<name>-<key>.memq`, where the key is a hash of the
//! inputs' absolute paths. The cached dataset is reused while every source it was built from is
//! unchanged (same files, same size, same mtime), and rebuilt otherwise. Also home of the XDG
//! directory lookup the REPL uses for its history.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use memq_core::dataset::{self, Manifest};
use memq_core::error::{MemqError, Result};
use memq_core::format::{Catalog, Source};

use crate::discover::discover;
use crate::{ingest_sources, IngestOptions, IngestReport};

/// An XDG base directory: `$VAR` when it is set to an absolute path, else `$HOME/<fallback>`.
fn xdg(var: &str, fallback: &str) -> PathBuf {
    if let Some(v) = std::env::var_os(var) {
        let p = PathBuf::from(v);
        if p.is_absolute() {
            return p;
        }
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(fallback)
}

/// `$XDG_CACHE_HOME/memq` (default `~/.cache/memq`).
pub fn cache_dir() -> PathBuf {
    xdg("XDG_CACHE_HOME", ".cache").join("memq")
}

/// `$XDG_STATE_HOME/memq` (default `~/.local/state/memq`).
pub fn state_dir() -> PathBuf {
    xdg("XDG_STATE_HOME", ".local/state").join("memq")
}

fn absolute(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// The cache folder for `inputs` below `root`: `<first input's stem>-<16 hex digits>.memq`.
pub fn dataset_path(root: &Path, inputs: &[PathBuf]) -> PathBuf {
    let mut key = String::new();
    for p in inputs {
        key.push_str(&absolute(p).display().to_string());
        key.push('\0');
    }
    let stem: String = inputs
        .first()
        .and_then(|p| {
            absolute(p)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "input".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    root.join("datasets").join(format!(
        "{stem}-{:016x}.memq",
        memq_core::fnv1a(key.as_bytes())
    ))
}

/// (absolute path, size, mtime in ns) of one source file.
type Fingerprint = (String, u64, i128);

fn current_fingerprints(sources: &[(usize, Source)]) -> Result<Vec<Fingerprint>> {
    let mut out = Vec::new();
    for (_, s) in sources {
        let meta = std::fs::metadata(&s.path).map_err(|e| MemqError::io(&s.path, e))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        out.push((absolute(&s.path).display().to_string(), meta.len(), mtime));
    }
    Ok(out)
}

fn manifest_fingerprints(m: &Manifest) -> Vec<Fingerprint> {
    m.sources
        .iter()
        .map(|s| (s.path.clone(), s.size_bytes, s.mtime_unix_ns))
        .collect()
}

/// Why a cached dataset was (not) used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheState {
    /// The cached dataset matched every source and was reused.
    Reused,
    /// There was no cached dataset (or an unreadable one): ingested.
    Created,
    /// A source changed (or appeared, or went away): ingested again.
    Refreshed,
}

/// A dataset in the cache, ready to open.
pub struct Cached {
    pub dataset: PathBuf,
    pub state: CacheState,
    /// The ingest report when an ingest ran.
    pub report: Option<IngestReport>,
}

/// True when the dataset at `path` was built by this memq from exactly `sources`, unchanged.
fn is_fresh(path: &Path, sources: &[(usize, Source)]) -> Result<bool> {
    if !dataset::is_dataset(path) {
        return Ok(false);
    }
    let Ok(manifest) = Manifest::read(path) else {
        return Ok(false);
    };
    if manifest.schema_version != dataset::SCHEMA_VERSION
        || manifest.memq_version != env!("CARGO_PKG_VERSION")
    {
        return Ok(false);
    }
    Ok(manifest_fingerprints(&manifest) == current_fingerprints(sources)?)
}

/// Returns the cached dataset for `inputs` below `root`, ingesting (again) when needed.
pub async fn cached_dataset(
    root: &Path,
    inputs: &[PathBuf],
    progress: bool,
    catalog: &Catalog,
) -> Result<Cached> {
    let path = dataset_path(root, inputs);
    let existed = path.exists();
    let sources = discover(inputs, catalog)?;
    if is_fresh(&path, &sources)? {
        return Ok(Cached {
            dataset: path,
            state: CacheState::Reused,
            report: None,
        });
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| MemqError::io(parent, e))?;
    }
    // One ingest per cache entry at a time (shells opening the same raw input at once): the
    // others wait here and then find the dataset fresh.
    let _lock = dataset::TargetLock::acquire(&path, "ingest")?;
    if is_fresh(&path, &sources)? {
        return Ok(Cached {
            dataset: path,
            state: CacheState::Reused,
            report: None,
        });
    }
    let opts = IngestOptions {
        output: path.clone(),
        force: true,
        append: false,
        strict: false,
        progress,
    };
    let report = ingest_sources(&sources, &opts, catalog).await?;
    Ok(Cached {
        dataset: path,
        state: if existed {
            CacheState::Refreshed
        } else {
            CacheState::Created
        },
        report: Some(report),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_the_paths_only() {
        let root = Path::new("/c");
        let a = dataset_path(root, &[PathBuf::from("/x/run_1.csv")]);
        let b = dataset_path(root, &[PathBuf::from("/x/run_2.csv")]);
        assert_ne!(a, b);
        assert_eq!(a, dataset_path(root, &[PathBuf::from("/x/run_1.csv")]));
        assert!(a
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("run_1-"));
        assert!(a.starts_with("/c/datasets"));
    }
}
