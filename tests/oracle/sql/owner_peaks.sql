-- owner_peaks: the largest owners of each pool: peak live bytes, bytes allocated and blocks per owner.
--
-- One row per owner of each series (source, pid, device, pool); pools, processes and devices are
-- never mixed. The owner is the MALLOC's `owner` attribute, complete (commas included); a block
-- without one is listed under '(stock)' when it is stock memory (allocated before collection
-- started) and under its pool name otherwise (as the reference does), which owner_group reports
-- as '(unlabelled)'.
-- peak_bytes is the highest sum of that owner's live blocks, from a running sum over the blocks'
-- allocations and ends in canonical order (peaks of different owners are reached at different
-- moments, so they do not add up to a simultaneous total). As in `curve`, a block still held at
-- the end by `blocks.fate` (decided at ingest) (a shadow FREE that only fills in a release never observed)
-- ends nothing; every other block ends at blocks.end_ts.
-- ORDER BY peak_bytes DESC for the largest first.
--
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column pool        VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column owner       VARCHAR full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group VARCHAR level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column peak_bytes  BIGINT  bytes: the highest live bytes of the owner's blocks at any moment
-- @column peak_ts     BIGINT  ns: first time the owner reached peak_bytes, ns since the Unix epoch
-- @column total_bytes BIGINT  bytes: sum of the sizes of every block allocated (MALLOC rows, reused addresses counted again)
-- @column blocks      BIGINT  count: number of blocks allocated (MALLOC rows)
-- @column end_bytes   BIGINT  bytes: the owner's bytes still held at the end of the data (blocks never released, stock included)
WITH
-- Allocated blocks with their owner and fate.
owned_blocks AS (
    SELECT source, pid, device, pool,
           COALESCE(NULLIF(owner, ''), CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner,
           COALESCE(size, 0) AS size, alloc_ts, alloc_row, end_ts, end_row
    FROM blocks
    WHERE alloc_ts IS NOT NULL
),
-- +size at each allocation, -size where the block ends (not for blocks held at the end).
owner_deltas AS (
    SELECT source, pid, device, pool, owner,
           CASE WHEN change.kind = 'alloc' THEN alloc_ts ELSE end_ts END AS ts,
           CASE WHEN change.kind = 'alloc' THEN alloc_row ELSE end_row END AS row_idx,
           CASE WHEN change.kind = 'alloc' THEN size ELSE -size END AS delta,
           CASE WHEN change.kind = 'alloc' THEN 1 ELSE 0 END AS allocation
    FROM owned_blocks
    CROSS JOIN (VALUES ('alloc'), ('end')) AS change(kind)
    WHERE change.kind = 'alloc' OR end_ts IS NOT NULL
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
