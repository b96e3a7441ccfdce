//! Call stacks: frame lists interned into stack ids, deduplicated by content, numbered from 1 in
//! first-seen order (as the reference converter numbers `call_stacks.id`).
//!
//! Snapshots share frame dicts and frame lists heavily through the memo (docs/formats/snapshot.md
//! §2.3), so both are looked up by object identity first: each shared object is read once, and
//! its text is copied once (frames own their text, so the decoded tree can let go of it). A frame
//! list the streaming decoder dropped comes back from the memo as a tag: its stack id.

use std::collections::hash_map::Entry;

use foldhash::HashMap;

use crate::json::{Json, JsonError};
use memq_pickle::value::{a, Arena, ObjId, Object, Tag, Value};

/// One frame, as the key that makes two frames the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Frame {
    /// A dict frame (the real format): `name`, `filename`, `line`, other keys as JSON.
    Fields {
        name: Option<Box<str>>,
        filename: Option<Box<str>>,
        line: Option<i128>,
        extra_json: Option<String>,
    },
    /// A text frame, kept verbatim (or the JSON text of a frame that is neither dict nor text).
    Text(Box<str>),
}

impl Frame {
    pub fn name(&self) -> Option<&str> {
        match self {
            Frame::Fields { name, .. } => name.as_deref(),
            Frame::Text(text) => Some(split_text(text).map_or(text.as_ref(), |(_, _, name)| name)),
        }
    }

    pub fn filename(&self) -> Option<&str> {
        match self {
            Frame::Fields { filename, .. } => filename.as_deref(),
            Frame::Text(text) => split_text(text).map(|(filename, _, _)| filename),
        }
    }

    /// The line as Int64: values beyond it (PyTorch's 2^64-1 for "unknown") become -1.
    pub fn line(&self) -> Option<i64> {
        match self {
            Frame::Fields { line, .. } => line.map(|line| i64::try_from(line).unwrap_or(-1)),
            Frame::Text(text) => {
                split_text(text).map(|(_, line, _)| line.parse::<i64>().unwrap_or(-1))
            }
        }
    }

    pub fn extra_json(&self) -> Option<&str> {
        match self {
            Frame::Fields { extra_json, .. } => extra_json.as_deref(),
            Frame::Text(_) => None,
        }
    }
}

