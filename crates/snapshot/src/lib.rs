//! PyTorch memory-snapshot pickles (`torch.cuda.memory._dump_snapshot`, torch_npu's
//! equivalent) into the snap_* tables, as a memq [`Format`]. Format notes:
//! docs/formats/snapshot.md.
//!
//! The route of one pickle: memq-pickle decodes it (data only) → [`tables`] walks the
//! snapshot structure into rows, with stacks deduplicated by [`frames`] and structured cells
//! as JSON by [`json`] → [`batches`] builds one Arrow batch per table ([`schema`]) → the
//! dataset writer of memq-core writes the five files in parallel.

mod batches;
mod frames;
mod json;
pub mod schema;
mod tables;

use std::path::Path;

use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{
    ingest_whole_files, Candidate, Format, Progress, Source, SourceKind, SourceReport, SqlFile,
    WholeFile,
};
use memq_core::rejects::RejectsBuilder;

/// Reads one snapshot pickle into one batch per snap_* table, each with its definition (in the
/// order of [`schema::tables`]); `snapshot` is the source name written in every row.
pub fn read_snapshot(path: &Path, snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let data = std::fs::read(path).map_err(|e| MemqError::io(path, e))?;
    read_bytes(path, &data, snapshot)
}

/// [`read_snapshot`] on the bytes of `path`.
fn read_bytes(path: &Path, data: &[u8], snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let decoded = memq_pickle::decode(data)
        .map_err(|e| MemqError::input(path, Location::ByteOffset(e.offset), e.reason))?;
    let rows = tables::rows(path, &decoded, data.len())?;
    batches::batches(snapshot, &rows)
}

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "snapshot",
    "snap_allocations",
    "snap_block_states",
    "snap_compare",
    "snap_expansions",
    "snap_fragmentation",
    "snap_long_lived",
    "snap_oom",
    "snap_overview",
    "snap_peak",
    "snap_peak_blocks",
    "snap_segment_types",
    "snap_stack_attribution",
    "snap_stacks",
    "snap_timeline",
    "snap_top_blocks",
    "state_at",
);

/// PyTorch memory snapshot pickles.
pub struct Snapshot;

