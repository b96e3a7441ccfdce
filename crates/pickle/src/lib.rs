//! A data-only decoder for Python pickles (protocols 0–5), std only.
//!
//! It builds a tree of plain values ([`value`]) and refuses, with the opcode's name and byte
//! offset, every opcode that could construct objects or run code (GLOBAL, REDUCE, BUILD, ...).
//! Depth, lengths, memo use and cycles are checked, so a hostile file is an error, never code
//! and never a crash. A pickle is decoded from memory ([`decode`]) or read from a file through a
//! bounded buffer ([`decode_read`]); a [`stream::Hook`] can take the items of a long list as
//! they are decoded, so that they never all exist at once. See docs/formats/snapshot.md §1 for
//! the pickles memq reads.

mod input;
mod opcode;
mod pickle;
pub mod stream;
pub mod value;

pub use pickle::{decode, decode_read, decode_with, DecodeError, Decoded, Stats};
