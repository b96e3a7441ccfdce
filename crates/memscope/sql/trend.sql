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
-- Rows come in no particular order: ORDER BY source, pid, device, pool, bucket.
-- @param buckets BIGINT number of time buckets per series, ≥ 1 (the reference default is 20)
-- @param pool VARCHAR = NULL only this pool (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...); NULL = every pool except HOST_PINNED
-- @column source               VARCHAR input file
-- @column pid                  BIGINT  process id
-- @column device               VARCHAR Device Id as written
-- @column pool                 VARCHAR pool (Event Type)
-- @column bucket               BIGINT  0-based bucket number
-- @column t0                   BIGINT  ns: bucket start, ns: first + floor(span × bucket / buckets)
-- @column t1                   BIGINT  ns: bucket end, ns: first + floor(span × (bucket+1) / buckets); the last bucket ends at the last point
-- @column t0_raw               BIGINT  t0 in the file's unit (µs for G1 sources: floor(t0 / 1000), the reference's bound)
-- @column t1_raw               BIGINT  t1 in the file's unit
-- @column points               BIGINT  count: counter values (rows) in the bucket
-- @column used_last            BIGINT  bytes: live at the last point of the bucket; NULL when the bucket is empty
-- @column used_min_bytes       BIGINT  bytes: lowest live value in the bucket; NULL when empty
-- @column used_max_bytes       BIGINT  bytes: highest live value in the bucket; NULL when empty
-- @column total_last           BIGINT  bytes: reserved at the last point of the bucket that carries `total`; NULL when none
-- @column base_used            BIGINT  bytes: algorithm A baseline = used_last of the first non-empty bucket after bucket 0 (same on every row of the series)
-- @column compared_buckets     BIGINT  count: non-empty buckets after the baseline bucket (same on every row of the series)
-- @column above_base           BIGINT  count: those whose used_last is above the baseline
-- @column monotonic            BOOLEAN the used_last sequence from the baseline on never decreases
-- @column net_growth_bytes     BIGINT  bytes: used_last of the last non-empty bucket minus the baseline
-- @column net_growth_pct       DOUBLE  percent: net_growth_bytes / max(base_used, 1) × 100
-- @column growth_verdict       VARCHAR algorithm A: strong, discontinuous, no_growth, no_verdict
-- @column total_first_bytes    BIGINT  bytes: first bucket total_last (algorithm B)
-- @column total_final_bytes    BIGINT  bytes: last bucket total_last (algorithm B)
-- @column total_non_decreasing BOOLEAN algorithm B as the reference tests it: at least two buckets with a total, never decreasing
-- @column reservation_growth   BOOLEAN algorithm B as the guide means it: total_non_decreasing and total_final_bytes > total_first_bytes
WITH
-- each selected series' time range (from its points with a valid used): one small GROUP BY
ranges AS (
    SELECT r.*, GREATEST(ts_max - ts_min, 1) AS span,
           CASE WHEN f.ts_unit = 'us' THEN 1000 ELSE 1 END AS unit_ns
    FROM (
        SELECT source, pid, device, pool,
               MIN(CASE WHEN used >= 0 THEN ts END) AS ts_min,
               MAX(CASE WHEN used >= 0 THEN ts END) AS ts_max
        FROM usage_series
        WHERE ts IS NOT NULL
          AND $buckets >= 1
          AND (($pool IS NULL AND pool <> 'HOST_PINNED') OR pool = $pool)
        GROUP BY source, pid, device, pool
    ) r
    LEFT JOIN sources f ON f.source = r.source
    WHERE ts_min IS NOT NULL
),
-- each point in its bucket, plus one empty placeholder row per bucket of every series, so
-- that every bucket of every series exists (empty ones included)
bucketed AS (
    SELECT r.source, r.pid, r.device, r.pool, r.ts_min, r.ts_max, r.span, r.unit_ns,
           u.ts, u.row_idx, u.used, u.total, FALSE AS placeholder,
           LEAST(GREATEST((u.ts - r.ts_min) * $buckets / r.span, 0), $buckets - 1) AS bucket
    FROM usage_series u
    JOIN ranges r ON r.source = u.source AND (r.pid IS NOT DISTINCT FROM u.pid)
                 AND r.device = u.device AND r.pool = u.pool
    WHERE u.ts IS NOT NULL
    UNION ALL
    SELECT source, pid, device, pool, ts_min, ts_max, span, unit_ns,
           CAST(NULL AS BIGINT), arrow_cast(NULL, 'UInt64'), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT),
           TRUE, unnest(range(0, $buckets))
    FROM ranges
),
per_bucket AS (
    SELECT source, pid, device, pool, bucket,
           MAX(ts_min) AS ts_min, MAX(ts_max) AS ts_max, MAX(span) AS span, MAX(unit_ns) AS unit_ns,
           COUNT(*) FILTER (WHERE NOT placeholder) AS points,
           last_value(used ORDER BY ts, row_idx) FILTER (WHERE used >= 0) AS used_last,
           MIN(used) FILTER (WHERE used >= 0) AS used_min_bytes,
           MAX(used) FILTER (WHERE used >= 0) AS used_max_bytes,
           last_value(total ORDER BY ts, row_idx) FILTER (WHERE total >= 0) AS total_last
    FROM bucketed
    GROUP BY source, pid, device, pool, bucket
),
-- algorithm A looks at used_last of the non-empty buckets after bucket 0 ("lasts"), algorithm
-- B at total_last of every bucket that has one; each sequence is compared with its own first
-- value and with the value before it (LAG over the sequence alone: no IGNORE NULLS, which the
-- cluster does not carry)
lasts AS (
    SELECT source, pid, device, pool, bucket, used_last,
           first_value(used_last) OVER (PARTITION BY source, pid, device, pool ORDER BY bucket
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS base,
           used_last < LAG(used_last) OVER (PARTITION BY source, pid, device, pool ORDER BY bucket) AS down
    FROM per_bucket
    WHERE bucket >= 1 AND used_last IS NOT NULL
),
a_series AS (
    SELECT source, pid, device, pool,
           MAX(base) AS base_used,
           last_value(used_last ORDER BY bucket) AS final_a,
           COUNT(*) AS n_lasts,
           -- buckets after the baseline that are above it (the baseline is not its own competitor)
           COUNT(*) FILTER (WHERE used_last > base) AS above_base,
           bool_or(COALESCE(down, FALSE)) AS a_decreases
    FROM lasts
    GROUP BY source, pid, device, pool
),
b_series AS (
    SELECT source, pid, device, pool,
           first_value(total_last ORDER BY bucket) AS total_first_bytes,
           last_value(total_last ORDER BY bucket) AS total_final_bytes,
           COUNT(*) AS n_totals,
           bool_or(COALESCE(down, FALSE)) AS b_decreases
    FROM (
        SELECT source, pid, device, pool, bucket, total_last,
               total_last < LAG(total_last) OVER (PARTITION BY source, pid, device, pool ORDER BY bucket) AS down
        FROM per_bucket
        WHERE total_last IS NOT NULL
    ) t
    GROUP BY source, pid, device, pool
),
verdicts AS (
    SELECT p.*, a.base_used, a.final_a,
           COALESCE(a.n_lasts, 0) - 1 AS compared,
           COALESCE(a.above_base, 0) AS above_base,
           COALESCE(a.a_decreases, FALSE) AS a_decreases,
           b.total_first_bytes, b.total_final_bytes,
           COALESCE(b.n_totals, 0) AS n_totals,
           COALESCE(b.b_decreases, FALSE) AS b_decreases
    FROM per_bucket p
    LEFT JOIN a_series a ON a.source = p.source AND (a.pid IS NOT DISTINCT FROM p.pid)
                        AND a.device = p.device AND a.pool = p.pool
    LEFT JOIN b_series b ON b.source = p.source AND (b.pid IS NOT DISTINCT FROM p.pid)
                        AND b.device = p.device AND b.pool = p.pool
)
SELECT source, pid, device, pool, bucket, t0, t1, t0 / unit_ns AS t0_raw, t1 / unit_ns AS t1_raw,
       points, used_last, used_min_bytes, used_max_bytes, total_last,
       base_used,
       GREATEST(compared, 0) AS compared_buckets,
       above_base,
       NOT a_decreases AS monotonic,
       final_a - base_used AS net_growth_bytes,
       CAST(final_a - base_used AS DOUBLE) / CAST(GREATEST(base_used, 1) AS DOUBLE) * 100.0 AS net_growth_pct,
       CASE WHEN compared < 1 THEN 'no_verdict'
            WHEN above_base = compared AND NOT a_decreases THEN 'strong'
            WHEN above_base = 0 THEN 'no_growth'
            ELSE 'discontinuous' END AS growth_verdict,
       total_first_bytes, total_final_bytes,
       n_totals >= 2 AND NOT b_decreases AS total_non_decreasing,
       n_totals >= 2 AND NOT b_decreases AND total_final_bytes > total_first_bytes AS reservation_growth
FROM (
    SELECT *,
           ts_min + span * bucket / $buckets AS t0,
           CASE WHEN bucket = $buckets - 1 THEN ts_max
                ELSE ts_min + span * (bucket + 1) / $buckets END AS t1
    FROM verdicts
) v
