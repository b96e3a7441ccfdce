-- rank_peaks: the peak of every pool on every rank of a job, with the step it fell in, how it compares with the other ranks, and who held the memory then (owner group and user frame).
--
-- A rank's peak is the highest value of its pool's series (usage_series: framework pools the
-- `used` counter the tool wrote, HAL paired live bytes), over the whole run, steps or not; the
-- first row reaching it gives peak_ts and the step it falls in (curve.step, found at ingest).
-- When a rank has several series of a pool on one device (several files of one process), the
-- highest one counts. Ranks come from table sources (docs/scale-out.md).
-- At peak_ts, the blocks of that series live then — allocated at or before peak_ts and not
-- ended before it (blocks.end_ts, the end-state rule of every view) — are grouped by level-1
-- owner group and by user frame (function user_frame: the innermost frame of the MALLOC's
-- Python stack outside the libraries; docs/attribution.md); the largest of each is named.
-- order_in_job ranks the ranks of a pool by peak (1 = the job's peak rank); ratio_to_median
-- compares the rank with the median rank peak of the pool.
--
-- Rows come in no particular order: ORDER BY pool, order_in_job.
-- @column rank              BIGINT  rank of the job (sources.rank)
-- @column node              VARCHAR machine of the rank (sources.node)
-- @column device            VARCHAR Device Id of the series
-- @column pool              VARCHAR pool (Event Type); HAL values are paired live bytes
-- @column source            VARCHAR input file of the series holding the peak
-- @column pid               BIGINT  process id
-- @column peak_bytes        BIGINT  bytes: highest level of the pool on this rank
-- @column peak_ts           BIGINT  ns: time of the first row reaching it, ns
-- @column step              BIGINT  step the peak fell in (curve.step); NULL outside every step
-- @column order_in_job      BIGINT  count: position of this rank among the ranks of the pool by peak_bytes (1 = highest; ties: lower rank first)
-- @column ratio_to_median   DOUBLE  peak_bytes / the median peak_bytes of the pool over the ranks; NULL when that is 0
-- @column top_owner_group   VARCHAR level-1 owner group holding the most bytes at the peak ('(unlabelled)' without owner); NULL when no block is known live
-- @column top_owner_bytes   BIGINT  bytes: live bytes of that owner group at the peak
-- @column top_user_frame    VARCHAR user frame holding the most bytes at the peak ('(no user frame)' without one)
-- @column top_frame_bytes   BIGINT  bytes: live bytes allocated from that frame at the peak
WITH series AS (
    SELECT source, pid, device, pool,
           MAX(used) AS peak_bytes,
           first_value(ts ORDER BY used DESC, ts, row_idx) AS peak_ts,
           first_value(step ORDER BY used DESC, ts, row_idx) AS step
    FROM usage_series
    GROUP BY source, pid, device, pool
),
per_rank AS (
    SELECT s.rank, s.node, x.*,
           ROW_NUMBER() OVER (PARTITION BY s.rank, x.device, x.pool ORDER BY x.peak_bytes DESC, x.source) AS k
    FROM series x
    JOIN sources s ON s.source = x.source
),
peaks AS (
    SELECT rank, node, device, pool, source, pid, peak_bytes, peak_ts, step,
           ROW_NUMBER() OVER (PARTITION BY pool ORDER BY peak_bytes DESC, rank, device) AS order_in_job,
           median(CAST(peak_bytes AS DOUBLE)) OVER (PARTITION BY pool) AS pool_median
    FROM per_rank
    WHERE k = 1
),
-- the blocks of each peak's series live at the peak
live AS (
    SELECT p.rank, p.device, p.pool, b.size,
           owner_group(b.owner) AS owner_group,
           COALESCE(user_frame(b.stack_py), '(no user frame)') AS frame
    FROM peaks p
    JOIN blocks b
      ON b.source = p.source AND (b.pid IS NOT DISTINCT FROM p.pid) AND b.device = p.device AND b.pool = p.pool
    WHERE b.alloc_ts <= p.peak_ts AND (b.end_ts IS NULL OR b.end_ts > p.peak_ts)
),
by_owner AS (
    SELECT rank, device, pool,
           first_value(owner_group ORDER BY bytes DESC, owner_group) AS top_owner_group,
           MAX(bytes) AS top_owner_bytes
    FROM (SELECT rank, device, pool, owner_group, SUM(size) AS bytes FROM live GROUP BY rank, device, pool, owner_group) g
    GROUP BY rank, device, pool
),
by_frame AS (
    SELECT rank, device, pool,
           first_value(frame ORDER BY bytes DESC, frame) AS top_user_frame,
           MAX(bytes) AS top_frame_bytes
    FROM (SELECT rank, device, pool, frame, SUM(size) AS bytes FROM live GROUP BY rank, device, pool, frame) g
    GROUP BY rank, device, pool
)
SELECT p.rank, p.node, p.device, p.pool, p.source, p.pid, p.peak_bytes, p.peak_ts, p.step,
       CAST(p.order_in_job AS BIGINT) AS order_in_job,
       CASE WHEN p.pool_median > 0 THEN CAST(p.peak_bytes AS DOUBLE) / p.pool_median END AS ratio_to_median,
       o.top_owner_group, o.top_owner_bytes, f.top_user_frame, f.top_frame_bytes
FROM peaks p
LEFT JOIN by_owner o ON o.rank = p.rank AND o.device = p.device AND o.pool = p.pool
LEFT JOIN by_frame f ON f.rank = p.rank AND f.device = p.device AND f.pool = p.pool
