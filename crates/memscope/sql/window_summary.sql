-- window_summary: what happened to memory between two times — live at start and end, allocated, freed, net, top owner groups — per pool series.
--
-- Blocks come from table `blocks` (keyed by source, pid, device, pool, ptr), one output row
-- per series (source, pid, device, pool) that had any live or allocated block in the window.
-- The window is [t0, t1], both inclusive: a block allocated at t0 is an allocation of the
-- window, one freed at t0 was live at the start; one freed at t1 is freed in the window and not
-- live at the end. So end = start + allocated + promoted - freed - shadow_freed - replaced.
-- A block ends at `blocks.end_ts`, the rule every view shares: a shadow FREE that only fills
-- in a release never observed (at exit; blocks.held_at_end) ends nothing, so such blocks stay
-- live at t1 (docs/formats/memscope.md §5.5).
-- Blocks whose MALLOC was never seen (allocated before collection) are left out, and so is a
-- dump whose MALLOC and FREE rows cannot be paired (view pairing: MALLOC only or FREE only):
-- what was live or freed in the window cannot be concluded there.
-- Promoted shadow MALLOCs (stock memory allocated before collection, written at the time of a
-- start()) are counted as `promoted`, not as allocations. used_peak is the highest counter
-- value of a row inside the window (view usage_series: HAL = paired live bytes).
-- Groups are level-1 owner groups (framework segment dropped, '(unlabelled)' without a label).
-- Differences from the reference `--window`: blocks are keyed by (process, device, pool, Ptr)
-- so a block of another pool at the same address no longer makes one vanish; address reuse
-- without FREE is counted as `replaced` instead of silently dropped (docs/reference-differences.md).
--
-- Rows are ordered by source, pid, device, pool.
-- @param t0 BIGINT [window start per pool] window start, ns (inclusive)
-- @param t1 BIGINT [window end per pool] window end, ns (inclusive)
-- @param pool VARCHAR = NULL [one of pools] only this pool (HAL, PTA, ...); NULL = every pool, one row per series
-- @column source            VARCHAR   input file
-- @column pid               BIGINT    process id
-- @column device            VARCHAR   Device Id as written
-- @column pool              VARCHAR   pool (Event Type)
-- @column start_blocks      BIGINT    count: blocks live at t0 (allocated before t0, not ended before t0)
-- @column start_bytes       BIGINT    bytes: live at t0
-- @column alloc_count       BIGINT    count: MALLOCs in the window (promoted shadow MALLOCs excluded)
-- @column alloc_bytes       BIGINT    bytes: allocated in the window
-- @column promoted_count    BIGINT    count: promoted shadow MALLOCs (stock memory) in the window
-- @column promoted_bytes    BIGINT    bytes: of those
-- @column free_count        BIGINT    count: blocks ended by a real FREE in the window
-- @column free_bytes        BIGINT    bytes: freed by them (sizes of their MALLOCs)
-- @column shadow_free_count BIGINT    count: blocks ended by a shadow FREE in the window (a stop-period free or a fill-in at address reuse; an exit fill-in ends nothing)
-- @column shadow_free_bytes BIGINT    bytes: of those
-- @column replaced_count    BIGINT    count: blocks ended in the window because their address was allocated again without a FREE
-- @column replaced_bytes    BIGINT    bytes: of those
-- @column end_blocks        BIGINT    count: blocks live at t1 (allocated at or before t1, not ended at or before t1)
-- @column end_bytes         BIGINT    bytes: live at t1
-- @column net_blocks        BIGINT    count: end_blocks - start_blocks
-- @column net_bytes         BIGINT    bytes: end_bytes - start_bytes
-- @column used_peak         BIGINT    bytes: highest counter value (`used`) of a row in the window (HAL: paired live bytes; HOST_PINNED: process VmRSS); NULL when no row of the series has one there
-- @column used_peak_ts      BIGINT    ns: time of the first row reaching used_peak, ns
-- @column used_peak_ts_raw  BIGINT    the same time in the file's unit (µs for G1 sources)
-- @column top_alloc_groups  STRUCT[]  the 10 owner groups that allocated most in the window: list of {group, bytes, blocks}, most bytes first
-- @column top_end_groups    STRUCT[]  the 10 owner groups holding most at t1: list of {group, bytes, blocks}
-- @column top_start_groups  STRUCT[]  the 10 owner groups holding most at t0: list of {group, bytes, blocks}
WITH
-- blocks of the selected pools, classified against the window
classified AS (
    SELECT source, pid, device, pool, COALESCE(size, 0) AS size, owner_group(owner) AS grp,
           free_kind, stock,
           alloc_ts < $t0 AND (end_ts IS NULL OR end_ts >= $t0) AS live_start,
           alloc_ts <= $t1 AND (end_ts IS NULL OR end_ts > $t1) AS live_end,
           alloc_ts >= $t0 AND alloc_ts <= $t1 AS allocated,
           end_ts >= $t0 AND end_ts <= $t1 AS ended
    FROM blocks
    WHERE alloc_ts IS NOT NULL
      AND ($pool IS NULL OR pool = $pool)
      -- a dump whose MALLOC and FREE rows cannot be paired (view pairing) has no block accounting
      AND source IN (SELECT source FROM pairing WHERE can_pair)
),
-- one pass over the blocks: every count and sum, per series and owner group
per_group AS (
    SELECT source, pid, device, pool, grp,
           COUNT(*) FILTER (WHERE live_start) AS start_blocks,
           COALESCE(SUM(size) FILTER (WHERE live_start), 0) AS start_bytes,
           COUNT(*) FILTER (WHERE allocated AND NOT stock) AS alloc_count,
           COALESCE(SUM(size) FILTER (WHERE allocated AND NOT stock), 0) AS alloc_bytes,
           COUNT(*) FILTER (WHERE allocated AND stock) AS promoted_count,
           COALESCE(SUM(size) FILTER (WHERE allocated AND stock), 0) AS promoted_bytes,
           COUNT(*) FILTER (WHERE ended AND free_kind = 'real') AS free_count,
           COALESCE(SUM(size) FILTER (WHERE ended AND free_kind = 'real'), 0) AS free_bytes,
           COUNT(*) FILTER (WHERE ended AND free_kind = 'shadow') AS shadow_free_count,
           COALESCE(SUM(size) FILTER (WHERE ended AND free_kind = 'shadow'), 0) AS shadow_free_bytes,
           COUNT(*) FILTER (WHERE ended AND free_kind = 'replaced') AS replaced_count,
           COALESCE(SUM(size) FILTER (WHERE ended AND free_kind = 'replaced'), 0) AS replaced_bytes,
           COUNT(*) FILTER (WHERE live_end) AS end_blocks,
           COALESCE(SUM(size) FILTER (WHERE live_end), 0) AS end_bytes
    FROM classified
    GROUP BY source, pid, device, pool, grp
),
-- the series' totals, and its 10 largest owner groups by bytes allocated in the window, live
-- at the end and live at the start (a group is listed when it has such blocks)
totals AS (
    SELECT source, pid, device, pool,
           SUM(start_blocks) AS start_blocks,
           SUM(start_bytes) AS start_bytes,
           SUM(alloc_count) AS alloc_count,
           SUM(alloc_bytes) AS alloc_bytes,
           SUM(promoted_count) AS promoted_count,
           SUM(promoted_bytes) AS promoted_bytes,
           SUM(free_count) AS free_count,
           SUM(free_bytes) AS free_bytes,
           SUM(shadow_free_count) AS shadow_free_count,
           SUM(shadow_free_bytes) AS shadow_free_bytes,
           SUM(replaced_count) AS replaced_count,
           SUM(replaced_bytes) AS replaced_bytes,
           SUM(end_blocks) AS end_blocks,
           SUM(end_bytes) AS end_bytes,
           array_slice(array_agg(named_struct('group', grp, 'bytes', alloc_bytes, 'blocks', alloc_count)
                                 ORDER BY alloc_bytes DESC, grp) FILTER (WHERE alloc_count > 0), 1, 10) AS top_alloc_groups,
           array_slice(array_agg(named_struct('group', grp, 'bytes', end_bytes, 'blocks', end_blocks)
                                 ORDER BY end_bytes DESC, grp) FILTER (WHERE end_blocks > 0), 1, 10) AS top_end_groups,
           array_slice(array_agg(named_struct('group', grp, 'bytes', start_bytes, 'blocks', start_blocks)
                                 ORDER BY start_bytes DESC, grp) FILTER (WHERE start_blocks > 0), 1, 10) AS top_start_groups
    FROM per_group
    GROUP BY source, pid, device, pool
),
-- counter peak among the rows inside the window, with the unit of its source's times (the
-- few series joined to `sources`, not every row)
peaks AS (
    SELECT u.*, CASE WHEN f.ts_unit = 'us' THEN 1000 ELSE 1 END AS unit_ns
    FROM (
        SELECT source, pid, device, pool,
               MAX(used) AS used_peak,
               first_value(ts ORDER BY used DESC, ts, row_idx) AS used_peak_ts
        FROM usage_series
        WHERE ts >= $t0 AND ts <= $t1 AND used IS NOT NULL
          AND ($pool IS NULL OR pool = $pool)
        GROUP BY source, pid, device, pool
    ) u
    LEFT JOIN sources f ON f.source = u.source
)
SELECT t.source, t.pid, t.device, t.pool,
       t.start_blocks, t.start_bytes,
       t.alloc_count, t.alloc_bytes, t.promoted_count, t.promoted_bytes,
       t.free_count, t.free_bytes, t.shadow_free_count, t.shadow_free_bytes,
       t.replaced_count, t.replaced_bytes,
       t.end_blocks, t.end_bytes,
       t.end_blocks - t.start_blocks AS net_blocks,
       t.end_bytes - t.start_bytes AS net_bytes,
       p.used_peak, p.used_peak_ts, p.used_peak_ts / p.unit_ns AS used_peak_ts_raw,
       t.top_alloc_groups, t.top_end_groups, t.top_start_groups
FROM totals t
LEFT JOIN peaks p
       ON p.source = t.source AND (p.pid IS NOT DISTINCT FROM t.pid) AND p.device = t.device AND p.pool = t.pool
WHERE t.start_blocks > 0 OR t.end_blocks > 0 OR t.alloc_count > 0 OR t.promoted_count > 0
   OR t.free_count > 0 OR t.shadow_free_count > 0 OR t.replaced_count > 0
ORDER BY source, pid, device, pool
