//! PyTorch memory-snapshot pickles (`torch.cuda.memory._dump_snapshot`, torch_npu's
//! equivalent) into the snap_* tables, as a memq [`Format`]. Format notes:
//! docs/formats/snapshot.md.
//!
//! The route of one pickle: memq-pickle decodes it (data only) from the file through a bounded
//! buffer, with the hook of [`traces`] reading the segments and then turning each trace entry
//! into a row as it is decoded, the rows going to a [`trace_sink`] (held in [`trace_columns`],
//! the analyses' columns and tables derived by [`derive`](mod@derive)) and leaving in bounded
//! batches for the trace table's writer (the bulk of a snapshot never exists as a tree, nor as
//! rows) → [`tables`] walks the rest of the snapshot structure into rows ([`rows`], gathered in
//! [`table_rows`]), with stacks deduplicated by [`frames`] and structured cells as JSON by
//! [`json`] → [`batches`] cuts each table into Arrow batches of bounded rows and bytes
//! ([`schema`], [`columns`]) → they are written as the table files. Memory is bounded by what
//! the snapshot holds besides its trace (segments, distinct frames and stacks, the addresses
//! the trace allocated), not by the length of the trace.
//!
//! The modules form layers, each using only those below it: [`rows`], [`columns`], [`schema`]
//! and [`json`] (with [`frames`] above it) at the bottom; then [`derive`](mod@derive);
//! [`trace_columns`] and [`table_rows`]; [`batches`]; [`trace_sink`]; [`tables`]; [`traces`]
//! at the top.

mod batches;
mod columns;
mod derive;
mod frames;
mod from_json;
mod json;
mod rows;
pub mod schema;
mod table_rows;
mod tables;
mod trace_columns;
mod trace_sink;
mod traces;

use std::path::{Path, PathBuf};

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::dataset::{table_properties, DatasetBuilder, ParallelSink, ParquetSink};
use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{
    Candidate, Fact, Format, Progress, Source, SourceKind, SourceReport, SqlFile,
};
use memq_pickle::stream::STREAM_CONFLICT;
use memq_pickle::{DecodeError, Decoded};

use crate::table_rows::Rows;
use crate::tables::Builder;
use crate::trace_sink::TraceSink;
use crate::traces::TraceStream;

/// Reads one snapshot pickle into one batch per snap_* table, each with its definition (in the
/// order of [`schema::tables`]); `snapshot` is the source name written in every row.
pub fn read_snapshot(path: &Path, snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    read_whole(path, Data::File(path), snapshot, LIMITS)
}

