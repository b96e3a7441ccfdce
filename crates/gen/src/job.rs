//! A multi-rank training job (docs/scale-out.md): `nodes` machines × `ranks_per_node`
//! processes, one process per NPU, written as the tool writes a job:
//! `JOB/node<k>/memscopeDumpResults/msmemscope_<PID>_<time>_ascend/device_<j>/dump/…`, with
//! local rank j = the NPU id on its node and global rank r = k × ranks_per_node + j.
//!
//! Every rank runs the same model (same layer dims, steps and sequence-length warmup; its own
//! seed for timing, ids and host sizes) on a common step clock: ranks start within a few ms of
//! each other and step s starts at the same wall time on every rank (± 0.5 % of a step), as a
//! synchronous data-parallel job does. The pid of local rank j is the same on every node — as
//! containers give — so a reader must not key ranks by pid. No stop period, no OOM (unless
//! asked). Three ranks differ, by construction, so cross-rank analyses have a known answer
//! (`JOB/job_truth.json`, and each rank's full [`Truth`] as `JOB/node<k>/truth_rank<r>.json`):
//! * the **peak rank** holds `peak_activation_percent` (125 %) of the others' activations in
//!   every step (a pipeline stage holding more micro-batches): its PTA step peak is the highest
//!   in every step, and its PTA peak the job's highest by a clear margin (≥ 5 %);
//! * the **skew rank** holds one extra transient PTA block through the **skew step** (from the
//!   end of the forward pass through the optimizer step), sized so that step's max / median
//!   over ranks of the step peak is `skew_ratio` (1.4) — the largest of all steps — while the
//!   skew rank's peak stays below the peak rank's (the warmup makes early steps smaller, which
//!   is what lets one step stand out without moving the job's peak rank);
//! * the **leak rank** alone leaks (`leak_bytes`: one never-freed `PTA@loss_history` block per
//!   step).

use std::path::Path;
use std::sync::{Condvar, Mutex};

use serde::{Deserialize, Serialize};

use memq_core::error::{MemqError, Result};

use crate::rng::mix;
use crate::truth::Truth;
use crate::{generate_tree, write_json, ExtraAlloc, GenConfig, StepClock};

const MIB: u64 = 1 << 20;
const MS: u64 = 1_000_000;
/// Ranks start within this much of the job's start time.
const START_SPREAD_NS: u64 = 5 * MS;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobConfig {
    /// Machines: folders `node0 ..= node<nodes-1>`.
    pub nodes: u32,
    /// Ranks (processes, one NPU each) per node; local rank j drives NPU j.
    pub ranks_per_node: u32,
    /// The settings every rank starts from. Per rank, the generator sets devices = processes
    /// = 1, device_base = the local rank, pid (`pid`, or derived from `seed`, + 97 × local
    /// rank), seed (mixed with the rank; `model_seed` = this seed, so the model is shared),
    /// start time (+ < 5 ms), the step clock, and the special ranks' knobs below.
    pub rank: GenConfig,
    /// The rank with the job's highest PTA peak.
    pub peak_rank: u32,
    /// The peak rank's activations in percent of the other ranks' (every step).
    pub peak_activation_percent: u32,
    /// The rank skewed in `skew_step` (must differ from `peak_rank`).
    pub skew_rank: u32,
    /// The skewed step (1-based, as the SYSTEM/STEP rows number them).
    pub skew_step: u32,
    /// The wanted max / median over ranks of the PTA step peak in the skew step.
    pub skew_ratio: f64,
    /// The skew step's extra allocation, bytes (0 = sized for `skew_ratio`, capped so the
    /// skew rank's peak stays ≥ 5 % below the peak rank's).
    pub skew_bytes: u64,
    /// The only rank that leaks, and how much over the run (None: 64 MiB, or a quarter of
    /// the peak rank's activation excess when that is less — so the leak rank's growth does
    /// not outgrow the peak rank in small models; see [`JobConfig::leak_bytes`]).
    pub leak_rank: u32,
    pub leak_bytes: Option<u64>,
    /// End the peak rank (only) with an OOM in the middle of the last step's forward pass
    /// (its PTA peak then falls in the step before, and the margin over the others shrinks).
    pub oom: bool,
}

