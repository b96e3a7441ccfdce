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
-- Rows come in no particular order: ORDER BY source, pid, device, pool, start_ts.
-- @column source         VARCHAR input file
-- @column pid            BIGINT  process id
-- @column device         VARCHAR Device Id as written
-- @column step           BIGINT  step number (see view steps)
-- @column origin         VARCHAR SYSTEM_STEP, MSTX_RANGE or MSTX_MARK
-- @column start_ts       BIGINT  ns: step start, ns
-- @column end_ts         BIGINT  ns: step end, ns; NULL for an open step
-- @column pool           VARCHAR pool (Event Type); HAL values are paired live bytes
-- @column points         BIGINT  count: counter values written inside the step
-- @column start_used     BIGINT  bytes: live when the step starts (last value before start_ts); NULL when the pool had no value yet
-- @column peak_used      BIGINT  bytes: highest level during the step
-- @column peak_ts        BIGINT  ns: time the peak was reached, ns (start_ts when the level at the start is the peak)
-- @column end_used       BIGINT  bytes: live at end_ts (last value at or before it); NULL for an open step
-- @column growth         BIGINT  bytes: end_used - start_used (growth within the step); NULL for an open step
-- @column growth_vs_prev BIGINT  bytes: end_used - end_used of the previous complete step of the same pool; NULL for the first one
WITH
-- steps numbered k = 1, 2, ... in time order per (source, pid, device)
step_list AS (
    SELECT source, pid, device, step, origin, start_ts, end_ts,
           ROW_NUMBER() OVER (PARTITION BY source, pid, device ORDER BY start_ts, start_row) AS k
    FROM steps
),
-- the pools with memory rows on each (source, pid, device)
pools AS (
    SELECT DISTINCT source, pid, device, pool
    FROM curve
),
-- one stream per pool series: its values plus a start and an end marker per step (the
-- markers carry the step's description). At equal times a start marker sorts before the
-- values and an end marker after them, so values written at a boundary belong to the step.
stream AS (
    SELECT source, pid, device, pool, ts, 1 AS ord, row_idx, used,
           CAST(NULL AS BIGINT) AS start_k, CAST(NULL AS BIGINT) AS end_k,
           CAST(NULL AS BIGINT) AS step, CAST(NULL AS VARCHAR) AS origin,
           CAST(NULL AS BIGINT) AS start_ts, CAST(NULL AS BIGINT) AS end_ts
    FROM usage_series
    WHERE ts IS NOT NULL AND used IS NOT NULL
    UNION ALL
    SELECT s.source, s.pid, s.device, p.pool,
           CASE WHEN m.ord = 0 THEN s.start_ts ELSE s.end_ts END AS ts,
           m.ord, CAST(NULL AS BIGINT) AS row_idx, CAST(NULL AS BIGINT) AS used,
           CASE WHEN m.ord = 0 THEN s.k END AS start_k,
           CASE WHEN m.ord = 2 THEN s.k END AS end_k,
           s.step, s.origin, s.start_ts, s.end_ts
    FROM step_list s
    JOIN pools p ON p.source = s.source AND (p.pid IS NOT DISTINCT FROM s.pid) AND p.device = s.device
    CROSS JOIN (VALUES (0), (2)) AS m(ord)
    WHERE m.ord = 0 OR s.end_ts IS NOT NULL
),
-- for every row: the step last started and the step last ended (k grows with time, so
-- running maxima find the latest); interval k = from the start of step k to the start of k+1
walked AS (
    SELECT *,
           COALESCE(MAX(start_k) OVER w, 0) AS k,
           MAX(end_k) OVER w AS ended_k
    FROM stream
    WINDOW w AS (PARTITION BY source, pid, device, pool ORDER BY ts, ord, row_idx
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- per pool and interval: the step, the values inside the step, the last value of the interval
intervals AS (
    SELECT source, pid, device, pool, k,
           MAX(step) AS step, MAX(origin) AS origin, MAX(start_ts) AS start_ts, MAX(end_ts) AS end_ts,
           COUNT(*) FILTER (WHERE inside) AS points,
           MAX(used) FILTER (WHERE inside) AS max_used,
           first_value(ts ORDER BY used DESC NULLS LAST, ts, row_idx) FILTER (WHERE inside) AS max_ts,
           last_value(used ORDER BY ts, row_idx) FILTER (WHERE inside) AS last_inside,
           last_value(used ORDER BY ts, row_idx) FILTER (WHERE ord = 1) AS last_value
    FROM (
        SELECT *, ord = 1 AND k > 0 AND (ended_k IS NULL OR ended_k < k) AS inside
        FROM walked
    ) v
    GROUP BY source, pid, device, pool, k
),
-- the level when each step starts: the last value of the intervals before it (small table)
with_start AS (
    SELECT *,
           last_value(last_value) IGNORE NULLS
               OVER (PARTITION BY source, pid, device, pool ORDER BY k
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS start_used
    FROM intervals
),
per_step AS (
    SELECT source, pid, device, step, origin, start_ts, end_ts, k, pool, points, start_used,
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
SELECT source, pid, device, step, origin, start_ts, end_ts, pool, points,
       start_used, peak_used, peak_ts, end_used,
       end_used - start_used AS growth,
       end_used - LAG(end_used) OVER (PARTITION BY source, pid, device, pool
                                      ORDER BY CASE WHEN end_used IS NULL THEN 1 ELSE 0 END, k) AS growth_vs_prev
FROM per_step
WHERE peak_used IS NOT NULL
