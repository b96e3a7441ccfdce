//! What `memq sql`, `memq run` and the shell's `-c`/`-f` share: their arguments (`--param`,
//! `-e`/`-f`, `-o` with `--format`), how their input is opened (a cluster from `--cluster` or
//! `$MEMQ_CLUSTER`), and the statements run through the library API with every result printed
//! or written as it streams, Ctrl-C ending them cleanly.

use std::path::PathBuf;

use crate::api::{Dataset, OpenOptions};
use crate::error::{MemqError, Result};
use crate::exec::{self, PrintOptions};
use crate::output::Format;
use crate::params::{self, Params};
use crate::run::RunOutput;

pub(crate) fn bind_params(raw: &[String]) -> Result<Params> {
    let mut bound = Params::new();
    for p in raw {
        let (k, v) = params::parse_assignment(p)?;
        bound.insert(k, v);
    }
    Ok(bound)
}

pub(crate) fn run_output(
    output: Option<PathBuf>,
    format: Option<String>,
    raw_bytes: bool,
) -> Result<RunOutput> {
    match output {
        Some(dir) => {
            let f = match format.as_deref() {
                None => Format::Parquet,
                Some(s) => Format::parse(s)
                    .filter(|f| f.ext().is_some())
                    .ok_or_else(|| {
                        MemqError::Usage(format!(
                            "--format {s}: with -o use parquet, csv, tsv, json, ndjson or markdown"
                        ))
                    })?,
            };
            Ok(RunOutput::Dir(dir, f))
        }
        None => {
            let f = match format.as_deref() {
                None => Format::Table,
                Some(s) => Format::parse(s).filter(|f| *f != Format::Parquet).ok_or_else(|| {
                    MemqError::Usage(format!("--format {s}: on stdout use table, csv, tsv, json, ndjson or markdown (parquet needs -o DIR)"))
                })?,
            };
            Ok(RunOutput::Stdout(PrintOptions::new(f, raw_bytes)))
        }
    }
}

/// The SQL of `-e` or `-f FILE`, and the origin errors name (the file).
pub(crate) fn sql_text(
    sql: Option<String>,
    file: Option<&std::path::Path>,
) -> Result<(String, String)> {
    match (sql, file) {
        (Some(s), _) => Ok((s, String::new())),
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f).map_err(|e| MemqError::io(f, e))?;
            Ok((text, f.display().to_string()))
        }
        (None, None) => Err(MemqError::Usage(
            "give the SQL with -e or a file with -f".into(),
        )),
    }
}

/// `-o x.parquet --format csv`: the file's extension picks the writer, so a different
/// `--format` is a mistake, not something to ignore.
pub(crate) fn check_output_format(output: Option<&std::path::Path>, format: Format) -> Result<()> {
    let Some(path) = output else { return Ok(()) };
    let by_ext = crate::output::file_format(path)?;
    if by_ext != format {
        let name = format.name();
        return Err(MemqError::Usage(format!(
            "--format {name} does not match -o {}: the file's extension picks the writer; drop --format or name the file .{}",
            path.display(),
            format.ext().unwrap_or(&name),
        )));
    }
    Ok(())
}

/// Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
pub(crate) const INTERRUPTED: u8 = 130;

/// Runs `work`, which says whether it was stopped, until it ends or Ctrl-C comes: then `stop`
/// fires, the work has a second to end its table or remove its unfinished file, and memq exits
/// with status 130.
pub(crate) async fn interruptible(
    work: impl std::future::Future<Output = Result<bool>>,
    stop: &exec::Stop,
) -> Result<()> {
    let stopped = {
        tokio::pin!(work);
        tokio::select! {
            r = &mut work => r?,
            _ = tokio::signal::ctrl_c() => {
                stop.stop();
                // Printing ends its table at the next batch; a computation still running is
                // dropped with the work (an unfinished file with it).
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), &mut work).await;
                true
            }
        }
    };
    if stopped {
        eprintln!("memq: interrupted");
        std::process::exit(INTERRUPTED.into());
    }
    Ok(())
}

/// Runs the statements of `sql`, each result printed as it streams (the last one written to
/// `output` instead when given). Ctrl-C stops at once: the table is ended, an unfinished file
/// is removed, and memq exits with status 130.
pub(crate) async fn run_sql(
    ds: &Dataset,
    sql: &str,
    params: &Params,
    origin: &str,
    print: PrintOptions,
    output: Option<&std::path::Path>,
) -> Result<()> {
    let stop = exec::Stop::new();
    let work = async {
        let mut statements = ds.statements(sql, params, origin)?;
        while let Some(r) = statements.next().await {
            let mut r = r?;
            if !r.has_columns() {
                continue;
            }
            let last = statements.remaining() == 0;
            let shown = match output {
                Some(path) if last => exec::write(&mut r, path, &stop).await?,
                _ => print.print(&mut r, &stop).await?,
            };
            if shown.stopped() {
                return Ok(true);
            }
        }
        Ok::<bool, MemqError>(false)
    };
    interruptible(work, &stop).await
}

/// How `memq sql` and `memq run` open their input: with a progress bar, on the cluster given
/// (`--cluster`), else on `$MEMQ_CLUSTER`'s.
pub(crate) fn on_cluster(cluster: Option<String>) -> OpenOptions {
    let env = std::env::var(crate::open::CLUSTER_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    OpenOptions {
        cluster: cluster.or(env),
        ..OpenOptions::with_progress()
    }
}
