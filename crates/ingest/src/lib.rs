//! Turns inputs (dumps, dbs, folders, pickles) into a dataset. The route of one ingest, each
//! step once and in order:
//!
//! 1. [`discover`] expands the user's paths into sources, each claimed by the format of the
//!    [`Catalog`] that recognises it;
//! 2. each format ingests its sources into the [`DatasetBuilder`] (a temporary folder);
//! 3. the `sources` table and the manifest are written and the folder is renamed into place,
//!    so an interrupted run never leaves a half dataset.

pub mod cache;
pub mod discover;

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use memq_core::dataset::{self, DatasetBuilder, IngestOptionsRecord, Manifest, SourceEntry};
use memq_core::error::{MemqError, Result};
use memq_core::format::{Catalog, Progress, Source, SourceReport};
use memq_core::rejects;

pub use discover::discover;

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

fn progress_bar(show: bool, total: u64) -> ProgressBar {
    if !(show && std::io::IsTerminal::is_terminal(&std::io::stderr())) {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} ingest [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

/// Ingests `inputs` into the dataset `opts.output`.
pub async fn ingest(
    inputs: &[PathBuf],
    opts: &IngestOptions,
    catalog: &Catalog,
) -> Result<IngestReport> {
    if inputs.is_empty() {
        return Err(MemqError::Usage("no inputs given".into()));
    }
    let sources = discover(inputs, catalog)?;
    ingest_sources(&sources, opts, catalog).await
}

/// Ingests sources found by [`discover`] into the dataset `opts.output`.
pub async fn ingest_sources(
    sources: &[(usize, Source)],
    opts: &IngestOptions,
    catalog: &Catalog,
) -> Result<IngestReport> {
    let started = Instant::now();
    let input_bytes: u64 = sources
        .iter()
        .map(|(_, s)| fs::metadata(&s.path).map(|m| m.len()).unwrap_or(0))
        .sum();
    let builder = DatasetBuilder::create(&opts.output, opts.force, &catalog.tables())?;
    let bar = progress_bar(opts.progress, input_bytes);
    let progress: Progress = {
        let bar = bar.clone();
        Arc::new(move |n| bar.inc(n))
    };
    let mut reports: Vec<Option<SourceReport>> = vec![None; sources.len()];
    for (f, format) in catalog.formats().iter().enumerate() {
        let mine: Vec<Source> = sources
            .iter()
            .filter(|(owner, _)| *owner == f)
            .map(|(_, s)| s.clone())
            .collect();
        if mine.is_empty() {
            continue;
        }
        bar.set_message(format.name());
        let done = format.ingest(&mine, &builder, progress.clone()).await?;
        for (s, r) in mine.iter().zip(done) {
            reports[s.index] = Some(r);
        }
    }
    bar.finish_and_clear();
    let mut entries = Vec::with_capacity(sources.len());
    for ((_, source), report) in sources.iter().zip(reports) {
        let report = report
            .ok_or_else(|| MemqError::Query(format!("{}: no format ingested it", source.name)))?;
        entries.push(source_entry(source, report)?);
    }
    let total_rejects: u64 = entries.iter().map(|e| e.rejects).sum();
    if opts.strict && total_rejects > 0 {
        return Err(MemqError::Usage(format!(
            "--strict: {total_rejects} record(s) could not be parsed; no dataset written (run without --strict to keep them in `rejects`)"
        )));
    }
    builder.write_table(
        &rejects::sources(),
        sources.len(),
        &rejects::sources_batch(&entries),
    )?;
    let manifest = Manifest {
        schema_version: dataset::SCHEMA_VERSION,
        memq_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        sources: entries,
        tables: builder.table_entries(),
        options: IngestOptionsRecord {
            strict: opts.strict,
        },
    };
    let dataset = builder.commit(&manifest)?;
    Ok(IngestReport {
        dataset,
        manifest,
        elapsed: started.elapsed(),
        input_bytes,
    })
}

fn source_entry(source: &Source, report: SourceReport) -> Result<SourceEntry> {
    let meta = fs::metadata(&source.path).map_err(|e| MemqError::io(&source.path, e))?;
    Ok(SourceEntry {
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
        rows: report.rows,
        rejects: report.rejects,
        ts_unit: report.ts_unit,
        generation: report.generation,
    })
}
