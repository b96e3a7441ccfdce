-- step_usage as the view step_peaks computed it per query before ingest folded it (table
-- step_usage): per series and interval k = curve.step_k, the points of usage_series with a
-- used value, those inside the step (curve.step set) apart. tests/it/derived_oracle.rs checks
-- the table against it, and step_peaks against step_peaks.sql read from this view with its
-- pools taken from `curve` (as they were).
SELECT source, pid, device, pool, CAST(step_k AS BIGINT) AS step_k,
       COUNT(step) AS points,
       MAX(used) FILTER (WHERE step IS NOT NULL) AS max_used,
       first_value(ts ORDER BY used DESC NULLS LAST, ts, row_idx) FILTER (WHERE step IS NOT NULL) AS max_ts,
       last_value(used ORDER BY ts, row_idx) FILTER (WHERE step IS NOT NULL) AS last_inside,
       last_value(used ORDER BY ts, row_idx) AS last_value
FROM usage_series
WHERE ts IS NOT NULL AND used IS NOT NULL AND step_k IS NOT NULL
GROUP BY source, pid, device, pool, step_k
