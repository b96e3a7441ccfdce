-- peaks as a query over `curve`, as memq computed it per query before ingest kept it (table
-- curve_peaks): see crates/memscope/sql/peaks.sql for what each column means.
-- tests/it/derived_oracle.rs checks the view against it.
WITH
-- The curve unpivoted: one row per row and metric, invalid counter values (negative:
-- unsupported, or absent) dropped.
metric_points AS (
    SELECT c.source, c.pid, c.device, c.pool, m.metric, c.ts, c.ts_raw, c.row_idx, c.id, c.event,
           CASE m.metric
               WHEN 'used' THEN c.used
               WHEN 'total' THEN c.total
               WHEN 'process_used' THEN c.process_used
               WHEN 'device_used' THEN c.device_used
               ELSE c.live_bytes
           END AS value
    FROM curve c
    CROSS JOIN (VALUES ('used'), ('total'), ('process_used'), ('device_used'), ('live')) AS m(metric)
)
-- Per series and metric: the maximum, and the first row (ts, then file order) holding it.
SELECT source, pid, device, pool, metric,
       MAX(value) AS peak_bytes,
       FIRST_VALUE(ts ORDER BY value DESC, ts, row_idx) AS peak_ts,
       FIRST_VALUE(ts_raw ORDER BY value DESC, ts, row_idx) AS peak_ts_raw,
       FIRST_VALUE(event ORDER BY value DESC, ts, row_idx) AS peak_event,
       FIRST_VALUE(id ORDER BY value DESC, ts, row_idx) AS peak_id,
       COUNT(*) AS points
FROM metric_points
WHERE value >= 0
GROUP BY source, pid, device, pool, metric
