//! PyTorch memory-snapshot pickles (`torch.cuda.memory._dump_snapshot`, torch_npu's
//! equivalent) into the snap_* tables, as a memq [`Format`]. Format notes:
//! docs/formats/snapshot.md.
//!
//! The route of one pickle: memq-pickle decodes it (data only), with the hook of [`traces`]
//! turning the trace entries into columns as they are decoded (the bulk of a snapshot never
//! exists as a tree) → [`tables`] walks the rest of the snapshot structure into rows, with
//! stacks deduplicated by [`frames`] and structured cells as JSON by [`json`] → [`batches`]
//! cuts each table into Arrow batches of bounded rows and bytes ([`schema`]) → they are written
//! as the table files, the trace table beside the others.

mod batches;
mod frames;
mod json;
pub mod schema;
mod tables;
mod traces;

use std::path::Path;

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::dataset::{table_properties, DatasetBuilder, ParallelSink, ParquetSink};
use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{Candidate, Format, Progress, Source, SourceKind, SourceReport, SqlFile};
use memq_pickle::value::Arena;

use crate::tables::Rows;
use crate::traces::TraceStream;

/// Reads one snapshot pickle into one batch per snap_* table, each with its definition (in the
/// order of [`schema::tables`]); `snapshot` is the source name written in every row.
pub fn read_snapshot(path: &Path, snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let data = std::fs::read(path).map_err(|e| MemqError::io(path, e))?;
    read_bytes(path, &data, snapshot)
}

/// [`read_snapshot`] on the bytes of `path`.
fn read_bytes(path: &Path, data: &[u8], snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    read_bytes_with_limit(path, data, snapshot, batches::BATCH_TEXT_BYTES)
}

/// [`read_bytes`] with batches cut at `limit` text bytes before they are put together.
fn read_bytes_with_limit(
    path: &Path,
    data: &[u8],
    snapshot: &str,
    limit: usize,
) -> Result<Vec<(TableDef, RecordBatch)>> {
    with_rows(path, data, |rows, arena| {
        whole_tables(snapshot, rows, arena, limit)
    })
}

/// Every snapshot table as one batch: its batches (cut at `limit` text bytes) put together.
fn whole_tables(
    snapshot: &str,
    rows: &Rows,
    arena: &Arena,
    limit: usize,
) -> Result<Vec<(TableDef, RecordBatch)>> {
    schema::tables()
        .into_iter()
        .map(|table| {
            let mut parts = Vec::new();
            batches::table_batches(snapshot, rows, arena, &table, limit, |b| {
                parts.push(b);
                Ok(())
            })?;
            let batch = concat_batches(&table.schema(), &parts)?;
            Ok((table, batch))
        })
        .collect()
}

/// Decodes the pickle and walks it into rows, then runs `f` on them. The trace entries are
/// streamed into columns while decoding ([`traces`]); when the file's structure defeats that
/// (a shared or misplaced trace list, a hostile file) it is decoded again the plain way, so the
/// result and every error are those of the plain decoder.
fn with_rows<T>(path: &Path, data: &[u8], f: impl FnOnce(&Rows, &Arena) -> Result<T>) -> Result<T> {
    let mut stream = TraceStream::new();
    if let Ok(decoded) = memq_pickle::decode_with(data, &mut stream) {
        if let Ok(rows) = tables::rows(path, &decoded, data.len(), Some(stream)) {
            return f(&rows, &decoded.arena);
        }
    }
    let decoded = memq_pickle::decode(data)
        .map_err(|e| MemqError::input(path, Location::ByteOffset(e.offset), e.reason))?;
    let rows = tables::rows(path, &decoded, data.len(), None)?;
    f(&rows, &decoded.arena)
}

/// A table file being written: by one thread, or a row group's columns on several.
enum Sink {
    Plain(ParquetSink),
    Parallel(ParallelSink),
}