/// Where the bytes of a pickle are.
#[derive(Clone, Copy)]
enum Data<'d> {
    File(&'d Path),
    /// Held in memory (tests).
    #[cfg_attr(not(test), allow(dead_code))]
    Bytes(&'d [u8]),
}

/// Most rows and text bytes of one batch.
type Limits = (usize, usize);
const LIMITS: Limits = (columns::BATCH_ROWS, columns::BATCH_TEXT_BYTES);

/// Where the trace table's batches go.
trait TraceOut {
    fn batch(&mut self, batch: RecordBatch) -> Result<()>;
    /// Forgets every batch: the pickle is read again.
    fn reset(&mut self) -> Result<()>;
}

impl TraceOut for Vec<RecordBatch> {
    fn batch(&mut self, batch: RecordBatch) -> Result<()> {
        self.push(batch);
        Ok(())
    }

    fn reset(&mut self) -> Result<()> {
        self.clear();
        Ok(())
    }
}

/// Every snapshot table as one batch: its batches (cut at `limits`) put together.
fn read_whole(
    path: &Path,
    data: Data,
    snapshot: &str,
    limits: Limits,
) -> Result<Vec<(TableDef, RecordBatch)>> {
    let (mut trace_batches, mut lifetime_batches) = (Vec::new(), Vec::new());
    let outs: Outs = (&mut trace_batches, &mut lifetime_batches);
    let rows = read_rows(path, data, snapshot, limits, outs)?;
    schema::tables()
        .into_iter()
        .map(|table| {
            let mut parts = Vec::new();
            if table.name == schema::TRACES {
                parts = std::mem::take(&mut trace_batches);
            } else if table.name == schema::LIFETIMES {
                parts = std::mem::take(&mut lifetime_batches);
            } else {
                batches::table_batches(snapshot, &rows, &table, limits.1, |b| {
                    parts.push(b);
                    Ok(())
                })?;
            }
            let batch = concat_batches(&table.schema(), &parts)?;
            Ok((table, batch))
        })
        .collect()
}

/// Where the batches of the streamed tables go: snap_traces, snap_lifetimes.
type Outs<'o> = (&'o mut dyn TraceOut, &'o mut dyn TraceOut);

/// Reads a snapshot: its trace rows go to `out` (and the allocations derived from them to
/// `lifetimes`, crate::derive) as batches of at most `limits` while the pickle
/// is decoded, the rows of the other tables are returned. The trace is streamed ([`traces`]);
/// when the file's structure defeats that (the segments after the trace, a shared or misplaced
/// trace list, `forward_frames`, a hostile file) it is decoded again the plain way, its rows
/// held until the walk ends, so the result and every error are those of the plain decoder.
/// A decoding error of the streaming pass that is no streaming conflict is the plain
/// decoder's own (the hook changes what is stored, never what is accepted): it is reported
/// without decoding again.
fn read_rows(
    path: &Path,
    data: Data,
    snapshot: &str,
    limits: Limits,
    (out, lifetimes): Outs,
) -> Result<Rows> {
    let file_bytes = size_of(path, data)?;
    if is_json(path, data)? {
        return read_json(path, data, snapshot, limits, (out, lifetimes), file_bytes);
    }
    {
        let mut sink = TraceSink::new(snapshot, false, limits, Box::new(|b| out.batch(b)));
        sink.derive.lifetimes_to(Box::new(|b| lifetimes.batch(b)));
        let mut builder = Builder::new(path, file_bytes, sink);
        let mut stream = TraceStream::new(&mut builder);
        let decoded = decode(path, data, Some(&mut stream))?;
        let taken = stream.into_taken();
        let walked = match decoded {
            Ok(decoded) => tables::walk(&decoded, file_bytes, &mut builder, Some(&taken)),
            Err(e) if !e.reason.contains(STREAM_CONFLICT) => {
                return Err(input_error(path, e));
            }
            Err(e) => Err(input_error(path, e)),
        };
        builder.traces.take_failure()?;
        if walked.is_ok() {
            return Ok(builder.into_rows());
        }
    }
    out.reset()?;
    lifetimes.reset()?;
    let decoded = decode(path, data, None)?.map_err(|e| input_error(path, e))?;
    walk_held(
        path,
        &decoded,
        snapshot,
        limits,
        (out, lifetimes),
        file_bytes,
        false,
    )
}

/// The decoded snapshot walked with its trace rows held until the walk ends (a pickle's plain
/// fallback, a JSON snapshot): the rows of every other table are returned.
fn walk_held(
    path: &Path,
    decoded: &Decoded<'_>,
    snapshot: &str,
    limits: Limits,
    (out, lifetimes): Outs,
    file_bytes: usize,
    json_input: bool,
) -> Result<Rows> {
    let mut sink = TraceSink::new(snapshot, true, limits, Box::new(|b| out.batch(b)));
    sink.derive.lifetimes_to(Box::new(|b| lifetimes.batch(b)));
    let mut builder = Builder::new(path, file_bytes, sink);
    builder.json_input = json_input;
    let walked = tables::walk(decoded, file_bytes, &mut builder, None);
    builder.traces.take_failure()?;
    walked?;
    Ok(builder.into_rows())
}

/// Whether the snapshot is JSON rather than a pickle (by its first bytes).
fn is_json(path: &Path, data: Data) -> Result<bool> {
    Ok(match data {
        Data::Bytes(bytes) => from_json::opens_json(&bytes[..bytes.len().min(64)]),
        Data::File(file) => {
            let head =
                memq_core::format::read_head(file, 64).map_err(|e| MemqError::io(path, e))?;
            from_json::opens_json(&head)
        }
    })
}

/// A JSON snapshot: parsed into a tree, walked with the trace rows held (as the plain
/// decoder's fallback does for a pickle).
fn read_json(
    path: &Path,
    data: Data,
    snapshot: &str,
    limits: Limits,
    (out, lifetimes): Outs,
    file_bytes: usize,
) -> Result<Rows> {
    let decoded = match data {
        Data::Bytes(bytes) => from_json::decode(path, bytes)?,
        Data::File(file) => {
            let opened = std::fs::File::open(file).map_err(|e| MemqError::io(path, e))?;
            from_json::decode(path, opened)?
        }
    };
    walk_held(
        path,
        &decoded,
        snapshot,
        limits,
        (out, lifetimes),
        file_bytes,
        true,
    )
}

fn size_of(path: &Path, data: Data) -> Result<usize> {
    match data {
        Data::Bytes(bytes) => Ok(bytes.len()),
        Data::File(file) => {
            let len = std::fs::metadata(file)
                .map_err(|e| MemqError::io(path, e))?
                .len();
            usize::try_from(len).map_err(|_| {
                MemqError::input(
                    path,
                    Location::None,
                    "the file is too large for this machine",
                )
            })
        }
    }
}

/// Decodes the pickle, with the streaming hook or without (the outer error: the file cannot be
/// opened).
fn decode<'d>(
    path: &Path,
    data: Data<'d>,
    hook: Option<&mut TraceStream<'_, '_>>,
) -> Result<std::result::Result<Decoded<'d>, DecodeError>> {
    Ok(match (data, hook) {
        (Data::Bytes(bytes), Some(hook)) => memq_pickle::decode_with(bytes, hook),
        (Data::Bytes(bytes), None) => memq_pickle::decode(bytes),
        (Data::File(file), hook) => {
            let opened = std::fs::File::open(file).and_then(|f| Ok((f.metadata()?.len(), f)));
            let (len, file) = opened.map_err(|e| MemqError::io(path, e))?;
            let hook = hook.map(|h| h as &mut dyn memq_pickle::stream::Hook<'static>);
            memq_pickle::decode_read(file, len, hook)
        }
    })
}

