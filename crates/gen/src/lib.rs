//! `memq-gen`: a generator of realistic msMemScope G3 output trees, with ground truth.
//!
//! The generator simulates a training job per process (one or more NPUs each): HAL driver
//! segments (HCCL CCL buffers, runtime, GE, AICPU), a PTA caching pool growing by HAL segments
//! (`CANN@APP`), an fsdp2-style model (weights, all-gather outputs, activations, gradients,
//! AdamW state), pinned host staging buffers, steps marked by `SYSTEM/STEP` and MSTX ranges,
//! op/kernel launches, ACCESS rows, call stacks, snapshots, a stop period with the shadow
//! mechanism (§5.5), an injected leak and an optional OOM ending. It writes the tool's output
//! tree in the tool's own row order (§2.8) and quoting (§2.9), or the tool's db (§4.1), and
//! returns a [`Truth`] computed from the simulation state.
//!
//! Layout of one run:
//! ```text
//! <out>/truth.json
//! <out>/msmemscope_<PID>_<YYYYmmddHHMMSS>_ascend/
//!     config.json
//!     msmemscope_logs/msmemscope_<ts>.log
//!     device_<N>/dump/memscope_dump_<ts>.csv|db   (+ python_trace_<ts>.csv for csv)
//!     device_cpu/dump/memscope_dump_<ts>.csv|db
//!     compare/memory_compare_<ts>.csv             (when `compare`)
//! ```
//!
//! A multi-rank job ([`generate_job`], `memq-gen --nodes N --ranks-per-node M`) writes one such
//! project folder per rank under `<out>/node<k>/memscopeDumpResults/`, each rank's truth as
//! `<out>/node<k>/truth_rank<r>.json` and the cross-rank truth as `<out>/job_truth.json`
//! ([`JobTruth`]; see [`job`]).
//!
//! `memq-gen --wasted` ([`GenConfig::wasted`]) injects three blocks of wasted memory per NPU
//! with ACCESS rows (truth `wasted`); `memq-gen --compare-run` ([`generate_pair`]) writes two
//! runs, `<out>/runA/` and `<out>/runB/` (B with an extra owner, [`GenConfig::extra_owner`]),
//! and their per-owner comparison as `<out>/pair_truth.json` ([`PairTruth`]; see [`pair`]).

pub mod job;
pub mod out;
pub mod pair;
pub mod rng;
mod sim;
pub mod text;
pub mod truth;

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use truth::Truth;

use memq_core::error::{MemqError, Result};

/// The seed used by `--small` and by default.
pub const DEFAULT_SEED: u64 = 20_251_205;

/// Device Id column value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dev {
    Npu(u32),
    Cpu,
    NA,
}

impl Dev {
    pub fn label(self) -> String {
        match self {
            Dev::Npu(n) => n.to_string(),
            Dev::Cpu => "cpu".to_string(),
            Dev::NA => "N/A".to_string(),
        }
    }

    /// The dump folder of the device in the tool's output tree.
    pub(crate) fn folder(self) -> String {
        match self {
            Dev::Npu(n) => format!("device_{n}"),
            Dev::Cpu => "device_cpu".to_string(),
            Dev::NA => "device_na".to_string(),
        }
    }
}

/// Output format: the tool's CSV tree or its SQLite db (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Csv,
    Db,
}

