//! The snapshot tables (docs/formats/snapshot.md §3.3): declared once, with a doc per
//! column, the tables and columns derived from the trace at ingest (crate::derive) included.
//! Ids follow the reference converter (`segments.id`, `blocks.id`, `call_stacks.id`,
//! `traces.trace_index`) so that its figures can be reproduced on these tables.

use datafusion::arrow::datatypes::DataType::{Boolean, Int64, UInt64, Utf8};

use memq_core::catalog::{col, req, TableDef, Unit};

pub const SEGMENTS: &str = "snap_segments";
pub const BLOCKS: &str = "snap_blocks";
pub const TRACES: &str = "snap_traces";
pub const FRAMES: &str = "snap_frames";
pub const INFO: &str = "snap_info";
pub const HOST_SEGMENTS: &str = "snap_host_segments";
pub const HOST_BLOCKS: &str = "snap_host_blocks";
pub const HOST_TRACES: &str = "snap_host_traces";
pub const LIFETIMES: &str = "snap_lifetimes";
pub const LEVELS: &str = "snap_trace_levels";
pub const OOM_ALLOCS: &str = "snap_oom_allocs";

/// Every snapshot table, in the order `read_snapshot` returns them.
pub fn tables() -> Vec<TableDef> {
    vec![
        segments(),
        blocks(),
        traces(),
        frames(),
        info(),
        host_segments(),
        host_blocks(),
        host_traces(),
        lifetimes(),
        levels(),
        oom_allocs(),
    ]
}

// Pinned host memory (`record_pinned_host_memory=True`): the snapshot's `host_segments` and
// `host_traces` have the layout of `segments` and `device_traces` (PyTorch's host caching
// allocator records them with the device allocator's machinery), so they get tables of the
// same columns, apart from the device tables so that every device analysis stays as it was.

/// snap_host_segments: the columns of snap_segments.
pub fn host_segments() -> TableDef {
    TableDef {
        name: HOST_SEGMENTS,
        doc: "Pinned host memory (record_pinned_host_memory=True): one row per segment of the snapshot's host_segments, with the columns of snap_segments (segment_id numbers host segments from 1).",
        ..segments()
    }
}

/// snap_host_blocks: the columns of snap_blocks; `segment_id` is a host segment's.
pub fn host_blocks() -> TableDef {
    TableDef {
        name: HOST_BLOCKS,
        doc: "Pinned host memory: one row per block of the host segments, with the columns of snap_blocks (segment_id refers to snap_host_segments; alloc_seq and user_metadata come from snap_host_traces).",
        ..blocks()
    }
}

/// snap_host_traces: the columns of snap_traces; `device` is -1 (the host) for the flat list
/// the host allocator records.
pub fn host_traces() -> TableDef {
    TableDef {
        name: HOST_TRACES,
        doc: "Pinned host memory: one row per event of the snapshot's host_traces, with the columns of snap_traces; device is -1 (the host) when host_traces is one flat list, the list's position when it is a list per device.",
        ..traces()
    }
}

const SNAPSHOT_DOC: &str = "the snapshot the row comes from (its source name)";
const EXTRA_DOC: &str =
    "keys of the source dict not listed above, as a JSON object; NULL when none";

pub fn segments() -> TableDef {
    TableDef {
        name: SEGMENTS,
        doc: "One row per segment (one device allocation, or one expandable range) in the allocator state at dump time.",
        sort_order: &["snapshot", "segment_id"],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("segment_id", Int64, "1-based position of the segment in the snapshot's segment list (skipping malformed entries); the reference's segments.id"),
            col("device", Int64, "device ordinal"),
            col("address", UInt64, "base virtual address of the segment").pointer(),
            col("total_size", Int64, "reserved bytes (= sum of its blocks' size)").bytes(),
            col("allocated_size", Int64, "bytes of its active_allocated blocks (rounded block sizes)").bytes(),
            col("active_size", Int64, "bytes of its active_allocated and active_pending_free blocks").bytes(),
            col("requested_size", Int64, "bytes requested by the callers of its active_allocated blocks").bytes(),
            col("stream", Int64, "stream handle as an integer; 0 = default stream"),
            col("segment_type", Utf8, "allocator pool: large or small (small-pool segments are 2 MiB)"),
            col("pool_id_0", Int64, "first element of segment_pool_id; (0, 0) = default pool, anything else a private pool (CUDA graphs, MemPool)"),
            col("pool_id_1", Int64, "second element of segment_pool_id"),
            col("is_expandable", Boolean, "expandable segment (grows and shrinks by segment_map/segment_unmap)"),
            col("stack_id", Int64, "stack of the allocation that created the segment (snap_frames.stack_id); NULL when none was recorded"),
            col("extra_json", Utf8, EXTRA_DOC),
        ],
    }
}

