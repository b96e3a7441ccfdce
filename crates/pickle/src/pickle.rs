//! A data-only pickle decoder (protocols 2 to 5), written for untrusted snapshot files.
//!
//! It runs the pickle stack machine over the data opcodes only. Every opcode that would import,
//! call or fetch something (GLOBAL, REDUCE, BUILD, PERSID, out-of-band buffers, ...) is refused
//! with its name and byte offset. Every length is checked against the bytes left before anything
//! is allocated, and the memo stores references into an [`Arena`], never copies.
//!
//! A container may only be modified while it is not yet inside another container. The pickler
//! always completes a container before placing it, so this holds for every real file, and it
//! makes reference cycles impossible: the last link that closes a cycle would have to modify a
//! container already placed. Nesting is limited to [`MAX_DEPTH`] levels, so code that walks the
//! result recursively is safe.

use std::borrow::Cow;

use super::opcode as op;
use super::stream::{Hook, Slot, Take, STREAM_CONFLICT};
use super::value::{a, Arena, ObjId, Object, Value};

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
}

/// Why decoding stopped, at which byte offset (that of the offending opcode).
#[derive(Debug, PartialEq)]
pub struct DecodeError {
    pub offset: u64,
    pub reason: String,
}

/// Decodes a whole pickle held in memory.
pub fn decode(data: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    if data.first() != Some(&op::PROTO) {
        return Err(DecodeError {
            offset: 0,
            reason: format!("not a pickle ({})", preview(data)),
        });
    }
    Machine::new(data, None).run()
}

/// [`decode`] with a [`Hook`] that may take the items of lists as they are appended (see
/// [`crate::stream`]). An error whose reason starts with [`STREAM_CONFLICT`] means the taken
/// items were referenced again: decode again without the hook.
pub fn decode_with<'a>(
    data: &'a [u8],
    hook: &mut dyn Hook<'a>,
) -> Result<Decoded<'a>, DecodeError> {
    if data.first() != Some(&op::PROTO) {
        return decode(data);
    }
    Machine::new(data, Some(hook)).run()
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

/// What a file starts with, as text when it reads as text, else as hex bytes.
fn preview(data: &[u8]) -> String {
    if data.is_empty() {
        return "the file is empty".to_string();
    }
    let head = &data[..data.len().min(PREVIEW_BYTES)];
    let more = if head.len() < data.len() { " …" } else { "" };
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
            let more = if data.len() > 16 { " …" } else { "" };
            format!("starts with bytes {}{more}", hex.join(" "))
        }
    }
}

/// The pickle stack machine.
struct Machine<'a, 'h> {
    data: &'a [u8],
    /// Streaming (crate::stream): the hook, per-object flags and memo slot, reusable ids.
    hook: Option<&'h mut dyn Hook<'a>>,
    flags: Vec<u8>,
    memo_slot: Vec<u32>,
    free_ids: Vec<ObjId>,
    /// Next byte to read.
    pos: usize,
    /// Offset and byte of the opcode being executed.
    at: usize,
    op: u8,
    /// The value stack; MARKs are positions in it.
    stack: Vec<Value>,
    marks: Vec<usize>,
    /// Memo slots by index; `memo_count` is the number of filled slots (Python's `len(memo)`).
    memo: Vec<Option<Value>>,
    memo_count: usize,
    arena: Arena<'a>,
    /// Per object: it has been placed inside a container, so it may no longer be modified.
    placed: Vec<bool>,
    /// Per object: nesting height (0 for strings and bytes, 1 + deepest item for containers).
    height: Vec<u16>,
    protocol: u8,
    opcodes: usize,
    /// Strings that were not valid UTF-8: how many, and the offset of the first.
    invalid_utf8: Option<(usize, usize)>,
}

impl<'a, 'h> Machine<'a, 'h> {
    fn new(data: &'a [u8], hook: Option<&'h mut dyn Hook<'a>>) -> Self {
        // Every object costs at least two bytes of pickle, so these capacities are bounded by
        // the file size and spare the vectors most of their regrowth copies.
        let objects = data.len() / 8;
        let streaming = hook.is_some();
        let side = if streaming { objects } else { 0 };
        Machine {
            data,
            hook,
            flags: Vec::with_capacity(side),
            memo_slot: Vec::with_capacity(side),
            free_ids: Vec::new(),
            pos: 0,
            at: 0,
            op: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Vec::with_capacity(objects),
            memo_count: 0,
            arena: Arena::with_capacity(objects),
            placed: Vec::with_capacity(objects),
            height: Vec::with_capacity(objects),
            protocol: 0,
            opcodes: 0,
            invalid_utf8: None,
        }
    }

