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
-- Rows are ordered by source, pid, device, pool, bucket.
-- @param buckets BIGINT number of time buckets per series, ≥ 1 (the reference default is 20)
-- @param pool VARCHAR = NULL [one of pools] only this pool (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...); NULL = every pool except HOST_PINNED
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
-- the points of the selected series
sel AS (
    SELECT source, pid, device, pool, ts, row_idx, used, total
    FROM usage_series
    WHERE ts IS NOT NULL
      AND $buckets >= 1
      AND (($pool IS NULL AND pool <> 'HOST_PINNED') OR pool = $pool)
),
-- each series' time range, from its points with a valid used
bounds AS (
    SELECT source, pid, device, pool,
           MIN(CASE WHEN used >= 0 THEN ts END) AS ts_min,
           MAX(CASE WHEN used >= 0 THEN ts END) AS ts_max
    FROM sel
    GROUP BY source, pid, device, pool
),
-- the non-empty buckets: each point in its bucket. When `buckets` divides 20160 they are
-- folded from table usage_tiles (each series cut into 20160 tiles over the same span at
-- ingest, a bucket being exactly 20160 / buckets tiles: crates/memscope/src/derive/tiles.rs);
-- otherwise from the points. Both give the same buckets.
filled AS (
    SELECT source, pid, device, pool, ts_min, ts_max, tile / GREATEST(20160 / $buckets, 1) AS bucket,
           SUM(points) AS points,
           LAST_VALUE(used_last ORDER BY tile) FILTER (WHERE used_last IS NOT NULL) AS used_last,
           MIN(used_min) AS used_min_bytes,
           MAX(used_max) AS used_max_bytes,
           LAST_VALUE(total_last ORDER BY tile) FILTER (WHERE total_last IS NOT NULL) AS total_last
    FROM usage_tiles
    WHERE $buckets >= 1 AND 20160 % GREATEST($buckets, 1) = 0
      AND (($pool IS NULL AND pool <> 'HOST_PINNED') OR pool = $pool)
      -- as usage_series: no HAL series for a dump that cannot pair (view pairing)
      AND (pool <> 'HAL' OR source IN (SELECT source FROM pairing WHERE can_pair))
    GROUP BY 1, 2, 3, 4, 5, 6, 7
    UNION ALL
    SELECT p.source, p.pid, p.device, p.pool, b.ts_min, b.ts_max,
           LEAST(GREATEST((p.ts - b.ts_min) * $buckets / GREATEST(b.ts_max - b.ts_min, 1), 0), $buckets - 1) AS bucket,
           COUNT(*) AS points,
           last_value(p.used ORDER BY p.ts, p.row_idx) FILTER (WHERE p.used >= 0) AS used_last,
           MIN(p.used) FILTER (WHERE p.used >= 0) AS used_min_bytes,
           MAX(p.used) FILTER (WHERE p.used >= 0) AS used_max_bytes,
           last_value(p.total ORDER BY p.ts, p.row_idx) FILTER (WHERE p.total >= 0) AS total_last
    -- the few bounds first: the side a join holds in memory (the points stream past it)
    FROM bounds b
    JOIN sel p
      ON b.source = p.source AND (b.pid IS NOT DISTINCT FROM p.pid) AND b.device = p.device AND b.pool = p.pool
    WHERE b.ts_min IS NOT NULL AND 20160 % GREATEST($buckets, 1) <> 0
    GROUP BY 1, 2, 3, 4, 5, 6, 7
),
-- the first non-empty bucket of a series also yields one empty placeholder per bucket (slot
-- 0..buckets-1; slot -1 is the bucket itself), so that every bucket of every series exists
slots AS (
    SELECT *, unnest(CASE WHEN first_bucket THEN range(-1, $buckets) ELSE [-1] END) AS slot
    FROM (SELECT *, bucket = MIN(bucket) OVER (PARTITION BY source, pid, device, pool) AS first_bucket
          FROM filled) f
),
per_bucket AS (
    SELECT s.source, s.pid, s.device, s.pool, CASE WHEN slot >= 0 THEN slot ELSE bucket END AS bucket,
           MAX(ts_min) AS ts_min, MAX(ts_max) AS ts_max, GREATEST(MAX(ts_max) - MAX(ts_min), 1) AS span,
           MAX(CASE WHEN f.ts_unit = 'us' THEN 1000 ELSE 1 END) AS unit_ns,
           COALESCE(SUM(points) FILTER (WHERE slot < 0), 0) AS points,
           MAX(used_last) FILTER (WHERE slot < 0) AS used_last,
           MAX(used_min_bytes) FILTER (WHERE slot < 0) AS used_min_bytes,
           MAX(used_max_bytes) FILTER (WHERE slot < 0) AS used_max_bytes,
           MAX(total_last) FILTER (WHERE slot < 0) AS total_last
    FROM slots s
    LEFT JOIN sources f ON f.source = s.source
    GROUP BY 1, 2, 3, 4, 5
),
-- algorithm A looks at used_last of the non-empty buckets after bucket 0 ("lasts", last_a),
-- algorithm B at total_last of every bucket that has one. A sequence never decreases when no
-- value is below the highest value before it; its first and last values are those with no
-- value before them and none after them. (No IGNORE NULLS: a cluster plan does not carry it.
-- per_bucket is read once, the windows built on it: a CTE named twice is computed twice. The
-- windows partition by one column, the series as a struct `sk`, not by its four columns:
-- DataFusion's planner weighs every ordering of a window's partition columns each time it
-- rebuilds a window, which made planning these three layers 35 ms of a 100 ms query.)
ordered AS (
    SELECT *,
           last_a < MAX(last_a) OVER before AS down_a,
           total_last < MAX(total_last) OVER before AS down_b,
           COUNT(last_a) OVER upto AS n_a, COUNT(last_a) OVER from_here AS r_a,
           COUNT(total_last) OVER upto AS n_b, COUNT(total_last) OVER from_here AS r_b
    FROM (SELECT *, CASE WHEN bucket >= 1 THEN used_last END AS last_a,
                 named_struct('source', source, 'pid', pid, 'device', device, 'pool', pool) AS sk
          FROM per_bucket) p
    WINDOW before AS (PARTITION BY sk ORDER BY bucket ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
           upto AS (PARTITION BY sk ORDER BY bucket ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
           from_here AS (PARTITION BY sk ORDER BY bucket ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)
),
based AS (
    SELECT *,
           MAX(CASE WHEN n_a = 1 THEN last_a END) OVER s AS base_used,
           MAX(CASE WHEN r_a = 1 THEN last_a END) OVER s AS final_a,
           COUNT(last_a) OVER s AS n_lasts,
           bool_or(COALESCE(down_a, FALSE)) OVER s AS a_decreases,
           MAX(CASE WHEN n_b = 1 THEN total_last END) OVER s AS total_first_bytes,
           MAX(CASE WHEN r_b = 1 THEN total_last END) OVER s AS total_final_bytes,
           COUNT(total_last) OVER s AS n_totals,
           bool_or(COALESCE(down_b, FALSE)) OVER s AS b_decreases
    FROM ordered
    WINDOW s AS (PARTITION BY sk)
),
verdicts AS (
    SELECT *,
           -- lasts above the baseline (the baseline is not its own competitor)
           COUNT(CASE WHEN last_a > base_used THEN 1 END) OVER (PARTITION BY sk) AS above_base
    FROM based
)
SELECT source, pid, device, pool, bucket, t0, t1, t0 / unit_ns AS t0_raw, t1 / unit_ns AS t1_raw,
       points, used_last, used_min_bytes, used_max_bytes, total_last,
       base_used,
       GREATEST(n_lasts - 1, 0) AS compared_buckets,
       above_base,
       NOT a_decreases AS monotonic,
       final_a - base_used AS net_growth_bytes,
       CAST(final_a - base_used AS DOUBLE) / CAST(GREATEST(base_used, 1) AS DOUBLE) * 100.0 AS net_growth_pct,
       CASE WHEN n_lasts < 2 THEN 'no_verdict'
            WHEN above_base = n_lasts - 1 AND NOT a_decreases THEN 'strong'
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
ORDER BY source, pid, device, pool, bucket
