//! The on-disk dataset: `NAME.memq/` with `manifest.json` and one folder of Parquet files per
//! table (README.md, "Dataset and tables"). A dataset is built in a temporary sibling folder and renamed into place
//! when complete, so an interrupted run never leaves a half dataset that looks whole.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::SortingColumn;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::ColumnPath;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::catalog::TableDef;
use crate::error::{Location, MemqError, Result};

/// Memory DataFusion may use for the ingest sorts before spilling to disk: 512 MiB, or half of
/// `--memory-limit` (MEMQ_MEMORY_LIMIT_MB) when that is less. (10 M events: the `blocks` sort
/// took the ingest to 1 092 MiB with 1 GiB here; with 512 MiB, 762–988 MiB over four runs, and
/// 31.0 s instead of 34.6 s in the first: the spilled runs merge no slower than a larger
/// in-memory sort.)
fn sort_memory_bytes() -> usize {
    (crate::memory_limit() / 2).clamp(16 << 20, 512 << 20)
}

/// The most bytes of one column a Parquet row group holds in memory while it is written (and
/// a read-back batch decodes): keeps wide rows (1 MiB call stacks) bounded.
const ROW_GROUP_BYTES: usize = 128 << 20;

pub const MANIFEST: &str = "manifest.json";
/// 2: table `steps` and `curve.step_k`/`curve.step` (found at ingest); 3: `steps.step_k`;
/// 4: files laid out by rank (`TABLE/rank=R/NNNN.parquet`), `sources.rank/node/device/pid`,
/// `oom.nth` (was `oom.rank`); 5: table `event_counts` (read by `stats` and `capabilities`);
/// 6: table `expansions` (read by `pool_expansions`); 7: the tables folded at ingest beside
/// `curve` (`curve_tiles`, `usage_tiles`, `curve_peaks`, `step_usage`, `pool_frag`,
/// `owner_live_peaks`) and `hal_mallocs`; 8: tables `owner_totals` (read by `owner_peaks`) and
/// `step_levels` (read by `step_peaks`).
pub const SCHEMA_VERSION: u32 = 8;

/// The column every table but `sources` has: the rank of the job its source belongs to
/// (docs/scale-out.md). It is not stored in the files: each table's files are laid out by it,
/// hive-style, `TABLE/rank=R/NNNN.parquet`, so a query on one rank reads that rank's files only.
pub const RANK_COLUMN: &str = "rank";

/// Whether `table`'s files are laid out by rank (every table but `sources`, which carries the
/// rank of each source as a column of its own).
pub fn by_rank(table: &str) -> bool {
    table != "sources"
}

/// `manifest.json`: what the dataset holds and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema_version: u32,
    pub memq_version: String,
    pub created_unix: u64,
    pub sources: Vec<SourceEntry>,
    /// Rows per table (stored views included).
    pub tables: Vec<TableEntry>,
    pub options: IngestOptionsRecord,
    /// The library's views stored with the tables when the dataset was built (`-- @stored`,
    /// crates/engine/src/stored.rs), each a table of `tables`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored: Vec<String>,
    /// The fingerprint of the library that computed them: a memq whose library differs plans
    /// the views instead of reading them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// What the engine's fact queries answered over the dataset (its time range, pools,
    /// steps…, which the argument checks read; crates/engine/src/calls.rs): each query's text
    /// and its rows, computed with the stored views and read only by the same library.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, Vec<Vec<FactValue>>>,
}

/// A value of a fact query's row (`Manifest::facts`): what those queries answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum FactValue {
    Int(i64),
    Text(String),
    Null,
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
    /// The rank of the job the source belongs to (crates/ingest/src/ranks.rs).
    pub rank: i64,
    /// The machine of the job the source comes from.
    pub node: String,
    /// The NPU of its rank (`device_<N>`), when the path names one.
    pub device: Option<String>,
    /// The process id of its rank, from the project folder's name.
    pub pid: Option<i64>,
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

