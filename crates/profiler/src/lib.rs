//! The Ascend PyTorch Profiler's memory outputs (`memory_record.csv`, `operator_memory.csv`,
//! `npu_module_mem.csv`, `static_op_mem.csv` in `*_ascend_pt/ASCEND_PROFILER_OUTPUT/`) as a memq
//! [`Format`]. Format notes: docs/formats/profiler.md.
//!
//! The route of one file: [`read`] names its layout by the header, finds the columns by name,
//! converts each cell exactly ([`number`]: µs → ns, MB/KB → bytes) and keeps unreadable rows
//! (digits lost to a spreadsheet among them) for `rejects` → the dataset writer of memq-core
//! sorts the batch into the table's order ([`schema`]).

pub mod number;
pub mod read;
pub mod schema;

use std::path::Path;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::{MemqError, Result};
use memq_core::format::{
    Candidate, Format, Progress, Source, SourceKind, SourceReport, SqlFile, WholeFile,
};

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "profiler",
    "prof_component_peaks",
    "prof_largest_allocations",
    "prof_live_at_peak",
    "prof_longest_held",
    "prof_module_peaks",
    "prof_source_capabilities",
);

/// The profiler's output folder, the parent of the memory CSVs.
const OUTPUT_FOLDER: &str = "ASCEND_PROFILER_OUTPUT";

/// A profiler `memory_record.csv` (or a file of its layout).
pub const MEMORY_RECORD: SourceKind = SourceKind("profiler_memory_record");
/// A profiler `operator_memory.csv` (or a file of its layout).
pub const OPERATOR_MEMORY: SourceKind = SourceKind("profiler_operator_memory");

/// Ascend PyTorch Profiler memory CSVs.
pub struct Profiler;

impl Profiler {
    /// The source kind of a layout. The profiler format has two kinds: the files sampling
    /// memory over time (memory_record, npu_module_mem) and those listing operator allocations
    /// (operator_memory, static_op_mem); `sources.generation` names the layout itself.
    fn kind(layout: &read::Layout) -> SourceKind {
        if [read::OPERATOR_MEMORY.name, read::STATIC_OP_MEM.name].contains(&layout.name) {
            OPERATOR_MEMORY
        } else {
            MEMORY_RECORD
        }
    }

