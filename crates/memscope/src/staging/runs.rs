//! Sorted runs of `events` and their merge into canonical order (docs/formats/memscope.md §2.8:
//! dumps are not sorted, so every dump is sorted at ingest).
//!
//! The readers cut a dump into runs of at most [`super::BATCH_ROWS`] rows; each run is sorted
//! on the thread that parsed it (by `ts`, NULLs last, then `row_idx`) and written to that
//! thread's staging file ([`RunWriter`]). A k-way merge of the runs then streams the events in
//! canonical order into the table file, encoded on every core, and to the derive pass. Memory
//! stays bounded by a batch per run, whatever the size of the dump.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray, UInt64Array};
use datafusion::arrow::compute::{interleave_record_batch, take_record_batch};
use datafusion::arrow::datatypes::{Int64Type, SchemaRef, UInt64Type};
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;
use memq_core::dataset::{self, ParallelSink};
use memq_core::error::{Location, MemqError, Result};

/// Column positions in `events`: the sort key, the source, and the text columns whose bytes
/// count toward an output batch's limit.
struct Positions {
    ts: usize,
    row_idx: usize,
    source: usize,
    text: [usize; 4],
}

fn positions() -> &'static Positions {
    static P: std::sync::OnceLock<Positions> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let def = crate::schema::events();
        let at = |n: &str| def.index_of(n).expect("an events column");
        Positions {
            ts: at("ts"),
            row_idx: at("row_idx"),
            source: at("source"),
            text: [at("name"), at("attr"), at("stack_py"), at("stack_c")],
        }
    })
}

/// Rows of one output row group of the merge.
const MERGE_ROWS: usize = 128 * 1024;
/// Text bytes of one output row group (as dataset.rs's row groups).
const ROW_GROUP_BYTES: usize = 128 << 20;
/// Rows read from a run at a time during the merge.
const READ_ROWS: usize = 2048;

/// The sort key of a row: `ts` ascending with NULLs last, then the global `row_idx`.
pub type Key = (bool, i64, u64);

fn key(ts: &Int64Array, row_idx: &UInt64Array, base: u64, i: usize) -> Key {
    if ts.is_null(i) {
        (true, 0, base + row_idx.value(i))
    } else {
        (false, ts.value(i), base + row_idx.value(i))
    }
}

fn key_columns(batch: &RecordBatch) -> (&Int64Array, &UInt64Array) {
    (
        batch.column(positions().ts).as_primitive::<Int64Type>(),
        batch
            .column(positions().row_idx)
            .as_primitive::<UInt64Type>(),
    )
}

/// A parse thread's own staging file of sorted runs (so no thread waits for another to write),
/// created at its first run. Each run is an Arrow IPC stream of batches of [`READ_ROWS`] rows:
/// the buffers as they are, so writing and reading a run is a copy (as Parquet, encoding and
/// decoding the runs was 13 % of an ingest).
pub struct RunWriter {
    file: usize,
    path: PathBuf,
    out: Option<BufWriter<File>>,
    written: u64,
}

/// The staging file `file` of the runs at `runs_path`.
fn run_file(runs_path: &Path, file: usize) -> PathBuf {
    let mut p = runs_path.as_os_str().to_owned();
    p.push(format!(".{file}"));
    PathBuf::from(p)
}

impl RunWriter {
    /// The writer of staging file number `file` (one per thread).
    pub fn new(runs_path: &Path, file: usize) -> RunWriter {
        RunWriter {
            file,
            path: run_file(runs_path, file),
            out: None,
            written: 0,
        }
    }

