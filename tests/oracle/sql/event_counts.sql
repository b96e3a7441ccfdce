-- The oracle of table event_counts (counted at ingest, crates/memscope/src/counts.rs): the
-- GROUP BY over events that stats.sql ran per query before.
SELECT source, pid, device, event, event_type,
       COUNT(*) AS rows,
       MIN(ts) AS first_ts, MAX(ts) AS last_ts,
       MIN(ts_raw) AS first_ts_raw, MAX(ts_raw) AS last_ts_raw,
       COUNT(NULLIF(owner, '')) AS owner_rows,
       COUNT(CASE WHEN shadow THEN 1 END) AS shadow_rows,
       COUNT(NULLIF(trim(stack_py), '')) AS py_stack_rows,
       COUNT(NULLIF(trim(stack_c), '')) AS c_stack_rows,
       COUNT(CASE WHEN used IS NOT NULL OR total IS NOT NULL THEN 1 END) AS counter_rows,
       COUNT(CASE WHEN device_used >= 0 THEN 1 END) AS device_used_rows,
       SUM(size) AS size_bytes
FROM events
GROUP BY source, pid, device, event, event_type
