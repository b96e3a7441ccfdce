-- run_diff: one run against another — two captures, two ranks or two files of one dataset — aligned on step numbers, MSTX marks, op order or kernel order, per owner, category, user frame and kernel.
--
-- What msMemScope's `--compare` does with two separate collections, inside one dataset. A side
-- is every dump file whose capture (capture(source): the output folder of one collection,
-- docs/formats/memscope.md §5.9) or whose own name equals the argument; its devices and
-- processes are added up (name one file per side to compare two devices).
--
-- `align` says which moments of the two runs are matched:
--   step    (default) steps align by number (table steps): a block counts in the step of its
--           MALLOC, and only the steps both sides have are compared;
--   mark    the MSTX marks and range starts of each side, by name, in time order;
--   op      the framework op launches (OP_LAUNCH ATEN_START / ATB_START rows), by name;
--   kernel  the kernel launches (KERNEL_LAUNCH KERNEL_LAUNCH / KERNEL_START rows), by name.
-- For mark, op and kernel, each side's sequence of names on each device (its processes
-- together, in time order) is aligned with the other's like lines in a text diff — a longest
-- common subsequence by Myers' algorithm (seq_align), as the tool aligns op sequences — so an
-- op inserted in one run is a point of that run only and the ops after it still pair. A block
-- counts at the latest point at or before its MALLOC on its side and device (point 0: before
-- the first). Rows with step and point both NULL compare the whole runs.
--
-- Per key (dimension owner, category, user_frame, or kernel: the latest op or kernel launched
-- at or before the MALLOC on its device, '(none)' before the first; with mark, op or kernel
-- alignment also dimension point: every aligned point as a whole, keyed by its name, even
-- where neither side allocates — the row per op that msMemScope's compare file has):
--   alloc_bytes  bytes allocated (MALLOCs with a time) in the step / at the point / in the run;
--   peak_bytes   the highest live bytes of that owner over the rows of that step / point / run
--                (curve.owner_live_bytes; owner rows only, the largest over the side's series);
--   held_end     bytes of its blocks never released (whole-run rows only).
-- status: only_a, only_b (the key appears on one side only, or the point has no partner),
-- changed, same.
--
-- Rows are ordered by the size of the change, largest first (abs(alloc_change) DESC).
-- @param a VARCHAR [one of captures] side A: a capture (see capture()) or a source file
-- @param b VARCHAR [one of captures] side B: a capture or a source file
-- @param align VARCHAR = 'step' what to align the runs on: step, mark, op or kernel
-- @column dimension    VARCHAR owner, category, user_frame, kernel or point
-- @column key          VARCHAR the owner, category, user frame ('(no user frame)' without one), op/kernel name, or the point's name
-- @column step         BIGINT  step number (align step); NULL otherwise and for whole-run rows
-- @column device       VARCHAR the device whose sequences were aligned (align mark, op, kernel); NULL otherwise
-- @column point        BIGINT  count: 1-based ordinal of the aligned point on that device, 0 before the first (align mark, op, kernel); NULL otherwise
-- @column point_name   VARCHAR the mark, op or kernel name at that point; NULL otherwise
-- @column a_pos        BIGINT  count: the point's 1-based position in side A's sequence (0 for point 0); NULL when only B has it
-- @column b_pos        BIGINT  count: the point's 1-based position in side B's sequence (0 for point 0); NULL when only A has it
-- @column a_alloc      BIGINT  bytes: allocated on side A
-- @column b_alloc      BIGINT  bytes: allocated on side B
-- @column alloc_change BIGINT  bytes: b_alloc - a_alloc
-- @column a_peak       BIGINT  bytes: peak live bytes on side A (owner rows); NULL otherwise
-- @column b_peak       BIGINT  bytes: peak live bytes on side B (owner rows); NULL otherwise
-- @column peak_change  BIGINT  bytes: b_peak - a_peak
-- @column a_held_end   BIGINT  bytes: held at the end of side A (whole-run rows); NULL otherwise
-- @column b_held_end   BIGINT  bytes: held at the end of side B (whole-run rows); NULL otherwise
-- @column held_change  BIGINT  bytes: b_held_end - a_held_end
-- @column a_blocks     BIGINT  count: blocks allocated on side A
-- @column b_blocks     BIGINT  count: blocks allocated on side B
-- @column status       VARCHAR only_a, only_b, changed or same
WITH
names AS (
    SELECT DISTINCT source FROM blocks
),
-- the two sides must differ (that each names a capture or file of the dataset is checked when
-- the call is planned, with the names there are: crates/engine/src/checks.rs)
checked AS (
    SELECT raise_unless($a <> $b, concat('run_diff: `', $a, '` and `', $b, '` must name two different captures or sources of this dataset'))
       AND raise_unless($align IN ('step', 'mark', 'op', 'kernel'), concat('run_diff: align `', $align, '` is not one of step, mark, op, kernel')) AS ok
),
sides AS (
    -- (align read from the checked row, not as a constant: with step alignment the planner
    -- would otherwise prove the points empty and prune the unnest below in a way that a
    -- cluster cannot decode)
    SELECT n.source, CASE WHEN capture(n.source) = $a OR n.source = $a THEN 'a' ELSE 'b' END AS side,
           CASE WHEN c.ok THEN $align END AS align
    FROM checked c CROSS JOIN names n
    WHERE c.ok AND (capture(n.source) IN ($a, $b) OR n.source IN ($a, $b))
),
-- each side's memory rows and op/kernel launches, per device in time order
timeline AS (
    SELECT s.side, s.align, c.device, c.source, c.ts, c.row_idx, c.event, c.step, c.owner, c.owner_live_bytes,
           CAST(NULL AS VARCHAR) AS launch
    -- the few sources first: the side a join holds in memory (the rows stream past it)
    FROM sides s JOIN curve c ON s.source = c.source
    WHERE c.ts IS NOT NULL
    UNION ALL
    SELECT s.side, s.align, e.device, e.source, e.ts, e.row_idx, e.event, CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR),
           CAST(NULL AS BIGINT), COALESCE(NULLIF(trim(e.name), ''), '(unnamed)')
    FROM sides s JOIN events e ON s.source = e.source
    WHERE e.ts IS NOT NULL
      AND ((e.event = 'OP_LAUNCH' AND e.event_type IN ('ATEN_START', 'ATB_START'))
           OR (e.event = 'KERNEL_LAUNCH' AND e.event_type IN ('KERNEL_LAUNCH', 'KERNEL_START')))
),
-- the alignment points of each side and device, numbered in time order (none for align step)
points AS (
    SELECT s.side, e.device, e.ts, e.source, e.row_idx, COALESCE(NULLIF(trim(e.name), ''), '(unnamed)') AS name,
           ROW_NUMBER() OVER (PARTITION BY s.side, e.device ORDER BY e.ts, e.source, e.row_idx) AS pos
    FROM sides s JOIN events e ON s.source = e.source
    WHERE e.ts IS NOT NULL
      AND CASE s.align
            WHEN 'mark' THEN e.event = 'MSTX' AND e.event_type IN ('Mark', 'Range_start')
            WHEN 'op' THEN e.event = 'OP_LAUNCH' AND e.event_type IN ('ATEN_START', 'ATB_START')
            WHEN 'kernel' THEN e.event = 'KERNEL_LAUNCH' AND e.event_type IN ('KERNEL_LAUNCH', 'KERNEL_START')
            ELSE false END
),
-- each memory row: the points at or before it (its position) and the launches before it
counted AS (
    SELECT *,
           SUM(is_point) OVER w AS pos,
           COUNT(launch) OVER w AS launches
    FROM (
        SELECT side, align, device, source, ts, row_idx, event, step, owner, owner_live_bytes, launch, 0 AS is_point
        FROM timeline
        UNION ALL
        SELECT side, CAST(NULL AS VARCHAR), device, source, ts, row_idx, 'POINT', CAST(NULL AS BIGINT),
               CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), 1
        FROM points
    ) AS t
    WINDOW w AS (PARTITION BY side, device ORDER BY ts, source, row_idx, is_point DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- the latest launch: the one launch of the rows after the same number of launches (not
-- last_value IGNORE NULLS, whose IGNORE NULLS a cluster loses with the plan's serialisation)
placed AS (
    SELECT side, align, device, source, row_idx, event, step, owner, owner_live_bytes, pos,
           COALESCE(MAX(launch) OVER (PARTITION BY side, device, launches), '(none)') AS kernel
    FROM counted
),
-- the two sides' point sequences of each device, aligned
sequences AS (
    SELECT device,
           array_agg(name ORDER BY pos) FILTER (WHERE side = 'a') AS a_names,
           array_agg(name ORDER BY pos) FILTER (WHERE side = 'b') AS b_names
    FROM points
    GROUP BY device
),
-- where each side's position lands: its aligned point
landing AS (
    -- (grouped, so that every unnested column is read even where a query needs only some: an
    -- unnest whose outputs were pruned does not survive the plan's serialisation to a cluster)
    SELECT device, side, pos, point, MAX(name) AS name
    FROM (
        SELECT device, CASE WHEN i <= na THEN 'a' ELSE 'b' END AS side,
               CASE WHEN i <= na THEN i ELSE i - na END AS pos, point, name
        FROM (
            SELECT device, na, unnest(positions) AS i, unnest(points) AS point, unnest(names) AS name
            FROM (
                SELECT device, CAST(COALESCE(cardinality(a_names), 0) AS BIGINT) AS na,
                       range(1, CAST(COALESCE(cardinality(a_names), 0) + COALESCE(cardinality(b_names), 0) + 1 AS BIGINT)) AS positions,
                       seq_align(a_names, b_names) AS points,
                       CASE WHEN a_names IS NULL THEN b_names WHEN b_names IS NULL THEN a_names
                            ELSE array_concat(a_names, b_names) END AS names
                FROM sequences
            ) AS l
        ) AS u
    ) AS n
    GROUP BY device, side, pos, point
),
aligned AS (
    SELECT device, point, MAX(pos) FILTER (WHERE side = 'a') AS a_pos, MAX(pos) FILTER (WHERE side = 'b') AS b_pos,
           MAX(name) AS point_name
    FROM landing
    GROUP BY device, point
),
-- the memory rows on the unit they are compared in (the step, or the point: 0 before the
-- first), each MALLOC with its block; FREE rows count only towards the owners' peaks
rows AS (
    SELECT p.side, p.event, p.owner_live_bytes, p.kernel,
           CASE WHEN p.align = 'step' THEN p.step END AS u_step,
           CAST(CASE WHEN p.align <> 'step' THEN p.device END AS VARCHAR) AS u_device,
           CASE WHEN p.align <> 'step' THEN COALESCE(l.point, 0) END AS u_point,
           CASE WHEN p.event = 'FREE' THEN p.owner
                WHEN b.owner IS NOT NULL AND b.owner <> '' THEN b.owner WHEN b.stock THEN '(stock)' ELSE b.pool END AS owner,
           CASE WHEN p.owner IS NOT NULL THEN p.owner_live_bytes END AS live,
           b.stack_py, COALESCE(b.size, 0) AS size, b.held_at_end,
           CASE WHEN p.event = 'MALLOC' THEN 1 ELSE 0 END AS n
    FROM placed p
    LEFT JOIN landing l ON p.align <> 'step' AND l.side = p.side AND l.device = p.device AND l.pos = p.pos
    LEFT JOIN blocks b ON p.event = 'MALLOC' AND b.source = p.source AND b.alloc_row = p.row_idx
    WHERE p.event IN ('MALLOC', 'FREE')
      AND ((p.event = 'MALLOC' AND b.alloc_ts IS NOT NULL) OR (p.event = 'FREE' AND p.owner IS NOT NULL))
),
-- every row once per dimension and once more for the whole run; every aligned point once
-- more (present even where nothing is allocated)
keyed AS (
    SELECT r.side, d.whole, d.dimension,
           CASE WHEN d.whole THEN CAST(NULL AS BIGINT) ELSE r.u_step END AS u_step,
           CASE WHEN d.whole THEN CAST(NULL AS VARCHAR) ELSE r.u_device END AS u_device,
           CASE WHEN d.whole THEN CAST(NULL AS BIGINT) ELSE r.u_point END AS u_point,
           CASE d.dimension WHEN 'owner' THEN r.owner
                            WHEN 'category' THEN categorize(r.owner, user_frame(r.stack_py))
                            WHEN 'user_frame' THEN COALESCE(user_frame(r.stack_py), '(no user frame)')
                            WHEN 'kernel' THEN r.kernel
                            ELSE '' END AS key,
           r.size, r.n, r.n AS present, r.held_at_end,
           CASE WHEN d.dimension = 'owner' THEN r.live END AS live
    FROM rows r
    CROSS JOIN (VALUES ('owner', false), ('category', false), ('user_frame', false), ('kernel', false), ('point', false),
                       ('owner', true), ('category', true), ('user_frame', true), ('kernel', true)) AS d(dimension, whole)
    WHERE (d.dimension = 'owner' OR r.event = 'MALLOC')
      AND (d.whole OR r.u_step IS NOT NULL OR r.u_point IS NOT NULL)
      AND (d.dimension <> 'point' OR r.u_point IS NOT NULL)
    UNION ALL
    SELECT side, false, 'point', CAST(NULL AS BIGINT), device, point, '', 0, 0, 1, CAST(NULL AS BOOLEAN), CAST(NULL AS BIGINT)
    FROM landing
),
-- both sides of each key and unit in one row
paired AS (
    SELECT dimension, key, whole, u_step AS step, u_device AS device, u_point AS point,
           COALESCE(SUM(size) FILTER (WHERE side = 'a'), 0) AS a_alloc,
           COALESCE(SUM(size) FILTER (WHERE side = 'b'), 0) AS b_alloc,
           COALESCE(SUM(n) FILTER (WHERE side = 'a'), 0) AS a_blocks,
           COALESCE(SUM(n) FILTER (WHERE side = 'b'), 0) AS b_blocks,
           MAX(live) FILTER (WHERE side = 'a') AS a_live,
           MAX(live) FILTER (WHERE side = 'b') AS b_live,
           COALESCE(SUM(size) FILTER (WHERE side = 'a' AND held_at_end), 0) AS a_held,
           COALESCE(SUM(size) FILTER (WHERE side = 'b' AND held_at_end), 0) AS b_held,
           COALESCE(MAX(present) FILTER (WHERE side = 'a'), 0) > 0 AS in_a,
           COALESCE(MAX(present) FILTER (WHERE side = 'b'), 0) > 0 AS in_b
    FROM keyed
    GROUP BY dimension, key, whole, u_step, u_device, u_point
    HAVING MAX(present) > 0
),
-- steps present on both sides (whole-run rows and points always compare)
checked_steps AS (
    SELECT *,
           MAX(CASE WHEN in_a THEN 1 ELSE 0 END) OVER (PARTITION BY step) AS step_in_a,
           MAX(CASE WHEN in_b THEN 1 ELSE 0 END) OVER (PARTITION BY step) AS step_in_b
    FROM paired
)
SELECT p.dimension,
       CASE WHEN p.dimension <> 'point' THEN p.key WHEN p.point = 0 THEN '(before the first)' ELSE al.point_name END AS key,
       p.step, p.device, p.point,
       CASE WHEN p.point = 0 THEN '(before the first)' ELSE al.point_name END AS point_name,
       CASE WHEN p.point = 0 THEN 0 ELSE al.a_pos END AS a_pos,
       CASE WHEN p.point = 0 THEN 0 ELSE al.b_pos END AS b_pos,
       a_alloc, b_alloc, b_alloc - a_alloc AS alloc_change,
       CASE WHEN in_a THEN a_live END AS a_peak, CASE WHEN in_b THEN b_live END AS b_peak,
       CASE WHEN in_a AND in_b THEN b_live - a_live END AS peak_change,
       CASE WHEN whole AND in_a THEN a_held END AS a_held_end,
       CASE WHEN whole AND in_b THEN b_held END AS b_held_end,
       CASE WHEN whole AND in_a AND in_b THEN b_held - a_held END AS held_change,
       a_blocks, b_blocks,
       CASE WHEN NOT in_b THEN 'only_a' WHEN NOT in_a THEN 'only_b'
            WHEN a_alloc = b_alloc AND (a_live IS NOT DISTINCT FROM b_live) AND (NOT whole OR a_held = b_held)
                 AND a_blocks = b_blocks THEN 'same'
            ELSE 'changed' END AS status
FROM checked_steps p
LEFT JOIN aligned al ON al.device = p.device AND al.point = p.point
WHERE p.step IS NULL OR (p.step_in_a = 1 AND p.step_in_b = 1)
ORDER BY abs(alloc_change) DESC
