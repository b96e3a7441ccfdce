-- pool_expansions as it was before table expansions (computed at ingest): LAG over every pool row.
WITH
-- rows of framework pools that carry a reservation counter
pool_rows AS (
    SELECT source, pid, device, pool, ts, ts_raw, row_idx, event, used, total,
           FALSE AS is_hal, 0 AS hal_size
    FROM curve
    WHERE pool <> 'HAL' AND total IS NOT NULL
),
-- HAL MALLOCs (not promoted stock) of the same file/process/device
hal_rows AS (
    SELECT source, pid, device, CAST(NULL AS VARCHAR) AS pool, ts, ts_raw, row_idx, event,
           CAST(NULL AS BIGINT) AS used, CAST(NULL AS BIGINT) AS total,
           TRUE AS is_hal, COALESCE(size, 0) AS hal_size
    FROM events
    WHERE event = 'MALLOC' AND event_type = 'HAL' AND NOT shadow
),
-- one stream per (source, pid, device): running count/bytes of HAL MALLOCs seen so far
stream AS (
    SELECT *,
           SUM(CASE WHEN is_hal THEN 1 ELSE 0 END) OVER w AS hal_n_cum,
           SUM(hal_size) OVER w AS hal_bytes_cum
    FROM (SELECT * FROM pool_rows UNION ALL SELECT * FROM hal_rows) r
    WINDOW w AS (PARTITION BY source, pid, device ORDER BY ts, row_idx
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- each pool row with the previous row of the same pool series
with_prev AS (
    SELECT source, pid, device, pool, ts, ts_raw, row_idx, event, used, total, hal_n_cum, hal_bytes_cum,
           LAG(total) OVER p AS prev_total,
           LAG(used) OVER p AS prev_used,
           LAG(hal_n_cum) OVER p AS prev_hal_n_cum,
           LAG(hal_bytes_cum) OVER p AS prev_hal_bytes_cum
    FROM stream
    WHERE NOT is_hal
    WINDOW p AS (PARTITION BY source, pid, device, pool ORDER BY ts, row_idx)
)
SELECT source, pid, device, pool,
       ROW_NUMBER() OVER (PARTITION BY source, pid, device, pool ORDER BY ts, row_idx) AS n,
       ts, ts_raw, event,
       prev_total AS total_before,
       total AS total_after,
       total - prev_total AS delta,
       prev_used AS used_before,
       used AS used_after,
       CASE WHEN prev_total > 0 AND prev_used IS NOT NULL
            THEN CAST(prev_used AS DOUBLE) / CAST(prev_total AS DOUBLE) * 100.0 END AS usage_before_pct,
       hal_n_cum - prev_hal_n_cum AS hal_segments,
       hal_bytes_cum - prev_hal_bytes_cum AS hal_bytes
FROM with_prev
WHERE total > prev_total
