//! Snapshots saved as JSON (the snapshot dict written with `json.dump`, as on-demand capture
//! tools do; docs/formats/snapshot.md §1.9): parsed into the decoder's value tree, so that the
//! walk that reads a pickle reads them the same way. Tuples arrive as lists (`segment_pool_id`,
//! `pool_id`), which the walk accepts.
//!
//! The file is read through a buffer, never whole. JSON has no sharing, where a pickle's memo
//! shares every string, frame and often frame list: so as they are parsed, short strings (keys,
//! actions, file and function names), frame dicts and frame lists are shared by content, and
//! the tree holds each distinct one once, as a pickle's does. Row dicts (segments, blocks,
//! trace entries) and their lists are never shared: the walk refuses a row read twice. The tree
//! is held whole (the trace is not streamed as it is from a pickle): its entries, with their
//! frames shared, take about a pickle's decoded size.

use std::borrow::Cow;
use std::cell::Cell;
use std::io::{BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use foldhash::{HashMap, HashSet};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

use memq_core::error::{Location, MemqError, Result};
use memq_pickle::value::{Arena, ObjId, Object, Value};
use memq_pickle::{Decoded, Stats};

/// Strings up to this length are shared by content.
const SHARED_STRING: usize = 256;

/// Whether these first bytes of a file open a JSON document (an object or an array, after
/// white space and a UTF-8 BOM). No pickle starts so: `{` and `[` are no opcodes.
pub fn opens_json(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    matches!(
        head.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

/// Whether a file named directly is a JSON snapshot: an object whose first 64 KiB name
/// `segments` or `device_traces` as a key (and no `traceEvents`: a torch.profiler trace).
pub fn is_snapshot(path: &Path, head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    if head.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return false;
    }
    let Ok(more) = memq_core::format::read_head(path, 64 << 10) else {
        return false;
    };
    let text = String::from_utf8_lossy(&more);
    let key = |name: &str| {
        text.match_indices(name)
            .any(|(at, _)| text[at + name.len()..].trim_start().starts_with(':'))
    };
    !text.contains("\"traceEvents\"") && (key("\"segments\"") || key("\"device_traces\""))
}

/// Counts the bytes the parser has taken (for the offsets of objects) and where its last two
/// lines start (an error's line and column become a byte offset).
struct Counting<R> {
    inner: R,
    read: Rc<Cell<u64>>,
    lines: Rc<Cell<Lines>>,
}

/// Newlines seen, and the offsets where the last line and the one before start.
#[derive(Clone, Copy, Default)]
struct Lines {
    newlines: u64,
    last: u64,
    before: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let start = self.read.get();
        let mut lines = self.lines.get();
        for (i, _) in buf[..n].iter().enumerate().filter(|(_, &b)| b == b'\n') {
            lines.newlines += 1;
            lines.before = lines.last;
            lines.last = start + i as u64 + 1;
        }
        self.lines.set(lines);
        self.read.set(start + n as u64);
        Ok(n)
    }
}

/// The byte offset of 1-based `line` and `column` (serde_json counts columns in bytes), when
/// the line is one of the last two read; else the bytes read.
fn offset_of(lines: Lines, read: u64, line: usize, column: usize) -> u64 {
    let column = (column as u64).saturating_sub(1);
    match (line as u64).checked_sub(1) {
        Some(l) if l == lines.newlines => lines.last + column,
        Some(l) if l + 1 == lines.newlines => lines.before + column,
        _ => read.saturating_sub(1),
    }
}

/// Parses the JSON document `reader` yields into a value tree (`protocol` 0: there is none).
pub fn decode<R: Read>(path: &Path, reader: R) -> Result<Decoded<'static>> {
    let read = Rc::new(Cell::new(0u64));
    let lines = Rc::new(Cell::new(Lines::default()));
    let counting = Counting {
        inner: BufReader::with_capacity(1 << 20, reader),
        read: read.clone(),
        lines: lines.clone(),
    };
    let mut tree = Tree {
        arena: Arena::with_capacity(1 << 12),
        strings: HashMap::default(),
        frames: HashMap::default(),
        frame_ids: HashSet::default(),
        frame_lists: HashMap::default(),
        read: read.clone(),
    };
    let mut de = serde_json::Deserializer::from_reader(counting);
    let parsed = Node(&mut tree).deserialize(&mut de).and_then(|root| {
        de.end()?;
        Ok(root)
    });
    let root = parsed.map_err(|e| {
        let offset = offset_of(lines.get(), read.get(), e.line(), e.column());
        let why = match e.classify() {
            serde_json::error::Category::Io => format!("cannot read the JSON snapshot: {e}"),
            serde_json::error::Category::Eof => {
                format!("the JSON snapshot ends early (truncated): {e}")
            }
            _ => format!("not valid JSON: {e}"),
        };
        MemqError::input(path, Location::ByteOffset(offset), why)
    })?;
    let objects = tree.arena.len();
    Ok(Decoded {
        arena: tree.arena,
        root,
        protocol: 0,
        warnings: Vec::new(),
        stats: Stats {
            objects,
            memo_slots: 0,
            released: 0,
        },
    })
}

