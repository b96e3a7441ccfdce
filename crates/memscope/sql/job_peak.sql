-- job_peak: the true peak of a whole job, per pool — the ranks added up, aligned by step and by wall clock, against the largest single rank and the sum of every rank's own peak.
--
-- A job needs, at its worst moment, the memory of all its ranks at that moment: not the
-- largest rank times the number of ranks, and not the sum of every rank's own peak (ranks do
-- not peak at the same instant). Two alignments, one row each:
--   alignment 'step'   for each step, the sum over ranks of each rank's peak in that step
--                      (rank_step_heat); the step with the highest sum. Ranks are aligned by
--                      step number, whatever their clocks say.
--   alignment 'clock'  the pool's level summed over every rank at each instant (each series'
--                      usage_series values, a step function of time; clocks of different
--                      machines are taken as they are); the highest sum and when it happened.
-- The clock sum is the job's real simultaneous footprint when the nodes' clocks agree; the
-- step sum is an upper bound of it within each step, robust to clock offsets.
-- max_rank_peak is the highest single rank peak (rank_peaks), sum_rank_peaks the sum of every
-- rank's own peak: the footprint if every rank peaked at once.
--
-- Rows come in no particular order: ORDER BY pool, alignment.
-- @column pool           VARCHAR pool (Event Type); HAL values are paired live bytes
-- @column alignment      VARCHAR step or clock (see above)
-- @column bytes          BIGINT  bytes: the job's peak under this alignment
-- @column step           BIGINT  step: the step of the peak; clock: the step of the rows written at that moment (the highest when ranks differ); NULL outside steps
-- @column ts             BIGINT  ns: clock: the moment of the peak, ns; step: the earliest start of that step over the ranks
-- @column ranks          BIGINT  count: ranks with values of the pool
-- @column max_rank       BIGINT  the rank with the highest own peak
-- @column max_rank_peak  BIGINT  bytes: that rank's peak
-- @column sum_rank_peaks BIGINT  bytes: sum over ranks of each rank's own peak
-- @column pct_of_sum     DOUBLE  percent: bytes / sum_rank_peaks × 100 (how much of the every-rank-at-once bound the job really reached)
WITH rank_level AS (
    SELECT pool, COUNT(DISTINCT rank) AS ranks,
           first_value(rank ORDER BY peak_bytes DESC, rank) AS max_rank,
           MAX(peak_bytes) AS max_rank_peak,
           SUM(peak_bytes) AS sum_rank_peaks
    FROM rank_peaks
    GROUP BY pool
),
step_sums AS (
    SELECT pool, step, SUM(peak_used) AS bytes, MIN(start_ts) AS start_ts
    FROM rank_step_heat
    GROUP BY pool, step
),
by_step AS (
    SELECT pool, 'step' AS alignment,
           MAX(bytes) AS bytes,
           first_value(step ORDER BY bytes DESC, step) AS step,
           first_value(start_ts ORDER BY bytes DESC, step) AS ts
    FROM step_sums
    GROUP BY pool
),
-- every series' changes, summed over the job in time order
deltas AS (
    SELECT pool, ts, step,
           used - COALESCE(LAG(used) OVER (PARTITION BY source, pid, device, pool ORDER BY ts, row_idx), 0) AS delta
    FROM usage_series
),
per_ts AS (
    SELECT pool, ts, SUM(delta) AS delta, MAX(step) AS step
    FROM deltas
    GROUP BY pool, ts
),
levels AS (
    SELECT pool, ts, step,
           SUM(delta) OVER (PARTITION BY pool ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS bytes
    FROM per_ts
),
by_clock AS (
    SELECT pool, 'clock' AS alignment,
           MAX(bytes) AS bytes,
           first_value(step ORDER BY bytes DESC, ts) AS step,
           first_value(ts ORDER BY bytes DESC, ts) AS ts
    FROM levels
    GROUP BY pool
)
SELECT a.pool, a.alignment, CAST(a.bytes AS BIGINT) AS bytes, a.step, a.ts,
       r.ranks, r.max_rank, r.max_rank_peak, CAST(r.sum_rank_peaks AS BIGINT) AS sum_rank_peaks,
       CASE WHEN r.sum_rank_peaks > 0 THEN round(CAST(a.bytes AS DOUBLE) * 100.0 / CAST(r.sum_rank_peaks AS DOUBLE), 2) END AS pct_of_sum
FROM (SELECT * FROM by_step UNION ALL SELECT * FROM by_clock) a
JOIN rank_level r ON r.pool = a.pool
