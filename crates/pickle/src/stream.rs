//! Streaming: a [`Hook`] sees the items of every APPEND/APPENDS before they enter their list and
//! may take them, so that a reader can turn the elements of a huge list (a snapshot's trace
//! entries) into rows as they are decoded instead of holding the whole tree.
//!
//! An item the hook *consumes* is dropped from the arena and its id reused: only an object no one
//! else can reach may be consumed (a dict not yet placed anywhere, never copied with DUP or read
//! back from the memo). A list whose items were taken stays empty in the arena. Any later use of
//! a taken list or of a consumed object (a memo read, a DUP) stops decoding with an error whose
//! reason contains [`STREAM_CONFLICT`]: the caller then decodes again without a hook. The hook only
//! changes what is stored, never what is accepted, so every safety check of the decoder holds.
//!
//! Objects inside a consumed item that the memo still holds (a frame list the next entry may
//! share) can be *tagged* by the hook ([`Take::tag`]): once nothing but the memo refers to one,
//! it is dropped too and the memo hands out [`Value::Tag`] in its place, which the hook
//! recognises. The decoder tells the hook every id it drops ([`Hook::released`]), so that caches
//! keyed by id can forget it. The memo itself keeps only what can still be read: a page of memo
//! slots whose objects were all consumed is dropped (reading it back is a conflict).

use super::value::{Arena, ObjId, Object, Value};

/// In the reason of the error that ends a streaming decode whose taken items are referenced
/// again (after the opcode's name); the caller decodes the file again without a hook.
pub const STREAM_CONFLICT: &str = "streaming conflict";

/// Where a container sits: the slot of the child in its parent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Slot {
    /// The value of this key in a dict under construction.
    Key(Value),
    /// The position in a list under construction.
    Index(usize),
}

/// The hook's answer to a batch it wants to abandon: decoding stops with a
/// [`STREAM_CONFLICT`] error.
#[derive(Debug)]
pub struct Abort;

/// Sees the items appended to lists while a pickle is decoded.
pub trait Hook<'a> {
    /// Called before APPEND/APPENDS add items to a list. Returns `true` when the hook took the
    /// items: the list then stays as it is (the items it did not consume are kept in the arena,
    /// placed), `false` to let the decoder append them as usual.
    fn append(&mut self, take: &mut Take<'_, 'a>) -> Result<bool, Abort>;

    /// The objects with these ids were dropped from the arena (consumed or tagged); their ids
    /// will name other objects.
    fn released(&mut self, _ids: &[ObjId]) {}
}

/// One APPEND/APPENDS seen by a [`Hook`].
pub struct Take<'m, 'a> {
    pub(crate) arena: &'m Arena<'a>,
    pub(crate) list: ObjId,
    pub(crate) place: Option<&'m [(Value, Slot)]>,
    /// Per level of `place`: the range of `stack` holding what its parent has pending.
    pub(crate) pending: &'m [std::ops::Range<usize>],
    pub(crate) stack: &'m [Value],
    pub(crate) items: &'m [Value],
    pub(crate) consumable: &'m dyn Fn(ObjId) -> bool,
    pub(crate) consumed: Vec<usize>,
    pub(crate) tags: Vec<(ObjId, u32)>,
    pub(crate) frozen: Vec<ObjId>,
}

impl<'m, 'a> Take<'m, 'a> {
    pub fn arena(&self) -> &'m Arena<'a> {
        self.arena
    }

    /// The list the items are appended to.
    pub fn list(&self) -> ObjId {
        self.list
    }

    /// Where the list sits, innermost first: (its parent container, its slot there), then the
    /// parent's parent ..., up to a container at the bottom of the stack (the pickle's future
    /// root). `None` when the stack does not show a plain nesting of lists and dicts.
    pub fn place(&self) -> Option<&'m [(Value, Slot)]> {
        self.place
    }

    /// What the parent at `level` of [`Take::place`] will still receive before the child's
    /// slot: for a dict, the keys and values (alternating) set after its last SETITEMS, for a
    /// list the items after its last APPENDS. Empty when `level` is out of range.
    pub fn pending(&self, level: usize) -> &'m [Value] {
        match self.pending.get(level) {
            Some(range) => &self.stack[range.clone()],
            None => &[],
        }
    }

    pub fn items(&self) -> &'m [Value] {
        self.items
    }

    /// Whether item `i` may be consumed: a dict no other value refers to.
    pub fn can_consume(&self, i: usize) -> bool {
        match self.items.get(i) {
            Some(&Value::Obj(id)) => {
                matches!(self.arena.get(id), Object::Dict(_)) && (self.consumable)(id)
            }
            _ => false,
        }
    }

    /// Drops item `i` (which must pass [`Take::can_consume`]) once the hook returns `true`.
    pub fn consume(&mut self, i: usize) {
        if self.can_consume(i) {
            self.consumed.push(i);
        }
    }

    /// Asks to drop object `value` (an object inside a consumed item) once nothing but the
    /// memo refers to it, the memo handing out `Value::Tag` with `tag` instead. Without effect
    /// when something else still holds it: the object then stays, under its id.
    pub fn tag(&mut self, value: Value, tag: u32) {
        if let Value::Obj(id) = value {
            self.tags.push((id, tag));
        }
    }

    /// Any later use of object `value` (reading it back from the memo, copying it, adding to
    /// it) stops decoding with a [`STREAM_CONFLICT`]: the hook read it and relies on it staying
    /// as it is.
    pub fn freeze(&mut self, value: Value) {
        if let Value::Obj(id) = value {
            self.frozen.push(id);
        }
    }
}
