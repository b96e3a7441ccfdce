-- snap_stack_attribution: bytes of live blocks by allocation stack and by first user frame, per snapshot and device, largest first.
--
-- Only active_allocated blocks of the final state count: memory held by tensors. Two groupings,
-- told apart by `grouping`:
--   stack       one row per allocation stack (stack_id; blocks allocated before recording started
--               have none and form one NULL group);
--   user_frame  one row per first user frame (snap_stacks.user_frame), so that different C++
--               paths from the same line of user code add up; '(no stack)' = blocks without a
--               stack, '(no user frame)' = stacks without a qualifying frame.
-- rank orders each grouping by bytes (ties: higher stack_id first, as the reference lists its
-- suspects; user frames by text). Differences from the reference's `--mode leak` suspects: free
-- (inactive) blocks are not attributed, and shares are of live bytes (pct_of_live) beside shares
-- of reserved bytes (the reference's denominator) (docs/reference-differences.md).
--
-- @column snapshot        VARCHAR the snapshot (source name)
-- @column device          BIGINT  device ordinal
-- @column grouping        VARCHAR stack or user_frame
-- @column rank            UBIGINT rank within snapshot, device and grouping (1 = most bytes)
-- @column stack_id        BIGINT  the stack (stack rows; NULL for its no-stack group and for user_frame rows)
-- @column user_frame      VARCHAR text: the first user frame of the group, '(no stack)' or '(no user frame)'
-- @column call_path       VARCHAR text: the reference's call path of the stack (stack rows); NULL for user_frame rows
-- @column stacks          BIGINT  count: distinct stacks in the group (0 for the no-stack group)
-- @column blocks          BIGINT  count: live blocks
-- @column bytes           BIGINT  bytes: occupied by those blocks (Σ size, after rounding)
-- @column requested_bytes BIGINT  bytes: their callers asked for (Σ requested_size)
-- @column pct_of_live     DOUBLE  percent: bytes / bytes of all live blocks of the device, 2 decimals
-- @column pct_of_reserved DOUBLE  percent: bytes / reserved bytes of the device, 2 decimals
WITH
live AS (
    SELECT b.snapshot, b.device, b.stack_id, b.size, b.requested_size,
           CASE WHEN b.stack_id IS NULL THEN '(no stack)' ELSE COALESCE(s.user_frame, '(no user frame)') END AS user_frame,
           s.call_path
    FROM snap_blocks b
    LEFT JOIN snap_stacks s ON s.snapshot = b.snapshot AND s.stack_id = b.stack_id
    WHERE b.state = 'active_allocated'
),
totals AS (
    SELECT snapshot, device, SUM(size) AS live_bytes FROM live GROUP BY snapshot, device
),
reserved AS (
    SELECT snapshot, device, SUM(total_size) AS reserved_bytes FROM snap_segments GROUP BY snapshot, device
),
by_stack AS (
    SELECT snapshot, device, 'stack' AS grouping, stack_id,
           MIN(user_frame) AS user_frame, MIN(call_path) AS call_path,
           COUNT(DISTINCT stack_id) AS stacks, COUNT(*) AS blocks,
           SUM(size) AS bytes, SUM(requested_size) AS requested_bytes,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY SUM(size) DESC, stack_id DESC NULLS FIRST) AS rank
    FROM live
    GROUP BY snapshot, device, stack_id
),
by_frame AS (
    SELECT snapshot, device, 'user_frame' AS grouping, CAST(NULL AS BIGINT) AS stack_id,
           user_frame, CAST(NULL AS VARCHAR) AS call_path,
           COUNT(DISTINCT stack_id) AS stacks, COUNT(*) AS blocks,
           SUM(size) AS bytes, SUM(requested_size) AS requested_bytes,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY SUM(size) DESC, user_frame) AS rank
    FROM live
    GROUP BY snapshot, device, user_frame
),
groups AS (
    SELECT * FROM by_stack
    UNION ALL
    SELECT * FROM by_frame
)
SELECT g.snapshot, g.device, g.grouping, g.rank, g.stack_id, g.user_frame, g.call_path,
       g.stacks, g.blocks, g.bytes, g.requested_bytes,
       round(100.0 * CAST(g.bytes AS DOUBLE) / CAST(NULLIF(t.live_bytes, 0) AS DOUBLE), 2) AS pct_of_live,
       round(100.0 * CAST(g.bytes AS DOUBLE) / CAST(NULLIF(r.reserved_bytes, 0) AS DOUBLE), 2) AS pct_of_reserved
FROM groups g
JOIN totals t ON t.snapshot = g.snapshot AND t.device = g.device
LEFT JOIN reserved r ON r.snapshot = g.snapshot AND r.device = g.device
