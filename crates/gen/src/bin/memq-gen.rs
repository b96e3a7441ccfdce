//! memq-gen: writes a realistic msMemScope G3 output tree plus `truth.json`.
//!
//! ```text
//! memq-gen -o DIR [--devices N] [--steps N] [--events N] [--leak-bytes N] [--oom]
//!          [--seed N] [--format csv|db] [--small]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use memq_gen::{generate, Format, GenConfig};

#[derive(Clone, Copy, ValueEnum)]
enum Fmt {
    Csv,
    Db,
}

#[derive(Parser)]
#[command(
    name = "memq-gen",
    version,
    about = "Generate a realistic msMemScope G3 dump tree with ground truth (truth.json)"
)]
struct Cli {
    /// Output folder (created; the project folder and truth.json go inside).
    #[arg(short = 'o', long = "out")]
    out: PathBuf,
    /// Start from the committed small fixture's settings (other flags still override).
    #[arg(long)]
    small: bool,
    /// Number of NPUs.
    #[arg(long)]
    devices: Option<u32>,
    /// Number of processes (project folders); NPUs are dealt round-robin.
    #[arg(long)]
    processes: Option<u32>,
    /// Training steps.
    #[arg(long)]
    steps: Option<u32>,
    /// Model layers per NPU (derived from --events when that is given).
    #[arg(long)]
    layers: Option<u32>,
    /// Approximate total number of dump rows to produce.
    #[arg(long)]
    events: Option<u64>,
    /// Bytes leaked per NPU over the run (one block per collected step).
    #[arg(long)]
    leak_bytes: Option<u64>,
    /// End with an OOM in the last step.
    #[arg(long)]
    oom: bool,
    /// PRNG seed.
    #[arg(long)]
    seed: Option<u64>,
    /// csv (the tool's CSV tree) or db (the tool's SQLite files).
    #[arg(long, value_enum)]
    format: Option<Fmt>,
    /// No START/STOP stop period.
    #[arg(long)]
    no_stop: bool,
    /// Call stop() after the last step (exit fill-ins at stop + 1).
    #[arg(long)]
    end_stopped: bool,
    /// Also write compare/memory_compare_<ts>.csv.
    #[arg(long)]
    compare: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut cfg = if cli.small {
        GenConfig::small()
    } else {
        GenConfig::default()
    };
    if let Some(v) = cli.devices {
        cfg.devices = v;
    }
    if let Some(v) = cli.processes {
        cfg.processes = v;
    }
    if let Some(v) = cli.steps {
        cfg.steps = v;
        cfg.stop_period = cfg.stop_period.and(GenConfig::mid_stop(v));
    }
    if let Some(v) = cli.layers {
        cfg.layers = v;
    }
    if let Some(n) = cli.events {
        cfg.scale_to_events(n, cli.steps.is_some());
        if let Some(v) = cli.layers {
            cfg.layers = v;
        }
    }
    if let Some(v) = cli.leak_bytes {
        cfg.leak_bytes = v;
    }
    if cli.oom {
        cfg.oom = true;
    }
    if let Some(v) = cli.seed {
        cfg.seed = v;
    }
    if let Some(f) = cli.format {
        cfg.format = match f {
            Fmt::Csv => Format::Csv,
            Fmt::Db => Format::Db,
        };
    }
    if cli.no_stop {
        cfg.stop_period = None;
    }
    if cli.end_stopped {
        cfg.end_stopped = true;
    }
    if cli.compare {
        cfg.compare = true;
    }
    let t0 = Instant::now();
    match generate(&cfg, &cli.out) {
        Ok(t) => {
            let dumps = t.files.iter().filter(|f| f.kind == "dump").count();
            eprintln!(
                "memq-gen: {} dump rows in {} dump files ({} devices, {} steps, {} layers) in {:.2}s -> {}",
                t.rows_written,
                dumps,
                cfg.devices,
                cfg.steps,
                cfg.layers,
                t0.elapsed().as_secs_f64(),
                cli.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("memq-gen: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
