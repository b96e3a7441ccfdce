//! The on-disk dataset: `NAME.memq/` with `manifest.json` and one folder of Parquet files per
//! table (README.md, "Dataset and tables"). A dataset is built in a temporary sibling folder and renamed into place
//! when complete, so an interrupted run never leaves a half dataset that looks whole.
//!
//! The module in files by job: [`manifest`] (what a dataset holds, `manifest.json`),
//! [`writers`] (Parquet writer settings and the sinks that write a table's files), [`commit`]
//! (the build folder's lifecycle: owner, stale builds, the target lock) and here the
//! [`DatasetBuilder`] that ties them together.

mod commit;
mod manifest;
mod writers;

pub use commit::*;
pub use manifest::*;
pub use writers::*;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use futures::StreamExt;

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
            let ctx = self.session_for(staging)?;
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

    /// The session of the ingest sorts, for a pass over the staging file `staging`. Wide rows
    /// (1 MiB call stacks) get a session of their own with fewer rows per batch: 8192 of them
    /// read back, or coalesced after a filter, make one batch of gigabytes.
    pub fn session_for(&self, staging: &Path) -> Result<SessionContext> {
        let rows = sort_batch_rows(staging);
        if rows == SORT_BATCH_ROWS {
            self.sorter()
        } else {
            sort_context(rows)
        }
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

impl Drop for DatasetBuilder {
    fn drop(&mut self) {
        // An abandoned build (error or panic) leaves nothing behind.
        if self.tmp.exists() {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::col;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::parquet::basic::Encoding;
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;

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