/// Integer columns whose values are nearly all distinct (times, row numbers, ids): the writer
/// would build a dictionary of every row group only to give it up (this was 15 % of an
/// ingest's time, for a larger file), and they rise with their table's order, which delta
/// encoding stores in a few bits per value.
const DISTINCT_INTEGERS: &[&str] = &[
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

fn properties(
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

/// A dataset under construction in a temporary folder. Every table file of the dataset is
/// written through it (one file per table and source, `TABLE/NNNN.parquet`), and it keeps the
/// rows and files of each table for the manifest. It can be shared between threads.
pub struct DatasetBuilder {
    tmp: PathBuf,
    target: PathBuf,
    force: bool,
    /// `TMP/.owner`, locked for the builder's life (see [`remove_stale_builds`]).
    _owner: File,
    tables: Mutex<Vec<TableEntry>>,
    /// The DataFusion session that sorts staging files; made on first use (a snapshot-only
    /// ingest never needs it).
    sorter: OnceLock<Result<SessionContext, String>>,
    /// The rank of each source, by source index (0 for an index not given).
    ranks: Vec<i64>,
}

impl DatasetBuilder {
    /// Starts a dataset of `tables` that will become `target`. Fails if `target` exists and
    /// `force` is off.
    pub fn create(target: &Path, force: bool, tables: &[TableDef]) -> Result<DatasetBuilder> {
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
        let (parent, name) = parent_and_name(target);
        fs::create_dir_all(&parent).map_err(|e| MemqError::io(&parent, e))?;
        report_cleaned(&remove_stale_builds(&parent, &name));
        // A name no other process (nor an earlier run with a reused pid) has: pid + clock + count.
        let tmp = parent.join(format!(".{name}.tmp-{}", unique_suffix()));
        fs::create_dir_all(&tmp).map_err(|e| MemqError::io(&tmp, e))?;
        // The owner file stays locked while this process lives: a killed build is recognised by
        // the next run (the kernel drops the lock) and removed.
        let owner_path = tmp.join(OWNER_FILE);
        let owner = File::create(&owner_path).map_err(|e| MemqError::io(&owner_path, e))?;
        owner.lock().map_err(|e| MemqError::io(&owner_path, e))?;
        let builder = DatasetBuilder {
            tmp,
            target: target.to_path_buf(),
            force,
            _owner: owner,
            tables: Mutex::new(
                tables
                    .iter()
                    .map(|t| TableEntry {
                        name: t.name.to_string(),
                        rows: 0,
                        files: Vec::new(),
                    })
                    .collect(),
            ),
            sorter: OnceLock::new(),
            ranks: Vec::new(),
        };
        for t in tables {
            builder.table_dir(t.name)?;
        }
        Ok(builder)
    }

    /// Starts adding sources to the existing dataset `target` (`memq ingest --append`): its
    /// table files are hard-linked into the new folder (nothing is rewritten) except the
    /// `sources` table, which the caller writes anew for all sources; the commit then swaps
    /// the folders as a replacing ingest does. Returns the builder and the dataset's manifest.
    pub fn append_to(target: &Path, tables: &[TableDef]) -> Result<(DatasetBuilder, Manifest)> {
        if !is_dataset(target) {
            return Err(MemqError::input(
                target,
                Location::None,
                "--append: not a memq dataset (no manifest.json)",
            ));
        }
        let manifest = Manifest::read(target)?;
        if manifest.schema_version != SCHEMA_VERSION {
            return Err(MemqError::input(
                target,
                Location::None,
                format!(
                    "--append: dataset schema version {} (this memq writes {}); ingest all sources again without --append",
                    manifest.schema_version, SCHEMA_VERSION
                ),
            ));
        }
        let builder = DatasetBuilder::create(target, true, tables)?;
        {
            let mut entries = builder
                .tables
                .lock()
                .map_err(|_| MemqError::Query("table entries poisoned".into()))?;
            // `sources` is written anew, the stored views computed again over every source.
            let kept = |t: &&TableEntry| t.name != "sources" && !manifest.stored.contains(&t.name);
            for old in manifest.tables.iter().filter(kept) {
                for file in &old.files {
                    let (from, to) = (target.join(file), builder.tmp.join(file));
                    if let Some(dir) = to.parent() {
                        fs::create_dir_all(dir).map_err(|e| MemqError::io(dir, e))?;
                    }
                    fs::hard_link(&from, &to)
                        .or_else(|_| fs::copy(&from, &to).map(|_| ()))
                        .map_err(|e| MemqError::io(&from, e))?;
                }
                match entries.iter_mut().find(|t| t.name == old.name) {
                    Some(t) => {
                        t.rows += old.rows;
                        t.files.extend(old.files.iter().cloned());
                    }
                    None => entries.push(old.clone()),
                }
            }
        }
        Ok((builder, manifest))
    }

    /// Sets the rank of each source (by index): table files go to `TABLE/rank=R/`.
    pub fn with_ranks(mut self, ranks: Vec<i64>) -> DatasetBuilder {
        self.ranks = ranks;
        self
    }

    /// The file of `table` for source `index`: `TABLE/rank=R/NNNN.parquet` ([`by_rank`]),
    /// `TABLE/NNNN.parquet` for `sources`.
    pub fn table_file(&self, table: &str, index: usize) -> Result<PathBuf> {
        let mut dir = self.table_dir(table)?;
        if by_rank(table) {
            let rank = self.ranks.get(index).copied().unwrap_or(0);
            dir = dir.join(format!("{RANK_COLUMN}={rank}"));
            fs::create_dir_all(&dir).map_err(|e| MemqError::io(&dir, e))?;
        }
        Ok(dir.join(format!("{index:04}.parquet")))
    }

    /// Counts `rows` in `file` (inside the dataset) for `table` in the manifest.
    pub fn record(&self, table: &str, file: &Path, rows: u64) {
        let rel = file
            .strip_prefix(&self.tmp)
            .unwrap_or(file)
            .display()
            .to_string();
        if let Ok(mut tables) = self.tables.lock() {
            if let Some(t) = tables.iter_mut().find(|t| t.name == table) {
                t.rows += rows;
                t.files.push(rel);
            }
        }
    }

    /// The tables with their rows and files so far.
    pub fn table_entries(&self) -> Vec<TableEntry> {
        self.tables.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Writes one batch as the whole file of its table for source `index`.
    pub fn write_table(&self, def: &TableDef, index: usize, batch: &RecordBatch) -> Result<()> {
        self.write_tables(index, &[(def, batch)])
    }

    /// Writes each batch as the whole file of its table for source `index`, the files in
    /// parallel (Parquet encoding and compression are the costly part of a small source): the
    /// first on this thread, each other one on a thread of its own. Empty batches write nothing.
    pub fn write_tables(&self, index: usize, tables: &[(&TableDef, &RecordBatch)]) -> Result<()> {
        let mut files = Vec::new();
        for (def, batch) in tables {
            if batch.num_rows() > 0 {
                files.push((*def, *batch, self.table_file(def.name, index)?));
            }
        }
        let written: Vec<Result<u64>> = std::thread::scope(|scope| {
            let others: Vec<_> = files
                .iter()
                .skip(1)
                .map(|(def, batch, path)| scope.spawn(move || write_sorted_file(def, batch, path)))
                .collect();
            let first = files
                .first()
                .map(|(def, batch, path)| write_sorted_file(def, batch, path));
            first
                .into_iter()
                .chain(others.into_iter().map(|thread| {
                    thread.join().unwrap_or_else(|_| {
                        Err(MemqError::Query("a writer thread panicked".into()))
                    })
                }))
                .collect()
        });
        for ((def, _, path), rows) in files.iter().zip(written) {
            self.record(def.name, path, rows?);
        }
        Ok(())
    }

    fn sorter(&self) -> Result<SessionContext> {
        self.sorter
            .get_or_init(|| sort_context(SORT_BATCH_ROWS).map_err(|e| e.to_string()))
            .clone()
            .map_err(MemqError::Query)
    }

    /// Sorts a staging file into `def`'s declared order and writes it as the table file of
    /// source `index` (an empty file when the staging file does not exist); removes the
    /// staging file. Returns the table file.
    pub async fn sort_into(&self, staging: &Path, def: &TableDef, index: usize) -> Result<PathBuf> {
        let out = self.table_file(def.name, index)?;
        if let Some(rows) = already_final(staging) {
            // Written in the declared order with the table's settings (ParallelSink::mark_final):
            // nothing to sort or re-encode.
            fs::rename(staging, &out).map_err(|e| MemqError::io(staging, e))?;
            self.record(def.name, &out, rows);
            return Ok(out);
        }
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut sink =
            ParallelSink::create_with(&out, def.schema(), table_properties(def), threads)?;
        if staging.exists() {
            // Wide rows (1 MiB call stacks) get a session of their own with fewer rows per
            // batch: 8192 of them read back as one batch of gigabytes.
            let rows = sort_batch_rows(staging);
            let ctx = if rows == SORT_BATCH_ROWS {
                self.sorter()?
            } else {
                sort_context(rows)?
            };
            let name = format!("staging_{index}_{}", def.name);
            ctx.register_parquet(
                &name,
                staging.to_string_lossy().as_ref(),
                ParquetReadOptions::default(),
            )
            .await?;
            let order = def
                .sort_order
                .iter()
                .map(|c| format!("\"{c}\" ASC NULLS LAST"))
                .collect::<Vec<_>>()
                .join(", ");
            let df = ctx
                .sql(&format!("SELECT * FROM {name} ORDER BY {order}"))
                .await?;
            let mut stream = df.execute_stream().await?;
            // Row groups of up to 128 Ki rows / ROW_GROUP_BYTES, each encoded on every core.
            let mut pending: Vec<RecordBatch> = Vec::new();
            let (mut rows, mut bytes) = (0usize, 0usize);
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let size = batch.get_array_memory_size();
                if !pending.is_empty()
                    && (rows + batch.num_rows() > 128 * 1024 || bytes + size > ROW_GROUP_BYTES)
                {
                    write_group(&mut sink, &mut pending)?;
                    (rows, bytes) = (0, 0);
                }
                rows += batch.num_rows();
                bytes += size;
                pending.push(batch);
            }
            write_group(&mut sink, &mut pending)?;
            ctx.deregister_table(&name)?;
            fs::remove_file(staging).map_err(|e| MemqError::io(staging, e))?;
        }
        sink.mark_final();
        let rows = sink.close()?;
        self.record(def.name, &out, rows);
        Ok(out)
    }

    /// The session of the ingest sorts, for a format's own passes over its staging files.
    pub fn session(&self) -> Result<SessionContext> {
        self.sorter()
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

    /// Writes `manifest` into the dataset under construction (so that it can be opened, to
    /// compute the stored views, before [`DatasetBuilder::commit`] writes it again).
    pub fn write_manifest(&self, manifest: &Manifest) -> Result<()> {
        let manifest_path = self.tmp.join(MANIFEST);
        let text = serde_json::to_string_pretty(manifest).map_err(MemqError::query)?;
        let mut file = create_file(&manifest_path)?;
        std::io::Write::write_all(&mut file, text.as_bytes())
            .map_err(|e| MemqError::io(&manifest_path, e))
    }

    /// Writes the manifest and renames the folder into place. The swap runs under the target's
    /// commit lock (`.NAME.lock` beside it), so concurrent commits to one target never meet;
    /// the replaced dataset is moved to a unique `.NAME.old-…` and removed.
    pub fn commit(self, manifest: &Manifest) -> Result<PathBuf> {
        let staging = self.tmp.join("_staging");
        if staging.exists() {
            fs::remove_dir_all(&staging).map_err(|e| MemqError::io(&staging, e))?;
        }
        self.write_manifest(manifest)?;
        let (parent, name) = parent_and_name(&self.target);
        let _lock = TargetLock::acquire(&self.target, "lock")?;
        // Any `.NAME.old…` left now is a dead process's: they exist only inside this lock.
        report_cleaned(&remove_old_copies(&parent, &name));
        if self.target.exists() && !self.force {
            return Err(MemqError::input(
                &self.target,
                Location::None,
                "already exists (written by another process meanwhile); pass --force to replace it",
            ));
        }
        if self.target.exists() && !is_dataset(&self.target) {
            return Err(MemqError::input(
                &self.target,
                Location::None,
                "exists and is not a memq dataset; refusing to replace it",
            ));
        }
        // The owner file must not end up in the dataset; the folder stays ours meanwhile (a
        // cleaner that finds no owner file checks the pid in the name, which is alive).
        let _ = fs::remove_file(self.tmp.join(OWNER_FILE));
        if self.target.exists() {
            let old = parent.join(format!(".{name}.old-{}", unique_suffix()));
            fs::rename(&self.target, &old).map_err(|e| MemqError::io(&self.target, e))?;
            if let Err(e) = fs::rename(&self.tmp, &self.target) {
                let _ = fs::rename(&old, &self.target);
                return Err(MemqError::io(&self.target, e));
            }
            // A failure here leaves a `.NAME.old-…` that the next commit removes.
            let _ = fs::remove_dir_all(&old);
        } else {
            fs::rename(&self.tmp, &self.target).map_err(|e| MemqError::io(&self.target, e))?;
        }
        Ok(self.target.clone())
    }
}

/// The lock file inside a dataset under construction.
const OWNER_FILE: &str = ".owner";

/// The folder a dataset `target` lives in and its file name.
fn parent_and_name(target: &Path) -> (PathBuf, String) {
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".into());
    (parent, name)
}

/// `PID-NANOS-COUNT`: unique among the processes of a machine.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!(
        "{}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether process `pid` is alive (Linux: `/proc/PID`; elsewhere assumed alive).
fn pid_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// Whether the temporary build folder `dir` belongs to a process that is gone: its owner file
/// can be locked (the kernel released the lock of a killed process), or, with no owner file (a
/// folder of an older memq, or one killed before the file existed), the pid in its name is dead.
fn is_stale_build(dir: &Path, suffix: &str) -> bool {
    let owner = dir.join(OWNER_FILE);
    if let Ok(f) = File::options().read(true).write(true).open(&owner) {
        return f.try_lock().is_ok();
    }
    let pid = suffix.split('-').next().and_then(|p| p.parse::<u32>().ok());
    match pid {
        Some(pid) => !pid_alive(pid),
        None => false,
    }
}

/// Removes the temporary folders `.NAME.tmp-…` beside a dataset `NAME` that killed processes
/// left; returns them with their sizes. Folders of live processes are
/// kept.
pub fn remove_stale_builds(parent: &Path, name: &str) -> Vec<(PathBuf, u64)> {
    let prefix = format!(".{name}.tmp-");
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else {
        return removed;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(suffix) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || !is_stale_build(&path, suffix) {
            continue;
        }
        let size = dir_size(&path);
        if fs::remove_dir_all(&path).is_ok() {
            removed.push((path, size));
        }
    }
    removed
}

/// Removes every `.NAME.old` / `.NAME.old-…` beside a dataset `NAME`. Called only under the
/// commit lock, where no such folder is in use.
fn remove_old_copies(parent: &Path, name: &str) -> Vec<(PathBuf, u64)> {
    let exact = format!(".{name}.old");
    let prefix = format!(".{name}.old-");
    // Names older memq versions used: `.NAME.tmp-PID.old` (with_extension on the tmp folder).
    let legacy = format!(".{name}.tmp-");
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(parent) else {
        return removed;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let ours = file_name == exact
            || file_name.starts_with(&prefix)
            || (file_name.starts_with(&legacy) && file_name.ends_with(".old"));
        if !ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let size = dir_size(&path);
        if fs::remove_dir_all(&path).is_ok() {
            removed.push((path, size));
        }
    }
    removed
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(entries) = fs::read_dir(&d) {
            for e in entries.flatten() {
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(e.path()),
                    Ok(_) => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                    Err(_) => {}
                }
            }
        }
    }
    total
}

fn report_cleaned(removed: &[(PathBuf, u64)]) {
    for (path, size) in removed {
        eprintln!(
            "memq: removed {} ({:.1} MiB) left by a killed or failed run",
            path.display(),
            *size as f64 / (1024.0 * 1024.0)
        );
    }
}

/// An exclusive lock on `.NAME.KIND` beside a dataset `NAME` (an flock, released when dropped or
/// when the process dies). `lock` guards the commit swap; the ingest cache holds `ingest` while
/// it checks and (re)builds a cached dataset, so concurrent shells ingest once.
///
/// The lock file is removed when the lock is released, so nothing stays beside the dataset. A
/// process that was waiting on the removed file finds, once it holds the lock, that the path no
/// longer names its file, and takes the lock again on a new one.
pub struct TargetLock {
    file: File,
    path: PathBuf,
}

impl TargetLock {
    /// Blocks until the lock is had; says so on stderr when another process holds it.
    pub fn acquire(target: &Path, kind: &str) -> Result<TargetLock> {
        use std::os::unix::fs::MetadataExt;
        let (parent, name) = parent_and_name(target);
        fs::create_dir_all(&parent).map_err(|e| MemqError::io(&parent, e))?;
        let path = parent.join(format!(".{name}.{kind}"));
        let mut said = false;
        loop {
            let file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| MemqError::io(&path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    if kind != "lock" && !said {
                        said = true;
                        eprintln!(
                            "memq: waiting for another memq process that is writing {}",
                            target.display()
                        );
                    }
                    file.lock().map_err(|e| MemqError::io(&path, e))?;
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(MemqError::io(&path, e)),
            }
            let held = file.metadata().map_err(|e| MemqError::io(&path, e))?;
            match fs::metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(TargetLock { file, path });
                }
                // Released and removed by its holder while this process waited: again.
                _ => continue,
            }
        }
    }
}

