//! The trace table, streamed: the decoder hook turns each trace entry into a row as it is
//! decoded and the rows leave in bounded batches.
//!
//! A snapshot's bulk is its trace ring buffer (`device_traces`: one dict per allocator event).
//! [`TraceStream`] takes the entries of each `device_traces[k]` list as the decoder appends them.
//! At the first one it reads the snapshot's segments (already decoded: PyTorch writes them
//! first), so that stack ids are numbered as without streaming (segments, then the trace).
//! Each entry then becomes a row of [`TraceColumns`] at once — an entry of the usual shape
//! (docs/formats/snapshot.md §1.5) by a fast path, any other through the walker's reading — and
//! is dropped from the decoded tree, with its frame list once interned (the memo hands out its
//! stack id). [`TraceSink`] hands the rows out as Arrow batches of at most `rows_limit` rows and
//! `text_limit` text bytes, so what is held stays bounded whatever the size of the trace.
//!
//! What cannot be numbered or checked while decoding (the trace lists before the segments,
//! `forward_frames`, whose stacks are numbered after every other, a trace list or entry
//! reached twice) makes the hook give up: the pickle is then decoded again the plain way, the
//! rows held until the walk ends, so results and errors are those of the plain decoder.

use std::borrow::Cow;
use std::collections::BTreeMap;

use foldhash::{HashMap, HashSet};

use datafusion::arrow::array::BooleanBufferBuilder;
use datafusion::arrow::record_batch::RecordBatch;
use memq_core::catalog::TableDef;
use memq_core::error::{MemqError, Result};
use memq_pickle::stream::{Abort, Hook, Slot, Take};
use memq_pickle::value::{Arena, ObjId, Object, Value};

use crate::batches;
use crate::tables::{BlockRow, Builder, InfoRow, Taken, Walker};

/// In the text columns of [`TraceColumns`]: no value.
pub const NULL_TEXT: u32 = u32::MAX;

/// A nullable column that can be set after the fact.
pub struct OptCol<T> {
    pub values: Vec<T>,
    pub valid: BooleanBufferBuilder,
}

impl<T: Copy + Default> OptCol<T> {
    fn new() -> Self {
        OptCol {
            values: Vec::new(),
            valid: BooleanBufferBuilder::new(0),
        }
    }

    fn push(&mut self, value: Option<T>) {
        self.values.push(value.unwrap_or_default());
        self.valid.append(value.is_some());
    }

    pub fn get(&self, row: usize) -> Option<T> {
        self.valid.get_bit(row).then(|| self.values[row])
    }

    fn clear(&mut self) {
        self.values.clear();
        self.valid = BooleanBufferBuilder::new(0);
    }
}

/// The columns that are NULL in nearly every row, kept per row that has any.
#[derive(Debug, Default, Clone)]
pub struct Rare {
    pub device_free: Option<i64>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub forward_stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.device_free.is_none()
            && self.pool_id == (None, None)
            && self.forward_stack_id.is_none()
            && self.extra_json.is_none()
    }
}

/// One trace row, as read.
#[derive(Debug, Default)]
pub struct TraceRow<'t> {
    pub device: u32,
    pub seq: u32,
    pub action: Option<Cow<'t, str>>,
    pub addr: Option<u64>,
    pub device_free: Option<i64>,
    pub size: Option<i64>,
    pub stream: Option<i64>,
    pub time_us: Option<i64>,
    pub compile_context: Option<Cow<'t, str>>,
    pub user_metadata: Option<Cow<'t, str>>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

/// The distinct texts of a batch's text cells.
struct Texts {
    strings: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    /// The texts used last.
    recent: [u32; 4],
}

impl Default for Texts {
    fn default() -> Self {
        Texts {
            strings: Vec::new(),
            ids: HashMap::default(),
            recent: [NULL_TEXT; 4],
        }
    }
}

