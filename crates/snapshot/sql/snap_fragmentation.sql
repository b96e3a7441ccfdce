-- snap_fragmentation: per segment of the final state: free bytes, internal rounding waste, pending-free share, free pieces and a false-fragmentation flag.
--
-- One row per segment, ranked per snapshot and device the way the reference's `--mode fragment`
-- lists its top segments: frag_pct descending, then free bytes descending, then segment order.
--   free_bytes       total_size - allocated_size: cached free blocks plus pending-free blocks (the
--                    reference's waste_bytes);
--   frag_pct         free_bytes / total_size in percent, 2 decimals half away from zero (the
--                    reference's SQLite ROUND: 28.125 -> 28.13); 100 = a wholly free segment;
--   internal_waste   Σ (size - requested_size) of its live blocks: bytes lost to size rounding
--                    inside allocated blocks (MemoryViz's "free space lost due to rounding");
--   pending_free_pct pending-free bytes / free_bytes; false_fragmentation when above 50 (the free
--                    space mostly waits for cross-stream frees: record_stream, not allocator holes);
--   free_pieces / largest_free_bytes  the inactive blocks of the segment: one piece holding all
--                    free bytes is a cached hole, many small pieces are real fragmentation.
--
-- @column snapshot            VARCHAR the snapshot (source name)
-- @column device              BIGINT  device ordinal
-- @column rank                UBIGINT rank within snapshot and device (1 = most fragmented, see above)
-- @column segment_id          BIGINT  the segment (snap_segments.segment_id)
-- @column address             UBIGINT pointer: base address of the segment
-- @column segment_type        VARCHAR large or small
-- @column is_expandable       BOOLEAN expandable segment
-- @column stream              BIGINT  stream handle of the segment
-- @column total_size          BIGINT  bytes: reserved by the segment
-- @column allocated_bytes     BIGINT  bytes: of its live blocks after rounding (allocated_size)
-- @column requested_bytes     BIGINT  bytes: requested by the callers of its live blocks (requested_size)
-- @column free_bytes          BIGINT  bytes: not allocated (total_size - allocated_size)
-- @column frag_pct            DOUBLE  percent: free_bytes / total_size, 2 decimals; NULL when total_size is 0
-- @column internal_waste      BIGINT  bytes: lost to rounding inside its live blocks
-- @column pending_free_bytes  BIGINT  bytes: of its active_pending_free blocks
-- @column pending_free_pct    DOUBLE  percent: pending_free_bytes / free_bytes, 2 decimals; 0 when nothing is free
-- @column false_fragmentation BOOLEAN true when pending_free_pct > 50
-- @column free_pieces         BIGINT  count: inactive blocks of the segment
-- @column largest_free_bytes  BIGINT  bytes: the largest inactive block (0 when none)
-- @column live_blocks         BIGINT  count: active_allocated blocks
-- @column stack_id            BIGINT  stack of the allocation that created the segment; NULL when none
-- @column user_frame          VARCHAR text: first user frame of that stack (snap_stacks)
WITH
block_sums AS (
    SELECT snapshot, segment_id,
           SUM(CASE WHEN state = 'active_allocated' THEN size - requested_size ELSE 0 END) AS internal_waste,
           SUM(CASE WHEN state = 'active_pending_free' THEN size ELSE 0 END) AS pending_free_bytes,
           SUM(CASE WHEN state = 'inactive' THEN 1 ELSE 0 END) AS free_pieces,
           MAX(CASE WHEN state = 'inactive' THEN size ELSE 0 END) AS largest_free_bytes,
           SUM(CASE WHEN state = 'active_allocated' THEN 1 ELSE 0 END) AS live_blocks
    FROM snap_blocks
    GROUP BY snapshot, segment_id
),
segments AS (
    SELECT g.snapshot, g.device, g.segment_id, g.address, g.segment_type, g.is_expandable, g.stream,
           g.total_size, g.allocated_size AS allocated_bytes, g.requested_size AS requested_bytes,
           g.total_size - g.allocated_size AS free_bytes,
           round(100.0 * CAST(g.total_size - g.allocated_size AS DOUBLE) / CAST(NULLIF(g.total_size, 0) AS DOUBLE), 2) AS frag_pct,
           COALESCE(b.internal_waste, 0) AS internal_waste,
           COALESCE(b.pending_free_bytes, 0) AS pending_free_bytes,
           CASE WHEN g.total_size - g.allocated_size > 0
                THEN 100.0 * CAST(COALESCE(b.pending_free_bytes, 0) AS DOUBLE) / CAST(g.total_size - g.allocated_size AS DOUBLE)
                ELSE 0.0 END AS pending_pct,
           COALESCE(b.free_pieces, 0) AS free_pieces,
           COALESCE(b.largest_free_bytes, 0) AS largest_free_bytes,
           COALESCE(b.live_blocks, 0) AS live_blocks,
           g.stack_id
    FROM snap_segments g
    LEFT JOIN block_sums b ON b.snapshot = g.snapshot AND b.segment_id = g.segment_id
)
SELECT g.snapshot, g.device,
       ROW_NUMBER() OVER (PARTITION BY g.snapshot, g.device ORDER BY g.frag_pct DESC NULLS LAST, g.free_bytes DESC, g.segment_id) AS rank,
       g.segment_id, g.address, g.segment_type, g.is_expandable, g.stream,
       g.total_size, g.allocated_bytes, g.requested_bytes, g.free_bytes, g.frag_pct, g.internal_waste,
       g.pending_free_bytes, round(g.pending_pct, 2) AS pending_free_pct, g.pending_pct > 50 AS false_fragmentation,
       g.free_pieces, g.largest_free_bytes, g.live_blocks,
       g.stack_id, s.user_frame
FROM segments g
LEFT JOIN snap_stacks s ON s.snapshot = g.snapshot AND s.stack_id = g.stack_id