struct Tree {
    arena: Arena<'static>,
    strings: HashMap<Box<str>, Value>,
    /// Frame dicts by content (see [`frame_key`]), and frame lists by their frames.
    frames: HashMap<Vec<u64>, Value>,
    frame_ids: HashSet<ObjId>,
    frame_lists: HashMap<Vec<ObjId>, Value>,
    read: Rc<Cell<u64>>,
}

/// The content of a dict that is a frame (a `filename` key, every value a scalar or a shared
/// string), as words that are equal exactly when the frames are; `None` for any other dict.
/// Shared strings are canonical by content, so their ids stand for their text.
fn frame_key(arena: &Arena, pairs: &[(Value, Value)]) -> Option<Vec<u64>> {
    if !pairs.iter().any(|&(k, _)| arena.str(k) == Some("filename")) {
        return None;
    }
    let word = |v: Value| -> Option<[u64; 2]> {
        Some(match v {
            Value::None => [0, 0],
            Value::Bool(b) => [1, u64::from(b)],
            Value::Int(i) => [2, i as u64],
            Value::Float(f) => [3, f.to_bits()],
            Value::Obj(id) if arena.str(v).is_some_and(|t| t.len() <= SHARED_STRING) => {
                [4, id as u64]
            }
            _ => return None,
        })
    };
    let mut key = Vec::with_capacity(pairs.len() * 4);
    for &(k, v) in pairs {
        key.extend(word(k)?);
        key.extend(word(v)?);
    }
    Some(key)
}

impl Tree {
    fn at(&self) -> u64 {
        self.read.get().saturating_sub(1)
    }

    fn string(&mut self, text: Cow<'_, str>) -> Value {
        if text.len() <= SHARED_STRING {
            if let Some(&value) = self.strings.get(&*text) {
                return value;
            }
        }
        let at = self.at();
        let short = text.len() <= SHARED_STRING;
        let key: Option<Box<str>> = short.then(|| Box::from(&*text));
        let value = Value::Obj(
            self.arena
                .push(Object::Str(Cow::Owned(text.into_owned())), at),
        );
        if let Some(key) = key {
            self.strings.insert(key, value);
        }
        value
    }
}

