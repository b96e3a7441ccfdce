-- breakdown_tree_at: what was live at a moment, as an owner tree: one row per node of the owner hierarchy.
--
-- Same live blocks as `breakdown_at` (ts in NANOSECONDS since the Unix epoch; for a G1 source
-- multiply the file's µs value by 1000; pool default HAL, NULL = every pool separately).
-- Each block's owner is split into levels after its framework segment (owner_parts:
-- 'PTA@fsdp2@all_gather_output@ops' -> fsdp2 / all_gather_output / ops; 'CANN@HCCL' -> HCCL);
-- an owner without levels is one node '(unlabelled)', stock memory without owner is '(stock)'.
-- A node holds every block whose owner passes through it, so a node's bytes are the sum of
-- its children's plus those of blocks ending at that node; depth 1 nodes are the level-1 groups
-- of `breakdown_at`. ORDER BY source, pid, device, pool, tree_order lists the tree the way the
-- reference draws it: each node right before its descendants, siblings by bytes, largest first.
--
-- @param ts BIGINT [moment] the moment to look at: ns since the Unix epoch, '+12.3s' (from the run's start; ms, us, ns, min, h too), an ISO time ('2025-12-05T02:00:12.5Z'), 'start', 'end', 'peak' (each series' own peak of live bytes), or a subquery (SELECT ts FROM ...)
-- @param pool VARCHAR = 'HAL' [one of pools] the pool to decompose; NULL = every pool, each separately
-- @column source     VARCHAR input file
-- @column pid        BIGINT  process id
-- @column device     VARCHAR Device Id as written
-- @column pool       VARCHAR pool = Event Type
-- @column path       VARCHAR the node: owner levels from the top down to this node, joined with '@'
-- @column parent     VARCHAR path of the parent node; NULL at depth 1
-- @column name       VARCHAR the node's own level (last part of path)
-- @column depth      BIGINT  1 for a level-1 group, 2 for its children, ...
-- @column bytes      BIGINT  bytes: sum of the sizes of the live blocks under this node
-- @column blocks     BIGINT  count: number of live blocks under this node
-- @column share      DOUBLE  percent: percent (0-100) of the live bytes of the series (source, pid, device, pool) at ts; NULL when those are 0
-- @column tree_order UBIGINT 1-based position of the node in the drawn tree of its series (depth first, siblings by bytes descending, then name)
WITH
-- Blocks of the pool live at the moment, with the levels of their owner.
live_blocks AS (
    SELECT b.source, b.pid, b.device, b.pool, COALESCE(size, 0) AS size,
           owner_parts(COALESCE(NULLIF(owner, ''), CASE WHEN stock THEN '(stock)' ELSE pool END)) AS levels,
           owner_group(COALESCE(NULLIF(owner, ''), CASE WHEN stock THEN '(stock)' ELSE pool END)) AS top_level
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
-- Owners without levels become the single node '(unlabelled)' (or '(stock)').
block_paths AS (
    SELECT source, pid, device, pool, size,
           CASE WHEN cardinality(levels) = 0 THEN make_array(top_level) ELSE levels END AS levels
    FROM live_blocks
),
-- One row per block and node on its path.
block_nodes AS (
    SELECT source, pid, device, pool, size, levels,
           unnest(range(1, CAST(cardinality(levels) AS BIGINT) + 1)) AS depth
    FROM block_paths
),
nodes AS (
    SELECT source, pid, device, pool, array_slice(levels, 1, depth) AS node_levels, depth,
           SUM(size) AS bytes, COUNT(*) AS blocks
    FROM block_nodes
    GROUP BY source, pid, device, pool, array_slice(levels, 1, depth), depth
),
-- Rank of each node among its siblings: most bytes first, then by name.
ranked AS (
    SELECT n.*,
           ROW_NUMBER() OVER (PARTITION BY source, pid, device, pool, array_slice(node_levels, 1, depth - 1)
                              ORDER BY bytes DESC, node_levels[depth]) AS sibling_rank,
           SUM(CASE WHEN depth = 1 THEN bytes END) OVER (PARTITION BY source, pid, device, pool) AS series_bytes
    FROM nodes n
),
-- The sibling ranks along each node's path (its ancestors and itself): sorting by them gives
-- depth-first tree order. The node set is small (one node per distinct owner prefix).
paths AS (
    SELECT d.source, d.pid, d.device, d.pool, d.node_levels, d.depth, d.bytes, d.blocks, d.series_bytes,
           array_agg(a.sibling_rank ORDER BY a.depth) AS rank_path
    FROM ranked d
    JOIN ranked a
      ON a.source = d.source AND (a.pid IS NOT DISTINCT FROM d.pid) AND a.device = d.device AND a.pool = d.pool
     AND a.depth <= d.depth AND a.node_levels = array_slice(d.node_levels, 1, a.depth)
    GROUP BY d.source, d.pid, d.device, d.pool, d.node_levels, d.depth, d.bytes, d.blocks, d.series_bytes
)
SELECT source, pid, device, pool,
       array_to_string(node_levels, '@') AS path,
       CASE WHEN depth > 1 THEN array_to_string(array_slice(node_levels, 1, depth - 1), '@') END AS parent,
       node_levels[depth] AS name,
       depth, bytes, blocks,
       CASE WHEN series_bytes > 0 THEN 100.0 * bytes / series_bytes END AS share,
       ROW_NUMBER() OVER (PARTITION BY source, pid, device, pool ORDER BY rank_path) AS tree_order
FROM paths
