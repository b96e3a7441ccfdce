//! What the snapshot analyses need from the trace, computed once at ingest while the trace rows
//! stream by, so that no analysis windows over the whole trace (docs/performance.md, "What is
//! computed once, at ingest"). A 1.17 GB pickle holds 16.9 M trace entries: `snap_peak` as a
//! window over all of them took 39 s in a release build; from these tables it reads a row per
//! device.
//!
//! Each rule is the one the SQL of `crates/snapshot/sql` applied per query, and is kept in
//! `tests/oracle/sql/snap_*.sql` (the views before this derivation), against which
//! `tests/it/snapshot_derived.rs` checks every analysis on every snapshot fixture:
//!
//! * per trace row, the columns of snap_traces that snap_timeline reads (`active_delta`,
//!   `active_change`, `reserved_delta`, `reserved_change`, `segment_growth_bytes`): what the entry
//!   changes and the running sums since the window started. The levels before the window are
//!   known only at its end, so the rows carry sums from zero and
//!   [`levels`](crate::schema::levels) the starts;
//! * [`lifetimes`] (`snap_lifetimes`): each allocation from its alloc entry to its free entry
//!   (MemoryViz's elements), written in batches as the allocations end;
//! * [`levels`](crate::schema::levels) (`snap_trace_levels`): per device, the levels before the
//!   window, the peaks (first entry reaching them), the ends, the reference's segment growth,
//!   entry counts;
//! * [`oom_allocs`](crate::schema::oom_allocs) (`snap_oom_allocs`): the alloc entries within 50
//!   entries of each oom entry.
//!
//! Memory held: the allocations and segments live at the current entry (an address freed is
//! forgotten) and 50 entries per device, never the trace.
//!
//! This module computes the rows; the tables' definitions are in [`crate::schema`], with every
//! other table's.

use std::collections::VecDeque;

use datafusion::arrow::record_batch::RecordBatch;
use foldhash::HashMap;

use memq_core::catalog::TableDef;
use memq_core::error::{MemqError, Result};

use crate::columns::{build, ints, texts, uints, BATCH_ROWS};
use crate::rows::{BlockRow, SegmentRow, TraceRow};
use crate::schema::{lifetimes, LEVELS, OOM_ALLOCS};

/// How many entries before and after an oom entry its context spans (snap_oom).
const OOM_CONTEXT: i64 = 50;

/// The derived columns of one trace row.
#[derive(Clone, Copy, Default)]
pub struct RowLevels {
    pub active_delta: i64,
    pub active_change: i64,
    pub reserved_delta: i64,
    pub reserved_change: i64,
    pub growth: Option<i64>,
}

/// The derived columns of the rows of a trace batch, beside [`crate::trace_columns::TraceColumns`].
#[derive(Default)]
pub struct Levels {
    pub rows: Vec<RowLevels>,
}

/// An alloc entry whose allocation has not ended yet.
#[derive(Clone, Copy)]
struct Open {
    seq: i64,
    size: Option<i64>,
    time: Option<i64>,
    stack: Option<i64>,
    stream: Option<i64>,
}

/// The highest value of a running sum and the first entry reaching it.
#[derive(Clone, Copy)]
struct Max {
    value: i64,
    seq: i64,
    time: Option<i64>,
}

fn raise(max: &mut Option<Max>, value: i64, seq: i64, time: Option<i64>) {
    if max.is_none_or(|m| value > m.value) {
        *max = Some(Max { value, seq, time });
    }
}

