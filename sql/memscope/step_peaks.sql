-- step_peaks: the peak of every pool in every step, with the level at the start and the end of the step and how much it grew.
--
-- Steps come from the view steps; pool values from the view usage_series (framework pools:
-- the `used` counter written on their rows; HAL: live bytes from MALLOC/FREE pairing), for
-- the pools of the same (source, pid, device) as the step. A step covers [start_ts, end_ts]
-- (an open step runs to the end of the data). The level in effect when the step starts counts
-- towards its peak: peak_used = max(start_used, every value written inside the step).
-- Algorithm A of the leak guide reads end_used step after step (ignore the first step):
-- a level that never returns to the previous step's end is growth.
--
-- @column source             input file
-- @column pid                process id
-- @column device             Device Id as written
-- @column step               step number (see view steps)
-- @column origin             SYSTEM_STEP, MSTX_RANGE or MSTX_MARK
-- @column start_ts           step start, ns
-- @column end_ts             step end, ns; NULL for an open step
-- @column pool               pool (Event Type); HAL values are paired live bytes
-- @column points             count: counter values written inside the step
-- @column start_used         bytes live when the step starts (last value before start_ts); NULL when the pool had no value yet
-- @column peak_used          bytes: highest level during the step
-- @column peak_ts            time the peak was reached, ns (start_ts when the level at the start is the peak)
-- @column end_used           bytes live at end_ts (last value at or before it); NULL for an open step
-- @column growth             bytes: end_used - start_used (growth within the step); NULL for an open step
-- @column growth_vs_prev     bytes: end_used - end_used of the previous complete step of the same pool; NULL for the first one
WITH
step_list AS (
    SELECT source, pid, device, step, origin, start_ts, end_ts,
           ROW_NUMBER() OVER (PARTITION BY source, pid, device ORDER BY start_ts, start_row) AS k
    FROM steps
),
-- pools that have values on each (source, pid, device)
pools AS (
    SELECT DISTINCT source, pid, device, pool FROM usage_series
),
-- one stream per pool series: its values plus a start and an end marker per step.
-- At equal times a start marker sorts before the values and an end marker after them,
-- so values written exactly at a boundary belong to the step.
stream AS (
    SELECT source, pid, device, pool, ts, 1 AS ord, row_idx, used,
           CAST(NULL AS BIGINT) AS start_k, CAST(NULL AS BIGINT) AS end_k
    FROM usage_series
    WHERE ts IS NOT NULL AND used IS NOT NULL
    UNION ALL
    SELECT s.source, s.pid, s.device, p.pool, s.start_ts AS ts, 0 AS ord, CAST(NULL AS BIGINT) AS row_idx,
           CAST(NULL AS BIGINT) AS used, s.k AS start_k, CAST(NULL AS BIGINT) AS end_k
    FROM step_list s
    JOIN pools p ON p.source = s.source AND (p.pid IS NOT DISTINCT FROM s.pid) AND p.device = s.device
    UNION ALL
    SELECT s.source, s.pid, s.device, p.pool, s.end_ts AS ts, 2 AS ord, CAST(NULL AS BIGINT) AS row_idx,
           CAST(NULL AS BIGINT) AS used, CAST(NULL AS BIGINT) AS start_k, s.k AS end_k
    FROM step_list s
    JOIN pools p ON p.source = s.source AND (p.pid IS NOT DISTINCT FROM s.pid) AND p.device = s.device
    WHERE s.end_ts IS NOT NULL
),
-- for every row: the value in effect (carried forward), the step last started and the step last ended
walked AS (
    SELECT *,
           last_value(used) IGNORE NULLS OVER w AS level,
           last_value(start_k) IGNORE NULLS OVER w AS cur_k,
           last_value(end_k) IGNORE NULLS OVER w AS ended_k
    FROM stream
    WINDOW w AS (PARTITION BY source, pid, device, pool ORDER BY ts, ord, row_idx
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- the level when each step starts and ends
at_markers AS (
    SELECT source, pid, device, pool,
           COALESCE(start_k, end_k) AS k,
           MAX(CASE WHEN ord = 0 THEN level END) AS start_used,
           MAX(CASE WHEN ord = 2 THEN level END) AS end_used
    FROM walked
    WHERE ord <> 1
    GROUP BY source, pid, device, pool, COALESCE(start_k, end_k)
),
-- values written inside a step
inside AS (
    SELECT source, pid, device, pool, cur_k AS k,
           COUNT(*) AS points,
           MAX(used) AS max_used,
           first_value(ts ORDER BY used DESC, ts, row_idx) AS max_ts
    FROM walked
    WHERE ord = 1 AND cur_k IS NOT NULL AND (ended_k IS NULL OR ended_k < cur_k)
    GROUP BY source, pid, device, pool, cur_k
),
per_step AS (
    SELECT s.source, s.pid, s.device, s.step, s.origin, s.start_ts, s.end_ts, s.k, m.pool,
           COALESCE(i.points, 0) AS points,
           m.start_used,
           CASE WHEN i.max_used IS NULL THEN m.start_used
                WHEN m.start_used IS NULL OR i.max_used >= m.start_used THEN i.max_used
                ELSE m.start_used END AS peak_used,
           CASE WHEN i.max_used IS NULL THEN s.start_ts
                WHEN m.start_used IS NULL OR i.max_used >= m.start_used THEN i.max_ts
                ELSE s.start_ts END AS peak_ts,
           m.end_used
    FROM step_list s
    JOIN at_markers m
      ON m.source = s.source AND (m.pid IS NOT DISTINCT FROM s.pid) AND m.device = s.device AND m.k = s.k
    LEFT JOIN inside i
      ON i.source = s.source AND (i.pid IS NOT DISTINCT FROM s.pid) AND i.device = s.device
     AND i.pool = m.pool AND i.k = s.k
)
SELECT source, pid, device, step, origin, start_ts, end_ts, pool, points,
       start_used, peak_used, peak_ts, end_used,
       end_used - start_used AS growth,
       end_used - LAG(end_used) OVER (PARTITION BY source, pid, device, pool
                                      ORDER BY CASE WHEN end_used IS NULL THEN 1 ELSE 0 END, k) AS growth_vs_prev
FROM per_step
WHERE peak_used IS NOT NULL
ORDER BY source, pid, device, pool, start_ts
