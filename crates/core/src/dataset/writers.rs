//! Writing a table's Parquet files: the writer settings (compression, encodings, sort order,
//! row-group size) and the sinks (one file, a background writer, files written in parallel).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::SortingColumn;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::ColumnPath;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::*;
use crate::catalog::TableDef;
use crate::error::{Location, MemqError, Result};

/// Columns whose values are nearly all distinct: dictionary encoding only costs time there.
pub(super) const HIGH_CARDINALITY: &[&str] = &["attr", "raw", "text", "extra_json"];

/// Integer columns whose values are nearly all distinct (times, row numbers, ids): the writer
/// would build a dictionary of every row group only to give it up (this was 15 % of an
/// ingest's time, for a larger file), and they rise with their table's order, which delta
/// encoding stores in a few bits per value.
pub(super) const DISTINCT_INTEGERS: &[&str] = &[
    "ts",
    "ts_raw",
    "start_ts",
    "end_ts",
    "alloc_ts",
    "free_ts",
    "line",
    "row_idx",
    "alloc_row",
    "free_row",
    "end_row",
    "id",
    "alloc_id",
    "free_id",
    "allocation_id",
];

/// Parquet writer settings shared by every table file.
pub fn writer_properties(
    sorting: Option<Vec<datafusion::parquet::file::metadata::SortingColumn>>,
) -> WriterProperties {
    properties(sorting).build()
}

pub(super) fn properties(
    sorting: Option<Vec<datafusion::parquet::file::metadata::SortingColumn>>,
) -> datafusion::parquet::file::properties::WriterPropertiesBuilder {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap_or_default()))
        .set_max_row_group_row_count(Some(128 * 1024))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_sorting_columns(sorting);
    for c in HIGH_CARDINALITY {
        b = b.set_column_dictionary_enabled(ColumnPath::from(*c), false);
    }
    b
}

/// The Parquet writer settings of a table's files: its sort order, and delta encoding
/// without a dictionary for its [`DISTINCT_INTEGERS`].
pub fn table_properties(def: &TableDef) -> WriterProperties {
    use datafusion::arrow::datatypes::DataType;
    let mut b = properties(Some(sorting_columns(def)));
    for c in &def.columns {
        let integer = matches!(
            c.data_type,
            DataType::Int32 | DataType::Int64 | DataType::UInt32 | DataType::UInt64
        );
        if integer && DISTINCT_INTEGERS.contains(&c.name) {
            b = b
                .set_column_dictionary_enabled(ColumnPath::from(c.name), false)
                .set_column_encoding(
                    ColumnPath::from(c.name),
                    datafusion::parquet::basic::Encoding::DELTA_BINARY_PACKED,
                );
        }
    }
    b.build()
}

/// Settings for intermediate files read back once during ingest: no compression and no
/// dictionaries, so writing them costs little.
pub fn staging_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(128 * 1024))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .build()
}

/// The Parquet sorting-column metadata of a table's sort order.
pub fn sorting_columns(def: &TableDef) -> Vec<SortingColumn> {
    def.sort_order
        .iter()
        .filter_map(|name| def.index_of(name))
        .map(|i| SortingColumn {
            column_idx: i as i32,
            descending: false,
            nulls_first: false,
        })
        .collect()
}

/// One batch as a whole Parquet file in the table's declared sort order; returns its rows.
pub(super) fn write_sorted_file(def: &TableDef, batch: &RecordBatch, path: &Path) -> Result<u64> {
    let mut sink = ParquetSink::create_with(path, def.schema(), table_properties(def))?;
    sink.write(batch)?;
    sink.close()
}

/// Rows per batch of the ingest sorts, unless the rows are wide.
pub(super) const SORT_BATCH_ROWS: usize = 8192;

/// The most bytes a batch of a staging file's sort holds (uncompressed, on average).
pub(super) const SORT_BATCH_BYTES: usize = 16 << 20;

