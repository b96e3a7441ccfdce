//! Walks a decoded snapshot (docs/formats/snapshot.md §1) into the rows of the snap_* tables.
//!
//! Accepted: a dict or a list (segments only) at the top, any key order, missing optional keys,
//! unknown keys (kept as JSON), `device_free` instead of `addr` on `oom`, dict or text frames,
//! both pending-free spellings, legacy blocks with `history`. Anything malformed (a segment that
//! is not a dict, a size that is not an int) is recorded as a warning row in snap_info, never
//! silently skipped. A pickle that is no snapshot at all (a list without segment dicts, a dict
//! with neither `segments` nor `device_traces`, `segments` of the wrong type) is refused. A dict
//! or list reached twice through the memo would repeat its rows, so it
//! is refused: the number of rows stays bounded by the size of the file.

use std::path::Path;

use memq_core::error::{Location, MemqError, Result};

use crate::frames::Stacks;
use crate::json::{BudgetExceeded, Json};
use crate::traces::{TraceColumns, TraceStream, NO_FRAMES};
use memq_pickle::value::{a, Arena, ObjId, Value};
use memq_pickle::Decoded;

/// Most warning rows kept per snapshot; the rest are counted in one last row.
const MAX_WARNINGS: usize = 1000;

#[derive(Debug, Default)]
pub struct SegmentRow {
    pub segment_id: i64,
    pub device: Option<i64>,
    pub address: Option<u64>,
    pub total_size: Option<i64>,
    pub allocated_size: Option<i64>,
    pub active_size: Option<i64>,
    pub requested_size: Option<i64>,
    pub stream: Option<i64>,
    pub segment_type: Option<String>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub is_expandable: Option<bool>,
    pub stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

#[derive(Debug, Default)]
pub struct BlockRow {
    pub block_id: i64,
    pub segment_id: i64,
    pub device: Option<i64>,
    pub address: Option<u64>,
    pub address_derived: bool,
    pub offset_in_segment: Option<i64>,
    pub size: Option<i64>,
    pub requested_size: Option<i64>,
    pub state: Option<String>,
    pub stack_id: Option<i64>,
    /// From the trace: the alloc entry that made the block (its seq and user metadata).
    pub alloc_seq: Option<i64>,
    pub user_metadata: Option<String>,
    pub extra_json: Option<String>,
}

#[derive(Debug, Default)]
pub struct TraceRow {
    pub device: i64,
    pub seq: i64,
    pub action: Option<String>,
    pub addr: Option<u64>,
    pub device_free: Option<i64>,
    pub size: Option<i64>,
    pub stream: Option<i64>,
    pub time_us: Option<i64>,
    pub compile_context: Option<String>,
    pub user_metadata: Option<String>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub stack_id: Option<i64>,
    pub forward_stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

#[derive(Debug)]
pub struct InfoRow {
    pub section: &'static str,
    pub item: Option<i64>,
    pub key: String,
    pub value: Option<String>,
    pub value_type: &'static str,
}

/// The rows of every snapshot table; frame text borrows from the decoded pickle.
pub struct Rows<'a> {
    pub segments: Vec<SegmentRow>,
    pub blocks: Vec<BlockRow>,
    pub traces: TraceColumns,
    pub stacks: Stacks<'a>,
    pub info: Vec<InfoRow>,
}

/// Turns a decoded snapshot into rows. `file_bytes` is the size of the pickle. `stream` holds
/// what the decoder hook took (crate::traces); the result is an error when the tree does not
/// show those lists where they were taken (decode again without the hook).
pub fn rows<'a>(
    path: &'a Path,
    decoded: &'a Decoded<'_>,
    file_bytes: usize,
    stream: Option<TraceStream>,
) -> Result<Rows<'a>> {
    let arena = &decoded.arena;
    // Object ids and stack ids are kept as u32 in the per-object tables.
    if arena.len() >= u32::MAX as usize {
        return Err(MemqError::input(
            path,
            Location::None,
            format!("holds {} objects; memq reads at most 2^32 - 2", arena.len()),
        ));
    }
    let mut walker = Walker {
        path,
        arena,
        // Plenty for any real snapshot's JSON cells, far too little for an exponential one.
        json: Json::with_budget(file_bytes.saturating_mul(16).max(64 << 20)),
        rows: Rows {
            segments: Vec::new(),
            blocks: Vec::new(),
            traces: TraceColumns::new(),
            stacks: Stacks::new(arena),
            info: Vec::new(),
        },
        claimed: vec![false; arena.len()],
        stream: None,
        problems: Vec::new(),
        warnings: decoded
            .warnings
            .iter()
            .map(|w| ("pickle".to_string(), w.clone()))
            .collect(),
    };
    if let Some(mut stream) = stream {
        std::mem::swap(&mut walker.rows.traces, &mut stream.columns);
        walker.stream = Some(stream);
    }
    walker.meta("protocol", decoded.protocol.to_string(), "int");
    walker.meta("file_bytes", file_bytes.to_string(), "int");
    walker.root(decoded.root)?;
    walker.finish_warnings();
    Ok(walker.rows)
}

