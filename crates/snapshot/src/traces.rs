//! The trace table, streamed: the decoder hook ([`TraceStream`]) turns each trace entry into a
//! row as it is decoded and the rows leave in bounded batches.
//!
//! A snapshot's bulk is its trace ring buffer (`device_traces`: one dict per allocator event).
//! [`TraceStream`] takes the entries of each `device_traces[k]` list as the decoder appends them.
//! At the first one it reads the snapshot's segments (already decoded: PyTorch writes them
//! first), so that stack ids are numbered as without streaming (segments, then the trace).
//! Each entry then becomes a row of [`TraceColumns`](crate::trace_columns::TraceColumns) at
//! once — an entry of the usual shape (docs/formats/snapshot.md §1.5) by a fast path, any other
//! through the walker's reading — and is dropped from the decoded tree, with its frame list once
//! interned (the memo hands out its stack id). [`TraceSink`](crate::trace_sink::TraceSink) hands
//! the rows out as Arrow batches of bounded rows and text, so what is held stays bounded
//! whatever the size of the trace.
//!
//! What cannot be numbered or checked while decoding (the trace lists before the segments,
//! `forward_frames`, whose stacks are numbered after every other, a trace list or entry
//! reached twice) makes the hook give up: the pickle is then decoded again the plain way, the
//! rows held until the walk ends, so results and errors are those of the plain decoder.

use std::borrow::Cow;

use foldhash::HashMap;

use memq_pickle::stream::{Abort, Hook, Slot, Take};
use memq_pickle::value::{Arena, ObjId, Object, Value};

use crate::rows::TraceRow;
use crate::tables::{Builder, Streamed, Taken, Walker};

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
