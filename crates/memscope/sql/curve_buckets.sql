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
-- when the series has at least one valid value of it (the live metric of a dump that cannot
-- pair, view pairing / capabilities.has_alloc_free, is drawn but cannot be concluded: without
-- FREEs it only rises). Rows are ordered by source, pid,
-- device, pool, metric, bucket (ready for a chart).
--
-- @param n BIGINT number of buckets per series (>= 1)
-- @param pool VARCHAR = NULL [one of pools] only this pool (HAL, PTA, ...); NULL = every pool, each separately
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
-- The time span of each series of the pool: one small GROUP BY.
ranges AS (
    SELECT source, pid, device, pool, MIN(ts) AS t_min, MAX(ts) AS t_max
    FROM curve
    WHERE ($pool IS NULL OR pool = $pool) AND ts IS NOT NULL
    GROUP BY source, pid, device, pool
),
-- Every row in its bucket, folded once for all five metrics (a metric's points are its
-- valid values, >= 0): from the tiles when n divides 20160, else from the rows.
per_bucket AS (
    SELECT source, pid, device, pool, tile / GREATEST(20160 / $n, 1) AS bucket,
           MIN(t_min) AS t_min, MAX(t_max) AS t_max,
           SUM(used_points) AS used_points,
           FIRST_VALUE(used_first ORDER BY tile) FILTER (WHERE used_points > 0) AS used_first,
           LAST_VALUE(used_last ORDER BY tile) FILTER (WHERE used_points > 0) AS used_last,
           MIN(used_min) AS used_min,
           MAX(used_max) AS used_max,
           SUM(total_points) AS total_points,
           FIRST_VALUE(total_first ORDER BY tile) FILTER (WHERE total_points > 0) AS total_first,
           LAST_VALUE(total_last ORDER BY tile) FILTER (WHERE total_points > 0) AS total_last,
           MIN(total_min) AS total_min,
           MAX(total_max) AS total_max,
           SUM(process_used_points) AS process_used_points,
           FIRST_VALUE(process_used_first ORDER BY tile) FILTER (WHERE process_used_points > 0) AS process_used_first,
           LAST_VALUE(process_used_last ORDER BY tile) FILTER (WHERE process_used_points > 0) AS process_used_last,
           MIN(process_used_min) AS process_used_min,
           MAX(process_used_max) AS process_used_max,
           SUM(device_used_points) AS device_used_points,
           FIRST_VALUE(device_used_first ORDER BY tile) FILTER (WHERE device_used_points > 0) AS device_used_first,
           LAST_VALUE(device_used_last ORDER BY tile) FILTER (WHERE device_used_points > 0) AS device_used_last,
           MIN(device_used_min) AS device_used_min,
           MAX(device_used_max) AS device_used_max,
           SUM(live_points) AS live_points,
           FIRST_VALUE(live_first ORDER BY tile) FILTER (WHERE live_points > 0) AS live_first,
           LAST_VALUE(live_last ORDER BY tile) FILTER (WHERE live_points > 0) AS live_last,
           MIN(live_min) AS live_min,
           MAX(live_max) AS live_max
    FROM curve_tiles
    WHERE $n >= 1 AND 20160 % GREATEST($n, 1) = 0 AND ($pool IS NULL OR pool = $pool)
    GROUP BY source, pid, device, pool, tile / GREATEST(20160 / $n, 1)
    UNION ALL
    SELECT source, pid, device, pool, bucket, MIN(t_min) AS t_min, MAX(t_max) AS t_max,
           COUNT(*) FILTER (WHERE used >= 0) AS used_points,
           FIRST_VALUE(used ORDER BY ts, row_idx) FILTER (WHERE used >= 0) AS used_first,
           LAST_VALUE(used ORDER BY ts, row_idx) FILTER (WHERE used >= 0) AS used_last,
           MIN(used) FILTER (WHERE used >= 0) AS used_min,
           MAX(used) FILTER (WHERE used >= 0) AS used_max,
           COUNT(*) FILTER (WHERE total >= 0) AS total_points,
           FIRST_VALUE(total ORDER BY ts, row_idx) FILTER (WHERE total >= 0) AS total_first,
           LAST_VALUE(total ORDER BY ts, row_idx) FILTER (WHERE total >= 0) AS total_last,
           MIN(total) FILTER (WHERE total >= 0) AS total_min,
           MAX(total) FILTER (WHERE total >= 0) AS total_max,
           COUNT(*) FILTER (WHERE process_used >= 0) AS process_used_points,
           FIRST_VALUE(process_used ORDER BY ts, row_idx) FILTER (WHERE process_used >= 0) AS process_used_first,
           LAST_VALUE(process_used ORDER BY ts, row_idx) FILTER (WHERE process_used >= 0) AS process_used_last,
           MIN(process_used) FILTER (WHERE process_used >= 0) AS process_used_min,
           MAX(process_used) FILTER (WHERE process_used >= 0) AS process_used_max,
           COUNT(*) FILTER (WHERE device_used >= 0) AS device_used_points,
           FIRST_VALUE(device_used ORDER BY ts, row_idx) FILTER (WHERE device_used >= 0) AS device_used_first,
           LAST_VALUE(device_used ORDER BY ts, row_idx) FILTER (WHERE device_used >= 0) AS device_used_last,
           MIN(device_used) FILTER (WHERE device_used >= 0) AS device_used_min,
           MAX(device_used) FILTER (WHERE device_used >= 0) AS device_used_max,
           COUNT(*) FILTER (WHERE live_bytes >= 0) AS live_points,
           FIRST_VALUE(live_bytes ORDER BY ts, row_idx) FILTER (WHERE live_bytes >= 0) AS live_first,
           LAST_VALUE(live_bytes ORDER BY ts, row_idx) FILTER (WHERE live_bytes >= 0) AS live_last,
           MIN(live_bytes) FILTER (WHERE live_bytes >= 0) AS live_min,
           MAX(live_bytes) FILTER (WHERE live_bytes >= 0) AS live_max
    FROM (
        SELECT c.source, c.pid, c.device, c.pool, c.ts, c.row_idx, c.used, c.total,
               c.process_used, c.device_used, c.live_bytes, r.t_min, r.t_max,
               LEAST(((c.ts - r.t_min) * $n) / GREATEST(r.t_max - r.t_min, 1), $n - 1) AS bucket
        -- the few ranges first: the side a join holds in memory (the rows stream past it)
        FROM ranges r
        JOIN curve c ON r.source = c.source AND (r.pid IS NOT DISTINCT FROM c.pid)
                    AND r.device = c.device AND r.pool = c.pool
        WHERE c.ts IS NOT NULL
    ) x
    WHERE 20160 % GREATEST($n, 1) <> 0
    GROUP BY source, pid, device, pool, bucket
),
-- The buckets that have points, one row per metric.
filled AS (
    SELECT * FROM (
        SELECT p.source, p.pid, p.device, p.pool, m.metric, p.bucket, p.t_min, p.t_max,
               CASE m.metric WHEN 'used' THEN p.used_points WHEN 'total' THEN p.total_points WHEN 'process_used' THEN p.process_used_points WHEN 'device_used' THEN p.device_used_points ELSE p.live_points END AS points,
               CASE m.metric WHEN 'used' THEN p.used_first WHEN 'total' THEN p.total_first WHEN 'process_used' THEN p.process_used_first WHEN 'device_used' THEN p.device_used_first ELSE p.live_first END AS first_bytes,
               CASE m.metric WHEN 'used' THEN p.used_last WHEN 'total' THEN p.total_last WHEN 'process_used' THEN p.process_used_last WHEN 'device_used' THEN p.device_used_last ELSE p.live_last END AS last_bytes,
               CASE m.metric WHEN 'used' THEN p.used_min WHEN 'total' THEN p.total_min WHEN 'process_used' THEN p.process_used_min WHEN 'device_used' THEN p.device_used_min ELSE p.live_min END AS min_bytes,
               CASE m.metric WHEN 'used' THEN p.used_max WHEN 'total' THEN p.total_max WHEN 'process_used' THEN p.process_used_max WHEN 'device_used' THEN p.device_used_max ELSE p.live_max END AS max_bytes
        FROM per_bucket p
        CROSS JOIN (VALUES ('used'), ('total'), ('process_used'), ('device_used'), ('live')) AS m(metric)
    ) f
    WHERE points > 0
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
ORDER BY source, pid, device, pool, metric, bucket
