-- breakdown_at(ts, pool): blocks of the pool live at ts (allocated at or before it, not ended
-- by then), bytes and blocks per owner (memq view breakdown_at).
WITH live AS (
    SELECT pid, device, pool,
           COALESCE(owner, CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner, size
    FROM blocks
    WHERE alloc_ts <= $TS AND (free_ts IS NULL OR free_ts > $TS) AND pool = $POOL
),
by_owner AS (
    SELECT pid, device, pool, owner, SUM(size) AS bytes, COUNT(*) AS blocks
    FROM live GROUP BY ALL
)
SELECT *, 100.0 * bytes / NULLIF(SUM(bytes) OVER (PARTITION BY pid, device, pool), 0) AS share
FROM by_owner
ORDER BY pid, device, pool, bytes DESC, owner
