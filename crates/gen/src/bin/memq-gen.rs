//! memq-gen: writes a realistic msMemScope G3 output tree plus `truth.json`.
//!
//! ```text
//! memq-gen -o DIR [--devices N] [--steps N] [--events N] [--leak-bytes N] [--oom]
//!          [--seed N] [--format csv|db] [--small] [--wasted] [--tool-style]
//! memq-gen -o DIR --compare-run [--extra-bytes N] [--extra-held N] [other run flags]
//! memq-gen -o JOB --nodes N --ranks-per-node M [--events N (per rank)] [--steps N]
//!          [--layers N] [--peak-rank R] [--skew-rank R --skew-step S] [--skew-ratio X]
//!          [--leak-rank R] [--leak-bytes N] [--oom (the peak rank)] [--seed N]
//!          [--format csv|db]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use memq_gen::{generate, generate_job, generate_pair, ExtraOwner, Format, GenConfig, JobConfig};

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
    /// A periodic leak: its blocks only in every N-th collected step (default: every step).
    #[arg(long)]
    leak_every: Option<u32>,
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
    /// A multi-rank job: this many nodes (folders JOB/node<k>/memscopeDumpResults/), one
    /// process per NPU, the pid of local rank j the same on every node; writes
    /// JOB/job_truth.json and JOB/node<k>/truth_rank<r>.json. --events is then per rank.
    #[arg(long)]
    nodes: Option<u32>,
    /// Job: ranks (processes, NPUs) per node.
    #[arg(long, default_value_t = 8)]
    ranks_per_node: u32,
    /// Job: the rank with the highest PTA peak (it holds 125 % of the others' activations in
    /// every step). Default 5 (with fewer than 8 ranks: the last but one).
    #[arg(long)]
    peak_rank: Option<u32>,
    /// Job: the rank with one extra transient allocation in --skew-step (default 2).
    #[arg(long)]
    skew_rank: Option<u32>,
    /// Job: the skewed step (default 3; with fewer than 4 steps the last but one).
    #[arg(long)]
    skew_step: Option<u32>,
    /// Job: the wanted max/median of the per-rank step peaks in the skew step (default 1.4).
    #[arg(long)]
    skew_ratio: Option<f64>,
    /// Job: the only rank that leaks --leak-bytes (default 6; with fewer than 8 ranks the
    /// last); --leak-bytes defaults to 64 MiB in a job (less for a small model: a quarter of
    /// the peak rank's extra activations).
    #[arg(long)]
    leak_rank: Option<u32>,
    /// Inject wasted memory: three PTA blocks per NPU (allocated long before first use, held
    /// long after last use, idle between two uses) across the peak; truth `wasted`.
    #[arg(long)]
    wasted: bool,
    /// Write as the tool's newer builds do: `process_used` and `device_used` on every device
    /// MALLOC and FREE, and C stacks down to the interpreter's frames (same rows and truth).
    #[arg(long)]
    tool_style: bool,
    /// Write two runs, DIR/runA and DIR/runB (two captures), B with an extra owner
    /// (PTA@eval_cache) allocating --extra-bytes per step and NPU and holding --extra-held of
    /// them to the end; truth in DIR/pair_truth.json.
    #[arg(long)]
    compare_run: bool,
    /// --compare-run: bytes the extra owner allocates per step and NPU (default 5 MiB).
    #[arg(long)]
    extra_bytes: Option<u64>,
    /// --compare-run: of those, bytes held to the end (default 1 MiB).
    #[arg(long)]
    extra_held: Option<u64>,
}

fn job(cli: &Cli, nodes: u32) -> ExitCode {
    let mut cfg = JobConfig::new(nodes, cli.ranks_per_node);
    if let Some(v) = cli.steps {
        cfg.set_steps(v);
    }
    if let Some(v) = cli.layers {
        cfg.rank.layers = v;
    }
    if let Some(n) = cli.events {
        cfg.rank.scale_to_events(n, cli.steps.is_some());
        if let Some(v) = cli.layers {
            cfg.rank.layers = v;
        }
        let steps = cfg.rank.steps;
        cfg.set_steps(steps);
    }
    for (slot, v) in [
        (&mut cfg.peak_rank, cli.peak_rank),
        (&mut cfg.skew_rank, cli.skew_rank),
        (&mut cfg.skew_step, cli.skew_step),
        (&mut cfg.leak_rank, cli.leak_rank),
    ] {
        if let Some(v) = v {
            *slot = v;
        }
    }
    if let Some(v) = cli.skew_ratio {
        cfg.skew_ratio = v;
    }
    if let Some(v) = cli.leak_bytes {
        cfg.leak_bytes = Some(v);
    }
    if let Some(v) = cli.seed {
        cfg.rank.seed = v;
    }
    if let Some(Fmt::Db) = cli.format {
        cfg.rank.format = Format::Db;
    }
    cfg.oom = cli.oom;
    cfg.rank.end_stopped = cli.end_stopped;
    cfg.rank.compare = cli.compare;
    let t0 = Instant::now();
    match generate_job(&cfg, &cli.out) {
        Ok(t) => {
            eprintln!(
                "memq-gen: job of {} ranks ({} nodes × {}), {} dump rows ({} steps, {} layers per rank) in {:.2}s -> {} (peak rank {}, skew rank {} in step {} at {:.2}× the median, leak rank {})",
                t.ranks.len(),
                t.nodes,
                t.ranks_per_node,
                t.ranks.iter().map(|r| r.rows).sum::<u64>(),
                cfg.rank.steps,
                cfg.rank.layers,
                t0.elapsed().as_secs_f64(),
                cli.out.display(),
                t.peak_rank,
                t.skew.rank,
                t.skew.step,
                t.skew.ratio,
                t.leak_rank
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("memq-gen: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(nodes) = cli.nodes {
        return job(&cli, nodes);
    }
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
    if let Some(v) = cli.leak_every {
        cfg.leak_every = Some(v);
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
    if cli.wasted {
        cfg.wasted = true;
    }
    cfg.tool_style = cli.tool_style;
    let t0 = Instant::now();
    if cli.compare_run {
        let mut x = ExtraOwner::default();
        if let Some(v) = cli.extra_bytes {
            x.bytes_per_step = v;
        }
        if let Some(v) = cli.extra_held {
            x.held_per_step = v;
        }
        return match generate_pair(&cfg, x, &cli.out) {
            Ok(t) => {
                let changed = t.owners.iter().filter(|o| o.status != "same").count();
                eprintln!(
                    "memq-gen: two runs in {:.2}s -> {}/{{{},{}}} ({} of {} owners differ; B adds {})",
                    t0.elapsed().as_secs_f64(),
                    cli.out.display(),
                    t.a_dir,
                    t.b_dir,
                    changed,
                    t.owners.len(),
                    t.extra_owner
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("memq-gen: {e}");
                ExitCode::from(e.exit_code() as u8)
            }
        };
    }
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