    fn run(mut self) -> Result<Decoded<'a>, DecodeError> {
        while let Some(&byte) = self.data.get(self.pos) {
            self.at = self.pos;
            self.op = byte;
            self.pos += 1;
            self.opcodes += 1;
            if byte == op::STOP {
                return self.finish();
            }
            self.execute()?;
        }
        Err(DecodeError {
            offset: self.data.len() as u64,
            reason: "truncated: the pickle ends without a STOP opcode".to_string(),
        })
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
        let trailing = self.data.len() - self.pos;
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
        Ok(Decoded {
            arena: self.arena,
            root,
            protocol: self.protocol,
            warnings,
        })
    }

    fn execute(&mut self) -> Result<(), DecodeError> {
        match self.op {
            op::PROTO => {
                let version = self.take(1)?[0];
                if !(2..=5).contains(&version) {
                    return Err(self.error(format!(
                        "pickle protocol {version} is not supported (memq reads protocols 2 to 5)"
                    )));
                }
                self.protocol = version;
            }
            op::FRAME => {
                // Only a read-ahead hint: validated, never used to allocate.
                let length = self.uint(8)?;
                let left = self.data.len() - self.pos;
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
                    self.stack.pop();
                } else {
                    self.mark_start()?;
                }
            }
            op::POP_MARK => {
                let start = self.mark_start()?;
                self.stack.truncate(start);
            }
            op::DUP => {
                let top = self.top()?;
                self.pin(top)?;
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
                match line {
                    b"00" => self.stack.push(Value::Bool(false)),
                    b"01" => self.stack.push(Value::Bool(true)),
                    _ => {
                        let value = self.parse_line::<i128>(line)?;
                        self.push_int(value);
                    }
                }
            }
            op::LONG => {
                let line = self.line()?;
                let digits = line.strip_suffix(b"L").unwrap_or(line);
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
                let value = self.parse_line::<f64>(line)?;
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
                let bytes = self.take(length)?;
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

            op::MEMOIZE => self.memo_put(self.memo_count)?,
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
                let index = self.parse_line::<usize>(line)?;
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
                let index = self.parse_line::<usize>(line)?;
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
            op::STRING | op::UNICODE => {
                return Err(self.error(
                    "(a protocol 0 text string) is not supported; snapshots are written with \
                     protocol 2 or later",
                ));
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

    #[inline]
    fn take(&mut self, length: usize) -> Result<&'a [u8], DecodeError> {
        let left = self.data.len() - self.pos;
        if length > left {
            return Err(self.truncated(length, left));
        }
        let bytes = &self.data[self.pos..self.pos + length];
        self.pos += length;
        Ok(bytes)
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
    fn sized(&mut self, width: usize) -> Result<&'a [u8], DecodeError> {
        let length = self.uint(width)?;
        let left = self.data.len() - self.pos;
        if length > left as u64 {
            return Err(self.error(format!(
                "claims {length} bytes but only {left} remain (truncated or corrupt)"
            )));
        }
        self.take(length as usize)
    }

    /// A signed 4-byte length (BINSTRING, LONG4), which must not be negative.
    fn int4_length(&mut self) -> Result<usize, DecodeError> {
        let bytes = self.take(4)?;
        let length = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        usize::try_from(length).map_err(|_| self.error(format!("has negative length {length}")))
    }

    /// A newline-terminated operand of the text opcodes, without the newline.
    fn line(&mut self) -> Result<&'a [u8], DecodeError> {
        let rest = &self.data[self.pos..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(self.error("has no terminating newline (truncated)"));
        };
        self.pos += end + 1;
        Ok(&rest[..end])
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
        let bytes = self.take(length)?;
        if length > MAX_INT_BYTES {
            return Err(self.error(format!(
                "holds an integer of {length} bytes; at most {MAX_INT_BYTES} bytes are accepted"
            )));
        }
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

    fn push_str(&mut self, bytes: &'a [u8]) {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => {
                let (count, first) = self.invalid_utf8.unwrap_or((0, self.at));
                self.invalid_utf8 = Some((count + 1, first));
                String::from_utf8_lossy(bytes)
            }
        };
        self.push_object(Object::Str(text), 0);
    }

    fn push_object(&mut self, object: Object<'a>, height: u16) {
        if let Some(id) = self.free_ids.pop() {
            self.arena.replace(id, object, self.at as u64);
            self.placed[id] = false;
            self.height[id] = height;
            self.flags[id] = 0;
            self.memo_slot[id] = NO_SLOT;
            self.stack.push(Value::Obj(id));
            return;
        }
        let id = self.arena.push(object, self.at as u64);
        self.placed.push(false);
        self.height.push(height);
        if self.hook.is_some() {
            self.flags.push(0);
            self.memo_slot.push(NO_SLOT);
        }
        self.stack.push(Value::Obj(id));
    }

    // Streaming.

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

    /// Where the value at stack position `pos` sits (see [`Take::place`]).
    fn place_of(&self, mut pos: usize) -> Option<Vec<(Value, Slot)>> {
        let mut place = Vec::new();
        loop {
            let mark = self.marks.iter().rev().find(|&&m| m <= pos).copied();
            let Some(mark) = mark else {
                return (pos == 0).then_some(place);
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
                    pos -= 1;
                    continue;
                }
            }
            let slot = match self.arena.object(parent)? {
                Object::Dict(_) if (pos - mark) % 2 == 1 => Slot::Key(self.stack[pos - 1]),
                Object::List(items) => Slot::Index(items.len() + (pos - mark)),
                _ => return None,
            };
            place.push((parent, slot));
            pos = parent_pos;
        }
    }

    /// APPEND(S) onto list `id` of the stack's values from `start` up, offered to the hook.
    /// Returns whether the hook took them (they are then off the stack).
    fn offer(&mut self, id: ObjId, start: usize) -> Result<bool, DecodeError> {
        let place = self.place_of(start - 1);
        let Some(hook) = self.hook.as_mut() else {
            return Ok(false);
        };
        let (flags, placed) = (&self.flags, &self.placed);
        let consumable = |id: ObjId| flags[id] & (PINNED | TAKEN | FREED) == 0 && !placed[id];
        let mut take = Take {
            arena: &self.arena,
            list: id,
            place: place.as_deref(),
            items: &self.stack[start..],
            consumable: &consumable,
            consumed: Vec::new(),
        };
        let taken = match hook.append(&mut take) {
            Ok(taken) => taken,
            Err(_) => return Err(self.conflict()),
        };
        if !taken {
            if self.flags[id] & TAKEN != 0 {
                return Err(self.conflict());
            }
            return Ok(false);
        }
        let consumed = take.consumed;
        self.flags[id] |= TAKEN;
        for &i in &consumed {
            if let Value::Obj(item) = self.stack[start + i] {
                self.release(item);
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
        Ok(true)
    }

    /// Drops a consumed object; its id is reused by the next object.
    fn release(&mut self, id: ObjId) {
        if self.flags[id] & FREED != 0 {
            return;
        }
        self.arena.replace(id, Object::Tuple(Vec::new()), 0);
        self.flags[id] = FREED;
        let slot = self.memo_slot[id];
        if slot != NO_SLOT && slot != MANY_SLOTS {
            if let Some(entry) = self.memo.get_mut(slot as usize) {
                if *entry == Some(Value::Obj(id)) {
                    *entry = Some(DEAD);
                }
            }
        }
        self.free_ids.push(id);
    }

    // Containers.

    /// Marks the stack's values from `start` up as placed inside a container and returns the
    /// height of a container holding them, refusing nesting beyond [`MAX_DEPTH`].
    fn place_from(&mut self, start: usize) -> Result<u16, DecodeError> {
        let mut height = 1;
        for item in &self.stack[start..] {
            if let Value::Obj(id) = *item {
                self.placed[id] = true;
                height = height.max(self.height[id] + 1);
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
        if self.hook.is_some() && matches!(self.op, op::APPEND | op::APPENDS) && !self.placed[id] {
            // The checks of the plain path first, so that streaming accepts the same files.
            let mut height = 1;
            for item in &self.stack[start..] {
                if let Value::Obj(item) = *item {
                    height = height.max(self.height[item] + 1);
                }
            }
            if height > MAX_DEPTH {
                return Err(self.error(format!("nests containers deeper than {MAX_DEPTH} levels")));
            }
            if self.offer(id, start)? {
                // The list keeps the height of what it would hold, as the plain path does.
                self.height[id] = self.height[id].max(height);
                return Ok(());
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
        if index >= self.memo.len() {
            self.memo.resize(index + 1, None);
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
        if self.memo[index].replace(value).is_none() {
            self.memo_count += 1;
        }
        Ok(())
    }

    fn memo_get(&mut self, index: usize) -> Result<(), DecodeError> {
        match self.memo.get(index).copied().flatten() {
            Some(value) => {
                self.pin(value)?;
                self.stack.push(value);
                Ok(())
            }
            None => Err(self.error(format!(
                "reads memo index {index} before anything was stored there"
            ))),
        }
    }
}

/// Consecutive values as (key, value); a trailing odd value is left out (callers check).
fn as_pairs(items: &[Value]) -> impl Iterator<Item = (Value, Value)> + '_ {
    items.chunks_exact(2).map(|pair| (pair[0], pair[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protocol 4 pickle of `body` followed by STOP.
    fn pickle(body: &[u8]) -> Vec<u8> {
        [b"\x80\x04".as_slice(), body, b"."].concat()
    }

    /// Decodes `body`; the bytes are leaked so the result may borrow them (tests only).
    fn decode_ok(body: &[u8]) -> Decoded<'static> {
        let data: &'static [u8] = Box::leak(pickle(body).into_boxed_slice());
        decode(data).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn decode_err(body: &[u8]) -> DecodeError {
        decode(&pickle(body)).expect_err("decoding should fail")
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
    fn accepts_protocols_2_to_5_only() {
        for version in 2..=5u8 {
            let data = [0x80, version, b'N', b'.'];
            let decoded = decode(&data).expect("supported");
            assert_eq!(decoded.protocol, version);
        }
        for version in [0u8, 1, 6] {
            let err = decode(&[0x80, version, b'N', b'.']).expect_err("unsupported");
            assert!(err.reason.contains("not supported"), "{}", err.reason);
        }
        let err = decode_err(b"S'x'\n");
        assert!(err.reason.contains("STRING"), "{}", err.reason);
        let err = decode_err(b"\xff");
        assert_eq!(err.reason, "byte 0xff is not a pickle opcode");
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
}
