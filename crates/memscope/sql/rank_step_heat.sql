-- rank_step_heat: the rank × step table of a job — the peak of every pool of every rank in every step, against the median of all ranks in that step.
--
-- The cross-rank form of step_peaks: each row of step_peaks (one series = source, pid,
-- device, pool) takes the rank of its source (table sources: the rank written in its path,
-- else processes numbered by node, NPU and pid; docs/scale-out.md); a rank's series of the
-- same device and pool in the same step are combined (the highest peak). Ranks are aligned by
-- step number: step N of every rank is the same training step. peak_used is the step's peak
-- as step_peaks defines it (framework pools: the `used` counter the tool wrote; HAL: paired
-- live bytes), including the level when the step starts.
-- heat scales each cell to the highest cell of its pool (100 = the job's hottest rank-step);
-- ratio_to_median compares a rank with the median rank of the same step, so a skewed rank
-- reads as ratio > 1 whatever the step's absolute size. step_skew summarises these per step,
-- rank_peaks per rank.
--
-- Rows come in no particular order: ORDER BY pool, rank, step (or pivot: one line per rank).
-- @column rank            BIGINT  rank of the job (sources.rank)
-- @column node            VARCHAR machine of the rank (sources.node)
-- @column device          VARCHAR Device Id of the series
-- @column pool            VARCHAR pool (Event Type); HAL values are paired live bytes
-- @column step            BIGINT  step number (table steps)
-- @column start_ts        BIGINT  ns: start of the step on this rank, ns
-- @column peak_used       BIGINT  bytes: highest level of the pool on this rank during the step
-- @column peak_ts         BIGINT  ns: time the peak was reached on this rank, ns
-- @column end_used        BIGINT  bytes: level at the end of the step; NULL for an open step
-- @column step_median     DOUBLE  bytes: median of peak_used over the ranks with this pool in this step
-- @column ratio_to_median DOUBLE  peak_used / step_median (1 = a typical rank); NULL when the median is 0
-- @column heat            DOUBLE  percent: peak_used / the highest peak_used of the pool over every rank and step × 100
WITH per_rank AS (
    SELECT s.rank, s.node, p.device, p.pool, p.step,
           MIN(p.start_ts) AS start_ts,
           MAX(p.peak_used) AS peak_used,
           first_value(p.peak_ts ORDER BY p.peak_used DESC, p.peak_ts) AS peak_ts,
           MAX(p.end_used) AS end_used
    FROM step_peaks p
    JOIN sources s ON s.source = p.source
    GROUP BY s.rank, s.node, p.device, p.pool, p.step
),
medians AS (
    SELECT pool, step, median(CAST(peak_used AS DOUBLE)) AS step_median
    FROM per_rank
    GROUP BY pool, step
),
pool_max AS (
    SELECT pool, MAX(peak_used) AS max_peak
    FROM per_rank
    GROUP BY pool
)
SELECT r.rank, r.node, r.device, r.pool, r.step, r.start_ts, r.peak_used, r.peak_ts, r.end_used,
       m.step_median,
       CASE WHEN m.step_median > 0 THEN CAST(r.peak_used AS DOUBLE) / m.step_median END AS ratio_to_median,
       CASE WHEN x.max_peak > 0 THEN round(CAST(r.peak_used AS DOUBLE) * 100.0 / CAST(x.max_peak AS DOUBLE), 2) END AS heat
FROM per_rank r
JOIN medians m ON m.pool = r.pool AND m.step = r.step
JOIN pool_max x ON x.pool = r.pool
