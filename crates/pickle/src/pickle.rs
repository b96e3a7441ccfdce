//! A data-only pickle decoder (protocols 0 to 5), written for untrusted snapshot files.
//!
//! Protocols 0 and 1 have no PROTO header: such a pickle is recognised by its first opcode
//! (MARK, EMPTY_DICT or EMPTY_LIST: a snapshot is a dict or a list), and protocol 0's text
//! opcodes (INT, LONG, FLOAT, UNICODE, STRING, PUT, GET) are read as data like the binary ones.
//!
//! It runs the pickle stack machine over the data opcodes only. Every opcode that would import,
//! call or fetch something (GLOBAL, REDUCE, BUILD, PERSID, out-of-band buffers, ...) is refused
//! with its name and byte offset. Every length is checked against the bytes left before anything
//! is allocated, and the memo stores references into an [`Arena`], never copies.
//!
//! The pickle is either held in memory ([`decode`]: strings borrow from it) or read from a
//! reader through a bounded buffer ([`decode_read`]: strings are copied out), so that a file is
//! never held whole.
//!
//! A container may only be modified while it is not yet inside another container. The pickler
//! always completes a container before placing it, so this holds for every real file, and it
//! makes reference cycles impossible: the last link that closes a cycle would have to modify a
//! container already placed. Nesting is limited to [`MAX_DEPTH`] levels, so code that walks the
//! result recursively is safe.

use std::borrow::Cow;
use std::io::Read;
use std::ops::Range;

use super::input::{Input, ReadInput, SliceInput, MAX_LINE};
use super::opcode as op;
use super::stream::{Hook, Slot, Take, STREAM_CONFLICT};
use super::value::{a, Arena, ObjId, Object, Tag, Value};

/// Deepest container nesting accepted (real snapshots nest 7 levels).
pub const MAX_DEPTH: u16 = 100;
/// Most MARKs open at once (real snapshots: 7).
const MAX_MARKS: usize = 64;
/// Longest integer payload accepted, in bytes: everything fits an i128.
const MAX_INT_BYTES: usize = 16;
/// How many leading bytes of a non-pickle file the error shows.
const PREVIEW_BYTES: usize = 48;

/// A decoded pickle.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub arena: Arena<'a>,
    pub root: Value,
    /// The protocol named by the header.
    pub protocol: u8,
    /// Harmless oddities worth reporting: trailing bytes, invalid UTF-8 in strings.
    pub warnings: Vec<String>,
    /// What the decoder held at most.
    pub stats: Stats,
}

/// What a decode held in memory at most: with a streaming hook these stay bounded by what the
/// hook keeps, not by the size of the pickle.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stats {
    /// Most objects held at once (the arena's size: the ids of dropped objects are reused).
    pub objects: usize,
    /// Most memo slots held at once.
    pub memo_slots: usize,
    /// Objects dropped while decoding (consumed or tagged by the hook).
    pub released: usize,
}

/// Why decoding stopped, at which byte offset (that of the offending opcode).
#[derive(Debug, PartialEq)]
pub struct DecodeError {
    pub offset: u64,
    pub reason: String,
}

/// Decodes a whole pickle held in memory.
pub fn decode(data: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    Machine::new(SliceInput::new(data), None).run()
}

/// [`decode`] with a [`Hook`] that may take the items of lists as they are appended (see
/// [`crate::stream`]). An error whose reason contains [`STREAM_CONFLICT`] means the taken
/// items were referenced again: decode again without the hook.
pub fn decode_with<'a>(
    data: &'a [u8],
    hook: &mut dyn Hook<'a>,
) -> Result<Decoded<'a>, DecodeError> {
    Machine::new(SliceInput::new(data), Some(hook)).run()
}

/// Decodes the `len` bytes of pickle `reader` yields, read through a buffer of bounded size
/// (strings are copied out of it), with or without a [`Hook`] (as [`decode_with`]). Results
/// and errors are those of [`decode`] on the same bytes; a reader that fails, or ends before
/// `len` bytes, is an error at the offset reached.
pub fn decode_read<R: Read>(
    reader: R,
    len: u64,
    hook: Option<&mut dyn Hook<'static>>,
) -> Result<Decoded<'static>, DecodeError> {
    let len = usize::try_from(len).map_err(|_| DecodeError {
        offset: 0,
        reason: format!("a pickle of {len} bytes is too large for this machine"),
    })?;
    Machine::new(ReadInput::new(reader, len), hook).run()
}

/// Per-object streaming flags.
const PINNED: u8 = 1;
const TAKEN: u8 = 2;
const FREED: u8 = 4;
/// In `memo_slot`: no memo slot, or more than one.
const NO_SLOT: u32 = u32::MAX;
const MANY_SLOTS: u32 = u32::MAX - 1;
/// A memo slot whose object was consumed by the hook.
const DEAD: Value = Value::Obj(usize::MAX);

/// What a file starts with, as text when it reads as text, else as hex bytes. `head` is the
/// start of a file of `len` bytes.
fn preview(head: &[u8], len: usize) -> String {
    if len == 0 {
        return "the file is empty".to_string();
    }
    let head = &head[..head.len().min(PREVIEW_BYTES)];
    let more = if head.len() < len { " …" } else { "" };
    let text = match std::str::from_utf8(head) {
        Ok(text) => Some(text),
        // A multi-byte character cut by the preview length.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).ok(),
        Err(_) => None,
    };
    match text {
        Some(text)
            if text
                .chars()
                .all(|c| !c.is_control() || c == '\n' || c == '\t') =>
        {
            format!("starts with text '{}{more}'", text.escape_default())
        }
        _ => {
            let hex: Vec<String> = head.iter().take(16).map(|b| format!("{b:02x}")).collect();
            let more = if len > 16 { " …" } else { "" };
            format!("starts with bytes {}{more}", hex.join(" "))
        }
    }
}

/// An error of the reader under the decoder, at byte offset `at`.
#[cold]
fn io_error(at: usize, e: std::io::Error) -> DecodeError {
    DecodeError {
        offset: at as u64,
        reason: format!("cannot read the pickle: {e}"),
    }
}

/// Memo slots per page of the [`Memo`].
const PAGE: usize = 1024;
/// Words of a [`Sparse`] page's bitmap.
const WORDS: usize = PAGE / 64;

/// One page of memo slots.
enum Page {
    /// Every slot: `None` never stored, [`DEAD`] consumed.
    Dense {
        slots: Box<[Option<Value>]>,
        filled: u16,
        live: u16,
    },
    /// A page whose every slot was stored, holding only the slots not consumed.
    Sparse(Box<Sparse>),
}

/// The live slots of a full page: a missing slot is a consumed one. Found in constant time
/// (a bitmap of the slots held, with the count of those before each word). A value consumed
/// later stays as [`DEAD`] until half of them are: then the page is rebuilt.
struct Sparse {
    bits: [u64; WORDS],
    before: [u16; WORDS],
    /// The values held, by slot.
    values: Vec<Value>,
    dead: usize,
}

impl Sparse {
    /// The live values of `slots` (a full page).
    fn of(slots: &[Option<Value>]) -> Sparse {
        let mut sparse = Sparse {
            bits: [0; WORDS],
            before: [0; WORDS],
            values: Vec::new(),
            dead: 0,
        };
        for (i, value) in slots.iter().enumerate() {
            if i % 64 == 0 {
                sparse.before[i / 64] = sparse.values.len() as u16;
            }
            if let Some(value) = value.filter(|v| *v != DEAD) {
                sparse.bits[i / 64] |= 1 << (i % 64);
                sparse.values.push(value);
            }
        }
        sparse
    }

    /// Where slot `slot`'s value is in `values`: `Ok` when it holds one, else `Err` with where
    /// it would go.
    #[inline]
    fn position(&self, slot: usize) -> Result<usize, usize> {
        let (word, bit) = (slot / 64, slot % 64);
        let below = self.bits[word] & ((1u64 << bit) - 1);
        let index = usize::from(self.before[word]) + below.count_ones() as usize;
        if self.bits[word] >> bit & 1 == 1 {
            Ok(index)
        } else {
            Err(index)
        }
    }

    /// The values held (live or not yet rebuilt away).
    fn held(&self) -> usize {
        self.values.len()
    }

    /// Stores `value` in `slot`.
    fn set(&mut self, slot: usize, value: Value) {
        match self.position(slot) {
            Ok(index) => {
                if self.values[index] == DEAD {
                    self.dead -= 1;
                }
                self.values[index] = value;
            }
            Err(index) => {
                self.values.insert(index, value);
                self.bits[slot / 64] |= 1 << (slot % 64);
                for before in &mut self.before[slot / 64 + 1..] {
                    *before += 1;
                }
            }
        }
    }

    /// The value at `index` of `values` was consumed.
    fn kill(&mut self, index: usize) {
        self.values[index] = DEAD;
        self.dead += 1;
        if self.dead * 2 > self.values.len() {
            let mut slots = vec![None; PAGE];
            for (slot, value) in slots.iter_mut().enumerate() {
                if let Ok(i) = self.position(slot) {
                    *value = Some(self.values[i]);
                }
            }
            *self = Sparse::of(&slots);
        }
    }
}

/// The memo, in pages: with a streaming hook a page whose slots were all stored is shrunk to
/// the slots whose objects were not consumed, so the memo of a long trace holds its live values
/// only (frames, strings, the tags of dropped frame lists: a slot each), not a slot per consumed
/// entry.
struct Memo {
    pages: Vec<Option<Page>>,
    /// Filled slots (Python's `len(memo)`).
    count: usize,
    /// Shrink pages (streaming only: without a hook nothing is ever consumed).
    compact: bool,
    held: usize,
    peak: usize,
}

impl Memo {
    fn new(compact: bool) -> Memo {
        Memo {
            pages: Vec::new(),
            count: 0,
            compact,
            held: 0,
            peak: 0,
        }
    }

