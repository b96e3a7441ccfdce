-- trend: is memory growing across the run? Each pool series cut into equal time buckets, with the guide's growth verdicts (algorithm A: live bytes; B: reservation).
--
-- A series is one pool of one process on one device (see view usage_series; HAL values are
-- live bytes from MALLOC/FREE pairing, HOST_PINNED is left out unless asked for by name since
-- its `used` is the process VmRSS). Each series' time span [first, last point with used ≥ 0]
-- is cut into `buckets` equal buckets: bucket = floor((ts - first) × buckets / span), clamped
-- to the last bucket; span = max(last - first, 1 ns).
-- Algorithm A (live-block growth, strong signal): take the last `used` of every non-empty
-- bucket after bucket 0 (bucket 0 is warm-up and dropped); the first of them is the baseline.
-- The other buckets are compared with it: `strong` when every one is above the baseline and
-- the sequence never decreases, `no_growth` when none is above, `discontinuous` otherwise,
-- `no_verdict` when fewer than two non-empty buckets follow bucket 0.
-- Algorithm B (reservation growth, weak signal, only meaningful with A): the last `total` of
-- every bucket that has one (bucket 0 included) is non-decreasing (`total_non_decreasing`)
-- and, for `reservation_growth`, ends higher than it starts.
-- Differences from the reference `--trend`: the baseline is not counted in its own denominator
-- (so `strong` can fire), HAL is computed from pairing instead of failing, series never mix
-- processes/devices, and B needs an actual rise (docs/reference-differences.md).
--
-- @param buckets BIGINT number of time buckets per series (the reference default is 20)
-- @param pool VARCHAR = NULL only this pool (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...); NULL = every pool except HOST_PINNED
-- @column source                input file
-- @column pid                   process id
-- @column device                Device Id as written
-- @column pool                  pool (Event Type)
-- @column bucket                0-based bucket number
-- @column t0                    bucket start, ns: first + floor(span × bucket / buckets)
-- @column t1                    bucket end, ns: first + floor(span × (bucket+1) / buckets); the last bucket ends at the last point
-- @column points                count: counter values (rows) in the bucket
-- @column used_last             bytes live at the last point of the bucket; NULL when the bucket is empty
-- @column used_min_bytes        bytes: lowest live value in the bucket; NULL when empty
-- @column used_max_bytes        bytes: highest live value in the bucket; NULL when empty
-- @column total_last            bytes reserved at the last point of the bucket that carries `total`; NULL when none
-- @column base_used             bytes: algorithm A baseline = used_last of the first non-empty bucket after bucket 0 (same on every row of the series)
-- @column compared_buckets      count: non-empty buckets after the baseline bucket (same on every row of the series)
-- @column above_base            count: those whose used_last is above the baseline
-- @column monotonic             the used_last sequence from the baseline on never decreases
-- @column net_growth_bytes      bytes: used_last of the last non-empty bucket minus the baseline
-- @column net_growth_pct        percent: net_growth_bytes / max(base_used, 1) × 100
-- @column growth_verdict        algorithm A: strong, discontinuous, no_growth, no_verdict
-- @column total_first_bytes     bytes: first bucket total_last (algorithm B)
-- @column total_final_bytes     bytes: last bucket total_last (algorithm B)
-- @column total_non_decreasing  algorithm B as the reference tests it: at least two buckets with a total, never decreasing
-- @column reservation_growth    algorithm B as the guide means it: total_non_decreasing and total_final_bytes > total_first_bytes
WITH
points AS (
    SELECT source, pid, device, pool, ts, row_idx, used, total
    FROM usage_series
    WHERE ts IS NOT NULL
      AND (($pool IS NULL AND pool <> 'HOST_PINNED') OR pool = $pool)
),
-- time range of each series, from the points with a valid used
series AS (
    SELECT source, pid, device, pool,
           MIN(ts) AS ts_min, MAX(ts) AS ts_max,
           GREATEST(MAX(ts) - MIN(ts), 1) AS span
    FROM points
    WHERE used >= 0
    GROUP BY source, pid, device, pool
),
bucketed AS (
    SELECT p.*, s.ts_min,
           LEAST(GREATEST((p.ts - s.ts_min) * $buckets / s.span, 0), $buckets - 1) AS bucket
    FROM points p
    JOIN series s
      ON s.source = p.source AND (s.pid IS NOT DISTINCT FROM p.pid) AND s.device = p.device AND s.pool = p.pool
),
per_bucket AS (
    SELECT source, pid, device, pool, bucket,
           COUNT(*) AS points,
           last_value(used ORDER BY ts, row_idx) FILTER (WHERE used >= 0) AS used_last,
           MIN(used) FILTER (WHERE used >= 0) AS used_min_bytes,
           MAX(used) FILTER (WHERE used >= 0) AS used_max_bytes,
           last_value(total ORDER BY ts, row_idx) FILTER (WHERE total >= 0) AS total_last
    FROM bucketed
    GROUP BY source, pid, device, pool, bucket
),
-- every bucket of every series, empty ones included
grid AS (
    SELECT s.source, s.pid, s.device, s.pool, s.ts_min, s.ts_max, s.span, b.bucket
    FROM series s
    CROSS JOIN (SELECT unnest(range(0, $buckets)) AS bucket) b
),
-- algorithm A: last used of the non-empty buckets after bucket 0, baseline first
lasts AS (
    SELECT source, pid, device, pool, bucket, used_last,
           first_value(used_last) OVER s AS base,
           LAG(used_last) OVER s AS prev,
           ROW_NUMBER() OVER s AS k
    FROM per_bucket
    WHERE bucket >= 1 AND used_last IS NOT NULL
    WINDOW s AS (PARTITION BY source, pid, device, pool ORDER BY bucket)
),
verdict_a AS (
    SELECT source, pid, device, pool,
           MAX(base) AS base_used,
           COUNT(*) - 1 AS compared_buckets,
           COUNT(*) FILTER (WHERE k > 1 AND used_last > base) AS above_base,
           bool_and(prev IS NULL OR used_last >= prev) AS monotonic,
           last_value(used_last ORDER BY bucket) - MAX(base) AS net_growth_bytes
    FROM lasts
    GROUP BY source, pid, device, pool
),
-- algorithm B: last total of every bucket that has one
totals AS (
    SELECT source, pid, device, pool, bucket, total_last,
           LAG(total_last) OVER (PARTITION BY source, pid, device, pool ORDER BY bucket) AS prev
    FROM per_bucket
    WHERE total_last IS NOT NULL
),
verdict_b AS (
    SELECT source, pid, device, pool,
           first_value(total_last ORDER BY bucket) AS total_first_bytes,
           last_value(total_last ORDER BY bucket) AS total_final_bytes,
           COUNT(*) >= 2 AND bool_and(prev IS NULL OR total_last >= prev) AS total_non_decreasing
    FROM totals
    GROUP BY source, pid, device, pool
)
SELECT g.source, g.pid, g.device, g.pool, g.bucket,
       g.ts_min + g.span * g.bucket / $buckets AS t0,
       CASE WHEN g.bucket = $buckets - 1 THEN g.ts_max
            ELSE g.ts_min + g.span * (g.bucket + 1) / $buckets END AS t1,
       COALESCE(pb.points, 0) AS points,
       pb.used_last, pb.used_min_bytes, pb.used_max_bytes, pb.total_last,
       a.base_used,
       COALESCE(a.compared_buckets, 0) AS compared_buckets,
       COALESCE(a.above_base, 0) AS above_base,
       a.monotonic,
       a.net_growth_bytes,
       CAST(a.net_growth_bytes AS DOUBLE) / CAST(GREATEST(a.base_used, 1) AS DOUBLE) * 100.0 AS net_growth_pct,
       CASE WHEN COALESCE(a.compared_buckets, 0) < 1 THEN 'no_verdict'
            WHEN a.above_base = a.compared_buckets AND a.monotonic THEN 'strong'
            WHEN a.above_base = 0 THEN 'no_growth'
            ELSE 'discontinuous' END AS growth_verdict,
       b.total_first_bytes, b.total_final_bytes,
       COALESCE(b.total_non_decreasing, FALSE) AS total_non_decreasing,
       COALESCE(b.total_non_decreasing AND b.total_final_bytes > b.total_first_bytes, FALSE) AS reservation_growth
FROM grid g
LEFT JOIN per_bucket pb
       ON pb.source = g.source AND (pb.pid IS NOT DISTINCT FROM g.pid) AND pb.device = g.device
      AND pb.pool = g.pool AND pb.bucket = g.bucket
LEFT JOIN verdict_a a
       ON a.source = g.source AND (a.pid IS NOT DISTINCT FROM g.pid) AND a.device = g.device AND a.pool = g.pool
LEFT JOIN verdict_b b
       ON b.source = g.source AND (b.pid IS NOT DISTINCT FROM g.pid) AND b.device = g.device AND b.pool = g.pool
ORDER BY g.source, g.pid, g.device, g.pool, g.bucket
