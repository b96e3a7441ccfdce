//! Tables derived from a source's events in canonical order (one pass, memory bounded by the
//! live-block set): `blocks` with each block's fate (docs/formats/memscope.md §5.4–5.5, decided by
//! [`crate::derive::fates`]), the staging rows of `curve` ([`crate::derive::curve`]), `oom`, `mem_snapshots` and
//! `owner_totals` (the blocks of each owner summed as they are written).

pub mod curve;
pub mod fates;
pub mod frag;
pub mod series;
pub mod steps;
pub mod tiles;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, Int32Builder, Int64Array,
    Int64Builder, StringBuilder, UInt64Builder,
};
use datafusion::arrow::datatypes::{Int32Type, Int64Type, UInt64Type};
use datafusion::arrow::record_batch::RecordBatch;

use crate::derive::curve::{CurveRow, CurveStaging};
use crate::derive::fates::{Fate, Fates, Marker};
use crate::derive::series::{named_columns, ByName};
use crate::derive::steps::StepMarkers;
use crate::parse::attr;
use crate::schema;
use memq_core::error::Result;

/// One block still live during the pass.
#[derive(Clone)]
struct LiveBlock {
    device: String,
    device_index: Option<i32>,
    size: Option<i64>,
    owner: Option<String>,
    allocation_id: Option<i64>,
    alloc_id: i64,
    alloc_ts: Option<i64>,
    alloc_row: u64,
    stock: bool,
    stack_py: Option<String>,
}

impl LiveBlock {
    /// The block a MALLOC row starts (for a FREE row: its device, size and ids).
    fn from_row(c: &EventCols, i: usize) -> LiveBlock {
        LiveBlock {
            device: c.device.value(i).to_string(),
            device_index: c.device_index.is_valid(i).then(|| c.device_index.value(i)),
            size: opt_i64(c.size, i),
            owner: opt_str(c.owner, i).map(str::to_string),
            allocation_id: opt_i64(c.allocation_id, i),
            alloc_id: c.id.value(i),
            alloc_ts: opt_i64(c.ts, i),
            alloc_row: c.row_idx.value(i),
            stock: c.shadow.value(i),
            stack_py: opt_str(c.stack_py, i).map(str::to_string),
        }
    }
}

impl LiveBlock {
    /// The owner as owner_peaks names it: the MALLOC's owner, else `(stock)` for stock
    /// memory, else the pool.
    fn owner_label<'a>(&'a self, pool: &'a str) -> &'a str {
        match self.owner.as_deref() {
            Some(o) if !o.is_empty() => o,
            _ if self.stock => "(stock)",
            _ => pool,
        }
    }
}

/// What a MALLOC/FREE row does to live bytes: the block it allocates or ends (its owner and
/// the change of that owner's bytes) and, for a MALLOC that reuses a live block's address, the
/// block it ends.
#[derive(Default)]
struct Change {
    owner: Option<String>,
    owner_delta: i64,
    old: Option<(String, i64)>,
    /// The row ends its block by a shadow FREE (the change holds only if it is released).
    shadow_end: bool,
}

/// (pid, pool, ptr): several devices may share one key.
type BlockKey = (Option<i64>, String, u64);

/// A block that has ended (or is still live at the end), waiting for its fate.
struct Ended {
    key: BlockKey,
    block: LiveBlock,
    free_id: Option<i64>,
    free_ts: Option<i64>,
    free_row: Option<u64>,
    /// free_kind: real, shadow, replaced or none.
    kind: &'static str,
    has_malloc: bool,
    /// The row that ends the block: the FREE, or the MALLOC that reused the address.
    end_row: Option<u64>,
}

/// Column views of one events batch.
struct EventCols<'a> {
    row_idx: &'a datafusion::arrow::array::PrimitiveArray<UInt64Type>,
    id: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    event: &'a datafusion::arrow::array::StringArray,
    event_type: &'a datafusion::arrow::array::StringArray,
    name: &'a datafusion::arrow::array::StringArray,
    ts: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    ts_raw: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    pid: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    device: &'a datafusion::arrow::array::StringArray,
    device_index: &'a datafusion::arrow::array::PrimitiveArray<Int32Type>,
    ptr: &'a datafusion::arrow::array::PrimitiveArray<UInt64Type>,
    attr: &'a datafusion::arrow::array::StringArray,
    size: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    used: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    total: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    process_used: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    device_used: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    allocation_id: &'a datafusion::arrow::array::PrimitiveArray<Int64Type>,
    owner: &'a datafusion::arrow::array::StringArray,
    shadow: &'a datafusion::arrow::array::BooleanArray,
    stack_py: &'a datafusion::arrow::array::StringArray,
    stack_c: &'a datafusion::arrow::array::StringArray,
}

