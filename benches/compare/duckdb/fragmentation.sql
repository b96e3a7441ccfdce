-- fragmentation: per (pid, device, pool) of the framework pools, (total - used) / total of each
-- row that carries both counters with total > 0: current (last), peak (first row reaching it),
-- mean, the 5 lowest usages, and the number of reservation expansions (memq views
-- fragmentation and pool_expansions).
WITH pool_rows AS (
    SELECT pid, device, pool, ts, row_idx, used, total,
           total > LAG(total) OVER (PARTITION BY pid, device, pool ORDER BY ts, row_idx) AS expansion
    FROM mem
    WHERE pool <> 'HAL' AND total IS NOT NULL
),
samples AS (
    SELECT *,
           (total - used)::DOUBLE / total::DOUBLE * 100.0 AS frag_pct,
           used::DOUBLE / total::DOUBLE * 100.0 AS usage_pct
    FROM pool_rows
    WHERE used IS NOT NULL AND total > 0
),
per_series AS (
    SELECT pid, device, pool, COUNT(*) AS samples,
           last(frag_pct ORDER BY ts, row_idx) AS current_frag_pct,
           MAX(frag_pct) AS peak_frag_pct,
           first(ts ORDER BY frag_pct DESC, ts, row_idx) AS peak_ts,
           AVG(frag_pct) AS mean_frag_pct,
           last(used ORDER BY ts, row_idx) AS used_last,
           last(total ORDER BY ts, row_idx) AS total_last,
           list({'ts': ts, 'usage_pct': usage_pct, 'used': used, 'total': total}
                ORDER BY usage_pct, ts, row_idx)[1:5] AS lowest_usage
    FROM samples
    GROUP BY ALL
),
counts AS (
    SELECT pid, device, pool, COUNT(*) AS rows, COUNT(*) FILTER (WHERE expansion) AS expansions,
           MAX(total) AS peak_total
    FROM pool_rows GROUP BY ALL
)
SELECT c.pid, c.device, c.pool, c.rows, s.samples, c.expansions,
       s.current_frag_pct, s.peak_frag_pct, s.peak_ts, s.mean_frag_pct,
       CASE WHEN s.current_frag_pct < 0 THEN 'invalid' WHEN s.current_frag_pct < 5 THEN 'normal'
            WHEN s.current_frag_pct <= 15 THEN 'elevated' ELSE 'severe' END AS level,
       s.used_last, s.total_last, c.peak_total, s.lowest_usage
FROM counts c LEFT JOIN per_series s USING (pid, device, pool)
ORDER BY c.pid, c.device, c.pool