/// Rows per batch for sorting `staging`: SORT_BATCH_ROWS, or fewer when its rows average more
/// than SORT_BATCH_BYTES / SORT_BATCH_ROWS bytes (from the Parquet footer).
pub(super) fn sort_batch_rows(staging: &Path) -> usize {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let Some(meta) = File::open(staging)
        .ok()
        .and_then(|f| SerializedFileReader::new(f).ok())
        .map(|r| r.metadata().clone())
    else {
        return SORT_BATCH_ROWS;
    };
    let rows = meta.file_metadata().num_rows().max(1) as usize;
    let bytes: i64 = meta.row_groups().iter().map(|g| g.total_byte_size()).sum();
    let per_row = (bytes.max(0) as usize / rows).max(1);
    (SORT_BATCH_BYTES / per_row).clamp(1, SORT_BATCH_ROWS)
}

/// The session that sorts staging files, `batch_rows` rows per batch. The sorts spill to disk
/// past SORT_MEMORY_BYTES: one partition per sort (parsing already uses the cores), a fair
/// pool, and a merge reservation large enough for wide rows (stacks) keep the external merge
/// inside the budget.
pub(super) fn sort_context(batch_rows: usize) -> Result<SessionContext> {
    let memory = sort_memory_bytes();
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(memory)))
        .build_arc()?;
    let mut config = SessionConfig::new()
        .with_target_partitions(1)
        .with_batch_size(batch_rows);
    let exec = &mut config.options_mut().execution;
    exec.sort_spill_reservation_bytes = memory / 8;
    // Read staging files back with the exact types they were written with (no Utf8View), so the
    // sorted output matches the table schemas.
    exec.parquet.schema_force_view_types = false;
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

/// A Parquet file being written, batch by batch.
pub struct ParquetSink {
    path: PathBuf,
    writer: ArrowWriter<File>,
    rows: u64,
    /// Arrow bytes written into the open row group.
    group_bytes: usize,
    /// The row group is closed once it holds this many Arrow bytes.
    group_limit: usize,
}

impl ParquetSink {
    pub fn create(path: &Path, schema: SchemaRef) -> Result<ParquetSink> {
        Self::create_with(path, schema, writer_properties(None))
    }

    pub fn create_with(
        path: &Path,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<ParquetSink> {
        let file = create_file(path)?;
        let writer = ArrowWriter::try_new(file, schema, Some(props))
            .map_err(|e| MemqError::input(path, Location::None, e.to_string()))?;
        Ok(ParquetSink {
            path: path.to_path_buf(),
            writer,
            rows: 0,
            group_bytes: 0,
            group_limit: ROW_GROUP_BYTES,
        })
    }

    /// Closes row groups at `bytes` of Arrow data instead of the dataset's 128 MiB: a result
    /// file written while its query runs keeps less of it in memory.
    pub fn with_group_bytes(mut self, bytes: usize) -> ParquetSink {
        self.group_limit = bytes.clamp(1 << 20, ROW_GROUP_BYTES);
        self
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.rows += batch.num_rows() as u64;
        let err = |e: datafusion::parquet::errors::ParquetError| {
            MemqError::input(&self.path, Location::None, e.to_string())
        };
        self.writer.write(batch).map_err(err)?;
        // The writer cuts row groups by their encoded bytes; a dictionary column of one long
        // repeated string encodes small and decodes to gigabytes ("index overflow decoding byte
        // array" on reading): cut by the Arrow bytes too.
        self.group_bytes += batch.get_array_memory_size();
        if self.group_bytes >= self.group_limit {
            self.writer.flush().map_err(err)?;
            self.group_bytes = 0;
        }
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn close(self) -> Result<u64> {
        self.writer
            .close()
            .map_err(|e| MemqError::input(&self.path, Location::None, e.to_string()))?;
        Ok(self.rows)
    }
}

/// Creates `path` for writing, the way every file of an ingest is created.
///
/// For the fault tests, `MEMQ_TEST_FULL_DISK=TEXT` makes each file whose path contains TEXT a
/// handle on `/dev/full`, where every write fails with "No space left on device": any stage of an
/// ingest (staging, merge, a table, a stored view, the manifest) can be the one that meets a full
/// disk, and the test checks that the ingest stops, names the file and leaves nothing behind.
pub fn create_file(path: &Path) -> Result<File> {
    static FULL: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let full = FULL.get_or_init(|| std::env::var("MEMQ_TEST_FULL_DISK").ok());
    if let Some(text) = full.as_deref().filter(|t| !t.is_empty()) {
        if path.to_string_lossy().contains(text) {
            return fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .map_err(|e| MemqError::io(path, e));
        }
    }
    File::create(path).map_err(|e| MemqError::io(path, e))
}

/// A [`ParquetSink`] fed from another thread: encoding and compression run beside the parser.
/// The channel holds at most two batches, so memory stays bounded.
pub struct BackgroundSink {
    tx: Option<std::sync::mpsc::SyncSender<RecordBatch>>,
    handle: Option<std::thread::JoinHandle<Result<u64>>>,
}

impl BackgroundSink {
    pub fn spawn(sink: ParquetSink) -> BackgroundSink {
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(2);
        let handle = std::thread::spawn(move || {
            let mut sink = sink;
            for batch in rx {
                sink.write(&batch)?;
            }
            sink.close()
        });
        BackgroundSink {
            tx: Some(tx),
            handle: Some(handle),
        }
    }

    pub fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let sent = self
            .tx
            .as_ref()
            .map(|tx| tx.send(batch).is_ok())
            .unwrap_or(false);
        if sent {
            return Ok(());
        }
        // The writer stopped early: report its error.
        self.finish()
            .and_then(|_| Err(MemqError::Query("Parquet writer stopped".into())))
    }

    fn finish(&mut self) -> Result<u64> {
        self.tx.take();
        match self.handle.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(MemqError::Query("Parquet writer thread panicked".into()))),
            None => Ok(0),
        }
    }

    /// Waits for every batch to be written and closes the file.
    pub fn close(mut self) -> Result<u64> {
        self.finish()
    }
}