impl<'a> EventCols<'a> {
    fn new(b: &'a RecordBatch) -> Self {
        let c = |n: &str| {
            b.column_by_name(n)
                .expect("events batch has every events column")
        };
        EventCols {
            row_idx: c("row_idx").as_primitive(),
            id: c("id").as_primitive(),
            event: c("event").as_string(),
            event_type: c("event_type").as_string(),
            name: c("name").as_string(),
            ts: c("ts").as_primitive(),
            ts_raw: c("ts_raw").as_primitive(),
            pid: c("pid").as_primitive(),
            device: c("device").as_string(),
            device_index: c("device_index").as_primitive(),
            ptr: c("ptr").as_primitive(),
            attr: c("attr").as_string(),
            size: c("size").as_primitive(),
            used: c("used").as_primitive(),
            total: c("total").as_primitive(),
            process_used: c("process_used").as_primitive(),
            device_used: c("device_used").as_primitive(),
            allocation_id: c("allocation_id").as_primitive(),
            owner: c("owner").as_string(),
            shadow: c("shadow").as_boolean(),
            stack_py: c("stack_py").as_string(),
            stack_c: c("stack_c").as_string(),
        }
    }
}

fn opt_i64(a: &datafusion::arrow::array::PrimitiveArray<Int64Type>, i: usize) -> Option<i64> {
    a.is_valid(i).then(|| a.value(i))
}

fn opt_str(a: &datafusion::arrow::array::StringArray, i: usize) -> Option<&str> {
    a.is_valid(i).then(|| a.value(i))
}

/// Builds `blocks`, the staging rows of `curve`, `oom` and `mem_snapshots` for one source.
pub struct Deriver {
    source: String,
    ts_scale: i64,
    /// Live blocks by (pid, pool, ptr); several devices may share a key.
    live: HashMap<BlockKey, Vec<LiveBlock>>,
    /// Shadow-ended blocks waiting for their fate, keyed by (pid, pool, ptr) and device.
    fates: Fates<(BlockKey, String), Ended>,
    /// row_idx of the shadow FREEs whose block is held at the end (their curve change is void).
    held_shadow_rows: HashSet<u64>,
    /// The allocation_id of the block last ended on (key, device) by a MALLOC that reused its
    /// address: the tool's residual-block fill-in FREE for it (docs/formats/memscope.md §5.5
    /// rule 5) is stamped when the tool handles that MALLOC, a little after it, so it comes
    /// after the new block's MALLOC in canonical order and must not end the new block.
    replaced_ids: HashMap<(BlockKey, String), i64>,
    blocks: BlocksBuilder,
    /// Batches of `blocks` cut at BLOCK_BATCH_BYTES, not yet taken.
    full_blocks: Vec<RecordBatch>,
    owner_totals: OwnerTotals,
    curve: CurveStaging,
    oom: Vec<OomRow>,
    snaps: SnapshotsBuilder,
    steps: StepMarkers,
}

impl Deriver {
    /// `curve_staging`: the staging folder and file stem of the rows of `curve`.
    pub fn new(source: &str, curve_staging: (&std::path::Path, &str)) -> Result<Self> {
        Ok(Deriver {
            source: source.to_string(),
            ts_scale: 1,
            live: HashMap::new(),
            fates: Fates::new(),
            held_shadow_rows: HashSet::new(),
            replaced_ids: HashMap::new(),
            blocks: BlocksBuilder::default(),
            full_blocks: Vec::new(),
            owner_totals: OwnerTotals::default(),
            curve: CurveStaging::create(curve_staging.0, curve_staging.1)?,
            oom: Vec::new(),
            snaps: SnapshotsBuilder::default(),
            steps: StepMarkers::default(),
        })
    }

    /// The scale of the dump's timestamps to ns (for the times inside Attr).
    pub fn set_ts_scale(&mut self, ts_scale: i64) {
        self.ts_scale = ts_scale;
    }

    /// Whether finished blocks wait to be written: a batch's worth of rows, or of text.
    pub fn blocks_ready(&self, rows: usize) -> bool {
        self.blocks.len >= rows || !self.full_blocks.is_empty()
    }

