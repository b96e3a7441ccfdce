-- leak_summary: leak candidates grouped by owner, level-1 group and innermost Python frame, per pool of each process and device.
--
-- Built on `leak_candidates` (same rules: a block is a candidate when `blocks.fate` (decided at ingest) says
-- it is still held at the end). Stock memory (allocated before collection started)
-- is not a leak verdict: it is left out of blocks/bytes/share and counted in stock_blocks /
-- stock_bytes instead. The share columns relate the group to its series
-- (source, pid, device, pool): share of the candidate bytes, and share of every byte the series
-- allocated (MALLOC sizes, reused addresses counted again: the reference's denominator).
-- ORDER BY bytes DESC for the largest groups first. For the guide's step D ("group the long-lived
-- blocks by call stack") read stack_top; for the level-1 view group by owner_group.
-- Dumps whose MALLOC and FREE rows cannot be paired (capabilities.pairing malloc_only or
-- free_only) have no row here, as in leak_candidates: cannot conclude, not "no leak".
--
-- @column source         VARCHAR input file
-- @column pid            BIGINT  process id
-- @column device         VARCHAR Device Id as written
-- @column pool           VARCHAR pool = Event Type
-- @column owner          VARCHAR full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group    VARCHAR level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column stack_top      VARCHAR innermost frame of the MALLOC's Python stack; NULL when there is none
-- @column blocks         BIGINT  count: number of leak candidates (stock excluded)
-- @column bytes          BIGINT  bytes: sum of their sizes
-- @column share          DOUBLE  percent: percent (0-100) of the candidate bytes of the series; NULL when those are 0
-- @column alloc_share    DOUBLE  percent: percent (0-100) of all bytes allocated in the series; NULL when those are 0
-- @column with_shadow    BIGINT  count: candidates ended by a shadow FREE (fill-in); the others were never freed
-- @column first_alloc_ts BIGINT  ns: earliest allocation among the candidates, ns since the Unix epoch
-- @column last_alloc_ts  BIGINT  ns: latest allocation among the candidates, ns since the Unix epoch
-- @column stock_blocks   BIGINT  count: stock blocks never released (not counted as candidates)
-- @column stock_bytes    BIGINT  bytes: sum of their sizes
WITH
groups AS (
    SELECT source, pid, device, pool, owner, owner_group, stack_top,
           COUNT(CASE WHEN NOT stock THEN 1 END) AS blocks,
           COALESCE(SUM(CASE WHEN NOT stock THEN size END), 0) AS bytes,
           COUNT(CASE WHEN NOT stock AND shadow_frees > 0 THEN 1 END) AS with_shadow,
           MIN(CASE WHEN NOT stock THEN alloc_ts END) AS first_alloc_ts,
           MAX(CASE WHEN NOT stock THEN alloc_ts END) AS last_alloc_ts,
           COUNT(CASE WHEN stock THEN 1 END) AS stock_blocks,
           COALESCE(SUM(CASE WHEN stock THEN size END), 0) AS stock_bytes
    FROM leak_candidates
    GROUP BY source, pid, device, pool, owner, owner_group, stack_top
),
-- Bytes allocated per series (every MALLOC).
series_allocated AS (
    SELECT source, pid, device, pool, SUM(size) AS allocated_bytes
    FROM blocks
    WHERE alloc_ts IS NOT NULL
    GROUP BY source, pid, device, pool
)
SELECT g.source, g.pid, g.device, g.pool, g.owner, g.owner_group, g.stack_top,
       g.blocks, g.bytes,
       CASE WHEN SUM(g.bytes) OVER (PARTITION BY g.source, g.pid, g.device, g.pool) > 0
            THEN 100.0 * g.bytes / SUM(g.bytes) OVER (PARTITION BY g.source, g.pid, g.device, g.pool)
       END AS share,
       CASE WHEN a.allocated_bytes > 0 THEN 100.0 * g.bytes / a.allocated_bytes END AS alloc_share,
       g.with_shadow, g.first_alloc_ts, g.last_alloc_ts, g.stock_blocks, g.stock_bytes
FROM groups g
LEFT JOIN series_allocated a
       ON a.source = g.source AND (a.pid IS NOT DISTINCT FROM g.pid) AND a.device = g.device AND a.pool = g.pool
