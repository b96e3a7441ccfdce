//! The trace table as columns, and the decoder hook that fills them while the pickle is decoded.
//!
//! A snapshot's bulk is its trace ring buffer (`device_traces`: one dict per allocator event).
//! [`TraceStream`] takes the entries of each `device_traces[k]` list as the decoder appends
//! them: an entry of the usual shape (known keys, values of the expected types, docs/formats/
//! snapshot.md §3) becomes a row of [`TraceColumns`] at once and is dropped from the decoded tree;
//! any other entry is left in the tree and read later by the walker exactly as before. Anything
//! order-dependent (stack ids, warnings) is done by the walker, in the same order as without
//! streaming. When the finished tree does not show the streamed lists at the places they were
//! taken for, the walker refuses the result and the pickle is decoded again without the hook.

use std::collections::BTreeMap;

use foldhash::HashMap;

use datafusion::arrow::array::BooleanBufferBuilder;
use memq_pickle::stream::{Abort, Hook, Slot, Take};
use memq_pickle::value::{Arena, ObjId, Object, Value};

use crate::tables::TraceRow;

/// In [`TraceColumns::action`]: no value; ids from [`OWNED`] up are owned strings.
pub const NULL_TEXT: u32 = u32::MAX;
const OWNED: u32 = 1 << 31;
/// In [`TraceColumns::frames`]: no frame list to read (None, or a row read by the walker).
pub const NO_FRAMES: u32 = u32::MAX;

/// A nullable integer column that can be set after the fact.
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

    fn set(&mut self, row: usize, value: Option<T>) {
        self.values[row] = value.unwrap_or_default();
        self.valid.set_bit(row, value.is_some());
    }

    pub fn get(&self, row: usize) -> Option<T> {
        self.valid.get_bit(row).then(|| self.values[row])
    }
}

/// The columns that are NULL in nearly every row, kept per row that has any.
#[derive(Debug, Default, Clone)]
pub struct Rare {
    pub device_free: Option<i64>,
    pub compile_context: Option<String>,
    pub user_metadata: Option<String>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub forward_stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

/// snap_traces, row by row in (device, seq) order.
pub struct TraceColumns {
    pub device: Vec<u32>,
    pub seq: Vec<u32>,
    /// Arena string ids, owned strings from [`OWNED`] up, or [`NULL_TEXT`].
    pub action: Vec<u32>,
    owned: Vec<String>,
    owned_ids: HashMap<String, u32>,
    pub addr: OptCol<u64>,
    pub size: OptCol<i64>,
    pub stream: OptCol<i64>,
    pub time_us: OptCol<i64>,
    /// Stack ids; 0 for none.
    pub stack_id: Vec<u32>,
    /// Frame lists of streamed rows still to be interned by the walker ([`NO_FRAMES`] for none).
    pub frames: Vec<u32>,
    pub rare: BTreeMap<u32, Rare>,
}

impl TraceColumns {
    pub fn new() -> Self {
        TraceColumns {
            device: Vec::new(),
            seq: Vec::new(),
            action: Vec::new(),
            owned: Vec::new(),
            owned_ids: HashMap::default(),
            addr: OptCol::new(),
            size: OptCol::new(),
            stream: OptCol::new(),
            time_us: OptCol::new(),
            stack_id: Vec::new(),
            frames: Vec::new(),
            rare: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.device.len()
    }

    /// The action of a row.
    pub fn action<'s>(&'s self, arena: &'s Arena, row: usize) -> Option<&'s str> {
        match self.action[row] {
            NULL_TEXT => None,
            id if id >= OWNED => Some(self.owned[(id - OWNED) as usize].as_str()),
            id => arena.str(Value::Obj(id as ObjId)),
        }
    }

    pub fn rare(&self, row: usize) -> Option<&Rare> {
        self.rare.get(&(row as u32))
    }

    fn own(&mut self, text: Option<String>) -> u32 {
        let Some(text) = text else {
            return NULL_TEXT;
        };
        if let Some(&id) = self.owned_ids.get(&text) {
            return id;
        }
        let id = OWNED + self.owned.len() as u32;
        self.owned.push(text.clone());
        self.owned_ids.insert(text, id);
        id
    }

    /// A row with only its place (filled later by [`TraceColumns::set_row`]).
    fn push_empty(&mut self, device: u32, seq: u32) -> usize {
        self.device.push(device);
        self.seq.push(seq);
        self.action.push(NULL_TEXT);
        self.addr.push(None);
        self.size.push(None);
        self.stream.push(None);
        self.time_us.push(None);
        self.stack_id.push(0);
        self.frames.push(NO_FRAMES);
        self.len() - 1
    }

    /// Appends a row read by the walker; returns its index.
    pub fn push_row(&mut self, row: TraceRow) -> usize {
        let index = self.push_empty(row.device as u32, row.seq as u32);
        self.set_row(index, row);
        index
    }

    /// Fills a row pushed empty.
    pub fn set_row(&mut self, index: usize, row: TraceRow) {
        self.device[index] = row.device as u32;
        self.seq[index] = row.seq as u32;
        self.action[index] = self.own(row.action);
        self.addr.set(index, row.addr);
        self.size.set(index, row.size);
        self.stream.set(index, row.stream);
        self.time_us.set(index, row.time_us);
        self.stack_id[index] = row.stack_id.map_or(0, |id| id as u32);
        let rare = Rare {
            device_free: row.device_free,
            compile_context: row.compile_context,
            user_metadata: row.user_metadata,
            pool_id: row.pool_id,
            forward_stack_id: row.forward_stack_id,
            extra_json: row.extra_json,
        };
        let empty = rare.device_free.is_none()
            && rare.compile_context.is_none()
            && rare.user_metadata.is_none()
            && rare.pool_id == (None, None)
            && rare.forward_stack_id.is_none()
            && rare.extra_json.is_none();
        if empty {
            self.rare.remove(&(index as u32));
        } else {
            self.rare.insert(index as u32, rare);
        }
    }

    pub fn set_forward_stack(&mut self, index: usize, stack: Option<i64>) {
        if stack.is_some() {
            self.rare.entry(index as u32).or_default().forward_stack_id = stack;
        } else if let Some(rare) = self.rare.get_mut(&(index as u32)) {
            rare.forward_stack_id = None;
        }
    }
}

/// An entry of a streamed list that the walker reads from the tree.
#[derive(Debug, Clone, Copy)]
pub struct Deferred {
    pub seq: u32,
    pub object: Value,
    /// Its row (pushed empty), for a dict; `None` for anything else (a warning, no row).
    pub row: Option<u32>,
}

/// One `device_traces[k]` list whose entries were taken while decoding.
#[derive(Debug)]
pub struct Streamed {
    pub device: usize,
    pub first_row: usize,
    pub rows: usize,
    /// Entries seen (the next seq).
    pub entries: u32,
    pub deferred: Vec<Deferred>,
}

/// The decoder hook (see the module docs).
pub struct TraceStream {
    root: Option<Value>,
    lists: HashMap<ObjId, usize>,
    pub streamed: Vec<Streamed>,
    current: Option<ObjId>,
    pub columns: TraceColumns,
}

impl TraceStream {
    pub fn new() -> Self {
        TraceStream {
            root: None,
            lists: HashMap::default(),
            streamed: Vec::new(),
            current: None,
            columns: TraceColumns::new(),
        }
    }

