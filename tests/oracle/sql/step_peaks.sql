-- step_peaks: the peak of every pool in every step, with the level at the start and the end of the step and how much it grew.
--
-- Steps come from the table steps; pool values from the view usage_series (framework pools:
-- the `used` counter written on their rows; HAL: live bytes from MALLOC/FREE pairing), for
-- the pools of the same (source, pid, device) as the step. A step covers [start_ts, end_ts]
-- (an open step runs to the end of the data). The level in effect when the step starts counts
-- towards its peak: peak_used = max(start_used, every value written inside the step).
-- Each row's place among the steps is stored at ingest (curve.step_k: the latest step started
-- at or before the row; curve.step: set when the row is inside it), so this is one grouping of
-- the rows by (series, step_k) and a walk over the small steps × pools table.
-- Algorithm A of the leak guide reads end_used step after step (ignore the first step):
-- a level that never returns to the previous step's end is growth.
--
-- Rows come in no particular order: ORDER BY source, pid, device, pool, start_ts.
-- @column source         VARCHAR input file
-- @column pid            BIGINT  process id
-- @column device         VARCHAR Device Id as written
-- @column step           BIGINT  step number (table steps)
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
-- steps with their position k = 1, 2, ... in time order (steps.step_k, as curve.step_k counts)
step_list AS (
    SELECT source, pid, device, step, origin, start_ts, end_ts, CAST(step_k AS BIGINT) AS k
    FROM steps
),
-- per pool series and interval k (from the start of step k to the start of step k+1; 0 before
-- the first): the values inside step k, the last value of the interval. Folded at ingest (table
-- step_usage, crates/memscope/src/tiles.rs) from the points of usage_series with a used value
-- and a step_k: points = how many are inside step k (curve.step set), max_used and max_ts = the
-- largest of them and the first time it is reached, last_inside = the last of them,
-- last_value = the last point of the interval. (tests/oracle/sql/step_peaks.sql computes the
-- same from usage_series; the tests check both agree.)
intervals AS (
    SELECT source, pid, device, pool, step_k AS k, points, max_used, max_ts, last_inside, last_value
    FROM step_usage
),
-- the pools with such points on each (source, pid, device): a pool without any has no level
-- to report
pools AS (
    SELECT DISTINCT source, pid, device, pool
    FROM intervals
),
-- every step of every pool of its device (k >= 1), and the interval before the first step
grid AS (
    SELECT s.source, s.pid, s.device, p.pool, s.k, s.step, s.origin, s.start_ts, s.end_ts,
           COALESCE(i.points, 0) AS points, i.max_used, i.max_ts, i.last_inside, i.last_value
    FROM step_list s
    JOIN pools p ON p.source = s.source AND (p.pid IS NOT DISTINCT FROM s.pid) AND p.device = s.device
    LEFT JOIN intervals i ON i.source = s.source AND (i.pid IS NOT DISTINCT FROM s.pid)
                         AND i.device = s.device AND i.pool = p.pool AND i.k = s.k
    UNION ALL
    SELECT source, pid, device, pool, 0 AS k, CAST(NULL AS BIGINT) AS step, CAST(NULL AS VARCHAR) AS origin,
           CAST(NULL AS BIGINT) AS start_ts, CAST(NULL AS BIGINT) AS end_ts, 0 AS points,
           CAST(NULL AS BIGINT) AS max_used, CAST(NULL AS BIGINT) AS max_ts,
           CAST(NULL AS BIGINT) AS last_inside, last_value
    FROM intervals
    WHERE k = 0
),
-- the level when each step starts: the last value of the intervals before it (small table):
-- the largest of the earlier intervals' values keyed by their k (not last_value IGNORE NULLS,
-- whose IGNORE NULLS a cluster loses with the plan's serialisation)
keyed_start AS (
    SELECT *,
           MAX(CASE WHEN last_value IS NOT NULL
                    THEN lpad(CAST(k AS VARCHAR), 20, '0') || ':' || CAST(last_value AS VARCHAR) END)
               OVER (PARTITION BY source, pid, device, pool ORDER BY k
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS start_key
    FROM grid
),
with_start AS (
    SELECT *, CAST(split_part(start_key, ':', 2) AS BIGINT) AS start_used
    FROM keyed_start
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
