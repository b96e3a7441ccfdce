-- wasted_memory: inefficient memory — allocated long before first use, held long after last use, or idle between uses — ranked by what it adds to the peak.
--
-- msMemScope's inefficient-memory analysis, from the dump's own ACCESS rows (collected with
-- `--events=...,access`): each block's accesses are the ACCESS rows with its process and
-- allocation_id. Three kinds of wasted interval per block (the block is live but unused):
--   early_allocation    from the MALLOC to the first access;
--   late_deallocation   from the last access to the block's end (blocks.end_ts; a block held to
--                       the end of the data is wasted to the data's last row);
--   temporary_idleness  the longest gap between two consecutive accesses.
-- An interval is listed when the peak of the block's series falls strictly inside it (the first row
-- with the highest paired live bytes): freeing at last use (or allocating at first use) would
-- take `size` off that peak — peak_saving. Intervals away from the peak cost nothing at the peak
-- and are not listed (a dump with accesses has one or more per block). Blocks without any ACCESS row cannot be judged this way; where the tool wrote its
-- own verdict (Attr `inefficient_type`, table events.inefficient) each kind it names is listed
-- with origin 'tool' and no interval.
--
-- Rows come in no particular order: ORDER BY peak_saving DESC NULLS LAST, wasted_ns DESC.
-- @column source       VARCHAR input file
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id as written
-- @column pool         VARCHAR pool = Event Type
-- @column ptr          UBIGINT pointer: block address
-- @column size         BIGINT  bytes: block size
-- @column owner        VARCHAR owner of the MALLOC; NULL when it had none
-- @column user_frame   VARCHAR innermost user frame of the MALLOC's Python stack
-- @column kind         VARCHAR early_allocation, late_deallocation or temporary_idleness
-- @column origin       VARCHAR access (measured from ACCESS rows) or tool (the dump's inefficient_type verdict)
-- @column alloc_ts     BIGINT  ns: MALLOC time, ns
-- @column first_use_ts BIGINT  ns: first ACCESS, ns; NULL for origin tool
-- @column last_use_ts  BIGINT  ns: last ACCESS, ns; NULL for origin tool
-- @column end_ts       BIGINT  ns: end of the block, ns; NULL when held to the end of the data
-- @column wasted_from  BIGINT  ns: start of the wasted interval, ns
-- @column wasted_to    BIGINT  ns: end of the wasted interval, ns
-- @column wasted_ns    BIGINT  duration_ns: wasted_to - wasted_from
-- @column peak_ts      BIGINT  ns: the series' peak, ns
-- @column peak_saving  BIGINT  bytes: taken off the series' peak by not holding the block in this interval (size when the interval covers the peak, else 0); NULL for origin tool
WITH
accesses AS (
    SELECT source, pid, allocation_id, ts,
           CASE WHEN LAG(allocation_id) OVER w = allocation_id THEN LAG(ts) OVER w END AS prev_ts
    FROM events
    WHERE event = 'ACCESS' AND allocation_id IS NOT NULL AND ts IS NOT NULL
    WINDOW w AS (PARTITION BY source, pid ORDER BY allocation_id, ts, row_idx)
),
use_spans AS (
    SELECT source, pid, allocation_id, MIN(ts) AS first_use, MAX(ts) AS last_use,
           first_value(prev_ts ORDER BY ts - prev_ts DESC NULLS LAST) AS gap_from,
           first_value(ts ORDER BY ts - prev_ts DESC NULLS LAST) AS gap_to
    FROM accesses
    GROUP BY source, pid, allocation_id
),
data_end AS (
    SELECT source, MAX(last_ts) AS last_ts FROM event_counts GROUP BY source
),
peaks AS (
    SELECT source, pid, device, pool,
           first_value(ts ORDER BY live_bytes DESC, ts, row_idx) AS peak_ts
    FROM curve WHERE ts IS NOT NULL
    GROUP BY source, pid, device, pool
),
measured AS (
    SELECT b.source, b.pid, b.device, b.pool, COALESCE(b.size, 0) AS size, b.alloc_row,
           b.alloc_ts, u.first_use, u.last_use, b.end_ts, COALESCE(b.end_ts, d.last_ts) AS until_ts,
           u.gap_from, u.gap_to, p.peak_ts
    FROM blocks b
    JOIN use_spans u ON u.source = b.source AND (u.pid IS NOT DISTINCT FROM b.pid) AND u.allocation_id = b.allocation_id
    JOIN data_end d ON d.source = b.source
    LEFT JOIN peaks p ON p.source = b.source AND (p.pid IS NOT DISTINCT FROM b.pid) AND p.device = b.device AND p.pool = b.pool
    WHERE b.alloc_ts IS NOT NULL
),
-- the three intervals of each block (measured read once: a CTE named three times is computed
-- three times)
intervals AS (
    SELECT *, w['kind'] AS kind, w['w_from'] AS w_from, w['w_to'] AS w_to
    FROM (
        SELECT *,
               unnest(make_array(
                   named_struct('kind', 'early_allocation', 'w_from', alloc_ts, 'w_to', first_use),
                   named_struct('kind', 'late_deallocation', 'w_from', last_use, 'w_to', until_ts),
                   named_struct('kind', 'temporary_idleness', 'w_from', gap_from, 'w_to', gap_to))) AS w
        FROM measured
    ) m
    WHERE w['kind'] <> 'temporary_idleness' OR gap_from IS NOT NULL
),
judged AS (
    SELECT *, w_to - w_from AS wasted_ns,
           peak_ts IS NOT NULL AND peak_ts > w_from AND peak_ts < w_to AS covers_peak
    FROM intervals
)
-- the call stack is read only for the intervals listed
SELECT j.source, j.pid, j.device, j.pool, b.ptr, j.size, b.owner, user_frame(b.stack_py) AS user_frame, j.kind, 'access' AS origin,
       j.alloc_ts, j.first_use AS first_use_ts, j.last_use AS last_use_ts, j.end_ts,
       j.w_from AS wasted_from, j.w_to AS wasted_to, j.wasted_ns, j.peak_ts,
       CASE WHEN j.covers_peak THEN j.size ELSE 0 END AS peak_saving
FROM judged j
JOIN blocks b ON b.source = j.source AND b.alloc_row = j.alloc_row
WHERE j.wasted_ns > 0 AND j.covers_peak
UNION ALL
SELECT source, pid, device, pool, ptr, size, owner, user_frame(stack_py), trim(kind), 'tool',
       ts, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM (
    SELECT source, pid, device, event_type AS pool, ptr, size, owner, stack_py, ts,
           unnest(string_to_array(inefficient, ',')) AS kind
    FROM events
    WHERE event = 'MALLOC' AND inefficient IS NOT NULL
) t
WHERE trim(kind) <> ''