/// Ingests one pickle: its tables written as the files of source `index`, batch by batch, the
/// trace table on a thread of its own. Returns the rows written.
fn write_snapshot(source: &Source, out: &DatasetBuilder) -> Result<u64> {
    let path = &source.path;
    let data = std::fs::read(path).map_err(|e| MemqError::io(path, e))?;
    with_rows(path, &data, |rows, arena| {
        // The trace table (the bulk) is encoded on every core, column by column.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let write = |table: &TableDef| -> Result<u64> {
            let mut sink: Option<(Sink, std::path::PathBuf)> = None;
            batches::table_batches(
                &source.name,
                rows,
                arena,
                table,
                batches::BATCH_TEXT_BYTES,
                |batch| {
                    if sink.is_none() {
                        let file = out.table_file(table.name, source.index)?;
                        let props = table_properties(table);
                        let (schema, parallel) = (table.schema(), table.name == schema::TRACES);
                        let writer = if parallel && threads > 1 {
                            Sink::Parallel(ParallelSink::create_with(
                                &file, schema, props, threads,
                            )?)
                        } else {
                            Sink::Plain(ParquetSink::create_with(&file, schema, props)?)
                        };
                        sink = Some((writer, file));
                    }
                    match sink.as_mut() {
                        Some((Sink::Plain(s), _)) => s.write(&batch),
                        Some((Sink::Parallel(s), _)) => s.write(&batch),
                        None => Ok(()),
                    }
                },
            )?;
            let Some((sink, file)) = sink else {
                return Ok(0);
            };
            let written = match sink {
                Sink::Plain(s) => s.close()?,
                Sink::Parallel(s) => s.close()?,
            };
            out.record(table.name, &file, written);
            Ok(written)
        };
        let tables = schema::tables();
        let (traces, others): (Vec<_>, Vec<_>) =
            tables.iter().partition(|t| t.name == schema::TRACES);
        std::thread::scope(|scope| {
            let thread = scope.spawn(|| traces.iter().map(|t| write(t)).sum::<Result<u64>>());
            let others: Result<u64> = others.iter().map(|t| write(t)).sum();
            let traces = thread
                .join()
                .unwrap_or_else(|_| Err(MemqError::Query("a writer thread panicked".into())));
            Ok(others? + traces?)
        })
    })
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
    "snap_peak_split",
    "snap_segment_types",
    "snap_stack_attribution",
    "snap_stacks",
    "snap_stage_memory",
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
            sources
                .iter()
                .map(|source| {
                    let rows = write_snapshot(source, out)?;
                    progress(std::fs::metadata(&source.path).map_or(0, |m| m.len()));
                    Ok(SourceReport {
                        rows,
                        ..SourceReport::default()
                    })
                })
                .collect()
        })
    }

    fn sql_files(&self) -> &'static [SqlFile] {
        SQL_FILES
    }
}