struct Walker<'a> {
    path: &'a Path,
    arena: &'a Arena<'a>,
    json: Json,
    rows: Rows<'a>,
    /// Per object: it is a row dict or row list already read.
    claimed: Vec<bool>,
    /// The lists the decoder hook took (their rows are in `rows.traces` already).
    stream: Option<TraceStream>,
    /// Problems of the dict being read, given their place when it is done.
    problems: Vec<String>,
    /// (place, message) of every problem.
    warnings: Vec<(String, String)>,
}

impl<'a> Walker<'a> {
    fn root(&mut self, root: Value) -> Result<()> {
        let arena = self.arena;
        if let Some(items) = arena.dict(root) {
            return self.snapshot_dict(root, items);
        }
        if let (Some(segments), "list") = (arena.sequence(root), arena.type_name(root)) {
            self.require_segment_dicts("the top-level list", root, segments)?;
            self.meta("top_level", "list".to_string(), "str");
            return self.segment_list(segments);
        }
        let offset = match root {
            Value::Obj(id) => arena.offset(id),
            _ => 0,
        };
        Err(MemqError::input(
            self.path,
            Location::ByteOffset(offset),
            format!(
                "the pickle holds {}, not a snapshot dict or a list of segments",
                a(arena.type_name(root))
            ),
        ))
    }

    /// The top-level dict, whatever its key order.
    fn snapshot_dict(&mut self, root: Value, items: &'a [(Value, Value)]) -> Result<()> {
        self.meta("top_level", "dict".to_string(), "str");
        let keys = items
            .iter()
            .map(|&(key, _)| self.key_text(key))
            .collect::<Result<Vec<_>>>()?;
        let keys = serde_json::to_string(&keys).unwrap_or_default();
        self.meta("keys", keys.clone(), "list");
        let has = |name: &str| {
            items
                .iter()
                .any(|&(key, _)| self.arena.str(key) == Some(name))
        };
        if !has("segments") && !has("device_traces") {
            return Err(self.not_a_snapshot(
                self.offset_of(root),
                format!("the pickle holds a dict with neither segments nor device_traces (keys: {keys})"),
            ));
        }
        let (mut segments, mut traces) = (None, None);
        for &(key, value) in items {
            match self.arena.str(key) {
                Some("segments") => {
                    self.require_list("segments", value)?;
                    if let Some(list) = self.arena.sequence(value) {
                        self.require_segment_dicts("segments", value, list)?;
                    }
                    segments = Some(value)
                }
                Some("device_traces") => {
                    self.require_list("device_traces", value)?;
                    traces = Some(value)
                }
                Some("allocator_settings") => self.settings(value)?,
                Some("external_annotations") => self.annotations(value)?,
                _ => {
                    let key = self.key_text(key)?;
                    self.info("top_level", None, key, value)?;
                }
            }
        }
        // Segments first, then traces: the order the reference numbers stacks in.
        match segments {
            Some(segments) => self.segments(segments)?,
            None => self.warn("snapshot", "has no segments key"),
        }
        match traces {
            Some(traces) => self.traces(traces)?,
            None => self.warn("snapshot", "has no device_traces key"),
        }
        self.trace_facts();
        Ok(())
    }

