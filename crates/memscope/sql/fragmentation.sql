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
-- The figures of each series are folded at ingest, as `curve` is written (table pool_frag,
-- crates/memscope/src/derive/frag.rs: one pass over the pool rows in time order, the 5 lowest-usage
-- samples kept as it goes); tests/oracle/sql/fragmentation.sql computes the same from `curve`
-- and the tests check that both agree. `expansions` counts the rows of table expansions.
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
       s.used_last, s.total_last, s.peak_total, s.lowest_usage
FROM pool_frag s
LEFT JOIN expansion_counts x
       ON x.source = s.source AND (x.pid IS NOT DISTINCT FROM s.pid) AND x.device = s.device AND x.pool = s.pool