/// Splits `filename:line:name` at the first `:<digits>:` (C++ names hold `::`, Windows paths
/// `C:`), as PyTorch's viewers print frames.
fn split_text(text: &str) -> Option<(&str, &str, &str)> {
    let bytes = text.as_bytes();
    text.match_indices(':').find_map(|(colon, _)| {
        let digits = bytes[colon + 1..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = colon + 1 + digits;
        (digits > 0 && bytes.get(end) == Some(&b':'))
            .then(|| (&text[..colon], &text[colon + 1..end], &text[end + 1..]))
    })
}

/// In the per-object tables: the object was not seen yet.
const UNSEEN: u32 = u32::MAX;

/// All stacks of one snapshot.
#[derive(Default)]
pub struct Stacks {
    /// Per object of the arena, when it was read as a frame list: its stack id, 0 for an empty
    /// list, [`UNSEEN`] otherwise. Dense tables, since a real snapshot looks up about a million
    /// shared frames; they grow with the arena and forget the objects it drops.
    by_list: Vec<u32>,
    /// Per object, when it was read as a frame (dict or string): its index into `frames`.
    by_frame_object: Vec<u32>,
    by_frame: HashMap<Frame, u32>,
    frames: Vec<Frame>,
    by_content: HashMap<Vec<u32>, u32>,
    /// Frame indexes of each stack, innermost first; stack id = position + 1.
    stacks: Vec<Vec<u32>>,
}

impl Stacks {
    /// The stack id (0 for an empty list) of frame list `list`, when it was interned.
    pub fn id_of(&self, list: Value) -> Option<u32> {
        match list {
            Value::Obj(id) => self.by_list.get(id).copied().filter(|&s| s != UNSEEN),
            _ => None,
        }
    }

    /// The objects with these ids were dropped from the arena: their ids will name others.
    pub fn forget(&mut self, ids: &[ObjId]) {
        for &id in ids {
            if let Some(known) = self.by_list.get_mut(id) {
                *known = UNSEEN;
            }
            if let Some(known) = self.by_frame_object.get_mut(id) {
                *known = UNSEEN;
            }
        }
    }

    /// The stack id of a frame list; `None` for a missing, `None` or empty list. Anything odd is
    /// described in `problems`. A tag stands for a list interned before (its stack id, 0 for an
    /// empty list).
    pub fn intern(
        &mut self,
        arena: &Arena<'_>,
        json: &mut Json,
        frames: Value,
        problems: &mut Vec<String>,
    ) -> Result<Option<i64>, JsonError> {
        if let Value::Tag(Tag { tag, .. }) = frames {
            if tag as usize > self.stacks.len() {
                return Err(JsonError::Streamed);
            }
            return Ok((tag != 0).then_some(i64::from(tag)));
        }
        let (Value::Obj(list), Some(items)) = (frames, arena.sequence(frames)) else {
            if frames != Value::None {
                problems.push(format!(
                    "frames is {}, not a list; ignored",
                    a(arena.type_name(frames))
                ));
            }
            return Ok(None);
        };
        let known = self.by_list.get(list).copied().unwrap_or(UNSEEN);
        if known != UNSEEN {
            return Ok((known != 0).then_some(i64::from(known)));
        }
        let mut content = Vec::with_capacity(items.len());
        for &frame in items {
            content.push(self.frame(arena, json, frame, problems)?);
        }
        let stack_id = if content.is_empty() {
            0
        } else {
            match self.by_content.entry(content) {
                Entry::Occupied(known) => *known.get(),
                Entry::Vacant(new) => {
                    self.stacks.push(new.key().clone());
                    *new.insert(self.stacks.len() as u32)
                }
            }
        };
        if self.by_list.len() <= list {
            self.by_list.resize(arena.len().max(list + 1), UNSEEN);
        }
        self.by_list[list] = stack_id;
        Ok((stack_id != 0).then_some(i64::from(stack_id)))
    }

    fn frame(
        &mut self,
        arena: &Arena<'_>,
        json: &mut Json,
        value: Value,
        problems: &mut Vec<String>,
    ) -> Result<u32, JsonError> {
        if let Value::Obj(id) = value {
            let known = self.by_frame_object.get(id).copied().unwrap_or(UNSEEN);
            if known != UNSEEN {
                return Ok(known);
            }
        }
        let frame = match (value, arena.object(value)) {
            (Value::Tag(_), _) => return Err(JsonError::Streamed),
            (_, Some(Object::Dict(items))) => fields(arena, json, items, problems)?,
            (_, Some(Object::Str(text))) => Frame::Text(text.as_ref().into()),
            _ => {
                problems.push(format!(
                    "a frame is {}; kept as its JSON text",
                    a(arena.type_name(value))
                ));
                Frame::Text(json.value(arena, value)?.into())
            }
        };
        let index = match self.by_frame.entry(frame) {
            Entry::Occupied(known) => *known.get(),
            Entry::Vacant(new) => {
                self.frames.push(new.key().clone());
                *new.insert(self.frames.len() as u32 - 1)
            }
        };
        if let Value::Obj(id) = value {
            if self.by_frame_object.len() <= id {
                self.by_frame_object.resize(arena.len().max(id + 1), UNSEEN);
            }
            self.by_frame_object[id] = index;
        }
        Ok(index)
    }

    /// Every frame of every stack: (stack id, depth, frame), by stack id then depth.
    pub fn rows(&self) -> impl Iterator<Item = (i64, i64, &Frame)> {
        self.stacks.iter().enumerate().flat_map(move |(i, stack)| {
            stack.iter().enumerate().map(move |(depth, &frame)| {
                (i as i64 + 1, depth as i64, &self.frames[frame as usize])
            })
        })
    }
}

/// A dict frame.
fn fields(
    arena: &Arena<'_>,
    json: &mut Json,
    items: &[(Value, Value)],
    problems: &mut Vec<String>,
) -> Result<Frame, JsonError> {
    let (mut name, mut filename, mut line) = (None, None, None);
    let mut extra = Vec::new();
    for &(key, value) in items {
        if matches!(value, Value::Tag(_)) || matches!(key, Value::Tag(_)) {
            return Err(JsonError::Streamed);
        }
        match arena.str(key) {
            Some("name") => name = frame_text(arena, "name", value, problems),
            Some("filename") => filename = frame_text(arena, "filename", value, problems),
            Some("line") => {
                line = arena.int(value);
                match line {
                    None => problems.push(format!(
                        "a frame's line is {}; ignored",
                        a(arena.type_name(value))
                    )),
                    Some(l) if i64::try_from(l).is_err() && l != u64::MAX.into() => {
                        problems.push(format!("a frame's line {l} is out of range; stored as -1"))
                    }
                    Some(_) => {}
                }
            }
            _ => extra.push((key, value)),
        }
    }
    let extra_json = if extra.is_empty() {
        None
    } else {
        Some(json.object(arena, &extra)?)
    };
    Ok(Frame::Fields {
        name,
        filename,
        line,
        extra_json,
    })
}

fn frame_text(
    arena: &Arena<'_>,
    key: &str,
    value: Value,
    problems: &mut Vec<String>,
) -> Option<Box<str>> {
    let text = arena.str(value);
    if text.is_none() && value != Value::None {
        problems.push(format!(
            "a frame's {key} is {}; ignored",
            a(arena.type_name(value))
        ));
    }
    text.map(Box::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_frames_split_at_the_first_line_number() {
        let frame = Frame::Text("/a/b.py:12:forward".into());
        assert_eq!(frame.filename(), Some("/a/b.py"));
        assert_eq!(frame.line(), Some(12));
        assert_eq!(frame.name(), Some("forward"));

        let cpp = Frame::Text("C:\\x\\y.cpp:7:c10::cuda::malloc(int)".into());
        assert_eq!(cpp.filename(), Some("C:\\x\\y.cpp"));
        assert_eq!(cpp.line(), Some(7));
        assert_eq!(cpp.name(), Some("c10::cuda::malloc(int)"));

        let plain = Frame::Text("torch::unwind::unwind()".into());
        assert_eq!(plain.name(), Some("torch::unwind::unwind()"));
        assert_eq!((plain.filename(), plain.line()), (None, None));
    }

    #[test]
    fn line_beyond_int64_is_minus_one() {
        let frame = Frame::Fields {
            name: None,
            filename: None,
            line: Some(u64::MAX.into()),
            extra_json: None,
        };
        assert_eq!(frame.line(), Some(-1));
    }
}
