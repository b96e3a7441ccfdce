-- prof_component_peaks: the peak of each memory counter of each profiler component, with its time.
--
-- From prof_memory_record (Ascend PyTorch Profiler, memory_record.csv): one row per
-- (source, device, component, metric) where metric is allocated, reserved or active; a metric
-- the component never writes (APP has only reserved, GE no active) is not listed. The peak is
-- the highest value; its time is that of the first row reaching it in time order (file order
-- for rows of the same time). ORDER BY device, component, metric.
--
-- @column source     VARCHAR memory_record.csv the row comes from
-- @column device     VARCHAR Device Type as written (NPU:0)
-- @column component  VARCHAR APP, PTA, GE or PTA+GE
-- @column metric     VARCHAR allocated, reserved or active
-- @column peak_bytes BIGINT  bytes: the highest value of the metric
-- @column peak_ts    BIGINT  ns: time of the first row reaching the peak, ns since the Unix epoch
-- @column peak_line  BIGINT  line of that row in its file
-- @column first_ts   BIGINT  ns: time of the component's first row with the metric
-- @column last_ts    BIGINT  ns: time of its last row with the metric
-- @column points     BIGINT  count: rows with a value of the metric
WITH
points AS (
    SELECT r.source, r.device, r.component, m.metric, r.ts, CAST(r.line AS BIGINT) AS line,
           CASE m.metric
               WHEN 'allocated' THEN r.allocated
               WHEN 'reserved' THEN r.reserved
               ELSE r.active
           END AS value
    FROM prof_memory_record r
    CROSS JOIN (VALUES ('allocated'), ('reserved'), ('active')) AS m(metric)
)
SELECT source, device, component, metric,
       MAX(value) AS peak_bytes,
       FIRST_VALUE(ts ORDER BY value DESC, ts, line) AS peak_ts,
       FIRST_VALUE(line ORDER BY value DESC, ts, line) AS peak_line,
       MIN(ts) AS first_ts,
       MAX(ts) AS last_ts,
       COUNT(*) AS points
FROM points
WHERE value IS NOT NULL
GROUP BY source, device, component, metric
