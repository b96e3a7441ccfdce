-- pool_expansions: each time a framework pool grew its reservation (`total` rose), with the HAL segments that came with it.
--
-- A pool's counters are one series per (source, pid, device, pool), read in canonical order
-- (timestamp, then file order); an expansion is a row whose `total` is larger than the `total`
-- of the previous row of the same series that carries one (found at ingest: table expansions). `hal_segments`/`hal_bytes` count the HAL MALLOCs of
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
-- each expansion as two marks: at the previous row of its series (side 0) and at itself
-- (side 1); the HAL MALLOCs between them are those counted at side 1 and not at side 0
marks AS (
    SELECT source, pid, device, pool, row_idx AS key, side,
           CASE WHEN side = 0 THEN prev_ts ELSE ts END AS ts,
           CASE WHEN side = 0 THEN prev_row_idx ELSE row_idx END AS row_idx,
           0 AS hal_size
    FROM (SELECT *, unnest([0, 1]) AS side FROM expansions) e
),
-- HAL MALLOCs (not promoted stock)
hal_rows AS (
    SELECT source, pid, device, CAST(NULL AS VARCHAR) AS pool, CAST(NULL AS BIGINT UNSIGNED) AS key,
           -1 AS side, ts, row_idx, COALESCE(size, 0) AS hal_size
    FROM hal_mallocs
    WHERE NOT shadow
),
-- one stream per (source, pid, device) of marks and HAL MALLOCs: the running count and bytes
-- of the HAL MALLOCs up to each mark
counted AS (
    SELECT *,
           SUM(CASE WHEN side < 0 THEN 1 ELSE 0 END) OVER w AS hal_n_cum,
           SUM(hal_size) OVER w AS hal_bytes_cum
    FROM (SELECT * FROM marks UNION ALL SELECT * FROM hal_rows) r
    WINDOW w AS (PARTITION BY source, pid, device ORDER BY ts, row_idx
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
hal AS (
    SELECT source, pid, device, pool, key,
           MAX(hal_n_cum) FILTER (WHERE side = 1) - MAX(hal_n_cum) FILTER (WHERE side = 0) AS hal_segments,
           MAX(hal_bytes_cum) FILTER (WHERE side = 1) - MAX(hal_bytes_cum) FILTER (WHERE side = 0) AS hal_bytes
    FROM counted
    WHERE side >= 0
    GROUP BY source, pid, device, pool, key
)
SELECT e.source, e.pid, e.device, e.pool,
       ROW_NUMBER() OVER (PARTITION BY e.source, e.pid, e.device, e.pool ORDER BY e.ts, e.row_idx) AS n,
       e.ts, e.ts_raw, e.event,
       e.total_before,
       e.total_after,
       e.total_after - e.total_before AS delta,
       e.used_before,
       e.used_after,
       CASE WHEN e.total_before > 0 AND e.used_before IS NOT NULL
            THEN CAST(e.used_before AS DOUBLE) / CAST(e.total_before AS DOUBLE) * 100.0 END AS usage_before_pct,
       h.hal_segments,
       h.hal_bytes
FROM expansions e
JOIN hal h
  ON h.source = e.source AND (h.pid IS NOT DISTINCT FROM e.pid) AND h.device = e.device
 AND h.pool = e.pool AND h.key = e.row_idx