impl Texts {
    fn id(&mut self, text: Option<&str>) -> u32 {
        let Some(text) = text else {
            return NULL_TEXT;
        };
        // Most cells repeat one of a few texts: those are compared before hashing.
        for &id in &self.recent {
            if self.strings.get(id as usize).is_some_and(|s| **s == *text) {
                return id;
            }
        }
        if let Some(&id) = self.ids.get(text) {
            self.remember(id);
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(text.into());
        self.ids.insert(text.into(), id);
        self.remember(id);
        id
    }

    fn remember(&mut self, id: u32) {
        self.recent.rotate_right(1);
        self.recent[0] = id;
    }

    fn get(&self, id: u32) -> Option<&str> {
        (id != NULL_TEXT).then(|| &*self.strings[id as usize])
    }

    fn clear(&mut self) {
        self.strings.clear();
        self.ids.clear();
        self.recent = [NULL_TEXT; 4];
    }
}

/// Rows of snap_traces in (device, seq) order: those of the batch being built, or every row
/// when the sink holds them.
pub struct TraceColumns {
    pub device: Vec<u32>,
    pub seq: Vec<u32>,
    action: Vec<u32>,
    compile_context: Vec<u32>,
    user_metadata: Vec<u32>,
    texts: Texts,
    pub addr: OptCol<u64>,
    pub size: OptCol<i64>,
    pub stream: OptCol<i64>,
    pub time_us: OptCol<i64>,
    /// Stack ids; 0 for none.
    pub stack_id: Vec<u32>,
    pub rare: BTreeMap<u32, Rare>,
    /// Rows of the host's flat trace list: their device is the host's.
    pub host: bool,
    /// The columns derived from the trace (crate::derive).
    pub levels: crate::derive::Levels,
}

impl TraceColumns {
    pub fn new() -> Self {
        TraceColumns {
            device: Vec::new(),
            seq: Vec::new(),
            action: Vec::new(),
            compile_context: Vec::new(),
            user_metadata: Vec::new(),
            texts: Texts::default(),
            addr: OptCol::new(),
            size: OptCol::new(),
            stream: OptCol::new(),
            time_us: OptCol::new(),
            stack_id: Vec::new(),
            rare: BTreeMap::new(),
            host: false,
            levels: Default::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.device.len()
    }

    pub fn action(&self, row: usize) -> Option<&str> {
        self.texts.get(self.action[row])
    }

    pub fn compile_context(&self, row: usize) -> Option<&str> {
        self.texts.get(self.compile_context[row])
    }

    pub fn user_metadata(&self, row: usize) -> Option<&str> {
        self.texts.get(self.user_metadata[row])
    }

    pub fn rare(&self, row: usize) -> Option<&Rare> {
        self.rare.get(&(row as u32))
    }

    /// Appends a row; returns its index.
    fn push(&mut self, row: TraceRow) -> usize {
        let index = self.len();
        self.device.push(row.device);
        self.seq.push(row.seq);
        let action = self.texts.id(row.action.as_deref());
        self.action.push(action);
        let context = self.texts.id(row.compile_context.as_deref());
        self.compile_context.push(context);
        let metadata = self.texts.id(row.user_metadata.as_deref());
        self.user_metadata.push(metadata);
        self.addr.push(row.addr);
        self.size.push(row.size);
        self.stream.push(row.stream);
        self.time_us.push(row.time_us);
        self.stack_id
            .push(row.stack_id.map_or(0, |id| u32::try_from(id).unwrap_or(0)));
        let rare = Rare {
            device_free: row.device_free,
            pool_id: row.pool_id,
            forward_stack_id: None,
            extra_json: row.extra_json,
        };
        if !rare.is_empty() {
            self.rare.insert(index as u32, rare);
        }
        index
    }

    pub fn set_forward_stack(&mut self, index: usize, stack: Option<i64>) {
        if stack.is_some() {
            self.rare.entry(index as u32).or_default().forward_stack_id = stack;
        } else if let Some(rare) = self.rare.get_mut(&(index as u32)) {
            rare.forward_stack_id = None;
        }
    }

    /// Text bytes of row `i` that count towards a batch's limit (with `name`, the snapshot's).
    pub fn text_bytes(&self, i: usize, name: usize) -> usize {
        let text = |id: u32| self.texts.get(id).map_or(0, str::len);
        let rare = self
            .rare(i)
            .and_then(|r| r.extra_json.as_ref())
            .map_or(0, String::len);
        name + text(self.action[i])
            + text(self.compile_context[i])
            + text(self.user_metadata[i])
            + rare
    }

    fn clear(&mut self) {
        self.device.clear();
        self.seq.clear();
        self.action.clear();
        self.compile_context.clear();
        self.user_metadata.clear();
        self.texts.clear();
        self.addr.clear();
        self.size.clear();
        self.stream.clear();
        self.time_us.clear();
        self.stack_id.clear();
        self.rare.clear();
        self.levels.rows.clear();
    }
}

/// What the trace tells beyond its rows (docs/formats/snapshot.md §6.2), gathered as the rows
/// go by: each live block gets the alloc entry that made it (seq, `user_metadata` set with
/// `_set_memory_metadata`), and each device's trace is checked for signs that its ring buffer
/// wrapped (frees of addresses the trace never allocated, a single-entry trace).
#[derive(Default)]
pub struct Facts {
    /// (device, address) of each live block → the latest alloc entry still holding it.
    live: HashMap<(i64, u64), Option<Holder>>,
    /// By device: its entries, the addresses it allocated so far, and those it freed without
    /// an earlier alloc.
    devices: Vec<Device>,
    /// The snap_info section of the wrap signs ("trace" when empty).
    pub section: &'static str,
    /// Every block and row counts as this device (the host's flat trace: its rows are read as
    /// device 0, whatever device key its blocks have).
    pub only_device: Option<i64>,
}

/// An alloc entry: its seq and user metadata.
type Holder = (u32, Option<Box<str>>);

#[derive(Default)]
struct Device {
    entries: i64,
    allocated: HashSet<u64>,
    orphans: HashSet<u64>,
}

impl Facts {
    /// The blocks whose alloc entries are looked for (before any row is seen).
    pub fn watch(&mut self, blocks: &[BlockRow]) {
        for block in blocks {
            let live = matches!(
                block.state.as_deref(),
                Some("active_allocated" | "active_pending_free")
            );
            let device = self.only_device.or(block.device);
            if let (true, Some(key)) = (live, device.zip(block.address)) {
                self.live.insert(key, None);
            }
        }
    }