    /// Sorts one run (its `row_idx` are local: the order within the run is file order) and
    /// writes it, a batch at a time: no sorted copy of the whole run is made.
    pub fn write(&mut self, batch: RecordBatch) -> Result<EncodedRun> {
        let (ts, row_idx) = key_columns(&batch);
        let n = batch.num_rows();
        let at_key = |i: usize| key(ts, row_idx, 0, i);
        let was_sorted = (1..n).all(|i| at_key(i - 1) <= at_key(i));
        let order: Option<Vec<u32>> = (!was_sorted).then(|| {
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_by_key(|&i| at_key(i as usize));
            order
        });
        let nth = |i: usize| order.as_ref().map_or(i, |o| o[i] as usize);
        let (first, last) = match n {
            0 => ((false, 0, 0), (false, 0, 0)),
            _ => (at_key(nth(0)), at_key(nth(n - 1))),
        };
        let path = &self.path;
        let io = |e: std::io::Error| MemqError::io(path, e);
        if self.out.is_none() {
            self.out = Some(BufWriter::with_capacity(
                1 << 20,
                dataset::create_file(path)?,
            ));
        }
        let out = self.out.as_mut().expect("opened above");
        let mut counted = Counted { out, bytes: 0 };
        // A failed write (a full disk) names the staging file.
        let at = |e: datafusion::arrow::error::ArrowError| {
            MemqError::input(path, Location::None, e.to_string())
        };
        let mut w = StreamWriter::try_new(&mut counted, &batch.schema()).map_err(at)?;
        for start in (0..n).step_by(READ_ROWS) {
            let len = READ_ROWS.min(n - start);
            let rows = match &order {
                None => batch.slice(start, len),
                Some(o) => take_record_batch(
                    &batch,
                    &datafusion::arrow::array::UInt32Array::from(o[start..start + len].to_vec()),
                )?,
            };
            w.write(&rows).map_err(at)?;
        }
        w.finish().map_err(at)?;
        drop(w);
        let len = counted.bytes;
        // Flushed with every run, so that a failed write is this run's error.
        counted.out.flush().map_err(io)?;
        let offset = self.written;
        self.written += len;
        Ok(EncodedRun {
            file: self.file,
            offset,
            len,
            rows: n,
            was_sorted,
            first,
            last,
        })
    }
}

/// A writer that counts the bytes written through it.
struct Counted<'a, W: Write> {
    out: &'a mut W,
    bytes: u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// One run written to its staging file.
pub struct EncodedRun {
    /// Its staging file, and its bytes there.
    file: usize,
    offset: u64,
    len: u64,
    rows: usize,
    /// Whether the run needed no sorting (its rows were in canonical order as read).
    was_sorted: bool,
    /// First and last key of the run (local `row_idx`).
    first: Key,
    last: Key,
}

/// Where a run lives: its bytes in its staging file, and the `row_idx` of its first record in
/// the whole file.
struct RunMeta {
    file: usize,
    offset: u64,
    len: u64,
    base: u64,
    first: Key,
    last: Key,
}

/// The runs of a dump, in file order, and their merge.
pub struct RunStore {
    /// The staging files are `path.0`, `path.1`, ... ([`RunWriter`]).
    path: PathBuf,
    /// The `source` of every row: the runs' own `source` is left empty.
    source: String,
    runs: Vec<RunMeta>,
    /// Every run was sorted as read and each started at or after the end of the one before.
    in_order: bool,
}

impl RunStore {
    pub fn new(path: &Path, source: &str) -> RunStore {
        RunStore {
            path: path.to_path_buf(),
            source: source.to_string(),
            runs: Vec::new(),
            in_order: true,
        }
    }

    /// Appends a run whose first record is record `base` of the file.
    pub fn append(&mut self, run: EncodedRun, base: u64) -> Result<()> {
        if run.rows == 0 {
            return Ok(());
        }
        let shift = |k: Key| (k.0, k.1, k.2 + base);
        let meta = RunMeta {
            file: run.file,
            offset: run.offset,
            len: run.len,
            base,
            first: shift(run.first),
            last: shift(run.last),
        };
        if !run.was_sorted || self.runs.last().is_some_and(|p| p.last > meta.first) {
            self.in_order = false;
        }
        self.runs.push(meta);
        Ok(())
    }