    /// Consumes one batch of events in canonical order.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let c = EventCols::new(batch);
        for i in 0..batch.num_rows() {
            match c.event.value(i) {
                "MALLOC" => self.malloc(&c, i)?,
                "FREE" => self.free(&c, i)?,
                "OOM_DETAIL" => self.oom_row(&c, i),
                "SNAPSHOT" => self.snapshot_row(&c, i),
                "SYSTEM" | "MSTX" if c.ts.is_valid(i) => {
                    let (pid, ts) = (opt_i64(c.pid, i), c.ts.value(i));
                    let (event, event_type) = (c.event.value(i), c.event_type.value(i));
                    let marker = match event_type {
                        "START_TRACE" => Marker::Start,
                        "STOP_TRACE" => Marker::Stop,
                        _ => {
                            let (device, name) = (c.device.value(i), opt_str(c.name, i));
                            let row = c.row_idx.value(i);
                            self.steps
                                .push(pid, device, event, event_type, name, ts, row);
                            continue;
                        }
                    };
                    self.fates.marker(pid, ts, marker);
                }
                _ => {}
            }
            for (ended, fate) in self.fates.take_decided() {
                self.append(ended, fate);
            }
        }
        Ok(())
    }

    /// Writes an ended block with its fate.
    fn append(&mut self, e: Ended, fate: Fate) {
        if e.kind == "shadow" && fate.held_at_end() {
            if let Some(row) = e.free_row {
                self.held_shadow_rows.insert(row);
            }
        }
        self.owner_totals.add(&e, fate);
        self.blocks.append(&self.source, &e, fate);
        if self.blocks.text_bytes >= BLOCK_BATCH_BYTES {
            let batch = self.blocks.finish();
            self.full_blocks.push(batch);
        }
    }

    /// The block key of a MALLOC/FREE row: (pid, pool, ptr); `None` when the row has no Ptr.
    fn key(c: &EventCols, i: usize) -> Option<BlockKey> {
        (!c.ptr.is_null(i)).then(|| {
            (
                opt_i64(c.pid, i),
                c.event_type.value(i).to_string(),
                c.ptr.value(i),
            )
        })
    }

    /// The curve row of MALLOC/FREE row `i`, in the series of `device`, with the change it
    /// causes (none on a row without a time: it has no place on the time line).
    fn curve_row(&mut self, c: &EventCols, i: usize, device: &str, change: Change) -> Result<()> {
        let timed = c.ts.is_valid(i);
        let delta = change.owner_delta + change.old.as_ref().map_or(0, |o| o.1);
        self.curve.push(CurveRow {
            pid: opt_i64(c.pid, i),
            device: if timed { device } else { c.device.value(i) },
            pool: c.event_type.value(i),
            ts: opt_i64(c.ts, i),
            ts_raw: opt_i64(c.ts_raw, i),
            row_idx: c.row_idx.value(i),
            id: c.id.value(i),
            event: c.event.value(i),
            size: opt_i64(c.size, i),
            used: opt_i64(c.used, i),
            total: opt_i64(c.total, i),
            process_used: opt_i64(c.process_used, i),
            device_used: opt_i64(c.device_used, i),
            delta: if timed { delta } else { 0 },
            shadow_end: timed && change.shadow_end,
            owner: change.owner.as_deref().filter(|_| timed),
            owner_delta: if timed { change.owner_delta } else { 0 },
            old_owner: change.old.as_ref().filter(|_| timed).map(|o| o.0.as_str()),
            old_delta: change.old.as_ref().filter(|_| timed).map_or(0, |o| o.1),
        })
    }

    fn malloc(&mut self, c: &EventCols, i: usize) -> Result<()> {
        let Some(key) = Self::key(c, i) else {
            return self.curve_row(c, i, "", Change::default());
        };
        let new = LiveBlock::from_row(c, i);
        self.fates
            .next_block(&(key.clone(), new.device.clone()), true);
        let mut change = Change::default();
        if new.alloc_ts.is_some() {
            change.owner = Some(new.owner_label(&key.1).to_string());
            change.owner_delta = new.size.unwrap_or(0);
        }
        let entries = self.live.entry(key.clone()).or_default();
        // Address reuse without a FREE: the old block ends where the new one starts.
        let replaced = entries
            .iter()
            .position(|b| b.device == new.device)
            .map(|pos| entries.remove(pos));
        entries.push(new.clone());
        let waiting = (key.clone(), new.device.clone());
        match replaced.as_ref().and_then(|old| old.allocation_id) {
            Some(id) => {
                self.replaced_ids.insert(waiting, id);
            }
            None => {
                self.replaced_ids.remove(&waiting);
            }
        }
        if let Some(old) = replaced {
            if old.alloc_ts.is_some() {
                change.old = Some((old.owner_label(&key.1).to_string(), -old.size.unwrap_or(0)));
            }
            let ended = Ended {
                key: key.clone(),
                block: old,
                free_id: None,
                free_ts: new.alloc_ts,
                free_row: None,
                kind: "replaced",
                has_malloc: true,
                end_row: Some(new.alloc_row),
            };
            self.append(ended, Fate::Replaced);
        }
        self.curve_row(c, i, &new.device, change)
    }

    fn free(&mut self, c: &EventCols, i: usize) -> Result<()> {
        let Some(key) = Self::key(c, i) else {
            return self.curve_row(c, i, "", Change::default());
        };
        let device = c.device.value(i);
        let free_has_device = c.device_index.is_valid(i) || device == "cpu";
        let shadow = c.shadow.value(i);
        if let Some(series_device) = self.residual_fill_in(c, i, &key, device, free_has_device) {
            // The fill-in FREE of a block a MALLOC already ended: it ends nothing more.
            return self.curve_row(c, i, &series_device, Change::default());
        }
        let matched = self.live.get_mut(&key).and_then(|entries| {
            let pos = entries
                .iter()
                .position(|b| b.device == device)
                .or_else(|| (!free_has_device && !entries.is_empty()).then_some(0))?;
            Some(entries.remove(pos))
        });
        if self.live.get(&key).is_some_and(|e| e.is_empty()) {
            self.live.remove(&key);
        }
        let (block, has_malloc) = match matched {
            Some(block) => (block, true),
            None => {
                // FREE without MALLOC: a block allocated before collection (or a lost MALLOC);
                // it is the next block on its key.
                let lone = LiveBlock {
                    size: opt_i64(c.size, i).map(i64::abs),
                    owner: None,
                    alloc_ts: None,
                    stock: false,
                    stack_py: None,
                    ..LiveBlock::from_row(c, i)
                };
                self.fates
                    .next_block(&(key.clone(), lone.device.clone()), false);
                (lone, false)
            }
        };
        let mut change = Change {
            shadow_end: shadow,
            ..Change::default()
        };
        if block.alloc_ts.is_some() {
            change.owner = Some(block.owner_label(&key.1).to_string());
            change.owner_delta = -block.size.unwrap_or(0);
        }
        let series_device = block.device.clone();
        let ended = Ended {
            key: key.clone(),
            block,
            free_id: Some(c.id.value(i)),
            free_ts: opt_i64(c.ts, i),
            free_row: Some(c.row_idx.value(i)),
            kind: if shadow { "shadow" } else { "real" },
            has_malloc,
            end_row: Some(c.row_idx.value(i)),
        };
        if shadow {
            let waiting = (key.clone(), series_device.clone());
            self.fates.shadow_end(waiting, key.0, ended.free_ts, ended);
        } else {
            self.append(ended, Fate::Released);
        }
        self.curve_row(c, i, &series_device, change)
    }

    /// When FREE row `i` is the tool's residual-block fill-in of a block that a MALLOC on the
    /// same (key, device) has already ended (its allocation_id is that block's, not the live
    /// block's), the device of its series; the fill-in is then used up. `None` for any other
    /// FREE, and always for rows without allocation_id (G1), which pair as before.
    fn residual_fill_in(
        &mut self,
        c: &EventCols,
        i: usize,
        key: &BlockKey,
        device: &str,
        free_has_device: bool,
    ) -> Option<String> {
        let free_id = opt_i64(c.allocation_id, i)?;
        let live = self.live.get(key).and_then(|entries| {
            entries
                .iter()
                .find(|b| b.device == device)
                .or_else(|| (!free_has_device).then(|| entries.first()).flatten())
        });
        let series_device = match live {
            // the live block is this FREE's own: the ordinary case
            Some(b) if b.allocation_id.is_none_or(|id| id == free_id) => return None,
            Some(b) => b.device.clone(),
            None => device.to_string(),
        };
        let waiting = (key.clone(), series_device);
        if self.replaced_ids.get(&waiting) != Some(&free_id) {
            return None;
        }
        self.replaced_ids.remove(&waiting).map(|_| waiting.1)
    }

    fn oom_row(&mut self, c: &EventCols, i: usize) {
        let kind = match c.event_type.value(i) {
            "OOM_TRIGGER" => "trigger",
            "OOM_RECENT_ALLOC" => "recent",
            "OOM_TOP_ALLOC" => "top",
            _ => "other",
        };
        let attr_text = opt_str(c.attr, i).unwrap_or("");
        let items = attr::parse(attr_text);
        let get = |k: &str| items.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let int = |k: &str| get(k).and_then(attr::parse_int);
        self.oom.push(OomRow {
            row_idx: c.row_idx.value(i),
            id: c.id.value(i),
            ts: opt_i64(c.ts, i),
            pid: opt_i64(c.pid, i),
            device: c.device.value(i).to_string(),
            kind,
            func: get("func").map(str::to_string),
            req_size: int("req_size"),
            flag: get("flag").and_then(|v| v.trim().parse::<u64>().ok()),
            ret: int("ret"),
            pool: get("pool").map(str::to_string),
            ptr: get("ptr").and_then(attr::parse_addr),
            size: int("size"),
            alloc_ts: int("timestamp").map(|t| t.saturating_mul(self.ts_scale)),
            step: int("step"),
            kernel: int("kernel"),
            client: int("client"),
            stack_py: opt_str(c.stack_py, i).map(str::to_string),
            stack_c: opt_str(c.stack_c, i).map(str::to_string),
            attr: opt_str(c.attr, i).map(str::to_string),
        });
    }

    fn snapshot_row(&mut self, c: &EventCols, i: usize) {
        let attr_text = opt_str(c.attr, i).unwrap_or("");
        let items = attr::parse(attr_text);
        let get = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| items.iter().find(|(key, _)| key == k).map(|(_, v)| *v))
        };
        let int = |keys: &[&str]| get(keys).and_then(attr::parse_int);
        let float = |keys: &[&str]| get(keys).and_then(|v| v.trim().parse::<f64>().ok());
        let doc_spelling = items
            .iter()
            .any(|(k, _)| *k == "free_mem" || *k == "total_mem");
        let s = &mut self.snaps;
        s.source.append_value(&self.source);
        s.row_idx.append_value(c.row_idx.value(i));
        s.id.append_value(c.id.value(i));
        s.ts.append_option(opt_i64(c.ts, i));
        s.pid.append_option(opt_i64(c.pid, i));
        s.device.append_value(c.device.value(i));
        s.name.append_option(opt_str(c.name, i));
        s.total_mem.append_option(int(&["total_mem", "total"]));
        s.free_mem.append_option(int(&["free_mem", "free"]));
        s.reserved.append_option(int(&["reserved"]));
        s.peak_reserved
            .append_option(int(&["peak_reserved", "max_reserved"]));
        s.allocated.append_option(int(&["allocated"]));
        s.peak_allocated
            .append_option(int(&["peak_allocated", "max_allocated"]));
        s.device_utilization
            .append_option(float(&["device_utilization", "device_rate"]));
        s.pt_utilization
            .append_option(float(&["pt_utilization", "reserved_rate"]));
        s.spelling
            .append_value(if doc_spelling { "doc" } else { "writer" });
        s.attr.append_option(opt_str(c.attr, i));
        s.len += 1;
    }

    /// Blocks finished so far (flushed by the caller to bound memory).
    pub fn take_blocks(&mut self) -> Vec<RecordBatch> {
        let mut batches = std::mem::take(&mut self.full_blocks);
        if self.blocks.len > 0 {
            batches.push(self.blocks.finish());
        }
        batches
    }

    /// Ends the pass: blocks still live become `none` blocks, every open fate is decided.
    pub fn finish(mut self) -> Result<Derived> {
        let mut live: Vec<_> = self.live.drain().collect();
        live.sort_by_key(|(_, v)| v.first().map(|b| b.alloc_row));
        for (key, entries) in live {
            for block in entries {
                let ended = Ended {
                    key: key.clone(),
                    block,
                    free_id: None,
                    free_ts: None,
                    free_row: None,
                    kind: "none",
                    has_malloc: true,
                    end_row: None,
                };
                self.append(ended, Fate::NeverFreed);
            }
        }
        let fates = std::mem::take(&mut self.fates);
        for (ended, fate) in fates.finish() {
            self.append(ended, fate);
        }
        Ok(Derived {
            blocks: self.take_blocks(),
            owner_totals: self.owner_totals.finish(&self.source),
            oom: oom_batch(&self.source, self.oom),
            mem_snapshots: self.snaps.finish(),
            steps: self.steps.finish(),
            curve_staging: self.curve.close()?,
            held_shadow_rows: self.held_shadow_rows,
        })
    }
}

