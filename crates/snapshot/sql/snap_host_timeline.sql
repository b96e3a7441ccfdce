-- snap_host_timeline: pinned host memory over the host trace: active (requested) and reserved bytes after every host event.
--
-- Pinned host memory is recorded with `_record_memory_history(record_pinned_host_memory=True)`
-- (snapshot keys host_segments and host_traces; tables snap_host_segments, snap_host_blocks,
-- snap_host_traces). The levels are computed as MemoryViz computes a device's (docs/formats/snapshot.md
-- §6.2), per snapshot (the host is one per process): the active level starts from the memory
-- allocated before the trace window (frees of addresses the trace never allocated, plus the
-- requested bytes of live host blocks no alloc entry made) and moves by +size at each alloc and
-- -size at each free_completed (or merged free); the reserved level starts from the host segments'
-- total minus the trace's net segment events and moves by +size at segment_alloc/segment_map and
-- -size at segment_free/segment_unmap. Other actions (free_requested, annotate, ...) leave both
-- levels as they were. Empty for snapshots without host memory.
--
-- @column snapshot       VARCHAR the snapshot (source name)
-- @column device         BIGINT  device ordinal of the host event (-1 = the host: the flat host trace)
-- @column seq            BIGINT  position in the host trace (snap_host_traces.seq)
-- @column time_us        BIGINT  us: event time, µs; NULL when not recorded
-- @column action         VARCHAR the host allocator's action
-- @column addr           UBIGINT pointer: block or segment address
-- @column size           BIGINT  bytes: of the event
-- @column user_metadata  VARCHAR label of the event (user metadata); NULL when empty
-- @column active_bytes   BIGINT  bytes: requested bytes of live pinned allocations just after the event
-- @column reserved_bytes BIGINT  bytes: pinned bytes the host allocator holds just after the event
WITH
ev AS (
    SELECT snapshot, device, seq, time_us, action, addr, size, user_metadata,
           CASE WHEN action = 'alloc' THEN size
                WHEN action IN ('free_completed', 'free') THEN -size
                ELSE 0 END AS active_delta,
           CASE WHEN action IN ('segment_alloc', 'segment_map') THEN size
                WHEN action IN ('segment_free', 'segment_unmap') THEN -size
                ELSE 0 END AS reserved_delta
    FROM snap_host_traces
),
first_alloc AS (
    SELECT snapshot, device, addr, min(seq) AS seq
    FROM ev WHERE action = 'alloc'
    GROUP BY snapshot, device, addr
),
-- Frees of addresses allocated before the window: held from the start.
before_frees AS (
    SELECT e.snapshot, sum(e.size) AS bytes
    FROM ev e
    LEFT JOIN first_alloc f ON f.snapshot = e.snapshot AND f.device = e.device AND f.addr = e.addr
    WHERE e.action IN ('free_completed', 'free') AND (f.seq IS NULL OR f.seq > e.seq)
    GROUP BY e.snapshot
),
-- Live host blocks no alloc entry of the trace made.
before_live AS (
    SELECT snapshot, sum(requested_size) AS bytes
    FROM snap_host_blocks
    WHERE state IN ('active_allocated', 'active_pending_free') AND alloc_seq IS NULL
    GROUP BY snapshot
),
net AS (
    SELECT snapshot, sum(reserved_delta) AS reserved_delta FROM ev GROUP BY snapshot
),
reserved_end AS (
    SELECT snapshot, sum(total_size) AS bytes FROM snap_host_segments GROUP BY snapshot
),
start AS (
    SELECT n.snapshot,
           COALESCE(f.bytes, 0) + COALESCE(l.bytes, 0) AS active,
           COALESCE(r.bytes, 0) - n.reserved_delta AS reserved
    FROM net n
    LEFT JOIN before_frees f ON f.snapshot = n.snapshot
    LEFT JOIN before_live l ON l.snapshot = n.snapshot
    LEFT JOIN reserved_end r ON r.snapshot = n.snapshot
)
SELECT e.snapshot, e.device, e.seq, e.time_us, e.action, e.addr, e.size,
       NULLIF(e.user_metadata, '') AS user_metadata,
       s.active + sum(e.active_delta) OVER (PARTITION BY e.snapshot ORDER BY e.device, e.seq
                                            ROWS UNBOUNDED PRECEDING) AS active_bytes,
       s.reserved + sum(e.reserved_delta) OVER (PARTITION BY e.snapshot ORDER BY e.device, e.seq
                                                ROWS UNBOUNDED PRECEDING) AS reserved_bytes
FROM ev e
JOIN start s ON s.snapshot = e.snapshot