    /// Merges the runs into `out` (the table file, in canonical order, marked final) and
    /// removes the staging file; returns the rows. Each merged batch is also handed to `each`,
    /// on a thread of its own, while the writer encodes it: the pass that derives the other
    /// tables from the sorted events needs no second read of them.
    pub fn merge_into(
        self,
        out: &Path,
        schema: SchemaRef,
        threads: usize,
        each: &mut (dyn FnMut(&RecordBatch) -> Result<()> + Send + '_),
    ) -> Result<u64> {
        let props = dataset::table_properties(&crate::schema::events());
        let sink = ParallelSink::create_with(out, schema.clone(), props, threads)?;
        let stopped = |what: &str| MemqError::Query(format!("the {what} panicked"));
        let (merged, written, consumed) = std::thread::scope(|scope| {
            // The merge runs here while the row group before is encoded on the writer thread
            // and derived from on the consumer thread.
            let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
            let writer = scope.spawn(move || -> Result<u64> {
                let mut sink = sink;
                for batch in rx {
                    sink.write(&batch)?;
                }
                sink.mark_final();
                sink.close()
            });
            let (ctx, crx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
            let consumer = scope.spawn(move || -> Result<()> {
                for batch in crx {
                    each(&batch)?;
                }
                Ok(())
            });
            let mut feed = Feed {
                to: vec![tx, ctx],
                source: &self.source,
            };
            let merged = self.merge(&mut feed);
            drop(feed);
            let written = writer
                .join()
                .unwrap_or_else(|_| Err(stopped("events writer")));
            let consumed = consumer
                .join()
                .unwrap_or_else(|_| Err(stopped("events consumer")));
            (merged, written, consumed)
        });
        let mut files: Vec<usize> = self.runs.iter().map(|r| r.file).collect();
        files.sort_unstable();
        files.dedup();
        for f in files {
            let _ = std::fs::remove_file(run_file(&self.path, f));
        }
        // A stopped receiver makes the merge fail too: its own error is the one to report.
        let rows = written?;
        consumed?;
        merged?;
        Ok(rows)
    }

    fn merge(&self, sink: &mut Feed) -> Result<()> {
        if self.runs.is_empty() {
            return Ok(());
        }
        let mut cursors = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            let path = run_file(&self.path, run.file);
            let mut f = File::open(&path).map_err(|e| MemqError::io(&path, e))?;
            f.seek(SeekFrom::Start(run.offset))
                .map_err(|e| MemqError::io(&path, e))?;
            let reader = StreamReader::try_new(BufReader::new(f.take(run.len)), None)
                .map_err(|e| MemqError::input(&path, Location::None, e.to_string()))?;
            cursors.push(Cursor::new(reader, run.base, path)?);
        }
        if self.in_order {
            // Runs follow one another: concatenate them, in batches of MERGE_ROWS or
            // ROW_GROUP_BYTES (rows of huge stacks: a string column past 2 GiB cannot be one
            // array).
            let mut held: Vec<RecordBatch> = Vec::new();
            let (mut rows, mut bytes) = (0, 0);
            for c in &mut cursors {
                while let Some(batch) = c.batch.take() {
                    rows += batch.num_rows();
                    bytes += batch.get_array_memory_size();
                    held.push(with_row_idx(&batch, c.base)?);
                    if rows >= MERGE_ROWS || bytes >= ROW_GROUP_BYTES {
                        sink.write(concat(&mut held)?)?;
                        (rows, bytes) = (0, 0);
                    }
                    c.batch = c.next_batch()?;
                }
            }
            if !held.is_empty() {
                sink.write(concat(&mut held)?)?;
            }
            return Ok(());
        }
        let mut out = Merged::default();
        let mut heap: BinaryHeap<Reverse<(Key, usize)>> = BinaryHeap::with_capacity(cursors.len());
        for (i, c) in cursors.iter().enumerate() {
            if let Some(k) = c.key() {
                heap.push(Reverse((k, i)));
            }
        }
        // Every cursor's current batch is in `held` (slot numbers in `slot`).
        for c in cursors.iter_mut() {
            if let Some(b) = &c.batch {
                c.slot = out.hold(b.clone());
            }
        }
        while let Some(mut top) = heap.peek_mut() {
            let Reverse((k, i)) = *top;
            let c = &mut cursors[i];
            // Take the rows of this run up to the next run's key.
            out.picks.push((c.slot, c.pos));
            out.row_idx.push(k.2);
            out.bytes += c.text_bytes();
            c.pos += 1;
            if c.pos >= c.len {
                c.batch = c.next_batch()?;
                match &c.batch {
                    Some(b) => c.slot = out.hold(b.clone()),
                    None => {
                        std::collections::binary_heap::PeekMut::pop(top);
                        if out.full() {
                            out.flush(sink, &mut cursors)?;
                        }
                        continue;
                    }
                }
            }
            *top = Reverse((c.key().expect("a row is left"), i));
            drop(top);
            if out.full() {
                out.flush(sink, &mut cursors)?;
            }
        }
        out.flush(sink, &mut cursors)?;
        Ok(())
    }
}

/// The channels to the writer and consumer threads, and the source's name for the rows.
struct Feed<'a> {
    to: Vec<std::sync::mpsc::SyncSender<RecordBatch>>,
    source: &'a str,
}

impl Feed<'_> {
    /// Sends `batch` with the source's name in its `source` column.
    fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let mut columns = batch.columns().to_vec();
        columns[positions().source] = crate::schema::source_column(self.source, batch.num_rows());
        let batch = RecordBatch::try_new(batch.schema(), columns)?;
        for tx in &self.to {
            if tx.send(batch.clone()).is_err() {
                // A receiver stopped: its error is reported when it is joined.
                return Err(MemqError::Query("the events writer stopped".into()));
            }
        }
        Ok(())
    }
}

