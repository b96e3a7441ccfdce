//! Ground truth: what a correct analysis of the generated dump must find. Everything here is
//! computed from the simulation state while it runs, never by reading the written files.
//!
//! Conventions (see also `GenConfig` docs):
//! * `device` is the Device Id text (`"0"`, `"cpu"`); `pool` the Event Type (`PTA`, `HAL`,
//!   `HOST_PINNED`); timestamps are the raw ns values as written.
//! * Pools with counters on their rows (`PTA`, `HOST_PINNED`: `used_source = "attr"`) take peak /
//!   final / per-step values from the `used`/`total` Attr of the written rows (for HOST_PINNED
//!   `used` is the process VmRSS). `HAL` rows carry no counters (`used_source = "pairing"`): its
//!   values are live bytes from pairing MALLOC/FREE rows in timestamp order (ties: file order),
//!   counting shadow rows like real ones except the exit fill-in FREEs (rule 4), so `final_used`
//!   is the HAL memory still held at exit.
//! * Peaks take the earliest timestamp on ties. Per-step windows run from the step's
//!   `SYSTEM/STEP` row to its `MSTX/Range_end` row (inclusive); steps inside a stop period are
//!   listed with `collected: false` and no values.
//! * Owner groups follow §5.3 (framework segment dropped; no owner → `(未标注)`).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::out::Dev;
use super::GenConfig;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    pub generator: String,
    pub config: GenConfig,
    /// Dump rows written over all dump files (device-less rows count once per file).
    pub rows_written: u64,
    pub files: Vec<FileTruth>,
    pub processes: Vec<ProcessTruth>,
    pub pools: Vec<PoolTruth>,
    /// Live blocks by level-1 owner group at the PTA `used` peak of each device, for PTA and HAL.
    pub breakdowns: Vec<BreakdownTruth>,
    pub leak: LeakTruth,
    /// Blocks still held at exit (their only FREE is an exit fill-in), by group. `stock` = the
    /// MALLOC is a promoted shadow row.
    pub live_at_exit: Vec<GroupLive>,
    pub hal_segments: Vec<HalSegment>,
    pub oom: Vec<OomTruth>,
    pub shadow: ShadowTruth,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileTruth {
    /// Path relative to the output folder, `/`-separated.
    pub path: String,
    /// `dump`, `python_trace`, `compare`, `config`, `log`.
    pub kind: String,
    pub pid: u32,
    /// Device folder of the file (`0`, `cpu`), empty for project-level files.
    pub device: String,
    /// Data rows (records, not physical lines; headers excluded).
    pub rows: u64,
    /// Dump files: rows per Event then Event Type.
    pub counts: BTreeMap<String, BTreeMap<String, u64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepWindow {
    pub device: String,
    pub step: u32,
    pub start_ts: u64,
    /// `None` when the step never finished (OOM).
    pub end_ts: Option<u64>,
    pub collected: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessTruth {
    pub pid: u32,
    pub dir: String,
    pub devices: Vec<String>,
    pub start_trace_ts: Vec<u64>,
    pub stop_trace_ts: Vec<u64>,
    pub exit_ts: u64,
    pub exit_stopped: bool,
    pub steps: Vec<StepWindow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expansion {
    pub ts: u64,
    pub total_before: u64,
    pub total_after: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepPool {
    pub step: u32,
    pub peak_used: Option<u64>,
    pub end_used: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolTruth {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub used_source: String,
    pub peak_used: u64,
    pub peak_used_ts: u64,
    pub peak_total: Option<u64>,
    pub final_used: u64,
    pub final_total: Option<u64>,
    /// Rows that carry `used` (attr pools) or MALLOC/FREE rows (HAL).
    pub rows: u64,
    pub expansions: Vec<Expansion>,
    pub steps: Vec<StepPool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupBytes {
    pub group: String,
    pub bytes: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakdownTruth {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub at_ts: u64,
    pub total_bytes: u64,
    pub total_blocks: u64,
    /// Sorted by bytes descending, then group name.
    pub groups: Vec<GroupBytes>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakBlock {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub ptr: u64,
    pub size: u64,
    pub owner: String,
    pub allocation_id: u64,
    pub alloc_ts: u64,
    /// Timestamp of its exit fill-in shadow FREE.
    pub free_ts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakTruth {
    pub bytes: u64,
    pub blocks: Vec<LeakBlock>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupLive {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub group: String,
    pub stock: bool,
    pub bytes: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HalSegment {
    pub pid: u32,
    pub device: String,
    pub ts: u64,
    pub ptr: u64,
    pub size: u64,
    pub owner: String,
    pub alloc_type: String,
    pub page_type: String,
    pub shadow: bool,
    pub allocation_id: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomRecord {
    pub pool: String,
    pub ptr: u64,
    pub size: u64,
    pub timestamp: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomTruth {
    pub pid: u32,
    pub device: String,
    /// OOM_TRIGGER timestamp (= time of the failed driver call).
    pub ts: u64,
    pub func: String,
    pub req_size: u64,
    pub flag: u64,
    /// The automatic `OOM_Snapshot` row (written just before the trigger row).
    pub snapshot_ts: u64,
    pub free: u64,
    pub total: u64,
    /// In written order (RECENT: newest first; TOP: largest first).
    pub recent: Vec<OomRecord>,
    pub top: Vec<OomRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShadowTruth {
    /// Shadow MALLOC rows (stock memory promoted at a `start()`).
    pub promoted_mallocs: u64,
    /// Shadow FREE rows of genuine frees during a stop period (rule 3).
    pub stop_period_frees: u64,
    /// Shadow FREE rows synthesised at exit (rule 4).
    pub exit_fill_ins: u64,
    /// Shadow FREE rows synthesised on address reuse (rule 5).
    pub residual_fill_ins: u64,
}

// ---------------------------------------------------------------------------------------------
// Accumulator (crate-internal)
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
pub(crate) struct PoolAcc {
    rows: u64,
    peak: u64,
    peak_ts: u64,
    peak_total: Option<u64>,
    last_used: u64,
    last_total: Option<u64>,
    expansions: Vec<Expansion>,
    steps: Vec<StepPool>,
    cur_step: Option<usize>,
}

type Groups = BTreeMap<&'static str, (u64, u64)>;

/// One HAL MALLOC/FREE as written: (ts, kind 0 = FREE / 1 = MALLOC, sequence, signed bytes).
type Delta = (u64, u8, u64, i64);

/// Everything the accumulator learned about one process.
pub(crate) struct AccOut {
    pub pools: Vec<PoolTruth>,
    pub breakdowns: Vec<BreakdownTruth>,
    pub live_at_exit: Vec<GroupLive>,
    pub steps: Vec<StepWindow>,
    pub hal_segments: Vec<HalSegment>,
    pub leaks: Vec<LeakBlock>,
    pub oom: Vec<OomTruth>,
    pub shadow: ShadowTruth,
    pub start_ts: Vec<u64>,
    pub stop_ts: Vec<u64>,
}

pub(crate) struct Acc {
    pub pid: u32,
    pools: BTreeMap<(Dev, &'static str), PoolAcc>,
    groups: HashMap<(Dev, &'static str), Groups>,
    breakdown: BTreeMap<Dev, (u64, Groups, Groups)>,
    hal: BTreeMap<Dev, Vec<Delta>>,
    seq: u64,
    pub steps: Vec<StepWindow>,
    pub hal_segments: Vec<HalSegment>,
    pub leaks: Vec<LeakBlock>,
    live_exit: BTreeMap<(Dev, &'static str, &'static str, bool), (u64, u64)>,
    pub oom: Vec<OomTruth>,
    pub shadow: ShadowTruth,
    pub start_ts: Vec<u64>,
    pub stop_ts: Vec<u64>,
}

impl Acc {
    pub fn new(pid: u32) -> Acc {
        Acc {
            pid,
            pools: BTreeMap::new(),
            groups: HashMap::new(),
            breakdown: BTreeMap::new(),
            hal: BTreeMap::new(),
            seq: 0,
            steps: Vec::new(),
            hal_segments: Vec::new(),
            leaks: Vec::new(),
            live_exit: BTreeMap::new(),
            oom: Vec::new(),
            shadow: ShadowTruth::default(),
            start_ts: Vec::new(),
            stop_ts: Vec::new(),
        }
    }

    /// A written row carrying `used` (and `total` for framework pools), in time order.
    pub fn counter(
        &mut self,
        dev: Dev,
        pool: &'static str,
        ts: u64,
        used: u64,
        total: Option<u64>,
    ) {
        let pa = self.pools.entry((dev, pool)).or_default();
        pa.rows += 1;
        let new_peak = pa.rows == 1 || used > pa.peak;
        if new_peak {
            pa.peak = used;
            pa.peak_ts = ts;
        }
        if let Some(t) = total {
            if let Some(prev) = pa.last_total {
                if t > prev {
                    pa.expansions.push(Expansion {
                        ts,
                        total_before: prev,
                        total_after: t,
                    });
                }
            }
            pa.peak_total = Some(pa.peak_total.map_or(t, |p| p.max(t)));
        }
        pa.last_used = used;
        pa.last_total = total;
        if let Some(i) = pa.cur_step {
            let s = &mut pa.steps[i];
            s.peak_used = Some(s.peak_used.map_or(used, |p| p.max(used)));
        }
        if new_peak && pool == "PTA" {
            let pta = self.groups.get(&(dev, "PTA")).cloned().unwrap_or_default();
            let hal = self.groups.get(&(dev, "HAL")).cloned().unwrap_or_default();
            self.breakdown.insert(dev, (ts, pta, hal));
        }
    }

    /// Tool-view liveness by group (for the breakdown at the PTA peak).
    pub fn group_add(&mut self, dev: Dev, pool: &'static str, group: &'static str, size: u64) {
        let e = self
            .groups
            .entry((dev, pool))
            .or_default()
            .entry(group)
            .or_insert((0, 0));
        e.0 += size;
        e.1 += 1;
    }

    pub fn group_remove(&mut self, dev: Dev, pool: &'static str, group: &'static str, size: u64) {
        if let Some(g) = self.groups.get_mut(&(dev, pool)) {
            if let Some(e) = g.get_mut(group) {
                e.0 -= size;
                e.1 -= 1;
                if e.1 == 0 {
                    g.remove(group);
                }
            }
        }
    }

    /// A HAL MALLOC (+) or FREE (-) row as written (rewritten timestamps included).
    pub fn hal_delta(&mut self, dev: Dev, ts: u64, delta: i64) {
        self.seq += 1;
        let kind = if delta < 0 { 0 } else { 1 };
        self.hal
            .entry(dev)
            .or_default()
            .push((ts, kind, self.seq, delta));
    }

    pub fn live_at_exit(
        &mut self,
        dev: Dev,
        pool: &'static str,
        group: &'static str,
        stock: bool,
        size: u64,
    ) {
        let e = self
            .live_exit
            .entry((dev, pool, group, stock))
            .or_insert((0, 0));
        e.0 += size;
        e.1 += 1;
    }

    pub fn step_begin(&mut self, dev: Dev, step: u32, ts: u64, collected: bool) {
        self.steps.push(StepWindow {
            device: dev.label(),
            step,
            start_ts: ts,
            end_ts: None,
            collected,
        });
        let pa = self.pools.entry((dev, "PTA")).or_default();
        pa.steps.push(StepPool {
            step,
            peak_used: None,
            end_used: None,
        });
        pa.cur_step = if collected {
            Some(pa.steps.len() - 1)
        } else {
            None
        };
    }

    pub fn step_end(&mut self, dev: Dev, step: u32, ts: u64, collected: bool) {
        let label = dev.label();
        if let Some(w) = self
            .steps
            .iter_mut()
            .rev()
            .find(|w| w.device == label && w.step == step)
        {
            w.end_ts = Some(ts);
        }
        if let Some(pa) = self.pools.get_mut(&(dev, "PTA")) {
            if let Some(s) = pa.steps.last_mut() {
                if collected && s.step == step {
                    s.end_used = Some(pa.last_used);
                }
            }
            pa.cur_step = None;
        }
    }

    pub fn finish(self) -> AccOut {
        let pid = self.pid;
        let mut pools = Vec::new();
        for ((dev, pool), pa) in &self.pools {
            if pa.rows == 0 {
                continue;
            }
            pools.push(PoolTruth {
                pid,
                device: dev.label(),
                pool: pool.to_string(),
                used_source: "attr".to_string(),
                peak_used: pa.peak,
                peak_used_ts: pa.peak_ts,
                peak_total: pa.peak_total,
                final_used: pa.last_used,
                final_total: pa.last_total,
                rows: pa.rows,
                expansions: pa.expansions.clone(),
                steps: pa.steps.clone(),
            });
        }
        // HAL: live bytes by pairing, in (ts, FREE-before-MALLOC, file order) order.
        for (dev, deltas) in self.hal {
            let mut d = deltas;
            d.sort();
            let label = dev.label();
            let (mut live, mut peak, mut peak_ts) = (0i64, 0i64, 0u64);
            for &(ts, _, _, delta) in &d {
                live += delta;
                if live > peak {
                    peak = live;
                    peak_ts = ts;
                }
            }
            let mut steps = Vec::new();
            for w in self.steps.iter().filter(|w| w.device == label) {
                if !w.collected {
                    steps.push(StepPool {
                        step: w.step,
                        peak_used: None,
                        end_used: None,
                    });
                    continue;
                }
                let end = w.end_ts.unwrap_or(u64::MAX);
                // Value in effect at the window start, then every row inside the window.
                let (mut cur, mut k) = (0i64, 0usize);
                while k < d.len() && d[k].0 < w.start_ts {
                    cur += d[k].3;
                    k += 1;
                }
                let mut pk = cur;
                while k < d.len() && d[k].0 <= end {
                    cur += d[k].3;
                    pk = pk.max(cur);
                    k += 1;
                }
                steps.push(StepPool {
                    step: w.step,
                    peak_used: Some(pk as u64),
                    end_used: w.end_ts.map(|_| cur as u64),
                });
            }
            pools.push(PoolTruth {
                pid,
                device: label,
                pool: "HAL".to_string(),
                used_source: "pairing".to_string(),
                peak_used: peak as u64,
                peak_used_ts: peak_ts,
                peak_total: None,
                final_used: live as u64,
                final_total: None,
                rows: d.len() as u64,
                expansions: Vec::new(),
                steps,
            });
        }
        pools.sort_by(|a, b| (&a.device, &a.pool).cmp(&(&b.device, &b.pool)));

        let mut breakdowns = Vec::new();
        for (dev, (ts, pta, hal)) in &self.breakdown {
            for (pool, g) in [("PTA", pta), ("HAL", hal)] {
                let mut groups: Vec<GroupBytes> = g
                    .iter()
                    .map(|(k, (b, n))| GroupBytes {
                        group: k.to_string(),
                        bytes: *b,
                        blocks: *n,
                    })
                    .collect();
                groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.group.cmp(&b.group)));
                breakdowns.push(BreakdownTruth {
                    pid,
                    device: dev.label(),
                    pool: pool.to_string(),
                    at_ts: *ts,
                    total_bytes: groups.iter().map(|g| g.bytes).sum(),
                    total_blocks: groups.iter().map(|g| g.blocks).sum(),
                    groups,
                });
            }
        }
        let live = self
            .live_exit
            .iter()
            .map(|((dev, pool, group, stock), (b, n))| GroupLive {
                pid,
                device: dev.label(),
                pool: pool.to_string(),
                group: group.to_string(),
                stock: *stock,
                bytes: *b,
                blocks: *n,
            })
            .collect();
        let mut segs = self.hal_segments;
        segs.sort_by(|a, b| {
            (&a.device, a.ts, a.allocation_id).cmp(&(&b.device, b.ts, b.allocation_id))
        });
        let mut leaks = self.leaks;
        leaks.sort_by(|a, b| (&a.device, a.alloc_ts).cmp(&(&b.device, b.alloc_ts)));
        AccOut {
            pools,
            breakdowns,
            live_at_exit: live,
            steps: self.steps,
            hal_segments: segs,
            leaks,
            oom: self.oom,
            shadow: self.shadow,
            start_ts: self.start_ts,
            stop_ts: self.stop_ts,
        }
    }
}