fn input_error(path: &Path, e: DecodeError) -> MemqError {
    MemqError::input(path, Location::ByteOffset(e.offset), e.reason)
}

/// A table file being written: by one thread, or a row group's columns on several.
enum Sink {
    Plain(ParquetSink),
    Parallel(ParallelSink),
}

impl Sink {
    fn create(file: &Path, table: &TableDef, threads: usize) -> Result<Sink> {
        let props = table_properties(table);
        let schema = table.schema();
        let big = table.name == schema::TRACES || table.name == schema::LIFETIMES;
        Ok(if big && threads > 1 {
            Sink::Parallel(ParallelSink::create_with(file, schema, props, threads)?)
        } else {
            Sink::Plain(ParquetSink::create_with(file, schema, props)?)
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            Sink::Plain(s) => s.write(batch),
            Sink::Parallel(s) => s.write(batch),
        }
    }

    fn close(self) -> Result<u64> {
        match self {
            Sink::Plain(s) => s.close(),
            Sink::Parallel(s) => s.close(),
        }
    }
}

/// The trace table's file, written on a thread of its own (each row group's columns encoded on
/// every core) while the pickle is decoded; the file is created with the first batch.
struct TraceWriter<'o> {
    out: &'o DatasetBuilder,
    table: TableDef,
    index: usize,
    threads: usize,
    running: Option<Running>,
}

struct Running {
    tx: std::sync::mpsc::SyncSender<RecordBatch>,
    thread: std::thread::JoinHandle<Result<u64>>,
    file: PathBuf,
}

impl<'o> TraceWriter<'o> {
    fn new(out: &'o DatasetBuilder, index: usize) -> Self {
        Self::of(out, index, schema::traces())
    }

    /// The same for another table whose rows stream (snap_lifetimes).
    fn of(out: &'o DatasetBuilder, index: usize, table: TableDef) -> Self {
        TraceWriter {
            out,
            table,
            index,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            running: None,
        }
    }

    fn stop(running: Running) -> Result<u64> {
        drop(running.tx);
        running
            .thread
            .join()
            .unwrap_or_else(|_| Err(MemqError::Query("a writer thread panicked".into())))
    }

    /// Waits for the file to be written; returns its rows.
    fn finish(mut self) -> Result<u64> {
        let Some(running) = self.running.take() else {
            return Ok(0);
        };
        let file = running.file.clone();
        let rows = Self::stop(running)?;
        self.out.record(self.table.name, &file, rows);
        Ok(rows)
    }
}

impl TraceOut for TraceWriter<'_> {
    fn batch(&mut self, batch: RecordBatch) -> Result<()> {
        if self.running.is_none() {
            let file = self.out.table_file(self.table.name, self.index)?;
            let mut sink = Sink::create(&file, &self.table, self.threads)?;
            // Two batches in flight: one being encoded, one waiting, one being filled.
            let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
            let thread = std::thread::spawn(move || {
                for batch in rx {
                    sink.write(&batch)?;
                }
                sink.close()
            });
            self.running = Some(Running { tx, thread, file });
        }
        let Some(running) = self.running.as_ref() else {
            return Ok(());
        };
        if running.tx.send(batch).is_ok() {
            return Ok(());
        }
        // The writer stopped early: its error.
        match self.running.take().map(Self::stop) {
            Some(Err(e)) => Err(e),
            _ => Err(MemqError::Query("the trace writer stopped".into())),
        }
    }

    fn reset(&mut self) -> Result<()> {
        if let Some(running) = self.running.take() {
            let file = running.file.clone();
            let _ = Self::stop(running);
            std::fs::remove_file(&file).map_err(|e| MemqError::io(&file, e))?;
        }
        Ok(())
    }
}

