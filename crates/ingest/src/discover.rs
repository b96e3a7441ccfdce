//! Finds the input files behind the paths a user gives: single files of any supported kind, or
//! output folders walked recursively, each file offered to the formats of the catalog in turn
//! (see each format's `detect`).

use std::collections::{HashMap, HashSet};
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
        if !meta.is_dir() && !meta.is_file() {
            // Never opened: a FIFO would block, a device read without end.
            return Err(not_regular(input, &meta.file_type()));
        }
        if meta.is_dir() {
            let root_name = input
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| input.display().to_string());
            let mut walker = Walker {
                catalog,
                files: Vec::new(),
                seen_dirs: HashSet::new(),
                seen_files: HashMap::new(),
            };
            walker.walk(input)?;
            let mut files = walker.files;
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
            let detected = catalog.detect(&candidate);
            // A format that recognised the content reads it; a claim by the reader that takes
            // any file is first checked for what memq does not read.
            if detected.is_none_or(|(f, _)| catalog.formats()[f].takes_any_file()) {
                if let Some(what) = not_read(input, &head)? {
                    return Err(MemqError::input(input, Location::None, what));
                }
            }
            let (format, kind) = detected.ok_or_else(|| {
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

/// What memq reads, for the messages about what it does not.
const READS: &str = "memq reads msMemScope dumps (CSV or SQLite) and output folders, PyTorch \
    memory snapshots (pickles, or JSON with segments/device_traces), Ascend profiler memory CSVs \
    and torch.profiler (Kineto) traces";

/// A file named directly that no format recognised by its content, said in words when it is
/// something memq does not read, so that it is never ingested as something else (a JSON taken
/// for an msMemScope config.json, a gzip file for a dump with a bad header). Traces, plain or
/// gzipped, and JSON snapshots were recognised by their formats before this is asked.
fn not_read(path: &Path, head: &[u8]) -> Result<Option<String>> {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Some(format!(
            "a gzip-compressed file: {READS}; of those only a trace may be gzipped (named \
             `.json.gz`); decompress it first (`gzip -dk`)"
        )));
    }
    let text = String::from_utf8_lossy(head);
    let body = text.trim_start_matches('\u{feff}').trim_start();
    let json_name = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if !(json_name || body.starts_with('{')) {
        return Ok(None);
    }
    // msMemScope's config.json names what was collected with these keys, near its start.
    let more = read_head(path, 64 << 10).map_err(|e| MemqError::io(path, e))?;
    let more = String::from_utf8_lossy(&more);
    let config_keys = [
        "\"analysisType\"",
        "\"eventType\"",
        "\"dumpEventType\"",
        "\"enablePyStack\"",
    ];
    if json_name && !config_keys.iter().any(|k| more.contains(k)) {
        return Ok(Some(format!(
            "a JSON file that is not a torch.profiler trace (no traceEvents) and not an \
             msMemScope config.json (it has none of the keys analysisType, eventType, \
             dumpEventType, enablePyStack), nor a PyTorch memory snapshot (no segments or \
             device_traces key); {READS}"
        )));
    }
    Ok(None)
}

/// What a non-regular file is, for messages.
fn type_name(ft: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn not_regular(path: &Path, ft: &fs::FileType) -> MemqError {
    MemqError::input(
        path,
        Location::None,
        format!(
            "is {}, not a regular file: memq reads dumps, dbs and pickles from regular files only \
             (copy the data to a file first)",
            type_name(ft)
        ),
    )
}

/// Walks an output folder. Symbolic links are followed, safely: a linked folder is walked once
/// (a link back to a folder already walked, e.g. `loop -> .`, is not followed again), a file
/// reached twice is read once, and a dangling link or a special file (FIFO, device) whose name
/// a format would claim is an error naming it; other dangling links and special files are
/// skipped with a note on stderr.
struct Walker<'a> {
    catalog: &'a Catalog,
    files: Vec<PathBuf>,
    /// (device, inode) of every folder walked.
    seen_dirs: HashSet<(u64, u64)>,
    /// (device, inode) of every file taken, with the path it was first taken by.
    seen_files: HashMap<(u64, u64), PathBuf>,
}

#[cfg(unix)]
fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &fs::Metadata) -> (u64, u64) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    (0, NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

impl Walker<'_> {
    /// Whether a format would claim a file of this name in a folder.
    fn claimed_by_name(&self, path: &Path) -> bool {
        let candidate = Candidate {
            path,
            head: &[],
            in_folder: true,
        };
        self.catalog.detect(&candidate).is_some()
    }

    fn walk(&mut self, dir: &Path) -> Result<()> {
        let meta = fs::metadata(dir).map_err(|e| MemqError::io(dir, e))?;
        if !self.seen_dirs.insert(file_id(&meta)) {
            return Ok(()); // a link to a folder already walked (a loop): walked once
        }
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| MemqError::io(dir, e))? {
            let entry = entry.map_err(|e| MemqError::io(dir, e))?;
            entries.push(entry.path());
        }
        entries.sort();
        for path in entries {
            let lmeta = fs::symlink_metadata(&path).map_err(|e| MemqError::io(&path, e))?;
            let meta = if lmeta.file_type().is_symlink() {
                match fs::metadata(&path) {
                    Ok(m) => m,
                    Err(e) => {
                        let to = fs::read_link(&path)
                            .map(|t| t.display().to_string())
                            .unwrap_or_else(|_| "?".into());
                        if self.claimed_by_name(&path) {
                            return Err(MemqError::input(
                                &path,
                                Location::None,
                                format!("dangling symbolic link (-> {to}): {e}"),
                            ));
                        }
                        eprintln!(
                            "memq: note: skipped {}: dangling symbolic link (-> {to})",
                            path.display()
                        );
                        continue;
                    }
                }
            } else {
                lmeta
            };
            if meta.is_dir() {
                self.walk(&path)?;
            } else if meta.is_file() {
                let id = file_id(&meta);
                if let Some(first) = self.seen_files.get(&id) {
                    if self.claimed_by_name(&path) {
                        eprintln!(
                            "memq: note: {} is the same file as {}; read once",
                            path.display(),
                            first.display()
                        );
                    }
                    continue;
                }
                self.seen_files.insert(id, path.clone());
                self.files.push(path);
            } else if self.claimed_by_name(&path) {
                return Err(not_regular(&path, &meta.file_type()));
            } else {
                eprintln!(
                    "memq: note: skipped {}: {}",
                    path.display(),
                    type_name(&meta.file_type())
                );
            }
        }
        Ok(())
    }
}