impl JobConfig {
    /// A job of `nodes` × `ranks_per_node` with the default special ranks: peak 5, skew 2,
    /// leak 6 for 8 ranks or more; for fewer: peak = the last but one, leak = the last, skew
    /// = the first of 2, 1, 0 that is neither. Skew step 3 (with fewer than 4 steps: the last
    /// but one, or 1). Ranks: 6 steps × 4 layers, activations at 1600 % of the single-run
    /// model (activations outweigh the sharded weights), warmup from 25 %, no stop period.
    pub fn new(nodes: u32, ranks_per_node: u32) -> JobConfig {
        let n = nodes.saturating_mul(ranks_per_node);
        let (peak, leak) = if n >= 8 {
            (5, 6)
        } else {
            (n.saturating_sub(2), n.saturating_sub(1))
        };
        let skew = if n >= 8 {
            2
        } else {
            [2, 1, 0]
                .into_iter()
                .find(|&r| r < n && r != peak && r != leak)
                .or((n > 1).then(|| if peak == n - 1 { 0 } else { n - 1 }))
                .unwrap_or(peak)
        };
        let mut c = JobConfig {
            nodes,
            ranks_per_node,
            rank: GenConfig {
                devices: 1,
                processes: 1,
                steps: 6,
                layers: 4,
                stop_period: None,
                oom: false,
                compare: false,
                activation_percent: Some(1600),
                warmup_percent: Some(25),
                ..GenConfig::default()
            },
            peak_rank: peak,
            peak_activation_percent: 125,
            skew_rank: skew,
            skew_step: 3,
            skew_ratio: 1.4,
            skew_bytes: 0,
            leak_rank: leak,
            leak_bytes: None,
            oom: false,
        };
        c.set_steps(6);
        c
    }

    /// Sets the steps of every rank and the default skew step for them.
    pub fn set_steps(&mut self, steps: u32) {
        self.rank.steps = steps;
        self.skew_step = Self::default_skew_step(steps);
    }

    /// 3 with 4 steps or more, else the last but one (1 for a single step).
    pub fn default_skew_step(steps: u32) -> u32 {
        if steps >= 4 {
            3
        } else {
            steps.saturating_sub(1).max(1)
        }
    }

    /// The leak rank's leaked bytes: `leak_bytes`, by default min(64 MiB, ¼ of the peak
    /// rank's extra activation bytes at full size), a multiple of 1 MiB (at least 1 MiB).
    pub fn leak_bytes(&self) -> u64 {
        self.leak_bytes.unwrap_or_else(|| {
            let act = crate::sim::activation_bytes(&self.rank)
                * self.rank.activation_percent.unwrap_or(100) as u64
                / 100;
            let excess = act * self.peak_activation_percent.saturating_sub(100) as u64 / 100;
            (excess / 4 / MIB).clamp(1, 64) * MIB
        })
    }

    pub fn ranks(&self) -> u32 {
        self.nodes * self.ranks_per_node
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(MemqError::Usage(format!("memq-gen: {m}")));
        if self.nodes == 0 || self.ranks_per_node == 0 || self.ranks_per_node > 32 {
            return bad("--nodes must be >= 1 and --ranks-per-node 1..=32".into());
        }
        if self.nodes > 4096 {
            return bad("--nodes must be at most 4096".into());
        }
        let n = self.ranks();
        for (what, r) in [
            ("--peak-rank", self.peak_rank),
            ("--skew-rank", self.skew_rank),
            ("--leak-rank", self.leak_rank),
        ] {
            if r >= n {
                return bad(format!("{what} {r}: the job has ranks 0..={}", n - 1));
            }
        }
        if n > 1 && self.peak_rank == self.skew_rank {
            return bad("the peak rank and the skew rank must differ".into());
        }
        if self.skew_step == 0 || self.skew_step > self.rank.steps {
            return bad(format!("--skew-step must be 1..={}", self.rank.steps));
        }
        if self.peak_activation_percent < 100 {
            return bad("the peak rank's activation percent must be at least 100".into());
        }
        self.rank.validate()
    }

    fn base_pid(&self) -> u32 {
        self.rank
            .pid
            .unwrap_or(2_000_000 + (mix(self.rank.seed) % 1_000_000) as u32)
    }

