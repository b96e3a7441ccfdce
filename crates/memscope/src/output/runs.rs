//! Sorted runs of `events` and their merge into canonical order (docs/formats/memscope.md §2.8:
//! dumps are not sorted, so every dump is sorted at ingest).
//!
//! The readers cut a dump into runs of at most [`super::BATCH_ROWS`] rows; each run is sorted
//! on its own thread (by `ts`, NULLs last, then `row_idx`) and stored as one row group of an
//! uncompressed staging file. A k-way merge of the runs then streams the events in canonical
//! order into the table file, encoded on every core. Memory stays bounded by a few batches per
//! run, whatever the size of the dump.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray, UInt64Array};
use datafusion::arrow::compute::{interleave_record_batch, take_record_batch};
use datafusion::arrow::datatypes::{Int64Type, SchemaRef, UInt64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter};
use datafusion::parquet::arrow::ArrowSchemaConverter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::{WriterProperties, WriterPropertiesPtr};
use datafusion::parquet::file::writer::SerializedFileWriter;
use datafusion::parquet::schema::types::SchemaDescPtr;
use memq_core::dataset::{self, ParallelSink};
use memq_core::error::{Location, MemqError, Result};

/// Column positions in `events`: the sort key, and the text columns whose bytes count toward
/// an output batch's limit.
struct Positions {
    ts: usize,
    row_idx: usize,
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

/// Sorts one run (its `row_idx` are local: the order within the run is file order).
pub fn sort_run(batch: RecordBatch) -> Result<(RecordBatch, bool)> {
    let (ts, row_idx) = key_columns(&batch);
    let n = batch.num_rows();
    let sorted = (1..n).all(|i| key(ts, row_idx, 0, i - 1) <= key(ts, row_idx, 0, i));
    if sorted {
        return Ok((batch, true));
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| key(ts, row_idx, 0, i as usize));
    let indices = datafusion::arrow::array::UInt32Array::from(order);
    Ok((take_record_batch(&batch, &indices)?, false))
}

/// The first and last key of a sorted run (local `row_idx`).
pub fn bounds(batch: &RecordBatch) -> (Key, Key) {
    let (ts, row_idx) = key_columns(batch);
    let n = batch.num_rows();
    if n == 0 {
        return ((false, 0, 0), (false, 0, 0));
    }
    (key(ts, row_idx, 0, 0), key(ts, row_idx, 0, n - 1))
}

/// The shared settings of the staging file's column writers (they run on the parse threads).
pub struct RunEncoder {
    schema: SchemaRef,
    parquet: SchemaDescPtr,
    props: WriterPropertiesPtr,
}

impl RunEncoder {
    pub fn new(schema: SchemaRef) -> Result<Arc<RunEncoder>> {
        let mut props = run_properties();
        datafusion::parquet::arrow::add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let props = Arc::new(props);
        let parquet = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)
            .map_err(|e| MemqError::Query(e.to_string()))?;
        Ok(Arc::new(RunEncoder {
            schema,
            parquet: Arc::new(parquet),
            props,
        }))
    }

    /// Encodes one sorted run as the column chunks of a row group (on this thread).
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<ArrowColumnChunk>> {
        #[allow(deprecated)]
        let writers: Vec<ArrowColumnWriter> =
            datafusion::parquet::arrow::arrow_writer::get_column_writers(
                &self.parquet,
                &self.props,
                &self.schema,
            )
            .map_err(|e| MemqError::Query(e.to_string()))?;
        dataset::encode_columns(&self.schema, writers, batch, 1)
            .map_err(|e| MemqError::Query(e.to_string()))
    }
}

/// Staging settings for runs: written once and read once, so no compression nor dictionary;
/// small pages keep the merge's read buffers small when there are many runs.
fn run_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(datafusion::parquet::file::properties::EnabledStatistics::None)
        .set_data_page_size_limit(64 << 10)
        .set_data_page_row_count_limit(READ_ROWS)
        .build()
}

/// One encoded run, ready to append.
pub struct EncodedRun {
    pub chunks: Vec<ArrowColumnChunk>,
    pub rows: usize,
    /// Whether the run needed no sorting (its rows were in canonical order as read).
    pub was_sorted: bool,
    /// First and last key of the run (local `row_idx`).
    pub first: Key,
    pub last: Key,
}

/// Where a run lives: its row group in the staging file, and the `row_idx` of its first
/// record in the whole file.
struct RunMeta {
    rows: usize,
    base: u64,
    first: Key,
    last: Key,
}

/// The staging file of runs.
pub struct RunStore {
    path: PathBuf,
    writer: Option<SerializedFileWriter<File>>,
    runs: Vec<RunMeta>,
    pub rows: u64,
    /// Every run was sorted as read and each started at or after the end of the one before.
    in_order: bool,
}

