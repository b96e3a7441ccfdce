-- trace_memory_peaks: the peak of total allocated and of total reserved memory per device of a torch.profiler trace, with its time and the op running then.
--
-- From trace_memory (the [memory] events of torch.profiler / Kineto Chrome traces): one row per
-- (source, device, metric) where metric is allocated (Total Allocated) or reserved (Total
-- Reserved). The peak is the highest value; its time is that of the first event reaching it in
-- time order (trace order for events of the same time). In a trace without totals (2021
-- layout) allocated is the running sum of Bytes and reserved is not listed. ORDER BY source,
-- device, metric.
--
-- @column source     VARCHAR trace the event comes from
-- @column device     VARCHAR cpu, cuda:0, npu:1, ...
-- @column metric     VARCHAR allocated or reserved
-- @column peak_bytes BIGINT  bytes: the highest value of the metric
-- @column peak_ts    BIGINT  ns: time of the first event reaching the peak, ns since the Unix epoch
-- @column peak_event BIGINT  position of that event in traceEvents (0-based)
-- @column op         VARCHAR the innermost CPU op on the event's thread at the peak; NULL when none
-- @column rebuilt    BOOLEAN whether the values were rebuilt from Bytes (the trace has no totals)
-- @column events     BIGINT  count: events of the device with a value of the metric
WITH
points AS (
    SELECT t.source, t.device, m.metric, t.ts, CAST(t.event AS BIGINT) AS event, t.op,
           t.totals_rebuilt,
           CASE m.metric WHEN 'allocated' THEN t.total_allocated ELSE t.total_reserved END AS value
    FROM trace_memory t
    CROSS JOIN (VALUES ('allocated'), ('reserved')) AS m(metric)
)
SELECT source, device, metric,
       MAX(value) AS peak_bytes,
       FIRST_VALUE(ts ORDER BY value DESC, ts, event) AS peak_ts,
       FIRST_VALUE(event ORDER BY value DESC, ts, event) AS peak_event,
       FIRST_VALUE(op ORDER BY value DESC, ts, event) AS op,
       BOOL_OR(totals_rebuilt) AS rebuilt,
       COUNT(*) AS events
FROM points
WHERE value IS NOT NULL
GROUP BY source, device, metric