impl Drop for TraceWriter<'_> {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            let _ = Self::stop(running);
        }
    }
}

/// Ingests one pickle: its trace table written while the pickle is decoded, then the others,
/// each batch by batch. Returns the rows written.
fn write_snapshot(source: &Source, out: &DatasetBuilder) -> Result<u64> {
    let path = &source.path;
    let mut traces = TraceWriter::new(out, source.index);
    let mut lifetimes = TraceWriter::of(out, source.index, schema::lifetimes());
    let outs: Outs = (&mut traces, &mut lifetimes);
    let rows = read_rows(path, Data::File(path), &source.name, LIMITS, outs)?;
    let mut written = traces.finish()?;
    // The derived tables' rows are not the source's: they are not counted in its rows.
    lifetimes.finish()?;
    for table in schema::tables() {
        if table.name == schema::TRACES || table.name == schema::LIFETIMES {
            continue;
        }
        let derived = table.name == schema::LEVELS || table.name == schema::OOM_ALLOCS;
        let mut sink: Option<(Sink, PathBuf)> = None;
        batches::table_batches(
            &source.name,
            &rows,
            &table,
            columns::BATCH_TEXT_BYTES,
            |batch| {
                if sink.is_none() {
                    let file = out.table_file(table.name, source.index)?;
                    sink = Some((Sink::create(&file, &table, 1)?, file));
                }
                match sink.as_mut() {
                    Some((s, _)) => s.write(&batch),
                    None => Ok(()),
                }
            },
        )?;
        if let Some((sink, file)) = sink {
            let rows = sink.close()?;
            out.record(table.name, &file, rows);
            if !derived {
                written += rows;
            }
        }
    }
    Ok(written)
}

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "snapshot",
    "snap_allocations",
    "snap_annotations",
    "snap_block_states",
    "snap_compare",
    "snap_expansions",
    "snap_findings",
    "snap_frag_findings",
    "snap_fragmentation",
    "snap_host_memory",
    "snap_host_timeline",
    "snap_long_lived",
    "snap_oom",
    "snap_oom_findings",
    "snap_overview",
    "snap_peak",
    "snap_peak_blocks",
    "snap_peak_split",
    "snap_segment_types",
    "snap_source_capabilities",
    "snap_stack_attribution",
    "snap_stacks",
    "snap_stage_memory",
    "snap_timeline",
    "snap_timeline_points",
    "snap_timeline_tiles",
    "snap_top_blocks",
    "state_at",
);

