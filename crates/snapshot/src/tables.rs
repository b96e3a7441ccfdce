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
//!
//! What is read lives in a [`Builder`], which outlives the decoder: while streaming, the decoder
//! hook (crate::traces) reads the segments and every trace entry into it as they are decoded,
//! and the [`walk`] after decoding reads the rest of the tree. What the hook took while
//! decoding comes back as a [`Taken`].

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use foldhash::HashSet;
use memq_core::error::{Location, MemqError, Result};

use crate::json::{Json, JsonError};
use crate::rows::{BlockRow, InfoRow, SegmentRow, TraceRow};
use crate::table_rows::Rows;
use crate::trace_sink::TraceSink;
use memq_pickle::value::{a, Arena, ObjId, Value};
use memq_pickle::Decoded;

/// Most warning rows kept per snapshot; the rest are counted in one last row.
const MAX_WARNINGS: usize = 1000;

/// Everything read from one snapshot so far, while decoding and after.
pub struct Builder<'e> {
    path: PathBuf,
    pub rows: Rows,
    pub traces: TraceSink<'e>,
    json: Json,
    /// Per object: it is a row dict or row list already read.
    claimed: Vec<bool>,
    /// Problems of the dict being read, given their place when it is done.
    problems: Vec<String>,
    /// (place, message) of the problems of the segments and the trace, in order: the first
    /// [`MAX_WARNINGS`], and how many there are.
    warnings: Vec<(String, String)>,
    warnings_total: usize,
    /// The segments read while decoding (by the hook).
    early_segments: Option<Value>,
    /// The trace's rows have begun (the blocks they refer to are known).
    pub traces_started: bool,
    /// Rows with `forward_frames` (held rows only): (row, place, value).
    forward: Vec<(usize, String, Value)>,
    /// The snapshot was read from JSON (snap_info says so instead of naming a protocol).
    pub json_input: bool,
}

impl<'e> Builder<'e> {
    /// A builder for the pickle at `path` of `file_bytes` bytes, its trace rows to `traces`.
    pub fn new(path: &Path, file_bytes: usize, traces: TraceSink<'e>) -> Self {
        Builder {
            path: path.to_path_buf(),
            rows: Rows::default(),
            traces,
            // Plenty for any real snapshot's JSON cells, far too little for an exponential one.
            json: Json::with_budget(file_bytes.saturating_mul(16).max(64 << 20)),
            claimed: Vec::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            warnings_total: 0,
            early_segments: None,
            traces_started: false,
            forward: Vec::new(),
            json_input: false,
        }
    }

    /// The rows read.
    pub fn into_rows(self) -> Rows {
        self.rows
    }

    /// The objects with these ids were dropped by the decoder.
    pub fn forget(&mut self, ids: &[ObjId]) {
        self.rows.stacks.forget(ids);
        for &id in ids {
            if let Some(claimed) = self.claimed.get_mut(id) {
                *claimed = false;
            }
        }
    }

    /// The stack id of a frame list (see [`Stacks::intern`](crate::frames::Stacks::intern)).
    pub fn stack(&mut self, arena: &Arena, frames: Value) -> Result<Option<i64>> {
        let interned = self
            .rows
            .stacks
            .intern(arena, &mut self.json, frames, &mut self.problems);
        interned.map_err(|e| self.json_error(e))
    }

    /// Gives the problems of the dict just read their place.
    pub fn flush(&mut self, place: &dyn Fn() -> String) {
        if self.problems.is_empty() {
            return;
        }
        let place = place();
        for problem in std::mem::take(&mut self.problems) {
            self.warn(place.clone(), problem);
        }
    }

    fn warn(&mut self, place: String, message: String) {
        self.warnings_total += 1;
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push((place, message));
        }
    }

    /// The trace's rows begin: the live blocks are known.
    fn start_traces(&mut self) {
        if !std::mem::replace(&mut self.traces_started, true) {
            self.traces.facts.watch(&self.rows.blocks);
        }
    }

    fn json_error(&self, e: JsonError) -> MemqError {
        match e {
            JsonError::Budget => MemqError::input(
                &self.path,
                Location::None,
                "the snapshot's values expand far beyond the file's size through shared \
                 references; refusing it",
            ),
            JsonError::Streamed => self.stream_mismatch(),
        }
    }

    /// The tree does not show what the decoder hook took where it took it.
    fn stream_mismatch(&self) -> MemqError {
        MemqError::input(
            &self.path,
            Location::None,
            "the snapshot is shaped in a way streaming cannot read; decode again without it",
        )
    }
}

