//! One simulated training process: devices with a HAL driver, a PTA caching pool, a model
//! (fsdp2-style all-gathers, activations, gradients, AdamW state), a pinned host staging
//! buffer, and msMemScope's collection machinery (deferred start, stop periods, shadow rows,
//! writer order, OOM analysis). Rows go to [`Out`]; facts go to the truth accumulator.

use std::collections::HashMap;
use std::path::Path;

use super::out::{hex, stamp, Out, OwnedRow, RowRef};
use super::rng::{mix, Rng};
use super::text::{self as tx, owner_group, stk};
use super::truth::{Acc, FileTruth, HalSegment, LeakBlock, OomRecord, OomTruth, UseRecord};
use super::Dev;
use super::GenConfig;
use memq_core::error::Result;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

const SMALL_SEG: u64 = 2 * MIB;
const LARGE_SEG: u64 = 20 * MIB;
const ACCESS_CAP: usize = 4;
/// Sizes of the injected wasted-memory blocks: early allocation, late deallocation, temporary
/// idleness (`GenConfig::wasted`).
pub const WASTE_SIZES: [u64; 3] = [24 * MIB, 12 * MIB, 6 * MIB];

/// The model's layer dims (from `model_seed`, default `seed`).
fn layer_dims(cfg: &GenConfig) -> Vec<LayerDim> {
    let mut dim_rng = Rng::new(cfg.model_seed.unwrap_or(cfg.seed) ^ 0x5eed_d1e5);
    (0..cfg.layers)
        .map(|_| {
            let b = 128 * dim_rng.range(1, 8) as u32;
            let h = 512 * dim_rng.range(1, 6) as u32;
            let world = cfg.devices.max(2) as u64;
            LayerDim {
                w: round_up((h as u64) * (h as u64) * 2 / world, 512),
                act: (b as u64) * (h as u64) * 2,
                b,
                h,
            }
        })
        .collect()
}

/// Bytes of the activations live at the end of a forward pass at 100 % (two per layer).
pub fn activation_bytes(cfg: &GenConfig) -> u64 {
    layer_dims(cfg).iter().map(|d| 2 * d.act).sum()
}

fn round_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Pool {
    Hal,
    Pta,
    Host,
}

impl Pool {
    pub fn label(self) -> &'static str {
        match self {
            Pool::Hal => "HAL",
            Pool::Pta => "PTA",
            Pool::Host => "HOST_PINNED",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BState {
    /// Allocated while collecting: full row.
    Normal,
    /// Allocated while stopped; not (yet) written.
    Shadow,
    /// Shadow block alive at a `start()`: MALLOC written with `shadow:true` at the start time.
    Promoted,
}

#[derive(Clone, Copy)]
enum AccKind {
    Aten([u32; 2]),
    Atb([u32; 2]),
    Bare,
}

struct Access {
    id: u64,
    ts: u64,
    tid: u32,
    etype: &'static str,
    name: &'static str,
    kind: AccKind,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reason {
    Real,
    StopPeriod,
    ExitFill,
    Residual,
}

#[derive(Clone, Copy)]
struct FreeRow {
    id: u64,
    ts: u64,
    tid: u32,
    shadow: bool,
    total: u64,
    used: u64,
    reason: Reason,
}

struct Block {
    pool: Pool,
    dev: Dev,
    ptr: u64,
    size: u64,
    alloc_id: u64,
    malloc_id: u64,
    written_ts: u64,
    tid: u32,
    state: BState,
    total: u64,
    used: u64,
    owner: Option<&'static str>,
    ineff: Option<&'static str>,
    page_type: &'static str,
    alloc_type: &'static str,
    py: u32,
    c: u32,
    accesses: Vec<Access>,
    leak: bool,
    pending: Option<FreeRow>,
    /// What the block is by construction (truth's categories).
    cat: &'static str,
    /// `process_used` and `device_used` at the MALLOC (`--tool-style`).
    drv: Option<(u64, u64)>,
}

impl Block {
    /// The owner as owner_peaks and run_diff name it: the owner, else `(stock)` for a promoted
    /// block, else the pool.
    fn owner_label(&self) -> &'static str {
        match self.owner {
            Some(o) => o,
            None if self.state != BState::Normal => "(stock)",
            None => self.pool.label(),
        }
    }
}

// ---- allocators ------------------------------------------------------------------------------

/// A virtual address range allocator (driver side): 2 MiB granules, most recently freed first.
struct Va {
    next: u64,
    align: u64,
    free: Vec<(u64, u64)>,
    sizes: HashMap<u64, u64>,
}

impl Va {
    fn new(base: u64, align: u64) -> Va {
        Va {
            next: base,
            align,
            free: Vec::new(),
            sizes: HashMap::new(),
        }
    }

    fn alloc(&mut self, size: u64) -> u64 {
        let r = round_up(size.max(1), self.align);
        let mut got = None;
        for i in (0..self.free.len()).rev() {
            let (p, len) = self.free[i];
            if len >= r {
                if len == r {
                    self.free.remove(i);
                } else {
                    self.free[i] = (p + r, len - r);
                }
                got = Some(p);
                break;
            }
        }
        let p = got.unwrap_or_else(|| {
            let p = self.next;
            self.next += r;
            p
        });
        self.sizes.insert(p, size);
        p
    }

    fn release(&mut self, p: u64) -> u64 {
        let size = self.sizes.remove(&p).unwrap_or(0);
        self.free.push((p, round_up(size.max(1), self.align)));
        size
    }
}

struct Seg {
    size: u64,
    class: u8,
    free: Vec<(u64, u64)>,
    largest: u64,
    live: u32,
}

impl Seg {
    fn new(size: u64, class: u8) -> Seg {
        Seg {
            size,
            class,
            free: vec![(0, size)],
            largest: size,
            live: 0,
        }
    }

    fn recompute(&mut self) {
        self.largest = self.free.iter().map(|f| f.1).max().unwrap_or(0);
    }

    fn alloc(&mut self, n: u64) -> Option<u64> {
        if self.largest < n {
            return None;
        }
        let i = self.free.iter().position(|f| f.1 >= n)?;
        let (off, len) = self.free[i];
        if len == n {
            self.free.remove(i);
        } else {
            self.free[i] = (off + n, len - n);
        }
        self.live += 1;
        self.recompute();
        Some(off)
    }

    fn release(&mut self, off: u64, n: u64) {
        let i = self.free.partition_point(|f| f.0 < off);
        self.free.insert(i, (off, n));
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
        self.live -= 1;
        self.recompute();
    }
}

/// The PTA caching allocator: blocks carved from HAL segments, kept reserved until empty_cache.
#[derive(Default)]
struct PtaPool {
    segs: std::collections::BTreeMap<u64, Seg>,
    blocks: HashMap<u64, u64>,
    used: u64,
    total: u64,
    max_used: u64,
    max_total: u64,
}

/// The segment class of plain allocations (see `Proc::plain`).
const PLAIN_CLASS: u8 = 3;

fn class_of(size: u64) -> u8 {
    if size <= MIB {
        0
    } else if size <= 10 * MIB {
        1
    } else {
        2
    }
}

fn seg_size(size: u64) -> u64 {
    match class_of(size) {
        0 => SMALL_SEG,
        1 => LARGE_SEG,
        _ => round_up(size, SMALL_SEG),
    }
}

impl PtaPool {
    fn try_alloc(&mut self, size: u64, class: u8) -> Option<u64> {
        for (base, seg) in self.segs.iter_mut() {
            if seg.class != class {
                continue;
            }
            if let Some(off) = seg.alloc(size) {
                let p = base + off;
                self.blocks.insert(p, size);
                return Some(p);
            }
        }
        None
    }

    fn release(&mut self, p: u64) -> u64 {
        let size = self.blocks.remove(&p).unwrap_or(0);
        if let Some((base, seg)) = self.segs.range_mut(..=p).next_back() {
            seg.release(p - base, size);
        }
        size
    }
}

/// Ops of one step on the first device with the size of the first PTA row after each op.
type CmpSeq = Vec<(&'static str, Option<u64>)>;

#[derive(Clone, Copy)]
struct LayerDim {
    w: u64,
    act: u64,
    b: u32,
    h: u32,
}

#[derive(Default)]
struct Model {
    w: Vec<u64>,
    grad: Vec<Option<u64>>,
    opt: Vec<(u64, u64)>,
    act: Vec<(u64, u64)>,
    input: Option<u64>,
    loss: Option<u64>,
}

struct DevSt {
    dev: Dev,
    pta: PtaPool,
    va: Va,
    hal_phys: u64,
    tid_main: u32,
    tid_bwd: u32,
    tid_hccl: u32,
    task: u64,
    range_id: u64,
    model: Model,
    marks: [u64; 6],
}

struct HostSt {
    va: Va,
    rss: u64,
    staging: Option<u64>,
    batch: Option<u64>,
}

/// What `generate` gets back from one process.
pub struct ProcResult {
    pub files: Vec<FileTruth>,
    pub rows: u64,
    pub acc: Acc,
    pub dir: String,
    pub devices: Vec<String>,
    pub exit_ts: u64,
    pub exit_stopped: bool,
}

pub struct Proc<'a> {
    cfg: &'a GenConfig,
    rng: Rng,
    pid: u32,
    clock: u64,
    next_id: u64,
    next_alloc: u64,
    collecting: bool,
    last_stop: Option<u64>,
    config_written: bool,
    devs: Vec<DevSt>,
    dims: Vec<LayerDim>,
    world: u64,
    live: HashMap<(Pool, u64), Block>,
    pending: Vec<Block>,
    host: HostSt,
    out: Out,
    acc: Acc,
    stacks: Vec<String>,
    leak_plan: Vec<u64>,
    leak_steps: Vec<u32>,
    residual_step: Option<u32>,
    hbm_total: u64,
    other_used: u64,
    dead: bool,
    cmp: Vec<(u32, CmpSeq)>,
    cmp_rec: bool,
    cmp_wait: usize,
    range_seq: u64,
    /// This step's activation sizes in percent of the layer dims (`activation_percent` and
    /// `warmup_percent`; 100 when neither is set).
    act_pct: u64,
    /// Fixed time steps and no ID gaps, drawing nothing from the PRNG (run B's extra owner,
    /// so that everything else stays as in run A).
    plain: bool,
    /// The step that gets the injected wasted-memory blocks (`GenConfig::wasted`).
    wasted_step: Option<u32>,
}

impl<'a> Proc<'a> {
    pub fn new(
        cfg: &'a GenConfig,
        index: u32,
        pid: u32,
        npus: &[u32],
        root: &Path,
    ) -> Result<Proc<'a>> {
        let start = cfg.start_time_ns + index as u64 * 1_337_000_000;
        let out = Out::new(root, pid, start, cfg.format)?;
        let mut rng = Rng::new(cfg.seed ^ mix(index as u64 + 1));
        let dims = layer_dims(cfg);
        let devs = npus
            .iter()
            .enumerate()
            .map(|(i, &n)| DevSt {
                dev: Dev::Npu(n),
                pta: PtaPool::default(),
                va: Va::new(
                    0x0000_12c0_4000_0000 + (n as u64) * 0x0000_0100_0000_0000,
                    SMALL_SEG,
                ),
                hal_phys: 0,
                tid_main: pid + 7 * i as u32,
                tid_bwd: pid + 1895 + i as u32,
                tid_hccl: pid + 311 + i as u32,
                task: rng.range(1, 40),
                range_id: 0,
                model: Model::default(),
                marks: [0; 6],
            })
            .collect();
        // Leak plan: one block per collected step (or every leak_every-th), sizes summing to
        // leak_bytes (512-aligned).
        let collected: Vec<u32> = (1..=cfg.steps).filter(|s| !cfg.step_stopped(*s)).collect();
        let every = cfg.leak_every.unwrap_or(1).max(1) as usize;
        let leaking: Vec<u32> = collected.iter().copied().step_by(every).collect();
        let mut leak_plan = Vec::new();
        let mut leak_steps = Vec::new();
        if cfg.leak_bytes > 0 && !leaking.is_empty() {
            let collected = &leaking;
            let n = collected.len() as u64;
            let total = round_up(cfg.leak_bytes, 512);
            for i in 0..n {
                let a = round_up(total * i / n, 512);
                let b = if i + 1 == n {
                    total
                } else {
                    round_up(total * (i + 1) / n, 512)
                };
                if b > a {
                    leak_plan.push(b - a);
                    leak_steps.push(collected[i as usize]);
                }
            }
        }
        let residual_step = if cfg.residual_reuse {
            collected
                .iter()
                .copied()
                .find(|&s| s >= 2 && s < cfg.steps)
                .or(collected.first().copied())
        } else {
            None
        };
        let wasted_step = if cfg.wasted {
            collected
                .iter()
                .copied()
                .find(|&s| s >= 2)
                .or(collected.first().copied())
        } else {
            None
        };
        let hbm_total = 65_464_696_832;
        let other_used = 3 * GIB + rng.range(0, 255) * MIB;
        Ok(Proc {
            cfg,
            pid,
            clock: start,
            next_id: 1,
            next_alloc: 1,
            collecting: false,
            last_stop: None,
            config_written: false,
            devs,
            dims,
            world: cfg.devices.max(2) as u64,
            live: HashMap::new(),
            pending: Vec::new(),
            host: HostSt {
                va: Va::new(
                    0x0000_fffd_c000_0000 + index as u64 * 0x10_0000_0000,
                    4 * KIB,
                ),
                rss: 2 * GIB + rng.range(0, 511) * MIB,
                staging: None,
                batch: None,
            },
            out,
            acc: {
                let mut a = Acc::new(pid);
                a.track_uses = cfg.wasted;
                a
            },
            stacks: tx::stack_table_of(cfg.tool_style),
            leak_plan,
            leak_steps,
            residual_step,
            hbm_total,
            other_used,
            dead: false,
            cmp: Vec::new(),
            cmp_rec: false,
            cmp_wait: 0,
            range_seq: 1,
            act_pct: 100,
            plain: false,
            wasted_step,
            rng,
        })
    }

    // ---- clock and ids ---------------------------------------------------------------------

    /// The bytes of one activation of layer `l` in this step.
    fn act_bytes(&self, l: usize) -> u64 {
        let a = self.dims[l].act;
        if self.act_pct == 100 {
            a
        } else {
            round_up(a * self.act_pct / 100, 512)
        }
    }

    fn tick(&mut self, lo: u64, hi: u64) -> u64 {
        if self.plain {
            self.clock += lo.max(1);
            return self.clock;
        }
        self.clock += self.rng.range(lo.max(1), hi.max(1));
        self.clock
    }

    /// Next event ID; the counter is shared with unwritten internal events, hence gaps.
    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if !self.plain && self.rng.chance(1, 12) {
            self.next_id += 1;
        }
        id
    }