    /// What the trace tells beyond its rows (docs/formats/snapshot.md §6.2): each live block
    /// gets the alloc entry that made it (seq, `user_metadata` set with
    /// `_set_memory_metadata`), and each device's trace is checked for signs that its ring
    /// buffer wrapped (frees of addresses the trace never allocated, a single-entry trace):
    /// such a device gets rows in snap_info section `trace` (entries, the count of those
    /// addresses, wrapped = true); a device whose trace shows no sign gets none.
    fn trace_facts(&mut self) {
        use foldhash::{HashMap, HashSet};
        use std::collections::BTreeMap;
        // (device, address) → the latest alloc entry still holding it (u32::MAX once freed):
        // every address the trace allocated is a key.
        const FREED: u32 = u32::MAX;
        let mut holder: HashMap<(i64, u64), u32> = HashMap::default();
        // device → (entries, addresses freed without an earlier alloc)
        let mut devices: BTreeMap<i64, (i64, HashSet<u64>)> = BTreeMap::new();
        let traces = &self.rows.traces;
        // Action ids seen: arena ids repeat, so each is read once.
        let mut kinds: HashMap<u32, u8> = HashMap::default();
        for index in 0..traces.len() {
            let t_device = i64::from(traces.device[index]);
            let device = devices.entry(t_device).or_default();
            device.0 += 1;
            let Some(addr) = traces.addr.get(index) else {
                continue;
            };
            let kind = *kinds.entry(traces.action[index]).or_insert_with(|| {
                match traces.action(self.arena, index) {
                    Some("alloc") => 1,
                    Some("free_requested") => 2,
                    Some("free_completed" | "free") => 3,
                    _ => 0,
                }
            });
            let key = (t_device, addr);
            match kind {
                1 => {
                    holder.insert(key, index as u32);
                }
                2 | 3 => {
                    let entry = holder.get_mut(&key);
                    if entry.is_none() {
                        device.1.insert(addr);
                    }
                    if kind == 3 {
                        if let Some(entry) = entry {
                            *entry = FREED;
                        }
                    }
                }
                _ => {}
            }
        }
        holder.retain(|_, index| *index != FREED);
        for block in &mut self.rows.blocks {
            let live = matches!(
                block.state.as_deref(),
                Some("active_allocated" | "active_pending_free")
            );
            let made_by = block
                .device
                .zip(block.address)
                .filter(|_| live)
                .and_then(|key| holder.get(&key));
            if let Some(&index) = made_by {
                let index = index as usize;
                let traces = &self.rows.traces;
                block.alloc_seq = Some(i64::from(traces.seq[index]));
                block.user_metadata = traces.rare(index).and_then(|r| r.user_metadata.clone());
            }
        }
        for (device, (entries, orphans)) in devices {
            if orphans.is_empty() && entries != 1 {
                continue; // a complete trace, as far as it tells
            }
            let mut fact = |key: &str, value: String, value_type| {
                self.rows.info.push(InfoRow {
                    section: "trace",
                    item: Some(device),
                    key: key.to_string(),
                    value: Some(value),
                    value_type,
                })
            };
            fact("entries", entries.to_string(), "int");
            fact(
                "frees_of_unallocated_addresses",
                orphans.len().to_string(),
                "int",
            );
            fact("wrapped", "true".to_string(), "bool");
        }
    }

    // What makes a pickle a snapshot at all (docs/formats/snapshot.md §1): anything else is
    // refused, never read as an empty snapshot.

    fn not_a_snapshot(&self, at: Location, why: String) -> MemqError {
        MemqError::input(
            self.path,
            at,
            format!("not a PyTorch memory snapshot: {why}"),
        )
    }

