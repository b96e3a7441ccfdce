-- breakdown_at: what was live at a moment, by owner, for one pool (default HAL) of each process and device.
--
-- A block is live at ts when it was allocated at or before ts and not ended by then:
-- alloc_ts <= ts AND (end_ts IS NULL OR end_ts > ts). A block allocated at ts is live, one
-- freed at ts is not. `blocks.end_ts` is the one end-state rule every view shares: a shadow
-- FREE that only fills in a release never observed (at exit) does not end the block
-- (blocks.held_at_end, docs/formats/memscope.md §5.5), so breakdown_at at the last timestamp
-- shows what leak_candidates lists as held.
-- Blocks are keyed by (source, pid, device, pool, ptr), so a FREE of
-- another pool or process never ends a block. (The msMemScope Python analysis script
-- aggregate_dump.py of the mindstudio-agent package, whose `--at-timestamp` answers the same
-- question, keys blocks by the address alone: there a PTA FREE at the base of a HAL segment
-- removes the HAL segment, and processes and devices with equal addresses collide;
-- docs/reference-differences.md.) Blocks freed without a recorded MALLOC (allocated before
-- collection) are not counted: their start is unknown. Neither is any block of a dump whose
-- MALLOC and FREE rows cannot be paired (view pairing: MALLOC only or FREE only): what was
-- live cannot be concluded there.
--
-- ts is in NANOSECONDS since the Unix epoch, like events.ts. For a G1 source (timestamps written
-- in µs, sources.ts_unit = 'us') multiply the file's value by 1000.
-- HAL is the driver-level superset and the pools (PTA, ATB, ...) are nested views of the same
-- bytes, so pools are decomposed one at a time; pass NULL for pool to list every pool, each
-- separately. Owner naming as in owner_peaks ('(stock)' = memory allocated before collection
-- started: counted, not attributed). `breakdown_tree_at` gives the same bytes by owner level.
-- Rows are ordered by series (source, pid, device, pool), then bytes descending (the largest
-- owners first).
--
-- @param ts BIGINT [moment] the moment to look at: ns since the Unix epoch, '+12.3s' (from the run's start; ms, us, ns, min, h too), an ISO time ('2025-12-05T02:00:12.5Z'), 'start', 'end', 'peak' (each series' own peak of live bytes), or a subquery (SELECT ts FROM ...)
-- @param pool VARCHAR = 'HAL' [one of pools] the pool to decompose (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...); NULL = every pool, each separately
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column pool        VARCHAR pool = Event Type
-- @column owner       VARCHAR full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group VARCHAR level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column bytes       BIGINT  bytes: sum of the sizes of the owner's blocks live at ts
-- @column blocks      BIGINT  count: number of the owner's blocks live at ts
-- @column share       DOUBLE  percent: percent (0-100) of the live bytes of the series (source, pid, device, pool) at ts; NULL when those are 0
WITH
-- Blocks of the pool live at the moment.
live_blocks AS (
    SELECT b.source, b.pid, b.device, b.pool,
           COALESCE(NULLIF(owner, ''), CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner,
           COALESCE(size, 0) AS size
    FROM blocks b
    -- 'peak' is each series' own peak of live bytes (peaks, metric live): device 1 is not looked
    -- at device 0's peak moment. The call passes it as a negative ts (no moment is one).
    LEFT JOIN (SELECT source AS p_source, pid AS p_pid, device AS p_device, pool AS p_pool,
                      peak_ts AS p_ts
               FROM peaks WHERE metric = 'live' AND $ts < 0) p
      ON b.source = p.p_source AND COALESCE(b.pid, -1) = COALESCE(p.p_pid, -1)
         AND b.device = p.p_device AND b.pool = p.p_pool
    WHERE alloc_ts <= COALESCE(p.p_ts, $ts)
      AND (end_ts IS NULL OR end_ts > COALESCE(p.p_ts, $ts))
      AND ($pool IS NULL OR pool = $pool)
      -- a dump whose MALLOC and FREE rows cannot be paired (view pairing) has no live blocks
      AND b.source IN (SELECT source FROM pairing WHERE can_pair)
),
by_owner AS (
    SELECT source, pid, device, pool, owner, SUM(size) AS bytes, COUNT(*) AS blocks
    FROM live_blocks
    GROUP BY source, pid, device, pool, owner
)
SELECT source, pid, device, pool, owner,
       owner_group(owner) AS owner_group,
       bytes, blocks,
       CASE WHEN SUM(bytes) OVER (PARTITION BY source, pid, device, pool) > 0
            THEN 100.0 * bytes / SUM(bytes) OVER (PARTITION BY source, pid, device, pool)
       END AS share
FROM by_owner
ORDER BY source, pid, device, pool, bytes DESC, owner