/// The batches of `held` as one (emptying it).
fn concat(held: &mut Vec<RecordBatch>) -> Result<RecordBatch> {
    let batch = datafusion::arrow::compute::concat_batches(&held[0].schema(), held.iter())?;
    held.clear();
    Ok(batch)
}

/// `batch` with its local `row_idx` shifted by `base`.
fn with_row_idx(batch: &RecordBatch, base: u64) -> Result<RecordBatch> {
    if base == 0 {
        return Ok(batch.clone());
    }
    let local = batch
        .column(positions().row_idx)
        .as_primitive::<UInt64Type>();
    let global: UInt64Array = local.unary(|v| v + base);
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[positions().row_idx] = Arc::new(global);
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// The rows picked for the next output row group.
#[derive(Default)]
struct Merged {
    held: Vec<RecordBatch>,
    picks: Vec<(usize, usize)>,
    row_idx: Vec<u64>,
    bytes: usize,
}

impl Merged {
    fn hold(&mut self, batch: RecordBatch) -> usize {
        self.held.push(batch);
        self.held.len() - 1
    }

    fn full(&self) -> bool {
        self.picks.len() >= MERGE_ROWS || self.bytes >= ROW_GROUP_BYTES
    }

    /// Writes the picked rows as one row group; the cursors' current batches stay held.
    fn flush(&mut self, sink: &mut Feed, cursors: &mut [Cursor]) -> Result<()> {
        if self.picks.is_empty() {
            return Ok(());
        }
        let refs: Vec<&RecordBatch> = self.held.iter().collect();
        let batch = interleave_record_batch(&refs, &self.picks)?;
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        columns[positions().row_idx] =
            Arc::new(UInt64Array::from(std::mem::take(&mut self.row_idx)));
        let batch = RecordBatch::try_new(batch.schema(), columns)?;
        sink.write(batch)?;
        self.picks.clear();
        self.held.clear();
        self.bytes = 0;
        for c in cursors.iter_mut() {
            if let Some(b) = &c.batch {
                c.slot = self.hold(b.clone());
            }
        }
        Ok(())
    }
}

struct Cursor {
    reader: StreamReader<BufReader<std::io::Take<File>>>,
    path: PathBuf,
    base: u64,
    batch: Option<RecordBatch>,
    pos: usize,
    len: usize,
    slot: usize,
    ts: Option<Int64Array>,
    row_idx: Option<UInt64Array>,
    text: Vec<StringArray>,
}

impl Cursor {
    fn new(
        reader: StreamReader<BufReader<std::io::Take<File>>>,
        base: u64,
        path: PathBuf,
    ) -> Result<Cursor> {
        let mut c = Cursor {
            reader,
            path,
            base,
            batch: None,
            pos: 0,
            len: 0,
            slot: 0,
            ts: None,
            row_idx: None,
            text: Vec::new(),
        };
        c.batch = c.next_batch()?;
        Ok(c)
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            match self.reader.next() {
                None => {
                    self.ts = None;
                    self.row_idx = None;
                    self.len = 0;
                    self.pos = 0;
                    return Ok(None);
                }
                Some(Err(e)) => {
                    return Err(MemqError::input(&self.path, Location::None, e.to_string()));
                }
                Some(Ok(b)) if b.num_rows() == 0 => continue,
                Some(Ok(b)) => {
                    let (ts, row_idx) = key_columns(&b);
                    self.ts = Some(ts.clone());
                    self.row_idx = Some(row_idx.clone());
                    self.text = positions()
                        .text
                        .iter()
                        .map(|&i| b.column(i).as_string::<i32>().clone())
                        .collect();
                    self.pos = 0;
                    self.len = b.num_rows();
                    return Ok(Some(b));
                }
            }
        }
    }

    fn key(&self) -> Option<Key> {
        let (ts, row_idx) = (self.ts.as_ref()?, self.row_idx.as_ref()?);
        (self.pos < self.len).then(|| key(ts, row_idx, self.base, self.pos))
    }

    fn text_bytes(&self) -> usize {
        let i = self.pos;
        self.text
            .iter()
            .map(|a| {
                let o = a.value_offsets();
                (o[i + 1] - o[i]) as usize
            })
            .sum()
    }
}
