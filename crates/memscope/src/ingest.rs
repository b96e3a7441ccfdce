//! Ingest of msMemScope sources, in order: the dumps are parsed (several files at a time,
//! one per core); each dump's events are sorted into canonical order (stable by timestamp,
//! then file order; spilling past a memory limit); one streaming pass over the sorted events
//! derives `blocks`, `oom`, `mem_snapshots` and the staging rows of `curve` — for a CSV dump
//! while its sorted events are written, for a db dump from the sorted file; the tables of the
//! curve are folded from that staging; companion files (python traces, memory_compare,
//! config.json) are read whole.

use std::fs;
use std::path::{Path, PathBuf};

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::ParquetReadOptions;
use futures::StreamExt;
use memq_core::dataset::{self, DatasetBuilder, ParquetSink};
use memq_core::error::{MemqError, Result};
use memq_core::format::{Progress, ProgressRead, Source, SourceReport, WholeFile};
use memq_core::rejects::RejectsBuilder;

use crate::derive::Deriver;
use crate::read::companions;
use crate::read::csv;
use crate::read::db;
use crate::schema as ms;
use crate::staging::DumpSummary;
use crate::staging::{SourceOutput, BATCH_ROWS};

/// Ingests every memscope source into `out`; one report per source, in order.
pub async fn ingest(
    sources: &[Source],
    out: &DatasetBuilder,
    progress: Progress,
) -> Result<Vec<SourceReport>> {
    let mut parsed = parse_dumps(sources, out, &progress)?;
    // A dump that failed to parse (a full disk, say) is the error to report: the files
    // written after it would only fail for the same reason.
    if let Some(i) = parsed.iter().position(|p| matches!(p, Some(Err(_)))) {
        if let Some(Err(e)) = parsed[i].take() {
            return Err(e);
        }
    }
    let mut reports = Vec::with_capacity(sources.len());
    for (source, parsed) in sources.iter().zip(parsed.iter_mut()) {
        let report = match source.kind {
            crate::MEMSCOPE_CSV | crate::MEMSCOPE_DB => {
                let p = parsed
                    .take()
                    .ok_or_else(|| MemqError::Query(format!("{}: not parsed", source.name)))??;
                let s = finish_dump(out, source, p).await?;
                SourceReport {
                    rows: s.rows,
                    rejects: s.rejects,
                    ts_unit: Some(s.ts_unit.label().to_string()),
                    generation: Some(s.generation.to_string()),
                }
            }
            _ => {
                let report = companion(out, source)?;
                progress(fs::metadata(&source.path).map(|m| m.len()).unwrap_or(0));
                report
            }
        };
        reports.push(report);
    }
    Ok(reports)
}

/// A memscope dump read into an unsorted staging file (step 1 of its ingest).
struct ParsedDump {
    summary: DumpSummary,
    events_staging: PathBuf,
    rejects_path: PathBuf,
    python_trace: Option<RecordBatch>,
    /// A CSV dump's derive pass, made as its sorted events were written.
    passed: Option<Passed>,
}

/// Parses every dump among `sources`, several files at a time (one per core).
fn parse_dumps(
    sources: &[Source],
    out: &DatasetBuilder,
    progress: &Progress,
) -> Result<Vec<Option<Result<ParsedDump>>>> {
    let work: Vec<usize> = (0..sources.len())
        .filter(|&i| matches!(sources[i].kind, crate::MEMSCOPE_CSV | crate::MEMSCOPE_DB))
        .collect();
    let mut results: Vec<Option<Result<ParsedDump>>> = (0..sources.len()).map(|_| None).collect();
    if work.is_empty() {
        return Ok(results);
    }
    let staging = out.staging_dir()?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots = std::sync::Mutex::new(&mut results);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let threads = cores.min(work.len()).max(1);
    // Each file gets workers in proportion to its share of the bytes (at least one, at most a
    // core each): a folder of one big dump and a small one (the usual case: a device's dump
    // beside the host's) parses the big one on every core instead of `cores / files`, and no
    // more pieces are in flight than for one file on every core (a 1 M-event folder: 5.0 s →
    // 3.0 s, 363 → 470–522 MiB peak RSS, as a single file parsed on both cores).
    let size = |i: usize| fs::metadata(&sources[i].path).map_or(1, |m| m.len().max(1));
    let total: u64 = work.iter().map(|&i| size(i)).sum();
    let workers_of = |i: usize| -> usize {
        let share = (cores as u128 * size(i) as u128).div_ceil(total.max(1) as u128) as usize;
        share.clamp(1, cores)
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&i) = work.get(k) else { break };
                let source = &sources[i];
                let parsed = out.table_file("rejects", source.index).and_then(|rejects| {
                    parse_dump(
                        out,
                        source,
                        staging.join(format!("events-{}.parquet", source.index)),
                        rejects,
                        progress,
                        workers_of(i),
                    )
                });
                if let Ok(mut r) = slots.lock() {
                    r[i] = Some(parsed);
                }
            });
        }
    });
    Ok(results)
}

