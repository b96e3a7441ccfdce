//! The decoded pickle: scalars inline, everything else an object in an arena addressed by id.
//! A memo-shared value (a frame dict, a frame list, a string) is one object however often it is
//! referenced, so it is stored once and later code can recognise it by identity. Strings and
//! bytes borrow from the pickle's bytes when it is held in memory (only a string that is not
//! valid UTF-8 is copied), and are copied out of a pickle read from a file.

use std::borrow::Cow;

/// Index of an object in the [`Arena`].
pub type ObjId = usize;

/// A value on the pickle stack or inside a container.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Obj(ObjId),
    /// An object a streaming hook read and let go (crate::stream): the memo then hands out this
    /// tag instead of the object. Only a decode with a hook that tags objects produces it.
    Tag(Tag),
}

/// What stands for an object a streaming hook let go of: the hook's tag, and the nesting
/// height the object had. Aligned as the other payloads of [`Value`], which then copies as two
/// words.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(8))]
pub struct Tag {
    pub tag: u32,
    pub height: u16,
}

/// A value that is not a scalar; `'a` is the lifetime of the pickle's bytes.
#[derive(Debug, PartialEq)]
pub enum Object<'a> {
    /// An integer outside i64 (payloads of up to 16 bytes are accepted).
    BigInt(i128),
    /// Borrowed from the pickle, or a lossy copy of a string that is not valid UTF-8.
    Str(Cow<'a, str>),
    /// `bytes` or `bytearray`.
    Bytes(Cow<'a, [u8]>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Items in pickle order; with a repeated key the last item wins, as in Python.
    Dict(Vec<(Value, Value)>),
    /// `set` or `frozenset`, items in pickle order.
    Set(Vec<Value>),
}

/// Every object of one decoded pickle, with the byte offset of the opcode that created it.
#[derive(Debug, Default)]
pub struct Arena<'a> {
    objects: Vec<Object<'a>>,
    offsets: Vec<u64>,
}

impl<'a> Arena<'a> {
    pub fn with_capacity(objects: usize) -> Arena<'a> {
        Arena {
            objects: Vec::with_capacity(objects),
            offsets: Vec::with_capacity(objects),
        }
    }

    pub fn push(&mut self, object: Object<'a>, offset: u64) -> ObjId {
        self.objects.push(object);
        self.offsets.push(offset);
        self.objects.len() - 1
    }

    /// Puts `object` in place of object `id` (streaming reuses the ids of consumed objects).
    pub(crate) fn replace(&mut self, id: ObjId, object: Object<'a>, offset: u64) {
        self.objects[id] = object;
        self.offsets[id] = offset;
    }

    /// How many objects there are; every [`ObjId`] is below it.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn get(&self, id: ObjId) -> &Object<'a> {
        &self.objects[id]
    }

    pub fn get_mut(&mut self, id: ObjId) -> &mut Object<'a> {
        &mut self.objects[id]
    }

    /// Byte offset of the opcode that created the object.
    pub fn offset(&self, id: ObjId) -> u64 {
        self.offsets[id]
    }

    pub fn object(&self, value: Value) -> Option<&Object<'a>> {
        match value {
            Value::Obj(id) => Some(self.get(id)),
            _ => None,
        }
    }

    pub fn str(&self, value: Value) -> Option<&str> {
        match self.object(value) {
            Some(Object::Str(s)) => Some(s.as_ref()),
            _ => None,
        }
    }

    /// Any integer (not a bool).
    pub fn int(&self, value: Value) -> Option<i128> {
        match value {
            Value::Int(i) => Some(i.into()),
            Value::Obj(id) => match self.get(id) {
                Object::BigInt(i) => Some(*i),
                _ => None,
            },
            _ => None,
        }
    }

    /// The items of a list or a tuple.
    pub fn sequence(&self, value: Value) -> Option<&[Value]> {
        match self.object(value) {
            Some(Object::List(items) | Object::Tuple(items)) => Some(items),
            _ => None,
        }
    }

    pub fn dict(&self, value: Value) -> Option<&[(Value, Value)]> {
        match self.object(value) {
            Some(Object::Dict(items)) => Some(items),
            _ => None,
        }
    }

    /// Python's name for the value's type, for messages and `snap_info.value_type`.
    pub fn type_name(&self, value: Value) -> &'static str {
        match value {
            Value::None => "none",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Tag(_) => "streamed value",
            Value::Obj(id) => match self.get(id) {
                Object::BigInt(_) => "int",
                Object::Str(_) => "str",
                Object::Bytes(_) => "bytes",
                Object::List(_) => "list",
                Object::Tuple(_) => "tuple",
                Object::Dict(_) => "dict",
                Object::Set(_) => "set",
            },
        }
    }
}

/// A type name with its article for messages: "an int", "a dict", "None".
pub fn a(type_name: &str) -> String {
    match type_name {
        "none" => "None".to_string(),
        "int" => "an int".to_string(),
        other => format!("a {other}"),
    }
}