    /// The settings of rank `r` (`None`: a plain rank of node 0, local rank 0) with the skew
    /// step's extra bytes and the step clock.
    fn rank_config(&self, r: Option<u32>, skew_bytes: u64, clock: Option<StepClock>) -> GenConfig {
        let ri = r.unwrap_or(0);
        let j = ri % self.ranks_per_node;
        let mut c = self.rank.clone();
        c.devices = 1;
        c.processes = 1;
        c.device_base = j;
        c.pid = Some(self.base_pid() + 97 * j);
        c.model_seed = Some(self.rank.model_seed.unwrap_or(self.rank.seed));
        c.seed = mix(self.rank.seed ^ mix(ri as u64 + 1));
        c.start_time_ns = self.rank.start_time_ns + mix(c.seed ^ 0x57a7) % START_SPREAD_NS;
        c.step_clock = clock;
        c.stop_period = None;
        c.leak_bytes = 0;
        c.oom = false;
        c.extra_step_alloc = None;
        let Some(r) = r else { return c };
        if r == self.leak_rank {
            c.leak_bytes = self.leak_bytes();
        }
        if r == self.peak_rank {
            let base = self.rank.activation_percent.unwrap_or(100) as u64;
            c.activation_percent =
                Some((base * self.peak_activation_percent as u64 / 100).max(1) as u32);
            c.oom = self.oom;
        } else if r == self.skew_rank && skew_bytes > 0 {
            c.extra_step_alloc = Some(ExtraAlloc {
                step: self.skew_step,
                bytes: skew_bytes,
            });
        }
        c
    }

    /// The common step clock, from a short dry run of a plain rank: step 1 starts after the
    /// slowest setup (+ 25 %), steps are 25 % + 30 ms longer than the longest dry-run step, and
    /// each rank's step start jitters by less than 0.5 % of a step.
    fn step_clock(&self) -> Result<StepClock> {
        let mut c = self.rank_config(None, 0, None);
        c.steps = c.steps.min(3);
        c.leak_bytes = self.leak_bytes(); // the leak rank's few extra rows per step
        let dry = tempfile::tempdir().map_err(|e| MemqError::io(Path::new("tmp"), e))?;
        let t = generate_tree(&c, dry.path())?;
        let w = &t.processes[0].steps;
        let setup = w
            .first()
            .map(|s| s.start_ts - c.start_time_ns)
            .unwrap_or(MS);
        let mut longest = 0u64;
        for (i, s) in w.iter().enumerate() {
            let end = match w.get(i + 1) {
                Some(n) => n.start_ts,
                None => s.end_ts.unwrap_or(s.start_ts),
            };
            longest = longest.max(end - s.start_ts);
        }
        let period = ((longest + 30 * MS) * 5 / 4).div_ceil(MS) * MS;
        Ok(StepClock {
            first_step_ns: self.rank.start_time_ns
                + START_SPREAD_NS
                + (setup * 5 / 4).div_ceil(MS) * MS,
            period_ns: period,
            jitter_ns: period / 200,
        })
    }
}

/// What the job's cross-rank analyses must find (`JOB/job_truth.json`). Pool figures are the
/// PTA pool's `used` counter (`PTA` rows' `Total Used`), as in truth.json's `pools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobTruth {
    /// As configured: node folders `node0 ..`, ranks per node.
    pub nodes: u32,
    pub ranks_per_node: u32,
    /// Every rank, by global rank.
    pub ranks: Vec<RankTruth>,
    /// The rank with the highest PTA peak (`ranks[].pta_peak_used`; ties: the lowest rank).
    pub peak_rank: u32,
    /// The most skewed step.
    pub skew: SkewTruth,
    /// The only rank that leaks.
    pub leak_rank: u32,
    /// The job's leaked bytes (sum of `ranks[].leak_bytes`; all of them on `leak_rank`).
    pub leak_bytes: u64,
    /// The step whose sum over ranks of each rank's PTA step peak is highest (ties: the
    /// earliest), and that sum.
    pub job_peak_by_step: StepSum,
    /// Per step: the spread over ranks of the PTA step peak.
    pub steps: Vec<JobStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankTruth {
    /// Global rank: node × ranks_per_node + local rank.
    pub rank: u32,
    /// `node<k>`.
    pub node: String,
    /// The NPU id = the local rank, as a string (`"3"`).
    pub device: String,
    /// Its process id (the same for the same local rank on every node).
    pub pid: u32,
    /// Its project folder, relative to the job folder
    /// (`node<k>/memscopeDumpResults/msmemscope_<pid>_<time>_ascend`).
    pub dir: String,
    /// Its full truth (the same struct as truth.json; file paths relative to
    /// `node<k>/memscopeDumpResults`), relative to the job folder.
    pub truth: String,
    /// Highest `used` of its PTA pool, and the first row's ts with it.
    pub pta_peak_used: u64,
    pub pta_peak_ts: u64,
    /// The step whose window (SYSTEM/STEP row .. MSTX Range_end row) holds pta_peak_ts; None
    /// outside every step.
    pub pta_peak_step: Option<u32>,
    /// Its PTA pool per step.
    pub steps: Vec<RankStep>,
    /// Bytes it leaks (never-freed `PTA@loss_history` blocks).
    pub leak_bytes: u64,
    /// Dump rows written (all its dump files).
    pub rows: u64,
}

