//! The `memq` command line (README.md, "Commands").

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use memq::error::{MemqError, Result};
use memq::exec::{self, PrintOptions};
use memq::export::{self, FileFormat, Selection};
use memq::open::{open_inputs, open_inputs_with, IngestTarget};
use memq::output::Format;
use memq::params::{self, Params};
use memq::repl::{self, ReplOptions};
use memq::run::{self as run_files, RunOutput};
use memq_ingest::{ingest, IngestOptions};

#[derive(Parser)]
#[command(
    name = "memq",
    version,
    about = "A columnar SQL engine for accelerator memory dumps (msMemScope, PyTorch snapshots)",
    long_about = "A columnar SQL engine for accelerator memory dumps (msMemScope, PyTorch snapshots).\n\n\
                  `memq INPUT...` opens the interactive shell on a dataset folder, or on dumps, output folders and \
                  pickles (ingested first into a cache in the XDG cache dir, reused while the sources are unchanged).",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// A dataset folder, or dumps / folders / pickles: opens the interactive shell (REPL).
    inputs: Vec<PathBuf>,
    /// Ingest raw inputs into a temporary dataset instead of the cache.
    #[arg(long)]
    no_cache: bool,
    /// Memory for queries and ingest sorts (e.g. 512M, 2G; default 8G or $MEMQ_MEMORY_LIMIT_MB):
    /// operators spill to disk past it, and a query whose result needs more fails with a message.
    #[arg(long, global = true, value_name = "SIZE")]
    memory_limit: Option<String>,
    /// Run SQL on the inputs and exit instead of opening the shell (as `memq sql INPUT -e SQL`).
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SQL",
        conflicts_with = "file"
    )]
    command_sql: Option<String>,
    /// Run the statements of FILE on the inputs and exit.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Rows the table view shows at most: the first and last ones, then "N rows, M shown"
    /// (default 40; 0 shows all).
    #[arg(long, global = true, value_name = "N")]
    maxrows: Option<usize>,
    /// Stop at the first error with exit status 1 (the default when stdin is not a terminal).
    #[arg(long, overrides_with = "no_bail")]
    bail: bool,
    /// Go on after an error, also when stdin is not a terminal.
    #[arg(long)]
    no_bail: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest dumps (CSV, db), output folders and snapshot pickles into a dataset.
    Ingest {
        /// Files or folders.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// The dataset folder to write (NAME.memq).
        #[arg(short, long)]
        output: PathBuf,
        /// Replace an existing dataset.
        #[arg(long)]
        force: bool,
        /// Fail (exit 2, no dataset) if any record cannot be parsed.
        #[arg(long)]
        strict: bool,
    },
    /// Run SQL on a dataset (or on raw inputs, ingested to a temporary dataset first).
    Sql {
        /// A dataset folder, or dumps / folders / pickles.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// The statement(s); several may be separated by `;` (each result is printed).
        #[arg(
            short = 'e',
            long = "execute",
            required_unless_present = "file",
            conflicts_with = "file"
        )]
        sql: Option<String>,
        /// Run the statements of FILE instead of `-e`.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: Option<PathBuf>,
        /// A parameter value: `name=value`, bound to `$name` as a typed literal (as in `memq run`).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Output format on stdout.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the (last) result to a file instead; the writer is chosen by extension.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Show byte columns as integers in table format.
        #[arg(long)]
        raw_bytes: bool,
    },
    /// List the canned analyses with their docs.
    Views {
        /// Show one analysis in full (parameters, columns, SQL).
        name: Option<String>,
        /// Also list the private helpers the analyses build on.
        #[arg(long)]
        all: bool,
    },
    /// List memq's SQL functions with their docs.
    Functions,
    /// Run query files in order; a file refers to a parameter as `$name`.
    Run {
        /// A dataset folder, or dumps / folders / pickles.
        input: PathBuf,
        /// Query files, run in order in one session.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// A parameter value: `name=value` (42 is a BIGINT, 1.5 a DOUBLE, true a BOOLEAN, 'x' or other
        /// text a VARCHAR). Bound as a literal value, never as SQL text.
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Write each result to its own file in DIR: `<file stem>.parquet`, or `<file stem>_1.parquet`, `_2`, ... for a file with several results.
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// On stdout: table (default), csv, tsv, json, ndjson, markdown; with -o: parquet (default),
        /// csv, tsv, json, ndjson, markdown.
        #[arg(long)]
        format: Option<String>,
        /// Show byte columns as integers in table format.
        #[arg(long)]
        raw_bytes: bool,
    },
    /// Export the canned analyses that need no parameter (or the named ones) to a folder, with an index.json.
    Export {
        /// A dataset folder, or dumps / folders / pickles.
        input: PathBuf,
        /// `all` (default) or a comma list of analyses.
        #[arg(long, default_value = "all")]
        views: String,
        /// The folder to write.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// File type of each result.
        #[arg(long, value_enum, default_value_t = FileFormat::Parquet)]
        format: FileFormat,
    },
    /// The diagnosis: findings (problem, evidence, advice) with charts, as HTML, Markdown or JSON (docs/report.md).
    Report {
        /// A dataset folder, or dumps / folders / pickles (memscope, snapshot, or both).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// report.html, report.md or report.json (by extension); without it the Markdown goes to stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Only this memscope pool (HAL, PTA, ...).
        #[arg(long)]
        pool: Option<String>,
        /// Only this device (memscope Device Id, or snapshot device ordinal).
        #[arg(long)]
        device: Option<String>,
    },
    /// A CI gate: measured peak, reservation, leak, fragmentation and OOMs against limits (exit 0 ok, 1 exceeded, 2 bad input).
    Check {
        /// A dataset folder, or dumps / folders / pickles.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Highest peak (e.g. 16GiB, 512MB, 1073741824).
        #[arg(long, value_name = "SIZE")]
        max_peak: Option<String>,
        /// Highest reservation.
        #[arg(long, value_name = "SIZE")]
        max_reserved: Option<String>,
        /// Most memory growing without return (leaking owners).
        #[arg(long, value_name = "SIZE")]
        max_leak: Option<String>,
        /// Highest fragmentation: percent of free memory that cannot serve a request (snapshots).
        #[arg(long, value_name = "PCT")]
        max_frag: Option<f64>,
        /// Fail on any out-of-memory event.
        #[arg(long)]
        no_oom: bool,
        /// text or json.
        #[arg(long, default_value = "text")]
        format: String,
    },
    /// Write an msMemScope-style SQLite db (memscope_dump table) that MindStudio Insight imports.
    ToDb {
        /// A dataset folder, or dumps / folders / pickles.
        input: PathBuf,
        /// The .db file to write (replaced if it exists).
        #[arg(short, long, value_name = "FILE.db")]
        output: PathBuf,
    },
}

