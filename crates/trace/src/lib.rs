//! torch.profiler (Kineto) Chrome traces (`*.pt.trace.json`, `.json.gz`) as a memq [`Format`]:
//! the `[memory]` instant events a `profile_memory=True` run records, as the `trace_memory`
//! table. Format notes: docs/formats/trace.md.
//!
//! The route of one file: gzip is undone as a stream ([`flate2`]) → [`read`] walks the JSON one
//! event at a time, keeping the memory events and the CPU op intervals, converts `ts` exactly
//! (µs text → ns) → the dataset writer of memq-core sorts the batch into the table's order
//! ([`schema`]).

pub mod read;
pub mod schema;

use std::io::{BufRead, BufReader};
use std::path::Path;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{
    read_head, Candidate, Format, Progress, ProgressRead, Source, SourceKind, SourceReport,
    SqlFile, WholeFile,
};

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "trace",
    "trace_memory_peaks",
    "trace_memory_by_op",
    "trace_memory_curve",
    "trace_findings",
    "trace_source_capabilities",
);

/// The kind a trace is given in `sources.kind` (`kineto_trace`).
pub const KIND: SourceKind = SourceKind("kineto_trace");

/// The top-level keys of a Kineto trace, one of which is in its first 64 KiB.
pub const TRACE_KEYS: [&str; 3] = [
    "\"traceEvents\"",
    "\"schemaVersion\"",
    "\"deviceProperties\"",
];

/// How much of a file detection looks at for the keys.
const SNIFF: usize = 64 << 10;

/// torch.profiler Chrome traces.
pub struct Trace;

/// Whether `head` starts with the gzip magic.
pub fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(&[0x1f, 0x8b])
}

fn lower_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Opens a trace, undoing gzip when the file starts with its magic.
pub fn open(path: &Path, progress: Option<Progress>) -> std::io::Result<Box<dyn BufRead>> {
    let head = read_head(path, 2)?;
    let file = std::fs::File::open(path)?;
    let file: Box<dyn std::io::Read> = match progress {
        Some(p) => Box::new(ProgressRead::new(file, p)),
        None => Box::new(file),
    };
    Ok(if is_gzip(&head) {
        Box::new(BufReader::with_capacity(
            256 << 10,
            flate2::read::MultiGzDecoder::new(BufReader::new(file)),
        ))
    } else {
        Box::new(BufReader::with_capacity(256 << 10, file))
    })
}

impl Format for Trace {
    fn name(&self) -> &'static str {
        "trace"
    }

    fn tables(&self) -> Vec<TableDef> {
        schema::tables()
    }

    /// In a folder: `*.pt.trace.json` and `*.pt.trace.json.gz` (torch.profiler's
    /// `tensorboard_trace_handler` names). Named directly: a `.json.gz` file that is gzip (its
    /// content is checked when read), or a JSON (by extension or a leading `{`/`[`) with a
    /// trace's top-level key in its first 64 KiB.
    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        let name = lower_name(file.path);
        if file.in_folder {
            return (name.ends_with(".pt.trace.json") || name.ends_with(".pt.trace.json.gz"))
                .then_some(KIND);
        }
        if is_gzip(file.head) {
            return name.ends_with(".json.gz").then_some(KIND);
        }
        let text = file.head_text();
        let body = text.trim_start();
        if !(file.has_ext(&["json"]) || body.starts_with('{') || body.starts_with('[')) {
            return None;
        }
        let more = read_head(file.path, SNIFF).ok()?;
        let more = String::from_utf8_lossy(&more);
        TRACE_KEYS.iter().any(|k| more.contains(k)).then_some(KIND)
    }

    fn is_primary(&self, _kind: SourceKind) -> bool {
        true
    }

    fn ingest<'a>(
        &'a self,
        sources: &'a [Source],
        out: &'a DatasetBuilder,
        progress: Progress,
    ) -> futures::future::BoxFuture<'a, Result<Vec<SourceReport>>> {
        Box::pin(async move {
            sources
                .iter()
                .map(|source| {
                    let whole = read_source(source, Some(progress.clone()))?;
                    whole.write(out, source.index)
                })
                .collect()
        })
    }

    fn sql_files(&self) -> &'static [SqlFile] {
        SQL_FILES
    }
}

/// Reads one trace into its `trace_memory` batch.
pub fn read_source(source: &Source, progress: Option<Progress>) -> Result<WholeFile> {
    let path = &source.path;
    let input = open(path, progress).map_err(|e| MemqError::io(path, e))?;
    let def = schema::trace_memory();
    let got = read::read(input, &source.name, &def).map_err(|e| match e {
        read::ReadError::Io(e) => MemqError::io(path, e),
        read::ReadError::Syntax { offset, line, what } => {
            let gz = read_head(path, 2).is_ok_and(|h| is_gzip(&h));
            let at = if gz {
                " (of the decompressed text)"
            } else {
                ""
            };
            MemqError::input(
                path,
                Location::Line(line),
                format!("{what}; at byte {offset}{at}"),
            )
        }
    })?;
    Ok(WholeFile {
        tables: vec![(def, got.batch)],
        rejects: got.rejects,
        ts_unit: Some("us".to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_files_lists_every_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        memq_core::format::check_sql_dir(&dir, SQL_FILES).unwrap();
    }

    #[test]
    fn detects_by_folder_name_and_by_content() {
        let t = Trace;
        let at = |path: &str, head: &[u8], in_folder| {
            t.detect(&Candidate {
                path: Path::new(path),
                head,
                in_folder,
            })
        };
        assert_eq!(at("r/host_1.1.pt.trace.json", b"", true), Some(KIND));
        assert_eq!(at("r/host_1.1.pt.trace.json.gz", b"", true), Some(KIND));
        assert_eq!(at("r/config.json", b"", true), None);
        assert_eq!(at("t.json.gz", &[0x1f, 0x8b, 8], false), Some(KIND));
        assert_eq!(at("t.tar.gz", &[0x1f, 0x8b, 8], false), None);
        let real = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/real/profiler/traces/gpu_working_chrome_trace.json");
        let head = read_head(&real, 64).unwrap();
        assert_eq!(at(real.to_str().unwrap(), &head, false), Some(KIND));
    }

    #[test]
    fn reads_the_real_trace_and_its_gzip_copy_alike() {
        use std::io::Read as _;
        let real = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/real/profiler/traces/gpu_working_chrome_trace.json");
        let dir = std::env::temp_dir().join(format!("memq-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("t.pt.trace.json.gz");
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::fast(),
        );
        std::io::copy(&mut std::fs::File::open(&real).unwrap(), &mut enc).unwrap();
        enc.finish().unwrap();
        let mut plain = String::new();
        open(&real, None)
            .unwrap()
            .read_to_string(&mut plain)
            .unwrap();
        let def = schema::trace_memory();
        let a = read::read(open(&real, None).unwrap(), "a", &def).unwrap();
        let b = read::read(open(&gz, None).unwrap(), "a", &def).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(a.batch.num_rows(), plain.matches("\"[memory]\"").count());
        assert_eq!(a.batch, b.batch);
        assert_eq!(a.events, 7129);
        assert!(a.rejects.is_empty());
    }
}
