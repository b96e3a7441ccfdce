//! PyTorch memory-snapshot pickles (`torch.cuda.memory._dump_snapshot`, torch_npu's
//! equivalent) into the snap_* tables. See snapshot-format.md for the format.
//!
//! - [`pickle`]: a data-only pickle decoder (refuses every opcode that could run code);
//! - [`value`]: the decoded values, shared objects stored once;
//! - [`tables`]: the snapshot structure into rows; [`frames`]: stacks deduplicated;
//! - [`json`]: structured cells as JSON; [`batches`]: rows into Arrow batches;
//! - [`schema`]: the table definitions.

mod batches;
mod frames;
mod json;
mod opcode;
mod pickle;
pub mod schema;
mod tables;
mod value;

use std::io::Read;
use std::path::Path;

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Location, MemqError, Result};

/// Reads one snapshot pickle into one batch per snap_* table (in the order of
/// [`schema::tables`]); `snapshot` is the source name written in every row.
pub fn read_snapshot(path: &Path, snapshot: &str) -> Result<Vec<(&'static str, RecordBatch)>> {
    let data = std::fs::read(path).map_err(|e| MemqError::io(path, e))?;
    let decoded = pickle::decode(&data)
        .map_err(|e| MemqError::input(path, Location::ByteOffset(e.offset), e.reason))?;
    let rows = tables::rows(path, &decoded, data.len())?;
    batches::batches(snapshot, &rows)
}

/// Whether the file looks like a pickle: a .pickle/.pkl/.pk extension, or a first byte 0x80
/// (the PROTO opcode every protocol 2+ pickle starts with).
pub fn is_pickle(path: &Path) -> bool {
    let by_extension = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["pickle", "pkl", "pk"]
            .iter()
            .any(|known| e.eq_ignore_ascii_case(known))
    });
    by_extension || first_byte(path) == Some(0x80)
}

fn first_byte(path: &Path) -> Option<u8> {
    let mut byte = [0u8; 1];
    let mut file = std::fs::File::open(path).ok()?;
    file.read_exact(&mut byte).ok()?;
    Some(byte[0])
}