    fn offset_of(&self, value: Value) -> Location {
        match value {
            Value::Obj(id) => Location::ByteOffset(self.arena.offset(id)),
            _ => Location::None,
        }
    }

    /// `segments` / `device_traces` must be lists (None is tolerated as "absent").
    fn require_list(&self, key: &str, value: Value) -> Result<()> {
        if value == Value::None || self.arena.sequence(value).is_some() {
            return Ok(());
        }
        let found = self.arena.type_name(value);
        Err(self.not_a_snapshot(
            self.offset_of(value),
            format!("{key} is {}, not a list", a(found)),
        ))
    }

    /// A segment list none of whose elements is a dict is no segment list (a single malformed
    /// segment among good ones is only a warning).
    fn require_segment_dicts(&self, what: &str, list: Value, items: &[Value]) -> Result<()> {
        let Some(&first) = items.first() else {
            return Ok(());
        };
        if items.iter().any(|&item| self.arena.dict(item).is_some()) {
            return Ok(());
        }
        let found = self.arena.type_name(first);
        let place = if what == "segments" {
            "segments[0]"
        } else {
            "its element 0"
        };
        let at = match first {
            Value::Obj(_) => self.offset_of(first),
            _ => self.offset_of(list),
        };
        Err(self.not_a_snapshot(
            at,
            format!("{what} holds no segment dict ({place} is {})", a(found)),
        ))
    }

    // Segments and blocks.

    fn segments(&mut self, value: Value) -> Result<()> {
        if let Some(items) = self.row_list(value, &|| "segments".to_string())? {
            self.segment_list(items)?;
        }
        Ok(())
    }

    fn segment_list(&mut self, items: &'a [Value]) -> Result<()> {
        for (index, &item) in items.iter().enumerate() {
            let place = || format!("segments[{index}]");
            let Some(fields) = self.row_dict(item, &place)? else {
                continue;
            };
            let mut row = SegmentRow {
                segment_id: self.rows.segments.len() as i64 + 1,
                ..SegmentRow::default()
            };
            let (mut frames, mut blocks, mut extra) = (Value::None, None, Vec::new());
            for &(key, value) in fields {
                match self.arena.str(key) {
                    Some("device") => row.device = self.int("device", value),
                    Some("address") => row.address = self.address("address", value),
                    Some("total_size") => row.total_size = self.int("total_size", value),
                    Some("allocated_size") => {
                        row.allocated_size = self.int("allocated_size", value)
                    }
                    Some("active_size") => row.active_size = self.int("active_size", value),
                    Some("requested_size") => {
                        row.requested_size = self.int("requested_size", value)
                    }
                    Some("stream") => row.stream = self.int("stream", value),
                    Some("segment_type") => row.segment_type = self.text("segment_type", value),
                    Some("segment_pool_id") => row.pool_id = self.pool_id("segment_pool_id", value),
                    Some("is_expandable") => row.is_expandable = self.flag("is_expandable", value),
                    Some("frames") => frames = value,
                    Some("blocks") => blocks = Some(value),
                    _ => extra.push((key, value)),
                }
            }
            // The segment's own stack before its blocks': the reference's numbering.
            row.stack_id = self.stack(frames)?;
            row.extra_json = self.extra(&extra)?;
            if blocks.is_none() {
                self.problems.push("has no blocks key".to_string());
            }
            self.flush(&place);
            let segment = (index, row.segment_id, row.device, row.address);
            self.rows.segments.push(row);
            if let Some(blocks) = blocks {
                self.blocks(blocks, segment)?;
            }
        }
        Ok(())
    }

