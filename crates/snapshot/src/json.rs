//! JSON text of decoded values, for the cells that keep structured data as it was (unknown keys,
//! allocator settings, annotations).
//!
//! A memo-shared object is written out in full at every reference, so a small hostile pickle
//! could expand exponentially ("billion laughs"); one byte budget for the whole snapshot stops
//! that. Recursion is bounded by the decoder's nesting limit.

use std::fmt::Write;

use memq_pickle::value::{Arena, Object, Value};

/// Writes JSON until the budget of bytes is used up.
pub struct Json {
    left: usize,
}

/// Why a value has no JSON text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonError {
    /// The budget ran out: the snapshot's values expand beyond any plausible size.
    Budget,
    /// The value holds an object the streaming decoder let go of ([`Value::Tag`]): only the
    /// plain decoder can tell what it was.
    Streamed,
}

impl Json {
    pub fn with_budget(bytes: usize) -> Self {
        Json { left: bytes }
    }

    /// One value as JSON. Tuples and sets become arrays, bytes a hex string, non-finite floats
    /// `null`, and dict keys that are not strings the string of their JSON text.
    pub fn value(&mut self, arena: &Arena, value: Value) -> Result<String, JsonError> {
        let mut out = String::new();
        self.write(&mut out, arena, value)?;
        self.spend(&out)?;
        Ok(out)
    }

    /// Some items of a dict as a JSON object.
    pub fn object(&mut self, arena: &Arena, items: &[(Value, Value)]) -> Result<String, JsonError> {
        let mut out = String::new();
        self.write_object(&mut out, arena, items)?;
        self.spend(&out)?;
        Ok(out)
    }

    fn spend(&mut self, out: &str) -> Result<(), JsonError> {
        self.left = self.left.checked_sub(out.len()).ok_or(JsonError::Budget)?;
        Ok(())
    }

    fn write(&self, out: &mut String, arena: &Arena, value: Value) -> Result<(), JsonError> {
        if out.len() > self.left {
            return Err(JsonError::Budget);
        }
        match value {
            Value::None => out.push_str("null"),
            Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
            Value::Int(i) => write_display(out, i),
            Value::Float(f) if f.is_finite() => {
                let _ = write!(out, "{f:?}");
            }
            Value::Float(_) => out.push_str("null"),
            Value::Tag(_) => return Err(JsonError::Streamed),
            Value::Obj(id) => match arena.get(id) {
                Object::BigInt(i) => write_display(out, i),
                Object::Str(s) => write_str(out, s),
                Object::Bytes(bytes) => {
                    out.push('"');
                    for b in bytes.iter() {
                        let _ = write!(out, "{b:02x}");
                    }
                    out.push('"');
                }
                Object::List(items) | Object::Tuple(items) | Object::Set(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        self.write(out, arena, *item)?;
                    }
                    out.push(']');
                }
                Object::Dict(items) => self.write_object(out, arena, items)?,
            },
        }
        Ok(())
    }

    fn write_object(
        &self,
        out: &mut String,
        arena: &Arena,
        items: &[(Value, Value)],
    ) -> Result<(), JsonError> {
        out.push('{');
        for (i, (key, value)) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match arena.str(*key) {
                Some(key) => write_str(out, key),
                None => {
                    let mut text = String::new();
                    self.write(&mut text, arena, *key)?;
                    write_str(out, &text);
                }
            }
            out.push(':');
            self.write(out, arena, *value)?;
        }
        out.push('}');
        Ok(())
    }
}

fn write_display(out: &mut String, value: impl std::fmt::Display) {
    let _ = write!(out, "{value}");
}

/// A JSON string literal.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