/// One JSON value into the tree.
struct Node<'t>(&'t mut Tree);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        de: D,
    ) -> std::result::Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(match i64::try_from(v) {
            Ok(v) => Value::Int(v),
            // 2^64 - 1 (PyTorch's -1 written unsigned, docs/formats/snapshot.md §1.6).
            Err(_) => {
                let at = self.0.at();
                Value::Obj(self.0.arena.push(Object::BigInt(i128::from(v)), at))
            }
        })
    }

    fn visit_f64<E>(self, v: f64) -> std::result::Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(self.0.string(Cow::Borrowed(v)))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(self.0.string(Cow::Owned(v)))
    }

    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let tree = self.0;
        let at = tree.at();
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Node(&mut *tree))? {
            items.push(item);
        }
        // A list of shared frames is a frame list: shared by content too.
        let frames: Option<Vec<ObjId>> = items
            .iter()
            .map(|&v| match v {
                Value::Obj(id) if tree.frame_ids.contains(&id) => Some(id),
                _ => None,
            })
            .collect();
        if let Some(ids) = frames.filter(|ids| !ids.is_empty()) {
            if let Some(&known) = tree.frame_lists.get(&ids) {
                return Ok(known);
            }
            let list = Value::Obj(tree.arena.push(Object::List(items), at));
            tree.frame_lists.insert(ids, list);
            return Ok(list);
        }
        Ok(Value::Obj(tree.arena.push(Object::List(items), at)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let tree = self.0;
        let at = tree.at();
        let mut pairs = Vec::new();
        while let Some(key) = map.next_key_seed(Node(&mut *tree))? {
            let value = map.next_value_seed(Node(&mut *tree))?;
            pairs.push((key, value));
        }
        if let Some(key) = frame_key(&tree.arena, &pairs) {
            if let Some(&known) = tree.frames.get(&key) {
                return Ok(known);
            }
            let frame = Value::Obj(tree.arena.push(Object::Dict(pairs), at));
            tree.frames.insert(key, frame);
            if let Value::Obj(id) = frame {
                tree.frame_ids.insert(id);
            }
            return Ok(frame);
        }
        Ok(Value::Obj(tree.arena.push(Object::Dict(pairs), at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_shares_short_strings() {
        let text = br#"{"segments": [{"address": 18446744073709551615, "segment_pool_id": [1, 2], "x": null, "f": 1.5, "b": true}], "k": "segments"}"#;
        let d = decode(Path::new("s.json"), &text[..]).unwrap();
        let top = d.arena.dict(d.root).unwrap();
        assert_eq!(d.arena.str(top[1].1), Some("segments"));
        // The key "segments" and the value "segments" are one object.
        assert_eq!(top[0].0, top[1].1);
        let segment = d
            .arena
            .dict(d.arena.sequence(top[0].1).unwrap()[0])
            .unwrap();
        assert_eq!(d.arena.int(segment[0].1), Some(u64::MAX as i128));
        assert_eq!(d.arena.sequence(segment[1].1).map(<[_]>::len), Some(2));
        assert_eq!(segment[2].1, Value::None);
        assert_eq!(segment[3].1, Value::Float(1.5));
        assert_eq!(segment[4].1, Value::Bool(true));
    }

    /// Equal frames and frame lists are one object each, as a pickle's memo makes them; row
    /// dicts stay apart even when equal.
    #[test]
    fn frames_and_frame_lists_are_shared_by_content() {
        let text = br#"{"device_traces": [[
            {"action": "alloc", "addr": 1, "frames": [{"name": "f", "filename": "a.py", "line": 1}]},
            {"action": "alloc", "addr": 1, "frames": [{"name": "f", "filename": "a.py", "line": 1}]},
            {"action": "alloc", "addr": 1, "frames": [{"name": "f", "filename": "a.py", "line": 2}]}
        ]]}"#;
        let d = decode(Path::new("s.json"), &text[..]).unwrap();
        let top = d.arena.dict(d.root).unwrap();
        let device = d.arena.sequence(top[0].1).unwrap()[0];
        let entries = d.arena.sequence(device).unwrap();
        let frames = |e: Value| d.arena.dict(e).unwrap()[2].1;
        assert_ne!(entries[0], entries[1]);
        assert_eq!(frames(entries[0]), frames(entries[1]));
        assert_ne!(frames(entries[0]), frames(entries[2]));
        let first = |e: Value| d.arena.sequence(frames(e)).unwrap()[0];
        assert_ne!(first(entries[0]), first(entries[2]));
    }

    #[test]
    fn bad_json_names_the_offset() {
        let text = b"{\"segments\": [1, 2,, 3]}";
        let err = decode(Path::new("bad.json"), &text[..])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bad.json"), "{err}");
        assert!(err.contains("offset 19"), "{err}");
        assert!(err.contains("not valid JSON"), "{err}");
        let err = decode(Path::new("cut.json"), &b"{\"segments\": ["[..])
            .unwrap_err()
            .to_string();
        assert!(err.contains("truncated"), "{err}");
        let err = decode(Path::new("t.json"), &b"{} x"[..])
            .unwrap_err()
            .to_string();
        assert!(err.contains("trailing"), "{err}");
        assert!(err.contains("offset 3"), "{err}");
        // On a later line: the offset counts the lines before.
        let err = decode(Path::new("l.json"), &b"{\n  \"a\": [1,\n  x]}"[..])
            .unwrap_err()
            .to_string();
        assert!(err.contains("offset 15"), "{err}");
    }

    #[test]
    fn tells_json_from_pickles() {
        assert!(opens_json(b"\xef\xbb\xbf  {\"a\""));
        assert!(opens_json(b"\n["));
        assert!(!opens_json(b"\x80\x04"));
        assert!(!opens_json(b"(dp0\n"));
    }
}