    /// The streamed list that is object `id`, if any.
    pub fn list(&self, id: ObjId) -> Option<usize> {
        self.lists.get(&id).copied()
    }
}

impl<'a> Hook<'a> for TraceStream {
    fn append(&mut self, take: &mut Take<'_, 'a>) -> Result<bool, Abort> {
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
            return Err(Abort);
        }
        let list = take.list();
        if (list as u64) >= u64::from(OWNED) {
            return Err(Abort);
        }
        let index = match self.lists.get(&list) {
            Some(&index) => {
                if self.current != Some(list) || self.streamed[index].device != device {
                    return Err(Abort);
                }
                index
            }
            None => {
                if arena
                    .sequence(Value::Obj(list))
                    .is_none_or(|items| !items.is_empty())
                {
                    return Ok(false);
                }
                self.streamed.push(Streamed {
                    device,
                    first_row: self.columns.len(),
                    rows: 0,
                    entries: 0,
                    deferred: Vec::new(),
                });
                self.lists.insert(list, self.streamed.len() - 1);
                self.current = Some(list);
                self.streamed.len() - 1
            }
        };
        let device = u32::try_from(device).map_err(|_| Abort)?;
        for i in 0..take.items().len() {
            let item = take.items()[i];
            let s = &mut self.streamed[index];
            let seq = s.entries;
            s.entries = s.entries.checked_add(1).ok_or(Abort)?;
            if take.can_consume(i) && clean(arena, item, &mut self.columns, device, seq) {
                take.consume(i);
            } else {
                let row = arena
                    .dict(item)
                    .map(|_| self.columns.push_empty(device, seq) as u32);
                s.deferred.push(Deferred {
                    seq,
                    object: item,
                    row,
                });
            }
            s.rows = self.columns.len() - s.first_row;
        }
        Ok(true)
    }
}

/// Appends the row of a trace entry of the usual shape and returns `true`; returns `false`
/// (appending nothing) for any entry the walker must read: unknown keys, values of other types,
/// the rare fields.
fn clean(arena: &Arena, entry: Value, columns: &mut TraceColumns, device: u32, seq: u32) -> bool {
    let Some(fields) = arena.dict(entry) else {
        return false;
    };
    let (mut action, mut frames) = (NULL_TEXT, NO_FRAMES);
    let (mut addr, mut size, mut stream, mut time_us) = (None, None, None, None);
    for &(key, value) in fields {
        let int = |value: Value| match value {
            Value::Int(i) => Some(Some(i)),
            Value::None => Some(None),
            _ => None,
        };
        let ok = match arena.str(key) {
            Some("action") => match value {
                Value::None => {
                    action = NULL_TEXT;
                    true
                }
                Value::Obj(id) if arena.str(value).is_some() && (id as u64) < u64::from(OWNED) => {
                    action = id as u32;
                    true
                }
                _ => false,
            },
            Some("addr") => match int(value) {
                Some(Some(i)) if i >= 0 => {
                    addr = Some(i as u64);
                    true
                }
                Some(None) => {
                    addr = None;
                    true
                }
                _ => false,
            },
            Some("size") => int(value).map(|v| size = v).is_some(),
            Some("stream") => int(value).map(|v| stream = v).is_some(),
            Some("time_us") => int(value).map(|v| time_us = v).is_some(),
            Some("frames") => match value {
                Value::None => {
                    frames = NO_FRAMES;
                    true
                }
                Value::Obj(id)
                    if arena.sequence(value).is_some() && (id as u64) < u64::from(NO_FRAMES) =>
                {
                    frames = id as u32;
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    let row = columns.push_empty(device, seq);
    columns.action[row] = action;
    columns.addr.set(row, addr);
    columns.size.set(row, size);
    columns.stream.set(row, stream);
    columns.time_us.set(row, time_us);
    columns.frames[row] = frames;
    true
}