    /// The value in slot `index`: `None` when nothing was stored there, [`DEAD`] when its
    /// object was consumed.
    #[inline]
    fn get(&self, index: usize) -> Option<&Value> {
        match self.pages.get(index / PAGE) {
            Some(Some(Page::Dense { slots, .. })) => slots[index % PAGE].as_ref(),
            Some(Some(Page::Sparse(sparse))) => match sparse.position(index % PAGE) {
                Ok(i) => Some(&sparse.values[i]),
                Err(_) => Some(&DEAD),
            },
            _ => None,
        }
    }

    /// Stores `value` at `index` (bounded by the caller).
    fn put(&mut self, index: usize, value: Value) {
        let (page, slot) = (index / PAGE, index % PAGE);
        if page >= self.pages.len() {
            self.pages.resize_with(page + 1, || None);
        }
        let entry = self.pages[page].get_or_insert_with(|| {
            self.held += PAGE;
            self.peak = self.peak.max(self.held);
            Page::Dense {
                slots: vec![None; PAGE].into_boxed_slice(),
                filled: 0,
                live: 0,
            }
        });
        match entry {
            Page::Dense {
                slots,
                filled,
                live,
            } => match slots[slot].replace(value) {
                None => {
                    self.count += 1;
                    *filled += 1;
                    *live += 1;
                }
                Some(DEAD) => *live += 1,
                Some(_) => {}
            },
            Page::Sparse(sparse) => {
                self.held -= sparse.held();
                sparse.set(slot, value);
                self.held += sparse.held();
                self.peak = self.peak.max(self.held);
            }
        }
        self.shrink(page);
    }

    /// The slot at `index` held object `id`, which was dropped: it now holds `replacement`
    /// ([`DEAD`], or the object's tag).
    fn replace(&mut self, index: usize, id: ObjId, replacement: Value) {
        let (page, slot) = (index / PAGE, index % PAGE);
        match self.pages.get_mut(page) {
            Some(Some(Page::Dense { slots, live, .. })) if slots[slot] == Some(Value::Obj(id)) => {
                slots[slot] = Some(replacement);
                if replacement == DEAD {
                    *live -= 1;
                }
            }
            Some(Some(Page::Sparse(sparse))) => {
                if let Ok(i) = sparse.position(slot) {
                    if sparse.values[i] == Value::Obj(id) {
                        if replacement == DEAD {
                            self.held -= sparse.held();
                            sparse.kill(i);
                            self.held += sparse.held();
                        } else {
                            sparse.values[i] = replacement;
                        }
                    }
                }
            }
            _ => {}
        }
        self.shrink(page);
    }

    /// A full page of which a quarter or more was consumed becomes sparse.
    fn shrink(&mut self, page: usize) {
        if !self.compact {
            return;
        }
        let Some(Some(Page::Dense {
            slots,
            filled,
            live,
        })) = self.pages.get(page)
        else {
            return;
        };
        if usize::from(*filled) < PAGE || usize::from(*live) * 4 >= PAGE {
            return;
        }
        let sparse = Sparse::of(slots);
        self.held = self.held - PAGE + sparse.held();
        self.pages[page] = Some(Page::Sparse(Box::new(sparse)));
    }
}

/// The pickle stack machine.
struct Machine<'a, 'h, I> {
    input: I,
    /// Streaming (crate::stream): the hook, per-object flags, memo slot and holders (values on
    /// the stack, in containers, or kept by the hook; the memo does not count), reusable ids.
    hook: Option<&'h mut dyn Hook<'a>>,
    flags: Vec<u8>,
    memo_slot: Vec<u32>,
    holders: Vec<u32>,
    free_ids: Vec<ObjId>,
    /// Ids dropped since the hook was last told.
    released: Vec<ObjId>,
    /// Offset and byte of the opcode being executed.
    at: usize,
    op: u8,
    /// The value stack; MARKs are positions in it.
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: Memo,
    arena: Arena<'a>,
    /// Per object: it has been placed inside a container, so it may no longer be modified.
    placed: Vec<bool>,
    /// Per object: nesting height (0 for strings and bytes, 1 + deepest item for containers).
    height: Vec<u16>,
    protocol: u8,
    /// The pickle has no PROTO header (protocol 0 or 1), and whether a binary opcode of
    /// protocol 1 was seen in it (else it is protocol 0, all text).
    headerless: bool,
    binary: bool,
    opcodes: usize,
    /// Strings that were not valid UTF-8: how many, and the offset of the first.
    invalid_utf8: Option<(usize, usize)>,
    released_total: usize,
}