fn bind_params(raw: &[String]) -> Result<Params> {
    let mut bound = Params::new();
    for p in raw {
        let (k, v) = params::parse_assignment(p)?;
        bound.insert(k, v);
    }
    Ok(bound)
}

fn run_output(
    output: Option<PathBuf>,
    format: Option<String>,
    raw_bytes: bool,
) -> Result<RunOutput> {
    match output {
        Some(dir) => {
            let f = match format.as_deref() {
                None => FileFormat::Parquet,
                Some(s) => FileFormat::parse(s).ok_or_else(|| {
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
                Some(s) => Format::parse(s).ok_or_else(|| {
                    MemqError::Usage(format!("--format {s}: on stdout use table, csv, tsv, json, ndjson or markdown (parquet needs -o DIR)"))
                })?,
            };
            Ok(RunOutput::Stdout(PrintOptions::new(f, raw_bytes)))
        }
    }
}

/// The SQL of `-e` or `-f FILE`, and the origin errors name (the file).
fn sql_text(sql: Option<String>, file: Option<&std::path::Path>) -> Result<(String, String)> {
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
fn check_output_format(output: Option<&std::path::Path>, format: Format) -> Result<()> {
    let Some(path) = output else { return Ok(()) };
    let by_ext = memq::output::file_format(path)?;
    if by_ext != Some(format) {
        return Err(MemqError::Usage(format!(
            "--format {} does not match -o {}: the file's extension picks the writer; drop --format or name the file .{}",
            format_name(format),
            path.display(),
            match format {
                Format::Markdown => "md",
                f => format_name(f),
            }
        )));
    }
    Ok(())
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Table => "table",
        Format::Csv => "csv",
        Format::Tsv => "tsv",
        Format::Json => "json",
        Format::Ndjson => "ndjson",
        Format::Markdown => "markdown",
    }
}

/// Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
const INTERRUPTED: u8 = 130;

/// Runs the statements of `sql`, each result printed as it streams (the last one written to
/// `output` instead when given). Ctrl-C stops at once: the table is ended, an unfinished file
/// is removed, and memq exits with status 130.
async fn run_sql(
    ctx: &datafusion::prelude::SessionContext,
    sql: &str,
    params: &Params,
    origin: &str,
    print: PrintOptions,
    output: Option<&std::path::Path>,
) -> Result<()> {
    let stop = exec::Stop::new();
    let work = async {
        let mut statements = exec::statements(ctx, sql, params, origin)?;
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
    tokio::pin!(work);
    let stopped = tokio::select! {
        r = &mut work => r?,
        _ = tokio::signal::ctrl_c() => {
            stop.stop();
            // Printing ends its table at the next batch; a computation still running is dropped.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), &mut work).await;
            true
        }
    };
    if stopped {
        eprintln!("memq: interrupted");
        std::process::exit(INTERRUPTED.into());
    }
    Ok(())
}

async fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        if cli.inputs.is_empty() {
            return Err(MemqError::Usage(
                "give a dataset folder or dumps to open the shell, or a command; `memq --help` lists them".into(),
            ));
        }
        let target = if cli.no_cache {
            IngestTarget::Temporary
        } else {
            IngestTarget::Cache(memq_ingest::cache::cache_dir())
        };
        let opened = open_inputs_with(&cli.inputs, true, &target).await?;
        if cli.command_sql.is_some() || cli.file.is_some() {
            let (text, origin) = sql_text(cli.command_sql, cli.file.as_deref())?;
            let mut print = PrintOptions::new(Format::Table, false);
            print.max_rows = cli.maxrows.unwrap_or(print.max_rows);
            print.width = exec::terminal_width();
            return run_sql(
                &opened.engine.ctx,
                &text,
                &Params::new(),
                &origin,
                print,
                None,
            )
            .await;
        }
        let mut opts = ReplOptions::standard();
        opts.max_rows = cli.maxrows;
        opts.bail = match (cli.bail, cli.no_bail) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        return repl::run(opened, opts).await;
    };
    match command {
        Command::Ingest {
            inputs,
            output,
            force,
            strict,
        } => {
            let opts = IngestOptions {
                output,
                force,
                strict,
                progress: true,
            };
            let report = ingest(&inputs, &opts, &memq::catalog()).await?;
            eprintln!("{}", report.summary());
            Ok(())
        }
        Command::Sql {
            inputs,
            sql,
            file,
            params: raw,
            format,
            output,
            raw_bytes,
        } => {
            let bound = bind_params(&raw)?;
            let (text, origin) = sql_text(sql, file.as_deref())?;
            let opened = open_inputs(&inputs, true).await?;
            let mut print = PrintOptions::new(format, raw_bytes);
            print.max_rows = cli.maxrows.unwrap_or(print.max_rows);
            print.width = exec::terminal_width();
            if output.is_some() && format != Format::Table {
                check_output_format(output.as_deref(), format)?;
            }
            run_sql(
                &opened.engine.ctx,
                &text,
                &bound,
                &origin,
                print,
                output.as_deref(),
            )
            .await
        }
        Command::Views { name, all } => {
            let analyses = memq::analyses();
            match name {
                None => {
                    for a in analyses.iter().filter(|a| all || !a.private) {
                        println!("{:<40} {}", a.call_form(), a.summary);
                    }
                }
                Some(n) => {
                    let a = analyses.iter().find(|a| a.name == n).ok_or_else(|| {
                        MemqError::Usage(format!("no analysis named {n}; `memq views` lists them"))
                    })?;
                    println!("{}  (sql/{})\n\n{}\n", a.call_form(), a.path, a.doc);
                    if !a.params.is_empty() {
                        println!("Parameters:");
                        for p in &a.params {
                            let d = p
                                .default
                                .as_deref()
                                .map(|d| format!(" = {d}"))
                                .unwrap_or_default();
                            println!("  {:<12} {}{}  {}", p.name, p.sql_type, d, p.doc);
                        }
                        println!();
                    }
                    println!("Columns:");
                    for c in &a.columns {
                        println!("  {:<20} {:<8} {}", c.name, c.sql_type, c.described());
                    }
                    println!("\n{}", a.body);
                }
            }
            Ok(())
        }
        Command::Functions => {
            for f in memq::functions() {
                println!("{}\n    {}\n", f.usage, f.doc);
            }
            Ok(())
        }
        Command::Run {
            input,
            files,
            params: raw,
            output,
            format,
            raw_bytes,
        } => {
            let bound = bind_params(&raw)?;
            for name in run_files::unused_params(&files, &bound) {
                eprintln!(
                    "memq: warning: --param {name} is not used by any query file (no ${name})"
                );
            }
            let mut out = run_output(output, format, raw_bytes)?;
            if let RunOutput::Stdout(print) = &mut out {
                print.max_rows = cli.maxrows.unwrap_or(print.max_rows);
                print.width = exec::terminal_width();
            }
            let opened = open_inputs(std::slice::from_ref(&input), true).await?;
            run_files::run_files(&opened.engine.ctx, &files, &bound, &out).await?;
            Ok(())
        }
        Command::Export {
            input,
            views,
            output,
            format,
        } => {
            let selection = Selection::parse(&views);
            export::select(&selection, &memq::analyses())?;
            let opened = open_inputs(std::slice::from_ref(&input), true).await?;
            let index = export::export(&opened.engine, &selection, &output, format).await?;
            for v in &index.views {
                eprintln!("{:<32} {:>10} rows  {}", v.view, v.rows, v.file);
            }
            eprintln!(
                "{} analyses written to {} (index in {})",
                index.views.len(),
                output.display(),
                export::INDEX_FILE
            );
            Ok(())
        }
        Command::Report {
            inputs,
            output,
            pool,
            device,
        } => memq::report::run_report(&inputs, output.as_deref(), pool, device).await,
        Command::Check {
            inputs,
            max_peak,
            max_reserved,
            max_leak,
            max_frag,
            no_oom,
            format,
        } => {
            let code = memq::report::run_check(
                &inputs,
                [max_peak, max_reserved, max_leak],
                max_frag,
                no_oom,
                &format,
            )
            .await?;
            if code != 0 {
                std::process::exit(code);
            }
            Ok(())
        }
        Command::ToDb { input, output } => {
            let opened = open_inputs(std::slice::from_ref(&input), true).await?;
            let r = memq_memscope::to_db::to_db(&opened.engine.ctx, &output).await?;
            eprintln!(
                "{} rows in memscope_dump, {} python trace rows in {} table(s) written to {}",
                r.dump_rows,
                r.trace_rows,
                r.trace_tables,
                output.display()
            );
            Ok(())
        }
    }
}

/// Stack of the thread that parses and plans statements, and of the runtime's threads: deep
/// expressions (a long `OR` chain) recurse in the planner; with these stacks they plan, and
/// [`memq::exec`] refuses the ones deeper than it can plan (issue 13, finding 2). Only touched
/// pages cost memory.
const MAIN_STACK_BYTES: usize = 512 << 20;
const WORKER_STACK_BYTES: usize = 64 << 20;

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    if let Some(limit) = &cli.memory_limit {
        match memq::exec::parse_memory_limit(limit) {
            // Read by the engine and the ingest sorts; set before any thread starts.
            Ok(bytes) => {
                std::env::set_var("MEMQ_MEMORY_LIMIT_MB", (bytes >> 20).max(1).to_string())
            }
            Err(e) => {
                eprintln!("memq: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("memq: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let main = std::thread::Builder::new()
        .name("memq-main".into())
        .stack_size(MAIN_STACK_BYTES)
        .spawn(move || runtime.block_on(run(cli)));
    let outcome = match main.map(|t| t.join()) {
        Ok(Ok(outcome)) => outcome,
        // A panic was printed by the panic hook; keep the exit code a panic has (101).
        Ok(Err(_)) => return ExitCode::from(101),
        Err(e) => Err(MemqError::Query(format!(
            "cannot start the main thread: {e}"
        ))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memq: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// `memq ... | head` should end quietly when the reader goes away, as other Unix tools do,
/// instead of panicking on a failed write: restore the default SIGPIPE action Rust ignores.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called once at start-up, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