    /// The blocks of one segment: (position in the segment list, id, device, base address).
    fn blocks(
        &mut self,
        value: Value,
        (segment_index, segment_id, device, base): (usize, i64, Option<i64>, Option<u64>),
    ) -> Result<()> {
        let list_place = || format!("segments[{segment_index}].blocks");
        let Some(items) = self.row_list(value, &list_place)? else {
            return Ok(());
        };
        let mut offset = Some(0i64);
        for (index, &item) in items.iter().enumerate() {
            let place = || format!("segments[{segment_index}].blocks[{index}]");
            let Some(fields) = self.row_dict(item, &place)? else {
                offset = None;
                continue;
            };
            let mut row = BlockRow {
                block_id: self.rows.blocks.len() as i64 + 1,
                segment_id,
                device,
                offset_in_segment: offset,
                ..BlockRow::default()
            };
            let (mut frames, mut history, mut extra) = (None, None, Vec::new());
            for &(key, value) in fields {
                match self.arena.str(key) {
                    Some("address") => row.address = self.address("address", value),
                    Some("size") => row.size = self.int("size", value),
                    Some("requested_size") => {
                        row.requested_size = self.int("requested_size", value)
                    }
                    Some("state") => row.state = self.text("state", value).map(canonical_state),
                    Some("frames") => frames = Some(value),
                    Some("history") => history = Some(value),
                    _ => extra.push((key, value)),
                }
            }
            if let Some(history) = history {
                self.legacy_history(history, &mut row, &mut frames);
            }
            if row.address.is_none() {
                row.address = base
                    .zip(offset)
                    .and_then(|(base, offset)| base.checked_add_signed(offset));
                row.address_derived = row.address.is_some();
            }
            offset = offset
                .zip(row.size)
                .and_then(|(offset, size)| offset.checked_add(size));
            row.stack_id = self.stack(frames.unwrap_or(Value::None))?;
            row.extra_json = self.extra(&extra)?;
            self.flush(&place);
            self.rows.blocks.push(row);
        }
        Ok(())
    }

    /// Pre-2.0 blocks have no `frames`/`requested_size` but a `history` whose first element
    /// holds them (`frames`, `real_size`), as PyTorch's viewers read it.
    fn legacy_history(&mut self, history: Value, row: &mut BlockRow, frames: &mut Option<Value>) {
        let first = self
            .arena
            .sequence(history)
            .and_then(|h| h.first().copied());
        let Some(first) = first.and_then(|first| self.arena.dict(first)) else {
            return;
        };
        for &(key, value) in first {
            match self.arena.str(key) {
                Some("frames") if frames.is_none() => *frames = Some(value),
                Some("real_size") if row.requested_size.is_none() => {
                    row.requested_size = self.int("history[0].real_size", value)
                }
                _ => {}
            }
        }
    }

    // Trace events.

    fn traces(&mut self, value: Value) -> Result<()> {
        let Some(devices) = self.row_list(value, &|| "device_traces".to_string())? else {
            return Ok(());
        };
        // Forward stacks are numbered after every stack the reference knows, to keep its ids.
        let mut forward = Vec::new();
        let stream = self.stream.take();
        let (mut next_row, mut visited) = (0usize, 0usize);
        for (device, &events) in devices.iter().enumerate() {
            let streamed = match (&stream, events) {
                (Some(stream), Value::Obj(id)) => stream.list(id).map(|i| &stream.streamed[i]),
                _ => None,
            };
            if let Some(streamed) = streamed {
                if streamed.device != device || streamed.first_row != next_row {
                    return Err(self.stream_mismatch());
                }
                next_row += streamed.rows;
                visited += 1;
                self.streamed_entries(device, streamed, &mut forward)?;
                continue;
            }
            if stream.as_ref().is_some_and(|s| !s.streamed.is_empty())
                && self.arena.sequence(events).is_some_and(|e| !e.is_empty())
            {
                return Err(self.stream_mismatch());
            }
            let Some(events) = self.row_list(events, &|| format!("device_traces[{device}]"))?
            else {
                continue;
            };
            for (seq, &event) in events.iter().enumerate() {
                self.trace_entry(device, seq, event, None, &mut forward)?;
            }
        }
        if let Some(stream) = stream.as_ref().filter(|s| !s.streamed.is_empty()) {
            if visited != stream.streamed.len() || next_row != self.rows.traces.len() {
                return Err(self.stream_mismatch());
            }
        }
        // The frame lists of streamed rows are interned; their ids are no longer needed.
        self.rows.traces.frames = Vec::new();
        for (row, place, frames) in forward {
            let stack = self.stack(frames)?;
            self.rows.traces.set_forward_stack(row, stack);
            self.flush(&|| place.clone());
        }
        Ok(())
    }