    fn see(&mut self, row: &TraceRow) {
        let index = row.device as usize;
        if self.devices.len() <= index {
            self.devices.resize_with(index + 1, Device::default);
        }
        let entry = &mut self.devices[index];
        entry.entries += 1;
        let Some(addr) = row.addr else {
            return;
        };
        let key = (i64::from(row.device), addr);
        match row.action.as_deref() {
            Some("alloc") => {
                entry.allocated.insert(addr);
                if let Some(holder) = self.live.get_mut(&key) {
                    *holder = Some((row.seq, row.user_metadata.as_deref().map(Box::from)));
                }
            }
            Some(action @ ("free_requested" | "free_completed" | "free")) => {
                if !entry.allocated.contains(&addr) {
                    entry.orphans.insert(addr);
                }
                if action != "free_requested" && !self.live.is_empty() {
                    if let Some(holder) = self.live.get_mut(&key) {
                        *holder = None;
                    }
                }
            }
            _ => {}
        }
    }

    /// Gives the live blocks their alloc entry, and adds the rows of section `trace` for each
    /// device whose trace shows signs of wrapping (a device whose trace shows none gets none).
    pub fn finish(self, blocks: &mut [BlockRow], info: &mut Vec<InfoRow>) {
        for block in blocks {
            let live = matches!(
                block.state.as_deref(),
                Some("active_allocated" | "active_pending_free")
            );
            let made_by = self
                .only_device
                .or(block.device)
                .zip(block.address)
                .filter(|_| live)
                .and_then(|key| self.live.get(&key))
                .and_then(Option::as_ref);
            if let Some((seq, metadata)) = made_by {
                block.alloc_seq = Some(i64::from(*seq));
                block.user_metadata = metadata.as_deref().map(str::to_string);
            }
        }
        let section = if self.section.is_empty() {
            "trace"
        } else {
            self.section
        };
        for (device, d) in self.devices.into_iter().enumerate() {
            let (device, entries, orphans) = (device as i64, d.entries, d.orphans);
            if orphans.is_empty() && entries != 1 {
                continue; // a complete trace, as far as it tells
            }
            let mut fact = |key: &str, value: String, value_type| {
                info.push(InfoRow {
                    section,
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
}

/// Where the rows of snap_traces go: batches of bounded rows and text handed to `emit` as they
/// fill, or every row held until [`TraceSink::finish`] (the plain decoder's walk, which numbers
/// forward stacks after the whole trace).
pub struct TraceSink<'e> {
    pub columns: TraceColumns,
    hold: bool,
    rows_limit: usize,
    text_limit: usize,
    /// Text bytes of the rows in `columns` (while not holding).
    text: usize,
    snapshot: String,
    table: TableDef,
    emit: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>,
    /// The error `emit` returned: the rows cannot be written, reading stops.
    pub failed: Option<MemqError>,
    pub facts: Facts,
    /// What the analyses need from the trace, derived as the rows go by.
    pub derive: crate::derive::Derive<'e>,
    /// Rows seen, and most rows held at once.
    pub rows: u64,
    pub peak_rows: usize,
}

impl<'e> TraceSink<'e> {
    pub fn new(
        snapshot: &str,
        hold: bool,
        (rows_limit, text_limit): (usize, usize),
        emit: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>,
    ) -> Self {
        TraceSink {
            columns: TraceColumns::new(),
            hold,
            rows_limit: rows_limit.max(1),
            text_limit,
            text: 0,
            snapshot: snapshot.to_string(),
            table: crate::schema::traces(),
            emit,
            failed: None,
            facts: Facts::default(),
            derive: crate::derive::Derive::new(snapshot),
            rows: 0,
            peak_rows: 0,
        }
    }

    /// A sink for another trace of the same snapshot (the host's), into `table`, holding its
    /// rows, with the same batch limits.
    pub fn sibling(
        &self,
        table: TableDef,
        emit: Box<dyn FnMut(RecordBatch) -> Result<()> + 'e>,
    ) -> TraceSink<'e> {
        let mut sink = TraceSink::new(
            &self.snapshot,
            true,
            (self.rows_limit, self.text_limit),
            emit,
        );
        sink.table = table;
        sink
    }

    /// Whether rows are held until the end (else they leave as batches fill).
    pub fn holds(&self) -> bool {
        self.hold
    }

    /// Appends a row (after handing out the batch it would overfill); returns its index in
    /// `columns`.
    pub fn push(&mut self, row: TraceRow) -> Result<usize> {
        self.facts.see(&row);
        let levels = self.derive.see(&row)?;
        if !self.hold {
            let len = |t: &Option<Cow<str>>| t.as_deref().map_or(0, str::len);
            let bytes = self.snapshot.len()
                + len(&row.action)
                + len(&row.compile_context)
                + len(&row.user_metadata)
                + row.extra_json.as_ref().map_or(0, String::len);
            let rows = self.columns.len();
            if rows > 0
                && (rows >= self.rows_limit || self.text.saturating_add(bytes) > self.text_limit)
            {
                self.flush()?;
            }
            self.text = self.text.saturating_add(bytes);
        }
        let index = self.columns.push(row);
        self.columns.levels.rows.push(levels);
        self.rows += 1;
        self.peak_rows = self.peak_rows.max(self.columns.len());
        Ok(index)
    }

    /// Hands out the rows held as one batch.
    fn flush(&mut self) -> Result<()> {
        if self.columns.len() == 0 {
            return Ok(());
        }
        let range = 0..self.columns.len();
        let batch = batches::traces(&self.table, &self.snapshot, &self.columns, range)?;
        self.columns.clear();
        self.text = 0;
        self.send(batch)
    }

    fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if let Err(e) = (self.emit)(batch) {
            let message = e.to_string();
            self.failed = Some(e);
            return Err(MemqError::Query(message));
        }
        Ok(())
    }

    /// Hands out every row still held, cut into batches as they would have been cut while
    /// streaming.
    pub fn finish(&mut self) -> Result<()> {
        if !self.hold {
            return self.flush();
        }
        let name = self.snapshot.len();
        let columns = &self.columns;
        let ranges = batches::chunks(columns.len(), self.rows_limit, self.text_limit, |i| {
            columns.text_bytes(i, name)
        });
        for range in ranges {
            let batch = batches::traces(&self.table, &self.snapshot, &self.columns, range)?;
            self.send(batch)?;
        }
        self.columns.clear();
        Ok(())
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

/// The decoder hook (see the module docs).
pub struct TraceStream<'b, 'e> {
    pub builder: &'b mut Builder<'e>,
    root: Option<Value>,
    lists: HashMap<ObjId, usize>,
    pub streamed: Vec<Streamed>,
    current: Option<ObjId>,
    keys: Keys,
    /// Why the hook gave up, when it did.
    pub gave_up: Option<String>,
}

impl<'b, 'e> TraceStream<'b, 'e> {
    pub fn new(builder: &'b mut Builder<'e>) -> Self {
        TraceStream {
            builder,
            root: None,
            lists: HashMap::default(),
            streamed: Vec::new(),
            current: None,
            keys: Keys::default(),
            gave_up: None,
        }
    }

    /// What was taken: the trace lists streamed.
    pub fn into_taken(self) -> Taken {
        Taken {
            lists: self.lists,
            streamed: self.streamed,
        }
    }

    fn give_up(&mut self, why: impl Into<String>) -> Abort {
        self.gave_up.get_or_insert_with(|| why.into());
        Abort
    }

    /// Before the first entry: the segments, already decoded and pending in the root dict, are
    /// read (their stacks numbered first, as without streaming) and frozen.
    fn start(&mut self, take: &mut Take<'_, '_>, root: Value) -> std::result::Result<(), Abort> {
        let arena = take.arena();
        let mut found = Vec::new();
        if let Some(items) = arena.dict(root) {
            found.extend(
                items
                    .iter()
                    .filter(|(key, _)| arena.str(*key) == Some("segments"))
                    .map(|&(_, value)| value),
            );
        }
        found.extend(
            take.pending(1)
                .chunks_exact(2)
                .filter(|pair| arena.str(pair[0]) == Some("segments"))
                .map(|pair| pair[1]),
        );
        let [segments] = found[..] else {
            return Err(self.give_up("the segments are not (once) before the trace"));
        };
        let walked = Walker::new(arena, self.builder).early_segments(segments);
        if let Err(e) = walked {
            return Err(self.give_up(format!("segments: {e}")));
        }
        take.freeze(segments);
        Ok(())
    }

    /// Entry `i` of the batch as a row: entries of the usual shape by the fast path, any other
    /// through the walker; every dict no one else holds is dropped from the tree, and its frame
    /// list (once nothing but the memo holds it) too.
    fn entry(
        &mut self,
        take: &mut Take<'_, '_>,
        i: usize,
        device: u32,
        seq: u32,
    ) -> std::result::Result<bool, Abort> {
        let arena = take.arena();
        let item = take.items()[i];
        let consumable = take.can_consume(i);
        let b = &mut *self.builder;
        let mut frames = None;
        let outcome = match clean(arena, &mut self.keys, item) {
            Some(entry) if consumable => {
                frames = Some(entry.frames);
                let stack = b.stack(arena, entry.frames);
                stack.and_then(|stack_id| {
                    let row = TraceRow {
                        device,
                        seq,
                        action: entry.action.map(Cow::Borrowed),
                        addr: entry.addr,
                        device_free: entry.device_free,
                        size: entry.size,
                        stream: entry.stream,
                        time_us: entry.time_us,
                        compile_context: entry.compile_context.map(Cow::Borrowed),
                        user_metadata: entry.user_metadata.map(Cow::Borrowed),
                        pool_id: entry.pool_id,
                        stack_id,
                        extra_json: None,
                    };
                    b.flush(&|| format!("device_traces[{device}][{seq}]"));
                    b.traces.push(row).map(|_| true)
                })
            }
            _ => Walker::new(arena, b).trace_entry(device as usize, seq as usize, item),
        };
        let is_row = match outcome {
            Ok(is_row) => is_row,
            Err(e) => return Err(self.give_up(format!("device_traces[{device}][{seq}]: {e}"))),
        };
        if consumable {
            take.consume(i);
            let frames = frames.or_else(|| frames_of(arena, item));
            if let Some(frames @ Value::Obj(_)) = frames {
                if let Some(stack) = self.builder.rows.stacks.id_of(frames) {
                    take.tag(frames, stack);
                }
            }
        }
        Ok(is_row)
    }
}

impl<'a> Hook<'a> for TraceStream<'_, '_> {
    fn append(&mut self, take: &mut Take<'_, 'a>) -> std::result::Result<bool, Abort> {
        let arena = take.arena();
        // device_traces[k] of the dict at the bottom of the stack.
        let Some(&[(traces, Slot::Index(device)), (root, Slot::Key(key))]) = take.place() else {
            return Ok(false);
        };
        if arena.str(key) != Some("device_traces")
            || arena.dict(root).is_none()
            || !matches!(arena.object(traces), Some(Object::List(_)))
        {
            return Ok(false);
        }
        if *self.root.get_or_insert(root) != root {
            return Err(self.give_up("a second snapshot dict"));
        }
        if !self.builder.traces_started {
            self.start(take, root)?;
        }
        let list = take.list();
        let index = match self.lists.get(&list) {
            Some(&index) => {
                if self.current != Some(list) || self.streamed[index].device != device {
                    return Err(self.give_up("trace lists filled out of order"));
                }
                index
            }
            None => {
                if arena
                    .sequence(Value::Obj(list))
                    .is_none_or(|items| !items.is_empty())
                {
                    return Err(self.give_up("a trace list partly filled before streaming"));
                }
                self.streamed.push(Streamed {
                    device,
                    first_row: self.builder.traces.rows,
                    rows: 0,
                    entries: 0,
                });
                self.lists.insert(list, self.streamed.len() - 1);
                self.current = Some(list);
                self.streamed.len() - 1
            }
        };
        let device = u32::try_from(device).map_err(|_| Abort)?;
        for i in 0..take.items().len() {
            let seq = self.streamed[index].entries;
            self.streamed[index].entries = seq.checked_add(1).ok_or(Abort)?;
            if self.entry(take, i, device, seq)? {
                self.streamed[index].rows += 1;
            }
        }
        Ok(true)
    }

    fn released(&mut self, ids: &[ObjId]) {
        self.builder.forget(ids);
        self.keys.forget(ids);
    }
}

/// The fields of a trace entry of the usual shape.
struct Clean<'t> {
    action: Option<&'t str>,
    addr: Option<u64>,
    device_free: Option<i64>,
    size: Option<i64>,
    stream: Option<i64>,
    time_us: Option<i64>,
    compile_context: Option<&'t str>,
    user_metadata: Option<&'t str>,
    pool_id: (Option<i64>, Option<i64>),
    frames: Value,
}

/// The field a key names, by the key's object: 0 not known yet, [`OTHER`] none of the usual.
const ACTION: u8 = 1;
const ADDR: u8 = 2;
const DEVICE_FREE: u8 = 3;
const SIZE: u8 = 4;
const STREAM: u8 = 5;
const TIME_US: u8 = 6;
const COMPILE_CONTEXT: u8 = 7;
const USER_METADATA: u8 = 8;
const POOL_ID: u8 = 9;
const FRAMES: u8 = 10;
const OTHER: u8 = 255;

/// The field of each key object seen (key strings are shared through the memo: each is matched
/// once), forgotten with the objects the decoder drops.
#[derive(Default)]
pub struct Keys(Vec<u8>);

impl Keys {
    fn field(&mut self, arena: &Arena, key: Value) -> u8 {
        let Value::Obj(id) = key else {
            return OTHER;
        };
        if let Some(&known) = self.0.get(id).filter(|&&k| k != 0) {
            return known;
        }
        let field = match arena.str(key) {
            Some("action") => ACTION,
            Some("addr") => ADDR,
            Some("device_free") => DEVICE_FREE,
            Some("size") => SIZE,
            Some("stream") => STREAM,
            Some("time_us") => TIME_US,
            Some("compile_context") => COMPILE_CONTEXT,
            Some("user_metadata") => USER_METADATA,
            Some("pool_id") => POOL_ID,
            Some("frames") => FRAMES,
            _ => OTHER,
        };
        if self.0.len() <= id {
            self.0.resize(arena.len().max(id + 1), 0);
        }
        self.0[id] = field;
        field
    }

    fn forget(&mut self, ids: &[ObjId]) {
        for &id in ids {
            if let Some(known) = self.0.get_mut(id) {
                *known = 0;
            }
        }
    }
}

/// The fields of an entry whose every key is known and every value of the expected type
/// (strings, ints that fit, None, a list for frames), which the walker would read without a
/// warning; `None` for any other entry.
fn clean<'t>(arena: &'t Arena, keys: &mut Keys, entry: Value) -> Option<Clean<'t>> {
    let fields = arena.dict(entry)?;
    let mut c = Clean {
        action: None,
        addr: None,
        device_free: None,
        size: None,
        stream: None,
        time_us: None,
        compile_context: None,
        user_metadata: None,
        pool_id: (None, None),
        frames: Value::None,
    };
    let int = |value: Value| match value {
        Value::Int(i) => Some(Some(i)),
        Value::None => Some(None),
        _ => None,
    };
    let text = |value: Value| match value {
        Value::None => Some(None),
        _ => arena.str(value).map(Some),
    };
    for &(key, value) in fields {
        match keys.field(arena, key) {
            ACTION => c.action = text(value)?,
            ADDR => {
                c.addr = match int(value)? {
                    Some(i) => Some(u64::try_from(i).ok()?),
                    None => None,
                }
            }
            DEVICE_FREE => c.device_free = int(value)?,
            SIZE => c.size = int(value)?,
            STREAM => c.stream = int(value)?,
            TIME_US => c.time_us = int(value)?,
            COMPILE_CONTEXT => c.compile_context = text(value)?,
            USER_METADATA => c.user_metadata = text(value)?,
            POOL_ID => {
                c.pool_id = match arena.sequence(value) {
                    Some(&[first, second]) => (int(first)?, int(second)?),
                    _ if value == Value::None => (None, None),
                    _ => return None,
                }
            }
            FRAMES => {
                c.frames = match value {
                    Value::None | Value::Tag(_) => value,
                    _ if arena.sequence(value).is_some() => value,
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
    Some(c)
}

/// The `frames` list of a trace entry (the last, as the walker reads it).
fn frames_of(arena: &Arena, entry: Value) -> Option<Value> {
    arena
        .dict(entry)?
        .iter()
        .rev()
        .find(|(key, _)| arena.str(*key) == Some("frames"))
        .map(|&(_, value)| value)
        .filter(|value| matches!(value, Value::Obj(_)))
}