/// Pickles the robustness tests build (text columns past Arrow's 2 GiB offsets), shared by
/// this crate's tests and the integration tests.
#[doc(hidden)]
pub mod testdata {
    /// `{segments: [], device_traces: [[{action: alloc, frames: [{name, filename, line}…]}]]}`
    /// with `frames` frames whose names are one `name_len`-byte string, written once and then
    /// recalled from the memo: a small file with `frames × name_len` bytes of frame text.
    pub fn frames_sharing_one_name(frames: i32, name_len: usize) -> Vec<u8> {
        fn text(s: &[u8]) -> Vec<u8> {
            [&[b'X'][..], &(s.len() as u32).to_le_bytes(), s].concat()
        }
        let mut list = b"](".to_vec();
        for line in 0..frames {
            list.extend(b"}(");
            list.extend(text(b"name"));
            if line == 0 {
                list.extend(text(&vec![b'n'; name_len]));
                list.push(0x94); // MEMOIZE as memo 0
            } else {
                list.extend(b"h\x00"); // BINGET 0
            }
            list.extend(text(b"filename"));
            list.extend(text(b"f.py"));
            list.extend(text(b"line"));
            list.push(b'J');
            list.extend(line.to_le_bytes());
            list.extend(b"u");
        }
        list.extend(b"e");
        [
            b"\x80\x04}(".to_vec(),
            text(b"segments"),
            b"]".to_vec(),
            text(b"device_traces"),
            b"]](}(".to_vec(),
            text(b"action"),
            text(b"alloc"),
            text(b"frames"),
            list,
            b"uea".to_vec(),
            b"u.".to_vec(),
        ]
        .concat()
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

    /// Pickles that are not snapshots are refused, naming why.
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

    /// [`read_bytes`] without the streaming hook: the plain decoder's tree walked whole.
    fn read_plain(data: &[u8]) -> Result<Vec<(TableDef, RecordBatch)>> {
        let path = Path::new("plain.pickle");
        let decoded = memq_pickle::decode(data)
            .map_err(|e| MemqError::input(path, Location::ByteOffset(e.offset), e.reason))?;
        let rows = tables::rows(path, &decoded, data.len(), None)?;
        whole_tables("s", &rows, &decoded.arena, usize::MAX)
    }

    /// Streaming the trace gives the plain decoder's tables, value for value and in order, on
    /// every snapshot fixture and real snapshot at hand.
    #[test]
    fn streaming_gives_the_plain_tables() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in [
            root.join("fixtures/snapshots"),
            root.join("fixtures/real/snapshots/real"),
        ] {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path
                    .extension()
                    .is_some_and(|e| e == "pickle" || e == "pkl")
                {
                    files.push(path);
                }
            }
        }
        assert!(files.len() >= 5, "{files:?}");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let streamed = read_bytes(Path::new("plain.pickle"), &data, "s");
            let plain = read_plain(&data);
            match (streamed, plain) {
                (Ok(a), Ok(b)) => {
                    for ((def, a), (_, b)) in a.iter().zip(&b) {
                        assert_eq!(a, b, "{}: {}", file.display(), def.name);
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{}: {:?} vs {:?}", file.display(), a.err(), b.err()),
            }
        }
    }