pub struct Derived {
    pub blocks: Vec<RecordBatch>,
    /// Table `owner_totals` ([`OwnerTotals`]).
    pub owner_totals: RecordBatch,
    pub oom: RecordBatch,
    pub mem_snapshots: RecordBatch,
    /// The steps of every (pid, device) ([`crate::derive::steps`]).
    pub steps: Vec<((Option<i64>, String), Vec<crate::derive::steps::Step>)>,
    /// The staging files of `curve` and the rows whose change it must drop ([`crate::derive::curve::finish`]).
    pub curve_staging: crate::derive::curve::CurveFiles,
    pub held_shadow_rows: HashSet<u64>,
}

/// Table `owner_totals`: per (pid, device, pool, owner as owner_peaks names it), the bytes and
/// number of the blocks with an allocation time, and the bytes of those still held at the end
/// (`blocks.end_ts` NULL) — the sums view owner_peaks made over every block per query
/// (tests/oracle/sql/owner_peaks.sql checks them).
#[derive(Default)]
struct OwnerTotals(ByName<OwnerSum>);

#[derive(Default)]
struct OwnerSum {
    total_bytes: i64,
    blocks: i64,
    end_bytes: i64,
}

impl OwnerTotals {
    fn add(&mut self, e: &Ended, fate: Fate) {
        let b = &e.block;
        if b.alloc_ts.is_none() {
            return;
        }
        let (pid, pool, _) = &e.key;
        let size = b.size.unwrap_or(0);
        // blocks.end_ts is NULL for a block held at the end or never ended
        let held = fate.held_at_end() || e.free_ts.is_none();
        self.0
            .with(b.owner_label(pool), (*pid, &b.device, pool), |sum| {
                sum.total_bytes = sum.total_bytes.wrapping_add(size);
                sum.blocks += 1;
                if held {
                    sum.end_bytes = sum.end_bytes.wrapping_add(size);
                }
            });
    }

