-- state_at: the segments and live blocks as they were just after trace entry seq, replayed backwards from the final state (MemoryViz's Allocator State History).
--
-- For every snapshot and device (or only those given), the final state is walked back over the
-- trace entries after `seq`, as MemoryViz does (docs/formats/snapshot.md §6.2): undoing an `alloc`
-- removes the block, undoing `free_completed` puts it back as pending-free, undoing
-- `free_requested` makes it allocated again (a merged `free` puts it back allocated); undoing
-- `segment_alloc` removes the segment, undoing `segment_free` puts it back; for expandable
-- segments undoing `segment_map` unmaps the range and undoing `segment_unmap` maps it again,
-- contiguous mapped ranges forming one segment. Each address therefore takes the state that the
-- first entry after seq touching it implies, or its final state when no later entry does.
-- seq = -1 gives the state before the first entry; seq >= the last entry gives the final state.
--
-- Expandable segments are cut into the elementary ranges between every boundary; each map/unmap
-- entry after seq is matched to the run of ranges it covers by the boundaries' numbers (an
-- equi-join), not tested against every range (on a 16.9 M-entry trace with 600 K map entries
-- that was 10^11 comparisons).
--
-- Rows of kind `segment` carry the per-segment figures of the history view (blocks, allocated,
-- free, rounding waste); rows of kind `block` one live block each (active_allocated or
-- active_pending_free). A block put back from the trace has size = requested_size: the trace does
-- not record the rounded size (origin 'replayed'); blocks and segments untouched since seq keep
-- their final figures (origin 'final'). Σ size of the segments equals snap_timeline.reserved_bytes
-- and Σ requested_size of the blocks snap_timeline.active_bytes at that entry.
--
-- @param seq BIGINT                  the trace entry (snap_traces.seq) after which to show the state; -1 = before the first entry
-- @param snapshot VARCHAR = NULL     [one of snapshots or a part] only this snapshot (its source name); NULL = every snapshot
-- @param device BIGINT = NULL        [one of devices per snapshot] only this device; NULL = every device
-- @column snapshot           VARCHAR the snapshot (source name)
-- @column device             BIGINT  device ordinal
-- @column seq                BIGINT  the entry the state follows (the argument)
-- @column kind               VARCHAR segment or block
-- @column address            UBIGINT pointer: segment base or block address
-- @column size               BIGINT  bytes: segment size, or block size (= requested_size for replayed blocks)
-- @column requested_size     BIGINT  bytes: requested: Σ over the segment's blocks, or the block's
-- @column state              VARCHAR block state: active_allocated or active_pending_free; NULL for segments
-- @column segment_address    UBIGINT pointer: base address of the block's segment (NULL when no segment holds it); for segments their own base address
-- @column stream             BIGINT  stream handle of the segment (of the block's segment for blocks)
-- @column is_expandable      BOOLEAN expandable segment (for blocks: of their segment)
-- @column origin             VARCHAR final (as in the final state) or replayed (put back or resized by undoing later entries)
-- @column stack_id           BIGINT  block: its allocation stack (the alloc entry at or before seq, else the final block's); segment: the stack that created it; NULL when unknown
-- @column user_frame         VARCHAR text: first user frame of that stack (snap_stacks)
-- @column live_blocks        BIGINT  count: segment: count of its blocks in this state; NULL for blocks
-- @column allocated_bytes    BIGINT  bytes: segment: bytes of its blocks (Σ size); NULL for blocks
-- @column pending_free_bytes BIGINT  bytes: segment: bytes of its pending-free blocks; NULL for blocks
-- @column free_bytes         BIGINT  bytes: segment: bytes not covered by blocks (size - allocated_bytes); NULL for blocks
-- @column internal_waste     BIGINT  bytes: segment: bytes lost to rounding in its blocks (Σ size - requested); NULL for blocks
WITH
traces AS (
    SELECT snapshot, device, seq, action, CAST(addr AS BIGINT) AS addr, size, stream, stack_id
    FROM snap_traces
    WHERE ($snapshot IS NULL OR snapshot = $snapshot) AND ($device IS NULL OR device = $device)
),
segments_final AS (
    SELECT snapshot, device, segment_id, CAST(address AS BIGINT) AS addr, total_size, stream,
           COALESCE(is_expandable, false) AS is_expandable, stack_id
    FROM snap_segments
    WHERE ($snapshot IS NULL OR snapshot = $snapshot) AND ($device IS NULL OR device = $device)
),
blocks_final AS (
    SELECT snapshot, device, CAST(address AS BIGINT) AS addr, size, requested_size, state, stack_id
    FROM snap_blocks
    WHERE state IN ('active_allocated', 'active_pending_free')
      AND ($snapshot IS NULL OR snapshot = $snapshot) AND ($device IS NULL OR device = $device)
),
-- ordinary segments: the first segment_alloc/segment_free after seq on each address decides
segment_next AS (
    SELECT snapshot, device, addr,
           first_value(action ORDER BY seq) AS action,
           first_value(size ORDER BY seq) AS size,
           first_value(stream ORDER BY seq) AS stream,
           first_value(stack_id ORDER BY seq) AS stack_id
    FROM traces
    WHERE action IN ('segment_alloc', 'segment_free') AND seq > $seq
    GROUP BY snapshot, device, addr
),
-- the segment_alloc that created a segment, when it is in the window
segment_alloc_before AS (
    SELECT snapshot, device, addr, first_value(stack_id ORDER BY seq DESC) AS stack_id
    FROM traces
    WHERE action = 'segment_alloc' AND seq <= $seq
    GROUP BY snapshot, device, addr
),
plain_segments AS (
    SELECT f.snapshot, f.device, f.addr, f.total_size AS size, f.stream, false AS is_expandable, 'final' AS origin, f.stack_id
    FROM segments_final f
    LEFT JOIN segment_next n ON n.snapshot = f.snapshot AND n.device = f.device AND n.addr = f.addr
    WHERE NOT f.is_expandable AND n.addr IS NULL
    UNION ALL
    SELECT n.snapshot, n.device, n.addr, n.size AS size, n.stream AS stream, false AS is_expandable,
           'replayed' AS origin, a.stack_id AS stack_id
    FROM segment_next n
    LEFT JOIN segment_alloc_before a ON a.snapshot = n.snapshot AND a.device = n.device AND a.addr = n.addr
    WHERE n.action = 'segment_free'
),
-- expandable segments: elementary ranges between every boundary, mapped or not at seq
range_bounds AS (
    SELECT snapshot, device, addr AS bound FROM segments_final WHERE is_expandable
    UNION SELECT snapshot, device, addr + total_size FROM segments_final WHERE is_expandable
    UNION SELECT snapshot, device, addr FROM traces WHERE action IN ('segment_map', 'segment_unmap')
    UNION SELECT snapshot, device, addr + size FROM traces WHERE action IN ('segment_map', 'segment_unmap')
),
-- each boundary numbered: a map/unmap entry covers the elementary ranges from the one starting
-- at its address up to the one ending at its end, a run of consecutive numbers
bound_index AS (
    SELECT snapshot, device, bound,
           CAST(ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY bound) AS BIGINT) AS k
    FROM range_bounds
),
ranges AS (
    SELECT snapshot, device, k, bound AS lo,
           LEAD(bound) OVER (PARTITION BY snapshot, device ORDER BY bound) AS hi
    FROM bound_index
),
-- the map/unmap entries after seq, once per elementary range they cover (not every entry
-- against every range: a trace maps and unmaps thousands of ranges)
covering AS (
    SELECT snapshot, device, seq, action, stream, unnest(range(k_lo, k_hi)) AS k
    FROM (
        SELECT t.snapshot, t.device, t.seq, t.action, t.stream, a.k AS k_lo, b.k AS k_hi
        FROM traces t
        JOIN bound_index a ON a.snapshot = t.snapshot AND a.device = t.device AND a.bound = t.addr
        JOIN bound_index b ON b.snapshot = t.snapshot AND b.device = t.device AND b.bound = t.addr + t.size
        WHERE t.action IN ('segment_map', 'segment_unmap') AND t.seq > $seq AND a.k < b.k
    ) e
),
range_next AS (
    SELECT r.snapshot, r.device, r.lo, r.hi,
           first_value(c.action ORDER BY c.seq) AS action,
           first_value(c.stream ORDER BY c.seq) AS stream
    FROM ranges r
    JOIN covering c ON c.snapshot = r.snapshot AND c.device = r.device AND c.k = r.k
    WHERE r.hi IS NOT NULL
    GROUP BY r.snapshot, r.device, r.lo, r.hi
),
mapped_ranges AS (
    SELECT r.snapshot, r.device, r.lo, r.hi,
           COALESCE(n.stream, f.stream) AS stream,
           f.stack_id,
           n.action IS NOT NULL AS replayed
    FROM ranges r
    LEFT JOIN range_next n ON n.snapshot = r.snapshot AND n.device = r.device AND n.lo = r.lo
    LEFT JOIN segments_final f
      ON f.snapshot = r.snapshot AND f.device = r.device AND f.is_expandable
     AND f.addr <= r.lo AND f.addr + f.total_size >= r.hi
    WHERE r.hi IS NOT NULL
      AND (n.action = 'segment_unmap' OR (n.action IS NULL AND f.addr IS NOT NULL))
),
-- contiguous mapped ranges form one segment
range_islands AS (
    SELECT *,
           SUM(CASE WHEN prev_hi = lo THEN 0 ELSE 1 END)
             OVER (PARTITION BY snapshot, device ORDER BY lo ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
    FROM (
        SELECT *, LAG(hi) OVER (PARTITION BY snapshot, device ORDER BY lo) AS prev_hi
        FROM mapped_ranges
    ) m
),
expandable_segments AS (
    SELECT i.snapshot, i.device, i.addr, i.size, i.stream, true AS is_expandable,
           CASE WHEN i.replayed OR f.addr IS NULL OR f.total_size <> i.size THEN 'replayed' ELSE 'final' END AS origin,
           i.stack_id
    FROM (
        SELECT snapshot, device, MIN(lo) AS addr, SUM(hi - lo) AS size,
               first_value(stream ORDER BY lo) AS stream,
               bool_or(replayed) AS replayed,
               first_value(stack_id ORDER BY lo) AS stack_id
        FROM range_islands
        GROUP BY snapshot, device, island
    ) i
    LEFT JOIN segments_final f ON f.snapshot = i.snapshot AND f.device = i.device AND f.is_expandable AND f.addr = i.addr
),
segments_at AS (
    SELECT * FROM plain_segments
    UNION ALL
    SELECT * FROM expandable_segments
),
-- blocks: the first block entry after seq on each address decides
block_next AS (
    SELECT snapshot, device, addr,
           first_value(action ORDER BY seq) AS action,
           first_value(size ORDER BY seq) AS size,
           bool_or(action IN ('alloc', 'free_completed', 'free')) AS reincarnated
    FROM traces
    WHERE action IN ('alloc', 'free_requested', 'free_completed', 'free') AND seq > $seq
    GROUP BY snapshot, device, addr
),
block_alloc_before AS (
    SELECT snapshot, device, addr, first_value(stack_id ORDER BY seq DESC) AS stack_id
    FROM traces
    WHERE action = 'alloc' AND seq <= $seq
    GROUP BY snapshot, device, addr
),
blocks_at AS (
    -- untouched since seq
    SELECT f.snapshot, f.device, f.addr, f.size, f.requested_size, f.state, 'final' AS origin, f.stack_id
    FROM blocks_final f
    LEFT JOIN block_next n ON n.snapshot = f.snapshot AND n.device = f.device AND n.addr = f.addr
    WHERE n.addr IS NULL
    UNION ALL
    -- put back by undoing a later free
    SELECT n.snapshot, n.device, n.addr,
           CASE WHEN n.reincarnated THEN n.size ELSE f.size END AS size,
           n.size AS requested_size,
           CASE WHEN n.action = 'free_completed' THEN 'active_pending_free' ELSE 'active_allocated' END AS state,
           CASE WHEN n.reincarnated THEN 'replayed' ELSE 'final' END AS origin,
           COALESCE(a.stack_id, CASE WHEN NOT n.reincarnated THEN f.stack_id END) AS stack_id
    FROM block_next n
    LEFT JOIN blocks_final f ON f.snapshot = n.snapshot AND f.device = n.device AND f.addr = n.addr
    LEFT JOIN block_alloc_before a ON a.snapshot = n.snapshot AND a.device = n.device AND a.addr = n.addr
    WHERE n.action IN ('free_requested', 'free_completed', 'free')
),
placed_blocks AS (
    SELECT b.*, s.addr AS segment_addr, s.stream, s.is_expandable
    FROM blocks_at b
    LEFT JOIN segments_at s
      ON s.snapshot = b.snapshot AND s.device = b.device AND b.addr >= s.addr AND b.addr < s.addr + s.size
),
segment_figures AS (
    SELECT snapshot, device, segment_addr,
           COUNT(*) AS live_blocks,
           SUM(size) AS allocated_bytes,
           SUM(requested_size) AS requested_bytes,
           SUM(CASE WHEN state = 'active_pending_free' THEN size ELSE 0 END) AS pending_free_bytes,
           SUM(size - requested_size) AS internal_waste
    FROM placed_blocks
    WHERE segment_addr IS NOT NULL
    GROUP BY snapshot, device, segment_addr
)
SELECT s.snapshot, s.device, $seq AS seq, 'segment' AS kind,
       CAST(s.addr AS BIGINT UNSIGNED) AS address, s.size,
       COALESCE(f.requested_bytes, 0) AS requested_size,
       CAST(NULL AS VARCHAR) AS state,
       CAST(s.addr AS BIGINT UNSIGNED) AS segment_address,
       s.stream, s.is_expandable, s.origin, s.stack_id, st.user_frame,
       COALESCE(f.live_blocks, 0) AS live_blocks,
       COALESCE(f.allocated_bytes, 0) AS allocated_bytes,
       COALESCE(f.pending_free_bytes, 0) AS pending_free_bytes,
       s.size - COALESCE(f.allocated_bytes, 0) AS free_bytes,
       COALESCE(f.internal_waste, 0) AS internal_waste
FROM segments_at s
LEFT JOIN segment_figures f ON f.snapshot = s.snapshot AND f.device = s.device AND f.segment_addr = s.addr
LEFT JOIN snap_stacks st ON st.snapshot = s.snapshot AND st.stack_id = s.stack_id
UNION ALL
SELECT b.snapshot, b.device, $seq, 'block',
       CAST(b.addr AS BIGINT UNSIGNED), b.size, b.requested_size, b.state,
       CAST(b.segment_addr AS BIGINT UNSIGNED),
       b.stream, b.is_expandable, b.origin, b.stack_id, st.user_frame,
       CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT)
FROM placed_blocks b
LEFT JOIN snap_stacks st ON st.snapshot = b.snapshot AND st.stack_id = b.stack_id
