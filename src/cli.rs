//! The `memq` command line (README.md, "Commands"): parsed by clap, each command a call to the
//! library. The `memq` binary and the Python package's `memq` command both run [`main`].

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::api::{self, Dataset, IngestOptions, OpenOptions};
use crate::commands::export::count;
use crate::commands::sql::{
    bind_params, check_output_format, interruptible, on_cluster, run_output, run_sql, sql_text,
};
use crate::error::{MemqError, Result};
use crate::exec::{self, PrintOptions};
use crate::output::Format;

use crate::repl::{self, ReplOptions};
use crate::run::{self as run_files, RunOutput};

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
    /// Ingest raw inputs into a temporary dataset instead of the cache (every command).
    #[arg(long, global = true)]
    no_cache: bool,
    /// Agent mode: Markdown tables with `name:TYPE` headers and errors as one JSON line on
    /// stderr (also when stdout is not a terminal and $AI_AGENT is set).
    #[arg(long, global = true)]
    agent: bool,
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
    /// A parameter value, `name=value`, bound to `$name` in `-c`/`-f` statements and in the
    /// shell (as `\set name value`).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
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
        #[arg(long, conflicts_with = "append")]
        force: bool,
        /// Add the inputs to the existing dataset (more ranks of a job): its files are kept as
        /// they are, sources it holds already are skipped; atomic like any ingest.
        #[arg(long)]
        append: bool,
        /// Fail (exit 2, no dataset) if any record cannot be parsed.
        #[arg(long)]
        strict: bool,
    },
    /// Run SQL on a dataset, or on raw inputs ingested first through the dataset cache.
    ///
    /// Raw inputs (dumps, output folders, pickles) are ingested once into the per-user cache,
    /// $XDG_CACHE_HOME/memq/datasets/ (default ~/.cache/memq/datasets/), one dataset per set of
    /// input paths, and that dataset is reused while every source file is unchanged (same size
    /// and modification time) and memq is the same version; otherwise it is ingested again.
    /// --no-cache (or MEMQ_NO_CACHE=1) ingests into a temporary dataset instead, removed at exit.
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
        /// Show values as stored in table format: times as ns/µs integers, bytes as integers,
        /// floats in full (`--raw-bytes` is the old name).
        #[arg(long = "raw", visible_alias = "raw-bytes")]
        raw_bytes: bool,
        /// Draw the result as a terminal chart: its first numeric column over its first column
        /// (the same as `--format chart`).
        #[arg(long)]
        chart: bool,
        /// Run on the memq cluster at df://HOST:PORT (default $MEMQ_CLUSTER; docs/scale-out.md).
        #[arg(long, value_name = "df://HOST:PORT")]
        cluster: Option<String>,
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
        /// Show values as stored in table format: times as integers, bytes as integers, floats in
        /// full (`--raw-bytes` is the old name).
        #[arg(long = "raw", visible_alias = "raw-bytes")]
        raw_bytes: bool,
        /// Run on the memq cluster at df://HOST:PORT (default $MEMQ_CLUSTER; docs/scale-out.md).
        #[arg(long, value_name = "df://HOST:PORT")]
        cluster: Option<String>,
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
        #[arg(long, value_enum, default_value_t = Format::Parquet)]
        format: Format,
        /// Replace a previous export in DIR (only memq's own files; anything else is refused).
        #[arg(long)]
        force: bool,
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
    /// Run a memq cluster's scheduler or an executor (Apache DataFusion Ballista; docs/scale-out.md).
    Cluster {
        #[command(subcommand)]
        role: crate::cluster::ClusterCommand,
    },
    /// The memory explorer in the browser: timelines, the state at any moment, findings, SQL (docs/serve.md).
    Serve {
        /// A dataset folder, or dumps / folders / pickles / traces.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// The port to listen on (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// The address to listen on; anything but 127.0.0.1 lets other machines reach it (the
        /// token is still needed).
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// Print the URL only; do not open a browser.
        #[arg(long)]
        no_open: bool,
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

async fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        if cli.inputs.is_empty() {
            return Err(MemqError::Usage(
                "give a dataset folder or dumps to open the shell, or a command; `memq --help` lists them".into(),
            ));
        }
        let bound = bind_params(&cli.params)?;
        let opened = Dataset::open(&cli.inputs, &OpenOptions::with_progress()).await?;
        let bail = match (cli.bail, cli.no_bail) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        if let (None, Some(file)) = (&cli.command_sql, &cli.file) {
            // A script for the shell: meta commands (`\format csv`, `\i`) as `\i` takes them.
            let (text, origin) = sql_text(None, Some(file))?;
            let mut opts = ReplOptions::standard();
            opts.max_rows = cli.maxrows;
            opts.params = bound;
            opts.bail = bail;
            return repl::run_file(opened, opts, &origin, &text).await;
        }
        if cli.command_sql.is_some() {
            let (text, origin) = sql_text(cli.command_sql, None)?;
            let mut print = PrintOptions::new(Format::Table, false);
            print.max_rows = cli.maxrows.unwrap_or(print.max_rows);
            print.width = exec::terminal_width();
            return run_sql(&opened, &text, &bound, &origin, print, None).await;
        }
        let mut opts = ReplOptions::standard();
        opts.max_rows = cli.maxrows;
        opts.params = bound;
        opts.bail = bail;
        return repl::run(opened, opts).await;
    };
    match command {
        Command::Ingest {
            inputs,
            output,
            force,
            append,
            strict,
        } => {
            let opts = IngestOptions {
                output,
                force,
                append,
                strict,
                progress: true,
            };
            let report = api::ingest(&inputs, &opts).await?;
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
            chart,
            cluster,
        } => {
            let format = if chart { Format::Chart } else { format };
            let bound = bind_params(&raw)?;
            let (text, origin) = sql_text(sql, file.as_deref())?;
            let ds = Dataset::open(&inputs, &on_cluster(cluster)).await?;
            let mut print = PrintOptions::new(format, raw_bytes);
            print.max_rows = cli.maxrows.unwrap_or(print.max_rows);
            print.width = exec::terminal_width();
            if output.is_some() && format != Format::Table {
                check_output_format(output.as_deref(), format)?;
            }
            run_sql(&ds, &text, &bound, &origin, print, output.as_deref()).await
        }
        Command::Views { name, all } => {
            let analyses = crate::analyses();
            match name {
                None => print!(
                    "{}",
                    repl::meta::fit_text(
                        &crate::guide::listing(analyses, all),
                        exec::terminal_width()
                    )
                ),
                Some(n) => {
                    let a = crate::guide::analysis_named(analyses, &n)
                        .map_err(|e| MemqError::Usage(format!("{e} (`memq views` lists them)")))?;
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
            for f in crate::functions() {
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
            cluster,
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
            let ds = Dataset::open(std::slice::from_ref(&input), &on_cluster(cluster)).await?;
            let stop = exec::Stop::new();
            let work = async {
                run_files::run_files(&ds, &files, &bound, &out, &stop).await?;
                Ok(stop.is_stopped())
            };
            interruptible(work, &stop).await
        }
        Command::Export {
            input,
            views,
            output,
            format,
            force,
        } => crate::commands::export::run_export(&input, &views, &output, format, force).await,
        Command::Report {
            inputs,
            output,
            pool,
            device,
        } => crate::commands::report::run_report(&inputs, output.as_deref(), pool, device).await,
        Command::Check {
            inputs,
            max_peak,
            max_reserved,
            max_leak,
            max_frag,
            no_oom,
            format,
        } => {
            let code = crate::commands::report::run_check(
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
        Command::Serve {
            inputs,
            port,
            host,
            no_open,
        } => {
            crate::serve::run(crate::serve::ServeOptions {
                inputs,
                port,
                host,
                open: !no_open,
            })
            .await
        }
        Command::Cluster { role } => crate::cluster::run(role, cli.memory_limit.as_deref()).await,
        Command::ToDb { input, output } => {
            let ds =
                Dataset::open(std::slice::from_ref(&input), &OpenOptions::with_progress()).await?;
            let r = ds.to_db(&output).await?;
            eprintln!(
                "{} in memscope_dump, {} in {} written to {}",
                count(r.dump_rows, "row", "rows"),
                count(r.trace_rows, "python trace row", "python trace rows"),
                count(r.trace_tables as u64, "table", "tables"),
                output.display()
            );
            Ok(())
        }
    }
}

/// Stack of the thread that parses and plans statements, and of the runtime's threads: deep
/// expressions (a long `OR` chain) recurse in the planner; with these stacks they plan, and
/// [`crate::exec`] refuses the ones deeper than it can plan instead of overflowing the stack.
/// Only touched pages cost memory.
const MAIN_STACK_BYTES: usize = 512 << 20;
const WORKER_STACK_BYTES: usize = 64 << 20;

/// Runs the command line `args` (the program name first) and returns the exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> u8 {
    restore_sigpipe();
    memq_core::fit_to_address_space_cap();
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors as one JSON line in agent mode; help and --version as clap prints them.
            if e.use_stderr() && crate::agent::wanted(args.iter().any(|a| a == "--agent")) {
                let text = e.render().to_string();
                let first = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                crate::agent::init(true);
                crate::agent::report_error("", &MemqError::Usage(first.to_string()));
                return 2;
            }
            e.exit()
        }
    };
    crate::agent::init(crate::agent::wanted(cli.agent));
    if cli.no_cache {
        // Read by crate::open for every command; set before any thread starts.
        std::env::set_var(crate::open::NO_CACHE_ENV, "1");
    }
    if let Some(limit) = &cli.memory_limit {
        match crate::exec::parse_memory_limit(limit) {
            // Read by the engine and the ingest sorts as they open.
            Ok(bytes) => memq_core::set_memory_limit(bytes.max(1 << 20)),
            Err(e) => {
                crate::agent::report_error("memq: ", &e);
                return 2;
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
            return 1;
        }
    };
    let main = std::thread::Builder::new()
        .name("memq-main".into())
        .stack_size(MAIN_STACK_BYTES)
        .spawn(move || runtime.block_on(run(cli)));
    let outcome = match main.map(|t| t.join()) {
        Ok(Ok(outcome)) => outcome,
        // A panic was printed by the panic hook; keep the exit code a panic has (101).
        Ok(Err(_)) => return 101,
        Err(e) => Err(MemqError::Query(format!(
            "cannot start the main thread: {e}"
        ))),
    };
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            crate::agent::report_error("memq: ", &e);
            e.exit_code() as u8
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
