-- peak_split: the peak of every pool split into static and dynamic memory, by category and by user frame.
--
-- Sums of peak_blocks (see there for the peak, static vs dynamic, category and user frame rules):
-- one row per series (source, pid, device, pool), dimension (category or user_frame) and key,
-- with the bytes of the key's static and dynamic blocks live at the peak. The rows of one
-- dimension add up to peak_bytes. Blocks without a user frame are keyed '(no user frame)'.
-- This is what Mosaic calls peak attribution by category and by stack; for snapshots see
-- snap_peak_blocks.
--
-- Rows come in no particular order: ORDER BY source, pid, device, pool, dimension, bytes DESC.
-- @column source        VARCHAR input file
-- @column pid           BIGINT  process id
-- @column device        VARCHAR Device Id as written
-- @column pool          VARCHAR pool = Event Type
-- @column peak_ts       BIGINT  ns: time of the peak, ns
-- @column peak_bytes    BIGINT  bytes: live bytes of the series at the peak
-- @column dimension     VARCHAR category or user_frame: what key is
-- @column key           VARCHAR the category, or the user frame
-- @column bytes         BIGINT  bytes: live at the peak under this key
-- @column static_bytes  BIGINT  bytes: of those, static memory (allocated before the window, never released)
-- @column dynamic_bytes BIGINT  bytes: of those, dynamic memory
-- @column blocks        BIGINT  count: blocks live at the peak under this key
-- @column pct_of_peak   DOUBLE  percent: bytes / peak_bytes × 100, 2 decimals
WITH
keyed AS (
    SELECT source, pid, device, pool, peak_ts, peak_bytes, size, kind, 'category' AS dimension, category AS key
    FROM peak_blocks
    UNION ALL
    SELECT source, pid, device, pool, peak_ts, peak_bytes, size, kind, 'user_frame' AS dimension,
           COALESCE(user_frame, '(no user frame)') AS key
    FROM peak_blocks
)
SELECT source, pid, device, pool, MAX(peak_ts) AS peak_ts, MAX(peak_bytes) AS peak_bytes, dimension, key,
       SUM(size) AS bytes,
       COALESCE(SUM(size) FILTER (WHERE kind = 'static'), 0) AS static_bytes,
       COALESCE(SUM(size) FILTER (WHERE kind = 'dynamic'), 0) AS dynamic_bytes,
       COUNT(*) AS blocks,
       round(100.0 * CAST(SUM(size) AS DOUBLE) / CAST(NULLIF(MAX(peak_bytes), 0) AS DOUBLE), 2) AS pct_of_peak
FROM keyed
GROUP BY source, pid, device, pool, dimension, key