pub fn blocks() -> TableDef {
    TableDef {
        name: BLOCKS,
        doc: "One row per block: the consecutive pieces each segment is carved into, in address order.",
        sort_order: &["snapshot", "block_id"],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("block_id", Int64, "1-based position of the block among all blocks of the snapshot, segment by segment; the reference's blocks.id"),
            req("segment_id", Int64, "its segment (snap_segments.segment_id)"),
            col("device", Int64, "device ordinal of its segment"),
            col("address", UInt64, "block address").pointer(),
            req("address_derived", Boolean, "true when the source had no block address and `address` is segment base + offset (the reference shows 0)"),
            col("offset_in_segment", Int64, "bytes of the earlier blocks of its segment; NULL when one of their sizes is missing").bytes(),
            col("size", Int64, "bytes the block occupies (after rounding)").bytes(),
            col("requested_size", Int64, "bytes the caller asked for (<= size); from history[0].real_size on legacy blocks").bytes(),
            col("state", Utf8, "active_allocated (in use), active_pending_free (freed, still used by another stream; also spelled active_awaiting_free) or inactive (cached free)"),
            col("stack_id", Int64, "allocation stack (snap_frames.stack_id); NULL when none was recorded (free blocks, blocks allocated before recording)"),
            col("alloc_seq", Int64, "live blocks: seq of the trace's alloc entry that made the block (same device and address, not freed since); NULL when it was made before the trace window"),
            col("user_metadata", Utf8, "user metadata of that alloc entry (labels set with torch.cuda.memory._set_memory_metadata / _annotate_tensor; a dict as JSON); NULL when none"),
            col("extra_json", Utf8, EXTRA_DOC),
        ],
    }
}

pub fn traces() -> TableDef {
    TableDef {
        name: TRACES,
        doc: "One row per allocator event of the trace ring buffer (device_traces), oldest first per device.",
        sort_order: &["snapshot", "device", "seq"],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("device", Int64, "device ordinal = position of the event's list in device_traces"),
            req("seq", Int64, "0-based position in its device list, counting malformed entries too (the reference's trace_index)"),
            col("action", Utf8, "alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, snapshot, oom, workspace_snapshot (torch_npu) or free (merged free)"),
            col("addr", UInt64, "block address (alloc/free_*), segment base (segment_*), start of the range (segment_map/unmap), 0 (snapshot); NULL for oom").pointer(),
            col("device_free", Int64, "oom only: bytes the driver reported free").bytes(),
            col("size", Int64, "bytes: requested size (alloc/free_*), segment or range size (segment_*), allocated bytes (snapshot), failed request (oom)").bytes(),
            col("stream", Int64, "stream handle as an integer; 0 = default stream"),
            col("time_us", Int64, "event time in microseconds (epoch-based, use for order and durations); NULL before PyTorch recorded it").unit(Unit::TimeUs),
            col("compile_context", Utf8, "torch.compile context of the event (N/A when none)"),
            col("user_metadata", Utf8, "user metadata of the event (a dict is kept as JSON)"),
            col("pool_id_0", Int64, "first element of the event's memory pool id (newest PyTorch)"),
            col("pool_id_1", Int64, "second element of the event's memory pool id"),
            col("stack_id", Int64, "stack of the event (snap_frames.stack_id): the allocation site for alloc, the free site for free_*; NULL when none was recorded"),
            col("forward_stack_id", Int64, "forward-pass traceback of a backward-pass allocation (forward_frames, one text frame per line); NULL when absent"),
            col("extra_json", Utf8, EXTRA_DOC),
        ]
        .into_iter()
        .chain(trace_columns())
        .collect(),
    }
}

