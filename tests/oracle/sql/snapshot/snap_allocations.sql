-- snap_allocations: every allocation the trace window and the final state reveal, with its lifetime — the elements of PyTorch's Active Memory Timeline.
--
-- @private: a helper the other analyses build on.
--
-- Built the way MemoryViz builds its timeline (docs/formats/snapshot.md §6.2), per snapshot and device:
--   * an `alloc` entry starts an allocation of `size` requested bytes at its address; the next
--     `free_completed` (or merged `free`) on that address ends it;
--   * a `free_completed`/`free` whose address holds no allocation from the window ends an
--     allocation made before the window (origin before_window, alloc_seq NULL);
--   * a block live in the final state (active_allocated, or active_pending_free: still in use on
--     another stream) whose address is not held by an allocation from the window was made before
--     the window and lives to the end (size = its requested_size).
-- A `free_requested` changes nothing: memory counts until `free_completed`. An `alloc` on an
-- address that is still held (a free was not recorded) leaves the older allocation unended
-- (end_kind 'unended'), exactly as MemoryViz keeps it in its timeline.
-- Difference from MemoryViz: blocks that are active_pending_free in the final state and were
-- allocated before the window are counted too (MemoryViz only counts active_allocated ones), since
-- they occupied memory over the whole window (docs/reference-differences.md).
--
-- @column snapshot         VARCHAR the snapshot (source name)
-- @column device           BIGINT  device ordinal
-- @column addr             UBIGINT pointer: block address
-- @column size             BIGINT  bytes: requested by the caller (the trace's alloc size, or the final block's requested_size)
-- @column block_size       BIGINT  bytes: the block occupies after rounding, when the block is in the final state; NULL otherwise
-- @column origin           VARCHAR in_window (its alloc entry is in the trace) or before_window (allocated before the ring buffer starts)
-- @column alloc_seq        BIGINT  seq (snap_traces) of its alloc entry; NULL when before_window
-- @column free_seq         BIGINT  seq of the free_completed/free entry that ended it; NULL when it was not freed in the window
-- @column end_kind         VARCHAR freed (free_seq set), live (still allocated in the final state) or unended (a later alloc reused the address without a recorded free)
-- @column state_at_end     VARCHAR final state of its block: active_allocated, active_pending_free; NULL when freed or unended
-- @column block_id         BIGINT  its block in the final state (snap_blocks.block_id); NULL when not live at the end
-- @column alloc_time_us    BIGINT  us: time of its alloc entry, µs; NULL when before_window or not recorded
-- @column free_time_us     BIGINT  us: time of its free entry, µs; NULL when not freed or not recorded
-- @column lifetime_entries BIGINT  count: trace entries from alloc to free (free_seq - alloc_seq); NULL unless both are in the window
-- @column lifetime_us      BIGINT us:  us: µs from alloc to free; NULL unless both times are known
-- @column stack_id         BIGINT  allocation stack (snap_frames.stack_id): of the alloc entry, or of the final block; NULL when unknown
-- @column free_stack_id    BIGINT  stack of the free_completed/free entry (the free site, recorded with context='all'); NULL when none
-- @column stream           BIGINT  stream handle of the alloc (or free) entry, or of the final block's segment
WITH
-- block events of the trace, each with its neighbours on the same address
block_events AS (
    SELECT snapshot, device, seq, action, addr, size, time_us, stack_id, stream,
           LAG(action) OVER w AS prev_action,
           LEAD(action) OVER w AS next_action,
           LEAD(seq) OVER w AS next_seq,
           LEAD(time_us) OVER w AS next_time_us,
           LEAD(stack_id) OVER w AS next_stack_id,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device, addr ORDER BY seq DESC) AS from_end
    FROM snap_traces
    WHERE action IN ('alloc', 'free_completed', 'free') AND addr IS NOT NULL
    WINDOW w AS (PARTITION BY snapshot, device, addr ORDER BY seq)
),
-- addresses still held at the end by an alloc of the window
held_at_end AS (
    SELECT snapshot, device, addr
    FROM block_events
    WHERE from_end = 1 AND action = 'alloc'
),
live_blocks AS (
    SELECT b.snapshot, b.device, b.address, b.block_id, b.size, b.requested_size, b.state, b.stack_id, s.stream
    FROM snap_blocks b
    JOIN snap_segments s ON s.snapshot = b.snapshot AND s.segment_id = b.segment_id
    WHERE b.state IN ('active_allocated', 'active_pending_free')
),
-- allocations whose alloc entry is in the window
in_window AS (
    SELECT e.snapshot, e.device, e.addr, e.size,
           'in_window' AS origin,
           e.seq AS alloc_seq,
           CASE WHEN e.next_action IN ('free_completed', 'free') THEN e.next_seq END AS free_seq,
           CASE WHEN e.next_action IN ('free_completed', 'free') THEN 'freed'
                WHEN e.next_action = 'alloc' THEN 'unended'
                ELSE 'live' END AS end_kind,
           e.time_us AS alloc_time_us,
           CASE WHEN e.next_action IN ('free_completed', 'free') THEN e.next_time_us END AS free_time_us,
           e.stack_id,
           CASE WHEN e.next_action IN ('free_completed', 'free') THEN e.next_stack_id END AS free_stack_id,
           e.stream
    FROM block_events e
    WHERE e.action = 'alloc'
),
-- frees of allocations made before the window
freed_before AS (
    SELECT snapshot, device, addr, size,
           'before_window' AS origin,
           CAST(NULL AS BIGINT) AS alloc_seq,
           seq AS free_seq,
           'freed' AS end_kind,
           CAST(NULL AS BIGINT) AS alloc_time_us,
           time_us AS free_time_us,
           CAST(NULL AS BIGINT) AS stack_id,
           stack_id AS free_stack_id,
           stream
    FROM block_events
    WHERE action IN ('free_completed', 'free') AND (prev_action IS NULL OR prev_action <> 'alloc')
),
-- final live blocks not held by an alloc of the window
live_before AS (
    SELECT l.snapshot, l.device, l.address AS addr, l.requested_size AS size,
           'before_window' AS origin,
           CAST(NULL AS BIGINT) AS alloc_seq,
           CAST(NULL AS BIGINT) AS free_seq,
           'live' AS end_kind,
           CAST(NULL AS BIGINT) AS alloc_time_us,
           CAST(NULL AS BIGINT) AS free_time_us,
           l.stack_id,
           CAST(NULL AS BIGINT) AS free_stack_id,
           l.stream
    FROM live_blocks l
    LEFT JOIN held_at_end h ON h.snapshot = l.snapshot AND h.device = l.device AND h.addr = l.address
    WHERE h.addr IS NULL
),
elements AS (
    SELECT * FROM in_window
    UNION ALL SELECT * FROM freed_before
    UNION ALL SELECT * FROM live_before
)
SELECT e.snapshot, e.device, e.addr, e.size,
       CASE WHEN e.end_kind = 'live' THEN l.size END AS block_size,
       e.origin, e.alloc_seq, e.free_seq, e.end_kind,
       CASE WHEN e.end_kind = 'live' THEN l.state END AS state_at_end,
       CASE WHEN e.end_kind = 'live' THEN l.block_id END AS block_id,
       e.alloc_time_us, e.free_time_us,
       e.free_seq - e.alloc_seq AS lifetime_entries,
       e.free_time_us - e.alloc_time_us AS lifetime_us,
       e.stack_id, e.free_stack_id, e.stream
FROM elements e
LEFT JOIN live_blocks l
       ON e.end_kind = 'live' AND l.snapshot = e.snapshot AND l.device = e.device AND l.address = e.addr