impl<'a, 'h, I: Input<'a>> Machine<'a, 'h, I> {
    fn new(input: I, hook: Option<&'h mut dyn Hook<'a>>) -> Self {
        // Every object costs at least two bytes of pickle, so without a hook these capacities
        // are bounded by the input's size and spare the vectors most of their regrowth copies.
        // A hook keeps the arena small: it grows as needed.
        let streaming = hook.is_some();
        let objects = if streaming { 1 << 12 } else { input.len() / 8 };
        let side = if streaming { objects } else { 0 };
        Machine {
            input,
            hook,
            flags: Vec::with_capacity(side),
            memo_slot: Vec::with_capacity(side),
            holders: Vec::with_capacity(side),
            free_ids: Vec::new(),
            released: Vec::new(),
            at: 0,
            op: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Memo::new(streaming),
            arena: Arena::with_capacity(objects),
            placed: Vec::with_capacity(objects),
            height: Vec::with_capacity(objects),
            protocol: 0,
            headerless: false,
            binary: false,
            opcodes: 0,
            invalid_utf8: None,
            released_total: 0,
        }
    }

    fn run(mut self) -> Result<Decoded<'a>, DecodeError> {
        let len = self.input.len();
        let head = self.input.peek(PREVIEW_BYTES).map_err(|e| io_error(0, e))?;
        // Protocols 0 and 1 start with the top object's first opcode; a snapshot is a dict or a
        // list, so only those openings are taken for a pickle without header.
        self.headerless = matches!(
            head.first(),
            Some(&(op::MARK | op::EMPTY_DICT | op::EMPTY_LIST))
        );
        if head.first() != Some(&op::PROTO) && !self.headerless {
            return Err(DecodeError {
                offset: 0,
                reason: format!("not a pickle ({})", preview(head, len)),
            });
        }
        loop {
            self.at = self.input.pos();
            let byte = match self.input.byte() {
                Ok(Some(byte)) => byte,
                Ok(None) => {
                    return Err(DecodeError {
                        offset: len as u64,
                        reason: "truncated: the pickle ends without a STOP opcode".to_string(),
                    })
                }
                Err(e) => return Err(io_error(self.at, e)),
            };
            self.op = byte;
            self.opcodes += 1;
            if byte == op::STOP {
                return self.finish();
            }
            self.execute()?;
        }
    }

    fn finish(mut self) -> Result<Decoded<'a>, DecodeError> {
        let root = self.pop()?;
        if !self.stack.is_empty() || !self.marks.is_empty() {
            return Err(self.error(format!(
                "the pickle ends with {} unused values and {} open MARKs",
                self.stack.len(),
                self.marks.len()
            )));
        }
        let mut warnings = Vec::new();
        let trailing = self.input.len() - self.input.pos();
        if trailing > 0 {
            warnings.push(format!(
                "{trailing} bytes after the STOP opcode at byte offset {} were ignored",
                self.at
            ));
        }
        if let Some((count, first)) = self.invalid_utf8 {
            warnings.push(format!(
                "{count} strings are not valid UTF-8 (first at byte offset {first}); invalid \
                 sequences were replaced by U+FFFD"
            ));
        }
        if self.headerless && self.protocol == 0 {
            self.protocol = u8::from(self.binary);
        }
        let stats = Stats {
            objects: self.arena.len(),
            memo_slots: self.memo.peak,
            released: self.released_total,
        };
        Ok(Decoded {
            arena: self.arena,
            root,
            protocol: self.protocol,
            warnings,
            stats,
        })
    }

    fn execute(&mut self) -> Result<(), DecodeError> {
        if self.headerless && !self.binary && is_binary(self.op) {
            self.binary = true;
        }
        match self.op {
            op::PROTO => {
                let version = self.take(1)?[0];
                if version > 5 {
                    return Err(self.error(format!(
                        "pickle protocol {version} is not supported (memq reads protocols 0 to 5)"
                    )));
                }
                self.protocol = version;
            }
            op::FRAME => {
                // Only a read-ahead hint: validated, never used to allocate.
                let length = self.uint(8)?;
                let left = self.left();
                if length > left as u64 {
                    return Err(self.error(format!(
                        "claims a frame of {length} bytes but only {left} bytes remain (truncated)"
                    )));
                }
            }
            op::MARK => {
                if self.marks.len() >= MAX_MARKS {
                    return Err(self.error(format!("more than {MAX_MARKS} nested MARKs")));
                }
                self.marks.push(self.stack.len());
            }
            op::POP => {
                if self.stack.len() > self.frame_start() {
                    if let Some(value) = self.stack.pop() {
                        self.unhold(value);
                    }
                } else {
                    self.mark_start()?;
                }
            }
            op::POP_MARK => {
                let start = self.mark_start()?;
                if self.hook.is_some() {
                    for i in start..self.stack.len() {
                        self.unhold(self.stack[i]);
                    }
                }
                self.stack.truncate(start);
            }
            op::DUP => {
                let top = self.top()?;
                self.pin(top)?;
                self.hold(top);
                self.stack.push(top);
            }

            op::NONE => self.stack.push(Value::None),
            op::NEWTRUE => self.stack.push(Value::Bool(true)),
            op::NEWFALSE => self.stack.push(Value::Bool(false)),
            op::BININT => {
                let bytes = self.take(4)?;
                let value = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                self.stack.push(Value::Int(value.into()));
            }
            op::BININT1 => {
                let value = self.uint(1)?;
                self.push_int(value.into());
            }
            op::BININT2 => {
                let value = self.uint(2)?;
                self.push_int(value.into());
            }
            op::LONG1 => {
                let length = self.uint(1)?;
                self.long(length as usize)?;
            }
            op::LONG4 => {
                let length = self.int4_length()?;
                self.long(length)?;
            }
            op::INT => {
                let line = self.line()?;
                match &line[..] {
                    b"00" => self.stack.push(Value::Bool(false)),
                    b"01" => self.stack.push(Value::Bool(true)),
                    _ => {
                        let value = self.parse_line::<i128>(&line)?;
                        self.push_int(value);
                    }
                }
            }
            op::LONG => {
                let line = self.line()?;
                let digits = line.strip_suffix(b"L").unwrap_or(&line);
                let value = self.parse_line::<i128>(digits)?;
                self.push_int(value);
            }
            op::BINFLOAT => {
                let bytes = self.take(8)?;
                let mut be = [0u8; 8];
                be.copy_from_slice(bytes);
                self.stack.push(Value::Float(f64::from_be_bytes(be)));
            }
            op::FLOAT => {
                let line = self.line()?;
                let value = self.parse_line::<f64>(&line)?;
                self.stack.push(Value::Float(value));
            }

            op::SHORT_BINUNICODE | op::SHORT_BINSTRING => {
                let bytes = self.sized(1)?;
                self.push_str(bytes);
            }
            op::BINUNICODE => {
                let bytes = self.sized(4)?;
                self.push_str(bytes);
            }
            op::BINUNICODE8 => {
                let bytes = self.sized(8)?;
                self.push_str(bytes);
            }
            op::BINSTRING => {
                let length = self.int4_length()?;
                let bytes = self.keep(length)?;
                self.push_str(bytes);
            }
            op::SHORT_BINBYTES => {
                let bytes = self.sized(1)?;
                self.push_object(Object::Bytes(bytes), 0);
            }
            op::BINBYTES => {
                let bytes = self.sized(4)?;
                self.push_object(Object::Bytes(bytes), 0);
            }
            op::BINBYTES8 | op::BYTEARRAY8 => {
                let bytes = self.sized(8)?;
                self.push_object(Object::Bytes(bytes), 0);
            }

            op::EMPTY_TUPLE => self.push_object(Object::Tuple(Vec::new()), 1),
            op::TUPLE1 => self.tuple_of_top(1)?,
            op::TUPLE2 => self.tuple_of_top(2)?,
            op::TUPLE3 => self.tuple_of_top(3)?,
            op::TUPLE => {
                let (items, height) = self.take_from_mark()?;
                self.push_object(Object::Tuple(items), height);
            }
            op::EMPTY_LIST => self.push_object(Object::List(Vec::new()), 1),
            op::LIST => {
                let (items, height) = self.take_from_mark()?;
                self.push_object(Object::List(items), height);
            }
            op::APPEND => {
                let start = self.top_start(1)?;
                self.add_items_from(start)?;
            }
            op::APPENDS | op::ADDITEMS => {
                let start = self.mark_start()?;
                self.add_items_from(start)?;
            }
            op::EMPTY_DICT => self.push_object(Object::Dict(Vec::new()), 1),
            op::DICT => {
                let start = self.mark_start()?;
                let height = self.place_from(start)?;
                let pairs = self.pairs_from(start)?;
                self.push_object(Object::Dict(pairs), height);
            }
            op::SETITEM => {
                let start = self.top_start(2)?;
                self.add_items_from(start)?;
            }
            op::SETITEMS => {
                let start = self.mark_start()?;
                self.add_items_from(start)?;
            }
            op::EMPTY_SET => self.push_object(Object::Set(Vec::new()), 1),
            op::FROZENSET => {
                let (items, height) = self.take_from_mark()?;
                self.push_object(Object::Set(items), height);
            }

            op::MEMOIZE => self.memo_put(self.memo.count)?,
            op::BINPUT => {
                let index = self.uint(1)?;
                self.memo_put(index as usize)?;
            }
            op::LONG_BINPUT => {
                let index = self.uint(4)?;
                self.memo_put(index as usize)?;
            }
            op::PUT => {
                let line = self.line()?;
                let index = self.parse_line::<usize>(&line)?;
                self.memo_put(index)?;
            }
            op::BINGET => {
                let index = self.uint(1)?;
                self.memo_get(index as usize)?;
            }
            op::LONG_BINGET => {
                let index = self.uint(4)?;
                self.memo_get(index as usize)?;
            }
            op::GET => {
                let line = self.line()?;
                let index = self.parse_line::<usize>(&line)?;
                self.memo_get(index)?;
            }

            op::GLOBAL
            | op::STACK_GLOBAL
            | op::REDUCE
            | op::BUILD
            | op::INST
            | op::OBJ
            | op::NEWOBJ
            | op::NEWOBJ_EX
            | op::EXT1
            | op::EXT2
            | op::EXT4
            | op::PERSID
            | op::BINPERSID
            | op::NEXT_BUFFER
            | op::READONLY_BUFFER => {
                return Err(self.error(
                    "is not allowed in a data-only snapshot (it imports, calls or fetches objects)",
                ));
            }
            op::UNICODE => {
                let line = self.text_line()?;
                let (text, invalid) = raw_unicode_escape(&line);
                if invalid {
                    self.note_invalid_utf8();
                }
                self.push_object(Object::Str(Cow::Owned(text)), 0);
            }
            op::STRING => {
                let line = self.text_line()?;
                let bytes = match quoted(&line) {
                    Some(inner) => escape_decode(inner),
                    None => {
                        return Err(self.error(format!(
                            "has a malformed operand '{}' (not a quoted string)",
                            String::from_utf8_lossy(&line[..line.len().min(64)]).escape_default()
                        )))
                    }
                };
                self.push_str(Cow::Owned(bytes));
            }
            other => {
                return Err(DecodeError {
                    offset: self.at as u64,
                    reason: format!("byte 0x{other:02x} is not a pickle opcode"),
                });
            }
        }
        Ok(())
    }

    /// An error at the current opcode, naming it.
    #[cold]
    #[inline(never)]
    fn error(&self, reason: impl std::fmt::Display) -> DecodeError {
        DecodeError {
            offset: self.at as u64,
            reason: format!(
                "opcode 0x{:02x} {} {reason}",
                self.op,
                op::name(self.op).unwrap_or("?")
            ),
        }
    }

    // Reading operands.

    /// Bytes left after the read position.
    #[inline]
    fn left(&self) -> usize {
        self.input.len() - self.input.pos()
    }

    #[inline]
    fn take(&mut self, length: usize) -> Result<&[u8], DecodeError> {
        let left = self.left();
        if length > left {
            return Err(self.truncated(length, left));
        }
        let at = self.input.pos();
        self.input.bytes(length).map_err(|e| io_error(at, e))
    }

    /// [`Self::take`] for bytes the decoded value keeps.
    fn keep(&mut self, length: usize) -> Result<Cow<'a, [u8]>, DecodeError> {
        let left = self.left();
        if length > left {
            return Err(self.truncated(length, left));
        }
        let at = self.input.pos();
        self.input.keep(length).map_err(|e| io_error(at, e))
    }

    #[cold]
    fn truncated(&self, length: usize, left: usize) -> DecodeError {
        self.error(format!(
            "needs {length} bytes but only {left} remain (truncated)"
        ))
    }

    /// A little-endian unsigned integer of `width` bytes (1, 2, 4 or 8: every call passes a
    /// constant, so each becomes a single load).
    #[inline]
    fn uint(&mut self, width: usize) -> Result<u64, DecodeError> {
        let bytes = self.take(width)?;
        Ok(match *bytes {
            [b0] => b0.into(),
            [b0, b1] => u16::from_le_bytes([b0, b1]).into(),
            [b0, b1, b2, b3] => u32::from_le_bytes([b0, b1, b2, b3]).into(),
            _ => {
                let mut le = [0u8; 8];
                le[..width].copy_from_slice(bytes);
                u64::from_le_bytes(le)
            }
        })
    }

    /// A length prefix of `width` bytes followed by that many bytes.
    fn sized(&mut self, width: usize) -> Result<Cow<'a, [u8]>, DecodeError> {
        let length = self.uint(width)?;
        let left = self.left();
        if length > left as u64 {
            return Err(self.error(format!(
                "claims {length} bytes but only {left} remain (truncated or corrupt)"
            )));
        }
        self.keep(length as usize)
    }

    /// A signed 4-byte length (BINSTRING, LONG4), which must not be negative.
    fn int4_length(&mut self) -> Result<usize, DecodeError> {
        let bytes = self.take(4)?;
        let length = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        usize::try_from(length).map_err(|_| self.error(format!("has negative length {length}")))
    }

    /// A newline-terminated operand of the text opcodes, without the newline.
    fn line(&mut self) -> Result<Vec<u8>, DecodeError> {
        let (at, left) = (self.input.pos(), self.left());
        match self.input.line() {
            Ok(Some(line)) => Ok(line.to_vec()),
            Ok(None) if left <= MAX_LINE => {
                Err(self.error("has no terminating newline (truncated)"))
            }
            Ok(None) => Err(self.error(format!(
                "has no terminating newline within {MAX_LINE} bytes (corrupt)"
            ))),
            Err(e) => Err(io_error(at, e)),
        }
    }

    /// The newline-terminated operand of UNICODE and STRING, of any length (a string as long
    /// as the input has bytes left), without the newline.
    fn text_line(&mut self) -> Result<Vec<u8>, DecodeError> {
        let at = self.input.pos();
        match self.input.long_line() {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(self.error("has no terminating newline (truncated)")),
            Err(e) => Err(io_error(at, e)),
        }
    }

    fn parse_line<T: std::str::FromStr>(&self, line: &[u8]) -> Result<T, DecodeError> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .ok_or_else(|| {
                self.error(format!(
                    "has a malformed operand '{}'",
                    String::from_utf8_lossy(line).escape_default()
                ))
            })
    }

    /// A little-endian two's-complement integer of `length` bytes (LONG1, LONG4).
    fn long(&mut self, length: usize) -> Result<(), DecodeError> {
        let left = self.left();
        if length > left {
            return Err(self.truncated(length, left));
        }
        if length > MAX_INT_BYTES {
            return Err(self.error(format!(
                "holds an integer of {length} bytes; at most {MAX_INT_BYTES} bytes are accepted"
            )));
        }
        let bytes = self.take(length)?;
        let negative = bytes.last().is_some_and(|b| b & 0x80 != 0);
        let mut le = if negative { [0xff; 16] } else { [0; 16] };
        le[..length].copy_from_slice(bytes);
        self.push_int(i128::from_le_bytes(le));
        Ok(())
    }

    // The stack.

    /// Where the innermost MARK starts; values below it are out of reach.
    fn frame_start(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<Value, DecodeError> {
        if self.stack.len() > self.frame_start() {
            if let Some(value) = self.stack.pop() {
                return Ok(value);
            }
        }
        Err(self.error("finds the stack empty (stack underflow)"))
    }

    fn top(&self) -> Result<Value, DecodeError> {
        match self.stack.last() {
            Some(&value) if self.stack.len() > self.frame_start() => Ok(value),
            _ => Err(self.error("finds the stack empty (stack underflow)")),
        }
    }

    /// Where the top `count` values start on the stack; they must all be above the innermost
    /// MARK.
    fn top_start(&self, count: usize) -> Result<usize, DecodeError> {
        match self.stack.len().checked_sub(count) {
            Some(start) if start >= self.frame_start() => Ok(start),
            _ => Err(self.error("finds too few values on the stack (stack underflow)")),
        }
    }

    /// Removes the innermost MARK and returns where its values start on the stack.
    fn mark_start(&mut self) -> Result<usize, DecodeError> {
        match self.marks.pop() {
            Some(start) => Ok(start),
            None => Err(self.error("finds no MARK (stack underflow)")),
        }
    }

    /// The values above the innermost MARK, placed in a new container, and its height.
    fn take_from_mark(&mut self) -> Result<(Vec<Value>, u16), DecodeError> {
        let start = self.mark_start()?;
        let height = self.place_from(start)?;
        Ok((self.stack.split_off(start), height))
    }

    fn push_int(&mut self, value: i128) {
        match i64::try_from(value) {
            Ok(small) => self.stack.push(Value::Int(small)),
            Err(_) => self.push_object(Object::BigInt(value), 0),
        }
    }

    fn push_str(&mut self, bytes: Cow<'a, [u8]>) {
        let text = match bytes {
            Cow::Borrowed(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => Cow::Borrowed(text),
                Err(_) => {
                    self.note_invalid_utf8();
                    String::from_utf8_lossy(bytes)
                }
            },
            Cow::Owned(bytes) => match String::from_utf8(bytes) {
                Ok(text) => Cow::Owned(text),
                Err(e) => {
                    self.note_invalid_utf8();
                    Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned())
                }
            },
        };
        self.push_object(Object::Str(text), 0);
    }

    fn note_invalid_utf8(&mut self) {
        let (count, first) = self.invalid_utf8.unwrap_or((0, self.at));
        self.invalid_utf8 = Some((count + 1, first));
    }

    fn push_object(&mut self, object: Object<'a>, height: u16) {
        if let Some(id) = self.free_ids.pop() {
            self.arena.replace(id, object, self.at as u64);
            self.placed[id] = false;
            self.height[id] = height;
            self.flags[id] = 0;
            self.memo_slot[id] = NO_SLOT;
            self.holders[id] = 1;
            self.stack.push(Value::Obj(id));
            return;
        }
        let id = self.arena.push(object, self.at as u64);
        self.placed.push(false);
        self.height.push(height);
        if self.hook.is_some() {
            self.flags.push(0);
            self.memo_slot.push(NO_SLOT);
            self.holders.push(1);
        }
        self.stack.push(Value::Obj(id));
    }

    /// The nesting height of a value.
    fn height_of(&self, value: Value) -> u16 {
        match value {
            Value::Obj(id) => self.height[id],
            Value::Tag(tag) => tag.height,
            _ => 0,
        }
    }

    // Streaming.

    /// One more holder of `value` (a copy on the stack).
    #[inline]
    fn hold(&mut self, value: Value) {
        if let (Value::Obj(id), true) = (value, self.hook.is_some()) {
            self.holders[id] += 1;
        }
    }

    /// One holder of `value` fewer (a copy dropped from the stack, or its container dropped).
    #[inline]
    fn unhold(&mut self, value: Value) {
        if let (Value::Obj(id), true) = (value, self.hook.is_some()) {
            self.holders[id] = self.holders[id].saturating_sub(1);
        }
    }

    /// A copy of `value` is made (DUP, memo read): it may no longer be consumed, and it must not
    /// be a list whose items were taken.
    fn pin(&mut self, value: Value) -> Result<(), DecodeError> {
        if self.hook.is_none() {
            return Ok(());
        }
        match value {
            DEAD => Err(self.conflict()),
            Value::Obj(id) => {
                if self.flags[id] & (TAKEN | FREED) != 0 {
                    return Err(self.conflict());
                }
                self.flags[id] |= PINNED;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    #[cold]
    fn conflict(&self) -> DecodeError {
        self.error(format!(
            "{STREAM_CONFLICT}: a streamed value is referenced again"
        ))
    }

    /// Where the value at stack position `pos` sits (see [`Take::place`]), with the range of
    /// the stack holding what each parent has pending ([`Take::pending`]).
    #[allow(clippy::type_complexity)]
    fn place_of(&self, mut pos: usize) -> Option<(Vec<(Value, Slot)>, Vec<Range<usize>>)> {
        let (mut place, mut pending) = (Vec::new(), Vec::new());
        loop {
            let mark = self.marks.iter().rev().find(|&&m| m <= pos).copied();
            let Some(mark) = mark else {
                if pos == 0 {
                    return Some((place, pending));
                }
                // Protocol 0 builds containers without MARKs: an item sits right above its
                // list (APPEND), a value above its key and dict (SETITEM).
                let below = self.stack[pos - 1];
                if let Some(Object::List(items)) = self.arena.object(below) {
                    place.push((below, Slot::Index(items.len())));
                    pending.push(pos..pos);
                    pos -= 1;
                    continue;
                }
                let parent = self.stack[pos.checked_sub(2)?];
                if let Some(Object::Dict(_)) = self.arena.object(parent) {
                    place.push((parent, Slot::Key(below)));
                    pending.push(pos - 1..pos - 1);
                    pos -= 2;
                    continue;
                }
                return None;
            };
            let parent_pos = mark.checked_sub(1)?;
            let parent = self.stack[parent_pos];
            // A value at a key position of a dict's items right above a list is no key (a list
            // is unhashable): it is the item of an APPEND to that list (a one-item list).
            if pos > mark && (pos - mark).is_multiple_of(2) {
                let below = self.stack[pos - 1];
                if let (Some(Object::Dict(_)), Some(Object::List(items))) =
                    (self.arena.object(parent), self.arena.object(below))
                {
                    place.push((below, Slot::Index(items.len())));
                    pending.push(pos..pos);
                    pos -= 1;
                    continue;
                }
            }
            let slot = match self.arena.object(parent)? {
                Object::Dict(_) if (pos - mark) % 2 == 1 => {
                    pending.push(mark..pos - 1);
                    Slot::Key(self.stack[pos - 1])
                }
                Object::List(items) => {
                    pending.push(mark..pos);
                    Slot::Index(items.len() + (pos - mark))
                }
                _ => return None,
            };
            place.push((parent, slot));
            pos = parent_pos;
        }
    }

    /// APPEND(S) onto list `id` of the stack's values from `start` up, offered to the hook.
    /// Returns whether the hook took them (they are then off the stack).
    fn offer(&mut self, id: ObjId, start: usize) -> Result<bool, DecodeError> {
        let (place, pending) = match self.place_of(start - 1) {
            Some((place, pending)) => (Some(place), pending),
            None => (None, Vec::new()),
        };
        let Some(hook) = self.hook.as_mut() else {
            return Ok(false);
        };
        let (flags, placed, memo_slot) = (&self.flags, &self.placed, &self.memo_slot);
        let consumable = |id: ObjId| {
            flags[id] & (PINNED | TAKEN | FREED) == 0 && !placed[id] && memo_slot[id] != MANY_SLOTS
        };
        let mut take = Take {
            arena: &self.arena,
            list: id,
            place: place.as_deref(),
            pending: &pending,
            stack: &self.stack,
            items: &self.stack[start..],
            consumable: &consumable,
            consumed: Vec::new(),
            tags: Vec::new(),
            frozen: Vec::new(),
        };
        let answer = hook.append(&mut take);
        let (consumed, tags, frozen) = (take.consumed, take.tags, take.frozen);
        for object in frozen {
            if object < self.flags.len() {
                self.flags[object] |= TAKEN;
            }
        }
        let taken = match answer {
            Ok(taken) => taken,
            Err(_) => return Err(self.conflict()),
        };
        if !taken {
            if self.flags[id] & TAKEN != 0 {
                return Err(self.conflict());
            }
            return Ok(false);
        }
        self.flags[id] |= TAKEN;
        for &i in &consumed {
            if let Value::Obj(item) = self.stack[start + i] {
                self.release(item, DEAD);
            }
        }
        for i in start..self.stack.len() {
            if let Value::Obj(item) = self.stack[i] {
                if self.flags[item] & FREED == 0 {
                    self.placed[item] = true;
                }
            }
        }
        self.stack.truncate(start);
        // Objects of the consumed items that nothing but the memo holds any more.
        for (object, tag) in tags {
            let droppable = object < self.flags.len()
                && self.flags[object] & (TAKEN | FREED) == 0
                && self.holders[object] == 0
                && self.memo_slot[object] != MANY_SLOTS;
            if droppable {
                let tag = Value::Tag(Tag {
                    tag,
                    height: self.height[object],
                });
                self.release(object, tag);
            }
        }
        if !self.released.is_empty() {
            let released = std::mem::take(&mut self.released);
            if let Some(hook) = self.hook.as_mut() {
                hook.released(&released);
            }
            self.released = released;
            self.released.clear();
        }
        Ok(true)
    }

    /// Drops object `id` (consumed by the hook, or tagged with `replacement`); its id is reused
    /// by the next object. Objects it held that nothing else can reach (no holder, no memo
    /// slot) are dropped with it.
    fn release(&mut self, id: ObjId, replacement: Value) {
        let mut work = vec![(id, replacement)];
        while let Some((id, replacement)) = work.pop() {
            if self.flags[id] & FREED != 0 {
                continue;
            }
            let object = std::mem::replace(self.arena.get_mut(id), Object::Tuple(Vec::new()));
            let mut lost = |machine: &mut Self, value: Value| {
                if let Value::Obj(child) = value {
                    machine.holders[child] = machine.holders[child].saturating_sub(1);
                    if machine.holders[child] == 0
                        && machine.memo_slot[child] == NO_SLOT
                        && machine.flags[child] & (TAKEN | FREED) == 0
                    {
                        work.push((child, DEAD));
                    }
                }
            };
            match &object {
                Object::Dict(pairs) => {
                    for &(key, value) in pairs {
                        lost(self, key);
                        lost(self, value);
                    }
                }
                Object::List(items) | Object::Tuple(items) | Object::Set(items) => {
                    for &item in items {
                        lost(self, item);
                    }
                }
                _ => {}
            }
            drop(object);
            self.flags[id] = FREED;
            let slot = self.memo_slot[id];
            if slot != NO_SLOT && slot != MANY_SLOTS {
                self.memo.replace(slot as usize, id, replacement);
            }
            self.free_ids.push(id);
            self.released.push(id);
            self.released_total += 1;
        }
    }

    // Containers.

    /// Marks the stack's values from `start` up as placed inside a container and returns the
    /// height of a container holding them, refusing nesting beyond [`MAX_DEPTH`].
    fn place_from(&mut self, start: usize) -> Result<u16, DecodeError> {
        let mut height = 1;
        for item in &self.stack[start..] {
            match *item {
                Value::Obj(id) => {
                    self.placed[id] = true;
                    height = height.max(self.height[id] + 1);
                }
                Value::Tag(tag) => height = height.max(tag.height + 1),
                _ => {}
            }
        }
        if height > MAX_DEPTH {
            return Err(self.error(format!("nests containers deeper than {MAX_DEPTH} levels")));
        }
        Ok(height)
    }

    fn tuple_of_top(&mut self, count: usize) -> Result<(), DecodeError> {
        let start = self.top_start(count)?;
        let height = self.place_from(start)?;
        let items = self.stack.split_off(start);
        self.push_object(Object::Tuple(items), height);
        Ok(())
    }

    /// The stack's values from `start` up as the key/value pairs of a new dict.
    fn pairs_from(&mut self, start: usize) -> Result<Vec<(Value, Value)>, DecodeError> {
        self.check_pairs(start)?;
        let pairs = as_pairs(&self.stack[start..]).collect();
        self.stack.truncate(start);
        Ok(pairs)
    }

    /// The stack's values from `start` up must be key/value pairs: an even count.
    fn check_pairs(&self, start: usize) -> Result<(), DecodeError> {
        let count = self.stack.len() - start;
        if !count.is_multiple_of(2) {
            return Err(self.error(format!(
                "has an odd number of values ({count}) for key/value pairs"
            )));
        }
        Ok(())
    }

    /// APPEND(S), SETITEM(S), ADDITEMS: moves the stack's values from `start` up into the list,
    /// dict or set just below them.
    fn add_items_from(&mut self, start: usize) -> Result<(), DecodeError> {
        if start <= self.frame_start() {
            return Err(self.error("finds the stack empty (stack underflow)"));
        }
        let target = self.stack[start - 1];
        let id = self.container(target)?;
        let appends = matches!(self.op, op::APPEND | op::APPENDS);
        if self.hook.is_some() && !self.placed[id] {
            if !appends && self.flags[id] & TAKEN != 0 {
                return Err(self.conflict());
            }
            if appends {
                // The checks of the plain path first, so that streaming accepts the same files.
                let mut height = 1;
                for item in &self.stack[start..] {
                    height = height.max(self.height_of(*item) + 1);
                }
                if height > MAX_DEPTH {
                    return Err(
                        self.error(format!("nests containers deeper than {MAX_DEPTH} levels"))
                    );
                }
                if self.offer(id, start)? {
                    // The list keeps the height of what it would hold, as the plain path does.
                    self.height[id] = self.height[id].max(height);
                    return Ok(());
                }
            }
        }
        let height = self.place_from(start)?;
        if self.placed[id] {
            return Err(self.error(format!(
                "modifies a {} that is already inside another container or itself (cyclic \
                 pickle)",
                self.arena.type_name(target)
            )));
        }
        self.height[id] = self.height[id].max(height);
        if matches!(self.arena.get(id), Object::Dict(_)) {
            self.check_pairs(start)?;
        }
        let items = &self.stack[start..];
        match self.arena.get_mut(id) {
            Object::Dict(entries) => entries.extend(as_pairs(items)),
            Object::List(list) | Object::Set(list) => list.extend_from_slice(items),
            _ => {}
        }
        self.stack.truncate(start);
        Ok(())
    }

    /// The object this opcode may add items to: a list (APPEND), dict (SETITEM) or set
    /// (ADDITEMS).
    fn container(&self, target: Value) -> Result<ObjId, DecodeError> {
        let expected = match self.op {
            op::APPEND | op::APPENDS => "list",
            op::SETITEM | op::SETITEMS => "dict",
            _ => "set",
        };
        match target {
            Value::Obj(id) if self.arena.type_name(target) == expected => Ok(id),
            // A tagged object stands for a container the hook let go of.
            Value::Tag(_) => Err(self.conflict()),
            _ => Err(self.error(format!(
                "needs a {expected} below its values, found {}",
                a(self.arena.type_name(target))
            ))),
        }
    }

    // The memo.

    fn memo_put(&mut self, index: usize) -> Result<(), DecodeError> {
        let value = self.top()?;
        // Each opcode fills at most one slot, so a larger index is corrupt; this also bounds
        // the memo's size by the input's.
        if index > self.opcodes {
            return Err(self.error(format!("uses memo index {index}, which is out of range")));
        }
        if self.hook.is_some() {
            if let Value::Obj(id) = value {
                if self.flags[id] & (TAKEN | FREED) != 0 {
                    return Err(self.conflict());
                }
                let slot = &mut self.memo_slot[id];
                *slot = if *slot == NO_SLOT && index < MANY_SLOTS as usize {
                    index as u32
                } else {
                    MANY_SLOTS
                };
            }
        }
        self.memo.put(index, value);
        Ok(())
    }

    fn memo_get(&mut self, index: usize) -> Result<(), DecodeError> {
        // Copied from the slot straight onto the stack, then looked at there.
        match self.memo.get(index) {
            Some(value) => self.stack.push(*value),
            None => {
                return Err(self.error(format!(
                    "reads memo index {index} before anything was stored there"
                )))
            }
        }
        if self.hook.is_some() {
            if let Some(&Value::Obj(id)) = self.stack.last() {
                if id == usize::MAX || self.flags[id] & (TAKEN | FREED) != 0 {
                    return Err(self.conflict());
                }
                self.flags[id] |= PINNED;
                self.holders[id] += 1;
            }
        }
        Ok(())
    }
}

/// The opcodes of protocol 1 and later that a protocol 0 pickle never has (to tell protocol 0
/// from 1 when there is no header).
fn is_binary(op: u8) -> bool {
    !matches!(
        op,
        op::MARK
            | op::STOP
            | op::POP
            | op::POP_MARK
            | op::DUP
            | op::FLOAT
            | op::INT
            | op::LONG
            | op::NONE
            | op::STRING
            | op::UNICODE
            | op::APPEND
            | op::DICT
            | op::GET
            | op::LIST
            | op::PUT
            | op::SETITEM
            | op::TUPLE
    )
}

/// Decodes Python's `raw-unicode-escape` (UNICODE's operand): bytes are Latin-1 characters
/// except `\uXXXX` and `\UXXXXXXXX` after an odd run of backslashes. A code point that is no
/// character (a lone surrogate) becomes U+FFFD; the flag says there was one.
fn raw_unicode_escape(bytes: &[u8]) -> (String, bool) {
    let mut out = String::with_capacity(bytes.len());
    let mut invalid = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' {
            out.push(char::from(b));
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&c| c == b'\\').count();
        let after = i + run;
        let digits = match bytes.get(after) {
            Some(b'u') => 4,
            Some(b'U') => 8,
            _ => 0,
        };
        let hex = bytes
            .get(after + 1..after + 1 + digits)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok());
        match hex {
            Some(code) if digits > 0 && run % 2 == 1 => {
                out.extend(std::iter::repeat_n('\\', run - 1));
                out.push(char::from_u32(code).unwrap_or_else(|| {
                    invalid = true;
                    '\u{fffd}'
                }));
                i = after + 1 + digits;
            }
            _ => {
                out.extend(std::iter::repeat_n('\\', run));
                i = after;
            }
        }
    }
    (out, invalid)
}