pub fn frames() -> TableDef {
    TableDef {
        name: FRAMES,
        doc: "Call stacks, deduplicated by content: one row per frame of each distinct stack. Stack ids count from 1 in first-seen order (segment, its blocks, ..., then trace events), as the reference's call_stacks.id.",
        sort_order: &["snapshot", "stack_id", "depth"],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("stack_id", Int64, "the stack (referenced by stack_id columns)"),
            req("depth", Int64, "position in the stack: 0 = innermost frame (with C++ stacks the unwinder itself), last = outermost"),
            col("name", Utf8, "function name; a text frame that is not `filename:line:name` is kept whole here"),
            col("filename", Utf8, "source file (C++ frames often ?? or empty)"),
            col("line", Int64, "line number; 0 for C++ frames; -1 for values beyond Int64 (PyTorch writes 2^64-1 for -1)"),
            col("extra_json", Utf8, "other keys of the frame dict (e.g. fx_node_* with augment_with_fx_traces), as a JSON object; NULL when none"),
        ],
    }
}

pub fn info() -> TableDef {
    TableDef {
        name: INFO,
        doc: "Everything else in the snapshot as key/value rows: file facts, allocator settings, external annotations, other top-level keys, and ingest warnings.",
        sort_order: &[],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("section", Utf8, "meta (protocol, top_level, file_bytes, keys), allocator_settings (skip_actions and trace_alloc_* included), external_annotations, top_level (any other top-level key), trace (only for a device whose trace ring buffer wrapped, item = device: entries, frees_of_unallocated_addresses, wrapped = true; the signs are frees of addresses the trace never allocated, or a single entry) or warning"),
            col("item", Int64, "0-based element number in list sections (external_annotations, warning); the device in section trace; NULL otherwise"),
            req("key", Utf8, "setting or field name; for warnings the place in the snapshot (e.g. segments[3].blocks[0])"),
            col("value", Utf8, "strings verbatim, other values as JSON; NULL for None"),
            req("value_type", Utf8, "Python type of the value: str, int, float, bool, none, list, tuple, dict, set, bytes"),
        ],
    }
}

// What the analyses need from the trace, computed at ingest (crate::derive): columns of
// snap_traces and tables of their own.

/// The columns snap_traces gets from the derivation (appended to its declared columns).
pub fn trace_columns() -> Vec<memq_core::catalog::ColumnDef> {
    vec![
        req("active_delta", Int64, "bytes the entry adds to (negative: removes from) the requested bytes of live allocations: +size at alloc, -size of the allocation ended at free_completed or free (snap_timeline); computed at ingest").bytes(),
        req("active_change", Int64, "Σ active_delta of the device up to and including this entry: snap_timeline.active_bytes minus the bytes live before the window (snap_trace_levels.active_start)").bytes(),
        req("reserved_delta", Int64, "bytes the entry adds to (or removes from) reserved segment bytes: +size at segment_alloc and segment_map, -size of the segment ended at segment_free, -size at segment_unmap (snap_timeline)").bytes(),
        req("reserved_change", Int64, "Σ reserved_delta of the device up to and including this entry: snap_timeline.reserved_bytes minus snap_trace_levels.reserved_start").bytes(),
        col("segment_growth_bytes", Int64, "net segment bytes since the start of the window, from zero (the reference's peak replay; snap_timeline); NULL while only segment entries without a size were seen").bytes(),
    ]
}

