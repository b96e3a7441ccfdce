-- peaks: per (pid, device, pool) and metric, the highest value and the first row (ts, then
-- file order) reaching it (memq view peaks). Metrics: the counters written on the rows (used,
-- total) and `live`, the running sum of paired block sizes (the only peak HAL has).
WITH deltas AS (
    SELECT pid, device, pool, ts, row_idx, SUM(delta) AS delta
    FROM (
        -- each block twice: +size at its MALLOC, -size at the row that ends it
        SELECT pid, device, pool,
               CASE WHEN d.sign = 1 THEN alloc_ts ELSE end_ts END AS ts,
               CASE WHEN d.sign = 1 THEN alloc_row ELSE end_row END AS row_idx,
               d.sign * size AS delta
        FROM block_fates, (VALUES (1), (-1)) d(sign)
        WHERE alloc_ts IS NOT NULL AND (d.sign = 1 OR end_ts IS NOT NULL)
    ) d
    GROUP BY ALL
),
live AS (
    SELECT pid, device, pool, ts, row_idx,
           SUM(delta) OVER (PARTITION BY pid, device, pool ORDER BY ts, row_idx
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS value
    FROM deltas
),
points AS (
    SELECT pid, device, pool, 'used' AS metric, ts, row_idx, used AS value FROM mem WHERE used >= 0
    UNION ALL
    SELECT pid, device, pool, 'total', ts, row_idx, total FROM mem WHERE total >= 0
    UNION ALL
    SELECT pid, device, pool, 'live', ts, row_idx, value FROM live WHERE value >= 0
)
SELECT pid, device, pool, metric,
       MAX(value) AS peak_bytes,
       first(ts ORDER BY value DESC, ts, row_idx) AS peak_ts
FROM points
GROUP BY ALL
ORDER BY pid, device, pool, metric
