//! PyTorch memory-snapshot pickles (`torch.cuda.memory._dump_snapshot`, torch_npu's
//! equivalent) into the snap_* tables, as a memq [`Format`]. Format notes:
//! docs/formats/snapshot.md.
//!
//! The route of one pickle: memq-pickle decodes it (data only) → [`tables`] walks the
//! snapshot structure into rows, with stacks deduplicated by [`frames`] and structured cells
//! as JSON by [`json`] → [`batches`] builds one Arrow batch per table ([`schema`]) → the
//! dataset writer of memq-core writes the five files in parallel.

mod batches;
mod frames;
mod json;
pub mod schema;
mod tables;

use std::path::Path;

use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::dataset::DatasetBuilder;
use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{Candidate, Format, Progress, Source, SourceKind, SourceReport, SqlFile};

/// Reads one snapshot pickle into one batch per snap_* table, each with its definition (in the
/// order of [`schema::tables`]); `snapshot` is the source name written in every row.
pub fn read_snapshot(path: &Path, snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let data = std::fs::read(path).map_err(|e| MemqError::io(path, e))?;
    read_bytes(path, &data, snapshot)
}

/// [`read_snapshot`] on the bytes of `path`.
fn read_bytes(path: &Path, data: &[u8], snapshot: &str) -> Result<Vec<(TableDef, RecordBatch)>> {
    let decoded = memq_pickle::decode(data)
        .map_err(|e| MemqError::input(path, Location::ByteOffset(e.offset), e.reason))?;
    let rows = tables::rows(path, &decoded, data.len())?;
    batches::batches(snapshot, &rows)
}

/// The analyses of `sql/`.
pub const SQL_FILES: &[SqlFile] = memq_core::sql_files!(
    "snapshot",
    "snap_allocations",
    "snap_block_states",
    "snap_compare",
    "snap_expansions",
    "snap_fragmentation",
    "snap_long_lived",
    "snap_oom",
    "snap_overview",
    "snap_peak",
    "snap_peak_blocks",
    "snap_segment_types",
    "snap_stack_attribution",
    "snap_stacks",
    "snap_timeline",
    "snap_top_blocks",
    "state_at",
);

/// PyTorch memory snapshot pickles.
pub struct Snapshot;

impl Format for Snapshot {
    fn name(&self) -> &'static str {
        "snapshot"
    }

    fn tables(&self) -> Vec<TableDef> {
        schema::tables()
    }

    /// A .pickle/.pkl/.pk extension; a file named directly also by a first byte 0x80 (the
    /// PROTO opcode every protocol 2+ pickle starts with).
    fn detect(&self, file: &Candidate) -> Option<SourceKind> {
        let by_extension = file.has_ext(&["pickle", "pkl", "pk"]);
        let by_content = !file.in_folder && file.head.first() == Some(&0x80);
        (by_extension || by_content).then_some(SourceKind::Snapshot)
    }

    fn is_primary(&self, _kind: SourceKind) -> bool {
        true
    }

    fn ingest<'a>(
        &'a self,
        sources: &'a [Source],
        out: &'a DatasetBuilder,
        progress: Progress,
    ) -> futures::future::BoxFuture<'a, Result<Vec<SourceReport>>> {
        Box::pin(async move {
            let mut reports = Vec::with_capacity(sources.len());
            for source in sources {
                let batches = read_snapshot(&source.path, &source.name)?;
                let tables: Vec<_> = batches.iter().map(|(def, batch)| (def, batch)).collect();
                out.write_tables(source.index, &tables)?;
                progress(std::fs::metadata(&source.path).map(|m| m.len()).unwrap_or(0));
                reports.push(SourceReport {
                    rows: batches.iter().map(|(_, b)| b.num_rows() as u64).sum(),
                    ..SourceReport::default()
                });
            }
            Ok(reports)
        })
    }

    fn sql_files(&self) -> &'static [SqlFile] {
        SQL_FILES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of a valid snapshot overwritten, deleted or duplicated at random: each result is
    /// read or refused, never a panic.
    #[test]
    fn mutated_snapshots_never_panic() {
        let original = include_bytes!("../../../fixtures/snapshots/oom_expandable_two_devices.pickle");
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

    #[test]
    fn sql_files_lists_every_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        memq_core::format::check_sql_dir(&dir, SQL_FILES).unwrap();
    }
}