#[derive(Default)]
struct Device {
    entries: i64,
    last_seq: i64,
    last_time: Option<i64>,
    ooms: i64,
    active: i64,
    reserved: i64,
    growth: Option<i64>,
    active_max: Option<Max>,
    reserved_max: Option<Max>,
    /// Over segment entries: the highest growth, and the first entry with none (which SQL's
    /// `ORDER BY growth DESC` puts first).
    growth_max: Option<Max>,
    growth_null_seq: Option<i64>,
    first_segment_seq: Option<i64>,
    /// The earliest entry with a time: (time, seq, active before it, reserved before it), as
    /// running sums.
    first_timed: Option<(i64, i64, i64, i64)>,
    /// Block addresses whose last alloc/free_completed/free entry is an alloc.
    open: HashMap<u64, Open>,
    /// Segment bases whose last segment_alloc/segment_free is a segment_alloc: its size.
    segments: HashMap<u64, Option<i64>>,
    /// Bytes freed in the window by allocations made before it (frees of addresses no alloc of
    /// the window holds).
    freed_before: i64,
    /// Reserved before the window, from the trace: segments it frees without allocating them,
    /// minus what it maps, plus what it unmaps.
    reserved_before: i64,
    /// Alloc entries of the last [`OOM_CONTEXT`] entries, and the oom entries still taking the
    /// allocs that follow them.
    recent_allocs: VecDeque<(i64, Option<i64>, Option<i64>)>,
    open_ooms: Vec<i64>,
}

/// One row of snap_lifetimes.
struct Life {
    device: Option<i64>,
    addr: Option<u64>,
    size: Option<i64>,
    before_window: bool,
    alloc: Option<Open>,
    free: Option<(i64, Option<i64>, Option<i64>)>,
    end_kind: &'static str,
    /// The final block it is (live rows).
    block: Option<(Option<i64>, Option<String>, i64)>,
    stack: Option<i64>,
    stream: Option<i64>,
}

/// A row of snap_oom_allocs: device, oom seq, alloc seq, size, stack.
type OomAlloc = (i64, i64, i64, Option<i64>, Option<i64>);

/// The rows of the small derived tables, written with the other tables at the end.
#[derive(Default)]
pub struct Finished {
    levels: Vec<LevelRow>,
    ooms: Vec<OomAlloc>,
}

struct LevelRow {
    device: i64,
    d: Device,
    active_start: i64,
    reserved_start: i64,
}

/// The derivation of one snapshot's trace (see the module docs).
pub struct Derive<'e> {
    snapshot: String,
    devices: Vec<Device>,
    lives: Vec<Life>,
    ooms: Vec<OomAlloc>,
    out: Option<Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>>,
    /// The error `out` returned: the rows cannot be written, reading stops.
    pub failed: Option<MemqError>,
}

impl<'e> Derive<'e> {
    pub fn new(snapshot: &str) -> Self {
        Derive {
            snapshot: snapshot.to_string(),
            devices: Vec::new(),
            lives: Vec::new(),
            ooms: Vec::new(),
            out: None,
            failed: None,
        }
    }

    /// Where the batches of snap_lifetimes go (without, they are dropped).
    pub fn lifetimes_to(&mut self, out: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>) {
        self.out = Some(out);
    }

