//! Turns inputs (dumps, dbs, folders, pickles) into a dataset (design.md §1, §3).
//!
//! Per memscope source: rows stream into an unsorted staging Parquet file; DataFusion sorts it
//! into canonical order (stable by timestamp, then file order; spilling to disk past a memory
//! limit); one more streaming pass over the sorted events derives `blocks`, `oom` and
//! `mem_snapshots`. Everything is written into a temporary folder that is renamed into place at
//! the end.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use datafusion::arrow::array::{ArrayRef, Int64Builder, StringBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::parquet::file::metadata::SortingColumn;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::dataset::{
    self, DatasetBuilder, IngestOptionsRecord, Manifest, ParquetSink, SourceEntry, TableEntry,
};
use crate::discover::{discover, Source, SourceKind};
use crate::error::{MemqError, Result};
use crate::memscope::companions;
use crate::memscope::csv_dump::{self, DumpSummary};
use crate::memscope::db_dump;
use crate::memscope::derive::Deriver;
use crate::memscope::output::{SourceOutput, BATCH_ROWS};
use crate::memscope::rejects::RejectsBuilder;
use crate::memscope::schema as ms;
use crate::schema::TableDef;

/// Memory DataFusion may use for the ingest sorts before spilling to disk.
const SORT_MEMORY_BYTES: usize = 1 << 30;

#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub output: PathBuf,
    pub force: bool,
    pub strict: bool,
    /// Show a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
}

pub struct IngestReport {
    pub dataset: PathBuf,
    pub manifest: Manifest,
    pub elapsed: Duration,
    pub input_bytes: u64,
}

impl IngestReport {
    pub fn total_rejects(&self) -> u64 {
        self.manifest.sources.iter().map(|s| s.rejects).sum()
    }

    /// The closing summary: rows per table, rejects, elapsed time, throughput.
    pub fn summary(&self) -> String {
        let mut out = format!("dataset {}\n", self.dataset.display());
        for t in &self.manifest.tables {
            if t.rows > 0 {
                out.push_str(&format!("  {:<14} {:>12} rows\n", t.name, t.rows));
            }
        }
        let secs = self.elapsed.as_secs_f64();
        let mb = self.input_bytes as f64 / (1024.0 * 1024.0);
        out.push_str(&format!(
            "{} sources, {:.1} MiB, {} rejects, {:.2}s ({:.1} MiB/s)",
            self.manifest.sources.len(),
            mb,
            self.total_rejects(),
            secs,
            if secs > 0.0 { mb / secs } else { 0.0 }
        ));
        out
    }
}

/// Every table a dataset can hold.
pub fn all_tables() -> Vec<TableDef> {
    let mut tables = ms::tables();
    tables.extend(crate::snapshot::schema::tables());
    tables
}

fn sorting_columns(def: &TableDef) -> Vec<SortingColumn> {
    def.sort_order
        .iter()
        .filter_map(|name| def.columns.iter().position(|c| c.name == *name))
        .map(|i| SortingColumn {
            column_idx: i as i32,
            descending: false,
            nulls_first: false,
        })
        .collect()
}

struct Run {
    builder: DatasetBuilder,
    /// The DataFusion session that sorts and derives; made on first use (a snapshot-only
    /// ingest never needs it).
    ctx: Option<SessionContext>,
    /// Rows written per table, and the files.
    tables: Vec<TableEntry>,
    progress: ProgressBar,
}

impl Run {
    fn ctx(&mut self) -> Result<SessionContext> {
        if let Some(ctx) = &self.ctx {
            return Ok(ctx.clone());
        }
        let ctx = sort_context()?;
        self.ctx = Some(ctx.clone());
        Ok(ctx)
    }

    fn record(&mut self, table: &str, file: &Path, rows: u64) {
        let rel = file
            .strip_prefix(self.builder.root())
            .unwrap_or(file)
            .display()
            .to_string();
        if let Some(t) = self.tables.iter_mut().find(|t| t.name == table) {
            t.rows += rows;
            t.files.push(rel);
        }
    }

    /// Writes one batch as the whole file of `table` for source `idx`.
    fn write_table(&mut self, def: &TableDef, idx: usize, batch: &RecordBatch) -> Result<()> {
        self.write_tables(idx, &[(def, batch)])
    }

