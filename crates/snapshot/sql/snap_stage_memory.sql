-- snap_stage_memory: memory per annotation stage of a snapshot — every START/END annotation pair with active and reserved bytes at its start, its peaks inside and at its end.
--
-- Stages are the snapshot's `external_annotations` (snap_info section external_annotations:
-- record_function / dynamo_timed regions written with `stage` START or END, a `name`, a
-- `device` and `time_us`). A START is closed by the next END of the same name and device as
-- they nest (the innermost open one closes first); a START never closed is an open stage that
-- runs to the end of the trace. Levels come from snap_timeline (PyTorch's method: active =
-- requested bytes of live allocations, reserved = segment bytes, memory from before the trace
-- window included). Annotations carry only µs times: a trace entry at the same µs as a START
-- counts as inside the stage, one at the same µs as an END too. The level in effect when the
-- stage starts counts towards its peaks. Stages outside the trace window (before its first or
-- after its last entry) show the level there. The MSTX twin is stage_memory.
--
-- The levels are snap_timeline's, read from the running sums every trace row carries (computed at
-- ingest); only the entries within each device's stages are walked, with the last one before
-- them (tests/oracle/sql/snapshot/snap_stage_memory.sql walks every entry, to the same answers).
--
-- Rows come in no particular order: ORDER BY snapshot, device, start_us.
-- @column snapshot          VARCHAR the snapshot (source name)
-- @column device            BIGINT  device ordinal of the annotation
-- @column stage             VARCHAR the annotation's name
-- @column stage_k           BIGINT  count: 1-based order of the START among the device's annotations
-- @column depth             BIGINT  count: stages open around this one when it starts (0: outermost)
-- @column start_us          BIGINT  us: time of the START, µs
-- @column end_us            BIGINT  us: time of the closing END, µs; NULL for an open stage
-- @column duration_ns       BIGINT  duration_ns: the stage's length, (end_us - start_us) µs × 1000; NULL for an open stage
-- @column entries           BIGINT  count: trace entries inside the stage
-- @column start_active      BIGINT  bytes: active when the stage starts
-- @column peak_active       BIGINT  bytes: highest active bytes during the stage
-- @column peak_active_us    BIGINT  us: when active bytes peaked (start_us when the level at the start is the peak)
-- @column end_active        BIGINT  bytes: active when the stage ends; NULL for an open stage
-- @column active_growth     BIGINT  bytes: end_active - start_active; NULL for an open stage
-- @column peak_active_rise  BIGINT  bytes: peak_active - start_active, what the stage adds at its highest
-- @column start_reserved    BIGINT  bytes: reserved when the stage starts
-- @column peak_reserved     BIGINT  bytes: highest reserved bytes during the stage
-- @column end_reserved      BIGINT  bytes: reserved when the stage ends; NULL for an open stage
WITH
annotations AS (
    SELECT snapshot, item,
           upper(MAX(value) FILTER (WHERE key = 'stage')) AS kind,
           MAX(value) FILTER (WHERE key = 'name') AS name,
           TRY_CAST(MAX(value) FILTER (WHERE key = 'device') AS BIGINT) AS device,
           TRY_CAST(TRY_CAST(MAX(value) FILTER (WHERE key = 'time_us') AS DOUBLE) AS BIGINT) AS time_us
    FROM snap_info
    WHERE section = 'external_annotations'
    GROUP BY snapshot, item
),
marks AS (
    SELECT *,
           SUM(CASE WHEN kind = 'START' THEN 1 ELSE -1 END)
               OVER (PARTITION BY snapshot, device ORDER BY time_us, item) AS open_all,
           SUM(CASE WHEN kind = 'START' THEN 1 ELSE -1 END)
               OVER (PARTITION BY snapshot, device, name ORDER BY time_us, item) AS open_named
    FROM annotations
    WHERE kind IN ('START', 'END') AND time_us IS NOT NULL AND device IS NOT NULL AND name IS NOT NULL
),
starts AS (
    SELECT snapshot, device, name, time_us AS start_us, open_named AS level,
           GREATEST(open_all - 1, 0) AS depth,
           CAST(ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY time_us, item) AS BIGINT) AS stage_k,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device, name, open_named ORDER BY time_us, item) AS level_k
    FROM marks
    WHERE kind = 'START'
),
ends AS (
    SELECT snapshot, device, name, time_us AS end_us, open_named + 1 AS level,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device, name, open_named ORDER BY time_us, item) AS level_k
    FROM marks
    WHERE kind = 'END'
),
stages AS (
    SELECT s.snapshot, s.device, s.name AS stage, s.stage_k, s.depth, s.start_us, e.end_us
    FROM starts s
    LEFT JOIN ends e ON e.snapshot = s.snapshot AND e.device = s.device AND e.name = s.name
                    AND e.level = s.level AND e.level_k = s.level_k AND e.end_us >= s.start_us
),
-- the span of each device's stages: an entry before it only matters as the last one before it
-- (the level in effect when the first stage starts), one after a closed span not at all, so
-- only those entries are walked (not the whole trace)
spans AS (
    SELECT snapshot, device, MIN(start_us) AS lo,
           CASE WHEN COUNT(end_us) = COUNT(*) THEN MAX(end_us) END AS hi
    FROM stages
    GROUP BY snapshot, device
),
entries AS (
    SELECT t.snapshot, t.device, t.seq, t.time_us,
           l.active_start + t.active_change AS active_bytes,
           l.reserved_start + t.reserved_change AS reserved_bytes,
           s.lo, s.hi
    FROM snap_traces t
    JOIN snap_trace_levels l ON l.snapshot = t.snapshot AND l.device = t.device
    JOIN spans s ON s.snapshot = t.snapshot AND s.device = t.device
    WHERE t.time_us IS NOT NULL
),
timeline AS (
    SELECT snapshot, device, seq, time_us, active_bytes, reserved_bytes
    FROM entries
    WHERE time_us >= lo AND (hi IS NULL OR time_us <= hi)
      -- the same bounds over every device, checked on the trace's rows before any join
      AND time_us >= (SELECT MIN(lo) FROM spans)
      AND time_us <= COALESCE((SELECT MAX(COALESCE(hi, 9223372036854775807)) FROM spans), 9223372036854775807)
    UNION ALL
    SELECT snapshot, device, seq, time_us, active_bytes, reserved_bytes
    FROM (
        SELECT snapshot, device, seq, time_us, active_bytes, reserved_bytes,
               ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY time_us DESC, seq DESC) AS n
        FROM entries
        WHERE time_us < lo AND time_us < (SELECT MAX(lo) FROM spans)
    ) e
    WHERE n = 1
),
-- boundaries: a START sorts before the entries of its µs (ord 0), an END after them (ord 2)
boundaries AS (
    SELECT snapshot, device, start_us AS time_us, 0 AS ord FROM stages
    UNION
    SELECT snapshot, device, end_us, 2 FROM stages WHERE end_us IS NOT NULL
),
points AS (
    SELECT snapshot, device, time_us, 1 AS ord, seq, active_bytes, reserved_bytes, 0 AS is_boundary
    FROM timeline
    UNION ALL
    SELECT snapshot, device, time_us, ord, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), 1
    FROM boundaries
),
counted AS (
    SELECT *,
           SUM(is_boundary) OVER w AS piece,
           COUNT(active_bytes) OVER w AS active_filled,
           COUNT(reserved_bytes) OVER w AS reserved_filled
    FROM points
    WINDOW w AS (PARTITION BY snapshot, device ORDER BY time_us, ord, seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- the last values at or before each row: the one value of its group of rows after the same
-- number of values (not last_value IGNORE NULLS: a cluster loses IGNORE NULLS with the plan)
walked AS (
    SELECT *,
           MAX(active_bytes) OVER (PARTITION BY snapshot, device, active_filled) AS active_level,
           MAX(reserved_bytes) OVER (PARTITION BY snapshot, device, reserved_filled) AS reserved_level
    FROM counted
),
-- the levels before the first entry with a time (by time, then seq), for boundaries that come
-- before it (found at ingest: snap_trace_levels)
window_start AS (
    SELECT snapshot, device, timed_active_before AS active_before, timed_reserved_before AS reserved_before
    FROM snap_trace_levels
    WHERE timed_active_before IS NOT NULL
),
pieces AS (
    SELECT snapshot, device, piece, COUNT(*) AS entries,
           MAX(active_bytes) AS max_active,
           first_value(time_us ORDER BY active_bytes DESC, time_us, seq) AS max_active_us,
           MAX(reserved_bytes) AS max_reserved
    FROM walked
    WHERE is_boundary = 0
    GROUP BY snapshot, device, piece
),
at_boundary AS (
    SELECT w.snapshot, w.device, w.time_us, w.ord, w.piece,
           COALESCE(w.active_level, s.active_before) AS active_level,
           COALESCE(w.reserved_level, s.reserved_before) AS reserved_level
    FROM walked w
    JOIN window_start s ON s.snapshot = w.snapshot AND s.device = w.device
    WHERE w.is_boundary = 1
),
stage_levels AS (
    SELECT st.*, a.piece AS first_piece, a.active_level AS start_active, a.reserved_level AS start_reserved,
           e.piece AS end_piece, e.active_level AS end_active, e.reserved_level AS end_reserved
    FROM stages st
    JOIN at_boundary a ON a.snapshot = st.snapshot AND a.device = st.device
                      AND a.time_us = st.start_us AND a.ord = 0
    LEFT JOIN at_boundary e ON e.snapshot = st.snapshot AND e.device = st.device
                           AND e.time_us = st.end_us AND e.ord = 2
),
inside AS (
    SELECT sl.snapshot, sl.device, sl.stage_k,
           SUM(p.entries) AS entries, MAX(p.max_active) AS max_active,
           first_value(p.max_active_us ORDER BY p.max_active DESC, p.max_active_us) AS max_active_us,
           MAX(p.max_reserved) AS max_reserved
    FROM stage_levels sl
    JOIN pieces p ON p.snapshot = sl.snapshot AND p.device = sl.device
                 AND p.piece >= sl.first_piece AND (sl.end_piece IS NULL OR p.piece < sl.end_piece)
    GROUP BY sl.snapshot, sl.device, sl.stage_k
)
SELECT sl.snapshot, sl.device, sl.stage, sl.stage_k, sl.depth, sl.start_us, sl.end_us,
       (sl.end_us - sl.start_us) * 1000 AS duration_ns,
       COALESCE(i.entries, 0) AS entries,
       sl.start_active,
       GREATEST(sl.start_active, i.max_active) AS peak_active,
       CASE WHEN i.max_active > sl.start_active THEN i.max_active_us ELSE sl.start_us END AS peak_active_us,
       CASE WHEN sl.end_us IS NOT NULL THEN sl.end_active END AS end_active,
       CASE WHEN sl.end_us IS NOT NULL THEN sl.end_active - sl.start_active END AS active_growth,
       GREATEST(sl.start_active, i.max_active) - sl.start_active AS peak_active_rise,
       sl.start_reserved,
       GREATEST(sl.start_reserved, i.max_reserved) AS peak_reserved,
       CASE WHEN sl.end_us IS NOT NULL THEN sl.end_reserved END AS end_reserved
FROM stage_levels sl
LEFT JOIN inside i ON i.snapshot = sl.snapshot AND i.device = sl.device AND i.stage_k = sl.stage_k