    /// The rows of a list the decoder hook took: streamed rows get their stack, the entries it
    /// left in the tree are read as usual, in seq order.
    fn streamed_entries(
        &mut self,
        device: usize,
        streamed: &crate::traces::Streamed,
        forward: &mut Vec<(usize, String, Value)>,
    ) -> Result<()> {
        let mut deferred = streamed.deferred.iter().peekable();
        let mut row = streamed.first_row;
        for seq in 0..streamed.entries {
            if let Some(entry) = deferred.next_if(|d| d.seq == seq) {
                self.trace_entry(device, seq as usize, entry.object, entry.row, forward)?;
                if entry.row.is_some() {
                    row += 1;
                }
                continue;
            }
            let frames = self.rows.traces.frames[row];
            if frames != NO_FRAMES {
                let stack = self.stack(Value::Obj(frames as ObjId))?;
                self.rows.traces.stack_id[row] = stack.map_or(0, |id| id as u32);
                self.flush(&|| format!("device_traces[{device}][{seq}]"));
            }
            row += 1;
        }
        Ok(())
    }

    /// One entry of a device's trace: a row (appended, or filled at `slot`) or a warning.
    fn trace_entry(
        &mut self,
        device: usize,
        seq: usize,
        event: Value,
        slot: Option<u32>,
        forward: &mut Vec<(usize, String, Value)>,
    ) -> Result<()> {
        let place = || format!("device_traces[{device}][{seq}]");
        let Some(fields) = self.row_dict(event, &place)? else {
            return Ok(());
        };
        let mut row = TraceRow {
            device: device as i64,
            seq: seq as i64,
            ..TraceRow::default()
        };
        let (mut frames, mut extra, mut forward_frames) = (Value::None, Vec::new(), Vec::new());
        for &(key, value) in fields {
            match self.arena.str(key) {
                Some("action") => row.action = self.text("action", value),
                Some("addr") => row.addr = self.address("addr", value),
                Some("device_free") => row.device_free = self.int("device_free", value),
                Some("size") => row.size = self.int("size", value),
                Some("stream") => row.stream = self.int("stream", value),
                Some("time_us") => row.time_us = self.int("time_us", value),
                Some("compile_context") => {
                    row.compile_context = self.text("compile_context", value)
                }
                Some("user_metadata") => row.user_metadata = self.any_text(value)?,
                Some("pool_id") => row.pool_id = self.pool_id("pool_id", value),
                Some("frames") => frames = value,
                Some("forward_frames") => forward_frames.push(value),
                _ => extra.push((key, value)),
            }
        }
        row.stack_id = self.stack(frames)?;
        row.extra_json = self.extra(&extra)?;
        self.flush(&place);
        let index = match slot {
            Some(slot) => {
                self.rows.traces.set_row(slot as usize, row);
                slot as usize
            }
            None => self.rows.traces.push_row(row),
        };
        for value in forward_frames {
            forward.push((index, place(), value));
        }
        Ok(())
    }

    /// The tree does not show the lists the decoder hook took where it took them.
    fn stream_mismatch(&self) -> MemqError {
        MemqError::input(
            self.path,
            Location::None,
            "the trace lists are not where streaming took them; decode again without it",
        )
    }

    // Other top-level keys.

    fn settings(&mut self, value: Value) -> Result<()> {
        let Some(items) = self.arena.dict(value) else {
            let found = self.arena.type_name(value);
            self.warn(
                "allocator_settings",
                &format!("is {}, not a dict", a(found)),
            );
            return Ok(());
        };
        for &(key, value) in items {
            let key = self.key_text(key)?;
            self.info("allocator_settings", None, key, value)?;
        }
        Ok(())
    }

