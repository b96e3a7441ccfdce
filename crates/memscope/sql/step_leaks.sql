-- step_leaks: periodic leaks — memory allocated in one step and still alive steps later, per owner and user frame, with its growth per step, slope and confidence, in every pool.
--
-- A block is born in the step its MALLOC falls in (curve.step, placed at ingest) and is live at
-- the end of step M when it has not ended by then (blocks.end_ts, the end-state rule of every
-- view; its end row's place among the steps is curve.step_k/step of that row). It *survives*
-- when it is still live at the end of a later step than the one it was born in. An origin
-- (series, owner, user frame) is listed when it has survivors; held_bytes(M) = the bytes of
-- its blocks born in step M or earlier that are live at the end of M, for every complete step M.
-- A periodic leak is an origin whose held bytes grow step after step: growth_per_step is the least-squares slope of held bytes over the step
-- ends (regr_slope), r2 its fit, and rising_steps the share of step-to-step changes that are
-- increases. Memory allocated before the first step (weights, optimizer state) is never born in
-- a step and is not listed; neither is memory freed within one step (activations).
-- Unlike msMemScope's offline leak check (HAL only, three MSTX marks), every pool is covered and
-- any number of steps is used.
-- A dump whose MALLOC and FREE rows cannot be paired (view pairing: MALLOC only or FREE only)
-- is left out: its blocks would all look held (cannot conclude; capabilities.pairing).
-- confidence: high = ≥ 3 step ends, r2 ≥ 0.9 and every change an increase; medium = ≥ 3 step
-- ends and r2 ≥ 0.6 with a positive slope; low otherwise.
--
-- Rows come in no particular order: ORDER BY growth_per_step DESC.
-- @column source          VARCHAR input file
-- @column pid             BIGINT  process id
-- @column device          VARCHAR Device Id as written
-- @column pool            VARCHAR pool = Event Type
-- @column owner           VARCHAR owner of the MALLOCs ('(stock)' or the pool name without one)
-- @column owner_group     VARCHAR level-1 group of the owner
-- @column user_frame      VARCHAR innermost user frame of the MALLOCs' Python stack; '(no user frame)' without one
-- @column blocks          BIGINT  count: surviving blocks of this origin (live at the end of a later step than their own)
-- @column first_step      BIGINT  step number of the first step end where bytes were held
-- @column last_step       BIGINT  step number of the last complete step
-- @column step_ends       BIGINT  count: complete step ends with held bytes
-- @column held_last       BIGINT  bytes: held at the end of the last complete step
-- @column held_at_end     BIGINT  bytes: of those survivors, still held at the end of the data
-- @column growth_per_step DOUBLE  bytes: least-squares slope of held bytes per step end
-- @column r2              DOUBLE  fit of that line (1 = every step end on it); NULL with fewer than 3 step ends or no variation
-- @column rising_steps    DOUBLE  percent: share of step-to-step changes of held bytes that are increases
-- @column confidence      VARCHAR high, medium or low (see above)
WITH
-- steps with their position k (steps.step_k, as curve.step_k counts them)
step_ends AS (
    SELECT source, pid, device, step, end_ts, complete, CAST(step_k AS BIGINT) AS k
    FROM steps
),
last_complete AS (
    SELECT source, pid, device, MAX(k) FILTER (WHERE complete) AS k FROM step_ends GROUP BY source, pid, device
),
-- blocks allocated inside a step: the step they are born in and the last step end they are live at
born AS (
    SELECT b.source, b.pid, b.device, b.pool, b.size, b.end_ts,
           CASE WHEN b.owner IS NOT NULL AND b.owner <> '' THEN b.owner WHEN b.stock THEN '(stock)' ELSE b.pool END AS owner,
           COALESCE(user_frame(b.stack_py), '(no user frame)') AS user_frame,
           c.step_k AS born_k,
           CASE WHEN b.end_row IS NULL THEN l.k
                WHEN ce.step IS NOT NULL THEN CAST(ce.step_k AS BIGINT) - 1
                ELSE ce.step_k END AS last_k
    FROM blocks b
    JOIN pairing g ON g.source = b.source AND g.can_pair
    JOIN curve c ON c.source = b.source AND c.row_idx = b.alloc_row AND c.event = 'MALLOC'
    LEFT JOIN curve ce ON ce.source = b.source AND ce.row_idx = b.end_row
    LEFT JOIN last_complete l ON l.source = b.source AND (l.pid IS NOT DISTINCT FROM b.pid) AND l.device = b.device
    WHERE b.alloc_ts IS NOT NULL AND c.step IS NOT NULL
),
-- the blocks live at the end of their own step at least, of origins with survivors
lasting AS (
    -- (a SUM, not COUNT(*) FILTER: a window aggregate's FILTER does not survive the plan's
    -- serialisation to a cluster, where every block would count)
    SELECT *, SUM(CASE WHEN last_k > born_k THEN 1 ELSE 0 END) OVER origin AS survivors,
           COALESCE(SUM(CASE WHEN end_ts IS NULL AND last_k > born_k THEN size END) OVER origin, 0) AS held_at_end
    FROM born
    WHERE last_k >= born_k
    WINDOW origin AS (PARTITION BY source, pid, device, pool, owner, user_frame)
),
-- held bytes of each origin at every complete step end
held AS (
    SELECT s.source, s.pid, s.device, s.pool, s.owner, s.user_frame, e.k, e.step,
           SUM(s.size) AS bytes, COUNT(*) AS blocks, MAX(s.survivors) AS survivors, MAX(s.held_at_end) AS held_at_end
    FROM lasting s
    JOIN step_ends e ON e.source = s.source AND (e.pid IS NOT DISTINCT FROM s.pid) AND e.device = s.device
    WHERE s.survivors > 0 AND e.complete AND e.k >= s.born_k AND e.k <= s.last_k
    GROUP BY s.source, s.pid, s.device, s.pool, s.owner, s.user_frame, e.k, e.step
),
changes AS (
    SELECT *, bytes - LAG(bytes) OVER (PARTITION BY source, pid, device, pool, owner, user_frame ORDER BY k) AS change
    FROM held
),
origins AS (
    SELECT source, pid, device, pool, owner, user_frame,
           first_value(step ORDER BY k) AS first_step,
           last_value(step ORDER BY k) AS last_step,
           COUNT(*) AS step_ends,
           last_value(bytes ORDER BY k) AS held_last,
           regr_slope(CAST(bytes AS DOUBLE), CAST(k AS DOUBLE)) AS slope,
           regr_r2(CAST(bytes AS DOUBLE), CAST(k AS DOUBLE)) AS r2,
           100.0 * CAST(COUNT(*) FILTER (WHERE change > 0) AS DOUBLE) / CAST(NULLIF(COUNT(change), 0) AS DOUBLE) AS rising_steps,
           MAX(survivors) AS survivors, MAX(held_at_end) AS held_at_end
    FROM changes
    GROUP BY source, pid, device, pool, owner, user_frame
)
SELECT o.source, o.pid, o.device, o.pool, o.owner, owner_group(o.owner) AS owner_group, o.user_frame,
       o.survivors AS blocks, o.first_step, o.last_step, o.step_ends, o.held_last, o.held_at_end,
       COALESCE(o.slope, 0.0) AS growth_per_step,
       CASE WHEN o.step_ends >= 3 THEN o.r2 END AS r2,
       o.rising_steps,
       CASE WHEN o.step_ends >= 3 AND o.r2 >= 0.9 AND o.rising_steps = 100.0 THEN 'high'
            WHEN o.step_ends >= 3 AND o.r2 >= 0.6 AND o.slope > 0 THEN 'medium'
            ELSE 'low' END AS confidence
FROM origins o
