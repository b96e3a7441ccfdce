-- snap_expansions: every segment event of the trace (device allocations, releases, expandable map/unmap), with the reserved bytes after it and its call stack.
--
-- One row per segment_alloc, segment_free, segment_map or segment_unmap entry, in seq order.
-- reserved_bytes comes from snap_timeline (memory reserved before the window included), read
-- from the running sum each trace row carries (snap_traces.reserved_change, computed at ingest)
-- plus the device's bytes before the window (snap_trace_levels).
-- growth_rank ranks the growing events (segment_alloc, segment_map) of a snapshot and device by
-- size, largest first, earlier entries first on ties — the reference's "peak attribution" lists
-- the first 10 (`WHERE growth_rank <= 10`).
--
-- @column snapshot       VARCHAR the snapshot (source name)
-- @column device         BIGINT  device ordinal
-- @column seq            BIGINT  position of the entry in its device list (snap_traces.seq)
-- @column time_us        BIGINT  us: time of the entry, µs; NULL when not recorded
-- @column action         VARCHAR segment_alloc, segment_free, segment_map or segment_unmap
-- @column addr           UBIGINT pointer: segment base address (alloc/free) or start address of the mapped range (map/unmap)
-- @column size           BIGINT  bytes: of the segment or range
-- @column delta_bytes    BIGINT  bytes: +size for alloc/map, -size for free/unmap
-- @column reserved_bytes BIGINT  bytes: reserved after the entry (snap_timeline)
-- @column growth_rank    UBIGINT rank of a growing event by size (1 = largest; ties by seq); NULL for free/unmap
-- @column stream         BIGINT  stream handle of the entry
-- @column stack_id       BIGINT  stack of the entry (snap_frames.stack_id); NULL when none
-- @column call_path      VARCHAR text: the reference's call path of that stack (snap_stacks); '(no stack)' when none
-- @column user_frame     VARCHAR text: first user frame of that stack (snap_stacks)
SELECT t.snapshot, t.device, t.seq, t.time_us, t.action, t.addr, t.size,
       CASE WHEN t.action IN ('segment_alloc', 'segment_map') THEN t.size ELSE -t.size END AS delta_bytes,
       l.reserved_start + t.reserved_change AS reserved_bytes,
       CASE WHEN t.action IN ('segment_alloc', 'segment_map')
            THEN RANK() OVER (PARTITION BY t.snapshot, t.device, t.action IN ('segment_alloc', 'segment_map') ORDER BY t.size DESC, t.seq) END AS growth_rank,
       t.stream, t.stack_id,
       COALESCE(s.call_path, '(no stack)') AS call_path,
       s.user_frame
FROM snap_traces t
JOIN snap_trace_levels l ON l.snapshot = t.snapshot AND l.device = t.device
LEFT JOIN snap_stacks s ON s.snapshot = t.snapshot AND s.stack_id = t.stack_id
WHERE t.action IN ('segment_alloc', 'segment_free', 'segment_map', 'segment_unmap')
