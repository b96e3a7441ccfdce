-- peaks: the peak of each memory counter, per pool of each process and device.
--
-- One row per series (source, pid, device, pool) and metric:
--   used, total, process_used, device_used  the highest value the tool wrote on the series' rows
--                                           (only values >= 0 count: device_used = -1 means unsupported);
--   live                                    the highest live bytes memq computes from `blocks`
--                                           (`curve.live_bytes`), for every pool: this is the only
--                                           peak of pools without counters, such as HAL.
-- A metric without any valid point is not listed. On ties the earliest row wins.
-- Rows come in no particular order.
-- Pools, processes and devices are never mixed (the reference `--peak` mixes them, quirk 9).
--
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column pool        VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column metric      VARCHAR used, total, process_used, device_used (counters written by the tool) or live (memq's pairing)
-- @column peak_bytes  BIGINT  bytes: the highest value of the metric in the series
-- @column peak_ts     BIGINT  ns: time of the first row reaching the peak, ns since the Unix epoch
-- @column peak_ts_raw BIGINT  the same time as written in the file (µs for G1 sources)
-- @column peak_event  VARCHAR MALLOC or FREE: the event of that row
-- @column peak_id     BIGINT  the tool's event ID of that row
-- @column points      BIGINT  count: number of rows with a valid value of the metric in the series
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