    /// Takes the next trace row (rows come in device, seq order); returns its derived columns.
    pub fn see(&mut self, row: &TraceRow) -> Result<RowLevels> {
        let index = row.device as usize;
        if self.devices.len() <= index {
            self.devices.resize_with(index + 1, Device::default);
        }
        let d = &mut self.devices[index];
        let (device, seq) = (i64::from(row.device), i64::from(row.seq));
        d.entries += 1;
        d.last_seq = seq;
        if let Some(time) = row.time_us {
            d.last_time = Some(d.last_time.map_or(time, |t| t.max(time)));
        }
        let size = row.size;
        let (mut active_delta, mut reserved_delta, mut growth_delta) = (0, 0, Some(0));
        let action = row.action.as_deref();
        let mut life = None;
        match (action, row.addr) {
            (Some("alloc"), Some(addr)) => {
                active_delta = size.unwrap_or(0);
                let open = Open {
                    seq,
                    size,
                    time: row.time_us,
                    stack: row.stack_id,
                    stream: row.stream,
                };
                // An alloc on an address still held: the older allocation stays unended.
                if let Some(older) = d.open.insert(addr, open) {
                    life = Some(Life {
                        device: Some(device),
                        addr: Some(addr),
                        size: older.size,
                        before_window: false,
                        alloc: Some(older),
                        free: None,
                        end_kind: "unended",
                        block: None,
                        stack: older.stack,
                        stream: older.stream,
                    });
                }
            }
            (Some("free_completed" | "free"), Some(addr)) => {
                let free = Some((seq, row.time_us, row.stack_id));
                life = Some(match d.open.remove(&addr) {
                    Some(alloc) => {
                        active_delta = alloc.size.map_or(0, |s| s.wrapping_neg());
                        Life {
                            device: Some(device),
                            addr: Some(addr),
                            size: alloc.size,
                            before_window: false,
                            alloc: Some(alloc),
                            free,
                            end_kind: "freed",
                            block: None,
                            stack: alloc.stack,
                            stream: alloc.stream,
                        }
                    }
                    None => {
                        active_delta = size.map_or(0, |s| s.wrapping_neg());
                        d.freed_before = d.freed_before.wrapping_add(size.unwrap_or(0));
                        Life {
                            device: Some(device),
                            addr: Some(addr),
                            size,
                            before_window: true,
                            alloc: None,
                            free,
                            end_kind: "freed",
                            block: None,
                            stack: None,
                            stream: row.stream,
                        }
                    }
                });
            }
            (Some("segment_alloc"), Some(addr)) => {
                reserved_delta = size.unwrap_or(0);
                d.segments.insert(addr, size);
            }
            (Some("segment_free"), Some(addr)) => match d.segments.remove(&addr) {
                Some(allocated) => reserved_delta = allocated.map_or(0, |s| s.wrapping_neg()),
                None => {
                    reserved_delta = size.map_or(0, |s| s.wrapping_neg());
                    d.reserved_before = d.reserved_before.wrapping_add(size.unwrap_or(0));
                }
            },
            _ => {}
        }
        match action {
            Some("segment_map") => {
                reserved_delta = size.unwrap_or(0);
                d.reserved_before = d.reserved_before.wrapping_sub(size.unwrap_or(0));
            }
            Some("segment_unmap") => {
                reserved_delta = size.map_or(0, |s| s.wrapping_neg());
                d.reserved_before = d.reserved_before.wrapping_add(size.unwrap_or(0));
            }
            Some("oom") => d.ooms += 1,
            _ => {}
        }
        let segment_entry = matches!(
            action,
            Some("segment_alloc" | "segment_map" | "segment_free" | "segment_unmap")
        );
        if segment_entry {
            growth_delta = match action {
                Some("segment_alloc" | "segment_map") => size,
                _ => size.map(i64::wrapping_neg),
            };
        }
        if let Some(time) = row.time_us {
            if d.first_timed
                .is_none_or(|(t, s, _, _)| (time, seq) < (t, s))
            {
                d.first_timed = Some((time, seq, d.active, d.reserved));
            }
        }
        d.active = d.active.wrapping_add(active_delta);
        d.reserved = d.reserved.wrapping_add(reserved_delta);
        if let Some(g) = growth_delta {
            d.growth = Some(d.growth.unwrap_or(0).wrapping_add(g));
        }
        raise(&mut d.active_max, d.active, seq, row.time_us);
        raise(&mut d.reserved_max, d.reserved, seq, None);
        if segment_entry {
            d.first_segment_seq.get_or_insert(seq);
            match d.growth {
                Some(g) => raise(&mut d.growth_max, g, seq, None),
                None => {
                    d.growth_null_seq.get_or_insert(seq);
                }
            }
        }
        // The context of oom entries: allocs within OOM_CONTEXT entries before and after.
        d.open_ooms.retain(|&oom| seq <= oom + OOM_CONTEXT);
        while d
            .recent_allocs
            .front()
            .is_some_and(|&(s, _, _)| s < seq - OOM_CONTEXT)
        {
            d.recent_allocs.pop_front();
        }
        match action {
            Some("alloc") => {
                for &oom in &d.open_ooms {
                    self.ooms.push((device, oom, seq, size, row.stack_id));
                }
                d.recent_allocs.push_back((seq, size, row.stack_id));
            }
            Some("oom") => {
                for &(s, size, stack) in &d.recent_allocs {
                    self.ooms.push((device, seq, s, size, stack));
                }
                d.open_ooms.push(seq);
            }
            _ => {}
        }
        let levels = RowLevels {
            active_delta,
            active_change: d.active,
            reserved_delta,
            reserved_change: d.reserved,
            growth: d.growth,
        };
        if let Some(life) = life {
            self.lives.push(life);
            if self.lives.len() >= BATCH_ROWS {
                self.flush()?;
            }
        }
        Ok(levels)
    }