/// Reads one dump (CSV or db) into `events_staging` and `rejects_path`; a CSV dump's events
/// are already sorted there (the file is marked final), on `workers` threads, and derived
/// from on their way.
fn parse_dump(
    dataset: &DatasetBuilder,
    source: &Source,
    events_staging: PathBuf,
    rejects_path: PathBuf,
    progress: &Progress,
    workers: usize,
) -> Result<ParsedDump> {
    let (summary, python_trace, passed) = match source.kind {
        crate::MEMSCOPE_DB => {
            let out = SourceOutput::create(&source.name, &events_staging, &rejects_path)?;
            let conn = db::open(&source.path)?;
            let summary = db::read(&source.path, &conn, out)?;
            let tables = db::python_trace_tables(&conn, &source.path)?;
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
            progress(fs::metadata(&source.path).map(|m| m.len()).unwrap_or(0));
            (summary, trace, None)
        }
        _ => {
            let file = fs::File::open(&source.path).map_err(|e| MemqError::io(&source.path, e))?;
            let input = ProgressRead::new(file, progress.clone());
            let out = SourceOutput::create_for_runs(&source.name, &rejects_path);
            let runs = events_staging.with_extension("runs");
            let mut pass = DerivePass::create(dataset, source)?;
            let summary = csv::read_sorted(
                &source.path,
                input,
                out,
                (&events_staging, &runs),
                workers,
                &mut |unit, batch| pass.push(unit.scale(), batch),
            )?;
            memq_core::release_free_memory();
            (summary, None, Some(pass.finish(dataset)?))
        }
    };
    Ok(ParsedDump {
        summary,
        events_staging,
        rejects_path,
        python_trace,
        passed,
    })
}

/// Finishes a parsed dump: sorts its events into place and derives blocks, oom and
/// mem_snapshots.
async fn finish_dump(
    out: &DatasetBuilder,
    source: &Source,
    parsed: ParsedDump,
) -> Result<DumpSummary> {
    if parsed.rejects_path.exists() {
        out.record("rejects", &parsed.rejects_path, parsed.summary.rejects);
    }
    if let Some(batch) = &parsed.python_trace {
        out.write_table(&ms::python_trace(), source.index, batch)?;
    }
    let events_file = out
        .sort_into(&parsed.events_staging, &ms::events(), source.index)
        .await?;
    let passed = match parsed.passed {
        Some(passed) => passed,
        None => derive_pass(out, source, &events_file, parsed.summary.ts_unit.scale()).await?,
    };
    let counts = parsed.summary.counts.batch(&source.name);
    derive(out, source, passed, counts).await?;
    Ok(parsed.summary)
}

/// The pass over a dump's events in canonical order: blocks (with fates), the staging rows of
/// curve, oom, mem_snapshots, steps ([`Deriver`]) and the table `hal_mallocs`.
struct DerivePass {
    deriver: Deriver,
    blocks: ParquetSink,
    blocks_staging: PathBuf,
    hal: HalMallocs,
    hal_file: PathBuf,
}

/// The name of a source's curve staging files.
fn curve_stem(source: &Source) -> String {
    format!("curve-{}", source.index)
}

/// What the pass leaves for [`derive`].
struct Passed {
    derived: crate::derive::Derived,
    blocks_staging: PathBuf,
}

