-- steps: the training/inference steps of each process and device, from SYSTEM STEP rows, MSTX "step start" ranges or MSTX step marks.
--
-- Steps are found per (source, pid, device), from the first kind of marker present:
-- 1. SYSTEM STEP rows (`msmemscope.step()`): step number = the row's Name; the step runs from
--    the STEP row to the first MSTX Range_end after it (before the next STEP row), or else to
--    the next STEP row; the last step without a Range_end is open (end_ts NULL).
-- 2. MSTX Range_start rows named "step start" (the text msMemScope's step ranges use): numbered
--    1, 2, ... in time order; a step ends at the first Range_end after it (before the next
--    step start), open otherwise.
-- 3. MSTX Mark rows whose message contains "step": each mark starts a step that ends at the
--    next such mark; the last one is open.
-- Steps that ran while collection was stopped leave no rows, so their numbers are missing.
--
-- Rows come in no particular order: ORDER BY source, pid, device, start_ts.
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column step        BIGINT  step number (SYSTEM STEP: as written; MSTX: 1-based order)
-- @column origin      VARCHAR SYSTEM_STEP, MSTX_RANGE or MSTX_MARK: the marker the step comes from
-- @column start_ts    BIGINT  ns: step start, ns (the marker row)
-- @column end_ts      BIGINT  ns: step end, ns (Range_end, next step marker); NULL = the step never ended in the data (e.g. OOM)
-- @column duration_ns BIGINT  end_ts - start_ts, ns; NULL for an open step
-- @column complete    BOOLEAN the step has an end
-- @column start_row   UBIGINT row_idx of the marker row in its file
WITH
markers AS (
    SELECT source, pid, device, ts, row_idx, name,
           CASE WHEN event = 'SYSTEM' AND event_type = 'STEP' THEN 'SYSTEM_STEP'
                WHEN event = 'MSTX' AND event_type = 'Range_start' AND lower(trim(name)) = 'step start' THEN 'MSTX_RANGE'
                WHEN event = 'MSTX' AND event_type = 'Mark' AND lower(name) LIKE '%step%' THEN 'MSTX_MARK'
                WHEN event = 'MSTX' AND event_type = 'Range_end' THEN 'RANGE_END'
           END AS kind
    FROM events
    WHERE event IN ('SYSTEM', 'MSTX') AND ts IS NOT NULL
),
-- which marker kind defines the steps of each (source, pid, device): the first one present
-- of SYSTEM_STEP, MSTX_RANGE, MSTX_MARK
with_origin AS (
    SELECT *,
           CASE WHEN bool_or(kind = 'SYSTEM_STEP') OVER d THEN 'SYSTEM_STEP'
                WHEN bool_or(kind = 'MSTX_RANGE') OVER d THEN 'MSTX_RANGE'
                WHEN bool_or(kind = 'MSTX_MARK') OVER d THEN 'MSTX_MARK'
           END AS origin
    FROM markers
    WHERE kind IS NOT NULL
    WINDOW d AS (PARTITION BY source, pid, device)
),
-- step starts and range ends in time order; ordinal = the step a row belongs to (running
-- count of starts); Range_ends only delimit range- and STEP-based steps
stream AS (
    SELECT *,
           SUM(CASE WHEN kind = origin THEN 1 ELSE 0 END)
               OVER (PARTITION BY source, pid, device ORDER BY ts, row_idx
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS ordinal
    FROM with_origin
    WHERE kind = origin OR (kind = 'RANGE_END' AND origin <> 'MSTX_MARK')
),
-- the first Range_end of each step
with_end AS (
    SELECT *,
           MIN(CASE WHEN kind = 'RANGE_END' THEN ts END)
               OVER (PARTITION BY source, pid, device, ordinal) AS range_end_ts
    FROM stream
),
starts AS (
    SELECT source, pid, device, ts AS start_ts, row_idx AS start_row, name, origin, ordinal, range_end_ts,
           LEAD(ts) OVER (PARTITION BY source, pid, device ORDER BY ordinal) AS next_start_ts
    FROM with_end
    WHERE kind = origin
)
SELECT source, pid, device,
       CASE WHEN origin = 'SYSTEM_STEP' THEN COALESCE(try_cast(trim(name) AS BIGINT), ordinal)
            ELSE ordinal END AS step,
       origin, start_ts,
       COALESCE(range_end_ts, next_start_ts) AS end_ts,
       COALESCE(range_end_ts, next_start_ts) - start_ts AS duration_ns,
       COALESCE(range_end_ts, next_start_ts) IS NOT NULL AS complete,
       start_row
FROM starts