    /// A non-memory row written immediately (only while collecting; otherwise the event is not
    /// reported at all and only time passes). Returns the event time.
    #[allow(clippy::too_many_arguments)]
    fn row_now(
        &mut self,
        dev: Dev,
        event: &'static str,
        etype: &'static str,
        name: &str,
        tid: u32,
        attr: &str,
        py: u32,
        c: u32,
        gap: (u64, u64),
    ) -> Result<u64> {
        let ts = self.tick(gap.0, gap.1);
        if !self.collecting {
            return Ok(ts);
        }
        let id = self.new_id();
        let row = RowRef {
            id,
            event,
            etype,
            name,
            ts,
            pid: self.pid,
            tid,
            dev,
            ptr: None,
            attr,
            py: &self.stacks[py as usize],
            c: &self.stacks[c as usize],
        };
        self.out.write(&row, ts)?;
        Ok(ts)
    }

    fn deviceless(
        &mut self,
        event: &'static str,
        etype: &'static str,
        name: &str,
        ts: u64,
        tid: u32,
        attr: String,
    ) {
        let id = self.new_id();
        self.out.deviceless(OwnedRow {
            id,
            event,
            etype,
            name: name.to_string(),
            ts,
            tid,
            attr,
        });
    }

    // ---- the tool's block table ------------------------------------------------------------

    fn counter(&mut self, b: &Block, ts: u64, used: u64, total: u64) {
        match b.pool {
            Pool::Pta => self.acc.counter(b.dev, "PTA", ts, used, Some(total)),
            Pool::Host => self.acc.counter(Dev::Cpu, "HOST_PINNED", ts, used, None),
            Pool::Hal => {}
        }
    }

    fn group_add(&mut self, b: &Block) {
        if b.pool != Pool::Host {
            self.acc.group_add(
                b.dev,
                b.pool.label(),
                owner_group(b.owner),
                (b.owner_label(), b.cat),
                b.size,
            );
        }
    }

    fn group_remove(&mut self, b: &Block) {
        if b.pool != Pool::Host {
            self.acc.group_remove(
                b.dev,
                b.pool.label(),
                owner_group(b.owner),
                (b.owner_label(), b.cat),
                b.size,
            );
        }
    }

    /// A written row that allocates (+) or ends (-) block `b` in the tool's view.
    fn owner_delta(&mut self, b: &Block, sign: i64) {
        self.acc
            .owner_delta(b.dev, b.pool.label(), b.owner_label(), sign * b.size as i64);
    }