/// A PyTorch memory snapshot (pickle or JSON).
pub const SNAPSHOT: SourceKind = SourceKind("snapshot");

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
    /// PROTO opcode every protocol 2+ pickle starts with), or as a JSON snapshot (an object
    /// with a `segments` or `device_traces` key: see [`from_json::is_snapshot`]).
    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        let by_extension = file.has_ext(&["pickle", "pkl", "pk"]);
        let by_content = !file.in_folder
            && (file.head.first() == Some(&0x80) || from_json::is_snapshot(file.path, file.head));
        (by_extension || by_content).then_some(SNAPSHOT)
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

    fn facts(&self) -> Vec<Fact> {
        vec![
            Fact {
                name: "range",
                item: "snapshot trace entries",
                sql: "SELECT min(time_us) * 1000, max(time_us) * 1000 FROM snap_traces",
            },
            Fact {
                name: "snapshots",
                item: "snapshot",
                sql: "SELECT DISTINCT snapshot FROM snap_info ORDER BY snapshot",
            },
            // Every device with segments or trace entries, with its snapshot (the key a
            // `per snapshot` check narrows by).
            Fact {
                name: "devices",
                item: "device",
                sql: "SELECT DISTINCT device, snapshot FROM (SELECT device, snapshot \
                      FROM snap_segments UNION ALL SELECT device, snapshot FROM snap_traces) AS d \
                      WHERE device IS NOT NULL ORDER BY device",
            },
        ]
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

    /// A protocol 4 pickle written the way Python's pickler writes one (MEMOIZE after every
    /// string, list, dict and tuple; a repeated object recalled from the memo).
    struct Pickler {
        out: Vec<u8>,
        memo: u32,
        strings: std::collections::HashMap<String, u32>,
    }

    impl Pickler {
        fn memoize(&mut self) -> u32 {
            self.out.push(0x94);
            self.memo += 1;
            self.memo - 1
        }

        fn get(&mut self, index: u32) {
            match u8::try_from(index) {
                Ok(small) => self.out.extend([b'h', small]),
                Err(_) => {
                    self.out.push(b'j');
                    self.out.extend(index.to_le_bytes());
                }
            }
        }

        fn str(&mut self, s: &str) {
            if let Some(&index) = self.strings.get(s) {
                return self.get(index);
            }
            self.out.extend([0x8c, s.len() as u8]);
            self.out.extend(s.as_bytes());
            let index = self.memoize();
            self.strings.insert(s.to_string(), index);
        }

        fn int(&mut self, value: i64) {
            match (u8::try_from(value), i32::try_from(value)) {
                (Ok(byte), _) => self.out.extend([b'K', byte]),
                (_, Ok(int)) => {
                    self.out.push(b'J');
                    self.out.extend(int.to_le_bytes());
                }
                _ => {
                    self.out.extend([0x8a, 8]);
                    self.out.extend(value.to_le_bytes());
                }
            }
        }

        /// `key: value` pairs of a dict being written.
        fn dict(&mut self, items: impl FnOnce(&mut Pickler)) {
            self.out.push(b'}');
            self.memoize();
            self.out.push(b'(');
            items(self);
            self.out.push(b'u');
        }
    }

    /// A snapshot with one segment (a live block that an alloc of the trace made, a free one)
    /// and one device trace of `entries` entries: alloc, free_requested, free_completed of a
    /// new address each time, the G4 keys (compile_context), each alloc with a frame list of its
    /// own and each free pair sharing one (as PyTorch writes them), frames drawn from 40 frame
    /// dicts written once; entry 7 has an unknown key. Entries are appended 1 000 at a time.
    /// From group (alloc + free pair) `own_lists` on, the frame lists are those of an earlier
    /// group, recalled from the memo, as in the repeated trace of benches/big_pickle.py.
    pub fn long_trace(entries: usize, own_lists: usize) -> Vec<u8> {
        let base = 1i64 << 40;
        let live = base + 5 * 4096;
        let mut p = Pickler {
            out: vec![0x80, 4],
            memo: 0,
            strings: Default::default(),
        };
        let mut frames: Vec<Option<u32>> = vec![None; 40];
        let mut frame = |p: &mut Pickler, k: usize| match frames[k] {
            Some(index) => p.get(index),
            None => {
                let index = p.memo;
                p.dict(|p| {
                    p.str("name");
                    p.str(&format!("fn_{k}"));
                    p.str("filename");
                    p.str(if k.is_multiple_of(2) {
                        "model.py"
                    } else {
                        "??"
                    });
                    p.str("line");
                    p.int(k as i64);
                });
                frames[k] = Some(index);
            }
        };
        p.dict(|p| {
            p.str("segments");
            p.out.push(b']');
            p.memoize();
            p.dict(|p| {
                for (key, value) in [("device", 0), ("address", live), ("total_size", 8192)] {
                    p.str(key);
                    p.int(value);
                }
                p.str("segment_type");
                p.str("large");
                p.str("blocks");
                p.out.push(b']');
                p.memoize();
                p.out.push(b'(');
                for (address, state) in [(live, "active_allocated"), (live + 4096, "inactive")] {
                    p.dict(|p| {
                        p.str("address");
                        p.int(address);
                        p.str("size");
                        p.int(4096);
                        p.str("requested_size");
                        p.int(4000);
                        p.str("state");
                        p.str(state);
                    });
                }
                p.out.push(b'e');
            });
            p.out.push(b'a');
            p.str("device_traces");
            p.out.push(b']');
            p.memoize();
            p.out.push(b']');
            p.memoize();
            let mut shared = 0;
            // Per group with lists of its own: the memo indexes of its two lists.
            let mut lists: Vec<(u32, u32)> = Vec::new();
            for batch in (0..entries).collect::<Vec<_>>().chunks(1000) {
                p.out.push(b'(');
                for &i in batch {
                    let (group, kind) = (i / 3, i % 3);
                    // Group 5's block stays allocated: its frees go to another address.
                    let freed = if group == 5 {
                        base - 4096
                    } else {
                        base + group as i64 * 4096
                    };
                    let (action, addr) = match kind {
                        0 => ("alloc", base + group as i64 * 4096),
                        1 => ("free_requested", freed),
                        _ => ("free_completed", freed),
                    };
                    p.dict(|p| {
                        p.str("action");
                        p.str(action);
                        p.str("addr");
                        p.int(addr);
                        p.str("size");
                        p.int(4000);
                        p.str("stream");
                        p.int(0);
                        p.str("time_us");
                        p.int(1_700_000_000_000_000 + i as i64);
                        p.str("compile_context");
                        p.str("N/A");
                        if i == 7 {
                            p.str("weird");
                            p.int(1);
                        }
                        p.str("frames");
                        if group >= own_lists {
                            let (alloc, free) = lists[group % own_lists];
                            p.get(if kind == 0 { alloc } else { free });
                        } else if kind == 2 {
                            p.get(shared);
                        } else {
                            p.out.push(b']');
                            let list = p.memoize();
                            if kind == 0 {
                                lists.push((list, list));
                            } else {
                                shared = list;
                                if let Some(last) = lists.last_mut() {
                                    last.1 = list;
                                }
                            }
                            p.out.push(b'(');
                            for depth in 0..3 {
                                frame(p, (group * 7 + kind * 3 + depth * 11) % 40);
                            }
                            p.out.push(b'e');
                        }
                    });
                }
                p.out.push(b'e');
            }
            p.out.push(b'a');
            p.str("allocator_settings");
            p.dict(|p| {
                p.str("expandable_segments");
                p.out.push(0x89);
            });
        });
        p.out.push(b'.');
        p.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`read_snapshot`] on bytes held in memory.
    fn read_bytes(
        path: &Path,
        data: &[u8],
        snapshot: &str,
    ) -> Result<Vec<(TableDef, RecordBatch)>> {
        read_whole(path, Data::Bytes(data), snapshot, LIMITS)
    }

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

    /// Pinned host memory: a flat host_traces list is the host's (device -1), a list of lists
    /// is read per position; host rows never reach the device tables; host_segments of the
    /// wrong type is a warning, not a refusal.
    #[test]
    fn host_traces_flat_or_per_device() {
        use datafusion::arrow::array::{Array, AsArray};
        use datafusion::arrow::datatypes::Int64Type;
        use Py::*;
        let entry = || {
            Dict(vec![
                ("action", Str("alloc")),
                ("addr", Int(4096)),
                ("size", Int(100)),
                ("user_metadata", Str("pin")),
            ])
        };
        let host_segment = || {
            let block = Dict(vec![
                ("address", Int(4096)),
                ("size", Int(512)),
                ("requested_size", Int(100)),
                ("state", Str("active_allocated")),
            ]);
            Dict(vec![
                ("device", Int(-1)),
                ("address", Int(4096)),
                ("total_size", Int(512)),
                ("blocks", List(vec![block])),
            ])
        };
        for (traces, device) in [
            (List(vec![entry()]), -1),
            (List(vec![List(vec![]), List(vec![entry()])]), 1),
        ] {
            let snapshot = Dict(vec![
                ("segments", List(vec![])),
                ("device_traces", List(vec![List(vec![entry()])])),
                ("host_segments", List(vec![host_segment()])),
                ("host_traces", traces),
            ]);
            let tables = read_bytes(Path::new("h.pickle"), &snapshot.pickle(), "h").unwrap();
            let rows = |t: &str| column(&tables, t, "snapshot").len();
            assert_eq!(rows("snap_traces"), 1);
            assert_eq!(rows("snap_host_traces"), 1);
            assert_eq!(
                (rows("snap_host_segments"), rows("snap_host_blocks")),
                (1, 1)
            );
            assert_eq!(rows("snap_segments") + rows("snap_blocks"), 0);
            let d = column(&tables, "snap_host_traces", "device").as_primitive::<Int64Type>();
            assert_eq!(d.value(0), device);
            // The flat trace's alloc made the live host block: its label and seq.
            let label = column(&tables, "snap_host_blocks", "user_metadata").as_string::<i32>();
            let seq = column(&tables, "snap_host_blocks", "alloc_seq").as_primitive::<Int64Type>();
            if device == -1 {
                assert_eq!((label.value(0), seq.value(0)), ("pin", 0));
            }
        }
        let odd = Dict(vec![
            ("segments", List(vec![])),
            ("device_traces", List(vec![])),
            ("host_segments", Str("x")),
        ]);
        let tables = read_bytes(Path::new("o.pickle"), &odd.pickle(), "o").unwrap();
        let keys = column(&tables, "snap_info", "key").as_string::<i32>();
        let values = column(&tables, "snap_info", "value").as_string::<i32>();
        let warned = (0..keys.len())
            .any(|i| keys.value(i) == "host_segments" && values.value(i).contains("not a list"));
        assert!(warned);
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
        let (mut trace_batches, mut lifetime_batches) = (Vec::new(), Vec::new());
        let mut sink = TraceSink::new("s", true, LIMITS, Box::new(|b| trace_batches.batch(b)));
        sink.derive
            .lifetimes_to(Box::new(|b| lifetime_batches.batch(b)));
        let mut builder = Builder::new(path, data.len(), sink);
        tables::walk(&decoded, data.len(), &mut builder, None)?;
        let rows = builder.into_rows();
        schema::tables()
            .into_iter()
            .map(|table| {
                let mut parts = Vec::new();
                if table.name == schema::TRACES {
                    parts = std::mem::take(&mut trace_batches);
                } else if table.name == schema::LIFETIMES {
                    parts = std::mem::take(&mut lifetime_batches);
                } else {
                    batches::table_batches("s", &rows, &table, usize::MAX, |b| {
                        parts.push(b);
                        Ok(())
                    })?;
                }
                Ok((table.clone(), concat_batches(&table.schema(), &parts)?))
            })
            .collect()
    }

    /// Both tables (or both errors) are the same.
    fn assert_same(
        what: &str,
        a: Result<Vec<(TableDef, RecordBatch)>>,
        b: Result<Vec<(TableDef, RecordBatch)>>,
    ) {
        match (a, b) {
            (Ok(a), Ok(b)) => {
                for ((def, a), (_, b)) in a.iter().zip(&b) {
                    assert_eq!(a, b, "{what}: {}", def.name);
                }
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}"),
            (a, b) => panic!("{what}: {:?} vs {:?}", a.err(), b.err()),
        }
    }

    /// Streaming the trace gives the plain decoder's tables, value for value and in order, on
    /// every snapshot fixture and real snapshot at hand.
    #[test]
    fn streaming_gives_the_plain_tables() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in [
            root.join("fixtures/snapshots"),
            root.join("fixtures/snapshots-newest"),
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
            let what = file.display().to_string();
            let streamed = read_bytes(Path::new("plain.pickle"), &data, "s");
            assert_same(&what, streamed, read_plain(&data));
            // Read from the file through the decoder's buffer: the same again.
            let from_file = read_whole(Path::new("plain.pickle"), Data::File(&file), "s", LIMITS);
            assert_same(&what, from_file, read_plain(&data));
        }
    }

    /// Streams `data` with batches of at most `rows_limit` rows: the decoded tree's stats, the
    /// rows of each batch, and the sink's most rows held.
    fn stream(data: &[u8], rows_limit: usize) -> (memq_pickle::Stats, Vec<usize>, usize, u64) {
        let path = Path::new("stream.pickle");
        let mut sizes = Vec::new();
        let limits = (rows_limit, columns::BATCH_TEXT_BYTES);
        let sink = TraceSink::new(
            "s",
            false,
            limits,
            Box::new(|b: RecordBatch| {
                sizes.push(b.num_rows());
                Ok(())
            }),
        );
        let mut builder = Builder::new(path, data.len(), sink);
        let mut stream = TraceStream::new(&mut builder);
        let decoded = memq_pickle::decode_with(data, &mut stream);
        let gave_up = stream.gave_up.clone();
        let taken = stream.into_taken();
        let decoded = decoded.unwrap_or_else(|e| panic!("{e:?} ({gave_up:?})"));
        assert_eq!(gave_up, None);
        let rows = taken.streamed.iter().map(|s| s.rows).sum::<u64>();
        tables::walk(&decoded, data.len(), &mut builder, Some(&taken)).unwrap();
        let peak = builder.traces.peak_rows;
        drop(builder);
        (decoded.stats, sizes, peak, rows)
    }

    /// The real snapshots' traces are streamed (not read through the fallback): each device's
    /// entries become rows while decoding and are gone from the decoded tree, with their frame
    /// lists.
    #[test]
    fn real_traces_are_streamed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/real/snapshots/real");
        for (file, rows) in [
            ("cuda_transformer_forward.pickle", 8227), // one device: APPEND
            ("torch_npu_two_devices.pkl", 17832),      // two devices: APPENDS
            ("cuda_three_gpus_expandable_oom.pickle", 7923), // compile_context, an oom
        ] {
            let data = std::fs::read(dir.join(file)).expect(file);
            let (stats, _, _, streamed) = stream(&data, columns::BATCH_ROWS);
            assert_eq!(streamed, rows as u64, "{file}");
            // The entry dicts (and their frame lists) are gone, their ids reused.
            let plain = memq_pickle::decode(&data).unwrap().arena.len();
            assert!(stats.released >= rows, "{file}: {stats:?}");
            assert!(
                stats.objects + rows <= plain,
                "{file}: {} objects, {plain} plain",
                stats.objects
            );
        }
    }

    /// Pickles without a PROTO header (protocols 0 and 1, built without MARKs in protocol 0)
    /// are streamed like protocol 4: every device trace entry becomes a row while decoding,
    /// and the host trace is read after.
    #[test]
    fn header_less_protocols_are_streamed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots-newest");
        for file in ["newest_p0.pickle", "newest_p1.pickle", "newest_p4.pickle"] {
            let data = std::fs::read(dir.join(file)).expect(file);
            let (stats, _, _, streamed) = stream(&data, columns::BATCH_ROWS);
            assert_eq!(streamed, 14, "{file}");
            assert!(stats.released >= 14, "{file}: {stats:?}");
        }
    }

    /// A long trace is read in bounded memory: the decoder holds an APPENDS batch of objects
    /// and the memo the slots still readable (frames, strings, the lists later entries share:
    /// here those of the first 2 000 groups, as in benches/big_pickle.py) whatever the number
    /// of entries (without streaming: 5 objects and 5 memo slots per 3 entries), the sink at
    /// most a batch of rows; and the tables are those of the plain decoder.
    #[test]
    fn long_traces_stream_in_bounded_memory() {
        let entries = 150_000;
        let data = crate::testdata::long_trace(entries, 2_000);
        let (stats, sizes, peak, rows) = stream(&data, 4096);
        assert_eq!(rows, entries as u64);
        // At most one APPENDS batch (the pickler's 1 000 entries, with their frame lists) and
        // the frames at once.
        assert!(stats.objects < 5_000, "{stats:?}");
        assert!(stats.memo_slots < 20_000, "{stats:?}");
        assert!(stats.released >= entries, "{stats:?}");
        assert_eq!(sizes.iter().sum::<usize>(), entries);
        assert!(sizes.iter().all(|&n| n <= 4096), "{sizes:?}");
        assert_eq!(sizes.len(), entries.div_ceil(4096));
        assert!(peak <= 4096, "{peak}");
        // Without streaming the decoded tree holds every entry.
        let plain = memq_pickle::decode(&data).unwrap();
        assert!(plain.stats.objects > entries, "{:?}", plain.stats);
        assert!(plain.stats.memo_slots > entries, "{:?}", plain.stats);
        drop(plain);
        let limits = (4096, LIMITS.1);
        let streamed = read_whole(Path::new("plain.pickle"), Data::Bytes(&data), "s", limits);
        let streamed = streamed.unwrap();
        assert_same("long trace", Ok(streamed.clone()), read_plain(&data));
        // The live block got the alloc entry that made it (group 5: seq 15).
        use datafusion::arrow::array::{Array, AsArray};
        let seq = column(&streamed, "snap_blocks", "alloc_seq");
        let seq = seq.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        assert_eq!((seq.value(0), seq.is_null(1)), (15, true));
    }

    /// Every entry with frame lists of its own (a real trace): the lists are dropped once
    /// interned (the memo keeps a tag for each, which the free that shares it reads back), the
    /// tables are the plain decoder's.
    #[test]
    fn distinct_frame_lists_are_dropped_once_interned() {
        let entries = 30_000;
        let data = crate::testdata::long_trace(entries, usize::MAX);
        let (stats, _, _, rows) = stream(&data, 4096);
        assert_eq!(rows, entries as u64);
        assert!(stats.objects < 5_000, "{stats:?}");
        // Every entry dict and every frame list (2 per 3 entries).
        assert!(stats.released >= entries * 5 / 3, "{stats:?}");
        let streamed = read_whole(
            Path::new("plain.pickle"),
            Data::Bytes(&data),
            "s",
            (4096, LIMITS.1),
        );
        assert_same("distinct lists", streamed, read_plain(&data));
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
            assert_same(&format!("case {i}"), streamed, read_plain(data));
        }
    }

    /// A 2.2 MB pickle whose 2 100 frames share one 1 MiB name (2.2 GB of
    /// text in snap_frames.name, beyond Arrow's 2 GiB offsets) is written in batches cut by
    /// bytes, never as one column.
    #[test]
    fn frames_sharing_one_long_string_are_cut_by_bytes() {
        let data = crate::testdata::frames_sharing_one_name(2100, 1 << 20);
        let path = Path::new("long.pickle");
        let limit = columns::BATCH_TEXT_BYTES;
        let outs: Outs = (&mut Vec::new(), &mut Vec::new());
        let rows = read_rows(path, Data::Bytes(&data), "s", LIMITS, outs).unwrap();
        let mut counts = Vec::new();
        let table = schema::frames();
        batches::table_batches("s", &rows, &table, limit, |b| {
            let name = b.column_by_name("name").unwrap();
            counts.push((b.num_rows(), name.to_data().buffers()[1].len()));
            Ok(())
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