    fn flush(&mut self) -> Result<()> {
        let lives = std::mem::take(&mut self.lives);
        if lives.is_empty() {
            return Ok(());
        }
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out(lifetime_batch(&self.snapshot, &lives)?) {
                let message = e.to_string();
                self.failed = Some(e);
                return Err(MemqError::Query(message));
            }
        }
        Ok(())
    }

    /// The trace has ended: the allocations still open and those of the final state that no
    /// alloc of the window made go to snap_lifetimes; returns the rows of the small tables.
    pub fn finish(&mut self, segments: &[SegmentRow], blocks: &[BlockRow]) -> Result<Finished> {
        let stream_of: HashMap<i64, Option<i64>> =
            segments.iter().map(|s| (s.segment_id, s.stream)).collect();
        let live = |b: &&BlockRow| {
            matches!(
                b.state.as_deref(),
                Some("active_allocated" | "active_pending_free")
            )
        };
        // The final live blocks by (device, address): the blocks a live allocation is.
        let mut by_key: HashMap<(i64, u64), Vec<&BlockRow>> = HashMap::default();
        for b in blocks.iter().filter(live) {
            if let (Some(device), Some(address)) = (b.device, b.address) {
                by_key.entry((device, address)).or_default().push(b);
            }
        }
        let held = |devices: &[Device], device: Option<i64>, address: Option<u64>| {
            let (Some(device), Some(address)) = (device, address) else {
                return false;
            };
            usize::try_from(device)
                .ok()
                .and_then(|i| devices.get(i))
                .is_some_and(|d| d.open.contains_key(&address))
        };
        // Live rows, each once per final block it is (none: one row without a block); returns
        // how many rows it made.
        let push_live = |lives: &mut Vec<Life>, mut life: Life| -> i64 {
            let key = life.device.zip(life.addr);
            match key.and_then(|k| by_key.get(&k)) {
                Some(found) => {
                    for b in found {
                        lives.push(Life {
                            block: Some((b.size, b.state.clone(), b.block_id)),
                            ..life.clone_base()
                        });
                    }
                    found.len() as i64
                }
                None => {
                    life.block = None;
                    lives.push(life);
                    1
                }
            }
        };
        // The devices are taken out so that rows can be flushed as they fill (a trace can end
        // with millions of allocations open).
        let devices = std::mem::take(&mut self.devices);
        for (index, d) in devices.iter().enumerate() {
            let mut open: Vec<_> = d.open.iter().collect();
            open.sort_by_key(|(_, o)| o.seq);
            for (&addr, alloc) in open {
                push_live(
                    &mut self.lives,
                    Life {
                        device: Some(index as i64),
                        addr: Some(addr),
                        size: alloc.size,
                        before_window: false,
                        alloc: Some(*alloc),
                        free: None,
                        end_kind: "live",
                        block: None,
                        stack: alloc.stack,
                        stream: alloc.stream,
                    },
                );
                if self.lives.len() >= BATCH_ROWS {
                    self.flush()?;
                }
            }
        }
        // Active bytes before the window: Σ size of the rows made before it, as many times as
        // the rows are (a final block sharing its address with another is two rows, as in SQL).
        let mut live_before: HashMap<i64, i64> = HashMap::default();
        for b in blocks.iter().filter(live) {
            if held(&devices, b.device, b.address) {
                continue;
            }
            let rows = push_live(
                &mut self.lives,
                Life {
                    device: b.device,
                    addr: b.address,
                    size: b.requested_size,
                    before_window: true,
                    alloc: None,
                    free: None,
                    end_kind: "live",
                    block: None,
                    stack: b.stack_id,
                    stream: stream_of.get(&b.segment_id).copied().flatten(),
                },
            );
            if let (Some(device), Some(size)) = (b.device, b.requested_size) {
                let sum = live_before.entry(device).or_default();
                *sum = sum.wrapping_add(size.wrapping_mul(rows));
            }
            if self.lives.len() >= BATCH_ROWS {
                self.flush()?;
            }
        }
        self.flush()?;
        // Reserved before the window from the final segments: the expandable ones whole (the
        // trace's map/unmap were taken off as they went by), the others when no segment_alloc
        // of the window holds them.
        let mut segments_before: HashMap<i64, i64> = HashMap::default();
        for s in segments {
            let expandable = s.is_expandable.unwrap_or(false);
            if !expandable && held_segment(&devices, s.device, s.address) {
                continue;
            }
            if let (Some(device), Some(size)) = (s.device, s.total_size) {
                let sum = segments_before.entry(device).or_default();
                *sum = sum.wrapping_add(size);
            }
        }
        let mut levels = Vec::new();
        for (index, d) in devices.into_iter().enumerate() {
            if d.entries == 0 {
                continue;
            }
            let device = index as i64;
            let active_start = d
                .freed_before
                .wrapping_add(live_before.get(&device).copied().unwrap_or(0));
            let reserved_start = d
                .reserved_before
                .wrapping_add(segments_before.get(&device).copied().unwrap_or(0));
            levels.push(LevelRow {
                device,
                d,
                active_start,
                reserved_start,
            });
        }
        Ok(Finished {
            levels,
            ooms: std::mem::take(&mut self.ooms),
        })
    }
}