/// `msmemscope.stop()` right before step `stop_before_step` and `start()` right before step
/// `start_before_step` (steps in between run in shadow mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopPeriod {
    pub stop_before_step: u32,
    pub start_before_step: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenConfig {
    pub seed: u64,
    /// NPUs in total (device ids 0..devices).
    pub devices: u32,
    /// Processes (project folders); NPU `d` belongs to process `d % processes`.
    pub processes: u32,
    pub steps: u32,
    /// Model layers (each layer is ~43 rows per step and device).
    pub layers: u32,
    /// Leak injected on every NPU: one `PTA@loss_history` block per collected step, never
    /// freed, sizes summing to this many bytes (rounded up to 512).
    pub leak_bytes: u64,
    /// End the job with an OOM on the first NPU of each process in the last step.
    pub oom: bool,
    pub format: Format,
    /// Simulated wall clock at process start (ns since the Unix epoch; names use UTC).
    pub start_time_ns: u64,
    pub stop_period: Option<StopPeriod>,
    /// Call `stop()` after the last step (exit fill-ins then carry `stop + 1`).
    pub end_stopped: bool,
    /// Deferred mode with runtime allocations before the first `start()` (promoted stock rows).
    pub pre_start_blocks: bool,
    pub host_pinned: bool,
    pub python_trace: bool,
    /// Write `compare/memory_compare_<ts>.csv` (first two collected steps of the first NPU).
    pub compare: bool,
    pub access_rows: bool,
    pub stacks: bool,
    /// Emit KERNEL_EXECUTE_START/END rows after matmul launches.
    pub kernel_execute: bool,
    /// Odd-numbered steps' snapshots use the doc spelling (`total_mem,free_mem,...`).
    pub doc_snapshot_spelling: bool,
    /// A HAL runtime block freed through an unhooked path and its address reused (rule 5).
    pub residual_reuse: bool,
    pub empty_cache_after_step: Option<u32>,
    pub snapshot_every: u32,
    pub oom_top_k: u32,
    /// The pid of the first process (derived from the seed when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The first NPU id (device ids `device_base..device_base + devices`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device_base: u32,
    /// One extra transient PTA allocation of `bytes` in step `step` (allocated after the
    /// forward pass, freed after the optimizer step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_step_alloc: Option<ExtraAlloc>,
    /// The seed of the model's layer dims (default `seed`): ranks of a job share the model
    /// while their seeds (timing, ids, host sizes) differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_seed: Option<u64>,
    /// Activation (and activation-gradient) sizes in percent of the layer dims (default 100):
    /// a bigger micro-batch, or a rank holding more activations than the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_percent: Option<u32>,
    /// Sequence-length warmup: step 1's activations are this percent of the full size,
    /// growing linearly to 100 % in the last step (default none: every step the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_percent: Option<u32>,
    /// A synchronous job's step clock: step `s` starts at `first_step_ns + (s - 1) ×
    /// period_ns` plus a jitter below `jitter_ns` (or later, if the previous step overran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_clock: Option<StepClock>,
    /// Inject wasted memory (`memq-gen --wasted`): on every NPU, in the first collected step
    /// from step 2 on, three PTA blocks with ACCESS rows — allocated long before first use,
    /// held long after last use, idle between two uses — each wasting its interval across the
    /// step's forward and backward passes (truth: `wasted`). Needs `access_rows` (the default).
    #[serde(default, skip_serializing_if = "is_false")]
    pub wasted: bool,
    /// Write as the msMemScope tool's newer builds do (`memq-gen --tool-style`): every MALLOC
    /// and FREE of a device carries the driver counters `process_used` and `device_used`
    /// (memscope-format §3.4: the keys are optional), and C call stacks run down to the
    /// interpreter's frames (a real stack's 40–60 frames). The rows, their order and the truth
    /// are the same; only the text is longer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tool_style: bool,
    /// An extra owner (`PTA@eval_cache`) allocating a known number of bytes per step on every
    /// NPU and holding part of them to the end: run B of `memq-gen --compare-run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_owner: Option<ExtraOwner>,
    /// A periodic leak: the leak's blocks only in every n-th collected step (the 1st, the
    /// n+1-th, …), sizes still summing to `leak_bytes`; None or 1: every collected step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leak_every: Option<u32>,
}

/// See [`GenConfig::extra_owner`]: per step and NPU, one block of `held_per_step` bytes kept to
/// the end and one of the rest of `bytes_per_step` freed after the optimizer step (each size
/// rounded up to 512 like every PTA block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraOwner {
    pub bytes_per_step: u64,
    pub held_per_step: u64,
}

impl ExtraOwner {
    /// (held, transient) block sizes as allocated.
    pub fn split(self) -> (u64, u64) {
        let round = |v: u64| v.max(1).div_ceil(512) * 512;
        (
            round(self.held_per_step),
            round(self.bytes_per_step.saturating_sub(self.held_per_step)),
        )
    }
}