/// One rank's step (truth.json's `pools[].steps` plus the step's window).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankStep {
    pub step: u32,
    /// The step's peak of `used`, including the level when the step starts (None: no row).
    pub peak_used: Option<u64>,
    /// `used` after the step's last PTA row (the level at its start when it has none).
    pub end_used: Option<u64>,
    /// ts of its SYSTEM/STEP row and of its MSTX Range_end row (ns since the epoch; every
    /// rank starts step s within 0.5 % of a step of the others).
    pub start_ts: u64,
    pub end_ts: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkewTruth {
    /// The skewed rank and step (by construction; `ratio` is measured).
    pub rank: u32,
    pub step: u32,
    /// In that step: max / median over ranks of the PTA step peak (the median of an even
    /// count is the mean of the middle two). The largest of all steps' ratios.
    pub ratio: f64,
    /// The extra transient allocation that makes it, bytes.
    pub bytes: u64,
    /// The step of the peak rank's PTA peak, and that step's max / median (the peak rank
    /// tops every step, so every step has a ratio above 1; this one is the largest of them
    /// apart from the skew step).
    pub peak_step: u32,
    pub peak_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSum {
    /// The step number.
    pub step: u32,
    /// Sum over ranks of their PTA step peaks in that step.
    pub bytes: u64,
}

/// One step across the job: the per-rank PTA step peaks' spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStep {
    pub step: u32,
    /// Lowest, median (of an even count: the mean of the middle two) and highest rank step
    /// peak.
    pub min: u64,
    pub median: f64,
    pub max: u64,
    /// The rank with `max` (ties: the lowest).
    pub max_rank: u32,
    /// max / median.
    pub ratio: f64,
    /// Sum over ranks.
    pub sum: u64,
}