    /// Writes each batch as the whole file of its table for source `idx`, the files in
    /// parallel (Parquet encoding and compression are the costly part of a small source): the
    /// first on this thread, each other one on a thread of its own.
    fn write_tables(&mut self, idx: usize, tables: &[(&TableDef, &RecordBatch)]) -> Result<()> {
        let mut files = Vec::new();
        for (def, batch) in tables {
            if batch.num_rows() > 0 {
                let dir = self.builder.table_dir(def.name)?;
                files.push((*def, *batch, dir.join(format!("{idx:04}.parquet"))));
            }
        }
        let written: Vec<Result<u64>> = std::thread::scope(|scope| {
            let others: Vec<_> = files
                .iter()
                .skip(1)
                .map(|(def, batch, path)| scope.spawn(move || write_parquet(def, batch, path)))
                .collect();
            let first = files
                .first()
                .map(|(def, batch, path)| write_parquet(def, batch, path));
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

    /// Sorts a staging file into `table`'s canonical order and writes it as the table file of
    /// source `idx`.
    async fn sort_into(&mut self, staging: &Path, def: &TableDef, idx: usize) -> Result<PathBuf> {
        let out = self
            .builder
            .table_dir(def.name)?
            .join(format!("{idx:04}.parquet"));
        let mut sink = ParquetSink::create_with(
            &out,
            def.schema(),
            dataset::writer_properties(Some(sorting_columns(def))),
        )?;
        if staging.exists() {
            let ctx = self.ctx()?;
            let name = format!("staging_{idx}_{}", def.name);
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
            let tiebreak = if def.name == "blocks" {
                ", free_row ASC NULLS LAST"
            } else {
                ""
            };
            let df = ctx
                .sql(&format!("SELECT * FROM {name} ORDER BY {order}{tiebreak}"))
                .await?;
            let mut stream = df.execute_stream().await?;
            while let Some(batch) = stream.next().await {
                sink.write(&batch?)?;
            }
            ctx.deregister_table(&name)?;
            fs::remove_file(staging).map_err(|e| MemqError::io(staging, e))?;
        }
        let rows = sink.close()?;
        self.record(def.name, &out, rows);
        Ok(out)
    }

    /// Finishes a parsed memscope dump: sorts its events into place and derives blocks, oom
    /// and mem_snapshots.
    async fn finish_dump(
        &mut self,
        idx: usize,
        source: &Source,
        parsed: ParsedDump,
    ) -> Result<DumpSummary> {
        if parsed.rejects_path.exists() {
            self.record("rejects", &parsed.rejects_path, parsed.summary.rejects);
        }
        if let Some(batch) = &parsed.python_trace {
            self.write_table(&ms::python_trace(), idx, batch)?;
        }
        let events_file = self
            .sort_into(&parsed.events_staging, &ms::events(), idx)
            .await?;
        self.derive(idx, source, &events_file, parsed.summary.ts_unit.scale())
            .await?;
        Ok(parsed.summary)
    }

    /// One pass over the sorted events: blocks, oom, mem_snapshots.
    async fn derive(
        &mut self,
        idx: usize,
        source: &Source,
        events_file: &Path,
        ts_scale: i64,
    ) -> Result<()> {
        let ctx = self.ctx()?;
        let name = format!("sorted_{idx}");
        ctx.register_parquet(
            &name,
            events_file.to_string_lossy().as_ref(),
            // The file is in canonical order already: the pass below streams it unsorted.
            ParquetReadOptions::default().file_sort_order(vec![vec![
                datafusion::prelude::col("ts").sort(true, false),
                datafusion::prelude::col("row_idx").sort(true, false),
            ]]),
        )
        .await?;
        let df = ctx
            .sql(&format!(
                "SELECT * FROM {name} WHERE event IN ('MALLOC','FREE','OOM_DETAIL','SNAPSHOT') ORDER BY ts ASC NULLS LAST, row_idx"
            ))
            .await?;
        let mut stream = df.execute_stream().await?;
        let blocks_staging = self
            .builder
            .staging_dir()?
            .join(format!("blocks-{idx}.parquet"));
        let mut blocks_sink = ParquetSink::create_with(
            &blocks_staging,
            ms::blocks().schema(),
            dataset::staging_properties(),
        )?;
        let mut deriver = Deriver::new(&source.name, ts_scale);
        while let Some(batch) = stream.next().await {
            deriver.push(&batch?);
            if deriver.blocks_pending() >= BATCH_ROWS {
                blocks_sink.write(&deriver.take_blocks())?;
            }
        }
        ctx.deregister_table(&name)?;
        let derived = deriver.finish();
        blocks_sink.write(&derived.blocks)?;
        blocks_sink.close()?;
        self.sort_into(&blocks_staging, &ms::blocks(), idx).await?;
        self.write_tables(
            idx,
            &[
                (&ms::oom(), &derived.oom),
                (&ms::mem_snapshots(), &derived.mem_snapshots),
            ],
        )?;
        Ok(())
    }

    fn companion(&mut self, idx: usize, source: &Source) -> Result<(u64, u64)> {
        let mut rejects = RejectsBuilder::new(&source.name);
        let (def, batch) = match source.kind {
            SourceKind::PythonTrace => (
                ms::python_trace(),
                companions::read_python_trace_csv(&source.path, &source.name, &mut rejects)?,
            ),
            SourceKind::MemoryCompare => (
                ms::step_compare(),
                companions::read_memory_compare(&source.path, &source.name, &mut rejects)?,
            ),
            _ => (
                ms::config(),
                companions::read_config(&source.path, &source.name)?,
            ),
        };
        let rows = batch.num_rows() as u64;
        let rejected = rejects.len() as u64;
        self.write_table(&def, idx, &batch)?;
        if rejected > 0 {
            self.write_table(&ms::rejects(), idx, &rejects.finish())?;
        }
        Ok((rows, rejected))
    }
}

/// One batch as a whole Parquet file in the table's declared sort order; returns its rows.
fn write_parquet(def: &TableDef, batch: &RecordBatch, path: &Path) -> Result<u64> {
    let mut sink = ParquetSink::create_with(
        path,
        def.schema(),
        dataset::writer_properties(Some(sorting_columns(def))),
    )?;
    sink.write(batch)?;
    sink.close()
}

/// The session that sorts staging files. The sorts spill to disk past SORT_MEMORY_BYTES: one
/// partition per sort (parsing already uses the cores), a fair pool, and a merge reservation
/// large enough for wide rows (stacks) keep the external merge inside the budget.
fn sort_context() -> Result<SessionContext> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(SORT_MEMORY_BYTES)))
        .build_arc()?;
    let mut config = SessionConfig::new()
        .with_target_partitions(1)
        .with_batch_size(8192);
    let exec = &mut config.options_mut().execution;
    exec.sort_spill_reservation_bytes = SORT_MEMORY_BYTES / 8;
    // Read staging files back with the exact types they were written with (no Utf8View), so the
    // sorted output matches the table schemas.
    exec.parquet.schema_force_view_types = false;
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

/// A memscope dump read into an unsorted staging file (step 1 of its ingest).
struct ParsedDump {
    summary: DumpSummary,
    events_staging: PathBuf,
    rejects_path: PathBuf,
    python_trace: Option<RecordBatch>,
}

/// Reads one memscope dump (CSV or db) into `events_staging` and `rejects_path`.
fn parse_dump(
    source: &Source,
    events_staging: PathBuf,
    rejects_path: PathBuf,
    progress: &ProgressBar,
) -> Result<ParsedDump> {
    let out = SourceOutput::create(&source.name, &events_staging, &rejects_path)?;
    let (summary, python_trace) = match source.kind {
        SourceKind::MemscopeDb => {
            let conn = db_dump::open(&source.path)?;
            let summary = db_dump::read(&source.path, &conn, out)?;
            let tables = db_dump::python_trace_tables(&conn, &source.path)?;
            let trace = if tables.is_empty() {
                None
            } else {
                Some(companions::read_python_trace_db(
                    &source.path,
                    &conn,
                    &source.name,
                    &tables,
                )?)
            };
            (summary, trace)
        }
        _ => {
            let file = fs::File::open(&source.path).map_err(|e| MemqError::io(&source.path, e))?;
            (
                csv_dump::read(&source.path, progress.wrap_read(file), out)?,
                None,
            )
        }
    };
    Ok(ParsedDump {
        summary,
        events_staging,
        rejects_path,
        python_trace,
    })
}

/// Parses every memscope dump among `sources`, several files at a time (one per core).
fn parse_dumps(
    sources: &[Source],
    builder: &DatasetBuilder,
    progress: &ProgressBar,
) -> Result<Vec<Option<Result<ParsedDump>>>> {
    let work: Vec<usize> = (0..sources.len())
        .filter(|&i| {
            matches!(
                sources[i].kind,
                SourceKind::MemscopeCsv | SourceKind::MemscopeDb
            )
        })
        .collect();
    if work.is_empty() {
        return Ok((0..sources.len()).map(|_| None).collect());
    }
    let staging = builder.staging_dir()?;
    let rejects = builder.table_dir("rejects")?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<ParsedDump>>>> =
        std::sync::Mutex::new((0..sources.len()).map(|_| None).collect());
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(work.len())
        .max(1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&idx) = work.get(k) else { break };
                let parsed = parse_dump(
                    &sources[idx],
                    staging.join(format!("events-{idx}.parquet")),
                    rejects.join(format!("{idx:04}.parquet")),
                    progress,
                );
                if let Ok(mut r) = results.lock() {
                    r[idx] = Some(parsed);
                }
            });
        }
    });
    results
        .into_inner()
        .map_err(|_| MemqError::Query("a parser thread panicked".into()))
}