impl Default for ExtraOwner {
    fn default() -> Self {
        ExtraOwner {
            bytes_per_step: 5 * 1024 * 1024,
            held_per_step: 1024 * 1024,
        }
    }
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// See [`GenConfig::step_clock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepClock {
    /// Wall clock of step 1's start, ns since the Unix epoch.
    pub first_step_ns: u64,
    pub period_ns: u64,
    pub jitter_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraAlloc {
    pub step: u32,
    pub bytes: u64,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: DEFAULT_SEED,
            devices: 2,
            processes: 1,
            steps: 8,
            layers: 8,
            leak_bytes: 0,
            oom: false,
            format: Format::Csv,
            start_time_ns: 1_764_900_000_000_000_000,
            stop_period: Some(StopPeriod {
                stop_before_step: 4,
                start_before_step: 5,
            }),
            end_stopped: false,
            pre_start_blocks: true,
            host_pinned: true,
            python_trace: true,
            compare: false,
            access_rows: true,
            stacks: true,
            kernel_execute: true,
            doc_snapshot_spelling: false,
            residual_reuse: true,
            empty_cache_after_step: Some(1),
            snapshot_every: 1,
            oom_top_k: 10,
            pid: None,
            device_base: 0,
            extra_step_alloc: None,
            model_seed: None,
            activation_percent: None,
            warmup_percent: None,
            step_clock: None,
            wasted: false,
            tool_style: false,
            extra_owner: None,
            leak_every: None,
        }
    }
}

/// Rows per layer per step and device, and per step and device outside the layers (measured).
const ROWS_PER_LAYER: u64 = 43;
const ROWS_PER_STEP: u64 = 40;

impl GenConfig {
    /// The committed fixture `fixtures/memscope/g3_run/`: 2 NPUs + device_cpu, a few hundred
    /// rows per file, one stop period, a leak, an OOM at the end, a compare csv.
    pub fn small() -> GenConfig {
        GenConfig {
            steps: 5,
            layers: 2,
            leak_bytes: 12 * 1024 * 1024,
            oom: true,
            stop_period: Some(StopPeriod {
                stop_before_step: 3,
                start_before_step: 4,
            }),
            compare: true,
            doc_snapshot_spelling: true,
            oom_top_k: 5,
            ..GenConfig::default()
        }
    }

    /// A stop period of one step in the middle of the run (none for fewer than 4 steps).
    pub fn mid_stop(steps: u32) -> Option<StopPeriod> {
        (steps >= 4).then(|| StopPeriod {
            stop_before_step: steps / 2,
            start_before_step: steps / 2 + 1,
        })
    }

    /// Picks layers (and, unless `fixed_steps`, steps) so the dump has about `events` rows.
    pub fn scale_to_events(&mut self, events: u64, fixed_steps: bool) {
        let per_dev = (events / self.devices.max(1) as u64).max(1);
        if !fixed_steps {
            let layers = 64u64;
            let steps = per_dev / (layers * ROWS_PER_LAYER + ROWS_PER_STEP);
            self.steps = steps.clamp(4, 1_000_000) as u32;
        }
        let per_step = per_dev / self.steps.max(1) as u64;
        self.layers = (per_step.saturating_sub(ROWS_PER_STEP) / ROWS_PER_LAYER).clamp(1, 64) as u32;
        if !fixed_steps {
            // Fix up steps for the layer count actually chosen.
            let steps = per_dev / (self.layers as u64 * ROWS_PER_LAYER + ROWS_PER_STEP);
            self.steps = steps.clamp(4, 1_000_000) as u32;
        }
        self.stop_period = self.stop_period.and(Self::mid_stop(self.steps));
        self.snapshot_every = (self.steps / 20).max(1);
    }

    /// True when step `s` runs inside the stop period (its rows are not collected).
    pub fn step_stopped(&self, s: u32) -> bool {
        match self.stop_period {
            Some(p) => s >= p.stop_before_step && s < p.start_before_step,
            None => false,
        }
    }

    /// Activation sizes of step `s` in percent of the layer dims (100 unless
    /// `activation_percent` or `warmup_percent` is set).
    pub fn activation_percent_of(&self, s: u32) -> u64 {
        let base = self.activation_percent.unwrap_or(100) as u64;
        match self.warmup_percent {
            Some(w) if self.steps > 1 => {
                let w = (w as u64).min(100);
                let s = s.clamp(1, self.steps) as u64;
                base * (w * (self.steps as u64 - 1) + (100 - w) * (s - 1))
                    / (100 * (self.steps as u64 - 1))
            }
            _ => base,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(MemqError::Usage(format!("memq-gen: {m}")));
        if self.devices == 0 || self.devices > 32 {
            return bad("--devices must be 1..=32");
        }
        if self.processes == 0 || self.processes > self.devices {
            return bad("--processes must be 1..=devices");
        }
        if self.steps == 0 {
            return bad("--steps must be at least 1");
        }
        if self.layers == 0 {
            return bad("--layers must be at least 1");
        }
        if self.activation_percent == Some(0) {
            return bad("activation_percent must be at least 1");
        }
        if let Some(p) = self.stop_period {
            if p.stop_before_step == 0 || p.start_before_step <= p.stop_before_step {
                return bad("stop period must satisfy 1 <= stop < start");
            }
        }
        if self.wasted && !self.access_rows {
            return bad("wasted memory needs ACCESS rows (access_rows)");
        }
        if let Some(x) = self.extra_owner {
            if x.held_per_step >= x.bytes_per_step {
                return bad("the extra owner must hold less than it allocates per step");
            }
        }
        Ok(())
    }
}

/// Generates the output tree under `out` (created if needed) and writes `out/truth.json`.
pub fn generate(cfg: &GenConfig, out: &Path) -> Result<Truth> {
    let t = generate_tree(cfg, out)?;
    write_json(&out.join("truth.json"), &t)?;
    Ok(t)
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| MemqError::query(format!("{}: {e}", path.display())))?;
    text.push('\n');
    fs::write(path, text).map_err(|e| MemqError::io(path, e))
}

