//! The on-disk dataset: `NAME.memq/` with `manifest.json` and one folder of Parquet files per
//! table (design.md §3). A dataset is built in a temporary sibling folder and renamed into place
//! when complete, so an interrupted run never leaves a half dataset that looks whole.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};

use crate::error::{Location, MemqError, Result};

pub const MANIFEST: &str = "manifest.json";
pub const SCHEMA_VERSION: u32 = 1;

/// `manifest.json`: what the dataset holds and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema_version: u32,
    pub memq_version: String,
    pub created_unix: u64,
    pub sources: Vec<SourceEntry>,
    /// Rows per table.
    pub tables: Vec<TableEntry>,
    pub options: IngestOptionsRecord,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceEntry {
    /// Name used in the `source` column of every table.
    pub source: String,
    pub path: String,
    pub kind: String,
    pub size_bytes: u64,
    pub mtime_unix_ns: i128,
    pub rows: u64,
    pub rejects: u64,
    pub ts_unit: Option<String>,
    pub generation: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableEntry {
    pub name: String,
    pub rows: u64,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IngestOptionsRecord {
    pub strict: bool,
}

impl Manifest {
    pub fn read(dataset: &Path) -> Result<Manifest> {
        let path = dataset.join(MANIFEST);
        let text = fs::read_to_string(&path).map_err(|e| MemqError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            MemqError::input(
                &path,
                Location::Line(e.line() as u64),
                format!("invalid manifest: {e}"),
            )
        })
    }
}

/// True when `path` is a dataset folder (it holds a manifest).
pub fn is_dataset(path: &Path) -> bool {
    path.is_dir() && path.join(MANIFEST).is_file()
}

/// Columns whose values are nearly all distinct: dictionary encoding only costs time there.
const HIGH_CARDINALITY: &[&str] = &["attr", "raw", "text", "extra_json"];

/// Parquet writer settings shared by every table file.
pub fn writer_properties(
    sorting: Option<Vec<datafusion::parquet::file::metadata::SortingColumn>>,
) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap_or_default()))
        .set_max_row_group_row_count(Some(128 * 1024))
        .set_sorting_columns(sorting);
    for c in HIGH_CARDINALITY {
        b = b.set_column_dictionary_enabled(ColumnPath::from(*c), false);
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
        .build()
}

/// A dataset under construction in a temporary folder.
pub struct DatasetBuilder {
    tmp: PathBuf,
    target: PathBuf,
}

impl DatasetBuilder {
    /// Starts a dataset that will become `target`. Fails if `target` exists and `force` is off.
    pub fn create(target: &Path, force: bool) -> Result<DatasetBuilder> {
        if target.exists() && !force {
            return Err(MemqError::input(
                target,
                Location::None,
                "already exists; pass --force to replace it",
            ));
        }
        if target.exists() && !is_dataset(target) {
            return Err(MemqError::input(
                target,
                Location::None,
                "exists and is not a memq dataset; refusing to replace it",
            ));
        }
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(parent).map_err(|e| MemqError::io(parent, e))?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dataset".into());
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| MemqError::io(&tmp, e))?;
        }
        fs::create_dir_all(&tmp).map_err(|e| MemqError::io(&tmp, e))?;
        Ok(DatasetBuilder {
            tmp,
            target: target.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.tmp
    }

    /// The folder of `table` inside the dataset under construction (created on demand).
    pub fn table_dir(&self, table: &str) -> Result<PathBuf> {
        let dir = self.tmp.join(table);
        fs::create_dir_all(&dir).map_err(|e| MemqError::io(&dir, e))?;
        Ok(dir)
    }

    /// A scratch folder for intermediate files; removed before the dataset is committed.
    pub fn staging_dir(&self) -> Result<PathBuf> {
        let dir = self.tmp.join("_staging");
        fs::create_dir_all(&dir).map_err(|e| MemqError::io(&dir, e))?;
        Ok(dir)
    }

    /// Writes the manifest and renames the folder into place.
    pub fn commit(self, manifest: &Manifest) -> Result<PathBuf> {
        let staging = self.tmp.join("_staging");
        if staging.exists() {
            fs::remove_dir_all(&staging).map_err(|e| MemqError::io(&staging, e))?;
        }
        let manifest_path = self.tmp.join(MANIFEST);
        let text = serde_json::to_string_pretty(manifest).map_err(MemqError::query)?;
        fs::write(&manifest_path, text).map_err(|e| MemqError::io(&manifest_path, e))?;
        if self.target.exists() {
            let old = self.tmp.with_extension("old");
            fs::rename(&self.target, &old).map_err(|e| MemqError::io(&self.target, e))?;
            fs::rename(&self.tmp, &self.target).map_err(|e| MemqError::io(&self.target, e))?;
            fs::remove_dir_all(&old).map_err(|e| MemqError::io(&old, e))?;
        } else {
            fs::rename(&self.tmp, &self.target).map_err(|e| MemqError::io(&self.target, e))?;
        }
        Ok(self.target.clone())
    }
}

impl Drop for DatasetBuilder {
    fn drop(&mut self) {
        // An abandoned build (error or panic) leaves nothing behind.
        if self.tmp.exists() {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// A Parquet file being written, batch by batch.
pub struct ParquetSink {
    path: PathBuf,
    writer: ArrowWriter<File>,
    rows: u64,
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
        let file = File::create(path).map_err(|e| MemqError::io(path, e))?;
        let writer = ArrowWriter::try_new(file, schema, Some(props))
            .map_err(|e| MemqError::input(path, Location::None, e.to_string()))?;
        Ok(ParquetSink {
            path: path.to_path_buf(),
            writer,
            rows: 0,
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.rows += batch.num_rows() as u64;
        self.writer
            .write(batch)
            .map_err(|e| MemqError::input(&self.path, Location::None, e.to_string()))
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