pub fn lifetimes() -> TableDef {
    TableDef {
        name: LIFETIMES,
        doc: "One row per allocation the trace window and the final state reveal, with its lifetime (alloc entry → free entry), computed at ingest; the rows of snap_allocations (see there for each rule). Rows in no particular order.",
        sort_order: &[],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            col("device", Int64, "device ordinal"),
            col("addr", UInt64, "block address").pointer(),
            col("size", Int64, "bytes requested by the caller (the trace's alloc size, or the final block's requested_size)").bytes(),
            col("block_size", Int64, "bytes the block occupies after rounding, when the block is in the final state; NULL otherwise").bytes(),
            req("origin", Utf8, "in_window or before_window"),
            col("alloc_seq", Int64, "seq of its alloc entry; NULL when before_window"),
            col("free_seq", Int64, "seq of the free_completed/free entry that ended it; NULL when not freed in the window"),
            req("end_kind", Utf8, "freed, live or unended"),
            col("state_at_end", Utf8, "final state of its block; NULL when freed or unended"),
            col("block_id", Int64, "its block in the final state (snap_blocks.block_id); NULL when not live at the end"),
            col("alloc_time_us", Int64, "time of its alloc entry, µs").unit(Unit::TimeUs),
            col("free_time_us", Int64, "time of its free entry, µs").unit(Unit::TimeUs),
            col("lifetime_entries", Int64, "free_seq - alloc_seq").unit(Unit::Count),
            col("lifetime_us", Int64, "µs from alloc to free").unit(Unit::TimeUs),
            col("stack_id", Int64, "allocation stack (snap_frames.stack_id)"),
            col("free_stack_id", Int64, "stack of the free entry"),
            col("stream", Int64, "stream of the alloc (or free) entry, or of the final block's segment"),
        ],
    }
}

pub fn levels() -> TableDef {
    TableDef {
        name: LEVELS,
        doc: "One row per snapshot and device with trace entries: the levels of snap_timeline before the window, at their peaks and at the end, and the reference's segment growth, computed at ingest (read by snap_peak, snap_timeline, snap_overview, ...).",
        sort_order: &["snapshot", "device"],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("device", Int64, "device ordinal"),
            req("entries", Int64, "trace entries of the device").unit(Unit::Count),
            req("last_seq", Int64, "seq of its last entry"),
            col("last_time_us", Int64, "latest time of its entries, µs; NULL when none has one").unit(Unit::TimeUs),
            req("oom_count", Int64, "its oom entries").unit(Unit::Count),
            req("active_start", Int64, "requested bytes of the allocations live before the first entry (snap_allocations with origin before_window)").bytes(),
            req("active_max", Int64, "highest active bytes after an entry").bytes(),
            req("active_max_seq", Int64, "seq of the first entry reaching active_max"),
            col("active_max_time_us", Int64, "time of that entry, µs").unit(Unit::TimeUs),
            req("active_end", Int64, "active bytes after the last entry").bytes(),
            req("reserved_start", Int64, "reserved bytes before the first entry").bytes(),
            req("reserved_max", Int64, "highest reserved bytes after an entry").bytes(),
            req("reserved_max_seq", Int64, "seq of the first entry reaching reserved_max"),
            req("reserved_end", Int64, "reserved bytes after the last entry").bytes(),
            col("growth_max", Int64, "highest segment_growth_bytes at a segment entry; NULL when none has one").bytes(),
            col("growth_max_seq", Int64, "seq of the first segment entry reaching growth_max (of the first without a growth, when one has none)"),
            col("first_segment_seq", Int64, "seq of the first segment entry (segment_alloc, segment_free, segment_map, segment_unmap)"),
            col("timed_active_before", Int64, "active bytes before the earliest entry with a time (by time_us, then seq); NULL when none has one").bytes(),
            col("timed_reserved_before", Int64, "reserved bytes before that entry").bytes(),
        ],
    }
}

pub fn oom_allocs() -> TableDef {
    TableDef {
        name: OOM_ALLOCS,
        doc: "The alloc entries within 50 entries (by seq) before and after each oom entry of the same device, computed at ingest (read by snap_oom).",
        sort_order: &["snapshot", "device", "oom_seq", "seq"],
        columns: vec![
            req("snapshot", Utf8, SNAPSHOT_DOC),
            req("device", Int64, "device ordinal"),
            req("oom_seq", Int64, "seq of the oom entry"),
            req("seq", Int64, "seq of the alloc entry"),
            col("size", Int64, "bytes it requested").bytes(),
            col("stack_id", Int64, "its stack (snap_frames.stack_id)"),
        ],
    }
}
