-- snap_timeline: active and reserved bytes after every trace entry, with PyTorch's method (memory live before the ring-buffer window included).
--
-- One row per trace entry (snap_traces), per snapshot and device, in seq order.
--   active_bytes    requested bytes of live allocations, as MemoryViz's Active Memory Timeline
--                   (docs/formats/snapshot.md §6.2): starts at the bytes of the allocations made before
--                   the window (snap_allocations with origin before_window: frees of unknown
--                   addresses, and final live blocks no alloc of the window holds), then +size at
--                   every `alloc` and -size of the allocation ended at every `free_completed`
--                   (or merged `free`). `free_requested` changes nothing. After the last entry it
--                   equals the requested bytes of the final active_allocated and pending-free blocks.
--   reserved_bytes  bytes of segments, as MemoryViz's Active Cached Segment Timeline: starts at
--                   the segments made before the window (frees of unknown segments, and final
--                   segments no segment_alloc of the window holds), +size at `segment_alloc`,
--                   -size of the segment ended at `segment_free`. Expandable segments: memq also
--                   follows `segment_map` (+size) and `segment_unmap` (-size), their bytes before
--                   the window being the final mapped bytes minus the window's net mapping
--                   (MemoryViz ignores map/unmap and draws them flat; docs/reference-differences.md).
--   segment_growth_bytes  the reference's `--mode peak` replay: net segment bytes since the
--                   start of the window, from zero (+size on segment_alloc/map, -size on
--                   segment_free/unmap); not a memory level.
--
-- Computed at ingest (crates/snapshot/src/derive.rs), not per query: every trace row carries
-- its deltas and the running sums since the window started (snap_traces.active_delta,
-- active_change, reserved_delta, reserved_change, segment_growth_bytes), and snap_trace_levels
-- the bytes before the window, which are known only once the whole trace is read. This view
-- adds the two; the rules as SQL windows over snap_traces are kept in
-- tests/oracle/sql/snapshot/snap_timeline.sql, which tests/it/snapshot_derived.rs checks it against.
--
-- @column snapshot             VARCHAR the snapshot (source name)
-- @column device               BIGINT  device ordinal
-- @column seq                  BIGINT  0-based position of the entry in its device list (snap_traces.seq)
-- @column time_us              BIGINT  us: time of the entry, µs; NULL when not recorded
-- @column action               VARCHAR alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, snapshot, oom, ...
-- @column addr                 UBIGINT pointer: block or segment address of the entry; NULL for oom
-- @column size                 BIGINT  bytes: of the entry (requested bytes for block actions, segment bytes for segment actions)
-- @column stack_id             BIGINT  stack of the entry (snap_frames.stack_id); NULL when none
-- @column active_delta         BIGINT  bytes: the entry adds to (or, negative, removes from) active_bytes
-- @column active_bytes         BIGINT  bytes: requested bytes of live allocations after the entry
-- @column reserved_delta       BIGINT  bytes: the entry adds to (or removes from) reserved_bytes
-- @column reserved_bytes       BIGINT  bytes: reserved (segment) bytes after the entry
-- @column segment_growth_bytes BIGINT  bytes: net segment bytes since the start of the window, from zero (the reference's peak replay)
SELECT t.snapshot, t.device, t.seq, t.time_us, t.action, t.addr, t.size, t.stack_id,
       t.active_delta,
       l.active_start + t.active_change AS active_bytes,
       t.reserved_delta,
       l.reserved_start + t.reserved_change AS reserved_bytes,
       t.segment_growth_bytes
FROM snap_traces t
JOIN snap_trace_levels l ON l.snapshot = t.snapshot AND l.device = t.device
