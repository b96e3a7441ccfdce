-- owner_peaks: the largest owners of each pool: peak live bytes, bytes allocated and blocks per owner.
--
-- One row per owner of each series (source, pid, device, pool); pools, processes and devices are
-- never mixed. The owner is the MALLOC's `owner` attribute, complete (commas included); a block
-- without one is listed under '(stock)' when it is stock memory (allocated before collection
-- started) and under its pool name otherwise (as the reference does), which owner_group reports
-- as '(unlabelled)'.
-- peak_bytes is the highest sum of that owner's live blocks, from a running sum over the blocks'
-- allocations and ends in canonical order (peaks of different owners are reached at different
-- moments, so they do not add up to a simultaneous total). As in `curve`, a shadow FREE that only
-- fills in a release never observed (held at exit, see `leak_candidates`) ends nothing.
-- ORDER BY peak_bytes DESC for the largest first.
--
-- @column source         input file
-- @column pid            process id
-- @column device         Device Id as written
-- @column pool           pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column owner          full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group    level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column peak_bytes     bytes: the highest live bytes of the owner's blocks at any moment
-- @column peak_ts        first time the owner reached peak_bytes, ns since the Unix epoch
-- @column total_bytes    bytes: sum of the sizes of every block allocated (MALLOC rows, reused addresses counted again)
-- @column blocks         number of blocks allocated (MALLOC rows)
-- @column end_bytes      bytes: the owner's bytes still held at the end of the data (blocks never released, stock included)
WITH
-- Every block with the first row of the next block on the same key (NULL when none follows):
-- a block ended by address reuse ('replaced') ends at that row.
keyed_blocks AS (
    SELECT source, pid, device, pool, ptr,
           COALESCE(NULLIF(owner, ''), CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner,
           COALESCE(size, 0) AS size, alloc_ts, alloc_row, free_ts, free_row, free_kind,
           LEAD(COALESCE(alloc_row, free_row)) OVER (
               PARTITION BY source, pid, device, pool, ptr
               ORDER BY COALESCE(alloc_ts, free_ts), COALESCE(alloc_row, free_row)) AS next_block_row
    FROM blocks
),
-- START_TRACE / STOP_TRACE rows: marker m covers the times (previous marker, m] and, when it is
-- the last one, also the times after it.
trace_markers AS (
    SELECT source, pid, ts, event_type,
           LAG(ts) OVER (PARTITION BY source, pid ORDER BY ts) AS previous_ts,
           LEAD(ts) OVER (PARTITION BY source, pid ORDER BY ts) IS NULL AS is_last
    FROM events
    WHERE event = 'SYSTEM' AND event_type IN ('START_TRACE', 'STOP_TRACE') AND ts IS NOT NULL
),
-- Allocated blocks; a shadow FREE with no later block on its key that was not flushed at a
-- start() is a fill-in: the block was still held at exit and its end does not count.
owned_blocks AS (
    SELECT k.*,
           COALESCE(k.free_kind = 'shadow' AND k.next_block_row IS NULL
                    AND NOT (m.event_type = 'START_TRACE' AND k.free_ts <= m.ts), false) AS held_at_exit
    FROM keyed_blocks k
    LEFT JOIN trace_markers m
           ON m.source = k.source AND (m.pid IS NOT DISTINCT FROM k.pid)
          AND k.free_kind = 'shadow' AND k.next_block_row IS NULL
          AND ((k.free_ts <= m.ts AND (m.previous_ts IS NULL OR m.previous_ts < k.free_ts))
               OR (m.is_last AND k.free_ts > m.ts))
    WHERE k.alloc_ts IS NOT NULL
),
-- +size at each allocation, -size where the block ends.
owner_deltas AS (
    SELECT source, pid, device, pool, owner,
           CASE WHEN change.kind = 'alloc' THEN alloc_ts ELSE free_ts END AS ts,
           CASE WHEN change.kind = 'alloc' THEN alloc_row ELSE COALESCE(free_row, next_block_row) END AS row_idx,
           CASE WHEN change.kind = 'alloc' THEN size ELSE -size END AS delta,
           CASE WHEN change.kind = 'alloc' THEN 1 ELSE 0 END AS allocation
    FROM owned_blocks
    CROSS JOIN (VALUES ('alloc'), ('end')) AS change(kind)
    WHERE change.kind = 'alloc' OR (free_ts IS NOT NULL AND NOT held_at_exit)
),
-- The owner's live bytes after each change (ends before allocations within one row).
owner_live AS (
    SELECT source, pid, device, pool, owner, ts, row_idx, delta, allocation,
           SUM(delta) OVER (PARTITION BY source, pid, device, pool, owner
                            ORDER BY ts, row_idx, delta
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live
    FROM owner_deltas
)
SELECT source, pid, device, pool, owner,
       owner_group(owner) AS owner_group,
       MAX(live) AS peak_bytes,
       FIRST_VALUE(ts ORDER BY live DESC, ts, row_idx) AS peak_ts,
       SUM(CASE WHEN allocation = 1 THEN delta ELSE 0 END) AS total_bytes,
       SUM(allocation) AS blocks,
       SUM(delta) AS end_bytes
FROM owner_live
GROUP BY source, pid, device, pool, owner