    fn tool_malloc(&mut self, mut b: Block, ts: u64) -> Result<()> {
        if let Some(old) = self.live.remove(&(b.pool, b.ptr)) {
            // Rule 5: MALLOC on a live address → synthetic shadow FREE for the old block.
            if old.state != BState::Shadow {
                self.group_remove(&old);
                self.owner_delta(&old, -1);
                let id = self.new_id();
                let f = FreeRow {
                    id,
                    ts,
                    tid: b.tid,
                    shadow: true,
                    total: 0,
                    used: 0,
                    reason: Reason::Residual,
                };
                self.flush(old, f)?;
            }
        }
        if self.collecting {
            b.state = BState::Normal;
            b.written_ts = ts;
            self.group_add(&b);
            self.owner_delta(&b, 1);
            self.counter(&b, ts, b.used, b.total);
            if self.cmp_wait > 0 && b.pool == Pool::Pta && b.dev == self.devs[0].dev {
                self.fill_cmp(b.size);
            }
        } else {
            b.state = BState::Shadow;
            b.cat = tx::CAT_STOCK;
            b.owner = None;
            b.ineff = None;
            b.py = stk::NONE;
            b.c = stk::NONE;
        }
        self.live.insert((b.pool, b.ptr), b);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn tool_free(
        &mut self,
        pool: Pool,
        ptr: u64,
        ts: u64,
        id: u64,
        tid: u32,
        total: u64,
        used: u64,
    ) -> Result<()> {
        let Some(mut b) = self.live.remove(&(pool, ptr)) else {
            return Ok(());
        };
        if self.collecting {
            self.group_remove(&b);
            self.owner_delta(&b, -1);
            self.counter(&b, ts, used, total);
            if self.cmp_wait > 0 && b.pool == Pool::Pta && b.dev == self.devs[0].dev {
                self.fill_cmp(b.size);
            }
            let f = FreeRow {
                id,
                ts,
                tid,
                shadow: false,
                total,
                used,
                reason: Reason::Real,
            };
            self.flush(b, f)
        } else if b.state == BState::Shadow {
            Ok(()) // rule 1: lived entirely outside collection
        } else {
            // Rule 3: genuine free while stopped → shadow FREE at stop+1, written at next start.
            // (Its FREE row's bytes leave the owner's series at the start; no row of the
            // series lies in between.)
            self.group_remove(&b);
            self.owner_delta(&b, -1);
            b.pending = Some(FreeRow {
                id,
                ts: self.last_stop.map_or(ts, |s| s + 1),
                tid,
                shadow: true,
                total: 0,
                used: 0,
                reason: Reason::StopPeriod,
            });
            self.pending.push(b);
            Ok(())
        }
    }

    /// Writes a finished block: MALLOC, its ACCESS rows, then the FREE (§2.8).
    fn flush(&mut self, b: Block, f: FreeRow) -> Result<()> {
        let now = self.clock;
        let mut a = String::with_capacity(160);
        let promoted = b.state != BState::Normal;
        // MALLOC
        attr_head(&mut a, &b);
        match b.pool {
            Pool::Pta if !promoted => {
                a.push_str(&format!(",total:{},used:{}", b.total, b.used));
            }
            Pool::Host if !promoted => {
                a.push_str(&format!(",pinned:true,used:{}", b.used));
            }
            _ => {}
        }
        if promoted {
            a.push_str(",shadow:true");
        }
        if let Some(o) = b.owner {
            a.push_str(",owner:");
            a.push_str(o);
        }
        if let Some(i) = b.ineff {
            a.push_str(",inefficient_type:");
            a.push_str(i);
        }
        let (page, alloc) = if promoted {
            ("normal", "create")
        } else {
            (b.page_type, b.alloc_type)
        };
        if b.pool == Pool::Hal {
            a.push_str(",page_type:");
            a.push_str(page);
            a.push_str(",alloc_type:");
            a.push_str(alloc);
        }
        if let Some((process, device)) = b.drv {
            a.push_str(&format!(",process_used:{process},device_used:{device}"));
        }
        let row = RowRef {
            id: b.malloc_id,
            event: "MALLOC",
            etype: b.pool.label(),
            name: "N/A",
            ts: b.written_ts,
            pid: self.pid,
            tid: b.tid,
            dev: b.dev,
            ptr: Some(b.ptr),
            attr: &a,
            py: &self.stacks[b.py as usize],
            c: &self.stacks[b.c as usize],
        };
        self.out.write(&row, now)?;
        if promoted {
            self.acc.shadow.promoted_mallocs += 1;
        }
        self.acc
            .owner_block(b.owner_label(), b.size, f.reason == Reason::ExitFill);
        if self.acc.track_uses && !b.accesses.is_empty() {
            self.acc.uses.push(UseRecord {
                dev: b.dev,
                pool: b.pool.label(),
                ptr: b.ptr,
                size: b.size,
                owner: b.owner.unwrap_or(""),
                alloc_id: b.alloc_id,
                alloc_ts: b.written_ts,
                uses: b.accesses.iter().map(|a| a.ts).collect(),
                end_ts: (f.reason != Reason::ExitFill).then_some(f.ts),
            });
        }
        if b.pool == Pool::Hal {
            self.acc.hal_delta(b.dev, b.written_ts, b.size as i64);
            if f.reason != Reason::ExitFill {
                self.acc.hal_delta(b.dev, f.ts, -(b.size as i64));
            }
            self.acc.hal_segments.push(HalSegment {
                pid: self.pid,
                device: b.dev.label(),
                ts: b.written_ts,
                ptr: b.ptr,
                size: b.size,
                owner: b.owner.unwrap_or("").to_string(),
                alloc_type: alloc.to_string(),
                page_type: page.to_string(),
                shadow: promoted,
                allocation_id: b.alloc_id,
            });
        }
        // ACCESS
        for acc in &b.accesses {
            a.clear();
            attr_head(&mut a, &b);
            a.push_str(",type:");
            a.push_str(b.pool.label());
            match acc.kind {
                AccKind::Aten([x, y]) => a.push_str(&format!(
                    ",dtype:torch.float16,shape:torch.Size([{x}, {y}])"
                )),
                AccKind::Atb([x, y]) => a.push_str(&format!(
                    ",dtype:ACL_FLOAT16,format:ACL_FORMAT_ND,shape:[{x},{y},]"
                )),
                AccKind::Bare => {}
            }
            let row = RowRef {
                id: acc.id,
                event: "ACCESS",
                etype: acc.etype,
                name: acc.name,
                ts: acc.ts,
                pid: self.pid,
                tid: acc.tid,
                dev: b.dev,
                ptr: Some(b.ptr),
                attr: &a,
                py: "",
                c: "",
            };
            self.out.write(&row, now)?;
        }
        // FREE
        a.clear();
        attr_head(&mut a, &b);
        if f.shadow {
            a.push_str(",shadow:true");
        } else {
            match b.pool {
                Pool::Pta => a.push_str(&format!(",total:{},used:{}", f.total, f.used)),
                Pool::Host => a.push_str(&format!(",pinned:true,used:{}", f.used)),
                Pool::Hal => {}
            }
        }
        let index = match self.cfg.tool_style {
            true => self.devs.iter().position(|x| x.dev == b.dev),
            false => None,
        };
        if let Some((process, device)) = index.and_then(|d| self.driver_used(d)) {
            a.push_str(&format!(",process_used:{process},device_used:{device}"));
        }
        let row = RowRef {
            id: f.id,
            event: "FREE",
            etype: b.pool.label(),
            name: "N/A",
            ts: f.ts,
            pid: self.pid,
            tid: f.tid,
            dev: b.dev,
            ptr: Some(b.ptr),
            attr: &a,
            py: "",
            c: "",
        };
        self.out.write(&row, now)?;
        match f.reason {
            Reason::Real => {}
            Reason::StopPeriod => self.acc.shadow.stop_period_frees += 1,
            Reason::Residual => self.acc.shadow.residual_fill_ins += 1,
            Reason::ExitFill => {
                self.acc.shadow.exit_fill_ins += 1;
                self.acc.live_at_exit(
                    b.dev,
                    b.pool.label(),
                    owner_group(b.owner),
                    promoted,
                    b.size,
                );
                if b.leak {
                    self.acc.leaks.push(LeakBlock {
                        pid: self.pid,
                        device: b.dev.label(),
                        pool: b.pool.label().to_string(),
                        ptr: b.ptr,
                        size: b.size,
                        owner: b.owner.unwrap_or("").to_string(),
                        allocation_id: b.alloc_id,
                        alloc_ts: b.written_ts,
                        free_ts: f.ts,
                    });
                }
            }
        }
        Ok(())
    }

    fn access(
        &mut self,
        pool: Pool,
        ptr: u64,
        etype: &'static str,
        name: &'static str,
        kind: AccKind,
        tid: u32,
    ) {
        if !self.cfg.access_rows || !self.collecting {
            return;
        }
        let ts = self.tick(300, 2_000);
        let id = self.new_id();
        if let Some(b) = self.live.get_mut(&(pool, ptr)) {
            if b.accesses.len() < ACCESS_CAP && b.state != BState::Shadow {
                b.accesses.push(Access {
                    id,
                    ts,
                    tid,
                    etype,
                    name,
                    kind,
                });
            }
        }
    }

    // ---- memory operations -----------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn hal_malloc(
        &mut self,
        d: usize,
        size: u64,
        owner: &'static str,
        page: &'static str,
        alloc: &'static str,
        tid: u32,
        py: u32,
        c: u32,
    ) -> Result<u64> {
        let ptr = self.devs[d].va.alloc(size);
        self.devs[d].hal_phys += size;
        let ts = self.tick(2_000, 30_000);
        let id = self.new_id();
        let alloc_id = self.next_alloc;
        self.next_alloc += 1;
        let b = Block {
            pool: Pool::Hal,
            dev: self.devs[d].dev,
            ptr,
            size,
            alloc_id,
            malloc_id: id,
            written_ts: ts,
            tid,
            state: BState::Normal,
            total: 0,
            used: 0,
            owner: Some(owner),
            ineff: None,
            page_type: page,
            alloc_type: alloc,
            py: if self.cfg.stacks { py } else { stk::NONE },
            c: if self.cfg.stacks { c } else { stk::NONE },
            drv: self.driver_used(d),
            accesses: Vec::new(),
            leak: false,
            pending: None,
            cat: tx::category_of(owner),
        };
        self.tool_malloc(b, ts)?;
        Ok(ptr)
    }