/// Ingests `inputs` into the dataset `opts.output`.
pub async fn ingest(inputs: &[PathBuf], opts: &IngestOptions) -> Result<IngestReport> {
    let started = Instant::now();
    if inputs.is_empty() {
        return Err(MemqError::Usage("no inputs given".into()));
    }
    let sources = discover(inputs)?;
    let input_bytes: u64 = sources
        .iter()
        .map(|s| fs::metadata(&s.path).map(|m| m.len()).unwrap_or(0))
        .sum();
    let builder = DatasetBuilder::create(&opts.output, opts.force)?;
    let progress = if opts.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let pb = ProgressBar::with_draw_target(Some(input_bytes), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} ingest [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    let mut run = Run {
        builder,
        ctx: None,
        tables: all_tables()
            .iter()
            .map(|t| TableEntry {
                name: t.name.to_string(),
                rows: 0,
                files: Vec::new(),
            })
            .collect(),
        progress,
    };
    for t in all_tables() {
        run.builder.table_dir(t.name)?;
    }
    let mut parsed = parse_dumps(&sources, &run.builder, &run.progress)?;
    let mut entries = Vec::new();
    for (idx, source) in sources.iter().enumerate() {
        run.progress.set_message(source.name.clone());
        let meta = fs::metadata(&source.path).map_err(|e| MemqError::io(&source.path, e))?;
        let (rows, rejects, ts_unit, generation) = match source.kind {
            SourceKind::MemscopeCsv | SourceKind::MemscopeDb => {
                let p = parsed[idx]
                    .take()
                    .ok_or_else(|| MemqError::Query(format!("{}: not parsed", source.name)))??;
                let s = run.finish_dump(idx, source, p).await?;
                (
                    s.rows,
                    s.rejects,
                    Some(s.ts_unit.label().to_string()),
                    Some(s.generation.to_string()),
                )
            }
            SourceKind::Snapshot => {
                let batches = crate::snapshot::read_snapshot(&source.path, &source.name)?;
                let tables: Vec<_> = batches.iter().map(|(def, batch)| (def, batch)).collect();
                run.write_tables(idx, &tables)?;
                let rows = batches.iter().map(|(_, b)| b.num_rows() as u64).sum();
                (rows, 0, None, None)
            }
            _ => {
                let (rows, rejects) = run.companion(idx, source)?;
                (rows, rejects, None, None)
            }
        };
        if source.kind != SourceKind::MemscopeCsv {
            run.progress.inc(meta.len());
        }
        entries.push(SourceEntry {
            source: source.name.clone(),
            path: source
                .path
                .canonicalize()
                .unwrap_or_else(|_| source.path.clone())
                .display()
                .to_string(),
            kind: source.kind.label().to_string(),
            size_bytes: meta.len(),
            mtime_unix_ns: meta
                .modified()
                .ok()
                .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i128)
                .unwrap_or(0),
            rows,
            rejects,
            ts_unit,
            generation,
        });
    }
    run.progress.finish_and_clear();
    let total_rejects: u64 = entries.iter().map(|e| e.rejects).sum();
    if opts.strict && total_rejects > 0 {
        return Err(MemqError::Usage(format!(
            "--strict: {total_rejects} record(s) could not be parsed; no dataset written (run without --strict to keep them in `rejects`)"
        )));
    }
    run.write_table(&ms::sources(), sources.len(), &sources_batch(&entries))?;
    let manifest = Manifest {
        schema_version: dataset::SCHEMA_VERSION,
        memq_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        sources: entries,
        tables: run.tables.clone(),
        options: IngestOptionsRecord {
            strict: opts.strict,
        },
    };
    let dataset = run.builder.commit(&manifest)?;
    Ok(IngestReport {
        dataset,
        manifest,
        elapsed: started.elapsed(),
        input_bytes,
    })
}

fn sources_batch(entries: &[SourceEntry]) -> RecordBatch {
    let mut source = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut path = StringBuilder::new();
    let mut size = Int64Builder::new();
    let mut unit = StringBuilder::new();
    let mut generation = StringBuilder::new();
    let mut rows = Int64Builder::new();
    let mut rejects = Int64Builder::new();
    for e in entries {
        source.append_value(&e.source);
        kind.append_value(&e.kind);
        path.append_value(&e.path);
        size.append_value(e.size_bytes as i64);
        unit.append_option(e.ts_unit.as_deref());
        generation.append_option(e.generation.as_deref());
        rows.append_value(e.rows as i64);
        rejects.append_value(e.rejects as i64);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(source.finish()),
        Arc::new(kind.finish()),
        Arc::new(path.finish()),
        Arc::new(size.finish()),
        Arc::new(unit.finish()),
        Arc::new(generation.finish()),
        Arc::new(rows.finish()),
        Arc::new(rejects.finish()),
    ];
    RecordBatch::try_new(ms::sources().schema(), columns).expect("sources columns match the schema")
}