impl Drop for BackgroundSink {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Writes `pending` as one row group of `sink`.
pub(super) fn write_group(sink: &mut ParallelSink, pending: &mut Vec<RecordBatch>) -> Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    let batch = datafusion::arrow::compute::concat_batches(&pending[0].schema(), pending.iter())?;
    pending.clear();
    sink.write(&batch)
}

/// The key-value metadata that marks a file as written in its table's declared order with
/// [`writer_properties`] (see [`ParallelSink::mark_final`]).
pub const FINAL_KEY: &str = "memq.final";

/// The rows of `path` if it is a Parquet file marked final, else `None`.
pub(super) fn already_final(path: &Path) -> Option<u64> {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let file = File::open(path).ok()?;
    let reader = SerializedFileReader::new(file).ok()?;
    let meta = reader.metadata().file_metadata();
    let marked = meta
        .key_value_metadata()?
        .iter()
        .any(|kv| kv.key == FINAL_KEY && kv.value.as_deref() == Some("1"));
    marked.then(|| meta.num_rows().max(0) as u64)
}

/// A Parquet file whose row groups are encoded on several threads: each [`Self::write`] is one
/// row group, its columns shared out among `threads` scoped threads (Parquet encoding and
/// compression cost about as much as parsing; one thread would be the bottleneck).
pub struct ParallelSink {
    path: PathBuf,
    writer: datafusion::parquet::file::writer::SerializedFileWriter<File>,
    factory: datafusion::parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    threads: usize,
    row_groups: usize,
    rows: u64,
}