    fn annotations(&mut self, value: Value) -> Result<()> {
        let Some(items) = self.arena.sequence(value) else {
            let found = self.arena.type_name(value);
            self.warn(
                "external_annotations",
                &format!("is {}, not a list", a(found)),
            );
            return Ok(());
        };
        for (index, &annotation) in items.iter().enumerate() {
            let Some(fields) = self.arena.dict(annotation) else {
                let found = self.arena.type_name(annotation);
                let place = format!("external_annotations[{index}]");
                self.warn(&place, &format!("is {}, not a dict; skipped", a(found)));
                continue;
            };
            for &(key, value) in fields {
                let key = self.key_text(key)?;
                self.info("external_annotations", Some(index as i64), key, value)?;
            }
        }
        Ok(())
    }

    fn meta(&mut self, key: &str, value: String, value_type: &'static str) {
        self.rows.info.push(InfoRow {
            section: "meta",
            item: None,
            key: key.to_string(),
            value: Some(value),
            value_type,
        });
    }

    fn info(
        &mut self,
        section: &'static str,
        item: Option<i64>,
        key: String,
        value: Value,
    ) -> Result<()> {
        let value_type = self.arena.type_name(value);
        let value = self.any_text(value)?;
        self.rows.info.push(InfoRow {
            section,
            item,
            key,
            value,
            value_type,
        });
        Ok(())
    }

    fn finish_warnings(&mut self) {
        let total = self.warnings.len();
        for (item, (place, message)) in self.warnings.drain(..).take(MAX_WARNINGS).enumerate() {
            self.rows.info.push(InfoRow {
                section: "warning",
                item: Some(item as i64),
                key: place,
                value: Some(message),
                value_type: "str",
            });
        }
        if total > MAX_WARNINGS {
            self.rows.info.push(InfoRow {
                section: "warning",
                item: Some(MAX_WARNINGS as i64),
                key: "snapshot".to_string(),
                value: Some(format!("{} more warnings not shown", total - MAX_WARNINGS)),
                value_type: "str",
            });
        }
    }

    // Rows and their containers.

