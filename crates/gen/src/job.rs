//! A multi-rank training job (issue 16): `nodes` machines × `ranks_per_node` processes, one
//! process per NPU, written as the tool writes a job:
//! `JOB/node<k>/memscopeDumpResults/msmemscope_<PID>_<time>_ascend/device_<j>/dump/…`, with
//! local rank j = the NPU id on its node and global rank k × ranks_per_node + j.
//!
//! Every rank runs the same model with the same clock (steps line up across ranks), and the
//! pid of local rank j is the same on every node — as containers give — so a reader must not
//! key ranks by pid. Three ranks differ, by construction, so cross-rank analyses have a known
//! answer (`JOB/job_truth.json`):
//! * the **peak rank** makes one extra transient PTA allocation in the **peak step** (default
//!   the last; half the step peak of a plain rank): its PTA peak is the job's highest, in that
//!   step, and that step's sum over ranks is the job's peak by step;
//! * the **skew rank** does the same in the **skew step** with less (30 %): that step's
//!   outlier is the skew rank alone, its max / median the job's second largest;
//! * the **leak rank** alone leaks (`leak_bytes`: one never-freed `PTA@loss_history` block per
//!   step).
//! Every other step has no outlier.

use std::path::Path;

use serde::{Deserialize, Serialize};

use memq_core::error::{MemqError, Result};

use crate::truth::{StepPool, Truth};
use crate::{generate_tree, write_json, ExtraAlloc, GenConfig};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobConfig {
    pub nodes: u32,
    pub ranks_per_node: u32,
    /// The settings of every rank (devices, processes, pid, device_base, leak and the skew
    /// knobs are set per rank from the fields below).
    pub rank: GenConfig,
    pub peak_rank: u32,
    /// 0 = the last step.
    pub peak_step: u32,
    /// The peak step's extra allocation, bytes (0 = half the step peak of a plain rank, found
    /// by a dry run of the model).
    pub peak_bytes: u64,
    pub skew_rank: u32,
    pub skew_step: u32,
    /// The skew step's extra allocation, bytes (0 = 30 % of a plain rank's step peak).
    pub skew_bytes: u64,
    pub leak_rank: u32,
    pub leak_bytes: u64,
}

impl JobConfig {
    /// A job of `nodes` × `ranks_per_node` with the default special ranks: peak 5, skew 2,
    /// leak 6 (for fewer than 8 ranks: the last but one, the second, the last).
    pub fn new(nodes: u32, ranks_per_node: u32) -> JobConfig {
        let n = nodes * ranks_per_node;
        let (peak, skew, leak) = if n >= 8 {
            (5, 2, 6)
        } else {
            (
                n.saturating_sub(2),
                1.min(n.saturating_sub(1)),
                n.saturating_sub(1),
            )
        };
        JobConfig {
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
                empty_cache_after_step: None,
                ..GenConfig::default()
            },
            peak_rank: peak,
            peak_step: 0,
            peak_bytes: 0,
            skew_rank: skew,
            skew_step: 3,
            skew_bytes: 0,
            leak_rank: leak,
            leak_bytes: 3 << 20,
        }
    }

    pub fn ranks(&self) -> u32 {
        self.nodes * self.ranks_per_node
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(MemqError::Usage(format!("memq-gen: {m}")));
        let n = self.ranks();
        if self.nodes == 0 || self.ranks_per_node == 0 || self.ranks_per_node > 32 {
            return bad("--nodes must be >= 1 and --ranks-per-node 1..=32".into());
        }
        for (what, r) in [
            ("--peak-rank", self.peak_rank),
            ("--skew-rank", self.skew_rank),
            ("--leak-rank", self.leak_rank),
        ] {
            if r >= n {
                return bad(format!("{what} {r}: the job has ranks 0..{}", n - 1));
            }
        }
        if n > 1 && self.peak_rank == self.skew_rank {
            return bad("the peak rank and the skew rank must differ".into());
        }
        if self.skew_step == 0 || self.skew_step > self.rank.steps {
            return bad(format!("--skew-step must be 1..={}", self.rank.steps));
        }
        if self.peak_step > self.rank.steps || self.peak_step() == self.skew_step {
            return bad(format!(
                "--peak-step must be 1..={} and differ from the skew step",
                self.rank.steps
            ));
        }
        Ok(())
    }

    pub fn peak_step(&self) -> u32 {
        if self.peak_step == 0 {
            self.rank.steps
        } else {
            self.peak_step
        }
    }

    /// The settings of rank `r`, with the extra bytes of the peak and the skew step.
    fn rank_config(&self, r: u32, (peak_bytes, skew_bytes): (u64, u64)) -> GenConfig {
        let j = r % self.ranks_per_node;
        let mut c = self.rank.clone();
        c.devices = 1;
        c.processes = 1;
        c.device_base = j;
        c.pid = Some(self.rank.pid.unwrap_or(3_100_000) + 97 * j);
        c.leak_bytes = if r == self.leak_rank {
            self.leak_bytes
        } else {
            0
        };
        c.extra_step_alloc = if r == self.peak_rank {
            Some(ExtraAlloc {
                step: self.peak_step(),
                bytes: peak_bytes,
            })
        } else if r == self.skew_rank {
            Some(ExtraAlloc {
                step: self.skew_step,
                bytes: skew_bytes,
            })
        } else {
            None
        }
        .filter(|x| x.bytes > 0);
        c
    }
}