impl Format for Snapshot {
    fn name(&self) -> &'static str {
        "snapshot"
    }

    fn tables(&self) -> Vec<TableDef> {
        schema::tables()
    }

    /// A .pickle/.pkl/.pk extension; a file named directly also by a first byte 0x80 (the
    /// PROTO opcode every protocol 2+ pickle starts with).
    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        let by_extension = file.has_ext(&["pickle", "pkl", "pk"]);
        let by_content = !file.in_folder && file.head.first() == Some(&0x80);
        (by_extension || by_content).then_some(SourceKind::Snapshot)
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
                Ok(WholeFile {
                    tables: read_snapshot(&source.path, &source.name)?,
                    rejects: RejectsBuilder::new(&source.name),
                    ts_unit: None,
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

    /// Bytes of a valid snapshot overwritten, deleted or duplicated at random: each result is
    /// read or refused, never a panic.
    #[test]
    fn mutated_snapshots_never_panic() {
        let original =
            include_bytes!("../../../fixtures/snapshots/oom_expandable_two_devices.pickle");
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut below = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut accepted = 0;
        for _ in 0..2000 {
            let mut data = original.to_vec();
            for _ in 0..=below(3) {
                let at = below(data.len());
                match below(3) {
                    0 => data[at] = below(256) as u8,
                    1 => {
                        data.remove(at);
                    }
                    _ => data.insert(at, data[at]),
                }
            }
            if read_bytes(Path::new("mutated.pickle"), &data, "m").is_ok() {
                accepted += 1;
            }
        }
        // Some mutations only change a value; most break the structure.
        assert!(0 < accepted && accepted < 1000, "{accepted} accepted");
    }

    /// A value of a hand-made pickle (protocol 2, data opcodes only).
    enum Py {
        Int(i64),
        Str(&'static str),
        List(Vec<Py>),
        Tuple(Vec<Py>),
        Dict(Vec<(&'static str, Py)>),
    }

    impl Py {
        fn encode(&self, out: &mut Vec<u8>) {
            match self {
                Py::Int(i) => {
                    out.extend_from_slice(&[0x8a, 8]); // LONG1, 8 bytes
                    out.extend_from_slice(&i.to_le_bytes());
                }
                Py::Str(s) => {
                    out.push(b'X');
                    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
                Py::List(items) => {
                    out.extend_from_slice(b"]("); // EMPTY_LIST MARK … APPENDS
                    items.iter().for_each(|item| item.encode(out));
                    out.push(b'e');
                }
                Py::Tuple(items) => {
                    out.push(b'('); // MARK … TUPLE
                    items.iter().for_each(|item| item.encode(out));
                    out.push(b't');
                }
                Py::Dict(items) => {
                    out.extend_from_slice(b"}("); // EMPTY_DICT MARK … SETITEMS
                    for (key, value) in items {
                        Py::Str(key).encode(out);
                        value.encode(out);
                    }
                    out.push(b'u');
                }
            }
        }

        fn pickle(&self) -> Vec<u8> {
            let mut out = vec![0x80, 2];
            self.encode(&mut out);
            out.push(b'.');
            out
        }
    }

    fn column<'b>(
        tables: &'b [(TableDef, RecordBatch)],
        table: &str,
        name: &str,
    ) -> &'b dyn datafusion::arrow::array::Array {
        let (_, batch) = tables.iter().find(|(def, _)| def.name == table).unwrap();
        batch.column_by_name(name).unwrap().as_ref()
    }

    /// The newest snapshot fields: user_metadata carried from the alloc entry to its block (with
    /// the entry's seq), a free of an address the trace never allocated flagged as a wrapped ring
    /// buffer, skip_actions kept in the settings, pool_id and compile_context on the entry.
    #[test]
    fn newest_fields_are_kept() {
        use datafusion::arrow::array::{Array, AsArray};
        use datafusion::arrow::datatypes::Int64Type;
        use Py::*;
        let block = |address, state| {
            Dict(vec![
                ("address", Int(address)),
                ("size", Int(1024)),
                ("requested_size", Int(1000)),
                ("state", Str(state)),
            ])
        };
        let snapshot = Dict(vec![
            (
                "segments",
                List(vec![Dict(vec![
                    ("device", Int(0)),
                    ("address", Int(4096)),
                    ("total_size", Int(2048)),
                    ("segment_pool_id", Tuple(vec![Int(0), Int(1)])),
                    (
                        "blocks",
                        List(vec![
                            block(4096, "active_allocated"),
                            block(5120, "inactive"),
                        ]),
                    ),
                ])]),
            ),
            (
                "device_traces",
                List(vec![List(vec![
                    Dict(vec![
                        ("action", Str("free_completed")),
                        ("addr", Int(9999)),
                        ("size", Int(8)),
                    ]),
                    Dict(vec![
                        ("action", Str("alloc")),
                        ("addr", Int(4096)),
                        ("size", Int(1000)),
                        ("user_metadata", Str("layer1")),
                        ("pool_id", Tuple(vec![Int(0), Int(1)])),
                        ("compile_context", Str("forward")),
                    ]),
                ])]),
            ),
            (
                "allocator_settings",
                Dict(vec![("skip_actions", List(vec![Str("free_requested")]))]),
            ),
        ]);
        let tables = read_bytes(Path::new("new.pickle"), &snapshot.pickle(), "s").unwrap();
        let meta = column(&tables, "snap_blocks", "user_metadata").as_string::<i32>();
        assert_eq!(meta.value(0), "layer1");
        assert!(meta.is_null(1));
        let seq = column(&tables, "snap_blocks", "alloc_seq").as_primitive::<Int64Type>();
        assert_eq!(seq.value(0), 1);
        assert!(seq.is_null(1));
        let pool = column(&tables, "snap_segments", "pool_id_1").as_primitive::<Int64Type>();
        assert_eq!(pool.value(0), 1);
        let pool = column(&tables, "snap_traces", "pool_id_1").as_primitive::<Int64Type>();
        assert_eq!(pool.value(1), 1);
        let context = column(&tables, "snap_traces", "compile_context").as_string::<i32>();
        assert_eq!(context.value(1), "forward");
        let (sections, keys, values) = (
            column(&tables, "snap_info", "section").as_string::<i32>(),
            column(&tables, "snap_info", "key").as_string::<i32>(),
            column(&tables, "snap_info", "value").as_string::<i32>(),
        );
        let info: Vec<String> = (0..sections.len())
            .map(|i| {
                format!(
                    "{}|{}|{}",
                    sections.value(i),
                    keys.value(i),
                    values.value(i)
                )
            })
            .collect();
        assert!(
            info.contains(&"allocator_settings|skip_actions|[\"free_requested\"]".to_string()),
            "{info:?}"
        );
        assert!(info.contains(&"trace|wrapped|true".to_string()), "{info:?}");
        assert!(
            info.contains(&"trace|frees_of_unallocated_addresses|1".to_string()),
            "{info:?}"
        );
    }

    /// Finding 7 of issue 13: pickles that are not snapshots are refused, naming why.
    #[test]
    fn non_snapshots_are_refused() {
        use Py::*;
        for (value, why) in [
            (
                List(vec![Int(1), Int(2)]),
                "the top-level list holds no segment dict",
            ),
            (
                Dict(vec![("foo", Int(1))]),
                "neither segments nor device_traces",
            ),
            (
                Dict(vec![("segments", Str("x"))]),
                "segments is a str, not a list",
            ),
            (
                Dict(vec![("segments", List(vec![Int(1)]))]),
                "segments[0] is an int",
            ),
        ] {
            let err = read_bytes(Path::new("x.pickle"), &value.pickle(), "x")
                .err()
                .unwrap()
                .to_string();
            assert!(err.starts_with("x.pickle"), "{err}");
            assert!(err.contains("not a PyTorch memory snapshot"), "{err}");
            assert!(err.contains(why), "{err}");
        }
        // An empty snapshot is still a snapshot.
        let empty = Dict(vec![
            ("segments", List(vec![])),
            ("device_traces", List(vec![])),
        ]);
        assert!(read_bytes(Path::new("e.pickle"), &empty.pickle(), "e").is_ok());
    }

    #[test]
    fn sql_files_lists_every_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        memq_core::format::check_sql_dir(&dir, SQL_FILES).unwrap();
    }
}
