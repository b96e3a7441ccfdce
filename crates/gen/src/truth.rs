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
//! * Categories are what a block is by construction (`text::category_of`, with the call sites
//!   that allocate something else under a shared owner saying so: the ATB workspace under
//!   `PTA@ops`, the unsharded weight gradient under `PTA@backward@ops`); docs/attribution.md's
//!   names. A block the tool promoted at a `start()` has lost its owner and counts as `stock`.
//! * Owner names of [`OwnerTotals`] follow `owner_peaks`/`run_diff`: the MALLOC's owner, else
//!   `(stock)` for a promoted block, else the pool.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{Dev, GenConfig};

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
    /// Live PTA blocks by category at the PTA `used` peak of each device (the moment of
    /// `breakdowns`).
    #[serde(default)]
    pub peak_categories: Vec<CategoryBreakdown>,
    /// Live blocks by level-1 owner group at the end (`MSTX/Range_end` row) of every collected
    /// step that ended, per process, device and pool (PTA, HAL).
    #[serde(default)]
    pub step_live: Vec<StepLive>,
    /// Every owner of the run (all processes and devices): bytes allocated, blocks, the highest
    /// live bytes in one series (process, device, pool) and bytes held at the end.
    #[serde(default)]
    pub owners: Vec<OwnerTotals>,
    /// Wasted memory measured from ACCESS rows (`GenConfig::wasted`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasted: Option<WastedTruth>,
    /// Bytes and blocks the extra owner (`GenConfig::extra_owner`) allocates in each collected
    /// step, over all devices (empty without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_owner_steps: Vec<StepAlloc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepAlloc {
    pub step: u32,
    pub bytes: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryBreakdown {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub at_ts: u64,
    pub total_bytes: u64,
    pub total_blocks: u64,
    /// `group` is the category; sorted by bytes descending, then name.
    pub categories: Vec<GroupBytes>,
    /// The same blocks by owner (owner_peaks naming) and category, sorted by owner, category.
    pub owners: Vec<OwnerCategory>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerCategory {
    pub owner: String,
    pub category: String,
    pub bytes: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLive {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub step: u32,
    /// The step's `MSTX/Range_end` timestamp.
    pub at_ts: u64,
    pub total_bytes: u64,
    pub total_blocks: u64,
    /// Sorted by bytes descending, then group name.
    pub groups: Vec<GroupBytes>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnerTotals {
    pub owner: String,
    /// Sum of the sizes of its written MALLOCs (promoted shadow MALLOCs included).
    pub alloc_bytes: u64,
    pub blocks: u64,
    /// Its highest live bytes in one series (tool view: rows in timestamp order).
    pub peak_bytes: u64,
    /// Bytes of its blocks still held at exit (freed only by an exit fill-in).
    pub held_end: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WastedTruth {
    /// The three blocks injected per NPU (kinds `early_allocation`, `late_deallocation`,
    /// `temporary_idleness`), each with the interval it was made to waste.
    pub injected: Vec<WastedInterval>,
    /// Every wasted interval of every block with ACCESS rows (injected or not) that the peak of
    /// its series falls strictly inside: what `wasted_memory` lists with origin `access`.
    pub listed: Vec<WastedInterval>,
}

/// A block's wasted interval. Intervals: `early_allocation` MALLOC → first ACCESS;
/// `late_deallocation` last ACCESS → the FREE (a block held at exit: the last row of its dump
/// file); `temporary_idleness` the longest gap between two ACCESS rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WastedInterval {
    pub pid: u32,
    pub device: String,
    pub pool: String,
    pub ptr: u64,
    pub size: u64,
    pub owner: String,
    pub allocation_id: u64,
    pub kind: String,
    pub injected: bool,
    pub alloc_ts: u64,
    pub first_use_ts: u64,
    pub last_use_ts: u64,
    /// The FREE's timestamp; `None` when held at exit.
    pub end_ts: Option<u64>,
    pub wasted_from: u64,
    pub wasted_to: u64,
    /// The series' peak (the PTA `used` peak of the device).
    pub peak_ts: u64,
    pub covers_peak: bool,
    /// `size` when the interval covers the peak, else 0: what not holding the block in the
    /// interval (allocating at first use, freeing at last use) takes off the peak.
    pub peak_saving: u64,
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
/// (owner, category) → (bytes, blocks).
type OwnerCats = BTreeMap<(&'static str, &'static str), (u64, u64)>;

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
    pub peak_categories: Vec<CategoryBreakdown>,
    pub step_live: Vec<StepLive>,
    pub owners: Vec<OwnerTotals>,
    pub wasted: Option<WastedTruth>,
}

/// A block with ACCESS rows, as written (for the wasted-memory truth).
pub(crate) struct UseRecord {
    pub dev: Dev,
    pub pool: &'static str,
    pub ptr: u64,
    pub size: u64,
    pub owner: &'static str,
    pub alloc_id: u64,
    pub alloc_ts: u64,
    /// ACCESS timestamps in time order.
    pub uses: Vec<u64>,
    /// The FREE's timestamp; `None` when held at exit.
    pub end_ts: Option<u64>,
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
    cats: HashMap<(Dev, &'static str), Groups>,
    owner_cats: HashMap<(Dev, &'static str), OwnerCats>,
    cat_breakdown: BTreeMap<Dev, (u64, Groups, OwnerCats)>,
    step_live: Vec<StepLive>,
    owner_live: HashMap<(Dev, &'static str, &'static str), u64>,
    /// Owner → (bytes allocated, blocks, peak in one series, held at exit).
    owner_totals: BTreeMap<&'static str, (u64, u64, u64, u64)>,
    /// Blocks with ACCESS rows (collected only when `track_uses`).
    pub uses: Vec<UseRecord>,
    pub track_uses: bool,
    /// allocation_id → kind of the injected wasted-memory blocks.
    pub injected: HashMap<u64, &'static str>,
    /// The timestamp of the last row of each device's dump file.
    pub data_end: BTreeMap<Dev, u64>,
    /// Run B's extra owner: step → (bytes, blocks) allocated while collecting, all devices.
    pub extra_steps: BTreeMap<u32, (u64, u64)>,
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
            cats: HashMap::new(),
            owner_cats: HashMap::new(),
            cat_breakdown: BTreeMap::new(),
            step_live: Vec::new(),
            owner_live: HashMap::new(),
            owner_totals: BTreeMap::new(),
            uses: Vec::new(),
            track_uses: false,
            injected: HashMap::new(),
            data_end: BTreeMap::new(),
            extra_steps: BTreeMap::new(),
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
            let cats = self.cats.get(&(dev, "PTA")).cloned().unwrap_or_default();
            let oc = self
                .owner_cats
                .get(&(dev, "PTA"))
                .cloned()
                .unwrap_or_default();
            self.cat_breakdown.insert(dev, (ts, cats, oc));
        }
    }

    /// Tool-view liveness by group (for the breakdown at the PTA peak).
    /// `cat` is the block's category and `owner` its owner_peaks name (the breakdowns by
    /// category at the PTA peak).
    pub fn group_add(
        &mut self,
        dev: Dev,
        pool: &'static str,
        group: &'static str,
        (owner, cat): (&'static str, &'static str),
        size: u64,
    ) {
        for (map, key) in [(&mut self.groups, group), (&mut self.cats, cat)] {
            let e = map
                .entry((dev, pool))
                .or_default()
                .entry(key)
                .or_insert((0, 0));
            e.0 += size;
            e.1 += 1;
        }
        let e = self
            .owner_cats
            .entry((dev, pool))
            .or_default()
            .entry((owner, cat))
            .or_insert((0, 0));
        e.0 += size;
        e.1 += 1;
    }

    pub fn group_remove(
        &mut self,
        dev: Dev,
        pool: &'static str,
        group: &'static str,
        (owner, cat): (&'static str, &'static str),
        size: u64,
    ) {
        for (map, key) in [(&mut self.groups, group), (&mut self.cats, cat)] {
            if let Some(g) = map.get_mut(&(dev, pool)) {
                if let Some(e) = g.get_mut(key) {
                    e.0 -= size;
                    e.1 -= 1;
                    if e.1 == 0 {
                        g.remove(key);
                    }
                }
            }
        }
        if let Some(g) = self.owner_cats.get_mut(&(dev, pool)) {
            if let Some(e) = g.get_mut(&(owner, cat)) {
                e.0 -= size;
                e.1 -= 1;
                if e.1 == 0 {
                    g.remove(&(owner, cat));
                }
            }
        }
    }

    /// A written MALLOC (+) or block-ending FREE (-) of `owner` (owner_peaks naming) in the
    /// series (dev, pool), in time order.
    pub fn owner_delta(&mut self, dev: Dev, pool: &'static str, owner: &'static str, delta: i64) {
        let live = self.owner_live.entry((dev, pool, owner)).or_insert(0);
        *live = (*live as i64 + delta) as u64;
        let v = *live;
        let t = self.owner_totals.entry(owner).or_insert((0, 0, 0, 0));
        t.2 = t.2.max(v);
    }

    /// A block whose MALLOC was written (once per block, at its flush).
    pub fn owner_block(&mut self, owner: &'static str, size: u64, held_end: bool) {
        let t = self.owner_totals.entry(owner).or_insert((0, 0, 0, 0));
        t.0 += size;
        t.1 += 1;
        if held_end {
            t.3 += size;
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
        if collected {
            for pool in ["PTA", "HAL"] {
                let g = self.groups.get(&(dev, pool)).cloned().unwrap_or_default();
                let groups = sorted_groups(&g);
                self.step_live.push(StepLive {
                    pid: self.pid,
                    device: dev.label(),
                    pool: pool.to_string(),
                    step,
                    at_ts: ts,
                    total_bytes: groups.iter().map(|g| g.bytes).sum(),
                    total_blocks: groups.iter().map(|g| g.blocks).sum(),
                    groups,
                });
            }
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
                let groups = sorted_groups(g);
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
        let peak_categories = self
            .cat_breakdown
            .iter()
            .map(|(dev, (ts, g, oc))| {
                let categories = sorted_groups(g);
                let owners = oc
                    .iter()
                    .map(|((o, c), (b, n))| OwnerCategory {
                        owner: o.to_string(),
                        category: c.to_string(),
                        bytes: *b,
                        blocks: *n,
                    })
                    .collect();
                CategoryBreakdown {
                    pid,
                    device: dev.label(),
                    pool: "PTA".to_string(),
                    at_ts: *ts,
                    total_bytes: categories.iter().map(|g| g.bytes).sum(),
                    total_blocks: categories.iter().map(|g| g.blocks).sum(),
                    categories,
                    owners,
                }
            })
            .collect();
        let owners = self
            .owner_totals
            .iter()
            .map(|(o, (bytes, n, peak, held))| OwnerTotals {
                owner: o.to_string(),
                alloc_bytes: *bytes,
                blocks: *n,
                peak_bytes: *peak,
                held_end: *held,
            })
            .collect();
        let wasted = self.track_uses.then(|| {
            let mut w = WastedTruth {
                injected: Vec::new(),
                listed: Vec::new(),
            };
            for u in &self.uses {
                let peak_ts = self.pools.get(&(u.dev, u.pool)).map_or(0, |p| p.peak_ts);
                let data_end = self.data_end.get(&u.dev).copied().unwrap_or(0);
                let (first, last) = (u.uses[0], *u.uses.last().expect("a use"));
                let mut intervals = vec![
                    ("early_allocation", u.alloc_ts, first),
                    ("late_deallocation", last, u.end_ts.unwrap_or(data_end)),
                ];
                // the longest gap between consecutive uses (the first of equal ones)
                let mut gap: Option<(u64, u64)> = None;
                for p in u.uses.windows(2) {
                    if gap.is_none_or(|(a, b)| p[1] - p[0] > b - a) {
                        gap = Some((p[0], p[1]));
                    }
                }
                if let Some((a, b)) = gap {
                    intervals.push(("temporary_idleness", a, b));
                }
                let injected = self.injected.get(&u.alloc_id).copied();
                for (kind, from, to) in intervals {
                    let covers = peak_ts > from && peak_ts < to;
                    let iv = WastedInterval {
                        pid,
                        device: u.dev.label(),
                        pool: u.pool.to_string(),
                        ptr: u.ptr,
                        size: u.size,
                        owner: u.owner.to_string(),
                        allocation_id: u.alloc_id,
                        kind: kind.to_string(),
                        injected: injected.is_some(),
                        alloc_ts: u.alloc_ts,
                        first_use_ts: first,
                        last_use_ts: last,
                        end_ts: u.end_ts,
                        wasted_from: from,
                        wasted_to: to,
                        peak_ts,
                        covers_peak: covers,
                        peak_saving: if covers { u.size } else { 0 },
                    };
                    if injected == Some(kind) {
                        w.injected.push(iv.clone());
                    }
                    if covers && to > from {
                        w.listed.push(iv);
                    }
                }
            }
            w.injected
                .sort_by(|a, b| (&a.device, a.alloc_ts).cmp(&(&b.device, b.alloc_ts)));
            w.listed.sort_by(|a, b| {
                (&a.device, a.alloc_ts, a.ptr, &a.kind)
                    .cmp(&(&b.device, b.alloc_ts, b.ptr, &b.kind))
            });
            w
        });
        AccOut {
            peak_categories,
            step_live: self.step_live,
            owners,
            wasted,
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

/// Groups as truth lists them: by bytes descending, then name.
fn sorted_groups(g: &Groups) -> Vec<GroupBytes> {
    let mut groups: Vec<GroupBytes> = g
        .iter()
        .map(|(k, (b, n))| GroupBytes {
            group: k.to_string(),
            bytes: *b,
            blocks: *n,
        })
        .collect();
    groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.group.cmp(&b.group)));
    groups
}