    /// The real snapshots' traces are streamed (not read through the fallback): each device's
    /// entries become rows while decoding and are gone from the decoded tree.
    #[test]
    fn real_traces_are_streamed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/real/snapshots/real");
        for (file, rows) in [
            ("cuda_transformer_forward.pickle", 8227), // one device: APPEND
            ("torch_npu_two_devices.pkl", 17832),      // two devices: APPENDS
        ] {
            let data = std::fs::read(dir.join(file)).expect(file);
            let mut stream = TraceStream::new();
            let decoded = memq_pickle::decode_with(&data, &mut stream).unwrap();
            assert_eq!(stream.columns.len(), rows, "{file}");
            // The entry dicts of the usual shape (nearly all) are gone, their ids reused.
            let plain = memq_pickle::decode(&data).unwrap().arena.len();
            assert!(
                decoded.arena.len() + rows * 9 / 10 <= plain,
                "{file}: {} objects, {plain} plain",
                decoded.arena.len()
            );
            let path = Path::new(file);
            let walked = tables::rows(path, &decoded, data.len(), Some(stream));
            assert_eq!(walked.map(|r| r.traces.len()).ok(), Some(rows), "{file}");
        }
    }

    /// Trace lists shared through the memo, entries of unusual shape among usual ones, and a
    /// device list DUPed onto the stack: the results (rows or refusal) are the plain decoder's.
    #[test]
    fn streaming_falls_back_on_unusual_structure() {
        fn text(s: &str) -> Vec<u8> {
            [&[b'X'][..], &(s.len() as u32).to_le_bytes(), s.as_bytes()].concat()
        }
        let entry = |action: &str, addr: u8| {
            [
                b"}(".to_vec(),
                text("action"),
                text(action),
                text("addr"),
                vec![b'K', addr],
                text("size"),
                vec![b'K', 8],
                b"u".to_vec(),
            ]
            .concat()
        };
        let head = [
            b"\x80\x04}(".to_vec(),
            text("segments"),
            b"]".to_vec(),
            text("device_traces"),
        ]
        .concat();
        let odd = [
            b"}(".to_vec(),
            text("action"),
            text("alloc"),
            text("weird"),
            b"K\x01u".to_vec(),
        ]
        .concat();
        let cases: Vec<Vec<u8>> = vec![
            // [[e1, e2, odd, 5]]
            [
                head.clone(),
                b"]](".to_vec(),
                entry("alloc", 1),
                entry("free_completed", 1),
                odd.clone(),
                b"K\x05ea".to_vec(),
                b"u.".to_vec(),
            ]
            .concat(),
            // [d, d] with d memoized and read back: refused as a repeat.
            [
                head.clone(),
                b"](]\x94(".to_vec(),
                entry("alloc", 1),
                b"eh\x00e".to_vec(),
                b"u.".to_vec(),
            ]
            .concat(),
            // d = [e1]; the device list DUPed: [d, d].
            [
                head.clone(),
                b"](](".to_vec(),
                entry("alloc", 1),
                b"e2e".to_vec(),
                b"u.".to_vec(),
            ]
            .concat(),
            // An entry memoized and read back into a second device list.
            [
                head.clone(),
                b"](](".to_vec(),
                entry("alloc", 1),
                b"\x94e](h\x00ee".to_vec(),
                b"u.".to_vec(),
            ]
            .concat(),
            // Two device lists filled alternately through the memo.
            [
                head.clone(),
                b"](]\x94(".to_vec(),
                entry("alloc", 1),
                b"e]\x94(".to_vec(),
                entry("alloc", 2),
                b"eh\x00(".to_vec(),
                entry("alloc", 3),
                b"e0e".to_vec(),
                b"u.".to_vec(),
            ]
            .concat(),
            // device_traces twice: the last one counts.
            [
                head.clone(),
                b"]](".to_vec(),
                entry("alloc", 1),
                b"ea".to_vec(),
                text("device_traces"),
                b"]](".to_vec(),
                entry("alloc", 2),
                b"ea".to_vec(),
                b"u.".to_vec(),
            ]
            .concat(),
        ];
        for (i, data) in cases.iter().enumerate() {
            let streamed = read_bytes(Path::new("plain.pickle"), data, "s");
            let plain = read_plain(data);
            match (streamed, plain) {
                (Ok(a), Ok(b)) => {
                    for ((def, a), (_, b)) in a.iter().zip(&b) {
                        assert_eq!(a, b, "case {i}: {}", def.name);
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "case {i}"),
                (a, b) => panic!("case {i}: {:?} vs {:?}", a.err(), b.err()),
            }
        }
    }

    /// A 2.2 MB pickle whose 2 100 frames share one 1 MiB name (2.2 GB of
    /// text in snap_frames.name, beyond Arrow's 2 GiB offsets) is written in batches cut by
    /// bytes, never as one column.
    #[test]
    fn frames_sharing_one_long_string_are_cut_by_bytes() {
        let data = crate::testdata::frames_sharing_one_name(2100, 1 << 20);
        let path = Path::new("long.pickle");
        let limit = batches::BATCH_TEXT_BYTES;
        let counts = with_rows(path, &data, |rows, arena| {
            let mut counts = Vec::new();
            let table = schema::frames();
            batches::table_batches("s", rows, arena, &table, limit, |b| {
                let name = b.column_by_name("name").unwrap();
                counts.push((b.num_rows(), name.to_data().buffers()[1].len()));
                Ok(())
            })?;
            Ok(counts)
        })
        .unwrap();
        assert_eq!(counts.iter().map(|c| c.0).sum::<usize>(), 2100);
        assert!(counts.len() >= 17, "{counts:?}");
        assert!(counts.iter().all(|c| c.1 <= limit), "{counts:?}");
    }

    #[test]
    fn sql_files_lists_every_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        memq_core::format::check_sql_dir(&dir, SQL_FILES).unwrap();
    }
}