fn held_segment(devices: &[Device], device: Option<i64>, address: Option<u64>) -> bool {
    let (Some(device), Some(address)) = (device, address) else {
        return false;
    };
    usize::try_from(device)
        .ok()
        .and_then(|i| devices.get(i))
        .is_some_and(|d| d.segments.contains_key(&address))
}

impl Life {
    fn clone_base(&self) -> Life {
        Life {
            device: self.device,
            addr: self.addr,
            size: self.size,
            before_window: self.before_window,
            alloc: self.alloc,
            free: self.free,
            end_kind: self.end_kind,
            block: None,
            stack: self.stack,
            stream: self.stream,
        }
    }
}

fn lifetime_batch(snapshot: &str, r: &[Life]) -> Result<RecordBatch> {
    let table = lifetimes();
    let alloc_seq = |l: &Life| l.alloc.map(|a| a.seq);
    let free_seq = |l: &Life| l.free.map(|f| f.0);
    let alloc_time = |l: &Life| l.alloc.and_then(|a| a.time);
    let free_time = |l: &Life| l.free.and_then(|f| f.1);
    let column = |name: &str| match name {
        "device" => ints(r.iter().map(|l| l.device)),
        "addr" => uints(r.iter().map(|l| l.addr)),
        "size" => ints(r.iter().map(|l| l.size)),
        "block_size" => ints(r.iter().map(|l| l.block.as_ref().and_then(|b| b.0))),
        "origin" => texts(r.iter().map(|l| {
            Some(if l.before_window {
                "before_window"
            } else {
                "in_window"
            })
        })),
        "alloc_seq" => ints(r.iter().map(alloc_seq)),
        "free_seq" => ints(r.iter().map(free_seq)),
        "end_kind" => texts(r.iter().map(|l| Some(l.end_kind))),
        "state_at_end" => texts(
            r.iter()
                .map(|l| l.block.as_ref().and_then(|b| b.1.as_deref())),
        ),
        "block_id" => ints(r.iter().map(|l| l.block.as_ref().map(|b| b.2))),
        "alloc_time_us" => ints(r.iter().map(alloc_time)),
        "free_time_us" => ints(r.iter().map(free_time)),
        "lifetime_entries" => ints(r.iter().map(|l| {
            free_seq(l)
                .zip(alloc_seq(l))
                .map(|(f, a)| f.wrapping_sub(a))
        })),
        "lifetime_us" => ints(r.iter().map(|l| {
            free_time(l)
                .zip(alloc_time(l))
                .map(|(f, a)| f.wrapping_sub(a))
        })),
        "stack_id" => ints(r.iter().map(|l| l.stack)),
        "free_stack_id" => ints(r.iter().map(|l| l.free.and_then(|f| f.2))),
        "stream" => ints(r.iter().map(|l| l.stream)),
        other => unreachable!("snap_lifetimes has no column {other}"),
    };
    build(&table, snapshot, r.len(), column)
}