/// What the decoder hook took: the trace lists it streamed, by object id.
pub struct Taken {
    pub lists: foldhash::HashMap<ObjId, usize>,
    pub streamed: Vec<Streamed>,
}

impl Taken {
    fn list(&self, id: ObjId) -> Option<&Streamed> {
        self.lists.get(&id).map(|&i| &self.streamed[i])
    }
}

/// One `device_traces[k]` list whose entries were taken while decoding.
#[derive(Debug)]
pub struct Streamed {
    pub device: usize,
    /// Number of its first row among all trace rows.
    pub first_row: u64,
    pub rows: u64,
    /// Entries seen (the next seq).
    pub entries: u32,
}

/// Reads the decoded snapshot into the builder: what the hook did not read (with `taken`, what
/// it took while decoding, which must be where the tree shows it), then the trace's last rows,
/// the facts the trace tells about blocks, and the warnings. An error after a streaming decode
/// means: decode again without the hook.
pub fn walk(
    decoded: &Decoded<'_>,
    file_bytes: usize,
    b: &mut Builder,
    taken: Option<&Taken>,
) -> Result<()> {
    let arena = &decoded.arena;
    // Object ids and stack ids are kept as u32 in the per-object tables.
    if arena.len() >= u32::MAX as usize {
        return Err(MemqError::input(
            &b.path,
            Location::None,
            format!("holds {} objects; memq reads at most 2^32 - 2", arena.len()),
        ));
    }
    if taken.is_some() && holds_tags(arena, decoded.root, b.early_segments) {
        return Err(b.stream_mismatch());
    }
    let mut walker = Walker::new(arena, b);
    walker.head = decoded
        .warnings
        .iter()
        .map(|w| ("pickle".to_string(), w.clone()))
        .collect();
    walker.to_head = true;
    if walker.b.json_input {
        walker.meta("format", "json".to_string(), "str");
    } else {
        walker.meta("protocol", decoded.protocol.to_string(), "int");
    }
    walker.meta("file_bytes", file_bytes.to_string(), "int");
    walker.root(decoded.root, taken)?;
    let head = std::mem::take(&mut walker.head);
    b.traces.finish()?;
    let facts = std::mem::take(&mut b.traces.facts);
    facts.finish(&mut b.rows.blocks, &mut b.rows.info);
    b.rows.derived = b.traces.derive.finish(&b.rows.segments, &b.rows.blocks)?;
    finish_warnings(b, head);
    Ok(())
}

/// Whether a value the decoder let go of (a tag) is reachable from `root` outside the segments
/// read while decoding: the walk after decoding would misread it.
fn holds_tags(arena: &Arena, root: Value, skip: Option<Value>) -> bool {
    let mut seen = HashSet::default();
    let mut work = vec![root];
    while let Some(value) = work.pop() {
        match value {
            Value::Tag(_) => return true,
            Value::Obj(id) if Some(value) != skip && seen.insert(id) => {
                if let Some(items) = arena.sequence(value) {
                    work.extend_from_slice(items);
                } else if let Some(items) = arena.dict(value) {
                    work.extend(items.iter().flat_map(|&(k, v)| [k, v]));
                } else if let Some(memq_pickle::value::Object::Set(items)) = arena.object(value) {
                    work.extend_from_slice(items);
                }
            }
            _ => {}
        }
    }
    false
}

/// The warning rows: the decoder's and the top level's first, then those of the segments and
/// the trace; at most [`MAX_WARNINGS`], the rest counted.
fn finish_warnings(b: &mut Builder, head: Vec<(String, String)>) {
    let total = head.len() + b.warnings_total;
    let warnings = head.into_iter().chain(std::mem::take(&mut b.warnings));
    for (item, (place, message)) in warnings.take(MAX_WARNINGS).enumerate() {
        b.rows.info.push(InfoRow {
            section: "warning",
            item: Some(item as i64),
            key: place,
            value: Some(message),
            value_type: "str",
        });
    }
    if total > MAX_WARNINGS {
        b.rows.info.push(InfoRow {
            section: "warning",
            item: Some(MAX_WARNINGS as i64),
            key: "snapshot".to_string(),
            value: Some(format!("{} more warnings not shown", total - MAX_WARNINGS)),
            value_type: "str",
        });
    }
}