impl Drop for TargetLock {
    fn drop(&mut self) {
        // Removed while still held, so no process can lock this file and keep it.
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
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

/// One batch as a whole Parquet file in the table's declared sort order; returns its rows.
fn write_sorted_file(def: &TableDef, batch: &RecordBatch, path: &Path) -> Result<u64> {
    let mut sink = ParquetSink::create_with(path, def.schema(), table_properties(def))?;
    sink.write(batch)?;
    sink.close()
}

/// Rows per batch of the ingest sorts, unless the rows are wide.
const SORT_BATCH_ROWS: usize = 8192;

/// The most bytes a batch of a staging file's sort holds (uncompressed, on average).
const SORT_BATCH_BYTES: usize = 16 << 20;

/// Rows per batch for sorting `staging`: SORT_BATCH_ROWS, or fewer when its rows average more
/// than SORT_BATCH_BYTES / SORT_BATCH_ROWS bytes (from the Parquet footer).
fn sort_batch_rows(staging: &Path) -> usize {
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
fn sort_context(batch_rows: usize) -> Result<SessionContext> {
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
fn write_group(sink: &mut ParallelSink, pending: &mut Vec<RecordBatch>) -> Result<()> {
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
fn already_final(path: &Path) -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::col;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::parquet::basic::Encoding;
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

    /// A table's nearly distinct integer columns are delta-encoded without a dictionary; its
    /// other columns keep the dictionary.
    #[test]
    fn distinct_integers_are_delta_encoded() {
        let def = TableDef {
            name: "t",
            doc: "",
            columns: vec![
                col("ts", DataType::Int64, ""),
                col("size", DataType::Int64, ""),
                col("name", DataType::Utf8, ""),
            ],
            sort_order: &["ts"],
        };
        let n = 10_000i64;
        let batch = RecordBatch::try_new(
            def.schema(),
            vec![
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| 1_000 + 7 * i))),
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 3))),
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("op{}", i % 5)),
                )),
            ],
        )
        .unwrap();
        let path = std::env::temp_dir().join(format!("memq-delta-{}.parquet", std::process::id()));
        let mut sink =
            ParquetSink::create_with(&path, def.schema(), table_properties(&def)).unwrap();
        sink.write(&batch).unwrap();
        sink.close().unwrap();
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let group = reader.metadata().row_group(0);
        let encodings = |i: usize| group.column(i).encodings().collect::<Vec<_>>();
        assert!(
            encodings(0).contains(&Encoding::DELTA_BINARY_PACKED),
            "{:?}",
            encodings(0)
        );
        assert!(
            !encodings(0).contains(&Encoding::RLE_DICTIONARY),
            "{:?}",
            encodings(0)
        );
        assert!(
            encodings(1).contains(&Encoding::RLE_DICTIONARY),
            "{:?}",
            encodings(1)
        );
        assert!(
            encodings(2).contains(&Encoding::RLE_DICTIONARY),
            "{:?}",
            encodings(2)
        );
        let _ = std::fs::remove_file(&path);
    }
}
