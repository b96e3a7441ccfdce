//! The `memq` command line (design.md §2).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use memq::engine::{library, udf};
use memq::error::{MemqError, Result};
use memq::ingest::{ingest, IngestOptions};
use memq::open::open_inputs;
use memq::output::{self, BytesDisplay, Format};

#[derive(Parser)]
#[command(name = "memq", version, about = "A columnar SQL engine for accelerator memory dumps (msMemScope, PyTorch snapshots)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
        #[arg(short = 'e', long = "execute")]
        sql: String,
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
    },
    /// List memq's SQL functions with their docs.
    Functions,
}

fn split_statements(sql: &str) -> Vec<String> {
    match datafusion::sql::parser::DFParser::parse_sql(sql) {
        Ok(stmts) if stmts.len() > 1 => stmts.iter().map(|s| s.to_string()).collect(),
        _ => vec![sql.to_string()],
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Ingest { inputs, output, force, strict } => {
            let opts = IngestOptions { output, force, strict, progress: true };
            let report = ingest(&inputs, &opts).await?;
            eprintln!("{}", report.summary());
            Ok(())
        }
        Command::Sql { inputs, sql, format, output, raw_bytes } => {
            let opened = open_inputs(&inputs, true).await?;
            let statements = split_statements(&sql);
            let last = statements.len() - 1;
            for (i, stmt) in statements.iter().enumerate() {
                let df = opened.engine.dataframe(stmt).await?;
                let schema = df.schema().inner().clone();
                let batches = df.collect().await?;
                match (&output, i == last) {
                    (Some(path), true) => {
                        let rows = output::write_file(path, &schema, &batches)?;
                        eprintln!("{rows} rows written to {}", path.display());
                    }
                    _ => {
                        let bytes = if raw_bytes || format != Format::Table { BytesDisplay::Raw } else { BytesDisplay::Human };
                        print!("{}", output::render(&schema, &batches, format, bytes)?);
                    }
                }
            }
            Ok(())
        }
        Command::Views { name } => {
            let analyses = library::analyses();
            match name {
                None => {
                    for a in &analyses {
                        println!("{:<40} {}", a.call_form(), a.summary);
                    }
                }
                Some(n) => {
                    let a = analyses
                        .iter()
                        .find(|a| a.name == n)
                        .ok_or_else(|| MemqError::Usage(format!("no analysis named {n}; `memq views` lists them")))?;
                    println!("{}  (sql/{})\n\n{}\n", a.call_form(), a.path, a.doc);
                    if !a.params.is_empty() {
                        println!("Parameters:");
                        for p in &a.params {
                            let d = p.default.as_deref().map(|d| format!(" = {d}")).unwrap_or_default();
                            println!("  {:<12} {}{}  {}", p.name, p.sql_type, d, p.doc);
                        }
                        println!();
                    }
                    println!("Columns:");
                    for (c, d) in &a.columns {
                        println!("  {c:<20} {d}");
                    }
                    println!("\n{}", a.body);
                }
            }
            Ok(())
        }
        Command::Functions => {
            for f in udf::docs() {
                println!("{}\n    {}\n", f.usage, f.doc);
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("memq: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memq: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