/// Reads parts of a decoded tree into a [`Builder`].
pub struct Walker<'w, 'd, 'e> {
    arena: &'w Arena<'d>,
    b: &'w mut Builder<'e>,
    /// Warnings go to `head` (the top level's, shown first) instead of the builder's.
    to_head: bool,
    head: Vec<(String, String)>,
    /// The key of the segments being read (`segments` or `host_segments`), for places.
    segments_key: &'static str,
    /// The entries being read are the host's: `Some(true)` its flat trace list, `Some(false)`
    /// its lists per device (for places).
    host_trace: Option<bool>,
}

impl<'w, 'd, 'e> Walker<'w, 'd, 'e> {
    pub fn new(arena: &'w Arena<'d>, b: &'w mut Builder<'e>) -> Self {
        Walker {
            arena,
            b,
            to_head: false,
            head: Vec::new(),
            segments_key: "segments",
            host_trace: None,
        }
    }

    fn root(&mut self, root: Value, taken: Option<&Taken>) -> Result<()> {
        let arena = self.arena;
        if let Some(items) = arena.dict(root) {
            return self.snapshot_dict(root, items, taken);
        }
        if let (Some(segments), "list") = (arena.sequence(root), arena.type_name(root)) {
            self.require_segment_dicts("the top-level list", root, segments)?;
            self.meta("top_level", "list".to_string(), "str");
            self.to_head = false;
            return self.segment_list(segments);
        }
        let offset = match root {
            Value::Obj(id) => arena.offset(id),
            _ => 0,
        };
        Err(MemqError::input(
            &self.b.path,
            Location::ByteOffset(offset),
            format!(
                "the pickle holds {}, not a snapshot dict or a list of segments",
                a(arena.type_name(root))
            ),
        ))
    }

