//! One row of each table the walk and the decoder hook read, as plain values: the segments',
//! the blocks', snap_info's and the trace's. They depend on nothing else in the crate, so every
//! layer above (the derivation, the batches, the sink, the walk) can share them.

use std::borrow::Cow;

#[derive(Debug, Default)]
pub struct SegmentRow {
    pub segment_id: i64,
    pub device: Option<i64>,
    pub address: Option<u64>,
    pub total_size: Option<i64>,
    pub allocated_size: Option<i64>,
    pub active_size: Option<i64>,
    pub requested_size: Option<i64>,
    pub stream: Option<i64>,
    pub segment_type: Option<String>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub is_expandable: Option<bool>,
    pub stack_id: Option<i64>,
    pub extra_json: Option<String>,
}

#[derive(Debug, Default)]
pub struct BlockRow {
    pub block_id: i64,
    pub segment_id: i64,
    pub device: Option<i64>,
    pub address: Option<u64>,
    pub address_derived: bool,
    pub offset_in_segment: Option<i64>,
    pub size: Option<i64>,
    pub requested_size: Option<i64>,
    pub state: Option<String>,
    pub stack_id: Option<i64>,
    /// From the trace: the alloc entry that made the block (its seq and user metadata).
    pub alloc_seq: Option<i64>,
    pub user_metadata: Option<String>,
    pub extra_json: Option<String>,
}

#[derive(Debug)]
pub struct InfoRow {
    pub section: &'static str,
    pub item: Option<i64>,
    pub key: String,
    pub value: Option<String>,
    pub value_type: &'static str,
}

/// One trace row, as read.
#[derive(Debug, Default)]
pub struct TraceRow<'t> {
    pub device: u32,
    pub seq: u32,
    pub action: Option<Cow<'t, str>>,
    pub addr: Option<u64>,
    pub device_free: Option<i64>,
    pub size: Option<i64>,
    pub stream: Option<i64>,
    pub time_us: Option<i64>,
    pub compile_context: Option<Cow<'t, str>>,
    pub user_metadata: Option<Cow<'t, str>>,
    pub pool_id: (Option<i64>, Option<i64>),
    pub stack_id: Option<i64>,
    pub extra_json: Option<String>,
}
