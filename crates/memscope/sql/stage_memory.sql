-- stage_memory: memory per annotation stage — every MSTX range with each pool's level at its start, its peak inside and its level at its end.
--
-- A stage is an MSTX range of one (source, pid, device): a `Range_start` row and the
-- `Range_end` row that closes it. The end is found, in order:
--   1. by name: a `Range_end` whose name is the stage's name (users write
--      `Range_start "forward"` … `Range_end "forward"`); ranges of the same name are paired
--      as they nest (the innermost open one closes first);
--   2. by id: the tool's own `Range end from id N` closes the N-th `Range_start` of the process
--      and device (the ids mstxRangeStartA returns, counted from 1 in the dump).
-- A start that neither closes is an open stage: it runs to the end of the data and has no end
-- level. Pool values come from usage_series (framework pools: their `used` counter; HAL: paired
-- live bytes), for the pools of the same (source, pid, device). The level in effect when the
-- stage starts counts towards its peak. The walk splits every series at every stage boundary
-- once (one pass over the series), then reads each stage's peak from the pieces it covers.
-- `mem_state_at('mark NAME')` gives the full state (owners, blocks) at a stage's start;
-- snap_stage_memory is the same analysis for snapshot annotations.
--
-- Rows come in no particular order: ORDER BY source, pid, device, start_ts, pool.
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column stage       VARCHAR the range's name (trimmed)
-- @column range_id    BIGINT  count: 1-based order of the Range_start in its process and device (the id `Range end from id N` names)
-- @column depth       BIGINT  count: ranges open around this one when it starts (0: outermost)
-- @column step        BIGINT  number of the step the stage starts in (table steps); NULL outside every step
-- @column start_ts    BIGINT  ns: the Range_start row's time
-- @column end_ts      BIGINT  ns: the closing Range_end row's time; NULL for an open stage
-- @column ended_by    VARCHAR name, id, or NULL for an open stage
-- @column duration_ns BIGINT  ns: end_ts - start_ts; NULL for an open stage
-- @column pool        VARCHAR pool (Event Type); HAL values are paired live bytes
-- @column points      BIGINT  count: counter values written inside the stage
-- @column start_used  BIGINT  bytes: live when the stage starts (last value before its Range_start row); NULL when the pool had no value yet
-- @column peak_used   BIGINT  bytes: highest level during the stage
-- @column peak_ts     BIGINT  ns: when the peak was reached (start_ts when the level at the start is the peak)
-- @column end_used    BIGINT  bytes: live when the stage ends (last value before its Range_end row); NULL for an open stage
-- @column growth      BIGINT  bytes: end_used - start_used; NULL for an open stage
-- @column peak_rise   BIGINT  bytes: peak_used - start_used, what the stage adds at its highest
WITH
mstx AS (
    SELECT source, pid, device, ts, row_idx, event_type, trim(COALESCE(name, '')) AS name,
           -- ranges open after this row, all names together (for depth) and per name
           SUM(CASE WHEN event_type = 'Range_start' THEN 1 ELSE -1 END)
               OVER (PARTITION BY source, pid, device ORDER BY ts, row_idx) AS open_all,
           SUM(CASE WHEN event_type = 'Range_start' THEN 1 ELSE -1 END)
               OVER (PARTITION BY source, pid, device, trim(COALESCE(name, '')) ORDER BY ts, row_idx) AS open_named
    FROM events
    WHERE event = 'MSTX' AND event_type IN ('Range_start', 'Range_end') AND ts IS NOT NULL
),
starts AS (
    SELECT source, pid, device, ts AS start_ts, row_idx AS start_row, name AS stage,
           CAST(ROW_NUMBER() OVER (PARTITION BY source, pid, device ORDER BY ts, row_idx) AS BIGINT) AS range_id,
           GREATEST(open_all - 1, 0) AS depth,
           -- a start at nesting level L of its name closes at the next end leaving level L
           open_named AS level,
           ROW_NUMBER() OVER (PARTITION BY source, pid, device, name, open_named ORDER BY ts, row_idx) AS level_k
    FROM mstx
    WHERE event_type = 'Range_start'
),
ends AS (
    SELECT source, pid, device, ts AS end_ts, row_idx AS end_row, name,
           CAST(regexp_match(name, '^Range end from id (\d+)$')[1] AS BIGINT) AS end_id,
           open_named + 1 AS level,
           ROW_NUMBER() OVER (PARTITION BY source, pid, device, name, open_named ORDER BY ts, row_idx) AS level_k
    FROM mstx
    WHERE event_type = 'Range_end'
),
stages AS (
    SELECT s.source, s.pid, s.device, s.stage, s.range_id, s.depth, s.start_ts, s.start_row,
           COALESCE(en.end_ts, ei.end_ts) AS end_ts,
           COALESCE(en.end_row, ei.end_row) AS end_row,
           CASE WHEN en.end_ts IS NOT NULL THEN 'name' WHEN ei.end_ts IS NOT NULL THEN 'id' END AS ended_by
    FROM starts s
    LEFT JOIN ends en ON en.source = s.source AND (en.pid IS NOT DISTINCT FROM s.pid) AND en.device = s.device
                     AND en.name = s.stage AND en.level = s.level AND en.level_k = s.level_k
                     AND en.end_ts >= s.start_ts
    LEFT JOIN ends ei ON ei.source = s.source AND (ei.pid IS NOT DISTINCT FROM s.pid) AND ei.device = s.device
                     AND ei.end_id = s.range_id AND ei.end_ts >= s.start_ts
),
-- every stage boundary, once per pool of its (source, pid, device)
pools AS (
    SELECT DISTINCT source, pid, device, pool FROM curve
),
-- each end of each stage (as a struct: ts, row_idx), and the boundaries of each process and
-- device numbered in event order: boundary k starts piece k of every pool's stream
stage_sides AS (
    SELECT source, pid, device, stage, range_id, depth, start_ts, end_ts, start_row, end_row, ended_by,
           b['side'] AS side, b['ts'] AS b_ts, CAST(b['row_idx'] AS BIGINT) AS b_row
    FROM (SELECT *,
                 unnest(CASE WHEN end_ts IS NULL THEN [named_struct('side', 'start', 'ts', start_ts, 'row_idx', start_row)]
                             ELSE [named_struct('side', 'start', 'ts', start_ts, 'row_idx', start_row),
                                   named_struct('side', 'end', 'ts', end_ts, 'row_idx', end_row)] END) AS b
          FROM stages) u
),
boundaries AS (
    SELECT source, pid, device, ts, row_idx,
           ROW_NUMBER() OVER (PARTITION BY source, pid, device ORDER BY ts, row_idx) AS piece
    FROM (SELECT DISTINCT source, pid, device, b_ts AS ts, b_row AS row_idx FROM stage_sides) d
),
-- each stage with the pieces its ends start
stage_pieces AS (
    SELECT st.source, st.pid, st.device, st.stage, st.range_id, st.depth, st.start_ts, st.end_ts, st.ended_by,
           MAX(bd.piece) FILTER (WHERE st.side = 'start') AS first_piece,
           MAX(bd.piece) FILTER (WHERE st.side = 'end') AS end_piece
    FROM stage_sides st
    JOIN boundaries bd ON bd.source = st.source AND (bd.pid IS NOT DISTINCT FROM st.pid) AND bd.device = st.device
                      AND bd.ts = st.b_ts AND bd.row_idx = st.b_row
    GROUP BY st.source, st.pid, st.device, st.stage, st.range_id, st.depth, st.start_ts, st.end_ts, st.start_row,
             st.end_row, st.ended_by
),
-- every pool's values and the boundaries of its process and device, in event order; piece =
-- boundaries passed so far
points AS (
    SELECT source, pid, device, pool, ts, CAST(row_idx AS BIGINT) AS row_idx, used, 0 AS is_boundary
    FROM usage_series
    WHERE used IS NOT NULL
    UNION ALL
    SELECT b.source, b.pid, b.device, p.pool, b.ts, b.row_idx, CAST(NULL AS BIGINT), 1
    FROM boundaries b
    JOIN pools p ON p.source = b.source AND (p.pid IS NOT DISTINCT FROM b.pid) AND p.device = b.device
),
counted AS (
    SELECT *,
           SUM(is_boundary) OVER (PARTITION BY source, pid, device, pool ORDER BY ts, row_idx
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS piece
    FROM points
),
-- per pool and piece: its values (count, highest and its first time, last)
pieces AS (
    SELECT source, pid, device, pool, piece, COUNT(used) AS points, MAX(used) AS max_used,
           first_value(ts ORDER BY used DESC, ts, row_idx) FILTER (WHERE used IS NOT NULL) AS max_ts,
           last_value(used ORDER BY ts, row_idx) FILTER (WHERE used IS NOT NULL) AS last_used
    FROM counted
    GROUP BY source, pid, device, pool, piece
),
-- level = the last value before the piece's boundary: the last value of the latest earlier
-- piece with one, as the running maximum of piece · 10^20 + (last + 2^63) (exact in
-- DECIMAL(38); not last_value IGNORE NULLS, whose IGNORE NULLS a cluster loses with the plan)
leveled AS (
    SELECT *,
           CAST(CAST(MAX(CASE WHEN points > 0
                              THEN CAST(piece AS DECIMAL(38, 0)) * CAST('100000000000000000000' AS DECIMAL(38, 0))
                                   + CAST(last_used AS DECIMAL(38, 0)) + CAST('9223372036854775808' AS DECIMAL(38, 0)) END)
                     OVER (PARTITION BY source, pid, device, pool ORDER BY piece
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                % CAST('100000000000000000000' AS DECIMAL(38, 0)) - CAST('9223372036854775808' AS DECIMAL(38, 0)) AS DECIMAL(38, 0))
                AS BIGINT) AS level
    FROM pieces
),
-- per stage and pool: the levels at its ends and the values of the pieces inside it
inside AS (
    SELECT sp.source, sp.pid, sp.device, sp.stage, sp.range_id, sp.depth, sp.start_ts, sp.end_ts, sp.ended_by,
           pc.pool,
           MAX(pc.level) FILTER (WHERE pc.piece = sp.first_piece) AS start_used,
           MAX(pc.level) FILTER (WHERE pc.piece = sp.end_piece) AS end_used,
           COALESCE(SUM(pc.points) FILTER (WHERE pc.piece >= sp.first_piece AND (sp.end_piece IS NULL OR pc.piece < sp.end_piece)), 0) AS points,
           MAX(pc.max_used) FILTER (WHERE pc.piece >= sp.first_piece AND (sp.end_piece IS NULL OR pc.piece < sp.end_piece)) AS max_used,
           first_value(pc.max_ts ORDER BY pc.max_used DESC, pc.max_ts)
               FILTER (WHERE pc.points > 0 AND pc.piece >= sp.first_piece AND (sp.end_piece IS NULL OR pc.piece < sp.end_piece)) AS max_ts
    FROM stage_pieces sp
    JOIN leveled pc ON pc.source = sp.source AND (pc.pid IS NOT DISTINCT FROM sp.pid) AND pc.device = sp.device
                   AND (pc.piece >= sp.first_piece AND (sp.end_piece IS NULL OR pc.piece <= sp.end_piece)
                        OR pc.piece = sp.end_piece)
    GROUP BY sp.source, sp.pid, sp.device, sp.stage, sp.range_id, sp.depth, sp.start_ts, sp.end_ts, sp.ended_by,
             sp.first_piece, sp.end_piece, pc.pool
    HAVING COUNT(*) FILTER (WHERE pc.piece = sp.first_piece) > 0
),
measured AS (
    SELECT *,
           CASE WHEN max_used IS NULL THEN start_used
                WHEN start_used IS NULL OR max_used > start_used THEN max_used
                ELSE start_used END AS peak_used,
           CASE WHEN max_used IS NULL THEN start_ts
                WHEN start_used IS NULL OR max_used > start_used THEN max_ts
                ELSE start_ts END AS peak_ts
    FROM inside
)
SELECT m.source, m.pid, m.device, m.stage, m.range_id, m.depth, s.step,
       m.start_ts, m.end_ts, m.ended_by, m.end_ts - m.start_ts AS duration_ns,
       m.pool, m.points, m.start_used, m.peak_used, m.peak_ts, m.end_used,
       m.end_used - m.start_used AS growth,
       m.peak_used - m.start_used AS peak_rise
FROM measured m
LEFT JOIN steps s ON s.source = m.source AND (s.pid IS NOT DISTINCT FROM m.pid) AND s.device = m.device
                 AND s.start_ts <= m.start_ts AND (s.end_ts IS NULL OR m.start_ts <= s.end_ts)
WHERE m.peak_used IS NOT NULL