/// What the job's cross-rank analyses must find (`JOB/job_truth.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobTruth {
    pub nodes: u32,
    pub ranks_per_node: u32,
    pub ranks: Vec<RankTruth>,
    /// The rank with the highest PTA peak (`used` counter).
    pub peak_rank: u32,
    pub skew: SkewTruth,
    /// The only rank that leaks, and its leaked bytes.
    pub leak_rank: u32,
    pub leak_bytes: u64,
    /// The step whose sum over ranks of each rank's PTA step peak is highest.
    pub job_peak_by_step: StepSum,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankTruth {
    /// Global rank: node × ranks_per_node + local rank.
    pub rank: u32,
    /// `node<k>`.
    pub node: String,
    /// The NPU id = the local rank.
    pub device: String,
    pub pid: u32,
    /// Its project folder, relative to the job folder.
    pub dir: String,
    /// Highest `used` of its PTA pool, and when.
    pub pta_peak_used: u64,
    pub pta_peak_ts: u64,
    /// The step whose window holds pta_peak_ts; None outside every step.
    pub pta_peak_step: Option<u32>,
    /// Its PTA pool per step (truth.json's `pools[].steps`: the step's peak of `used`,
    /// including the level when the step starts, and the level at its end).
    pub steps: Vec<StepPool>,
    pub leak_bytes: u64,
    /// Dump rows written.
    pub rows: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkewTruth {
    pub rank: u32,
    pub step: u32,
    /// In that step: max / median over ranks of the PTA step peak.
    pub ratio: f64,
    /// The extra allocation that makes it, bytes.
    pub bytes: u64,
    /// The peak rank's extra allocation and its step (the job's most skewed step).
    pub peak_step: u32,
    pub peak_bytes: u64,
    pub peak_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSum {
    pub step: u32,
    pub bytes: u64,
}

/// Writes the job under `out` (created), with `out/job_truth.json` and each rank's full truth
/// as `out/node<k>/truth_rank<r>.json`; the ranks are generated on every core.
pub fn generate_job(cfg: &JobConfig, out: &Path) -> Result<JobTruth> {
    cfg.validate()?;
    let extra = if cfg.skew_bytes > 0 && cfg.peak_bytes > 0 {
        (cfg.peak_bytes, cfg.skew_bytes)
    } else {
        // A dry run of a plain rank gives its step peak.
        let dry = tempfile::tempdir().map_err(|e| MemqError::io(out, e))?;
        let t = generate_tree(&cfg.rank_config(u32::MAX, (0, 0)), dry.path())?;
        let peak = pta(&t).map(|p| p.peak_used).unwrap_or(64 << 20);
        let or = |v: u64, pct: u64| {
            if v > 0 {
                v
            } else {
                (peak * pct / 100).div_ceil(512) * 512
            }
        };
        (or(cfg.peak_bytes, 50), or(cfg.skew_bytes, 30))
    };
    let n = cfg.ranks();
    let next = std::sync::atomic::AtomicU32::new(0);
    let results = std::sync::Mutex::new(Vec::<(u32, Result<Truth>)>::new());
    let threads = std::thread::available_parallelism()
        .map(|c| c.get())
        .unwrap_or(1)
        .min(n as usize);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let r = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if r >= n {
                    break;
                }
                let node = out.join(format!("node{}", r / cfg.ranks_per_node));
                let t = generate_tree(
                    &cfg.rank_config(r, extra),
                    &node.join("memscopeDumpResults"),
                )
                .and_then(|t| {
                    write_json(&node.join(format!("truth_rank{r}.json")), &t)?;
                    Ok(t)
                });
                if let Ok(mut v) = results.lock() {
                    v.push((r, t));
                }
            });
        }
    });
    let mut truths = results
        .into_inner()
        .map_err(|_| MemqError::Query("a generator thread panicked".into()))?;
    truths.sort_by_key(|(r, _)| *r);
    let mut ranks = Vec::new();
    for (r, t) in truths {
        ranks.push(rank_truth(cfg, r, &t?)?);
    }
    if ranks.len() != n as usize {
        return Err(MemqError::Query("a generator thread panicked".into()));
    }
    let peak_rank = ranks
        .iter()
        .max_by_key(|r| (r.pta_peak_used, std::cmp::Reverse(r.rank)))
        .map(|r| r.rank)
        .unwrap_or(0);
    let step_peak = |r: &RankTruth, s: u32| {
        r.steps
            .iter()
            .find(|x| x.step == s)
            .and_then(|x| x.peak_used)
            .unwrap_or(0)
    };
    let ratio = |s: u32| {
        let mut v: Vec<u64> = ranks.iter().map(|r| step_peak(r, s)).collect();
        v.sort_unstable();
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2] as f64
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) as f64 / 2.0
        };
        let max = *v.last().unwrap_or(&0) as f64;
        if median > 0.0 {
            max / median
        } else {
            0.0
        }
    };
    let steps = cfg.rank.steps;
    let job_peak_by_step = (1..=steps)
        .map(|s| StepSum {
            step: s,
            bytes: ranks.iter().map(|r| step_peak(r, s)).sum(),
        })
        .max_by_key(|x| (x.bytes, std::cmp::Reverse(x.step)))
        .unwrap_or(StepSum { step: 0, bytes: 0 });
    let truth = JobTruth {
        nodes: cfg.nodes,
        ranks_per_node: cfg.ranks_per_node,
        peak_rank,
        skew: SkewTruth {
            rank: cfg.skew_rank,
            step: cfg.skew_step,
            ratio: ratio(cfg.skew_step),
            bytes: extra.1,
            peak_step: cfg.peak_step(),
            peak_bytes: extra.0,
            peak_ratio: ratio(cfg.peak_step()),
        },
        leak_rank: cfg.leak_rank,
        leak_bytes: ranks.iter().map(|r| r.leak_bytes).sum(),
        job_peak_by_step,
        ranks,
    };
    write_json(&out.join("job_truth.json"), &truth)?;
    Ok(truth)
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
    let peak_step = proc
        .steps
        .iter()
        .filter(|w| w.device == p.device && w.collected)
        .find(|w| w.start_ts <= p.peak_used_ts && w.end_ts.is_none_or(|e| p.peak_used_ts <= e))
        .map(|w| w.step);
    let node = format!("node{}", r / cfg.ranks_per_node);
    Ok(RankTruth {
        rank: r,
        device: p.device.clone(),
        pid: proc.pid,
        dir: format!("{node}/memscopeDumpResults/{}", proc.dir),
        node,
        pta_peak_used: p.peak_used,
        pta_peak_ts: p.peak_used_ts,
        pta_peak_step: peak_step,
        steps: p.steps.clone(),
        leak_bytes: t.leak.bytes,
        rows: t.rows_written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_job_has_its_special_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = JobConfig::new(2, 4);
        let t = generate_job(&cfg, dir.path()).unwrap();
        assert_eq!(t.ranks.len(), 8);
        assert_eq!(
            t.peak_rank,
            5,
            "{:?}",
            t.ranks.iter().map(|r| r.pta_peak_used).collect::<Vec<_>>()
        );
        let second = t
            .ranks
            .iter()
            .filter(|r| r.rank != 5)
            .map(|r| r.pta_peak_used)
            .max()
            .unwrap();
        assert!(
            t.ranks[5].pta_peak_used as f64 > second as f64 * 1.05,
            "a clear margin"
        );
        assert!(t.skew.ratio >= 1.2, "{}", t.skew.ratio);
        assert!(t.skew.peak_ratio > t.skew.ratio);
        assert_eq!(t.ranks[5].pta_peak_step, Some(cfg.peak_step()));
        assert_eq!(t.job_peak_by_step.step, cfg.peak_step());
        // Only the peak and the skew step are skewed.
        for s in 1..=cfg.rank.steps {
            let mut v: Vec<u64> = t
                .ranks
                .iter()
                .map(|r| {
                    r.steps
                        .iter()
                        .find(|x| x.step == s)
                        .unwrap()
                        .peak_used
                        .unwrap()
                })
                .collect();
            v.sort_unstable();
            let med = (v[3] + v[4]) as f64 / 2.0;
            let r = (*v.last().unwrap() as f64) / med;
            if s != cfg.skew_step && s != cfg.peak_step() {
                assert!(
                    r < 1.05,
                    "step {s}: {r} (the 5 % below which step_skew flags no outlier)"
                );
            }
        }
        let leaking: Vec<u32> = t
            .ranks
            .iter()
            .filter(|r| r.leak_bytes > 0)
            .map(|r| r.rank)
            .collect();
        assert_eq!(leaking, vec![6]);
        // The same pid for the same local rank on every node; layout as the tool writes it.
        assert_eq!(t.ranks[1].pid, t.ranks[5].pid);
        assert_ne!(t.ranks[1].pid, t.ranks[2].pid);
        assert_eq!(t.ranks[6].device, "2");
        let dump = dir.path().join(&t.ranks[6].dir).join("device_2/dump");
        assert!(
            std::fs::read_dir(&dump).unwrap().count() > 0,
            "{}",
            dump.display()
        );
        assert!(dir.path().join("node1/truth_rank6.json").is_file());
        assert!(dir.path().join("job_truth.json").is_file());
    }
}
