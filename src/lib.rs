//! memq: a columnar SQL engine over accelerator memory dumps.
//!
//! Layout (one module per concept):
//! - [`error`]: the error type; every input error names file, place and reason.
//! - [`schema`]: table definitions (each table declared once).
//! - [`attr`], [`owner`]: the Attr mini-language and the owner hierarchy.
//! - [`memscope`]: msMemScope dumps (CSV, SQLite, output folders) into tables.
//! - [`snapshot`]: PyTorch memory snapshot pickles (safe decoder) into tables.
//! - [`dataset`]: the on-disk dataset (manifest, atomic Parquet output).
//! - [`ingest`]: turns inputs into a dataset.
//! - [`engine`]: DataFusion session with tables, UDFs and the SQL library.
//! - [`output`]: result printers and writers.

pub mod attr;
pub mod cache;
pub mod dataset;
pub mod discover;
pub mod engine;
pub mod error;
pub mod export;
pub mod gen;
pub mod ingest;
pub mod memscope;
pub mod open;
pub mod output;
pub mod owner;
pub mod params;
pub mod repl;
pub mod run;
pub mod schema;
pub mod snapshot;
pub mod to_db;