    /// `hooked = false`: the driver frees the range through a path the tool does not see, so
    /// the tool's block stays live (→ residual-block fill-in at the next MALLOC there).
    fn hal_free(&mut self, d: usize, ptr: u64, tid: u32, hooked: bool) -> Result<()> {
        let size = self.devs[d].va.release(ptr);
        self.devs[d].hal_phys -= size;
        let ts = self.tick(2_000, 20_000);
        if hooked {
            let id = self.new_id();
            self.tool_free(Pool::Hal, ptr, ts, id, tid, 0, 0)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn pta_malloc(
        &mut self,
        d: usize,
        size: u64,
        owner: &'static str,
        tid: u32,
        stacks: bool,
        py: u32,
        ineff: Option<&'static str>,
        leak: bool,
    ) -> Result<u64> {
        let cat = tx::category_of(owner);
        self.pta_alloc(d, size, owner, cat, tid, stacks, py, ineff, leak)
    }

    /// [`Self::pta_malloc`] of a block whose category is not its owner's usual one.
    #[allow(clippy::too_many_arguments)]
    fn pta_alloc(
        &mut self,
        d: usize,
        size: u64,
        owner: &'static str,
        cat: &'static str,
        tid: u32,
        stacks: bool,
        py: u32,
        ineff: Option<&'static str>,
        leak: bool,
    ) -> Result<u64> {
        let size = round_up(size.max(1), 512);
        // Plain allocations (run B's extra owner) keep to segments of their own, so that the
        // pool serves every other block as it would without them.
        let class = if self.plain {
            PLAIN_CLASS
        } else {
            class_of(size)
        };
        let ptr = match self.devs[d].pta.try_alloc(size, class) {
            Some(p) => p,
            None => {
                let seg = if self.plain {
                    round_up(size, SMALL_SEG)
                } else {
                    seg_size(size)
                };
                let (spy, sc) = if stacks {
                    (py, stk::C_HAL_APP)
                } else {
                    (stk::NONE, stk::NONE)
                };
                let base = self.hal_malloc(d, seg, tx::OWN_APP, "huge", "alloc", tid, spy, sc)?;
                let pool = &mut self.devs[d].pta;
                pool.segs.insert(base, Seg::new(seg, class));
                pool.total += seg;
                pool.max_total = pool.max_total.max(pool.total);
                pool.try_alloc(size, class).expect("fresh segment fits")
            }
        };
        let pool = &mut self.devs[d].pta;
        pool.used += size;
        pool.max_used = pool.max_used.max(pool.used);
        let (total, used) = (pool.total, pool.used);
        let ts = self.tick(1_000, 9_000);
        let id = self.new_id();
        let alloc_id = self.next_alloc;
        self.next_alloc += 1;
        let with_stacks = stacks && self.cfg.stacks;
        let b = Block {
            pool: Pool::Pta,
            dev: self.devs[d].dev,
            ptr,
            size,
            alloc_id,
            malloc_id: id,
            written_ts: ts,
            tid,
            state: BState::Normal,
            total,
            used,
            owner: Some(owner),
            ineff,
            page_type: "",
            alloc_type: "",
            py: if with_stacks { py } else { stk::NONE },
            c: if with_stacks { stk::C_PTA } else { stk::NONE },
            drv: self.driver_used(d),
            accesses: Vec::new(),
            leak,
            pending: None,
            cat,
        };
        self.tool_malloc(b, ts)?;
        // The owner label is reported as a separate internal event (consumes an ID).
        if self.collecting {
            self.next_id += 1;
        }
        Ok(ptr)
    }

    fn pta_free(&mut self, d: usize, ptr: u64, tid: u32) -> Result<()> {
        let pool = &mut self.devs[d].pta;
        let size = pool.release(ptr);
        pool.used -= size;
        let (total, used) = (pool.total, pool.used);
        let ts = self.tick(1_000, 9_000);
        let id = self.new_id();
        self.tool_free(Pool::Pta, ptr, ts, id, tid, total, used)
    }

    /// torch.npu.empty_cache(): every fully free segment goes back to the driver.
    fn empty_cache(&mut self, d: usize) -> Result<()> {
        let free: Vec<(u64, u64, bool)> = self.devs[d]
            .pta
            .segs
            .iter()
            .filter(|(_, s)| s.live == 0)
            .map(|(b, s)| (*b, s.size, s.class == PLAIN_CLASS))
            .collect();
        let tid = self.devs[d].tid_main;
        for (base, size, plain) in free {
            self.devs[d].pta.segs.remove(&base);
            self.devs[d].pta.total -= size;
            let was = self.plain;
            self.plain = was || plain;
            self.hal_free(d, base, tid, true)?;
            self.plain = was;
        }
        Ok(())
    }

    fn host_malloc(&mut self, size: u64) -> Result<u64> {
        let ptr = self.host.va.alloc(size);
        self.host.rss = (self.host.rss + size + self.rng.range(0, 8) * MIB)
            .saturating_sub(self.rng.range(0, 6) * MIB);
        let ts = self.tick(5_000, 40_000);
        let id = self.new_id();
        let alloc_id = self.next_alloc;
        self.next_alloc += 1;
        let b = Block {
            pool: Pool::Host,
            dev: Dev::Cpu,
            ptr,
            size,
            alloc_id,
            malloc_id: id,
            written_ts: ts,
            tid: self.pid,
            state: BState::Normal,
            total: 0,
            used: self.host.rss,
            owner: None,
            ineff: None,
            page_type: "",
            alloc_type: "",
            py: stk::NONE,
            c: stk::NONE,
            drv: None,
            accesses: Vec::new(),
            leak: false,
            pending: None,
            cat: tx::CAT_OTHER,
        };
        self.tool_malloc(b, ts)?;
        Ok(ptr)
    }

    fn host_free(&mut self, ptr: u64) -> Result<()> {
        let size = self.host.va.release(ptr);
        self.host.rss = (self.host.rss + self.rng.range(0, 6) * MIB)
            .saturating_sub(size + self.rng.range(0, 4) * MIB);
        let ts = self.tick(5_000, 40_000);
        let id = self.new_id();
        let rss = self.host.rss;
        let pid = self.pid;
        self.tool_free(Pool::Host, ptr, ts, id, pid, 0, rss)
    }

    // ---- collection control ----------------------------------------------------------------

    /// The driver counters of NPU `d` now, as the tool's newer builds write them on every
    /// MALLOC and FREE (`--tool-style`): `process_used` is the process's physical HAL memory
    /// plus the communication library's share, `device_used` adds the other processes'.
    fn driver_used(&self, d: usize) -> Option<(u64, u64)> {
        const HCCP_BYTES: u64 = 416 * MIB;
        self.cfg.tool_style.then(|| {
            let process = self.devs[d].hal_phys + HCCP_BYTES;
            (process, process + self.other_used)
        })
    }

    fn device_free(&self, d: usize) -> u64 {
        self.hbm_total - self.other_used - self.devs[d].hal_phys
    }

    fn start(&mut self) -> Result<()> {
        let ts = self.tick(50_000, 400_000);
        self.collecting = true;
        self.acc.start_ts.push(ts);
        let attr = format!("free:{},total:{}", self.device_free(0), self.hbm_total);
        let pid = self.pid;
        self.deviceless("SYSTEM", "START_TRACE", "N/A", ts, pid, attr);
        if !self.config_written {
            self.config_written = true;
            let cfg = self.config_json();
            self.out.write_file("config.json", "config", &cfg, 0)?;
        }
        // Rule 3: frees seen during the stop period, written now with the start time.
        for mut b in std::mem::take(&mut self.pending) {
            let mut f = b.pending.take().expect("pending free");
            f.ts = ts;
            self.flush(b, f)?;
        }
        // Rule 2: shadow blocks still alive are promoted (MALLOC at the start time).
        let mut promote: Vec<(Pool, u64)> = self
            .live
            .iter()
            .filter(|(_, b)| b.state == BState::Shadow)
            .map(|(k, _)| *k)
            .collect();
        promote.sort_by_key(|k| (k.0 as u8, k.1));
        for k in promote {
            let (dev, pool, size) = {
                let b = self.live.get_mut(&k).expect("live");
                b.state = BState::Promoted;
                b.written_ts = ts;
                b.cat = tx::CAT_STOCK;
                (b.dev, b.pool, b.size)
            };
            if pool != Pool::Host {
                self.acc.group_add(
                    dev,
                    pool.label(),
                    tx::UNLABELLED,
                    ("(stock)", tx::CAT_STOCK),
                    size,
                );
            }
            self.acc
                .owner_delta(dev, pool.label(), "(stock)", size as i64);
        }
        self.last_stop = None;
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        let ts = self.tick(50_000, 400_000);
        let pid = self.pid;
        self.deviceless("SYSTEM", "STOP_TRACE", "N/A", ts, pid, String::new());
        self.collecting = false;
        self.last_stop = Some(ts);
        self.acc.stop_ts.push(ts);
        Ok(())
    }

    fn config_json(&self) -> String {
        let mut npu_slots = 0u64;
        for d in &self.devs {
            if let Dev::Npu(n) = d.dev {
                npu_slots |= 1 << n;
            }
        }
        let c = self.cfg;
        // Keys in nlohmann's (sorted) order, 4-space indent, no trailing newline.
        format!(
            "{{\n    \"SelectedStepList\": {{\n        \"stepCount\": 0,\n        \"stepIdList\": [\n            0,\n            0,\n            0,\n            0,\n            0\n        ]\n    }},\n    \"analysisType\": {},\n    \"cStackDepth\": 50,\n    \"collectAllNpu\": true,\n    \"collectCpu\": {},\n    \"collectMode\": 1,\n    \"dataFormat\": {},\n    \"dumpEventType\": {},\n    \"enableCStack\": {},\n    \"enableCompare\": {},\n    \"enablePyStack\": {},\n    \"eventType\": {},\n    \"isEffective\": true,\n    \"levelType\": 3,\n    \"logLevel\": 1,\n    \"npuSlots\": {},\n    \"outputDir\": \"/home/user/llm/memscopeDumpResults\",\n    \"pyStackDepth\": 50,\n    \"watchConfig\": {{\n        \"end\": \"\",\n        \"fullContent\": false,\n        \"isWatched\": false,\n        \"outputId\": 0,\n        \"start\": \"\"\n    }}\n}}",
            1 | 2 | 4 | if c.oom { 8 } else { 0 },
            c.host_pinned,
            match c.format {
                super::Format::Csv => 0,
                super::Format::Db => 1,
            },
            if c.access_rows { 15 } else { 7 },
            c.stacks,
            c.compare,
            c.stacks,
            if c.access_rows { 15 } else { 7 },
            npu_slots
        )
    }

    // ---- op-level rows ---------------------------------------------------------------------

    fn aten(&mut self, d: usize, name: &'static str, tid: u32, end: bool) -> Result<u64> {
        let dev = self.devs[d].dev;
        let et = if end { "ATEN_END" } else { "ATEN_START" };
        let ts = self.row_now(dev, "OP_LAUNCH", et, name, tid, "", 0, 0, (2_000, 40_000))?;
        if end && self.collecting && d == 0 && self.cmp_rec {
            if let Some(last) = self.cmp.last_mut() {
                last.1.push((name, None));
                self.cmp_wait += 1;
            }
        }
        Ok(ts)
    }

    fn fill_cmp(&mut self, size: u64) {
        if let Some(last) = self.cmp.last_mut() {
            for e in last.1.iter_mut().rev().take(self.cmp_wait) {
                e.1 = Some(size);
            }
        }
        self.cmp_wait = 0;
    }

    fn kernel(&mut self, d: usize, name: &'static str, tid: u32, comm: bool) -> Result<()> {
        let dev = self.devs[d].dev;
        self.devs[d].task = (self.devs[d].task + 1) % 65_535;
        let stream = if comm { 5 + d as u32 } else { 2 };
        let attr = format!("streamId:{stream},taskId:{}", self.devs[d].task);
        self.row_now(
            dev,
            "KERNEL_LAUNCH",
            "KERNEL_LAUNCH",
            name,
            tid,
            &attr,
            0,
            0,
            (3_000, 25_000),
        )?;
        if self.cfg.kernel_execute && name == tx::K_MATMUL {
            self.row_now(
                dev,
                "KERNEL_LAUNCH",
                "KERNEL_EXECUTE_START",
                name,
                tid,
                &attr,
                0,
                0,
                (5_000, 60_000),
            )?;
            self.row_now(
                dev,
                "KERNEL_LAUNCH",
                "KERNEL_EXECUTE_END",
                name,
                tid,
                &attr,
                0,
                0,
                (20_000, 300_000),
            )?;
        }
        Ok(())
    }

    fn atb_op(&mut self, d: usize, l: usize, input: u64, tid: u32) -> Result<()> {
        let dim = self.dims[l];
        let ws_size = 64 * KIB + 512 * (l as u64 % 7);
        // the op's workspace (ATB_START names it), though the tool labels it like any op
        let ws = self.pta_alloc(
            d,
            ws_size,
            tx::OWN_OPS,
            tx::CAT_WORKSPACE,
            tid,
            false,
            0,
            None,
            false,
        )?;
        let dev = self.devs[d].dev;
        let path = format!("{}_{}/0/{l}_{}", self.range_seq, self.pid, tx::ATB_OP);
        let attr = format!(
            "path:{path},workspace_ptr:0x{ws:x},workspace_size:{}",
            round_up(ws_size, 512)
        );
        self.row_now(
            dev,
            "OP_LAUNCH",
            "ATB_START",
            tx::ATB_OP,
            tid,
            &attr,
            0,
            0,
            (3_000, 20_000),
        )?;
        let kpath = format!("path:{path}/0_{}/before", tx::ATB_KERNEL);
        self.row_now(
            dev,
            "KERNEL_LAUNCH",
            "KERNEL_START",
            tx::ATB_KERNEL,
            tid,
            &kpath,
            0,
            0,
            (2_000, 10_000),
        )?;
        self.access(
            Pool::Pta,
            input,
            "READ",
            tx::ATB_OP,
            AccKind::Atb([dim.b, dim.h]),
            tid,
        );
        let kpath = format!("path:{path}/0_{}/after", tx::ATB_KERNEL);
        self.row_now(
            dev,
            "KERNEL_LAUNCH",
            "KERNEL_END",
            tx::ATB_KERNEL,
            tid,
            &kpath,
            0,
            0,
            (10_000, 80_000),
        )?;
        self.row_now(
            dev,
            "OP_LAUNCH",
            "ATB_END",
            tx::ATB_OP,
            tid,
            &attr,
            0,
            0,
            (2_000, 10_000),
        )?;
        self.pta_free(d, ws, tid)
    }

    fn snapshot(&mut self, d: usize, step: u32, oom: bool) -> Result<u64> {
        let dev = self.devs[d].dev;
        let p = &self.devs[d].pta;
        let (reserved, allocated, max_r, max_a) = (p.total, p.used, p.max_total, p.max_used);
        let total = self.hbm_total;
        let free = self.device_free(d);
        let dev_rate = (total - free) as f64 / total as f64 * 100.0;
        let res_rate = if reserved > 0 {
            allocated as f64 / reserved as f64 * 100.0
        } else {
            0.0
        };
        let attr = if self.cfg.doc_snapshot_spelling && !oom && step % 2 == 1 {
            format!(
                "total_mem:{total},free_mem:{free},reserved:{reserved},peak_reserved:{max_r},allocated:{allocated},\
                 peak_allocated:{max_a},device_utilization:{dev_rate:.6},pt_utilization:{res_rate:.6}"
            )
        } else {
            format!(
                "reserved:{reserved},max_reserved:{max_r},allocated:{allocated},max_allocated:{max_a},total:{total},\
                 free:{free},device_rate:{dev_rate:.6},reserved_rate:{res_rate:.6}"
            )
        };
        let name = if oom {
            "OOM_Snapshot"
        } else {
            "Memory Snapshot"
        };
        let tid = self.devs[d].tid_main;
        self.row_now(
            dev,
            "SNAPSHOT",
            "SNAPSHOT",
            name,
            tid,
            &attr,
            0,
            0,
            (20_000, 200_000),
        )
    }

    // ---- the training job ------------------------------------------------------------------

    pub fn run(mut self) -> Result<ProcResult> {
        let nd = self.devs.len();
        // Deferred mode: the runtime initialises before msmemscope.start() → shadow blocks.
        if self.cfg.pre_start_blocks {
            for d in 0..nd {
                let t = self.devs[d].tid_main;
                self.hal_malloc(d, 2 * MIB, tx::OWN_RUNTIME, "normal", "alloc", t, 0, 0)?;
                self.hal_malloc(d, 64 * KIB, tx::OWN_RUNTIME, "normal", "alloc", t, 0, 0)?;
                self.pta_malloc(d, 512, tx::OWN_OPS, t, false, 0, None, false)?;
            }
        }
        self.start()?;
        if self.cfg.host_pinned {
            let p = self.host_malloc(64 * MIB)?;
            self.host.staging = Some(p);
        }
        for d in 0..nd {
            let t = self.devs[d].tid_hccl;
            self.hal_malloc(
                d,
                401 * MIB,
                tx::OWN_HCCL,
                "huge",
                "alloc",
                t,
                stk::PY_NA,
                stk::C_HCCL,
            )?;
            self.hal_malloc(
                d,
                16 * MIB,
                tx::OWN_HCCL,
                "huge",
                "alloc",
                t,
                stk::PY_NA,
                stk::C_HCCL,
            )?;
            self.hal_malloc(
                d,
                40 * MIB + 32 * KIB,
                tx::OWN_HCCL,
                "huge",
                "alloc",
                t,
                stk::PY_NA,
                stk::C_HCCL,
            )?;
            let t = self.devs[d].tid_main;
            self.hal_malloc(d, 8 * MIB, tx::OWN_RUNTIME, "normal", "alloc", t, 0, 0)?;
            self.hal_malloc(d, 2 * MIB, tx::OWN_GE, "huge", "alloc", t, 0, 0)?;
            self.hal_malloc(d, 32 * KIB, tx::OWN_AICPU, "normal", "alloc", t, 0, 0)?;
        }
        for l in 0..self.dims.len() {
            for d in 0..nd {
                let t = self.devs[d].tid_main;
                let w = self.dims[l].w;
                let p =
                    self.pta_malloc(d, w, tx::OWN_WEIGHT, t, true, stk::PY_WEIGHT, None, false)?;
                self.devs[d].model.w.push(p);
                self.devs[d].model.grad.push(None);
                self.devs[d].model.act.push((0, 0));
            }
        }
        for d in 0..nd {
            self.snapshot(d, 0, false)?;
        }
        self.prefetch()?;
        for step in 1..=self.cfg.steps {
            if let Some(sp) = self.cfg.stop_period {
                if step == sp.stop_before_step && self.collecting {
                    self.stop()?;
                }
                if step == sp.start_before_step && !self.collecting {
                    self.start()?;
                }
            }
            self.step(step)?;
            if self.dead {
                break;
            }
        }
        if !self.dead && self.cfg.end_stopped && self.collecting {
            self.stop()?;
        }
        self.exit()
    }

    fn step(&mut self, step: u32) -> Result<()> {
        let nd = self.devs.len();
        let layers = self.dims.len();
        if self.cfg.compare && self.collecting && self.cmp.len() < 2 {
            self.cmp.push((step, Vec::new()));
            self.cmp_rec = true;
        }
        self.act_pct = self.cfg.activation_percent_of(step);
        if let Some(c) = self.cfg.step_clock {
            // A synchronous job: every rank starts the step at the same wall time (± jitter).
            let target = c.first_step_ns
                + (step as u64 - 1) * c.period_ns
                + self.rng.range(0, c.jitter_ns.max(1));
            self.clock = self.clock.max(target);
        }
        for d in 0..nd {
            self.step_begin(d, step)?;
        }
        if let Some(i) = self.leak_steps.iter().position(|&s| s == step) {
            let size = self.leak_plan[i];
            for d in 0..nd {
                let t = self.devs[d].tid_main;
                self.aten(d, tx::OP_CLONE, t, false)?;
                let p =
                    self.pta_malloc(d, size, tx::OWN_LEAK, t, true, stk::PY_LEAK, None, true)?;
                self.access(
                    Pool::Pta,
                    p,
                    "WRITE",
                    tx::OP_CLONE,
                    AccKind::Aten([1, (size / 2) as u32]),
                    t,
                );
                self.kernel(d, tx::K_CAST, t, false)?;
                self.aten(d, tx::OP_CLONE, t, true)?;
            }
        }
        let wasted = if self.wasted_step == Some(step) && self.collecting {
            self.waste_begin()?
        } else {
            Vec::new()
        };
        for d in 0..nd {
            self.devs[d].marks[1] = self.clock;
        }
        for l in 0..layers {
            for d in 0..nd {
                self.fwd(d, l, step)?;
                if self.dead {
                    return Ok(());
                }
            }
        }
        // The extra transient allocation of a skewed step: held from the end of the forward
        // pass through the optimizer step, so it adds to the step's peak.
        let extra = match self.cfg.extra_step_alloc {
            Some(x) if x.step == step && x.bytes > 0 => {
                let mut held = Vec::with_capacity(nd);
                for d in 0..nd {
                    let t = self.devs[d].tid_main;
                    held.push(self.pta_malloc(
                        d,
                        x.bytes,
                        tx::OWN_OPS,
                        t,
                        false,
                        0,
                        None,
                        false,
                    )?);
                }
                held
            }
            _ => Vec::new(),
        };
        let eval = match self.cfg.extra_owner {
            Some(x) => self.extra_owner_begin(step, x)?,
            None => Vec::new(),
        };
        for d in 0..nd {
            self.devs[d].marks[2] = self.clock;
            self.loss(d)?;
        }
        for l in (0..layers).rev() {
            for d in 0..nd {
                self.bwd(d, l)?;
            }
        }
        for d in 0..nd {
            self.optim(d)?;
        }
        for (d, p) in extra.into_iter().enumerate() {
            let t = self.devs[d].tid_main;
            self.pta_free(d, p, t)?;
        }
        if !eval.is_empty() {
            self.plain = true;
            for (d, p) in eval.into_iter().enumerate() {
                let t = self.devs[d].tid_main;
                self.pta_free(d, p, t)?;
            }
            self.plain = false;
        }
        if !wasted.is_empty() {
            self.waste_end(wasted)?;
        }
        if step < self.cfg.steps {
            self.prefetch()?;
        }
        if self.residual_step == Some(step) {
            for d in 0..nd {
                let t = self.devs[d].tid_main;
                let size = 4 * MIB;
                let p = self.hal_malloc(d, size, tx::OWN_RUNTIME, "normal", "alloc", t, 0, 0)?;
                self.hal_free(d, p, t, false)?;
                let q = self.hal_malloc(d, size, tx::OWN_RUNTIME, "normal", "alloc", t, 0, 0)?;
                self.hal_free(d, q, t, true)?;
            }
        }
        let every = self.cfg.snapshot_every.max(1);
        if step.is_multiple_of(every) || step == 1 {
            for d in 0..nd {
                self.snapshot(d, step, false)?;
            }
        }
        for d in 0..nd {
            self.step_end(d, step)?;
        }
        if self.cfg.empty_cache_after_step == Some(step) {
            for d in 0..nd {
                self.empty_cache(d)?;
            }
        }
        self.range_seq += 1;
        self.cmp_rec = false;
        Ok(())
    }

    /// The injected wasted memory (`GenConfig::wasted`), allocated on every device at the start
    /// of the step and used so that each block wastes one known interval across the step's
    /// forward and backward passes (where the peak is): E is allocated now and first used after
    /// the optimizer step, L is used now and freed after the optimizer step, I is used now and
    /// again after the optimizer step. Returns their (E, L, I) addresses per device.
    fn waste_begin(&mut self) -> Result<Vec<[u64; 3]>> {
        let mut out = Vec::new();
        for d in 0..self.devs.len() {
            let t = self.devs[d].tid_main;
            let e = self.pta_malloc(
                d,
                WASTE_SIZES[0],
                tx::OWN_WASTE_EARLY,
                t,
                false,
                0,
                None,
                false,
            )?;
            let l = self.pta_malloc(
                d,
                WASTE_SIZES[1],
                tx::OWN_WASTE_LATE,
                t,
                false,
                0,
                None,
                false,
            )?;
            self.access(Pool::Pta, l, "WRITE", tx::OP_ADDMM, AccKind::Bare, t);
            self.access(Pool::Pta, l, "READ", tx::OP_GELU, AccKind::Bare, t);
            let i = self.pta_malloc(
                d,
                WASTE_SIZES[2],
                tx::OWN_WASTE_IDLE,
                t,
                false,
                0,
                None,
                false,
            )?;
            self.access(Pool::Pta, i, "WRITE", tx::OP_ADDMM, AccKind::Bare, t);
            for (p, kind) in [
                (e, "early_allocation"),
                (l, "late_deallocation"),
                (i, "temporary_idleness"),
            ] {
                if let Some(b) = self.live.get(&(Pool::Pta, p)) {
                    self.acc.injected.insert(b.alloc_id, kind);
                }
            }
            out.push([e, l, i]);
        }
        Ok(out)
    }

    fn waste_end(&mut self, blocks: Vec<[u64; 3]>) -> Result<()> {
        for (d, [e, l, i]) in blocks.into_iter().enumerate() {
            let t = self.devs[d].tid_main;
            self.access(Pool::Pta, e, "READ", tx::OP_TO_COPY, AccKind::Bare, t);
            self.pta_free(d, e, t)?;
            self.pta_free(d, l, t)?;
            self.access(Pool::Pta, i, "READ", tx::OP_MM, AccKind::Bare, t);
            self.pta_free(d, i, t)?;
        }
        Ok(())
    }

    /// Run B's extra owner (`GenConfig::extra_owner`): after the forward pass every device
    /// runs one op of its own ([`tx::OP_EXTRA`]) that allocates `bytes_per_step` under
    /// [`tx::OWN_EXTRA`] in two blocks, a transient one freed after the optimizer step and
    /// `held_per_step` kept to the end. Time advances by fixed steps and no PRNG draw is made,
    /// so the rest of the run is run A's. Returns the transient blocks.
    fn extra_owner_begin(&mut self, step: u32, x: super::ExtraOwner) -> Result<Vec<u64>> {
        let (held, transient) = x.split();
        self.plain = true;
        let mut out = Vec::new();
        for d in 0..self.devs.len() {
            let t = self.devs[d].tid_main;
            self.aten(d, tx::OP_EXTRA, t, false)?;
            out.push(self.pta_malloc(d, transient, tx::OWN_EXTRA, t, false, 0, None, false)?);
            self.pta_malloc(d, held, tx::OWN_EXTRA, t, false, 0, None, false)?;
            self.aten(d, tx::OP_EXTRA, t, true)?;
            if self.collecting {
                let e = self.acc.extra_steps.entry(step).or_insert((0, 0));
                e.0 += held + transient;
                e.1 += 2;
            }
        }
        self.plain = false;
        Ok(out)
    }

    /// The data loader copies the next batch to every device through a pinned host buffer
    /// (one step ahead, so the batch of step k is freed in step k).
    fn prefetch(&mut self) -> Result<()> {
        if self.cfg.host_pinned {
            let size = 16 * MIB + self.rng.range(0, 7) * MIB;
            let p = self.host_malloc(size)?;
            self.host.batch = Some(p);
        }
        for d in 0..self.devs.len() {
            let t = self.devs[d].tid_main;
            let a = self.dims[0].act;
            self.aten(d, tx::OP_TO_COPY, t, false)?;
            let p = self.pta_malloc(d, a, tx::OWN_ACT, t, false, 0, None, false)?;
            self.access(Pool::Pta, p, "UNKNOWN", tx::OP_TO_COPY, AccKind::Bare, t);
            self.kernel(d, tx::K_CAST, t, false)?;
            self.aten(d, tx::OP_TO_COPY, t, true)?;
            self.devs[d].model.input = Some(p);
        }
        if let Some(p) = self.host.batch.take() {
            self.host_free(p)?;
        }
        Ok(())
    }

    fn step_begin(&mut self, d: usize, step: u32) -> Result<()> {
        let dev = self.devs[d].dev;
        let t = self.devs[d].tid_main;
        if step == 1 {
            self.row_now(
                dev,
                "MSTX",
                "Mark",
                tx::MSTX_TRAIN_START,
                t,
                "",
                0,
                0,
                (100_000, 900_000),
            )?;
        }
        let ts = self.row_now(
            dev,
            "SYSTEM",
            "STEP",
            &step.to_string(),
            t,
            "",
            0,
            0,
            if self.cfg.step_clock.is_some() {
                (1_000, 20_000)
            } else {
                (200_000, 2_000_000)
            },
        )?;
        let collected = self.collecting;
        self.acc.step_begin(dev, step, ts, collected);
        self.devs[d].marks[0] = ts;
        self.row_now(
            dev,
            "MSTX",
            "Range_start",
            tx::MSTX_STEP,
            t,
            "",
            0,
            0,
            (1_000, 20_000),
        )?;
        if self.collecting {
            self.devs[d].range_id += 1;
        }
        Ok(())
    }

    fn step_end(&mut self, d: usize, step: u32) -> Result<()> {
        let dev = self.devs[d].dev;
        let t = self.devs[d].tid_main;
        let name = format!("Range end from id {}", self.devs[d].range_id);
        let ts = self.row_now(
            dev,
            "MSTX",
            "Range_end",
            &name,
            t,
            "",
            0,
            0,
            (2_000_000, 30_000_000),
        )?;
        let collected = self.collecting;
        self.acc.step_end(dev, step, ts, collected);
        if self.cfg.python_trace && self.collecting {
            let m = self.devs[d].marks;
            let now = self.clock;
            self.out
                .trace(dev, "nn.Module: Model", m[1], m[2], t, now)?;
            self.out.trace(
                dev,
                "<built-in method item of Tensor object at 0xfffe8c1a2b30>",
                m[3],
                m[3] + 41_230,
                t,
                now,
            )?;
            let optim = format!("{}/torch/optim/adamw.py(227): step", tx::PY_SITE);
            self.out.trace(dev, &optim, m[4], m[5], t, now)?;
            self.out.trace(
                dev,
                "/home/user/llm/train.py(142): train_step",
                m[0],
                ts,
                t,
                now,
            )?;
        }
        Ok(())
    }

    fn fwd(&mut self, d: usize, l: usize, step: u32) -> Result<()> {
        let t = self.devs[d].tid_main;
        let dim = self.dims[l];
        let layers = self.dims.len();
        if self.cfg.oom && step == self.cfg.steps && d == 0 && l == layers / 2 {
            return self.oom(d);
        }
        let first = step == 1 && l == 0;
        // fsdp2 all-gather of the layer's parameters
        self.aten(d, tx::OP_ALL_GATHER, t, false)?;
        let ag = self.pta_malloc(d, dim.w * self.world, tx::OWN_AG, t, false, 0, None, false)?;
        self.kernel(d, tx::K_ALLGATHER, t, true)?;
        self.aten(d, tx::OP_ALL_GATHER, t, true)?;
        // linear
        self.aten(d, tx::OP_ADDMM, t, false)?;
        let ineff = if l == 0 {
            Some("early_allocation,late_deallocation")
        } else {
            None
        };
        let act = self.pta_malloc(
            d,
            self.act_bytes(l),
            tx::OWN_ACT,
            t,
            first || l == 0,
            stk::PY_ACT,
            ineff,
            false,
        )?;
        self.access(
            Pool::Pta,
            ag,
            "READ",
            tx::OP_ADDMM,
            AccKind::Aten([dim.h, dim.h]),
            t,
        );
        self.access(
            Pool::Pta,
            act,
            "WRITE",
            tx::OP_ADDMM,
            AccKind::Aten([dim.b, dim.h]),
            t,
        );
        self.kernel(d, tx::K_MATMUL, t, false)?;
        self.aten(d, tx::OP_ADDMM, t, true)?;
        self.pta_free(d, ag, t)?;
        // activation function
        self.aten(d, tx::OP_GELU, t, false)?;
        let act2 = self.pta_malloc(d, self.act_bytes(l), tx::OWN_ACT, t, false, 0, None, false)?;
        self.access(
            Pool::Pta,
            act,
            "READ",
            tx::OP_GELU,
            AccKind::Aten([dim.b, dim.h]),
            t,
        );
        self.access(
            Pool::Pta,
            act2,
            "WRITE",
            tx::OP_GELU,
            AccKind::Aten([dim.b, dim.h]),
            t,
        );
        self.kernel(d, tx::K_GELU, t, false)?;
        self.aten(d, tx::OP_GELU, t, true)?;
        if l.is_multiple_of(4) {
            self.atb_op(d, l, act2, t)?;
        }
        self.devs[d].model.act[l] = (act, act2);
        Ok(())
    }

    fn loss(&mut self, d: usize) -> Result<()> {
        let t = self.devs[d].tid_main;
        let a = self.act_bytes(self.dims.len() - 1);
        self.aten(d, tx::OP_MSE, t, false)?;
        let loss = self.pta_malloc(d, 512, tx::OWN_ACT, t, false, 0, None, false)?;
        let tmp = self.pta_malloc(d, a, tx::OWN_OPS, t, false, 0, None, false)?;
        self.kernel(d, tx::K_MSE, t, false)?;
        self.pta_free(d, tmp, t)?;
        self.aten(d, tx::OP_MSE, t, true)?;
        self.devs[d].model.loss = Some(loss);
        self.devs[d].marks[3] = self.tick(10_000, 50_000);
        self.tick(41_230, 41_230);
        let tb = self.devs[d].tid_bwd;
        self.aten(d, tx::OP_MSE_BWD, tb, false)?;
        self.kernel(d, tx::K_MSE, tb, false)?;
        self.aten(d, tx::OP_MSE_BWD, tb, true)?;
        Ok(())
    }

    fn bwd(&mut self, d: usize, l: usize) -> Result<()> {
        let t = self.devs[d].tid_bwd;
        let dim = self.dims[l];
        let (act, act2) = self.devs[d].model.act[l];
        self.aten(d, tx::OP_ALL_GATHER, t, false)?;
        let ag = self.pta_malloc(d, dim.w * self.world, tx::OWN_AG, t, false, 0, None, false)?;
        self.kernel(d, tx::K_ALLGATHER, t, true)?;
        self.aten(d, tx::OP_ALL_GATHER, t, true)?;
        self.aten(d, tx::OP_GELU_BWD, t, false)?;
        let gin = self.pta_malloc(d, self.act_bytes(l), tx::OWN_BWD, t, false, 0, None, false)?;
        self.access(
            Pool::Pta,
            act2,
            "READ",
            tx::OP_GELU_BWD,
            AccKind::Aten([dim.b, dim.h]),
            t,
        );
        self.kernel(d, tx::K_GELU_BWD, t, false)?;
        self.aten(d, tx::OP_GELU_BWD, t, true)?;
        self.pta_free(d, act2, t)?;
        self.aten(d, tx::OP_MM, t, false)?;
        // the unsharded weight gradient, reduce-scattered into the kept shard below
        let gfull = self.pta_alloc(
            d,
            dim.w * self.world,
            tx::OWN_BWD,
            tx::CAT_GRADIENTS,
            t,
            false,
            0,
            None,
            false,
        )?;
        self.access(
            Pool::Pta,
            act,
            "READ",
            tx::OP_MM,
            AccKind::Aten([dim.b, dim.h]),
            t,
        );
        self.kernel(d, tx::K_MM, t, false)?;
        self.aten(d, tx::OP_MM, t, true)?;
        self.pta_free(d, act, t)?;
        self.pta_free(d, ag, t)?;
        self.aten(d, tx::OP_REDUCE_SCATTER, t, false)?;
        if self.devs[d].model.grad[l].is_none() {
            let g = self.pta_malloc(
                d,
                dim.w,
                tx::OWN_GRAD,
                t,
                l + 1 == self.dims.len(),
                stk::PY_GRAD,
                None,
                false,
            )?;
            self.devs[d].model.grad[l] = Some(g);
        }
        self.kernel(d, tx::K_REDUCE_SCATTER, t, true)?;
        self.aten(d, tx::OP_REDUCE_SCATTER, t, true)?;
        self.pta_free(d, gfull, t)?;
        self.pta_free(d, gin, t)?;
        Ok(())
    }

    fn optim(&mut self, d: usize) -> Result<()> {
        let t = self.devs[d].tid_main;
        self.devs[d].marks[4] = self.tick(20_000, 100_000);
        if self.devs[d].model.opt.is_empty() {
            for l in 0..self.dims.len() {
                let w = self.dims[l].w;
                let a = self.pta_malloc(d, w, tx::OWN_OPT, t, l == 0, stk::PY_OPT, None, false)?;
                let b = self.pta_malloc(d, w, tx::OWN_OPT, t, false, 0, None, false)?;
                self.devs[d].model.opt.push((a, b));
            }
        }
        let wmax = self.dims.iter().map(|x| x.w).max().unwrap_or(512);
        self.aten(d, tx::OP_FOREACH_MUL, t, false)?;
        self.kernel(d, tx::K_MUL, t, false)?;
        self.aten(d, tx::OP_FOREACH_MUL, t, true)?;
        self.aten(d, tx::OP_FOREACH_SQRT, t, false)?;
        let tmp = self.pta_malloc(d, wmax, tx::OWN_OPS, t, false, 0, None, false)?;
        self.kernel(d, tx::K_SQRT, t, false)?;
        self.aten(d, tx::OP_FOREACH_SQRT, t, true)?;
        self.aten(d, tx::OP_FOREACH_ADD, t, false)?;
        self.kernel(d, tx::K_FOREACH, t, false)?;
        self.aten(d, tx::OP_FOREACH_ADD, t, true)?;
        self.pta_free(d, tmp, t)?;
        self.aten(d, tx::OP_ZEROS, t, false)?;
        self.kernel(d, tx::K_ZEROS, t, false)?;
        self.aten(d, tx::OP_ZEROS, t, true)?;
        if let Some(p) = self.devs[d].model.input.take() {
            self.pta_free(d, p, t)?;
        }
        if let Some(p) = self.devs[d].model.loss.take() {
            self.pta_free(d, p, t)?;
        }
        self.devs[d].marks[5] = self.tick(5_000, 20_000);
        Ok(())
    }

    /// The failed huge allocation at the end of the job (device `d`).
    fn oom(&mut self, d: usize) -> Result<()> {
        let t = self.devs[d].tid_main;
        let dev = self.devs[d].dev;
        self.aten(d, tx::OP_MATMUL, t, false)?;
        // The caching allocator frees its cached segments and retries before giving up.
        self.empty_cache(d)?;
        let req = round_up(
            self.device_free(d) + self.rng.range(1, 6) * 512 * MIB,
            SMALL_SEG,
        );
        let t_fail = self.tick(20_000, 90_000);
        let free = self.device_free(d);
        let snap_ts = self.snapshot(d, self.cfg.steps, true)?;
        let n = if let Dev::Npu(n) = dev { n as u64 } else { 0 };
        let flag = n | (1 << 17) | (33u64 << 56);
        let id = self.new_id();
        let attr = format!("func:halMemAlloc,req_size:{req},flag:{flag}");
        let row = RowRef {
            id,
            event: "OOM_DETAIL",
            etype: "OOM_TRIGGER",
            name: "OOM_Trigger",
            ts: t_fail,
            pid: self.pid,
            tid: t,
            dev,
            ptr: None,
            attr: &attr,
            py: &self.stacks[stk::PY_OOM as usize],
            c: &self.stacks[stk::C_OOM as usize],
        };
        let now = self.clock;
        self.out.write(&row, now)?;
        // RECENT (newest first) and TOP (largest first) live records of the device.
        let mut blocks: Vec<(u64, u64, u64, &'static str, u64)> = self
            .live
            .values()
            .filter(|b| b.dev == dev && b.pool != Pool::Host)
            .map(|b| (b.written_ts, b.alloc_id, b.size, b.pool.label(), b.ptr))
            .collect();
        let k = self.cfg.oom_top_k as usize;
        blocks.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        let recent: Vec<OomRecord> = blocks
            .iter()
            .take(k)
            .map(|b| OomRecord {
                pool: b.3.to_string(),
                ptr: b.4,
                size: b.2,
                timestamp: b.0,
            })
            .collect();
        blocks.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        let top: Vec<OomRecord> = blocks
            .iter()
            .take(k)
            .map(|b| OomRecord {
                pool: b.3.to_string(),
                ptr: b.4,
                size: b.2,
                timestamp: b.0,
            })
            .collect();
        for (list, et, name) in [
            (&recent, "OOM_RECENT_ALLOC", "OOM_RecentAlloc"),
            (&top, "OOM_TOP_ALLOC", "OOM_TopAlloc"),
        ] {
            for r in list.iter() {
                let ts = self.tick(500, 3_000);
                let attr = format!(
                    "pool:{},ptr:{},size:{},timestamp:{}",
                    r.pool,
                    hex(r.ptr),
                    r.size,
                    r.timestamp
                );
                self.deviceless("OOM_DETAIL", et, name, ts, t, attr);
            }
        }
        self.acc.oom.push(OomTruth {
            pid: self.pid,
            device: dev.label(),
            ts: t_fail,
            func: "halMemAlloc".to_string(),
            req_size: req,
            flag,
            snapshot_ts: snap_ts,
            free,
            total: self.hbm_total,
            recent,
            top,
        });
        self.dead = true;
        Ok(())
    }

    fn exit(mut self) -> Result<ProcResult> {
        if self.collecting && !self.dead {
            let ts = self.tick(1_000_000, 5_000_000);
            let pid = self.pid;
            self.deviceless("SYSTEM", "ACL_FINI", "N/A", ts, pid, String::new());
        }
        let exit_ts = self.tick(2_000_000, 30_000_000);
        let exit_stopped = !self.collecting;
        let fill_ts = match (self.collecting, self.last_stop) {
            (false, Some(s)) => s + 1,
            _ => exit_ts,
        };
        for b in std::mem::take(&mut self.pending) {
            let mut b = b;
            let f = b.pending.take().expect("pending free");
            self.flush(b, f)?;
        }
        // Blocks alive at exit: flushed in hash-map order with a synthetic shadow FREE (rule 4).
        let salt = mix(self.pid as u64);
        let mut keys: Vec<(u64, (Pool, u64))> = self
            .live
            .iter()
            .filter(|(_, b)| b.state != BState::Shadow)
            .map(|(k, b)| (mix(b.alloc_id ^ salt), *k))
            .collect();
        keys.sort();
        for (_, k) in keys {
            let b = self.live.remove(&k).expect("live");
            let id = self.new_id();
            let tid = match b.dev {
                Dev::Npu(_) => self
                    .devs
                    .iter()
                    .find(|x| x.dev == b.dev)
                    .map_or(self.pid, |x| x.tid_main),
                _ => self.pid,
            };
            let f = FreeRow {
                id,
                ts: fill_ts,
                tid,
                shadow: true,
                total: 0,
                used: 0,
                reason: Reason::ExitFill,
            };
            self.flush(b, f)?;
        }
        if self.cfg.compare {
            let (text, rows) = self.compare_csv();
            let name = format!("compare/memory_compare_{}.csv", stamp(exit_ts));
            self.out.write_file(&name, "compare", &text, rows)?;
        }
        let log = format!(
            "[msmemscope] Info: config applied, collect mode deferred.\n\
             [msmemscope] Info: start tracing, pid {pid}.\n\
             [msmemscope] Info: Fflush temporary cache events to file!\n",
            pid = self.pid
        );
        let log_name = format!(
            "msmemscope_logs/msmemscope_{}.log",
            stamp(self.cfg.start_time_ns)
        );
        self.out.write_file(&log_name, "log", &log, 3)?;
        for d in &self.devs {
            if let Some(ts) = self.out.last_ts(d.dev) {
                self.acc.data_end.insert(d.dev, ts);
            }
        }
        let devices = self.devs.iter().map(|d| d.dev.label()).collect();
        let dir = self.out.dir_rel.clone();
        let (files, rows) = self.out.finish()?;
        Ok(ProcResult {
            files,
            rows,
            acc: self.acc,
            dir,
            devices,
            exit_ts,
            exit_stopped,
        })
    }

    /// memory_compare csv: the first two collected steps of the first device, op by op.
    fn compare_csv(&self) -> (String, u64) {
        let mut s = String::from(",,,Base,Compare\nEvent,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte)\n");
        let dev = self.devs[0].dev.label();
        let steps: Vec<&(u32, CmpSeq)> = self.cmp.iter().take(2).collect();
        if steps.len() < 2 {
            return (s, 0);
        }
        let (a, b) = (&steps[0].1, &steps[1].1);
        // Myers-equivalent alignment by LCS on names (sequences are short).
        let (n, m) = (a.len(), b.len());
        let mut dp = vec![0u32; (n + 1) * (m + 1)];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                dp[i * (m + 1) + j] = if a[i].0 == b[j].0 {
                    dp[(i + 1) * (m + 1) + j + 1] + 1
                } else {
                    dp[(i + 1) * (m + 1) + j].max(dp[i * (m + 1) + j + 1])
                };
            }
        }
        let (mut i, mut j, mut rows) = (0, 0, 0u64);
        let val = |v: Option<u64>| v.unwrap_or(0) as i64;
        while i < n || j < m {
            let line = if i < n && j < m && a[i].0 == b[j].0 {
                let l = format!(
                    "OP_LAUNCH,{},{dev},{},{},{}\n",
                    a[i].0,
                    val(a[i].1),
                    val(b[j].1),
                    val(b[j].1) - val(a[i].1)
                );
                i += 1;
                j += 1;
                l
            } else if j < m && (i == n || dp[i * (m + 1) + j + 1] >= dp[(i + 1) * (m + 1) + j]) {
                let l = format!(
                    "OP_LAUNCH,{},{dev},N/A,{},{}\n",
                    b[j].0,
                    val(b[j].1),
                    val(b[j].1)
                );
                j += 1;
                l
            } else {
                let l = format!(
                    "OP_LAUNCH,{},{dev},{},N/A,{}\n",
                    a[i].0,
                    val(a[i].1),
                    -val(a[i].1)
                );
                i += 1;
                l
            };
            s.push_str(&line);
            rows += 1;
        }
        (s, rows)
    }
}

/// `allocation_id,addr,size` — the head every memory row's Attr starts with.
fn attr_head(a: &mut String, b: &Block) {
    a.clear();
    a.push_str("allocation_id:");
    a.push_str(&b.alloc_id.to_string());
    a.push_str(",addr:");
    a.push_str(&hex(b.ptr));
    a.push_str(",size:");
    a.push_str(&b.size.to_string());
}
