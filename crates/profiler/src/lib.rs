//! The Ascend PyTorch Profiler's memory outputs (`memory_record.csv`, `operator_memory.csv` in
//! `*_ascend_pt/ASCEND_PROFILER_OUTPUT/`) as a memq [`Format`]. Format notes:
//! docs/formats/profiler.md.
//!
//! The route of one file: [`read`] finds the columns by name, converts each cell exactly
//! ([`number`]: µs → ns, MB/KB → bytes) and keeps unreadable rows for `rejects` → the dataset
//! writer of memq-core sorts the batch into the table's order ([`schema`]).

pub mod number;
pub mod read;
pub mod schema;

use std::path::Path;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::{MemqError, Result};
use memq_core::format::{
    ingest_whole_files, Candidate, Format, Progress, Source, SourceKind, SourceReport, SqlFile,
    WholeFile,
};

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "profiler",
    "prof_component_peaks",
    "prof_largest_allocations",
    "prof_live_at_peak",
    "prof_longest_held",
);

/// The profiler's output folder, the parent of the memory CSVs.
const OUTPUT_FOLDER: &str = "ASCEND_PROFILER_OUTPUT";

/// Ascend PyTorch Profiler memory CSVs.
pub struct Profiler;

impl Profiler {
    /// The file's kind by its header, when it is a profiler memory CSV.
    fn by_header(text: &str) -> Option<SourceKind> {
        let first = text.lines().next().unwrap_or("");
        if read::header_matches(first, read::MEMORY_RECORD) {
            Some(SourceKind::ProfilerMemoryRecord)
        } else if read::header_matches(first, read::OPERATOR_MEMORY) {
            Some(SourceKind::ProfilerOperatorMemory)
        } else {
            None
        }
    }

    /// Whether `path` sits in a profiler output folder: `…/*_ascend_pt/ASCEND_PROFILER_OUTPUT/`.
    fn in_output_folder(path: &Path) -> bool {
        let parent = path.parent();
        let named = |p: Option<&Path>, test: &dyn Fn(&str) -> bool| {
            p.and_then(Path::file_name)
                .is_some_and(|n| test(&n.to_string_lossy()))
        };
        if !named(parent, &|n| n == OUTPUT_FOLDER) {
            return false;
        }
        let run = parent.and_then(Path::parent);
        let run = match run.filter(|r| !r.as_os_str().is_empty()) {
            Some(r) => r.to_path_buf(),
            None => match parent.and_then(|p| p.canonicalize().ok()) {
                Some(p) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
                None => return false,
            },
        };
        named(Some(&run), &|n| n.ends_with("_ascend_pt"))
    }
}

impl Format for Profiler {
    fn name(&self) -> &'static str {
        "profiler"
    }

    fn tables(&self) -> Vec<TableDef> {
        schema::tables()
    }

    /// In a folder: `memory_record.csv` / `operator_memory.csv` inside
    /// `*_ascend_pt/ASCEND_PROFILER_OUTPUT/`. Named directly: any CSV whose header is one of
    /// theirs (the first 64 bytes hold the required column names).
    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        if file.in_folder {
            if !Self::in_output_folder(file.path) {
                return None;
            }
            return match file.file_name().as_str() {
                "memory_record.csv" => Some(SourceKind::ProfilerMemoryRecord),
                "operator_memory.csv" => Some(SourceKind::ProfilerOperatorMemory),
                _ => None,
            };
        }
        // The head may end inside the header: the required columns come first in both files.
        Self::by_header(&file.head_text())
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
            ingest_whole_files(sources, out, &progress, |source| {
                let (specs, def) = match source.kind {
                    SourceKind::ProfilerOperatorMemory => {
                        (read::OPERATOR_MEMORY, schema::operator_memory())
                    }
                    _ => (read::MEMORY_RECORD, schema::memory_record()),
                };
                let input = std::fs::File::open(&source.path)
                    .map_err(|e| MemqError::io(&source.path, e))?;
                let got = read::read(&source.path, &source.name, input, specs, &def)?;
                Ok(WholeFile {
                    tables: vec![(def, got.batch)],
                    rejects: got.rejects,
                    ts_unit: Some("us".to_string()),
                })
            })
        })
    }

    fn sql_files(&self) -> &'static [SqlFile] {
        SQL_FILES
    }
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
    fn detects_by_folder_and_by_header() {
        let p = Profiler;
        let head = b"Component,Timestamp(us),Total Allocated(MB),Total Re";
        let named = |path: &str, head: &[u8], in_folder| {
            p.detect(&Candidate {
                path: Path::new(path),
                head,
                in_folder,
            })
        };
        assert_eq!(
            named(
                "x/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv",
                b"",
                true
            ),
            Some(SourceKind::ProfilerMemoryRecord)
        );
        assert_eq!(
            named(
                "x/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/operator_memory.csv",
                b"",
                true
            ),
            Some(SourceKind::ProfilerOperatorMemory)
        );
        assert_eq!(named("x/elsewhere/memory_record.csv", head, true), None);
        assert_eq!(
            named("renamed.csv", head, false),
            Some(SourceKind::ProfilerMemoryRecord)
        );
        assert_eq!(
            named("o.csv", b"Name,Size(KB),Allocation Time(us),Release", false),
            Some(SourceKind::ProfilerOperatorMemory)
        );
        assert_eq!(named("dump.csv", b"ID,Event,Event Type,Name", false), None);
    }

    #[test]
    fn reads_cells_exactly_and_rejects_bad_rows() {
        let text = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\r\n\
                    APP,1736405443756384.100\t,,2109.6015625,,,NPU:0\r\n\
                    PTA,abc\t,1,2,3,1431569360,NPU:0\r\n\
                    GE,1736405443881360.630\t,73.0625,74.75,,,NPU:0\r\n\
                    short,row\r\n";
        let def = schema::memory_record();
        let got = read::read(
            Path::new("m.csv"),
            "m.csv",
            text.as_bytes(),
            read::MEMORY_RECORD,
            &def,
        )
        .unwrap();
        assert_eq!(got.batch.num_rows(), 2);
        assert_eq!(got.rejects.len(), 2);
        use datafusion::arrow::array::{Array, AsArray};
        use datafusion::arrow::datatypes::Int64Type;
        let col = |n: &str| {
            got.batch
                .column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        assert_eq!(col("ts").value(0), 1_736_405_443_756_384_100);
        assert_eq!(col("reserved").value(0), 2_212_077_568);
        assert!(col("allocated").is_null(0));
        assert_eq!(col("allocated").value(1), 76_611_584);
    }

    #[test]
    fn unknown_schema_lists_found_and_needed_columns() {
        let def = schema::operator_memory();
        let err = read::read(
            Path::new("o.csv"),
            "o.csv",
            &b"Name,Bytes\nx,1\n"[..],
            read::OPERATOR_MEMORY,
            &def,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("o.csv:1"), "{err}");
        assert!(err.contains("lacks Size, Allocation Time"), "{err}");
        assert!(err.contains("found: Name, Bytes"), "{err}");
    }
}