/// Writes the job under `out` (created), with `out/job_truth.json` and each rank's full truth
/// as `out/node<k>/truth_rank<r>.json`. Ranks are generated on every core (a thread per core,
/// each taking the next rank); the skew rank waits for the peak rank and a plain rank, whose
/// step peaks size its extra allocation.
pub fn generate_job(cfg: &JobConfig, out: &Path) -> Result<JobTruth> {
    cfg.validate()?;
    std::fs::create_dir_all(out).map_err(|e| MemqError::io(out, e))?;
    let n = cfg.ranks();
    let clock = cfg.step_clock()?;
    let is_plain = |r: u32| r != cfg.peak_rank && r != cfg.skew_rank && r != cfg.leak_rank;
    let plain_ref = (0..n).find(|&r| is_plain(r));
    let skewed = n > 1 && cfg.skew_rank != cfg.peak_rank;
    // The order ranks are taken in: the peak rank and the reference plain rank first, the skew
    // rank once the first `threads` have been taken.
    let threads = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1)
        .min(n as usize)
        .max(1);
    let mut order: Vec<u32> = Vec::with_capacity(n as usize);
    order.push(cfg.peak_rank);
    order.extend(plain_ref);
    order.extend(
        (0..n).filter(|&r| r != cfg.peak_rank && Some(r) != plain_ref && r != cfg.skew_rank),
    );
    if skewed {
        order.insert(threads.max(2).min(order.len()), cfg.skew_rank);
    }
    let next = Mutex::new(0usize);
    let done: Mutex<Vec<Option<Result<Truth>>>> = Mutex::new((0..n).map(|_| None).collect());
    let cv = Condvar::new();
    let skew_bytes = Mutex::new(cfg.skew_bytes);
    let run = |r: u32, bytes: u64| -> Result<Truth> {
        let node = out.join(format!("node{}", r / cfg.ranks_per_node));
        let t = generate_tree(
            &cfg.rank_config(Some(r), bytes, Some(clock)),
            &node.join("memscopeDumpResults"),
        )?;
        write_json(&node.join(format!("truth_rank{r}.json")), &t)?;
        Ok(t)
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let r = {
                    let mut i = next.lock().unwrap_or_else(|e| e.into_inner());
                    let Some(&r) = order.get(*i) else { break };
                    *i += 1;
                    r
                };
                let mut bytes = 0;
                if skewed && r == cfg.skew_rank {
                    // Wait for the peak rank and the plain reference (or do a dry plain run).
                    let mut g = done.lock().unwrap_or_else(|e| e.into_inner());
                    let ready = |g: &Vec<Option<Result<Truth>>>| {
                        g[cfg.peak_rank as usize].is_some()
                            && plain_ref.is_none_or(|p| g[p as usize].is_some())
                    };
                    while !ready(&g) {
                        g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
                    }
                    let peak = g[cfg.peak_rank as usize]
                        .as_ref()
                        .and_then(|t| t.as_ref().ok())
                        .cloned();
                    let plain = plain_ref.and_then(|p| {
                        g[p as usize]
                            .as_ref()
                            .and_then(|t| t.as_ref().ok())
                            .cloned()
                    });
                    drop(g);
                    bytes = match size_skew(cfg, clock, peak.as_ref(), plain) {
                        Ok(b) => b,
                        Err(e) => {
                            let mut g = done.lock().unwrap_or_else(|e| e.into_inner());
                            g[r as usize] = Some(Err(e));
                            cv.notify_all();
                            continue;
                        }
                    };
                    *skew_bytes.lock().unwrap_or_else(|e| e.into_inner()) = bytes;
                }
                let t = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(r, bytes)))
                    .unwrap_or_else(|_| {
                        Err(MemqError::Query(format!(
                            "rank {r}: the generator panicked"
                        )))
                    });
                let mut g = done.lock().unwrap_or_else(|e| e.into_inner());
                g[r as usize] = Some(t);
                cv.notify_all();
            });
        }
    });
    let skew_bytes = skew_bytes.into_inner().unwrap_or_else(|e| e.into_inner());
    let done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut ranks = Vec::with_capacity(n as usize);
    for (r, t) in done.into_iter().enumerate() {
        let t = t.ok_or_else(|| {
            MemqError::Query(format!(
                "rank {r}: not generated (a generator thread panicked)"
            ))
        })??;
        ranks.push(rank_truth(cfg, r as u32, &t)?);
    }
    let truth = job_truth(cfg, ranks, skew_bytes);
    write_json(&out.join("job_truth.json"), &truth)?;
    Ok(truth)
}

/// The skew step's extra bytes: `skew_ratio` × the plain step peak − the skew rank's own step
/// peak (the plain one), capped so the skew rank's step peak stays 5 % below the peak rank's
/// PTA peak.
fn size_skew(
    cfg: &JobConfig,
    clock: StepClock,
    peak: Option<&Truth>,
    plain: Option<Truth>,
) -> Result<u64> {
    if cfg.skew_bytes > 0 {
        return Ok(cfg.skew_bytes);
    }
    let plain = match plain {
        Some(t) => t,
        None => {
            let dry = tempfile::tempdir().map_err(|e| MemqError::io(Path::new("tmp"), e))?;
            generate_tree(&cfg.rank_config(None, 0, Some(clock)), dry.path())?
        }
    };
    let step_peak = |t: &Truth| {
        pta(t)
            .and_then(|p| p.steps.iter().find(|s| s.step == cfg.skew_step))
            .and_then(|s| s.peak_used)
            .unwrap_or(0)
    };
    let base = step_peak(&plain);
    let want = (base as f64 * cfg.skew_ratio).ceil() as u64;
    let cap = peak
        .and_then(pta)
        .map(|p| (p.peak_used as f64 / 1.05) as u64)
        .unwrap_or(u64::MAX);
    let bytes = want.min(cap).saturating_sub(base);
    Ok(bytes / 512 * 512)
}