impl DerivePass {
    fn create(out: &DatasetBuilder, source: &Source) -> Result<DerivePass> {
        let staging_dir = out.staging_dir()?;
        let blocks_staging = staging_dir.join(format!("blocks-{}.parquet", source.index));
        let hal_file = out.table_file("hal_mallocs", source.index)?;
        Ok(DerivePass {
            deriver: Deriver::new(&source.name, (&staging_dir, &curve_stem(source)))?,
            blocks: ParquetSink::create_with(
                &blocks_staging,
                ms::blocks().schema(),
                dataset::staging_properties(),
            )?,
            blocks_staging,
            hal: HalMallocs::create(&hal_file)?,
            hal_file,
        })
    }

    /// The next batch of events (timestamps scaled to ns by `ts_scale`).
    fn push(&mut self, ts_scale: i64, batch: &RecordBatch) -> Result<()> {
        self.deriver.set_ts_scale(ts_scale);
        self.hal.push(batch)?;
        self.deriver.push(batch)?;
        if self.deriver.blocks_ready(BATCH_ROWS) {
            for b in self.deriver.take_blocks() {
                self.blocks.write(&b)?;
            }
        }
        Ok(())
    }

    fn finish(mut self, out: &DatasetBuilder) -> Result<Passed> {
        out.record("hal_mallocs", &self.hal_file, self.hal.sink.close()?);
        let derived = self.deriver.finish()?;
        for b in &derived.blocks {
            self.blocks.write(b)?;
        }
        self.blocks.close()?;
        Ok(Passed {
            derived,
            blocks_staging: self.blocks_staging,
        })
    }
}

/// The derive pass over a sorted events file (a db dump's).
async fn derive_pass(
    out: &DatasetBuilder,
    source: &Source,
    events_file: &Path,
    ts_scale: i64,
) -> Result<Passed> {
    let ctx = out.session_for(events_file)?;
    let name = format!("sorted_{}", source.index);
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
            "SELECT * FROM {name} WHERE event IN ('MALLOC','FREE','OOM_DETAIL','SNAPSHOT','SYSTEM','MSTX') ORDER BY ts ASC NULLS LAST, row_idx"
        ))
        .await?;
    let mut stream = df.execute_stream().await?;
    let mut pass = DerivePass::create(out, source)?;
    while let Some(batch) = stream.next().await {
        pass.push(ts_scale, &batch?)?;
    }
    ctx.deregister_table(&name)?;
    pass.finish(out)
}

