//! The rows of every snapshot table but the trace's ([`Rows`]), as the walk gathers them and
//! the batches read them.

use crate::derive::Finished;
use crate::frames::Stacks;
use crate::rows::{BlockRow, InfoRow, SegmentRow};

/// The rows of every snapshot table but the trace's (whose rows go to a
/// [`TraceSink`](crate::trace_sink::TraceSink)).
#[derive(Default)]
pub struct Rows {
    pub segments: Vec<SegmentRow>,
    pub blocks: Vec<BlockRow>,
    pub stacks: Stacks,
    pub info: Vec<InfoRow>,
    /// Pinned host memory: `host_segments` (with their blocks) and `host_traces`, the latter
    /// as the batches of snap_host_traces.
    pub host_segments: Vec<SegmentRow>,
    pub host_blocks: Vec<BlockRow>,
    pub host_traces: Vec<datafusion::arrow::record_batch::RecordBatch>,
    /// The small tables derived from the trace (crate::derive).
    pub derived: Finished,
}