/// The output tree of `cfg` under `out`, without truth.json.
fn generate_tree(cfg: &GenConfig, out: &Path) -> Result<Truth> {
    cfg.validate()?;
    fs::create_dir_all(out).map_err(|e| MemqError::io(out, e))?;
    let base_pid = cfg
        .pid
        .unwrap_or(2_000_000 + (rng::mix(cfg.seed) % 1_000_000) as u32);
    let mut t = Truth {
        generator: "memq-gen/1".to_string(),
        config: cfg.clone(),
        rows_written: 0,
        files: Vec::new(),
        processes: Vec::new(),
        pools: Vec::new(),
        breakdowns: Vec::new(),
        leak: truth::LeakTruth {
            bytes: 0,
            blocks: Vec::new(),
        },
        live_at_exit: Vec::new(),
        hal_segments: Vec::new(),
        oom: Vec::new(),
        shadow: truth::ShadowTruth::default(),
        peak_categories: Vec::new(),
        step_live: Vec::new(),
        owners: Vec::new(),
        wasted: cfg.wasted.then(|| truth::WastedTruth {
            injected: Vec::new(),
            listed: Vec::new(),
        }),
        extra_owner_steps: Vec::new(),
    };
    let mut owners: std::collections::BTreeMap<String, truth::OwnerTotals> = Default::default();
    let mut extra: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    for p in 0..cfg.processes {
        let npus: Vec<u32> = (0..cfg.devices)
            .filter(|d| d % cfg.processes == p)
            .map(|d| d + cfg.device_base)
            .collect();
        let pid = base_pid + p * 173;
        let proc = sim::Proc::new(cfg, p, pid, &npus, out)?;
        let mut r = proc.run()?;
        t.rows_written += r.rows;
        t.files.extend(r.files);
        for (s, (b, n)) in std::mem::take(&mut r.acc.extra_steps) {
            let e = extra.entry(s).or_default();
            e.0 += b;
            e.1 += n;
        }
        let a = r.acc.finish();
        t.peak_categories.extend(a.peak_categories);
        t.step_live.extend(a.step_live);
        for o in a.owners {
            let e = owners.entry(o.owner.clone()).or_insert(truth::OwnerTotals {
                owner: o.owner.clone(),
                alloc_bytes: 0,
                blocks: 0,
                peak_bytes: 0,
                held_end: 0,
            });
            e.alloc_bytes += o.alloc_bytes;
            e.blocks += o.blocks;
            e.peak_bytes = e.peak_bytes.max(o.peak_bytes);
            e.held_end += o.held_end;
        }
        if let (Some(w), Some(aw)) = (t.wasted.as_mut(), a.wasted) {
            w.injected.extend(aw.injected);
            w.listed.extend(aw.listed);
        }
        t.pools.extend(a.pools);
        t.breakdowns.extend(a.breakdowns);
        t.live_at_exit.extend(a.live_at_exit);
        t.hal_segments.extend(a.hal_segments);
        t.leak.bytes += a.leaks.iter().map(|b| b.size).sum::<u64>();
        t.leak.blocks.extend(a.leaks);
        t.oom.extend(a.oom);
        t.shadow.promoted_mallocs += a.shadow.promoted_mallocs;
        t.shadow.stop_period_frees += a.shadow.stop_period_frees;
        t.shadow.exit_fill_ins += a.shadow.exit_fill_ins;
        t.shadow.residual_fill_ins += a.shadow.residual_fill_ins;
        t.processes.push(truth::ProcessTruth {
            pid,
            dir: r.dir,
            devices: r.devices,
            start_trace_ts: a.start_ts,
            stop_trace_ts: a.stop_ts,
            exit_ts: r.exit_ts,
            exit_stopped: r.exit_stopped,
            steps: a.steps,
        });
    }
    t.files.sort_by(|a, b| a.path.cmp(&b.path));
    t.owners = owners.into_values().collect();
    t.extra_owner_steps = extra
        .into_iter()
        .map(|(step, (bytes, blocks))| truth::StepAlloc {
            step,
            bytes,
            blocks,
        })
        .collect();
    Ok(t)
}

