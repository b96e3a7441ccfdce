-- trend(buckets, pool): each series' span (first to last point with used >= 0) cut into $BUCKETS
-- equal buckets (bucket = floor((ts - first) * B / span), clamped); last/min/max used and last
-- total per bucket; algorithm A: the last used of the non-empty buckets after bucket 0, the
-- first of them the baseline, 'strong' when all later ones are above it and never decrease,
-- 'no_growth' when none is, else 'discontinuous' (memq view trend).
WITH points AS (
    SELECT pid, device, pool, ts, row_idx, used, total,
           MIN(CASE WHEN used >= 0 THEN ts END) OVER s AS ts_min,
           MAX(CASE WHEN used >= 0 THEN ts END) OVER s AS ts_max
    FROM usage_series
    WHERE ts IS NOT NULL AND pool = $POOL
    WINDOW s AS (PARTITION BY pid, device, pool)
),
bucketed AS (
    SELECT *, GREATEST(ts_max - ts_min, 1) AS span,
           LEAST(GREATEST((ts - ts_min) * $BUCKETS // GREATEST(ts_max - ts_min, 1), 0), $BUCKETS - 1) AS bucket
    FROM points
    WHERE ts_min IS NOT NULL
),
per_bucket AS (
    SELECT pid, device, pool, bucket, ANY_VALUE(ts_min) AS ts_min, ANY_VALUE(ts_max) AS ts_max,
           ANY_VALUE(span) AS span, COUNT(*) AS points,
           last(used ORDER BY ts, row_idx) FILTER (WHERE used >= 0) AS used_last,
           MIN(used) FILTER (WHERE used >= 0) AS used_min_bytes,
           MAX(used) FILTER (WHERE used >= 0) AS used_max_bytes,
           last(total ORDER BY ts, row_idx) FILTER (WHERE total >= 0) AS total_last
    FROM bucketed
    GROUP BY ALL
),
grid AS (
    SELECT s.pid, s.device, s.pool, s.ts_min, s.ts_max, s.span, g.bucket
    FROM (SELECT DISTINCT pid, device, pool, ts_min, ts_max, span FROM per_bucket) s,
         range($BUCKETS) g(bucket)
),
filled AS (
    SELECT g.pid, g.device, g.pool, g.bucket,
           g.ts_min + g.span * g.bucket // $BUCKETS AS t0,
           CASE WHEN g.bucket = $BUCKETS - 1 THEN g.ts_max ELSE g.ts_min + g.span * (g.bucket + 1) // $BUCKETS END AS t1,
           COALESCE(b.points, 0) AS points, b.used_last, b.used_min_bytes, b.used_max_bytes, b.total_last,
           CASE WHEN g.bucket >= 1 THEN b.used_last END AS last_a
    FROM grid g
    LEFT JOIN per_bucket b ON b.pid IS NOT DISTINCT FROM g.pid AND b.device = g.device AND b.pool = g.pool AND b.bucket = g.bucket
),
series AS (
    SELECT pid, device, pool,
           first(last_a ORDER BY bucket) FILTER (WHERE last_a IS NOT NULL) AS base_used,
           last(last_a ORDER BY bucket) FILTER (WHERE last_a IS NOT NULL) AS final_a,
           COUNT(last_a) - 1 AS compared,
           list(last_a ORDER BY bucket) FILTER (WHERE last_a IS NOT NULL) AS lasts
    FROM filled
    GROUP BY ALL
),
verdicts AS (
    SELECT *,
           len(list_filter(lasts[2:], lambda x: x > base_used)) AS above_base,
           NOT COALESCE(list_bool_or(list_transform(range(1, len(lasts)), lambda i: lasts[i + 1] < lasts[i])), false) AS monotonic
    FROM series
)
SELECT f.pid, f.device, f.pool, f.bucket, f.t0, f.t1, f.points, f.used_last, f.used_min_bytes,
       f.used_max_bytes, f.total_last,
       v.base_used, GREATEST(v.compared, 0) AS compared_buckets, v.above_base, v.monotonic,
       v.final_a - v.base_used AS net_growth_bytes,
       CASE WHEN v.compared < 1 THEN 'no_verdict'
            WHEN v.above_base = v.compared AND v.monotonic THEN 'strong'
            WHEN v.above_base = 0 THEN 'no_growth'
            ELSE 'discontinuous' END AS growth_verdict
FROM filled f
JOIN verdicts v ON v.pid IS NOT DISTINCT FROM f.pid AND v.device = f.device AND v.pool = f.pool
ORDER BY f.pid, f.device, f.pool, f.bucket
