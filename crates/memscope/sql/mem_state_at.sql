-- mem_state_at: the state of memory at a moment given as a time, a step boundary or an MSTX mark — pool counters, the owner breakdown and the live blocks.
--
-- The msMemScope twin of the snapshot analysis state_at. `at` is text:
--   '1764900000113413334'   a time in ns since the Unix epoch (every process and device);
--   'step 3' or 'step 3 start', 'step 3 end'
--                           the start or end of step 3 of each process and device (table steps;
--                           an open step has no end);
--   'mark NAME'             the first MSTX row (Mark or Range_start) of each process and device
--                           whose name is NAME (trimmed, case-insensitive).
-- A process and device without that step or mark is left out. A block is live at the moment
-- under the rule of every view (allocated at or before it, not ended by it: blocks.end_ts), so
-- the owner rows of a series add up to its `live` pool row. Three kinds of rows:
--   pool    one per series (source, pid, device, pool): the counters the tool wrote on the last
--           row at or before the moment (used, total) and memq's paired live bytes;
--   owner   one per owner of a series: bytes and blocks live (owner naming as in owner_peaks);
--   block   one per live block, with its category and user frame (docs/attribution.md).
-- A dump whose MALLOC and FREE rows cannot be paired (view pairing: MALLOC only or FREE only)
-- keeps its pool rows' counters, with bytes NULL and no owner or block row: what was live
-- cannot be concluded there.
--
-- Rows are ordered by source, pid, device, pool, kind, then bytes descending.
-- @param at VARCHAR the moment: ns time, 'step N [start|end]' or 'mark NAME'
-- @param pool VARCHAR = NULL [one of pools] only this pool (HAL, PTA, ...); NULL = every pool
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column at_ts       BIGINT  ns: the moment, resolved for this process and device, ns
-- @column pool        VARCHAR pool = Event Type
-- @column kind        VARCHAR pool, owner or block
-- @column owner       VARCHAR owner and block rows: the owner ('(stock)' or the pool name without one)
-- @column owner_group VARCHAR owner and block rows: level-1 group of the owner
-- @column bytes       BIGINT  bytes: pool: paired live bytes (NULL for a dump that cannot pair); owner: bytes of its live blocks; block: its size
-- @column blocks      BIGINT  count: pool and owner rows: live blocks
-- @column used        BIGINT  bytes: pool rows: the tool's `used` counter on the last row at or before the moment (HAL: NULL; HOST_PINNED: VmRSS)
-- @column total       BIGINT  bytes: pool rows: the tool's `total` (reserved) counter there
-- @column ptr         UBIGINT pointer: block rows: address
-- @column alloc_ts    BIGINT  ns: block rows: MALLOC time, ns
-- @column category    VARCHAR block rows: categorize(owner, user_frame)
-- @column user_frame  VARCHAR block rows: innermost user frame of the MALLOC's Python stack
WITH
forms AS (
    SELECT try_cast(trim($at) AS BIGINT) AS ts,
           regexp_match(lower(trim($at)), '^step\s*(\d+)(\s+(start|begin|end))?$') AS step_m,
           CASE WHEN lower(trim($at)) LIKE 'mark %' THEN trim(substr(trim($at), 6)) END AS mark
),
-- an `at` of no known form is an error, not an empty answer (the check is part of each value,
-- so the optimizer cannot fold it away)
parsed AS (
    SELECT CASE WHEN ok THEN ts END AS ts, CASE WHEN ok THEN step_m END AS step_m,
           CASE WHEN ok THEN mark END AS mark
    FROM (SELECT *,
                 raise_unless(ts IS NOT NULL OR step_m IS NOT NULL OR mark IS NOT NULL,
                              concat('mem_state_at: `', $at, '` is not a time in ns, ''step N [start|end]'' or ''mark NAME''')) AS ok
          FROM forms) f
),
-- the moment per (source, pid, device)
moments AS (
    SELECT s.source, s.pid, s.device,
           CASE WHEN p.step_m[3] = 'end' THEN s.end_ts ELSE s.start_ts END AS at_ts
    FROM steps s CROSS JOIN parsed p
    WHERE p.step_m IS NOT NULL AND s.step = CAST(p.step_m[1] AS BIGINT)
    UNION ALL
    SELECT e.source, e.pid, e.device, MIN(e.ts) AS at_ts
    FROM events e CROSS JOIN parsed p
    WHERE p.mark IS NOT NULL AND e.event = 'MSTX' AND e.event_type IN ('Mark', 'Range_start')
      AND lower(trim(e.name)) = lower(p.mark)
    GROUP BY e.source, e.pid, e.device
),
-- A time is the same moment for every series: `try_cast(trim($at) AS BIGINT)` (NULL for the
-- other forms) is a constant once the parameter is bound, and `live` and `counters` compare the
-- blocks and rows with it directly, not through a join with `moments`, so the Parquet statistics
-- skip the row groups that hold none of them and the rows are not joined one by one.
live AS (
    SELECT b.source, b.pid, b.device, b.at_ts, b.pool, b.ptr, b.alloc_ts, COALESCE(b.size, 0) AS size,
           COALESCE(NULLIF(b.owner, ''), CASE WHEN b.stock THEN '(stock)' ELSE b.pool END) AS owner,
           b.stack_py
    FROM (
        SELECT source, pid, device, try_cast(trim($at) AS BIGINT) AS at_ts, pool, ptr, alloc_ts,
               size, owner, stock, stack_py
        FROM blocks
        WHERE try_cast(trim($at) AS BIGINT) IS NOT NULL
          AND alloc_ts <= try_cast(trim($at) AS BIGINT)
          AND (end_ts IS NULL OR end_ts > try_cast(trim($at) AS BIGINT))
        UNION ALL
        SELECT b.source, b.pid, b.device, m.at_ts, b.pool, b.ptr, b.alloc_ts, b.size, b.owner,
               b.stock, b.stack_py
        -- the few moments first: the side a join holds in memory (the blocks stream past it)
        FROM moments m
        JOIN blocks b ON m.source = b.source AND (m.pid IS NOT DISTINCT FROM b.pid) AND m.device = b.device
        WHERE try_cast(trim($at) AS BIGINT) IS NULL
          AND m.at_ts IS NOT NULL AND b.alloc_ts <= m.at_ts AND (b.end_ts IS NULL OR b.end_ts > m.at_ts)
    ) b
    WHERE ($pool IS NULL OR b.pool = $pool)
      -- a dump whose MALLOC and FREE rows cannot be paired (view pairing) has no live blocks
      AND b.source IN (SELECT source FROM pairing WHERE can_pair)
),
counters AS (
    SELECT c.source, c.pid, c.device, try_cast(trim($at) AS BIGINT) AS at_ts, c.pool,
           last_value(c.used ORDER BY c.ts, c.row_idx) FILTER (WHERE c.used IS NOT NULL) AS used,
           last_value(c.total ORDER BY c.ts, c.row_idx) FILTER (WHERE c.total IS NOT NULL) AS total,
           last_value(c.live_bytes ORDER BY c.ts, c.row_idx) AS live_bytes
    FROM curve c
    WHERE try_cast(trim($at) AS BIGINT) IS NOT NULL AND c.ts <= try_cast(trim($at) AS BIGINT)
      AND ($pool IS NULL OR c.pool = $pool)
    GROUP BY c.source, c.pid, c.device, c.pool
    UNION ALL
    SELECT c.source, c.pid, c.device, m.at_ts, c.pool,
           last_value(c.used ORDER BY c.ts, c.row_idx) FILTER (WHERE c.used IS NOT NULL) AS used,
           last_value(c.total ORDER BY c.ts, c.row_idx) FILTER (WHERE c.total IS NOT NULL) AS total,
           last_value(c.live_bytes ORDER BY c.ts, c.row_idx) AS live_bytes
    FROM moments m
    JOIN curve c ON m.source = c.source AND (m.pid IS NOT DISTINCT FROM c.pid) AND m.device = c.device
    WHERE try_cast(trim($at) AS BIGINT) IS NULL
      AND m.at_ts IS NOT NULL AND c.ts <= m.at_ts AND ($pool IS NULL OR c.pool = $pool)
    GROUP BY c.source, c.pid, c.device, m.at_ts, c.pool
),
owners AS (
    SELECT source, pid, device, at_ts, pool, owner, SUM(size) AS bytes, COUNT(*) AS blocks
    FROM live
    GROUP BY source, pid, device, at_ts, pool, owner
),
pool_blocks AS (
    SELECT source, pid, device, at_ts, pool, COUNT(*) AS blocks FROM live GROUP BY source, pid, device, at_ts, pool
)
SELECT c.source, c.pid, c.device, c.at_ts, c.pool, 'pool' AS kind,
       CAST(NULL AS VARCHAR) AS owner, CAST(NULL AS VARCHAR) AS owner_group,
       CASE WHEN g.can_pair THEN c.live_bytes END AS bytes, COALESCE(pb.blocks, 0) AS blocks,
       CASE WHEN c.pool = 'HAL' THEN NULL ELSE c.used END AS used, CASE WHEN c.pool = 'HAL' THEN NULL ELSE c.total END AS total,
       CAST(NULL AS BIGINT UNSIGNED) AS ptr, CAST(NULL AS BIGINT) AS alloc_ts,
       CAST(NULL AS VARCHAR) AS category, CAST(NULL AS VARCHAR) AS user_frame
FROM counters c
LEFT JOIN pool_blocks pb ON pb.source = c.source AND (pb.pid IS NOT DISTINCT FROM c.pid) AND pb.device = c.device AND pb.pool = c.pool
LEFT JOIN pairing g ON g.source = c.source
UNION ALL
SELECT source, pid, device, at_ts, pool, 'owner', owner, owner_group(owner), bytes, blocks,
       NULL, NULL, NULL, NULL, NULL, NULL
FROM owners
UNION ALL
SELECT source, pid, device, at_ts, pool, 'block', owner, owner_group(owner), size, NULL,
       NULL, NULL, ptr, alloc_ts, categorize(owner, user_frame(stack_py)), user_frame(stack_py)
FROM live
ORDER BY source, pid, device, pool, kind, bytes DESC