    /// The table's rows, in no particular order (written through a sort, as `oom` is).
    fn finish(self, source: &str) -> RecordBatch {
        let rows: Vec<_> = self.0.iter().collect();
        let int = |f: fn(&OwnerSum) -> i64| -> ArrayRef {
            Arc::new(
                rows.iter()
                    .map(|r| Some(f(&r.1.value)))
                    .collect::<Int64Array>(),
            )
        };
        let mut columns = named_columns(source, &rows);
        columns.extend([
            int(|s| s.total_bytes),
            int(|s| s.blocks),
            int(|s| s.end_bytes),
        ]);
        RecordBatch::try_new(schema::owner_totals().schema(), columns)
            .expect("the owner_totals columns in the table's order")
    }
}

#[derive(Default)]
struct BlocksBuilder {
    source: StringBuilder,
    pid: Int64Builder,
    device: StringBuilder,
    device_index: Int32Builder,
    pool: StringBuilder,
    ptr: UInt64Builder,
    size: Int64Builder,
    owner: StringBuilder,
    allocation_id: Int64Builder,
    alloc_id: Int64Builder,
    alloc_ts: Int64Builder,
    alloc_row: UInt64Builder,
    free_id: Int64Builder,
    free_ts: Int64Builder,
    free_row: UInt64Builder,
    free_kind: StringBuilder,
    stock: BooleanBuilder,
    stack_py: StringBuilder,
    fate: StringBuilder,
    held_at_end: BooleanBuilder,
    end_ts: Int64Builder,
    end_row: UInt64Builder,
    len: usize,
    /// Bytes of the text appended (stacks, owners): a batch is cut before its strings pass
    /// BLOCK_BATCH_BYTES, however few its rows (a string column cannot pass 2 GiB).
    text_bytes: usize,
}