/// The tables of a dump folded from its derive pass: blocks sorted into place, curve and the
/// tables beside it, oom, mem_snapshots, steps; `event_counts` (counted while parsing) is
/// written with them.
async fn derive(
    out: &DatasetBuilder,
    source: &Source,
    passed: Passed,
    event_counts: RecordBatch,
) -> Result<()> {
    let Passed {
        derived,
        blocks_staging,
    } = passed;
    let staging_dir = out.staging_dir()?;
    let curve_stem = curve_stem(source);
    // Series-ordered staging goes straight to the table file; otherwise through a sort.
    let sorted = !derived.curve_staging.needs_sort();
    let target = if sorted {
        out.table_file("curve", source.index)?
    } else {
        staging_dir.join(format!("{curve_stem}.parquet"))
    };
    // The tables written beside the curve, the same way.
    let beside = |name: &str| {
        if sorted {
            out.table_file(name, source.index)
        } else {
            Ok(staging_dir.join(format!("{name}-{}.parquet", source.index)))
        }
    };
    let files = crate::derive::curve::Outputs {
        curve: target,
        expansions: beside("expansions")?,
        tiles: beside("curve_tiles")?,
        usage_tiles: beside("usage_tiles")?,
        step_usage: beside("step_usage")?,
        // written per series, in order, at the end of the pass: never through a sort
        peaks: out.table_file("curve_peaks", source.index)?,
        step_levels: out.table_file("step_levels", source.index)?,
        frag: out.table_file("pool_frag", source.index)?,
        owner_peaks: out.table_file("owner_live_peaks", source.index)?,
    };
    // The curve and the tables beside it are folded on a thread of their own while the blocks
    // are sorted into place (both are a single pass of one core).
    let crate::derive::Derived {
        owner_totals,
        oom,
        mem_snapshots,
        steps,
        curve_staging,
        held_shadow_rows,
        ..
    } = derived;
    let folding = {
        let (name, outputs) = (source.name.clone(), files.clone());
        std::thread::spawn(move || {
            let index = crate::derive::steps::StepIndex::new(&steps);
            let rows = crate::derive::curve::finish(
                curve_staging,
                &name,
                &held_shadow_rows,
                &index,
                &outputs,
            );
            (rows, steps)
        })
    };
    let blocks = out
        .sort_into(&blocks_staging, &ms::blocks(), source.index)
        .await;
    let (rows, steps) = folding
        .join()
        .map_err(|_| MemqError::Query(format!("{}: the curve pass panicked", source.name)))?;
    blocks?;
    let rows = rows?;
    out.record("curve_peaks", &files.peaks, rows.peaks);
    out.record("step_levels", &files.step_levels, rows.step_levels);
    out.record("pool_frag", &files.frag, rows.frag);
    out.record("owner_live_peaks", &files.owner_peaks, rows.owner_peaks);
    for (def, file, n) in [
        (ms::curve(), &files.curve, rows.curve),
        (ms::expansions(), &files.expansions, rows.expansions),
        (ms::curve_tiles(), &files.tiles, rows.tiles),
        (ms::usage_tiles(), &files.usage_tiles, rows.usage_tiles),
        (ms::step_usage(), &files.step_usage, rows.step_usage),
    ] {
        if sorted {
            out.record(def.name, file, n);
        } else {
            out.sort_into(file, &def, source.index).await?;
        }
    }
    out.write_tables(
        source.index,
        &[
            (&ms::event_counts(), &event_counts),
            (&ms::owner_totals(), &owner_totals),
            (&ms::oom(), &oom),
            (&ms::mem_snapshots(), &mem_snapshots),
            (
                &ms::steps(),
                &crate::derive::steps::steps_batch(&source.name, &steps),
            ),
        ],
    )
}

/// Table `hal_mallocs`: the HAL MALLOC rows of the sorted events as they stream to the
/// pairing pass (already in the table's order).
struct HalMallocs {
    sink: ParquetSink,
    def: memq_core::catalog::TableDef,
}

impl HalMallocs {
    fn create(path: &Path) -> Result<HalMallocs> {
        let def = ms::hal_mallocs();
        let props = dataset::table_properties(&def);
        Ok(HalMallocs {
            sink: ParquetSink::create_with(path, def.schema(), props)?,
            def,
        })
    }

    fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        use datafusion::arrow::array::{Array, AsArray, BooleanArray};
        use datafusion::arrow::compute::filter_record_batch;
        let text = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| MemqError::query(format!("events batch without text column {name}")))
        };
        let (event, pool) = (text("event")?, text("event_type")?);
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|i| {
                Some(
                    event.is_valid(i)
                        && event.value(i) == "MALLOC"
                        && pool.is_valid(i)
                        && pool.value(i) == "HAL",
                )
            })
            .collect();
        if keep.true_count() == 0 {
            return Ok(());
        }
        let columns = self
            .def
            .columns
            .iter()
            .map(|c| batch.schema().index_of(c.name))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let rows = filter_record_batch(&batch.project(&columns)?, &keep)?;
        self.sink.write(&RecordBatch::try_new(
            self.def.schema(),
            rows.columns().to_vec(),
        )?)
    }
}

/// A companion file (python trace, memory_compare, config.json), read whole.
fn companion(out: &DatasetBuilder, source: &Source) -> Result<SourceReport> {
    let mut rejected = RejectsBuilder::new(&source.name);
    let (def, batch) = match source.kind {
        crate::PYTHON_TRACE => (
            ms::python_trace(),
            companions::read_python_trace_csv(&source.path, &source.name, &mut rejected)?,
        ),
        crate::MEMORY_COMPARE => (
            ms::step_compare(),
            companions::read_memory_compare(&source.path, &source.name, &mut rejected)?,
        ),
        _ => (
            ms::config(),
            companions::read_config(&source.path, &source.name)?,
        ),
    };
    WholeFile {
        tables: vec![(def, batch)],
        rejects: rejected,
        ts_unit: None,
    }
    .write(out, source.index)
}