impl ParallelSink {
    pub fn create_with(
        path: &Path,
        schema: SchemaRef,
        props: WriterProperties,
        threads: usize,
    ) -> Result<ParallelSink> {
        use datafusion::parquet::arrow::{
            add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter,
        };
        let err = |e: datafusion::parquet::errors::ParquetError| {
            MemqError::input(path, Location::None, e.to_string())
        };
        let mut props = props;
        add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let parquet_schema = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)
            .map_err(err)?;
        let file = create_file(path)?;
        let writer = datafusion::parquet::file::writer::SerializedFileWriter::new(
            file,
            parquet_schema.root_schema_ptr(),
            Arc::new(props),
        )
        .map_err(err)?;
        let factory = datafusion::parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory::new(
            &writer,
            schema.clone(),
        );
        Ok(ParallelSink {
            path: path.to_path_buf(),
            writer,
            factory,
            schema,
            threads: threads.max(1),
            row_groups: 0,
            rows: 0,
        })
    }

    /// Writes `batch` as one row group.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let err = |e: datafusion::parquet::errors::ParquetError| {
            MemqError::input(&self.path, Location::None, e.to_string())
        };
        let writers = self
            .factory
            .create_column_writers(self.row_groups)
            .map_err(err)?;
        let chunks = encode_columns(&self.schema, writers, batch, self.threads).map_err(err)?;
        let mut rg = self.writer.next_row_group().map_err(err)?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut rg).map_err(err)?;
        }
        rg.close().map_err(err)?;
        self.row_groups += 1;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Marks the file as final: every row is in its table's declared order and the writer
    /// properties are the table's, so [`DatasetBuilder::sort_into`] only renames it.
    pub fn mark_final(&mut self) {
        self.writer
            .append_key_value_metadata(datafusion::parquet::file::metadata::KeyValue::new(
                FINAL_KEY.to_string(),
                "1".to_string(),
            ));
    }

    pub fn close(mut self) -> Result<u64> {
        self.writer
            .finish()
            .map_err(|e| MemqError::input(&self.path, Location::None, e.to_string()))?;
        Ok(self.rows)
    }
}

/// Encodes the columns of `batch` with `writers` (one per leaf, flat schemas only) on up to
/// `threads` threads; returns the chunks in column order.
pub fn encode_columns(
    schema: &SchemaRef,
    writers: Vec<datafusion::parquet::arrow::arrow_writer::ArrowColumnWriter>,
    batch: &RecordBatch,
    threads: usize,
) -> datafusion::parquet::errors::Result<
    Vec<datafusion::parquet::arrow::arrow_writer::ArrowColumnChunk>,
> {
    use datafusion::parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk};
    let mut jobs = Vec::with_capacity(writers.len());
    for ((i, field), writer) in schema.fields().iter().enumerate().zip(writers) {
        let column = batch.column(i);
        let mut leaves = compute_leaves(field, column)?;
        let leaf = leaves.pop().ok_or_else(|| {
            datafusion::parquet::errors::ParquetError::General("column without a leaf".into())
        })?;
        jobs.push((i, column.get_array_memory_size(), writer, leaf));
    }
    // Largest first, each to the least loaded thread.
    let threads = threads.clamp(1, jobs.len().max(1));
    jobs.sort_by_key(|j| std::cmp::Reverse(j.1));
    let mut shares: Vec<(usize, Vec<_>)> = (0..threads).map(|_| (0, Vec::new())).collect();
    for job in jobs {
        let s = shares
            .iter_mut()
            .min_by_key(|s| s.0)
            .expect("at least one thread");
        s.0 += job.1 + 4096;
        s.1.push(job);
    }
    let encode = |share: Vec<(usize, usize, _, _)>| {
        share
            .into_iter()
            .map(
                |(i, _, mut w, leaf): (
                    usize,
                    usize,
                    datafusion::parquet::arrow::arrow_writer::ArrowColumnWriter,
                    datafusion::parquet::arrow::arrow_writer::ArrowLeafColumn,
                )| {
                    w.write(&leaf)?;
                    Ok((i, w.close()?))
                },
            )
            .collect::<datafusion::parquet::errors::Result<Vec<(usize, ArrowColumnChunk)>>>()
    };
    let mut shares: Vec<_> = shares.into_iter().map(|s| s.1).collect();
    let first = shares.remove(0);
    let mut done: Vec<(usize, ArrowColumnChunk)> = std::thread::scope(|scope| {
        let others: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(move || encode(share)))
            .collect();
        let mut all = encode(first)?;
        for h in others {
            all.extend(h.join().unwrap_or_else(|_| {
                Err(datafusion::parquet::errors::ParquetError::General(
                    "an encoder thread panicked".into(),
                ))
            })?);
        }
        Ok::<_, datafusion::parquet::errors::ParquetError>(all)
    })?;
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, c)| c).collect())
}