/// The most text bytes a batch of `blocks` holds.
const BLOCK_BATCH_BYTES: usize = 64 << 20;

impl BlocksBuilder {
    fn append(&mut self, source: &str, e: &Ended, fate: Fate) {
        let (pid, pool, ptr) = &e.key;
        let b = &e.block;
        let held = fate.held_at_end();
        self.source.append_value(source);
        self.pid.append_option(*pid);
        self.device.append_value(&b.device);
        self.device_index.append_option(b.device_index);
        self.pool.append_value(pool);
        self.ptr.append_value(*ptr);
        self.size.append_option(b.size);
        self.owner.append_option(b.owner.as_deref());
        self.allocation_id.append_option(b.allocation_id);
        self.alloc_id
            .append_option(e.has_malloc.then_some(b.alloc_id));
        self.alloc_ts.append_option(b.alloc_ts);
        self.alloc_row
            .append_option(e.has_malloc.then_some(b.alloc_row));
        self.free_id.append_option(e.free_id);
        self.free_ts.append_option(e.free_ts);
        self.free_row.append_option(e.free_row);
        self.free_kind.append_value(e.kind);
        self.stock.append_value(b.stock);
        self.stack_py.append_option(b.stack_py.as_deref());
        self.text_bytes += b.stack_py.as_deref().map_or(0, str::len)
            + b.owner.as_deref().map_or(0, str::len)
            + source.len();
        self.fate.append_value(fate.label());
        self.held_at_end.append_value(held);
        self.end_ts
            .append_option(if held { None } else { e.free_ts });
        self.end_row
            .append_option(if held { None } else { e.end_row });
        self.len += 1;
    }

