-- owner_peaks: per owner of each (pid, device, pool): peak live bytes (running sum of the
-- owner's block sizes, +size at the MALLOC, -size where the block really ends), bytes and
-- blocks allocated, bytes held at the end (memq view owner_peaks). A block without owner is
-- '(stock)' when its MALLOC is a promoted shadow row, else its pool name.
WITH owned AS (
    SELECT pid, device, pool,
           COALESCE(owner, CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner,
           size, alloc_ts, alloc_row, end_ts, end_row
    FROM block_fates
    WHERE alloc_ts IS NOT NULL
),
deltas AS (
    SELECT pid, device, pool, owner,
           CASE WHEN d.sign = 1 THEN alloc_ts ELSE end_ts END AS ts,
           CASE WHEN d.sign = 1 THEN alloc_row ELSE end_row END AS row_idx,
           d.sign * size AS delta,
           CASE WHEN d.sign = 1 THEN 1 ELSE 0 END AS allocation
    FROM owned, (VALUES (1), (-1)) d(sign)
    WHERE d.sign = 1 OR end_ts IS NOT NULL
),
live AS (
    SELECT *,
           SUM(delta) OVER (PARTITION BY pid, device, pool, owner ORDER BY ts, row_idx, delta
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live
    FROM deltas
)
SELECT pid, device, pool, owner,
       MAX(live) AS peak_bytes,
       first(ts ORDER BY live DESC, ts, row_idx) AS peak_ts,
       SUM(delta) FILTER (WHERE allocation = 1) AS total_bytes,
       SUM(allocation) AS blocks,
       SUM(delta) AS end_bytes
FROM live
GROUP BY ALL
ORDER BY pid, device, pool, peak_bytes DESC, owner
