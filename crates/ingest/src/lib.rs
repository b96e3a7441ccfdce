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
pub mod ranks;

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Add the sources to the existing dataset `output` instead of replacing it; sources it
    /// already holds (same path, size and mtime) are skipped.
    pub append: bool,
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
        let shown = self.manifest.tables.iter().filter(|t| t.rows > 0);
        // Names as wide as the longest, so the counts line up.
        let name_w = shown.clone().map(|t| t.name.len()).max().unwrap_or(0);
        for t in shown {
            out.push_str(&format!("  {:<name_w$} {:>12} rows\n", t.name, t.rows));
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

/// Bytes read and bytes to read by the ingests of this process, for a display that polls
/// rather than draws on stderr (the Python module's progress bar in a notebook).
static READ: AtomicU64 = AtomicU64::new(0);
static TO_READ: AtomicU64 = AtomicU64::new(0);

/// The progress of the ingest running in this process: bytes of its inputs read so far, and
/// in all (what the last one read once it ended; `(0, 0)` before any).
pub fn progress() -> (u64, u64) {
    (
        READ.load(Ordering::Relaxed),
        TO_READ.load(Ordering::Relaxed),
    )
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
    let (builder, old) = if opts.append && opts.output.exists() {
        let (builder, manifest) = DatasetBuilder::append_to(&opts.output, &catalog.tables())?;
        (builder, manifest.sources)
    } else {
        (
            DatasetBuilder::create(&opts.output, opts.force, &catalog.tables())?,
            Vec::new(),
        )
    };
    let sources = new_sources(sources, &old)?;
    if sources.is_empty() {
        // Everything is in the dataset already: it stays as it is.
        drop(builder);
        let manifest = Manifest::read(&opts.output)?;
        return Ok(IngestReport {
            dataset: opts.output.clone(),
            manifest,
            elapsed: started.elapsed(),
            input_bytes: 0,
        });
    }
    let sources = &sources[..];
    let input_bytes: u64 = sources
        .iter()
        .map(|(_, s)| fs::metadata(&s.path).map(|m| m.len()).unwrap_or(0))
        .sum();
    let placements = place(sources, &old);
    let mut ranks: Vec<i64> = old.iter().map(|e| e.rank).collect();
    ranks.extend(placements.iter().map(|p| p.rank));
    let builder = builder.with_ranks(ranks);
    let bar = progress_bar(opts.progress, input_bytes);
    READ.store(0, Ordering::Relaxed);
    TO_READ.store(input_bytes, Ordering::Relaxed);
    let progress: Progress = {
        let bar = bar.clone();
        Arc::new(move |n| {
            bar.inc(n);
            READ.fetch_add(n, Ordering::Relaxed);
        })
    };
    let offset = old.len();
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
            reports[s.index - offset] = Some(r);
        }
    }
    bar.finish_and_clear();
    READ.store(input_bytes, Ordering::Relaxed);
    let mut entries = old;
    for (((_, source), report), placement) in sources.iter().zip(reports).zip(placements) {
        let report = report
            .ok_or_else(|| MemqError::Query(format!("{}: no format ingested it", source.name)))?;
        entries.push(source_entry(source, report, placement)?);
    }
    let total_rejects: u64 = entries[offset..].iter().map(|e| e.rejects).sum();
    if opts.strict && total_rejects > 0 {
        return Err(MemqError::Usage(format!(
            "--strict: {total_rejects} record(s) could not be parsed; no dataset written (run without --strict to keep them in `rejects`)"
        )));
    }
    builder.write_table(
        &rejects::sources(),
        entries.len(),
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
        stored: Vec::new(),
        library: None,
        facts: Default::default(),
    };
    let manifest = store_views(&builder, manifest, catalog).await?;
    let dataset = builder.commit(&manifest)?;
    Ok(IngestReport {
        dataset,
        manifest,
        elapsed: started.elapsed(),
        input_bytes,
    })
}