    fn finish(&mut self) -> RecordBatch {
        self.text_bytes = 0;
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("source", Arc::new(self.source.finish()) as ArrayRef),
            ("pid", Arc::new(self.pid.finish())),
            ("device", Arc::new(self.device.finish())),
            ("device_index", Arc::new(self.device_index.finish())),
            ("pool", Arc::new(self.pool.finish())),
            ("ptr", Arc::new(self.ptr.finish())),
            ("size", Arc::new(self.size.finish())),
            ("owner", Arc::new(self.owner.finish())),
            ("allocation_id", Arc::new(self.allocation_id.finish())),
            ("alloc_id", Arc::new(self.alloc_id.finish())),
            ("alloc_ts", Arc::new(self.alloc_ts.finish())),
            ("alloc_row", Arc::new(self.alloc_row.finish())),
            ("free_id", Arc::new(self.free_id.finish())),
            ("free_ts", Arc::new(self.free_ts.finish())),
            ("free_row", Arc::new(self.free_row.finish())),
            ("free_kind", Arc::new(self.free_kind.finish())),
            ("stock", Arc::new(self.stock.finish())),
            ("stack_py", Arc::new(self.stack_py.finish())),
            ("fate", Arc::new(self.fate.finish())),
            ("held_at_end", Arc::new(self.held_at_end.finish())),
            ("end_ts", Arc::new(self.end_ts.finish())),
            ("end_row", Arc::new(self.end_row.finish())),
        ];
        self.len = 0;
        schema::blocks()
            .batch(columns)
            .expect("every blocks column is given once")
    }
}

struct OomRow {
    row_idx: u64,
    id: i64,
    ts: Option<i64>,
    pid: Option<i64>,
    device: String,
    kind: &'static str,
    func: Option<String>,
    req_size: Option<i64>,
    flag: Option<u64>,
    ret: Option<i64>,
    pool: Option<String>,
    ptr: Option<u64>,
    size: Option<i64>,
    alloc_ts: Option<i64>,
    step: Option<i64>,
    kernel: Option<i64>,
    client: Option<i64>,
    stack_py: Option<String>,
    stack_c: Option<String>,
    attr: Option<String>,
}

