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
WITH
-- active bytes before the first entry
active_start AS (
    SELECT snapshot, device, SUM(size) AS bytes
    FROM snap_allocations
    WHERE origin = 'before_window'
    GROUP BY snapshot, device
),
-- segment_alloc / segment_free with their neighbours on the same address
segment_events AS (
    SELECT snapshot, device, seq, action, addr, size,
           LAG(action) OVER w AS prev_action,
           LAG(size) OVER w AS prev_size,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device, addr ORDER BY seq DESC) AS from_end
    FROM snap_traces
    WHERE action IN ('segment_alloc', 'segment_free') AND addr IS NOT NULL
    WINDOW w AS (PARTITION BY snapshot, device, addr ORDER BY seq)
),
segment_held_at_end AS (
    SELECT snapshot, device, addr FROM segment_events WHERE from_end = 1 AND action = 'segment_alloc'
),
-- reserved bytes before the first entry, three parts
reserved_start_parts AS (
    -- segments freed in the window but allocated before it
    SELECT snapshot, device, size AS bytes
    FROM segment_events
    WHERE action = 'segment_free' AND (prev_action IS NULL OR prev_action <> 'segment_alloc')
    UNION ALL
    -- final (non-expandable) segments no segment_alloc of the window holds
    SELECT s.snapshot, s.device, s.total_size
    FROM snap_segments s
    LEFT JOIN segment_held_at_end h ON h.snapshot = s.snapshot AND h.device = s.device AND h.addr = s.address
    WHERE h.addr IS NULL AND NOT COALESCE(s.is_expandable, false)
    UNION ALL
    -- expandable segments: final mapped bytes minus what the window mapped
    SELECT snapshot, device, total_size FROM snap_segments WHERE COALESCE(is_expandable, false)
    UNION ALL
    SELECT snapshot, device, CASE action WHEN 'segment_map' THEN -size ELSE size END
    FROM snap_traces
    WHERE action IN ('segment_map', 'segment_unmap')
),
reserved_start AS (
    SELECT snapshot, device, SUM(bytes) AS bytes FROM reserved_start_parts GROUP BY snapshot, device
),
-- what each block event does to active bytes (the allocation it ends, for frees)
block_deltas AS (
    SELECT snapshot, device, seq,
           CASE WHEN action = 'alloc' THEN size
                WHEN prev_action = 'alloc' THEN -prev_size
                ELSE -size END AS delta
    FROM (
        SELECT snapshot, device, seq, action, size,
               LAG(action) OVER (PARTITION BY snapshot, device, addr ORDER BY seq) AS prev_action,
               LAG(size) OVER (PARTITION BY snapshot, device, addr ORDER BY seq) AS prev_size
        FROM snap_traces
        WHERE action IN ('alloc', 'free_completed', 'free') AND addr IS NOT NULL
    ) b
),
segment_deltas AS (
    SELECT snapshot, device, seq,
           CASE WHEN action = 'segment_alloc' THEN size
                WHEN prev_action = 'segment_alloc' THEN -prev_size
                ELSE -size END AS delta
    FROM segment_events
    UNION ALL
    SELECT snapshot, device, seq, CASE action WHEN 'segment_map' THEN size ELSE -size END
    FROM snap_traces
    WHERE action IN ('segment_map', 'segment_unmap')
),
entries AS (
    SELECT t.snapshot, t.device, t.seq, t.time_us, t.action, t.addr, t.size, t.stack_id,
           COALESCE(b.delta, 0) AS active_delta,
           COALESCE(g.delta, 0) AS reserved_delta,
           CASE WHEN t.action IN ('segment_alloc', 'segment_map') THEN t.size
                WHEN t.action IN ('segment_free', 'segment_unmap') THEN -t.size
                ELSE 0 END AS growth_delta
    FROM snap_traces t
    LEFT JOIN block_deltas b ON b.snapshot = t.snapshot AND b.device = t.device AND b.seq = t.seq
    LEFT JOIN segment_deltas g ON g.snapshot = t.snapshot AND g.device = t.device AND g.seq = t.seq
)
SELECT e.snapshot, e.device, e.seq, e.time_us, e.action, e.addr, e.size, e.stack_id,
       e.active_delta,
       COALESCE(a.bytes, 0) + SUM(e.active_delta) OVER running AS active_bytes,
       e.reserved_delta,
       COALESCE(r.bytes, 0) + SUM(e.reserved_delta) OVER running AS reserved_bytes,
       SUM(e.growth_delta) OVER running AS segment_growth_bytes
FROM entries e
LEFT JOIN active_start a ON a.snapshot = e.snapshot AND a.device = e.device
LEFT JOIN reserved_start r ON r.snapshot = e.snapshot AND r.device = e.device
WINDOW running AS (PARTITION BY e.snapshot, e.device ORDER BY e.seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