    /// The file's kind by its header: one of the layouts, or a header that looks like one
    /// without being it (claimed so that ingest refuses it saying what it lacks).
    fn by_header(text: &str) -> Option<SourceKind> {
        let first = text.lines().next().unwrap_or("");
        match read::layout_of(first) {
            Some(layout) => Some(Self::kind(layout)),
            None => read::looks_like_profiler(first).then_some(MEMORY_RECORD),
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

    /// In a folder: `memory_record.csv`, `operator_memory.csv`, `npu_module_mem.csv` and
    /// `static_op_mem.csv` inside `*_ascend_pt/ASCEND_PROFILER_OUTPUT/`. Named directly: any
    /// CSV whose header is one of theirs (the first 64 bytes hold the signature columns). Either
    /// way ingest reads the file by its whole header.
    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        if file.in_folder {
            if !Self::in_output_folder(file.path) {
                return None;
            }
            let name = file.file_name();
            return read::LAYOUTS
                .iter()
                .find(|l| l.file == name)
                .map(|l| Self::kind(l));
        }
        // The head may end inside the header: the signature columns come first in every file.
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
            sources
                .iter()
                .map(|source| {
                    let input = std::fs::File::open(&source.path)
                        .map_err(|e| MemqError::io(&source.path, e))?;
                    let got = read::read(&source.path, &source.name, input)?;
                    let whole = WholeFile {
                        tables: vec![((got.layout.table)(), got.batch)],
                        rejects: got.rejects,
                        ts_unit: got.ts_unit,
                    };
                    let mut report = whole.write(out, source.index)?;
                    // The layout read, for `sources` and the report's inputs by kind.
                    report.generation = Some(got.layout.name.to_string());
                    progress(
                        std::fs::metadata(&source.path)
                            .map(|m| m.len())
                            .unwrap_or(0),
                    );
                    Ok(report)
                })
                .collect()
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
            Some(MEMORY_RECORD)
        );
        assert_eq!(
            named(
                "x/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/operator_memory.csv",
                b"",
                true
            ),
            Some(OPERATOR_MEMORY)
        );
        assert_eq!(named("x/elsewhere/memory_record.csv", head, true), None);
        assert_eq!(named("renamed.csv", head, false), Some(MEMORY_RECORD));
        assert_eq!(
            named("o.csv", b"Name,Size(KB),Allocation Time(us),Release", false),
            Some(OPERATOR_MEMORY)
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
        let got = read::read(Path::new("m.csv"), "m.csv", text.as_bytes()).unwrap();
        assert_eq!(got.layout.name, "memory_record");
        assert_eq!(got.ts_unit.as_deref(), Some("us"));
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
        let refusal = |text: &str| {
            read::read(Path::new("o.csv"), "o.csv", text.as_bytes())
                .err()
                .unwrap()
                .to_string()
        };
        let err = refusal("Name,Bytes\nx,1\n");
        assert!(err.contains("o.csv:1"), "{err}");
        assert!(
            err.contains("lacks Size, Allocation Time for operator_memory.csv"),
            "{err}"
        );
        assert!(err.contains("found: Name, Bytes"), "{err}");
        let err = refusal("Component,Timestamp(us),Used(MB)\nAPP,1,2\n");
        assert!(
            err.contains(
                "lacks Total Allocated for memory_record.csv, or lacks Total Reserved for npu_module_mem.csv"
            ),
            "{err}"
        );
        assert!(
            err.contains("memq reads memory_record.csv, npu_module_mem.csv"),
            "{err}"
        );
    }

    #[test]
    fn detects_the_other_layouts() {
        let p = Profiler;
        let named = |path: &str, head: &[u8], in_folder| {
            p.detect(&Candidate {
                path: Path::new(path),
                head,
                in_folder,
            })
        };
        let out = "x/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/";
        assert_eq!(
            named(&format!("{out}npu_module_mem.csv"), b"", true),
            Some(MEMORY_RECORD)
        );
        assert_eq!(
            named(&format!("{out}static_op_mem.csv"), b"", true),
            Some(OPERATOR_MEMORY)
        );
        assert_eq!(named(&format!("{out}kernel_details.csv"), b"", true), None);
        for head in [
            &b"Component,Timestamp(us),Total Reserved(MB),Device\r\nSLOG,1"[..],
            b"Device_id,Component,Timestamp(us),Total Reserved(MB),Device\n0",
        ] {
            let first = String::from_utf8_lossy(head);
            let first = first.lines().next().unwrap();
            assert_eq!(read::layout_of(first).unwrap().name, "npu_module_mem");
            assert_eq!(named("m.csv", head, false), Some(MEMORY_RECORD));
        }
        // 64 bytes of the static_op_mem header.
        let head =
            &b"Device_id,Op Name,Model Name,Graph ID,Node Index Start,Node Index End,Size(KB)"
                [..64];
        assert_eq!(
            read::layout_of(std::str::from_utf8(head).unwrap())
                .unwrap()
                .name,
            "static_op_mem"
        );
        assert_eq!(named("s.csv", head, false), Some(OPERATOR_MEMORY));
        // Profiler-like but no layout: claimed, to be refused by its header.
        assert_eq!(
            named("u.csv", b"Component,Timestamp(us),Used(MB)", false),
            Some(MEMORY_RECORD)
        );
        assert_eq!(named("k.csv", b"Name,Type,Duration(us)", false), None);
    }

    #[test]
    fn reads_module_mem_and_static_op_mem() {
        use datafusion::arrow::array::{Array, AsArray};
        use datafusion::arrow::datatypes::Int64Type;
        let text = "Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n\
                    4,HCCL,1764246877085694.700\t,1024.5,NPU:4\n\
                    4,SLOG,1764246877105694.300\t,-1,NPU:4\n\
                    4,APP,1.76425E+15,10,NPU:4\n";
        let mut got = read::read(Path::new("n.csv"), "n.csv", text.as_bytes()).unwrap();
        assert_eq!(got.layout.name, "npu_module_mem");
        assert_eq!(got.batch.num_rows(), 2);
        let reserved = got
            .batch
            .column_by_name("reserved")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        assert_eq!(reserved.value(0), 1_049_088);
        assert!(reserved.is_null(1), "-1 KB is the profiler's none");
        assert_eq!(
            got.batch
                .column_by_name("device_id")
                .unwrap()
                .as_string::<i32>()
                .value(0),
            "4"
        );
        let rejects = got.rejects.finish();
        let reason = rejects.column_by_name("reason").unwrap().as_string::<i32>();
        assert_eq!(
            reason.value(0),
            "Timestamp(us): a spreadsheet re-saved this cell in scientific notation (1.76425E+15): its digits are lost"
        );

        let text =
            "Device_id,Op Name,Model Name,Graph ID,Node Index Start,Node Index End,Size(KB)\n\
                    host,add_02,0,0,32,4294967295,2343.78125\n\
                    host,mul_01,0,0,26,29,0.211914063\n\
                    host,TOTAL,0,0,1.5,4294967295,17210.5\n";
        let got = read::read(Path::new("s.csv"), "s.csv", text.as_bytes()).unwrap();
        assert_eq!(got.layout.name, "static_op_mem");
        assert_eq!(got.ts_unit, None);
        let int = |n: &str| {
            got.batch
                .column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        assert_eq!(int("size").values().to_vec(), vec![2_400_032, 217]);
        assert!(int("node_end").is_null(0) && int("node_end").value(1) == 29);
        assert_eq!(got.rejects.len(), 1);
    }

    #[test]
    fn a_stream_in_scientific_notation_is_rejected() {
        let text = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n\
                    PTA,1695115378714622.800,4599.74072265625,8582,4599.74072265625,9.4509E+13,NPU:1\n";
        let mut got = read::read(Path::new("m.csv"), "m.csv", text.as_bytes()).unwrap();
        assert_eq!(got.batch.num_rows(), 0);
        let rejects = got.rejects.finish();
        use datafusion::arrow::array::AsArray;
        let reason = rejects.column_by_name("reason").unwrap().as_string::<i32>();
        assert!(
            reason.value(0).starts_with("Stream Ptr: a spreadsheet"),
            "{}",
            reason.value(0)
        );
    }
}