/// `oom` rows in canonical order; `nth` counts rows of one kind within each uninterrupted run of
/// that kind in file order (the tool writes one run of RECENT and one of TOP rows per OOM).
fn oom_batch(source: &str, mut rows: Vec<OomRow>) -> RecordBatch {
    let mut ranks = vec![0i64; rows.len()];
    let mut by_file: Vec<usize> = (0..rows.len()).collect();
    by_file.sort_by_key(|&i| rows[i].row_idx);
    let mut prev_kind = "";
    let mut run = 0;
    for &i in &by_file {
        run = if rows[i].kind == prev_kind {
            run + 1
        } else {
            1
        };
        prev_kind = rows[i].kind;
        ranks[i] = run;
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| (rows[i].ts.is_none(), rows[i].ts, rows[i].row_idx));
    let mut b_source = StringBuilder::new();
    let mut row_idx = UInt64Builder::new();
    let mut id = Int64Builder::new();
    let mut ts = Int64Builder::new();
    let mut pid = Int64Builder::new();
    let mut device = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut rank = Int64Builder::new();
    let mut func = StringBuilder::new();
    let mut req_size = Int64Builder::new();
    let mut flag = UInt64Builder::new();
    let mut ret = Int64Builder::new();
    let mut pool = StringBuilder::new();
    let mut ptr = UInt64Builder::new();
    let mut size = Int64Builder::new();
    let mut alloc_ts = Int64Builder::new();
    let mut step = Int64Builder::new();
    let mut kernel = Int64Builder::new();
    let mut client = Int64Builder::new();
    let mut stack_py = StringBuilder::new();
    let mut stack_c = StringBuilder::new();
    let mut attr_b = StringBuilder::new();
    for &i in &order {
        let r = &mut rows[i];
        b_source.append_value(source);
        row_idx.append_value(r.row_idx);
        id.append_value(r.id);
        ts.append_option(r.ts);
        pid.append_option(r.pid);
        device.append_value(&r.device);
        kind.append_value(r.kind);
        rank.append_value(ranks[i]);
        func.append_option(r.func.take());
        req_size.append_option(r.req_size);
        flag.append_option(r.flag);
        ret.append_option(r.ret);
        pool.append_option(r.pool.take());
        ptr.append_option(r.ptr);
        size.append_option(r.size);
        alloc_ts.append_option(r.alloc_ts);
        step.append_option(r.step);
        kernel.append_option(r.kernel);
        client.append_option(r.client);
        stack_py.append_option(r.stack_py.take());
        stack_c.append_option(r.stack_c.take());
        attr_b.append_option(r.attr.take());
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("source", Arc::new(b_source.finish()) as ArrayRef),
        ("row_idx", Arc::new(row_idx.finish())),
        ("id", Arc::new(id.finish())),
        ("ts", Arc::new(ts.finish())),
        ("pid", Arc::new(pid.finish())),
        ("device", Arc::new(device.finish())),
        ("kind", Arc::new(kind.finish())),
        ("nth", Arc::new(rank.finish())),
        ("func", Arc::new(func.finish())),
        ("req_size", Arc::new(req_size.finish())),
        ("flag", Arc::new(flag.finish())),
        ("ret", Arc::new(ret.finish())),
        ("pool", Arc::new(pool.finish())),
        ("ptr", Arc::new(ptr.finish())),
        ("size", Arc::new(size.finish())),
        ("alloc_ts", Arc::new(alloc_ts.finish())),
        ("step", Arc::new(step.finish())),
        ("kernel", Arc::new(kernel.finish())),
        ("client", Arc::new(client.finish())),
        ("stack_py", Arc::new(stack_py.finish())),
        ("stack_c", Arc::new(stack_c.finish())),
        ("attr", Arc::new(attr_b.finish())),
    ];
    schema::oom()
        .batch(columns)
        .expect("every oom column is given once")
}

#[derive(Default)]
struct SnapshotsBuilder {
    source: StringBuilder,
    row_idx: UInt64Builder,
    id: Int64Builder,
    ts: Int64Builder,
    pid: Int64Builder,
    device: StringBuilder,
    name: StringBuilder,
    total_mem: Int64Builder,
    free_mem: Int64Builder,
    reserved: Int64Builder,
    peak_reserved: Int64Builder,
    allocated: Int64Builder,
    peak_allocated: Int64Builder,
    device_utilization: Float64Builder,
    pt_utilization: Float64Builder,
    spelling: StringBuilder,
    attr: StringBuilder,
    len: usize,
}

impl SnapshotsBuilder {
    fn finish(&mut self) -> RecordBatch {
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("source", Arc::new(self.source.finish()) as ArrayRef),
            ("row_idx", Arc::new(self.row_idx.finish())),
            ("id", Arc::new(self.id.finish())),
            ("ts", Arc::new(self.ts.finish())),
            ("pid", Arc::new(self.pid.finish())),
            ("device", Arc::new(self.device.finish())),
            ("name", Arc::new(self.name.finish())),
            ("total_mem", Arc::new(self.total_mem.finish())),
            ("free_mem", Arc::new(self.free_mem.finish())),
            ("reserved", Arc::new(self.reserved.finish())),
            ("peak_reserved", Arc::new(self.peak_reserved.finish())),
            ("allocated", Arc::new(self.allocated.finish())),
            ("peak_allocated", Arc::new(self.peak_allocated.finish())),
            (
                "device_utilization",
                Arc::new(self.device_utilization.finish()),
            ),
            ("pt_utilization", Arc::new(self.pt_utilization.finish())),
            ("spelling", Arc::new(self.spelling.finish())),
            ("attr", Arc::new(self.attr.finish())),
        ];
        self.len = 0;
        schema::mem_snapshots()
            .batch(columns)
            .expect("every mem_snapshots column is given once")
    }
}