/// The library's stored views (`-- @stored`) computed over the dataset being built, and
/// listed in its manifest with the answers of the engine's fact queries (`Manifest::facts`).
/// A view that cannot be computed is reported and left to be planned by each query instead
/// (crates/engine/src/stored.rs): the dataset is whole without it. A file that cannot be
/// written (a full disk) ends the ingest like any other write.
async fn store_views(
    builder: &DatasetBuilder,
    mut manifest: Manifest,
    catalog: &Catalog,
) -> Result<Manifest> {
    let fatal = |e: &MemqError| matches!(e, MemqError::Input { .. });
    use memq_engine::{facts, library, stored, Engine};
    let warn = |what: &str, e: &MemqError| {
        eprintln!("memq: warning: {what} not stored with the dataset ({e}); queries compute it");
    };
    let analyses = library::analyses(&catalog.sql_files());
    let opened = async {
        let views = stored::wanted(&analyses, &manifest)?;
        if views.is_empty() {
            return Ok(None);
        }
        builder.write_manifest(&manifest)?;
        Ok::<_, MemqError>(Some((Engine::open(builder.root(), catalog).await?, views)))
    };
    let (engine, views) = match opened.await {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(manifest),
        Err(e) if fatal(&e) => return Err(e),
        Err(e) => {
            warn("the stored views were", &e);
            return Ok(manifest);
        }
    };
    for (name, outcome) in stored::store(&engine, &views).await {
        match outcome {
            Ok(entry) => {
                manifest.stored.push(name);
                manifest.tables.push(entry);
            }
            Err(e) if fatal(&e) => return Err(e),
            Err(e) => warn(&format!("view {name} was"), &e),
        }
    }
    manifest.facts = facts::Facts::of(engine.ctx.state().config())
        .compute(&engine.ctx)
        .await;
    manifest.library = Some(stored::fingerprint(&analyses));
    Ok(manifest)
}

/// The sources to ingest, numbered after the `old` ones (an append) with names unique among
/// them; a source the dataset holds already (same path, size and mtime) is left out, one that
/// changed since is an error.
fn new_sources(sources: &[(usize, Source)], old: &[SourceEntry]) -> Result<Vec<(usize, Source)>> {
    let mut names: std::collections::HashSet<String> =
        old.iter().map(|e| e.source.clone()).collect();
    let by_path: std::collections::HashMap<&str, &SourceEntry> =
        old.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut out = Vec::new();
    for (format, source) in sources {
        if let Some(e) = by_path.get(canonical(source).as_str()) {
            let meta = fs::metadata(&source.path).map_err(|e| MemqError::io(&source.path, e))?;
            if meta.len() == e.size_bytes && mtime_ns(&meta) == e.mtime_unix_ns {
                continue;
            }
            return Err(MemqError::input(
                &source.path,
                memq_core::error::Location::None,
                format!(
                    "--append: changed since it was ingested as `{}`; ingest again without --append to replace it",
                    e.source
                ),
            ));
        }
        let mut s = source.clone();
        s.index = old.len() + out.len();
        let mut n = 1;
        while names.contains(&s.name) {
            n += 1;
            s.name = format!("{}#{n}", source.name);
        }
        names.insert(s.name.clone());
        out.push((*format, s));
    }
    Ok(out)
}

/// Where each source sits in the job ([`ranks`]), after the `old` sources of an append.
fn place(sources: &[(usize, Source)], old: &[SourceEntry]) -> Vec<ranks::Placement> {
    let paths: Vec<(PathBuf, &str)> = sources
        .iter()
        .map(|(_, s)| (PathBuf::from(canonical(s)), s.name.as_str()))
        .collect();
    let refs: Vec<(&std::path::Path, &str)> =
        paths.iter().map(|(p, n)| (p.as_path(), *n)).collect();
    let known: Vec<ranks::Known> = old
        .iter()
        .map(|e| ranks::Known {
            path: e.path.clone(),
            name: e.source.clone(),
            rank: e.rank,
        })
        .collect();
    ranks::place(&refs, &known)
}

fn canonical(source: &Source) -> String {
    source
        .path
        .canonicalize()
        .unwrap_or_else(|_| source.path.clone())
        .display()
        .to_string()
}

fn mtime_ns(meta: &fs::Metadata) -> i128 {
    meta.modified()
        .ok()
        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

fn source_entry(
    source: &Source,
    report: SourceReport,
    placement: ranks::Placement,
) -> Result<SourceEntry> {
    let meta = fs::metadata(&source.path).map_err(|e| MemqError::io(&source.path, e))?;
    Ok(SourceEntry {
        source: source.name.clone(),
        path: canonical(source),
        kind: source.kind.label().to_string(),
        size_bytes: meta.len(),
        mtime_unix_ns: mtime_ns(&meta),
        rows: report.rows,
        rejects: report.rejects,
        ts_unit: report.ts_unit,
        generation: report.generation,
        rank: placement.rank,
        node: placement.node,
        device: placement.device,
        pid: placement.pid,
    })
}
