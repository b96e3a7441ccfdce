//! PyTorch memory-snapshot pickles (`torch.cuda.memory._dump_snapshot`, torch_npu's
//! equivalent) into the snap_* tables. See snapshot-format.md for the format.
//!
//! - `pickle` (with `opcode`): a data-only pickle decoder that refuses every opcode that could
//!   run code; `value`: the decoded values, each shared object stored once;
//! - `tables`: the snapshot structure into rows; `frames`: stacks deduplicated by content;
//! - `json`: structured cells as JSON text; `batches`: rows into Arrow record batches;
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
use crate::schema::TableDef;

/// Reads one snapshot pickle into one batch per snap_* table, each with its definition (in the
/// order of [`schema::tables`]); `snapshot` is the source name written in every row.
pub fn read_snapshot(path: &Path, snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let data = std::fs::read(path).map_err(|e| MemqError::io(path, e))?;
    read_bytes(path, &data, snapshot)
}

/// [`read_snapshot`] on the bytes of `path`.
fn read_bytes(path: &Path, data: &[u8], snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let decoded = pickle::decode(data)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of a valid snapshot overwritten, deleted or duplicated at random: each result is
    /// read or refused, never a panic.
    #[test]
    fn mutated_snapshots_never_panic() {
        let original = include_bytes!("../../fixtures/snapshots/oom_expandable_two_devices.pickle");
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut below = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut accepted = 0;
        for _ in 0..2000 {
            let mut data = original.to_vec();
            for _ in 0..=below(3) {
                let at = below(data.len());
                match below(3) {
                    0 => data[at] = below(256) as u8,
                    1 => {
                        data.remove(at);
                    }
                    _ => data.insert(at, data[at]),
                }
            }
            if read_bytes(Path::new("mutated.pickle"), &data, "m").is_ok() {
                accepted += 1;
            }
        }
        // Some mutations only change a value; most break the structure.
        assert!(0 < accepted && accepted < 1000, "{accepted} accepted");
    }
}
