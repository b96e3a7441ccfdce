-- pool_expansions: each time a framework pool grew its reservation (`total` rose), with the HAL segments that came with it.
--
-- A pool's counters are one series per (source, pid, device, pool), read in canonical order
-- (timestamp, then file order); an expansion is a row whose `total` is larger than the `total`
-- of the previous row of the same series. `hal_segments`/`hal_bytes` count the HAL MALLOCs of
-- the same file, process and device between the previous row of the pool and this one — the
-- driver allocations that normally back the growth (a plausibility check: sizes should add up
-- to `delta`). Promoted shadow HAL MALLOCs (memory allocated before collection) are not counted.
-- Differences from the reference (`--fragmentation` expansion table): series never mix
-- processes/devices, HAL segments of other devices/processes are not counted, no 4096/500 caps
-- (docs/reference-differences.md).
--
-- Rows come in no particular order: ORDER BY source, pid, device, pool, ts.
-- @column source           VARCHAR input file
-- @column pid              BIGINT  process id
-- @column device           VARCHAR Device Id as written
-- @column pool             VARCHAR pool (Event Type) whose reservation grew: PTA, ATB, MINDSPORE, PTA_WORKSPACE
-- @column n                UBIGINT 1-based number of the expansion within its series
-- @column ts               BIGINT  ns: time of the row that shows the larger total, ns
-- @column ts_raw           BIGINT  the same time as written in the file (µs for G1 sources)
-- @column event            VARCHAR MALLOC or FREE: the row that shows the larger total
-- @column total_before     BIGINT  bytes: reserved by the pool before (total of the previous row)
-- @column total_after      BIGINT  bytes: reserved by the pool after (total of this row)
-- @column delta            BIGINT  bytes: added to the reservation (total_after - total_before)
-- @column used_before      BIGINT  bytes: live in the pool just before the expansion (used of the previous row)
-- @column used_after       BIGINT  bytes: live in the pool after this row
-- @column usage_before_pct DOUBLE  percent: used_before / total_before × 100 — how full the pool was when it grew (NULL when total_before is 0 or used unknown)
-- @column hal_segments     BIGINT  count: HAL MALLOCs of the same source/pid/device since the previous row of the pool
-- @column hal_bytes        BIGINT  bytes: sum of the sizes of those HAL MALLOCs
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