/// The batches of snap_trace_levels or snap_oom_allocs.
pub fn table_batches(
    snapshot: &str,
    finished: &Finished,
    table: &TableDef,
    mut emit: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    if table.name == LEVELS && !finished.levels.is_empty() {
        let r = &finished.levels;
        let start = |l: &LevelRow, run: i64| l.active_start.wrapping_add(run);
        let reserved = |l: &LevelRow, run: i64| l.reserved_start.wrapping_add(run);
        let column = |name: &str| match name {
            "device" => ints(r.iter().map(|l| Some(l.device))),
            "entries" => ints(r.iter().map(|l| Some(l.d.entries))),
            "last_seq" => ints(r.iter().map(|l| Some(l.d.last_seq))),
            "last_time_us" => ints(r.iter().map(|l| l.d.last_time)),
            "oom_count" => ints(r.iter().map(|l| Some(l.d.ooms))),
            "active_start" => ints(r.iter().map(|l| Some(l.active_start))),
            "active_max" => ints(r.iter().map(|l| l.d.active_max.map(|m| start(l, m.value)))),
            "active_max_seq" => ints(r.iter().map(|l| l.d.active_max.map(|m| m.seq))),
            "active_max_time_us" => ints(r.iter().map(|l| l.d.active_max.and_then(|m| m.time))),
            "active_end" => ints(r.iter().map(|l| Some(start(l, l.d.active)))),
            "reserved_start" => ints(r.iter().map(|l| Some(l.reserved_start))),
            "reserved_max" => ints(
                r.iter()
                    .map(|l| l.d.reserved_max.map(|m| reserved(l, m.value))),
            ),
            "reserved_max_seq" => ints(r.iter().map(|l| l.d.reserved_max.map(|m| m.seq))),
            "reserved_end" => ints(r.iter().map(|l| Some(reserved(l, l.d.reserved)))),
            "growth_max" => ints(r.iter().map(|l| l.d.growth_max.map(|m| m.value))),
            "growth_max_seq" => ints(
                r.iter()
                    .map(|l| l.d.growth_null_seq.or(l.d.growth_max.map(|m| m.seq))),
            ),
            "first_segment_seq" => ints(r.iter().map(|l| l.d.first_segment_seq)),
            "timed_active_before" => ints(
                r.iter()
                    .map(|l| l.d.first_timed.map(|(_, _, a, _)| start(l, a))),
            ),
            "timed_reserved_before" => ints(
                r.iter()
                    .map(|l| l.d.first_timed.map(|(_, _, _, s)| reserved(l, s))),
            ),
            other => unreachable!("snap_trace_levels has no column {other}"),
        };
        emit(build(table, snapshot, r.len(), column)?)?;
    }
    if table.name == OOM_ALLOCS && !finished.ooms.is_empty() {
        let mut r = finished.ooms.clone();
        r.sort_by_key(|&(device, oom, seq, _, _)| (device, oom, seq));
        for chunk in r.chunks(BATCH_ROWS) {
            let column = |name: &str| match name {
                "device" => ints(chunk.iter().map(|o| Some(o.0))),
                "oom_seq" => ints(chunk.iter().map(|o| Some(o.1))),
                "seq" => ints(chunk.iter().map(|o| Some(o.2))),
                "size" => ints(chunk.iter().map(|o| o.3)),
                "stack_id" => ints(chunk.iter().map(|o| o.4)),
                other => unreachable!("snap_oom_allocs has no column {other}"),
            };
            emit(build(table, snapshot, chunk.len(), column)?)?;
        }
    }
    Ok(())
}

/// The derived columns of rows `range` of a trace batch.
pub fn trace_column(
    levels: &Levels,
    range: std::ops::Range<usize>,
    name: &str,
) -> Option<datafusion::arrow::array::ArrayRef> {
    let rows = &levels.rows[range];
    Some(match name {
        "active_delta" => ints(rows.iter().map(|l| Some(l.active_delta))),
        "active_change" => ints(rows.iter().map(|l| Some(l.active_change))),
        "reserved_delta" => ints(rows.iter().map(|l| Some(l.reserved_delta))),
        "reserved_change" => ints(rows.iter().map(|l| Some(l.reserved_change))),
        "segment_growth_bytes" => ints(rows.iter().map(|l| l.growth)),
        _ => return None,
    })
}