impl RunStore {
    pub fn create(path: &Path, encoder: &RunEncoder) -> Result<RunStore> {
        let file = File::create(path).map_err(|e| MemqError::io(path, e))?;
        let writer = SerializedFileWriter::new(
            file,
            encoder.parquet.root_schema_ptr(),
            encoder.props.clone(),
        )
        .map_err(|e| MemqError::input(path, Location::None, e.to_string()))?;
        Ok(RunStore {
            path: path.to_path_buf(),
            writer: Some(writer),
            runs: Vec::new(),
            rows: 0,
            in_order: true,
        })
    }

    /// Appends a run whose first record is record `base` of the file.
    pub fn append(&mut self, run: EncodedRun, base: u64) -> Result<()> {
        if run.rows == 0 {
            return Ok(());
        }
        let err = |e: datafusion::parquet::errors::ParquetError| {
            MemqError::input(&self.path, Location::None, e.to_string())
        };
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| MemqError::Query("run store closed".into()))?;
        let mut rg = writer.next_row_group().map_err(err)?;
        for chunk in run.chunks {
            chunk.append_to_row_group(&mut rg).map_err(err)?;
        }
        rg.close().map_err(err)?;
        let shift = |k: Key| (k.0, k.1, k.2 + base);
        let meta = RunMeta {
            rows: run.rows,
            base,
            first: shift(run.first),
            last: shift(run.last),
        };
        if !run.was_sorted || self.runs.last().is_some_and(|p| p.last > meta.first) {
            self.in_order = false;
        }
        self.rows += run.rows as u64;
        self.runs.push(meta);
        Ok(())
    }

    /// Merges the runs into `out` (the table file, in canonical order, marked final) and
    /// removes the staging file; returns the rows.
    pub fn merge_into(mut self, out: &Path, schema: SchemaRef, threads: usize) -> Result<u64> {
        let err = |e: datafusion::parquet::errors::ParquetError| {
            MemqError::input(&self.path, Location::None, e.to_string())
        };
        if let Some(mut w) = self.writer.take() {
            w.finish().map_err(err)?;
        }
        let props =
            dataset::writer_properties(Some(dataset::sorting_columns(&crate::schema::events())));
        let sink = ParallelSink::create_with(out, schema.clone(), props, threads)?;
        // The merge runs here while the row group before is encoded on the writer thread.
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
        let writer = std::thread::spawn(move || -> Result<u64> {
            let mut sink = sink;
            for batch in rx {
                sink.write(&batch)?;
            }
            sink.mark_final();
            sink.close()
        });
        let mut sink = Feed(Some(tx));
        let merged = self.merge(&mut sink);
        drop(sink);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(MemqError::Query("the events writer panicked".into())));
        let _ = std::fs::remove_file(&self.path);
        match (merged, written) {
            (_, Err(e)) | (Err(e), _) => Err(e),
            (Ok(()), Ok(rows)) => Ok(rows),
        }
    }

    fn merge(&self, sink: &mut Feed) -> Result<()> {
        if self.runs.is_empty() {
            return Ok(());
        }
        let file = File::open(&self.path).map_err(|e| MemqError::io(&self.path, e))?;
        let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| MemqError::input(&self.path, Location::None, e.to_string()))?;
        let mut cursors = Vec::with_capacity(self.runs.len());
        for (i, run) in self.runs.iter().enumerate() {
            let f = file.try_clone().map_err(|e| MemqError::io(&self.path, e))?;
            let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(f, meta.clone())
                .with_row_groups(vec![i])
                .with_batch_size(if self.in_order { MERGE_ROWS } else { READ_ROWS })
                .build()
                .map_err(|e| MemqError::input(&self.path, Location::None, e.to_string()))?;
            cursors.push(Cursor::new(reader, run.base, &self.path)?);
            debug_assert!(run.rows > 0);
        }
        if self.in_order {
            // Runs follow one another: concatenate them.
            for c in &mut cursors {
                while let Some(batch) = c.batch.take() {
                    sink.write(with_row_idx(&batch, c.base)?)?;
                    c.batch = c.next_batch(&self.path)?;
                }
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
                c.batch = c.next_batch(&self.path)?;
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

/// The channel to the writer thread.
struct Feed(Option<std::sync::mpsc::SyncSender<RecordBatch>>);

impl Feed {
    fn write(&mut self, batch: RecordBatch) -> Result<()> {
        match &self.0 {
            Some(tx) if tx.send(batch).is_ok() => Ok(()),
            // The writer stopped: its error is reported when it is joined.
            _ => Err(MemqError::Query("the events writer stopped".into())),
        }
    }
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
    reader: ParquetRecordBatchReader,
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
    fn new(reader: ParquetRecordBatchReader, base: u64, path: &Path) -> Result<Cursor> {
        let mut c = Cursor {
            reader,
            base,
            batch: None,
            pos: 0,
            len: 0,
            slot: 0,
            ts: None,
            row_idx: None,
            text: Vec::new(),
        };
        c.batch = c.next_batch(path)?;
        Ok(c)
    }

    fn next_batch(&mut self, path: &Path) -> Result<Option<RecordBatch>> {
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
                    return Err(MemqError::input(path, Location::None, e.to_string()));
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