    /// The top-level dict, whatever its key order.
    fn snapshot_dict(
        &mut self,
        root: Value,
        items: &'w [(Value, Value)],
        taken: Option<&Taken>,
    ) -> Result<()> {
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
        let (mut host_segments, mut host_traces) = (None, None);
        for &(key, value) in items {
            match self.arena.str(key) {
                Some("host_segments") => host_segments = Some(value),
                Some("host_traces") => host_traces = Some(value),
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
        self.to_head = false;
        // Segments first, then traces: the order the reference numbers stacks in. Segments
        // read while decoding must be the ones the snapshot ends up with.
        match (segments, self.b.early_segments) {
            (Some(segments), Some(early)) if segments == early => {}
            (_, Some(_)) => return Err(self.b.stream_mismatch()),
            (Some(segments), None) => self.segments(segments)?,
            (None, None) => self.warn("snapshot", "has no segments key"),
        }
        self.b.start_traces();
        match traces {
            Some(traces) => self.traces(traces, taken)?,
            None => {
                if taken.is_some_and(|t| !t.streamed.is_empty()) {
                    return Err(self.b.stream_mismatch());
                }
                self.warn("snapshot", "has no device_traces key")
            }
        }
        // The host's after the device's: device stack ids stay those of a snapshot without.
        self.host(host_segments, host_traces)
    }

    // Pinned host memory.

    /// `host_segments` into the host segment and block rows, `host_traces` into the host
    /// trace's batches (held: a host trace is short), each live host block given the alloc
    /// entry that made it, as device blocks are.
    fn host(&mut self, segments: Option<Value>, traces: Option<Value>) -> Result<()> {
        if segments.is_none() && traces.is_none() {
            return Ok(());
        }
        let rows = &mut self.b.rows;
        std::mem::swap(&mut rows.segments, &mut rows.host_segments);
        std::mem::swap(&mut rows.blocks, &mut rows.host_blocks);
        self.segments_key = "host_segments";
        let read = self.host_rows(segments, traces);
        self.segments_key = "segments";
        self.host_trace = None;
        let rows = &mut self.b.rows;
        std::mem::swap(&mut rows.segments, &mut rows.host_segments);
        std::mem::swap(&mut rows.blocks, &mut rows.host_blocks);
        read
    }

    /// [`Self::host`] with the host rows in the place of the device rows.
    fn host_rows(&mut self, segments: Option<Value>, traces: Option<Value>) -> Result<()> {
        if let Some(segments) = segments.filter(|&v| v != Value::None) {
            if self.arena.sequence(segments).is_some() {
                self.segments(segments)?;
            } else {
                let found = self.arena.type_name(segments);
                self.warn(
                    "host_segments",
                    &format!("is {}, not a list; skipped", a(found)),
                );
            }
        }
        let Some(traces) = traces.filter(|&v| v != Value::None) else {
            return Ok(());
        };
        let Some(items) = self.row_list(traces, &|| "host_traces".to_string())? else {
            return Ok(());
        };
        // One flat list of entries (the host allocator's), or a list per device.
        let flat = !items
            .iter()
            .any(|&item| self.arena.sequence(item).is_some());
        let batches = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let out = batches.clone();
        let mut sink = self.b.traces.sibling(
            crate::schema::host_traces(),
            Box::new(move |batch| {
                out.borrow_mut().push(batch);
                Ok(())
            }),
        );
        sink.columns.host = flat;
        sink.facts.section = "host_trace";
        sink.facts.only_device = flat.then_some(0);
        sink.facts.watch(&self.b.rows.blocks);
        let device_sink = std::mem::replace(&mut self.b.traces, sink);
        let device_forward = std::mem::take(&mut self.b.forward);
        self.host_trace = Some(flat);
        let read = self.host_entries(items, flat);
        let mut sink = std::mem::replace(&mut self.b.traces, device_sink);
        self.b.forward = device_forward;
        read?;
        sink.finish()?;
        if let Some(failed) = sink.failed.take() {
            return Err(failed);
        }
        let facts = std::mem::take(&mut sink.facts);
        facts.finish(&mut self.b.rows.blocks, &mut self.b.rows.info);
        drop(sink);
        self.b.rows.host_traces = batches.take();
        Ok(())
    }

    fn host_entries(&mut self, items: &'w [Value], flat: bool) -> Result<()> {
        if flat {
            for (seq, &event) in items.iter().enumerate() {
                self.trace_entry(0, seq, event)?;
            }
        } else {
            for (device, &events) in items.iter().enumerate() {
                let place = || format!("host_traces[{device}]");
                let Some(events) = self.row_list(events, &place)? else {
                    continue;
                };
                for (seq, &event) in events.iter().enumerate() {
                    self.trace_entry(device, seq, event)?;
                }
            }
        }
        for (row, place, frames) in std::mem::take(&mut self.b.forward) {
            let stack = self.stack(frames)?;
            self.b.traces.columns.set_forward_stack(row, stack);
            self.flush(&|| place.clone());
        }
        Ok(())
    }

    /// The segments, read while decoding before the first trace entry (the hook's
    /// [`Builder::traces_started`] is then set): checked as the walk after decoding checks them.
    pub fn early_segments(&mut self, segments: Value) -> Result<()> {
        self.require_list("segments", segments)?;
        if let Some(list) = self.arena.sequence(segments) {
            self.require_segment_dicts("segments", segments, list)?;
        }
        self.segments(segments)?;
        self.b.early_segments = Some(segments);
        self.b.start_traces();
        Ok(())
    }

    // What makes a pickle a snapshot at all (docs/formats/snapshot.md §1): anything else is
    // refused, never read as an empty snapshot.

    fn not_a_snapshot(&self, at: Location, why: String) -> MemqError {
        MemqError::input(
            &self.b.path,
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

    fn segment_list(&mut self, items: &'w [Value]) -> Result<()> {
        for (index, &item) in items.iter().enumerate() {
            let key = self.segments_key;
            let place = || format!("{key}[{index}]");
            let Some(fields) = self.row_dict(item, &place)? else {
                continue;
            };
            let mut row = SegmentRow {
                segment_id: self.b.rows.segments.len() as i64 + 1,
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
                self.b.problems.push("has no blocks key".to_string());
            }
            self.flush(&place);
            let segment = (index, row.segment_id, row.device, row.address);
            self.b.rows.segments.push(row);
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
        let key = self.segments_key;
        let list_place = || format!("{key}[{segment_index}].blocks");
        let Some(items) = self.row_list(value, &list_place)? else {
            return Ok(());
        };
        let mut offset = Some(0i64);
        for (index, &item) in items.iter().enumerate() {
            let place = || format!("{key}[{segment_index}].blocks[{index}]");
            let Some(fields) = self.row_dict(item, &place)? else {
                offset = None;
                continue;
            };
            let mut row = BlockRow {
                block_id: self.b.rows.blocks.len() as i64 + 1,
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
            self.b.rows.blocks.push(row);
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

    fn traces(&mut self, value: Value, taken: Option<&Taken>) -> Result<()> {
        let Some(devices) = self.row_list(value, &|| "device_traces".to_string())? else {
            if taken.is_some_and(|t| !t.streamed.is_empty()) {
                return Err(self.b.stream_mismatch());
            }
            return Ok(());
        };
        let streaming = taken.filter(|t| !t.streamed.is_empty());
        let (mut next_row, mut visited) = (0u64, 0usize);
        for (device, &events) in devices.iter().enumerate() {
            let streamed = match (streaming, events) {
                (Some(taken), Value::Obj(id)) => taken.list(id),
                _ => None,
            };
            if let Some(streamed) = streamed {
                if streamed.device != device || streamed.first_row != next_row {
                    return Err(self.b.stream_mismatch());
                }
                next_row += streamed.rows;
                visited += 1;
                continue;
            }
            if streaming.is_some() && self.arena.sequence(events).is_some_and(|e| !e.is_empty()) {
                return Err(self.b.stream_mismatch());
            }
            let Some(events) = self.row_list(events, &|| format!("device_traces[{device}]"))?
            else {
                continue;
            };
            for (seq, &event) in events.iter().enumerate() {
                self.trace_entry(device, seq, event)?;
            }
        }
        if let Some(taken) = streaming {
            if visited != taken.streamed.len() || next_row != self.b.traces.rows {
                return Err(self.b.stream_mismatch());
            }
        }
        // Forward stacks are numbered after every stack the reference knows, to keep its ids.
        for (row, place, frames) in std::mem::take(&mut self.b.forward) {
            let stack = self.stack(frames)?;
            self.b.traces.columns.set_forward_stack(row, stack);
            self.flush(&|| place.clone());
        }
        Ok(())
    }

    /// One entry of a device's trace: a row or a warning; returns whether it made a row.
    /// `forward_frames` need the rows held (their stacks are numbered after the whole trace).
    pub fn trace_entry(&mut self, device: usize, seq: usize, event: Value) -> Result<bool> {
        let host_trace = self.host_trace;
        let place = || match host_trace {
            Some(true) => format!("host_traces[{seq}]"),
            Some(false) => format!("host_traces[{device}][{seq}]"),
            None => format!("device_traces[{device}][{seq}]"),
        };
        let Some(fields) = self.row_dict(event, &place)? else {
            return Ok(false);
        };
        let mut row = TraceRow {
            device: device as u32,
            seq: seq as u32,
            ..TraceRow::default()
        };
        let (mut frames, mut extra, mut forward_frames) = (Value::None, Vec::new(), Vec::new());
        for &(key, value) in fields {
            let key_text = self.arena.str(key);
            if streamed(self.arena, key)
                || (key_text != Some("frames") && streamed(self.arena, value))
            {
                return Err(self.b.stream_mismatch());
            }
            match key_text {
                Some("action") => row.action = self.str_field("action", value).map(Cow::Borrowed),
                Some("addr") => row.addr = self.address("addr", value),
                Some("device_free") => row.device_free = self.int("device_free", value),
                Some("size") => row.size = self.int("size", value),
                Some("stream") => row.stream = self.int("stream", value),
                Some("time_us") => row.time_us = self.int("time_us", value),
                Some("compile_context") => {
                    row.compile_context =
                        self.str_field("compile_context", value).map(Cow::Borrowed)
                }
                Some("user_metadata") => row.user_metadata = self.any_text(value)?.map(Cow::Owned),
                Some("pool_id") => row.pool_id = self.pool_id("pool_id", value),
                Some("frames") => frames = value,
                Some("forward_frames") => forward_frames.push(value),
                _ => extra.push((key, value)),
            }
        }
        row.stack_id = self.stack(frames)?;
        row.extra_json = self.extra(&extra)?;
        self.flush(&place);
        if !forward_frames.is_empty() && !self.b.traces.holds() {
            return Err(self.b.stream_mismatch());
        }
        let index = self.b.traces.push(row)?;
        for value in forward_frames {
            self.b.forward.push((index, place(), value));
        }
        Ok(true)
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
        self.b.rows.info.push(InfoRow {
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
        self.b.rows.info.push(InfoRow {
            section,
            item,
            key,
            value,
            value_type,
        });
        Ok(())
    }

    // Rows and their containers.

    /// A dict that becomes a row, or `None` (with a warning) when it is something else.
    fn row_dict(
        &mut self,
        value: Value,
        place: &dyn Fn() -> String,
    ) -> Result<Option<&'w [(Value, Value)]>> {
        match (value, self.arena.dict(value)) {
            (Value::Obj(id), Some(fields)) => {
                self.claim(id, place)?;
                Ok(Some(fields))
            }
            _ => {
                if streamed(self.arena, value) {
                    return Err(self.b.stream_mismatch());
                }
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
    ) -> Result<Option<&'w [Value]>> {
        match (value, self.arena.sequence(value)) {
            (Value::Obj(id), Some(items)) => {
                if !items.is_empty() {
                    self.claim(id, place)?;
                }
                Ok(Some(items))
            }
            _ => {
                if streamed(self.arena, value) {
                    return Err(self.b.stream_mismatch());
                }
                let found = self.arena.type_name(value);
                self.warn(&place(), &format!("is {}, not a list; skipped", a(found)));
                Ok(None)
            }
        }
    }

    /// Refuses a row container reached a second time.
    fn claim(&mut self, id: ObjId, place: &dyn Fn() -> String) -> Result<()> {
        let claimed = &mut self.b.claimed;
        if claimed.len() <= id {
            claimed.resize(self.arena.len().max(id + 1), false);
        }
        if !std::mem::replace(&mut claimed[id], true) {
            return Ok(());
        }
        Err(MemqError::input(
            &self.b.path,
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
                .b
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
                .b
                .problems
                .push(format!("{key} {i} is not an address; ignored")),
            _ => {}
        }
        address
    }

    fn str_field(&mut self, key: &str, value: Value) -> Option<&'w str> {
        let text = self.arena.str(value);
        if text.is_none() && value != Value::None {
            self.wrong_type(key, value, "a str");
        }
        text
    }

    fn text(&mut self, key: &str, value: Value) -> Option<String> {
        self.str_field(key, value).map(str::to_string)
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
        self.b
            .problems
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
        self.b.stack(self.arena, frames)
    }

    fn json_value(
        &mut self,
        render: impl FnOnce(&mut Json) -> std::result::Result<String, JsonError>,
    ) -> Result<String> {
        render(&mut self.b.json).map_err(|e| self.b.json_error(e))
    }

    // Warnings.

    fn warn(&mut self, place: &str, message: &str) {
        if self.to_head {
            self.head.push((place.to_string(), message.to_string()));
        } else {
            self.b.warn(place.to_string(), message.to_string());
        }
    }

    /// Gives the problems of the dict just read their place.
    fn flush(&mut self, place: &dyn Fn() -> String) {
        if self.to_head {
            if !self.b.problems.is_empty() {
                let place = place();
                for problem in std::mem::take(&mut self.b.problems) {
                    self.head.push((place.clone(), problem));
                }
            }
        } else {
            self.b.flush(place);
        }
    }
}

/// A value the streaming decoder let go of, directly or as an item of a sequence.
fn streamed(arena: &Arena, value: Value) -> bool {
    matches!(value, Value::Tag(_))
        || arena
            .sequence(value)
            .is_some_and(|items| items.iter().any(|v| matches!(v, Value::Tag(_))))
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
