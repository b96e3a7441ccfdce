//! memq-core: what every other memq crate builds on.
//!
//! - [`error`]: the one error type; input errors name file, place and reason.
//! - [`catalog`]: table and column declarations (type, unit, doc, sort order).
//! - [`format`]: the `Format` trait an input family implements, and the `Catalog` of formats.
//! - [`dataset`]: the on-disk dataset — manifest, Parquet writers, atomic commit.
//! - [`rejects`]: the `rejects` and `sources` tables every format shares.
//! - [`function`]: a small frame for scalar SQL functions over whole arrays.

pub mod catalog;
pub mod dataset;
pub mod error;
pub mod format;
pub mod function;
pub mod rejects;
