-- curve_buckets: the curve folded into n equal time buckets per series and metric (first, last, min, max per bucket).
--
-- Reads `curve`. A series is (source, pid, device, pool); its time span runs from its first to
-- its last MALLOC/FREE row and is cut into n buckets: bucket = min(((ts - t_min) * n) div span,
-- n - 1) with span = max(t_max - t_min, 1), the formula of the reference's `--trend` and
-- `--curve --ascii` buckets in integer arithmetic (span * n must stay below 2^63: e.g. 10^5
-- buckets over a day). Bucket bounds: t0 = t_min + (span * bucket) div n, t1 = the next
-- bucket's t0 (the last bucket ends at t_max). Every bucket is listed, empty ones with
-- points = 0 and NULL values; end_bytes carries the last value forward (an event-driven curve
-- holds its value until the next event), so it is the value in force at the end of the bucket.
-- Metrics: used, total, process_used, device_used (tool counters, values >= 0 only) and live
-- (curve.live_bytes, memq's pairing; the only metric of HAL). A metric appears for a series only
-- when the series has at least one valid value of it. ORDER BY source, pid, device, pool,
-- metric, bucket for a chart.
--
-- @param n BIGINT number of buckets per series (>= 1)
-- @param pool VARCHAR = NULL only this pool (HAL, PTA, ...); NULL = every pool, each separately
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column pool        VARCHAR pool = Event Type
-- @column metric      VARCHAR used, total, process_used, device_used or live (see above)
-- @column bucket      BIGINT  0-based bucket index
-- @column t0          BIGINT  ns: start of the bucket, ns since the Unix epoch (inclusive)
-- @column t1          BIGINT  ns: end of the bucket, ns since the Unix epoch (exclusive, except the last bucket)
-- @column points      BIGINT  count: rows of the series with a value of the metric in the bucket
-- @column first_bytes BIGINT  bytes: the bucket's first value; NULL when empty
-- @column last_bytes  BIGINT  bytes: the bucket's last value; NULL when empty
-- @column min_bytes   BIGINT  bytes: the bucket's smallest value; NULL when empty
-- @column max_bytes   BIGINT  bytes: the bucket's largest value; NULL when empty
-- @column end_bytes   BIGINT  bytes: value in force at the end of the bucket (last value so far); NULL before the first value
WITH
-- The pool's curve rows with the time span of their series.
series_rows AS (
    SELECT c.*,
           MIN(ts) OVER (PARTITION BY source, pid, device, pool) AS t_min,
           MAX(ts) OVER (PARTITION BY source, pid, device, pool) AS t_max
    FROM curve c
    WHERE ($pool IS NULL OR pool = $pool) AND ts IS NOT NULL
),
-- One row per row and metric with a valid value, with its bucket.
metric_points AS (
    SELECT r.source, r.pid, r.device, r.pool, m.metric, r.ts, r.row_idx, r.t_min, r.t_max,
           CASE m.metric
               WHEN 'used' THEN r.used
               WHEN 'total' THEN r.total
               WHEN 'process_used' THEN r.process_used
               WHEN 'device_used' THEN r.device_used
               ELSE r.live_bytes
           END AS value,
           LEAST(((r.ts - r.t_min) * $n) / GREATEST(r.t_max - r.t_min, 1), $n - 1) AS bucket
    FROM series_rows r
    CROSS JOIN (VALUES ('used'), ('total'), ('process_used'), ('device_used'), ('live')) AS m(metric)
),
-- The buckets that have points.
filled AS (
    SELECT source, pid, device, pool, metric, bucket,
           MIN(t_min) AS t_min, MAX(t_max) AS t_max,
           COUNT(*) AS points,
           FIRST_VALUE(value ORDER BY ts, row_idx) AS first_bytes,
           LAST_VALUE(value ORDER BY ts, row_idx) AS last_bytes,
           MIN(value) AS min_bytes,
           MAX(value) AS max_bytes
    FROM metric_points
    WHERE value >= 0
    GROUP BY source, pid, device, pool, metric, bucket
),
-- Each filled bucket with its neighbours, to list the empty buckets around it.
neighbours AS (
    SELECT f.*,
           LAG(bucket) OVER (PARTITION BY source, pid, device, pool, metric ORDER BY bucket) AS previous_bucket,
           LAG(last_bytes) OVER (PARTITION BY source, pid, device, pool, metric ORDER BY bucket) AS previous_last,
           LEAD(bucket) OVER (PARTITION BY source, pid, device, pool, metric ORDER BY bucket) AS next_bucket
    FROM filled f
),
-- A filled bucket stands for itself, the empty buckets before it and, if it is the last one,
-- the empty buckets after it.
expanded AS (
    SELECT n.*,
           unnest(range(COALESCE(previous_bucket + 1, 0),
                        CASE WHEN next_bucket IS NULL THEN $n ELSE bucket + 1 END)) AS out_bucket
    FROM neighbours n
)
SELECT source, pid, device, pool, metric,
       out_bucket AS bucket,
       t_min + (GREATEST(t_max - t_min, 1) * out_bucket) / $n AS t0,
       CASE WHEN out_bucket = $n - 1 THEN t_max
            ELSE t_min + (GREATEST(t_max - t_min, 1) * (out_bucket + 1)) / $n
       END AS t1,
       CASE WHEN out_bucket = bucket THEN points ELSE 0 END AS points,
       CASE WHEN out_bucket = bucket THEN first_bytes END AS first_bytes,
       CASE WHEN out_bucket = bucket THEN last_bytes END AS last_bytes,
       CASE WHEN out_bucket = bucket THEN min_bytes END AS min_bytes,
       CASE WHEN out_bucket = bucket THEN max_bytes END AS max_bytes,
       CASE WHEN out_bucket < bucket THEN previous_last ELSE last_bytes END AS end_bytes
FROM expanded