fn pta(t: &Truth) -> Option<&crate::truth::PoolTruth> {
    t.pools
        .iter()
        .find(|p| p.pool == "PTA" && p.device != "cpu")
}

fn rank_truth(cfg: &JobConfig, r: u32, t: &Truth) -> Result<RankTruth> {
    let p = pta(t).ok_or_else(|| MemqError::Query(format!("rank {r}: no PTA pool")))?;
    let proc = t
        .processes
        .first()
        .ok_or_else(|| MemqError::Query(format!("rank {r}: no process")))?;
    let windows: Vec<_> = proc
        .steps
        .iter()
        .filter(|w| w.device == p.device && w.collected)
        .collect();
    let peak_step = windows
        .iter()
        .find(|w| w.start_ts <= p.peak_used_ts && w.end_ts.is_none_or(|e| p.peak_used_ts <= e))
        .map(|w| w.step);
    let steps = p
        .steps
        .iter()
        .map(|s| {
            let w = windows.iter().find(|w| w.step == s.step);
            RankStep {
                step: s.step,
                peak_used: s.peak_used,
                end_used: s.end_used,
                start_ts: w.map(|w| w.start_ts).unwrap_or(0),
                end_ts: w.and_then(|w| w.end_ts),
            }
        })
        .collect();
    let node = format!("node{}", r / cfg.ranks_per_node);
    Ok(RankTruth {
        rank: r,
        device: p.device.clone(),
        pid: proc.pid,
        dir: format!("{node}/memscopeDumpResults/{}", proc.dir),
        truth: format!("{node}/truth_rank{r}.json"),
        node,
        pta_peak_used: p.peak_used,
        pta_peak_ts: p.peak_used_ts,
        pta_peak_step: peak_step,
        steps,
        leak_bytes: t.leak.bytes,
        rows: t.rows_written,
    })
}

