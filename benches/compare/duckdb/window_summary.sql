-- window_summary(t0, t1, pool): per (pid, device, pool), the blocks live at the start and at
-- the end of [t0, t1] (both inclusive), allocations (promoted shadow MALLOCs apart), real and
-- shadow frees, address reuses, and the highest pool level inside the window (memq view
-- window_summary; the top-group lists are left out).
WITH classified AS (
    SELECT pid, device, pool, size, free_kind, stock,
           alloc_ts < $T0 AND (free_ts IS NULL OR free_ts >= $T0) AS live_start,
           alloc_ts <= $T1 AND (free_ts IS NULL OR free_ts > $T1) AS live_end,
           alloc_ts >= $T0 AND alloc_ts <= $T1 AS allocated,
           free_ts >= $T0 AND free_ts <= $T1 AS ended
    FROM blocks
    WHERE alloc_ts IS NOT NULL AND pool = $POOL
),
totals AS (
    SELECT pid, device, pool,
           COUNT(*) FILTER (WHERE live_start) AS start_blocks,
           COALESCE(SUM(size) FILTER (WHERE live_start), 0) AS start_bytes,
           COUNT(*) FILTER (WHERE allocated AND NOT stock) AS alloc_count,
           COALESCE(SUM(size) FILTER (WHERE allocated AND NOT stock), 0) AS alloc_bytes,
           COUNT(*) FILTER (WHERE allocated AND stock) AS promoted_count,
           COALESCE(SUM(size) FILTER (WHERE allocated AND stock), 0) AS promoted_bytes,
           COUNT(*) FILTER (WHERE ended AND free_kind = 'real') AS free_count,
           COALESCE(SUM(size) FILTER (WHERE ended AND free_kind = 'real'), 0) AS free_bytes,
           COUNT(*) FILTER (WHERE ended AND free_kind = 'shadow') AS shadow_free_count,
           COALESCE(SUM(size) FILTER (WHERE ended AND free_kind = 'shadow'), 0) AS shadow_free_bytes,
           COUNT(*) FILTER (WHERE ended AND free_kind = 'replaced') AS replaced_count,
           COUNT(*) FILTER (WHERE live_end) AS end_blocks,
           COALESCE(SUM(size) FILTER (WHERE live_end), 0) AS end_bytes
    FROM classified
    GROUP BY ALL
),
peaks AS (
    SELECT pid, device, pool, MAX(used) AS used_peak, first(ts ORDER BY used DESC, ts, row_idx) AS used_peak_ts
    FROM usage_series
    WHERE ts >= $T0 AND ts <= $T1 AND used IS NOT NULL AND pool = $POOL
    GROUP BY ALL
)
SELECT t.*, t.end_blocks - t.start_blocks AS net_blocks, t.end_bytes - t.start_bytes AS net_bytes,
       p.used_peak, p.used_peak_ts
FROM totals t
LEFT JOIN peaks p ON p.pid IS NOT DISTINCT FROM t.pid AND p.device = t.device AND p.pool = t.pool
ORDER BY t.pid, t.device, t.pool