    /// A dict that becomes a row, or `None` (with a warning) when it is something else.
    fn row_dict(
        &mut self,
        value: Value,
        place: &dyn Fn() -> String,
    ) -> Result<Option<&'a [(Value, Value)]>> {
        match (value, self.arena.dict(value)) {
            (Value::Obj(id), Some(fields)) => {
                self.claim(id, place)?;
                Ok(Some(fields))
            }
            _ => {
                let found = self.arena.type_name(value);
                self.warn(&place(), &format!("is {}, not a dict; skipped", a(found)));
                Ok(None)
            }
        }
    }

    /// A list of rows, or `None` (with a warning) when it is something else.
    fn row_list(
        &mut self,
        value: Value,
        place: &dyn Fn() -> String,
    ) -> Result<Option<&'a [Value]>> {
        match (value, self.arena.sequence(value)) {
            (Value::Obj(id), Some(items)) => {
                if !items.is_empty() {
                    self.claim(id, place)?;
                }
                Ok(Some(items))
            }
            _ => {
                let found = self.arena.type_name(value);
                self.warn(&place(), &format!("is {}, not a list; skipped", a(found)));
                Ok(None)
            }
        }
    }

    /// Refuses a row container reached a second time.
    fn claim(&mut self, id: ObjId, place: &dyn Fn() -> String) -> Result<()> {
        if !std::mem::replace(&mut self.claimed[id], true) {
            return Ok(());
        }
        Err(MemqError::input(
            self.path,
            Location::ByteOffset(self.arena.offset(id)),
            format!(
                "{} is an object already read at another place (shared through the memo); \
                 refusing a snapshot whose rows repeat",
                place()
            ),
        ))
    }

    // Fields.

    fn int(&mut self, key: &str, value: Value) -> Option<i64> {
        let int = self.arena.int(value);
        let small = int.and_then(|i| i64::try_from(i).ok());
        match (value, int) {
            (Value::None, _) => {}
            (_, None) => self.wrong_type(key, value, "an int"),
            (_, Some(i)) if small.is_none() => self
                .problems
                .push(format!("{key} {i} is out of range; ignored")),
            _ => {}
        }
        small
    }

    fn address(&mut self, key: &str, value: Value) -> Option<u64> {
        let int = self.arena.int(value);
        let address = int.and_then(|i| u64::try_from(i).ok());
        match (value, int) {
            (Value::None, _) => {}
            (_, None) => self.wrong_type(key, value, "an int"),
            (_, Some(i)) if address.is_none() => self
                .problems
                .push(format!("{key} {i} is not an address; ignored")),
            _ => {}
        }
        address
    }

    fn text(&mut self, key: &str, value: Value) -> Option<String> {
        let text = self.arena.str(value).map(str::to_string);
        if text.is_none() && value != Value::None {
            self.wrong_type(key, value, "a str");
        }
        text
    }

    fn flag(&mut self, key: &str, value: Value) -> Option<bool> {
        match value {
            Value::Bool(b) => Some(b),
            Value::None => None,
            _ => {
                self.wrong_type(key, value, "a bool");
                None
            }
        }
    }

    /// A 2-tuple (or list) of ints.
    fn pool_id(&mut self, key: &str, value: Value) -> (Option<i64>, Option<i64>) {
        match self.arena.sequence(value) {
            Some(&[first, second]) => (self.int(key, first), self.int(key, second)),
            _ => {
                if value != Value::None {
                    self.wrong_type(key, value, "a pair of ints");
                }
                (None, None)
            }
        }
    }

    fn wrong_type(&mut self, key: &str, value: Value, expected: &str) {
        let found = self.arena.type_name(value);
        self.problems
            .push(format!("{key} is {}, not {expected}; ignored", a(found)));
    }

    /// A string verbatim, `None` as NULL, anything else as JSON.
    fn any_text(&mut self, value: Value) -> Result<Option<String>> {
        let arena = self.arena;
        match (value, arena.str(value)) {
            (Value::None, _) => Ok(None),
            (_, Some(text)) => Ok(Some(text.to_string())),
            _ => self.json_value(|json| json.value(arena, value)).map(Some),
        }
    }

    fn key_text(&mut self, key: Value) -> Result<String> {
        Ok(self.any_text(key)?.unwrap_or_default())
    }

    fn extra(&mut self, items: &[(Value, Value)]) -> Result<Option<String>> {
        if items.is_empty() {
            return Ok(None);
        }
        let arena = self.arena;
        self.json_value(|json| json.object(arena, items)).map(Some)
    }

    fn stack(&mut self, frames: Value) -> Result<Option<i64>> {
        let (arena, json) = (self.arena, &mut self.json);
        self.rows
            .stacks
            .intern(arena, json, frames, &mut self.problems)
            .map_err(|BudgetExceeded| self.expansion_error())
    }

    fn json_value(
        &mut self,
        render: impl FnOnce(&mut Json) -> std::result::Result<String, BudgetExceeded>,
    ) -> Result<String> {
        render(&mut self.json).map_err(|BudgetExceeded| self.expansion_error())
    }

    fn expansion_error(&self) -> MemqError {
        MemqError::input(
            self.path,
            Location::None,
            "the snapshot's values expand far beyond the file's size through shared references; \
             refusing it",
        )
    }

    // Warnings.

    fn warn(&mut self, place: &str, message: &str) {
        self.warnings.push((place.to_string(), message.to_string()));
    }

    /// Gives the problems of the dict just read their place.
    fn flush(&mut self, place: &dyn Fn() -> String) {
        if self.problems.is_empty() {
            return;
        }
        let place = place();
        for problem in self.problems.drain(..) {
            self.warnings.push((place.clone(), problem));
        }
    }
}

/// One spelling per block state: the TypedDict's `active_awaiting_free` is the builders'
/// `active_pending_free`.
fn canonical_state(state: String) -> String {
    if state == "active_awaiting_free" {
        "active_pending_free".to_string()
    } else {
        state
    }
}
