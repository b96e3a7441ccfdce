-- fragmentation: how much of each framework pool's reservation is idle — current, peak and mean fragmentation, lowest-usage moments, level.
--
-- Fragmentation of a row = (total - used) / total × 100 with the row's own counters (state after
-- the event), for every row of a pool that carries both counters with total > 0. One row per
-- series (source, pid, device, pool): counters of different processes, devices and pools are
-- never mixed. `level` classifies the current (last) value, `peak_level` the peak, with the
-- guide's thresholds: < 5 % normal, 5–15 % elevated, > 15 % severe; a negative value (legacy G1
-- data where `used` > `total`) is classified `invalid`.
-- Differences from the reference `--fragmentation`: per process/device series, rows with
-- used = 0 are counted (an empty pool is 100 % idle), and the level is computed, not only
-- printed as a legend (docs/reference-differences.md).
--
-- Rows come in no particular order.
-- @column source           VARCHAR  input file
-- @column pid              BIGINT   process id
-- @column device           VARCHAR  Device Id as written
-- @column pool             VARCHAR  pool (Event Type): PTA, ATB, MINDSPORE, PTA_WORKSPACE
-- @column rows             BIGINT   count: MALLOC/FREE rows of the series carrying `total`
-- @column samples          BIGINT   count: rows with both counters and total > 0 (the fragmentation samples)
-- @column expansions       BIGINT   count: times the reservation grew (see view pool_expansions)
-- @column current_frag_pct DOUBLE   percent: fragmentation of the last sample
-- @column current_ts       BIGINT   ns: time of the last sample, ns
-- @column current_ts_raw   BIGINT   the same time as written in the file (µs for G1 sources)
-- @column peak_frag_pct    DOUBLE   percent: highest fragmentation
-- @column peak_ts          BIGINT   ns: time of the first sample reaching the peak, ns
-- @column peak_ts_raw      BIGINT   the same time as written in the file
-- @column mean_frag_pct    DOUBLE   percent: mean fragmentation over the samples
-- @column level            VARCHAR  classification of current_frag_pct: normal (< 5), elevated (5–15), severe (> 15), invalid (< 0)
-- @column peak_level       VARCHAR  classification of peak_frag_pct, same thresholds
-- @column used_last        BIGINT   bytes: live in the pool at the last sample
-- @column total_last       BIGINT   bytes: reserved by the pool at the last sample
-- @column peak_total       BIGINT   bytes: highest reservation of the series
-- @column lowest_usage     STRUCT[] the 5 samples with the lowest usage (used / total), lowest first, earliest first on ties: list of {ts (ns), ts_raw (file unit), usage_pct (percent), used (bytes), total (bytes)}
WITH
-- rows of framework pools that carry a reservation counter (table curve: every MALLOC/FREE
-- row, stored by series then time, so the per-series steps below need no sort)
pool_rows AS (
    SELECT source, pid, device, pool, ts, ts_raw, row_idx, used, total, row_idx % 5 AS part,
           used IS NOT NULL AND total > 0 AS s,
           CASE WHEN used IS NOT NULL AND total > 0 THEN CAST(total - used AS DOUBLE) / CAST(total AS DOUBLE) * 100.0 END AS frag_pct,
           CASE WHEN used IS NOT NULL AND total > 0 THEN CAST(used AS DOUBLE) / CAST(total AS DOUBLE) * 100.0 END AS usage_pct
    FROM curve
    WHERE pool <> 'HAL' AND total IS NOT NULL
),
-- fragmentation samples: the rows that carry both counters with total > 0 (s)
samples AS (
    SELECT * FROM pool_rows WHERE s
),
-- one pass over the rows: the row counts, the sample figures (FILTER: the samples), and the
-- bound of the 5 lowest-usage samples, found without sorting every sample: the minima of 5
-- disjoint subsets (row_idx mod 5) are 5 different rows, so the 5th lowest usage is at most the
-- largest of those minima; only the samples at or under that bound are ranked
per_series AS (
    SELECT source, pid, device, pool,
           COUNT(*) AS rows,
           MAX(total) AS peak_total,
           COUNT(*) FILTER (WHERE s) AS samples,
           last_value(frag_pct ORDER BY ts, row_idx) FILTER (WHERE s) AS current_frag_pct,
           MAX(ts) FILTER (WHERE s) AS current_ts,
           last_value(ts_raw ORDER BY ts, row_idx) FILTER (WHERE s) AS current_ts_raw,
           MAX(frag_pct) FILTER (WHERE s) AS peak_frag_pct,
           first_value(ts ORDER BY frag_pct DESC, ts, row_idx) FILTER (WHERE s) AS peak_ts,
           first_value(ts_raw ORDER BY frag_pct DESC, ts, row_idx) FILTER (WHERE s) AS peak_ts_raw,
           AVG(frag_pct) FILTER (WHERE s) AS mean_frag_pct,
           last_value(used ORDER BY ts, row_idx) FILTER (WHERE s) AS used_last,
           last_value(total ORDER BY ts, row_idx) FILTER (WHERE s) AS total_last,
           MIN(usage_pct) FILTER (WHERE s AND part = 0) AS low0,
           MIN(usage_pct) FILTER (WHERE s AND part = 1) AS low1,
           MIN(usage_pct) FILTER (WHERE s AND part = 2) AS low2,
           MIN(usage_pct) FILTER (WHERE s AND part = 3) AS low3,
           MIN(usage_pct) FILTER (WHERE s AND part = 4) AS low4
    FROM pool_rows
    GROUP BY source, pid, device, pool
),
bounds AS (
    SELECT source, pid, device, pool,
           CASE WHEN low0 IS NOT NULL AND low1 IS NOT NULL AND low2 IS NOT NULL AND low3 IS NOT NULL
                     AND low4 IS NOT NULL
                THEN GREATEST(low0, low1, low2, low3, low4) END AS bound
    FROM per_series
    WHERE samples > 0
),
lowest_ranked AS (
    SELECT s.*,
           ROW_NUMBER() OVER (PARTITION BY s.source, s.pid, s.device, s.pool ORDER BY s.usage_pct, s.ts, s.row_idx) AS usage_rank
    -- the few bounds first: the side a join holds in memory (the samples stream past it)
    FROM bounds b
    JOIN samples s ON b.source = s.source AND (b.pid IS NOT DISTINCT FROM s.pid) AND b.device = s.device AND b.pool = s.pool
    WHERE b.bound IS NULL OR s.usage_pct <= b.bound
),
lowest AS (
    SELECT source, pid, device, pool,
           array_agg(named_struct('ts', ts, 'ts_raw', ts_raw, 'usage_pct', usage_pct, 'used', used, 'total', total)
                     ORDER BY usage_rank) AS lowest_usage
    FROM lowest_ranked
    WHERE usage_rank <= 5
    GROUP BY source, pid, device, pool
),
-- the reservation growths found at ingest (table expansions; view pool_expansions adds the
-- HAL segments that came with each)
expansion_counts AS (
    SELECT source, pid, device, pool, COUNT(*) AS expansions
    FROM expansions
    GROUP BY source, pid, device, pool
)
SELECT s.source, s.pid, s.device, s.pool, s.rows,
       s.samples,
       COALESCE(x.expansions, 0) AS expansions,
       s.current_frag_pct, s.current_ts, s.current_ts_raw, s.peak_frag_pct, s.peak_ts, s.peak_ts_raw, s.mean_frag_pct,
       CASE WHEN s.current_frag_pct IS NULL THEN NULL
            WHEN s.current_frag_pct < 0 THEN 'invalid'
            WHEN s.current_frag_pct < 5 THEN 'normal'
            WHEN s.current_frag_pct <= 15 THEN 'elevated'
            ELSE 'severe' END AS level,
       CASE WHEN s.peak_frag_pct IS NULL THEN NULL
            WHEN s.peak_frag_pct < 0 THEN 'invalid'
            WHEN s.peak_frag_pct < 5 THEN 'normal'
            WHEN s.peak_frag_pct <= 15 THEN 'elevated'
            ELSE 'severe' END AS peak_level,
       s.used_last, s.total_last, s.peak_total, l.lowest_usage
FROM per_series s
LEFT JOIN lowest l
       ON l.source = s.source AND (l.pid IS NOT DISTINCT FROM s.pid) AND l.device = s.device AND l.pool = s.pool
LEFT JOIN expansion_counts x
       ON x.source = s.source AND (x.pid IS NOT DISTINCT FROM s.pid) AND x.device = s.device AND x.pool = s.pool
