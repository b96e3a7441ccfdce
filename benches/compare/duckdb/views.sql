-- Views a DuckDB user defines once, in the same .duckdb file, so that each question below is
-- one SELECT. Views are stored queries: nothing here is computed at ingest. They follow the
-- rules memq documents for its own SQL (crates/memscope/sql/*.sql, docs/reference-differences.md),
-- written the way one would in DuckDB: blocks are paired with LAG/LEAD over (pid, device,
-- pool, ptr), the start/stop marker after a shadow FREE is found with an ASOF join.

-- MALLOC/FREE rows.
CREATE VIEW mem AS
SELECT row_idx, id, event, event_type AS pool, ts, pid, device, ptr,
       size, used, total, owner, shadow, stack_py
FROM events
WHERE event IN ('MALLOC', 'FREE') AND ptr IS NOT NULL AND ptr <> 'N/A';

-- One row per block (memq's table `blocks`): a MALLOC with the row that ends it, the next row
-- on the same (pid, device, pool, ptr): a FREE (real or shadow), a MALLOC (address reused
-- without FREE: 'replaced') or nothing ('none'). A FREE whose previous row on the key is not a
-- MALLOC is a block without MALLOC (allocated before collection): alloc_ts NULL.
CREATE VIEW blocks AS
WITH keyed AS (
    SELECT m.*,
           LAG(event) OVER w AS prev_event,
           LEAD(event) OVER w AS next_event,
           LEAD(shadow) OVER w AS next_shadow,
           LEAD(ts) OVER w AS next_ts,
           LEAD(row_idx) OVER w AS next_row,
           LEAD(event, 2) OVER w AS next2_event
    FROM mem m
    WINDOW w AS (PARTITION BY pid, device, pool, ptr ORDER BY ts, row_idx)
)
SELECT pid, device, pool, ptr, COALESCE(size, 0) AS size, owner, shadow AS stock, stack_py,
       ts AS alloc_ts, row_idx AS alloc_row,
       CASE next_event WHEN 'FREE' THEN CASE WHEN next_shadow THEN 'shadow' ELSE 'real' END
                       WHEN 'MALLOC' THEN 'replaced'
                       ELSE 'none' END AS free_kind,
       next_ts AS free_ts,
       CASE WHEN next_event = 'FREE' THEN next_row END AS free_row,
       next_row AS ending_row,
       COALESCE(next_event = 'FREE' AND next2_event = 'MALLOC', false) AS reused_after_free
FROM keyed
WHERE event = 'MALLOC'
UNION ALL
SELECT pid, device, pool, ptr, abs(COALESCE(size, 0)), NULL, false, NULL,
       NULL, NULL,
       CASE WHEN shadow THEN 'shadow' ELSE 'real' END,
       ts, row_idx, row_idx, false
FROM keyed
WHERE event = 'FREE' AND prev_event IS DISTINCT FROM 'MALLOC';

CREATE VIEW markers AS
SELECT pid, ts, event_type AS marker
FROM events
WHERE event = 'SYSTEM' AND event_type IN ('START_TRACE', 'STOP_TRACE') AND ts IS NOT NULL;

-- How each block ended (memq's view block_fates, docs/formats/memscope.md §5.5): a shadow FREE
-- followed (at or after its time) by a START_TRACE is a release during a stop period; one
-- followed on its key by a new MALLOC is a residual fill-in (released too); any other shadow
-- FREE is a fill-in at exit, and the block counts as still held, like a block with no FREE.
-- (memq separates exit_while_stopped from exit_fill_in; both are held, so they are one fate here.)
CREATE VIEW block_fates AS
WITH placed AS (
    SELECT b.*, m.marker AS marker_after
    FROM blocks b
    ASOF LEFT JOIN markers m ON m.pid = b.pid AND m.ts >= b.free_ts
),
fated AS (
    SELECT * EXCLUDE (marker_after),
           CASE free_kind
               WHEN 'real' THEN 'released'
               WHEN 'replaced' THEN 'replaced'
               WHEN 'none' THEN 'never_freed'
               ELSE CASE WHEN marker_after = 'START_TRACE' THEN 'stop_period_free'
                         WHEN reused_after_free THEN 'residual_fill_in'
                         ELSE 'exit_fill_in' END
           END AS fate
    FROM placed
)
SELECT *,
       fate IN ('exit_fill_in', 'never_freed') AS held_at_end,
       CASE WHEN fate IN ('exit_fill_in', 'never_freed') THEN NULL ELSE free_ts END AS end_ts,
       CASE WHEN fate IN ('exit_fill_in', 'never_freed') THEN NULL ELSE ending_row END AS end_row
FROM fated;

-- Pool levels over time (memq's usage_series): framework pools from their own used/total
-- counters, HAL from the live bytes of paired blocks (+size at the MALLOC, -size where the
-- block really ends).
CREATE VIEW usage_series AS
SELECT pid, device, pool, ts, row_idx, used, total
FROM mem
WHERE pool <> 'HAL' AND (used IS NOT NULL OR total IS NOT NULL)
UNION ALL
SELECT pid, device, 'HAL' AS pool, ts, row_idx, live AS used, live AS total
FROM (
    SELECT pid, device, ts, row_idx,
           SUM(delta) OVER (PARTITION BY pid, device ORDER BY ts, row_idx NULLS FIRST
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live
    FROM (
        -- each block twice: +size at its MALLOC, -size at its end (one scan of block_fates)
        SELECT pid, device,
               CASE WHEN d.sign = 1 THEN alloc_ts ELSE end_ts END AS ts,
               CASE WHEN d.sign = 1 THEN alloc_row ELSE free_row END AS row_idx,
               d.sign * size AS delta
        FROM block_fates, (VALUES (1), (-1)) d(sign)
        WHERE pool = 'HAL' AND alloc_ts IS NOT NULL AND (d.sign = 1 OR end_ts IS NOT NULL)
    ) d
) h;

-- Steps (memq's view steps), from SYSTEM STEP rows: a step runs from its STEP row to the first
-- MSTX Range_end after it (before the next STEP), else to the next STEP; the last one may be
-- open. memq falls back to MSTX "step start" ranges and step marks when a process has no STEP
-- rows; generated dumps always have STEP rows, so that fallback is not replicated.
CREATE VIEW steps AS
WITH marks AS (
    SELECT pid, device, ts, row_idx, name,
           CASE WHEN event = 'SYSTEM' THEN 'STEP' ELSE 'END' END AS kind
    FROM events
    WHERE ts IS NOT NULL
      AND ((event = 'SYSTEM' AND event_type = 'STEP') OR (event = 'MSTX' AND event_type = 'Range_end'))
),
numbered AS (
    SELECT *,
           SUM(CASE WHEN kind = 'STEP' THEN 1 ELSE 0 END)
               OVER (PARTITION BY pid, device ORDER BY ts, row_idx
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS ordinal
    FROM marks
),
ends AS (
    SELECT *, MIN(CASE WHEN kind = 'END' THEN ts END) OVER (PARTITION BY pid, device, ordinal) AS range_end_ts
    FROM numbered
)
SELECT pid, device, ordinal AS k,
       COALESCE(TRY_CAST(trim(name) AS BIGINT), ordinal) AS step,
       ts AS start_ts, row_idx AS start_row,
       COALESCE(range_end_ts, LEAD(ts) OVER (PARTITION BY pid, device ORDER BY ordinal)) AS end_ts
FROM ends
WHERE kind = 'STEP';

-- step_peaks (used by step_peaks.sql and oom_findings.sql): per step (view steps) and pool of the same (pid, device): the level when the step
-- starts (last value before it), the highest level during the step (the start level counts),
-- the level at its end and the growth (memq view step_peaks). Pool values are usage_series
-- (framework pools: their `used` counter; HAL: paired live bytes).
CREATE VIEW step_peaks AS
WITH vals AS (
    SELECT pid, device, pool, ts, row_idx, used
    FROM usage_series
    WHERE ts IS NOT NULL AND used IS NOT NULL
),
-- each value in the step last started at or before it (k = 0 before the first step)
placed AS (
    SELECT v.*, COALESCE(s.k, 0) AS k,
           s.k IS NOT NULL AND (s.end_ts IS NULL OR v.ts <= s.end_ts) AS inside
    FROM vals v
    ASOF LEFT JOIN steps s ON s.pid IS NOT DISTINCT FROM v.pid AND s.device = v.device AND s.start_ts <= v.ts
),
intervals AS (
    SELECT pid, device, pool, k,
           COUNT(*) FILTER (WHERE inside) AS points,
           MAX(used) FILTER (WHERE inside) AS max_used,
           first(ts ORDER BY used DESC, ts, row_idx) FILTER (WHERE inside) AS max_ts,
           last(used ORDER BY ts, row_idx) FILTER (WHERE inside) AS last_inside,
           last(used ORDER BY ts, row_idx) AS last_value
    FROM placed
    GROUP BY ALL
),
pools AS (SELECT DISTINCT pid, device, pool FROM mem),
grid AS (
    SELECT s.pid, s.device, p.pool, s.k, s.step, s.start_ts, s.end_ts
    FROM steps s JOIN pools p ON p.pid IS NOT DISTINCT FROM s.pid AND p.device = s.device
    UNION ALL
    SELECT DISTINCT pid, device, pool, 0, NULL, NULL, NULL FROM intervals WHERE k = 0
),
with_start AS (
    SELECT g.*, i.points, i.max_used, i.max_ts, i.last_inside,
           last_value(i.last_value IGNORE NULLS) OVER (
               PARTITION BY g.pid, g.device, g.pool ORDER BY g.k
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS start_used
    FROM grid g
    LEFT JOIN intervals i ON i.pid IS NOT DISTINCT FROM g.pid AND i.device = g.device AND i.pool = g.pool AND i.k = g.k
),
per_step AS (
    SELECT pid, device, pool, k, step, start_ts, end_ts, COALESCE(points, 0) AS points, start_used,
           CASE WHEN max_used IS NULL THEN start_used
                WHEN start_used IS NULL OR max_used >= start_used THEN max_used
                ELSE start_used END AS peak_used,
           CASE WHEN max_used IS NULL THEN start_ts
                WHEN start_used IS NULL OR max_used >= start_used THEN max_ts
                ELSE start_ts END AS peak_ts,
           CASE WHEN end_ts IS NOT NULL THEN COALESCE(last_inside, start_used) END AS end_used
    FROM with_start
    WHERE k > 0
)
SELECT pid, device, step, start_ts, end_ts, pool, points, start_used, peak_used, peak_ts, end_used,
       end_used - start_used AS growth,
       end_used - LAG(end_used) OVER (PARTITION BY pid, device, pool
                                      ORDER BY CASE WHEN end_used IS NULL THEN 1 ELSE 0 END, k) AS growth_vs_prev
FROM per_step
WHERE peak_used IS NOT NULL;
