-- step_skew: per step, how unequal the ranks of a job are — min, median and max of the ranks' step peaks, max / median, and the outlier ranks.
--
-- Built on rank_step_heat (one value per rank, device, pool and step: the step's peak on that
-- rank). A data-parallel job's ranks run the same work, so their peaks agree; a skewed step
-- (one rank with a larger batch, an uneven pipeline stage, a rank that caches more) shows as
-- skew = max / median well above 1 and names the ranks responsible.
-- A rank is an outlier of a step when its peak is above the step's median by more than
-- 3 × the median absolute deviation of the step's peaks and by more than 5 % of the median
-- (a robust rule: one large rank cannot hide itself by raising the spread, and identical ranks
-- with tiny jitter flag nothing).
--
-- Rows come in no particular order: ORDER BY skew DESC for the most skewed steps first.
-- @column pool          VARCHAR pool (Event Type); HAL values are paired live bytes
-- @column step          BIGINT  step number
-- @column ranks         BIGINT  count: ranks (rank, device) with a value in this step
-- @column min_peak      BIGINT  bytes: lowest rank peak of the step
-- @column median_peak   DOUBLE  bytes: median rank peak of the step
-- @column max_peak      BIGINT  bytes: highest rank peak of the step
-- @column skew          DOUBLE  max_peak / median_peak (1 = balanced); NULL when the median is 0
-- @column max_rank      BIGINT  the rank with the highest peak (lowest rank on ties)
-- @column mad           DOUBLE  bytes: median absolute deviation of the rank peaks from median_peak
-- @column outliers      BIGINT  count: outlier ranks (see above)
-- @column outlier_ranks VARCHAR the outlier ranks, comma-separated in rank order; NULL when none
WITH cells AS (
    SELECT rank, pool, step, peak_used, step_median
    FROM rank_step_heat
),
spread AS (
    SELECT pool, step, median(abs(CAST(peak_used AS DOUBLE) - step_median)) AS mad
    FROM cells
    GROUP BY pool, step
),
flagged AS (
    SELECT c.*, s.mad,
           CAST(c.peak_used AS DOUBLE) > c.step_median + greatest(3.0 * s.mad, 0.05 * c.step_median) AS outlier
    FROM cells c
    JOIN spread s ON s.pool = c.pool AND s.step = c.step
)
SELECT pool, step,
       COUNT(*) AS ranks,
       MIN(peak_used) AS min_peak,
       MAX(step_median) AS median_peak,
       MAX(peak_used) AS max_peak,
       CASE WHEN MAX(step_median) > 0 THEN CAST(MAX(peak_used) AS DOUBLE) / MAX(step_median) END AS skew,
       first_value(rank ORDER BY peak_used DESC, rank) AS max_rank,
       MAX(mad) AS mad,
       COUNT(*) FILTER (WHERE outlier) AS outliers,
       array_to_string(array_agg(rank ORDER BY rank) FILTER (WHERE outlier), ', ') AS outlier_ranks
FROM flagged
GROUP BY pool, step