pub use job::{generate_job, JobConfig, JobTruth};
pub use pair::{generate_pair, PairTruth};

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cfg: &GenConfig) -> Truth {
        let dir = tempfile::tempdir().unwrap();
        generate(cfg, dir.path()).unwrap()
    }

    #[test]
    fn peak_categories_and_step_ends_add_up_to_the_pool_counters() {
        let t = run(&GenConfig::small());
        assert_eq!(t.peak_categories.len(), 2);
        for pc in &t.peak_categories {
            let p = t
                .pools
                .iter()
                .find(|p| p.device == pc.device && p.pool == "PTA")
                .unwrap();
            assert_eq!((pc.total_bytes, pc.at_ts), (p.peak_used, p.peak_used_ts));
            let names: Vec<&str> = pc.categories.iter().map(|g| g.group.as_str()).collect();
            for c in ["weights", "gradients", "optimizer_state", "activations"] {
                assert!(names.contains(&c), "{c} in {names:?}");
            }
        }
        for sl in t.step_live.iter().filter(|s| s.pool == "PTA") {
            let p = t
                .pools
                .iter()
                .find(|p| p.device == sl.device && p.pool == "PTA")
                .unwrap();
            let s = p.steps.iter().find(|s| s.step == sl.step).unwrap();
            assert_eq!(s.end_used, Some(sl.total_bytes), "{sl:?}");
        }
        // collected steps that ended (the last one dies of the OOM on device 0)
        assert!(t.step_live.iter().filter(|s| s.pool == "PTA").count() >= 6);
        assert!(t.wasted.is_none());
        assert!(t.extra_owner_steps.is_empty());
        let leak = t.owners.iter().find(|o| o.owner == text::OWN_LEAK).unwrap();
        assert_eq!(leak.alloc_bytes, t.leak.bytes);
        assert_eq!(leak.held_end, t.leak.bytes);
    }

    #[test]
    fn each_injected_block_wastes_its_interval_across_the_peak() {
        for (seed, stop) in [
            (DEFAULT_SEED, None),
            (7, GenConfig::mid_stop(5)),
            (99, None),
        ] {
            let cfg = GenConfig {
                steps: 5,
                layers: 3,
                leak_bytes: 3 * 1024 * 1024,
                stop_period: stop,
                wasted: true,
                seed,
                ..GenConfig::default()
            };
            let t = run(&cfg);
            let w = t.wasted.as_ref().unwrap();
            assert_eq!(w.injected.len(), 6, "seed {seed}");
            for iv in &w.injected {
                assert!(iv.covers_peak, "seed {seed}: {iv:?}");
                assert_eq!(iv.peak_saving, iv.size);
                let want = match iv.kind.as_str() {
                    "early_allocation" => (iv.alloc_ts, iv.first_use_ts),
                    "late_deallocation" => (iv.last_use_ts, iv.end_ts.unwrap()),
                    _ => (iv.first_use_ts, iv.last_use_ts),
                };
                assert_eq!((iv.wasted_from, iv.wasted_to), want, "{iv:?}");
            }
            // one interval per injected block covers the peak, no other of its intervals
            for iv in w.listed.iter().filter(|iv| iv.injected) {
                assert!(w.injected.contains(iv), "{iv:?}");
            }
        }
    }

    #[test]
    fn new_options_are_off_by_default_and_not_serialized() {
        let c = GenConfig::default();
        assert!(!c.wasted && c.extra_owner.is_none());
        let text = serde_json::to_string(&c).unwrap();
        assert!(
            !text.contains("wasted") && !text.contains("extra_owner"),
            "{text}"
        );
        let bad = GenConfig {
            extra_owner: Some(ExtraOwner {
                bytes_per_step: 10,
                held_per_step: 10,
            }),
            ..GenConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