/// The inside of a quoted STRING operand (`'...'` or `"..."`), or `None`.
fn quoted(line: &[u8]) -> Option<&[u8]> {
    match line {
        [q @ (b'\'' | b'"'), inner @ .., last] if last == q => Some(inner),
        _ => None,
    }
}

/// Python's `escape_decode` of a STRING operand: backslash escapes (`\\`, `\'`, `\"`,
/// `\n`, `\t`, `\r`, `\a`, `\b`, `\f`, `\v`, `\xHH`, octal `\ooo`, backslash-newline);
/// any other backslash stays as written.
fn escape_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' || i + 1 == s.len() {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let c = s[i + 1];
        i += 2;
        match c {
            b'\n' => {}
            b'\\' | b'\'' | b'"' => out.push(c),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'v' => out.push(11),
            b'x' => {
                let hex = s
                    .get(i..i + 2)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.extend_from_slice(b"\\x"),
                }
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < s.len() && (b'0'..=b'7').contains(&s[i]) {
                    v = v * 8 + u32::from(s[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push((v & 0xff) as u8);
            }
            _ => out.extend_from_slice(&[b'\\', c]),
        }
    }
    out
}

/// Consecutive values as (key, value); a trailing odd value is left out (callers check).
fn as_pairs(items: &[Value]) -> impl Iterator<Item = (Value, Value)> + '_ {
    items.chunks_exact(2).map(|pair| (pair[0], pair[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMOIZE: u8 = op::MEMOIZE;

    /// A protocol 4 pickle of `body` followed by STOP.
    fn pickle(body: &[u8]) -> Vec<u8> {
        [b"\x80\x04".as_slice(), body, b"."].concat()
    }

    /// Decodes `body`; the bytes are leaked so the result may borrow them (tests only). Read
    /// through a reader (3 bytes at a time), the result is the same.
    fn decode_ok(body: &[u8]) -> Decoded<'static> {
        let data: &'static [u8] = Box::leak(pickle(body).into_boxed_slice());
        let decoded = decode(data).unwrap_or_else(|e| panic!("{e:?}"));
        let read = decode_read(Trickle(data), data.len() as u64, None).expect("read");
        assert_eq!(format!("{:?}", read.arena), format!("{:?}", decoded.arena));
        assert_eq!((read.root, read.protocol), (decoded.root, decoded.protocol));
        assert_eq!(read.warnings, decoded.warnings);
        decoded
    }

    /// The error decoding `body`, the same through a reader.
    fn decode_err(body: &[u8]) -> DecodeError {
        let data = pickle(body);
        let err = decode(&data).expect_err("decoding should fail");
        let read = decode_read(Trickle(&data), data.len() as u64, None).expect_err("read");
        assert_eq!(read, err);
        err
    }

    /// A reader that hands out at most 3 bytes per call.
    struct Trickle<'d>(&'d [u8]);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(3).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// The items of the list at the root.
    fn root_items<'d>(decoded: &'d Decoded<'_>) -> &'d [Value] {
        decoded.arena.sequence(decoded.root).expect("a list")
    }

    /// Takes and consumes every item appended to `root["t"][k]`, counting them.
    struct TakeAll(usize);

    impl<'a> Hook<'a> for TakeAll {
        fn append(&mut self, take: &mut Take<'_, 'a>) -> Result<bool, crate::stream::Abort> {
            let arena = take.arena();
            match take.place() {
                Some(&[(_, Slot::Index(_)), (_, Slot::Key(key))])
                    if arena.str(key) == Some("t") =>
                {
                    for i in 0..take.items().len() {
                        if take.can_consume(i) {
                            take.consume(i);
                            self.0 += 1;
                        }
                    }
                    Ok(true)
                }
                _ => Ok(false),
            }
        }
    }

    fn decode_taking(body: &[u8]) -> (Result<Decoded<'static>, DecodeError>, usize) {
        let data: &'static [u8] = Box::leak(pickle(body).into_boxed_slice());
        let mut hook = TakeAll(0);
        let result = decode_with(data, &mut hook);
        (result, hook.0)
    }

    #[test]
    fn a_hook_takes_appended_dicts_and_their_ids_are_reused() {
        // {"t": [[{}, {}, {}], [{}]]}: MARK + APPENDS for the first inner list, APPEND for the
        // one-item second one, and a one-item outer list through APPEND as well.
        let body = b"}\x94(\x8c\x01t](](}\x94}\x94}\x94e](}\x94eeu";
        let (decoded, taken) = decode_taking(body);
        let decoded = decoded.expect("decodes");
        assert_eq!(taken, 4);
        let t = decoded.arena.dict(decoded.root).expect("root dict")[0].1;
        let lists = decoded.arena.sequence(t).expect("t");
        assert_eq!(lists.len(), 2);
        assert!(lists
            .iter()
            .all(|l| decoded.arena.sequence(*l) == Some(&[][..])));
        // Root, key, outer list, first inner list, its three dicts; the second inner list
        // and its dict take ids the first three left.
        assert_eq!(decoded.arena.len(), 7);
        // A one-item outer list (APPEND, no MARK).
        let (decoded, taken) = decode_taking(b"}(\x8c\x01t]](}}eau");
        assert_eq!((decoded.is_ok(), taken), (true, 2));
    }

    #[test]
    fn taken_values_read_again_are_a_conflict() {
        // An entry memoized, taken, then read back from the memo.
        let (result, _) = decode_taking(b"}(\x8c\x01t]](}\x94eah\x000u");
        let err = result.expect_err("conflict");
        assert!(err.reason.contains(STREAM_CONFLICT), "{}", err.reason);
        // A taken list read back.
        let (result, _) = decode_taking(b"}(\x8c\x01t]]\x94(}eah\x000u");
        assert!(result
            .expect_err("conflict")
            .reason
            .contains(STREAM_CONFLICT));
        // Without the hook both decode.
        decode_ok(b"}(\x8c\x01t]](}\x94eah\x000u");
        decode_ok(b"}(\x8c\x01t]]\x94(}eah\x000u");
    }

    #[test]
    fn integers_of_every_encoding() {
        let decoded = decode_ok(
            b"(K\x07M\x00\x01J\xff\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01\
              \x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00\x8b\x01\x00\x00\x00\x80\x8a\x00\
              I123\nI01\nL-5L\nl",
        );
        let arena = &decoded.arena;
        let ints: Vec<Option<i128>> = root_items(&decoded).iter().map(|v| arena.int(*v)).collect();
        let expected = [7, 256, -1, 1 << 40, u64::MAX as i128, -128, 0, 123];
        assert_eq!(ints[..8], expected.map(Some));
        assert_eq!(root_items(&decoded)[8], Value::Bool(true));
        assert_eq!(ints[9], Some(-5));
        assert_eq!(arena.type_name(root_items(&decoded)[4]), "int");
    }

    #[test]
    fn floats_strings_and_bytes() {
        let decoded = decode_ok(
            b"(G?\xf8\x00\x00\x00\x00\x00\x00F-2.5\n\x8c\x03h\xc3\xa3X\x01\x00\x00\x00a\
              \x8d\x01\x00\x00\x00\x00\x00\x00\x00bU\x01cT\x01\x00\x00\x00d\
              C\x01\xffB\x01\x00\x00\x00\xfe\x8e\x01\x00\x00\x00\x00\x00\x00\x00\xfd\
              \x96\x01\x00\x00\x00\x00\x00\x00\x00\xfcl",
        );
        let (arena, items) = (&decoded.arena, root_items(&decoded));
        assert_eq!(items[0], Value::Float(1.5));
        assert_eq!(items[1], Value::Float(-2.5));
        let texts: Vec<_> = items[2..7].iter().map(|v| arena.str(*v)).collect();
        assert_eq!(
            texts,
            [Some("h\u{e3}"), Some("a"), Some("b"), Some("c"), Some("d")]
        );
        let bytes: Vec<_> = items[7..]
            .iter()
            .map(|v| match arena.object(*v) {
                Some(Object::Bytes(bytes)) => bytes.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(bytes, [[0xff], [0xfe], [0xfd], [0xfc]]);
    }

    #[test]
    fn containers_and_stack_opcodes() {
        // [(), (1,), (1, 2), (1, 2, 3), (4, 5), [6], {7: 8, 9: 10}, {11}, frozenset({12}), 13]
        // plus stack noise: DUP then POP, MARK 15 POP_MARK, None POP, MARK POP (pops the mark).
        let decoded = decode_ok(
            b"(\
              )K\x01\x85K\x01K\x02\x86K\x01K\x02K\x03\x87(K\x04K\x05t(K\x06l\
              (K\x07K\x08dK\x09K\x0as\x8f(K\x0b\x90(K\x0c\x91\
              K\x0d20(K\x0f1N0(0\
              l",
        );
        let arena = &decoded.arena;
        let items = root_items(&decoded);
        assert_eq!(items.len(), 10, "{items:?}");
        let tuple_lengths: Vec<_> = items[..5]
            .iter()
            .map(|v| arena.sequence(*v).map(<[Value]>::len))
            .collect();
        assert_eq!(tuple_lengths, [0, 1, 2, 3, 2].map(Some));
        assert_eq!(arena.type_name(items[5]), "list");
        let dict = arena.dict(items[6]).expect("dict");
        assert_eq!(
            dict,
            [
                (Value::Int(7), Value::Int(8)),
                (Value::Int(9), Value::Int(10))
            ]
        );
        assert_eq!(
            arena.object(items[7]),
            Some(&Object::Set(vec![Value::Int(11)]))
        );
        assert_eq!(
            arena.object(items[8]),
            Some(&Object::Set(vec![Value::Int(12)]))
        );
        assert_eq!(items[9], Value::Int(13));
    }

    #[test]
    fn memo_shares_objects_instead_of_copying() {
        // frames = [{"name": "f"}]; [frames, frames, frames] through MEMOIZE/BINGET and
        // BINPUT/LONG_BINGET.
        let decoded = decode_ok(b"](]\x94}\x94\x8c\x04name\x8c\x01fsaq\x05h\x00j\x05\x00\x00\x00e");
        let (arena, items) = (&decoded.arena, root_items(&decoded));
        assert_eq!(items.len(), 3);
        assert!(items.iter().all(|item| *item == items[0]), "{items:?}");
        let frame = arena.sequence(items[0]).expect("frames list")[0];
        let name = arena.dict(frame).expect("frame dict")[0].1;
        assert_eq!(arena.str(name), Some("f"));
        assert_eq!(
            arena.offset(match items[0] {
                Value::Obj(id) => id,
                _ => unreachable!(),
            }),
            4
        );
    }

    #[test]
    fn refuses_every_code_running_opcode_by_name_and_offset() {
        let cases: [(&[u8], &str); 15] = [
            (b"cos\nsystem\n", "GLOBAL"),
            (b"\x93", "STACK_GLOBAL"),
            (b"R", "REDUCE"),
            (b"b", "BUILD"),
            (b"ios\nsystem\n", "INST"),
            (b"o", "OBJ"),
            (b"\x81", "NEWOBJ"),
            (b"\x92", "NEWOBJ_EX"),
            (b"\x82\x01", "EXT1"),
            (b"\x83\x01\x00", "EXT2"),
            (b"\x84\x01\x00\x00\x00", "EXT4"),
            (b"P0\n", "PERSID"),
            (b"Q", "BINPERSID"),
            (b"\x97", "NEXT_BUFFER"),
            (b"\x98", "READONLY_BUFFER"),
        ];
        for (body, name) in cases {
            let err = decode_err(&[b"N".as_slice(), body].concat());
            assert_eq!(err.offset, 3, "{name}");
            assert!(
                err.reason.contains(name) && err.reason.contains("not allowed"),
                "{name}: {}",
                err.reason
            );
        }
    }

    #[test]
    fn refuses_cycles() {
        // l = []; l.append(l)
        let err = decode_err(b"]\x94h\x00a");
        assert!(err.reason.contains("cyclic"), "{}", err.reason);
        assert_eq!(err.offset, 6);
        // a = []; b = [a]; a.append(b): a is modified after being placed in b.
        let err = decode_err(b"]\x94]\x94h\x00ah\x00h\x01a");
        assert!(err.reason.contains("cyclic"), "{}", err.reason);
        // d = {}; d["k"] = d
        let err = decode_err(b"}\x94\x8c\x01kh\x00s");
        assert!(err.reason.contains("cyclic"), "{}", err.reason);
    }

    #[test]
    fn refuses_bad_memo_use() {
        let err = decode_err(b"h\x05");
        assert!(err.reason.contains("memo index 5 before"), "{}", err.reason);
        assert_eq!(err.offset, 2);
        let err = decode_err(b"Nr\xff\xff\xff\x7f");
        assert!(err.reason.contains("out of range"), "{}", err.reason);
    }

    #[test]
    fn reports_stack_underflow() {
        for body in [
            b"a".as_slice(),
            b"e",
            b"N\x86",
            b"0",
            b"(N1t",
            b"2",
            b"\x94",
            b"s",
            b"Ns",
            b"}Ns",
            b"u",
            b"N(Na",
        ] {
            let err = decode_err(body);
            assert!(err.reason.contains("underflow"), "{body:?}: {}", err.reason);
        }
        // Key/value opcodes need an even number of values.
        let err = decode_err(b"}(Nu");
        assert!(
            err.reason.contains("odd number of values (1)"),
            "{}",
            err.reason
        );
        let err = decode_err(b"(Nd");
        assert!(
            err.reason.contains("odd number of values (1)"),
            "{}",
            err.reason
        );
        let err = decode(b"\x80\x04.").expect_err("STOP on an empty stack");
        assert!(err.reason.contains("underflow"), "{}", err.reason);
    }

    #[test]
    fn limits_nesting() {
        let deep: Vec<u8> = [vec![b']'; 1000], vec![b'a'; 999]].concat();
        let err = decode_err(&deep);
        assert!(err.reason.contains("deeper than 100"), "{}", err.reason);
        let marks = vec![b'('; 65];
        let err = decode_err(&marks);
        assert!(err.reason.contains("nested MARKs"), "{}", err.reason);
        // 100 levels are fine.
        let ok: Vec<u8> = [vec![b']'; 100], vec![b'a'; 99]].concat();
        decode_ok(&ok);
    }

    #[test]
    fn checks_lengths_before_allocating() {
        let huge = (1u64 << 60).to_le_bytes();
        for op in [op::BINUNICODE8, op::BINBYTES8, op::BYTEARRAY8] {
            let err = decode_err(&[[op].as_slice(), &huge, b"abc"].concat());
            assert!(
                err.reason.contains("claims 1152921504606846976 bytes"),
                "{}",
                err.reason
            );
        }
        let err = decode_err(&[[op::FRAME].as_slice(), &huge].concat());
        assert!(err.reason.contains("frame of"), "{}", err.reason);
        let err = decode_err(b"X\xff\xff\xff\xffab");
        assert!(err.reason.contains("claims 4294967295"), "{}", err.reason);
        let err = decode_err(b"\x8b\xff\xff\xff\xff");
        assert!(err.reason.contains("negative length"), "{}", err.reason);
        let long = [[op::LONG1, 17].as_slice(), &[1u8; 17]].concat();
        let err = decode_err(&long);
        assert!(err.reason.contains("at most 16 bytes"), "{}", err.reason);
    }

    #[test]
    fn reports_truncation_with_the_opcode_offset() {
        let err = decode(b"\x80\x04\x8c\x05ab").expect_err("truncated string");
        assert_eq!(err.offset, 2);
        assert!(
            err.reason.contains("SHORT_BINUNICODE claims 5 bytes"),
            "{}",
            err.reason
        );
        let err = decode(b"\x80\x04N").expect_err("no STOP");
        assert_eq!(
            (err.offset, err.reason.contains("without a STOP")),
            (3, true)
        );
        let err = decode(b"\x80\x04J\x01").expect_err("short operand");
        assert!(err.reason.contains("truncated"), "{}", err.reason);
        let err = decode(b"\x80").expect_err("no protocol byte");
        assert!(err.reason.contains("PROTO"), "{}", err.reason);
    }

    #[test]
    fn not_a_pickle_shows_the_first_bytes() {
        let text = b"fatal: Not a valid object name 4f1c2a9be0d3c6a7f8e9d0c1b2a3948576a5b4c3.";
        let err = decode(text).expect_err("text");
        assert_eq!(err.offset, 0);
        assert!(
            err.reason
                .starts_with("not a pickle (starts with text 'fatal: Not a valid object name"),
            "{}",
            err.reason
        );
        let err = decode(b"\x00\x01\x02").expect_err("binary");
        assert_eq!(err.reason, "not a pickle (starts with bytes 00 01 02)");
        let err = decode(b"").expect_err("empty");
        assert_eq!(err.reason, "not a pickle (the file is empty)");
    }

    #[test]
    fn accepts_protocols_0_to_5() {
        for version in 0..=5u8 {
            let data = [0x80, version, b'N', b'.'];
            let decoded = decode(&data).expect("supported");
            assert_eq!(decoded.protocol, version);
        }
        let err = decode(&[0x80, 6, b'N', b'.']).expect_err("unsupported");
        assert!(err.reason.contains("not supported"), "{}", err.reason);
        let decoded = decode_ok(b"S'a\\x41\\n\\'b'\n");
        assert_eq!(decoded.arena.str(decoded.root), Some("aA\n'b"));
        let err = decode_err(b"Sx\n");
        assert!(err.reason.contains("STRING"), "{}", err.reason);
        let err = decode_err(b"\xff");
        assert_eq!(err.reason, "byte 0xff is not a pickle opcode");
    }

    /// A value as text, for comparing decodes of one object written at different protocols.
    fn show(d: &Decoded, v: Value) -> String {
        match (v, d.arena.object(v)) {
            (Value::None, _) => "None".into(),
            (Value::Bool(b), _) => b.to_string(),
            (Value::Int(i), _) => i.to_string(),
            (Value::Float(f), _) => format!("{f:?}"),
            (_, Some(Object::Str(s))) => format!("{s:?}"),
            (_, Some(Object::BigInt(i))) => i.to_string(),
            (_, Some(Object::List(items))) => {
                let items: Vec<_> = items.iter().map(|&i| show(d, i)).collect();
                format!("[{}]", items.join(", "))
            }
            (_, Some(Object::Tuple(items))) => {
                let items: Vec<_> = items.iter().map(|&i| show(d, i)).collect();
                format!("({})", items.join(", "))
            }
            (_, Some(Object::Dict(pairs))) => {
                let pairs: Vec<_> = pairs
                    .iter()
                    .map(|&(k, v)| format!("{}: {}", show(d, k), show(d, v)))
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            }
            (_, other) => format!("{other:?}"),
        }
    }

    /// One object as CPython 3 pickles it at protocols 0, 1 and 4 (`pickle.dumps`): protocol
    /// 0's text opcodes (raw-unicode-escape strings with astral characters, `L…L` longs, `I01`
    /// booleans, PUT) and protocol 1's header-less binary opcodes decode to the same values.
    #[test]
    fn protocols_0_and_1_decode_as_protocol_4() {
        let p0: &[u8] = b"(dp0\nVsegments\np1\n(lp2\n(dp3\nVaddress\np4\nL1099511627781L\nsVframes\np5\n(lp6\n(dp7\nVname\np8\nVf\\u005cx\xe9\\u20ac\\U0001f600\\u000a\np9\nsVline\np10\nI-1\nsasasVt\np11\n(I0\nI1\ntp12\nsVb\np13\nI01\nsVn\np14\nNsVf\np15\nF1.5\nsVbig\np16\nL18446744073709551615L\ns.";
        let p1: &[u8] = b"}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02}q\x03(X\x07\x00\x00\x00addressq\x04L1099511627781L\nX\x06\x00\x00\x00framesq\x05]q\x06}q\x07(X\x04\x00\x00\x00nameq\x08X\r\x00\x00\x00f\\x\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\nq\tX\x04\x00\x00\x00lineq\nJ\xff\xff\xff\xffuauaX\x01\x00\x00\x00tq\x0b(K\x00K\x01tq\x0cX\x01\x00\x00\x00bq\rI01\nX\x01\x00\x00\x00nq\x0eNX\x01\x00\x00\x00fq\x0fG?\xf8\x00\x00\x00\x00\x00\x00X\x03\x00\x00\x00bigq\x10L18446744073709551615L\nu.";
        let p4: &[u8] = b"\x80\x04\x95\x8e\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94}\x94(\x8c\x07address\x94\x8a\x06\x05\x00\x00\x00\x00\x01\x8c\x06frames\x94]\x94}\x94(\x8c\x04name\x94\x8c\rf\\x\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n\x94\x8c\x04line\x94J\xff\xff\xff\xffuaua\x8c\x01t\x94K\x00K\x01\x86\x94\x8c\x01b\x94\x88\x8c\x01n\x94N\x8c\x01f\x94G?\xf8\x00\x00\x00\x00\x00\x00\x8c\x03big\x94\x8a\t\xff\xff\xff\xff\xff\xff\xff\xff\x00u.";
        let want = {
            let d = decode(p4).unwrap();
            show(&d, d.root)
        };
        assert!(want.contains("\"f\\\\xé€😀\\n\""), "{want}");
        for (data, protocol) in [(p0, 0), (p1, 1)] {
            let d = decode(data).unwrap_or_else(|e| panic!("{protocol}: {e:?}"));
            assert_eq!(d.protocol, protocol);
            assert_eq!(show(&d, d.root), want, "protocol {protocol}");
            assert!(d.warnings.is_empty(), "{:?}", d.warnings);
            let read = decode_read(Trickle(data), data.len() as u64, None).unwrap();
            assert_eq!(show(&read, read.root), want, "protocol {protocol}, read");
        }
        // A lone surrogate in a protocol 0 string is replaced and reported.
        let d = decode(b"(lVa\\udc80b\na.").unwrap();
        let item = d.arena.sequence(d.root).unwrap()[0];
        assert_eq!(d.arena.str(item), Some("a\u{fffd}b"));
        assert!(
            d.warnings[0].contains("not valid UTF-8"),
            "{:?}",
            d.warnings
        );
        // A header-less file must open with a container.
        let err = decode(b"I1\n.").expect_err("no container");
        assert!(err.reason.starts_with("not a pickle"), "{}", err.reason);
    }

    /// Protocol 0 and 1 snapshots with bytes changed at random (a fixed sequence) decode or
    /// fail with an offset inside the input, the same from memory and through a reader.
    #[test]
    fn mutated_text_protocol_pickles_fail_cleanly() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/snapshots-newest");
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for file in ["newest_p0.pickle", "newest_p1.pickle"] {
            let data = std::fs::read(dir.join(file)).expect(file);
            for _ in 0..400 {
                let mut bad = data.clone();
                for _ in 0..1 + next() % 3 {
                    let at = (next() % bad.len() as u64) as usize;
                    bad[at] = (next() & 0xff) as u8;
                }
                let plain = decode(&bad);
                let read = decode_read(Trickle(&bad), bad.len() as u64, None);
                match (&plain, &read) {
                    (Ok(a), Ok(b)) => assert_eq!(show(a, a.root), show(b, b.root)),
                    (Err(a), Err(b)) => {
                        assert_eq!(a, b);
                        assert!(a.offset <= bad.len() as u64, "{a:?}");
                    }
                    _ => panic!("{file}: {:?} vs {:?}", plain.err(), read.err()),
                }
            }
        }
    }

    #[test]
    fn strict_about_the_end_lenient_about_trailing_bytes() {
        let err = decode_err(b"NN");
        assert!(err.reason.contains("1 unused values"), "{}", err.reason);
        let decoded = decode(b"\x80\x04N.junk").expect("trailing bytes are a warning");
        assert_eq!(decoded.root, Value::None);
        assert!(decoded.warnings[0].starts_with("4 bytes after the STOP"));
    }

    #[test]
    fn invalid_utf8_is_replaced_and_reported() {
        // "bad\udcffend" as CPython's surrogatepass writes it.
        let decoded = decode_ok(b"\x8c\x09bad\xed\xb3\xbfend");
        assert_eq!(
            decoded.arena.str(decoded.root),
            Some("bad\u{fffd}\u{fffd}\u{fffd}end")
        );
        assert!(
            decoded.warnings[0].contains("not valid UTF-8"),
            "{:?}",
            decoded.warnings
        );
    }

    /// Takes the dicts appended to `root["t"][k]`, tags the list under their key "f", and
    /// records the values it sees there.
    struct TagLists {
        taken: usize,
        seen: Vec<Value>,
        released: usize,
    }

    impl<'a> Hook<'a> for TagLists {
        fn append(&mut self, take: &mut Take<'_, 'a>) -> Result<bool, crate::stream::Abort> {
            let arena = take.arena();
            match take.place() {
                Some(&[(_, Slot::Index(_)), (_, Slot::Key(key))])
                    if arena.str(key) == Some("t") =>
                {
                    for i in 0..take.items().len() {
                        let item = take.items()[i];
                        let f = arena.dict(item).and_then(|d| d.first()).map(|p| p.1);
                        if let Some(f) = f {
                            self.seen.push(f);
                        }
                        if take.can_consume(i) {
                            take.consume(i);
                            self.taken += 1;
                            if let Some(f) = f {
                                take.tag(f, 7);
                            }
                        }
                    }
                    Ok(true)
                }
                _ => Ok(false),
            }
        }

        fn released(&mut self, ids: &[ObjId]) {
            self.released += ids.len();
        }
    }

    /// `{"t": [[{"f": [1]}, {"f": <the same list>}, ...]]}` with `pairs` such pairs, every
    /// object memoized; the items are appended 1 000 at a time, the second of each pair in a
    /// batch of its own when `split`.
    fn shared_lists(pairs: usize, split: bool) -> Vec<u8> {
        let mut body = Vec::new();
        let mut memo = 0u32;
        let mut memoize = |body: &mut Vec<u8>| {
            body.push(MEMOIZE);
            memo += 1;
            memo - 1
        };
        body.push(b'}');
        memoize(&mut body);
        body.extend(b"(\x8c\x01t");
        memoize(&mut body);
        body.push(b']');
        memoize(&mut body);
        body.push(b']');
        memoize(&mut body);
        body.push(b'(');
        let (mut f_key, mut items) = (None, 0);
        for _ in 0..pairs {
            let mut list = 0;
            for second in [false, true] {
                body.push(b'}');
                memoize(&mut body);
                body.push(b'(');
                match f_key {
                    Some(index) => {
                        body.push(b'j');
                        body.extend(u32::to_le_bytes(index));
                    }
                    None => {
                        body.extend(b"\x8c\x01f");
                        f_key = Some(memoize(&mut body));
                    }
                }
                if second {
                    body.push(b'j');
                    body.extend(u32::to_le_bytes(list));
                } else {
                    body.push(b']');
                    list = memoize(&mut body);
                    body.extend(b"(K\x01e");
                }
                body.push(b'u');
                items += 1;
                if (split && !second) || items % 1000 == 0 {
                    body.extend(b"e(");
                }
            }
        }
        body.extend(b"eau");
        pickle(&body)
    }

    #[test]
    fn consumed_items_leave_their_lists_as_tags_and_the_memo_small() {
        for split in [false, true] {
            let data = shared_lists(20_000, split);
            let mut hook = TagLists {
                taken: 0,
                seen: Vec::new(),
                released: 0,
            };
            let decoded = decode_with(&data, &mut hook).unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(hook.taken, 40_000);
            // Every dict and every list dropped, and the hook told of each.
            assert_eq!(decoded.stats.released, 60_000, "{:?}", decoded.stats);
            assert_eq!(hook.released, 60_000);
            // The second of a pair reads its list back: the list itself within one batch, its
            // tag once the first was consumed in an earlier batch (the list dropped then).
            let tags = hook
                .seen
                .iter()
                .filter(|v| matches!(v, Value::Tag(Tag { tag: 7, height: 1 })))
                .count();
            assert_eq!(tags, if split { 20_000 } else { 0 }, "split {split}");
            // An APPENDS batch of objects at once (1 000 items, their lists).
            assert!(decoded.stats.objects < 2_000, "{:?}", decoded.stats);
            // Without the hook: the same pickle, every object held.
            let plain = decode(&data).unwrap();
            assert!(plain.stats.objects > 60_000, "{:?}", plain.stats);
            assert!(plain.stats.memo_slots > 60_000, "{:?}", plain.stats);
        }
    }

    #[test]
    fn the_memo_drops_the_slots_of_consumed_items() {
        // {"t": [[{}, {}, ...]]}: 200 000 memoized dicts, appended 1 000 at a time.
        let mut body = b"}(\x8c\x01t]](".to_vec();
        for i in 1..=200_000 {
            body.extend(b"}\x94");
            if i % 1000 == 0 {
                body.extend(b"e(");
            }
        }
        body.extend(b"eau");
        let data = pickle(&body);
        let (decoded, taken) = {
            let mut hook = TakeAll(0);
            let decoded = decode_with(&data, &mut hook).unwrap_or_else(|e| panic!("{e:?}"));
            (decoded, hook.0)
        };
        assert_eq!(taken, 200_000);
        assert!(decoded.stats.objects < 1_100, "{:?}", decoded.stats);
        // A page or two being filled; the full ones are dropped.
        assert!(decoded.stats.memo_slots <= 3 * PAGE, "{:?}", decoded.stats);
        // Reading a dropped slot back is a conflict, not "never stored".
        let mut read_back = body[..body.len() - 3].to_vec();
        read_back.extend(b"ej\x05\x00\x00\x000au");
        let mut hook = TakeAll(0);
        let err = decode_with(&pickle(&read_back), &mut hook).expect_err("conflict");
        assert!(err.reason.contains(STREAM_CONFLICT), "{}", err.reason);
    }

    #[test]
    fn an_item_memoized_twice_is_not_consumed() {
        // [[{} stored at memo 0 and memo 1]]: its slots cannot both be tracked.
        let (result, taken) = decode_taking(b"}(\x8c\x01t]](}\x94q\x01eau");
        assert_eq!((result.is_ok(), taken), (true, 0));
    }
}