fn job_truth(cfg: &JobConfig, ranks: Vec<RankTruth>, skew_bytes: u64) -> JobTruth {
    let step_peak = |r: &RankTruth, s: u32| {
        r.steps
            .iter()
            .find(|x| x.step == s)
            .and_then(|x| x.peak_used)
            .unwrap_or(0)
    };
    let steps: Vec<JobStep> = (1..=cfg.rank.steps)
        .map(|s| {
            let mut v: Vec<u64> = ranks.iter().map(|r| step_peak(r, s)).collect();
            let (max_rank, max) = ranks
                .iter()
                .map(|r| (r.rank, step_peak(r, s)))
                .fold((0, 0), |a, b| if b.1 > a.1 { b } else { a });
            v.sort_unstable();
            let m = v.len();
            let median = if m == 0 {
                0.0
            } else if m % 2 == 1 {
                v[m / 2] as f64
            } else {
                (v[m / 2 - 1] as f64 + v[m / 2] as f64) / 2.0
            };
            JobStep {
                step: s,
                min: v.first().copied().unwrap_or(0),
                median,
                max,
                max_rank,
                ratio: if median > 0.0 {
                    max as f64 / median
                } else {
                    0.0
                },
                sum: v.iter().sum(),
            }
        })
        .collect();
    let ratio = |s: u32| {
        steps
            .iter()
            .find(|x| x.step == s)
            .map(|x| x.ratio)
            .unwrap_or(0.0)
    };
    let peak_rank = ranks
        .iter()
        .max_by_key(|r| (r.pta_peak_used, std::cmp::Reverse(r.rank)))
        .map(|r| r.rank)
        .unwrap_or(0);
    let peak_step = ranks
        .get(peak_rank as usize)
        .and_then(|r| r.pta_peak_step)
        .unwrap_or(0);
    let job_peak_by_step = steps
        .iter()
        .map(|x| StepSum {
            step: x.step,
            bytes: x.sum,
        })
        .max_by_key(|x| (x.bytes, std::cmp::Reverse(x.step)))
        .unwrap_or(StepSum { step: 0, bytes: 0 });
    JobTruth {
        nodes: cfg.nodes,
        ranks_per_node: cfg.ranks_per_node,
        peak_rank,
        skew: SkewTruth {
            rank: cfg.skew_rank,
            step: cfg.skew_step,
            ratio: ratio(cfg.skew_step),
            bytes: skew_bytes,
            peak_step,
            peak_ratio: ratio(peak_step),
        },
        leak_rank: cfg.leak_rank,
        leak_bytes: ranks.iter().map(|r| r.leak_bytes).sum(),
        job_peak_by_step,
        steps,
        ranks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_job(dir: &Path) -> (JobConfig, JobTruth) {
        let mut cfg = JobConfig::new(2, 4);
        cfg.rank.layers = 2;
        let t = generate_job(&cfg, dir).unwrap();
        (cfg, t)
    }

    #[test]
    fn a_small_job_has_its_special_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, t) = small_job(dir.path());
        assert_eq!((cfg.peak_rank, cfg.skew_rank, cfg.leak_rank), (5, 2, 6));
        assert_eq!(t.ranks.len(), 8);
        let peaks: Vec<u64> = t.ranks.iter().map(|r| r.pta_peak_used).collect();
        // The peak rank: the highest PTA peak by a clear margin.
        assert_eq!(t.peak_rank, 5, "{peaks:?}");
        let second = t
            .ranks
            .iter()
            .filter(|r| r.rank != 5)
            .map(|r| r.pta_peak_used)
            .max()
            .unwrap();
        assert!(
            peaks[5] as f64 > second as f64 * 1.04,
            "a clear margin: {peaks:?}"
        );
        // The skew step: the largest max/median, at the skew rank, ≥ 1.3.
        let skew = t.steps.iter().find(|s| s.step == cfg.skew_step).unwrap();
        assert_eq!(skew.max_rank, cfg.skew_rank);
        assert!(t.skew.ratio >= 1.3, "{}", t.skew.ratio);
        assert_eq!(skew.ratio, t.skew.ratio);
        for s in &t.steps {
            if s.step != cfg.skew_step {
                assert!(
                    s.ratio < t.skew.ratio - 0.1,
                    "step {}: {} vs {}",
                    s.step,
                    s.ratio,
                    t.skew.ratio
                );
                assert_eq!(s.max_rank, t.peak_rank, "step {}", s.step);
            }
        }
        assert!(t.skew.bytes > 0);
        assert!(t.skew.peak_ratio > 1.05 && t.skew.peak_ratio < t.skew.ratio);
        assert_eq!(
            t.ranks[5].pta_peak_step,
            Some(cfg.rank.steps),
            "the warmup peaks last"
        );
        assert_eq!(t.skew.peak_step, cfg.rank.steps);
        let best = t.steps.iter().max_by_key(|s| s.sum).unwrap();
        assert_eq!(
            t.job_peak_by_step,
            StepSum {
                step: best.step,
                bytes: best.sum
            }
        );
        // Only the leak rank leaks.
        let leaking: Vec<u32> = t
            .ranks
            .iter()
            .filter(|r| r.leak_bytes > 0)
            .map(|r| r.rank)
            .collect();
        assert_eq!(leaking, vec![6]);
        assert_eq!(t.leak_bytes, cfg.leak_bytes());
        assert!(t.leak_bytes >= MIB);
        let mut big = cfg.clone();
        big.rank.layers = 64;
        assert_eq!(big.leak_bytes(), 64 * MIB, "64 MiB for a full-size model");
        // The plain ranks share the model: the same step peaks.
        for r in [0, 1, 3, 4, 7] {
            assert_eq!(
                t.ranks[r]
                    .steps
                    .iter()
                    .map(|s| s.peak_used)
                    .collect::<Vec<_>>(),
                t.ranks[0]
                    .steps
                    .iter()
                    .map(|s| s.peak_used)
                    .collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn ranks_are_laid_out_by_node_with_repeated_pids_and_aligned_steps() {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, t) = small_job(dir.path());
        for r in &t.ranks {
            let (k, j) = (r.rank / 4, r.rank % 4);
            assert_eq!(r.node, format!("node{k}"));
            assert_eq!(r.device, j.to_string());
            // The same pid for the same local rank on every node, distinct within a node.
            assert_eq!(r.pid, t.ranks[j as usize].pid);
            assert!(
                r.dir.starts_with(&format!(
                    "node{k}/memscopeDumpResults/msmemscope_{}_",
                    r.pid
                )),
                "{}",
                r.dir
            );
            assert!(r.dir.ends_with("_ascend"));
            let dump = dir.path().join(&r.dir).join(format!("device_{j}/dump"));
            let files: Vec<String> = std::fs::read_dir(&dump)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert!(
                files
                    .iter()
                    .any(|f| f.starts_with("memscope_dump_") && f.ends_with(".csv")),
                "{files:?}"
            );
            assert!(dir.path().join(&r.dir).join("device_cpu/dump").is_dir());
            assert!(dir.path().join(&r.dir).join("config.json").is_file());
            let full: Truth =
                serde_json::from_str(&std::fs::read_to_string(dir.path().join(&r.truth)).unwrap())
                    .unwrap();
            assert_eq!(full.leak.bytes, r.leak_bytes);
            assert_eq!(full.rows_written, r.rows);
            assert_eq!(
                r.steps.len(),
                cfg.rank.steps as usize,
                "every step collected"
            );
        }
        let pids: std::collections::BTreeSet<u32> = t.ranks.iter().map(|r| r.pid).collect();
        assert_eq!(pids.len(), 4);
        assert!(dir.path().join("job_truth.json").is_file());
        let back: JobTruth = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("job_truth.json")).unwrap(),
        )
        .unwrap();
        // (floats aside: serde_json's f64 text round trip may differ in the last bit)
        assert_eq!(
            (&back.ranks, back.peak_rank, &back.job_peak_by_step),
            (&t.ranks, t.peak_rank, &t.job_peak_by_step)
        );
        assert!((back.skew.ratio - t.skew.ratio).abs() < 1e-12);
        // Wall clocks line up: each step starts within 1 % of a step on every rank.
        let period = t.ranks[0].steps[1].start_ts - t.ranks[0].steps[0].start_ts;
        for s in 0..cfg.rank.steps as usize {
            let starts: Vec<u64> = t.ranks.iter().map(|r| r.steps[s].start_ts).collect();
            let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
            assert!(
                spread * 100 < period,
                "step {}: spread {spread} of {period}",
                s + 1
            );
            for r in &t.ranks {
                let w = &r.steps[s];
                assert!(
                    w.end_ts.unwrap() < w.start_ts + period,
                    "steps do not overlap"
                );
            }
        }
    }

    #[test]
    fn a_plain_config_is_unchanged_by_the_new_knobs() {
        // Unset knobs serialize as before (truth.json's config is compared by other tests).
        let text = serde_json::to_string(&GenConfig::default()).unwrap();
        for k in [
            "model_seed",
            "activation_percent",
            "warmup_percent",
            "step_clock",
            "extra_step_alloc",
            "pid",
            "device_base",
        ] {
            assert!(!text.contains(k), "{k} in {text}");
        }
        let c = GenConfig {
            warmup_percent: Some(25),
            steps: 5,
            ..GenConfig::default()
        };
        assert_eq!(
            (1..=5)
                .map(|s| c.activation_percent_of(s))
                .collect::<Vec<_>>(),
            vec![25, 43, 62, 81, 100]
        );
        assert_eq!(GenConfig::default().activation_percent_of(3), 100);
    }

    #[test]
    fn tiny_jobs_pick_distinct_special_ranks() {
        for (nodes, m) in [(1, 1), (1, 2), (1, 3), (2, 2), (1, 7)] {
            let c = JobConfig::new(nodes, m);
            let n = nodes * m;
            assert!(c.peak_rank < n && c.skew_rank < n && c.leak_rank < n);
            if n > 1 {
                assert_ne!(c.peak_rank, c.skew_rank, "{n}");
            }
            c.validate().unwrap();
        }
        let mut c = JobConfig::new(1, 4);
        c.set_steps(2);
        assert_eq!(c.skew_step, 1);
        c.validate().unwrap();
    }
}
