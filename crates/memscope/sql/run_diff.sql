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
-- Rows come in no particular order: ORDER BY abs(alloc_change) DESC.
-- @param a VARCHAR side A: a capture (see capture()) or a source file
-- @param b VARCHAR side B: a capture or a source file
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
-- the call is planned, with the names there are: crates/engine/src/calls.rs)
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
-- each side's memory rows, alignment points and launches, per device in time order
timeline AS (
    SELECT s.side, s.align, c.device, c.source, c.ts, c.row_idx, c.event, c.step, c.owner, c.owner_live_bytes,
           false AS is_point, CAST(NULL AS VARCHAR) AS name, CAST(NULL AS VARCHAR) AS launch
    -- the few sources first: the side a join holds in memory (the rows stream past it)
    FROM sides s JOIN curve c ON s.source = c.source
    WHERE c.ts IS NOT NULL
    UNION ALL
    SELECT side, align, device, source, ts, row_idx, event, CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT),
           CASE align WHEN 'mark' THEN is_mark WHEN 'op' THEN is_op WHEN 'kernel' THEN is_kernel ELSE false END,
           name, CASE WHEN is_op OR is_kernel THEN name END
    FROM (
        SELECT s.side, s.align, e.device, e.source, e.ts, e.row_idx, e.event,
               COALESCE(NULLIF(trim(e.name), ''), '(unnamed)') AS name,
               e.event = 'MSTX' AND e.event_type IN ('Mark', 'Range_start') AS is_mark,
               e.event = 'OP_LAUNCH' AND e.event_type IN ('ATEN_START', 'ATB_START') AS is_op,
               e.event = 'KERNEL_LAUNCH' AND e.event_type IN ('KERNEL_LAUNCH', 'KERNEL_START') AS is_kernel
        FROM sides s JOIN events e ON s.source = e.source
        WHERE e.ts IS NOT NULL AND e.event IN ('MSTX', 'OP_LAUNCH', 'KERNEL_LAUNCH')
    ) AS l
    WHERE is_op OR is_kernel OR (is_mark AND align = 'mark')
),
counted AS (
    SELECT *,
           SUM(CASE WHEN is_point THEN 1 ELSE 0 END) OVER w AS pos,
           COUNT(launch) OVER w AS launches
    FROM timeline
    WINDOW w AS (PARTITION BY side, device ORDER BY ts, source, row_idx ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- the latest launch: the one launch of the rows after the same number of launches (not
-- last_value IGNORE NULLS, whose IGNORE NULLS a cluster loses with the plan's serialisation)
placed AS (
    SELECT side, align, device, source, row_idx, event, step, owner, owner_live_bytes, is_point, name, pos,
           COALESCE(MAX(launch) OVER (PARTITION BY side, device, launches), '(none)') AS kernel
    FROM counted
),
-- the two sides' point sequences of each device, aligned (nothing for align step)
sequences AS (
    SELECT device,
           array_agg(name ORDER BY pos) FILTER (WHERE side = 'a') AS a_names,
           array_agg(name ORDER BY pos) FILTER (WHERE side = 'b') AS b_names
    FROM placed WHERE is_point
    GROUP BY device
),
-- where each side's position lands: its aligned point (0 before the first point)
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
-- the rows placed on the unit they are compared in: the step (align step) or the point
units AS (
    SELECT p.*,
           CASE WHEN p.align = 'step' THEN p.step END AS u_step,
           CAST(CASE WHEN p.align <> 'step' THEN p.device END AS VARCHAR) AS u_device,
           CASE WHEN p.align <> 'step' THEN COALESCE(l.point, 0) END AS u_point
    FROM placed p
    LEFT JOIN landing l ON p.align <> 'step' AND l.side = p.side AND l.device = p.device AND l.pos = p.pos
    WHERE NOT p.is_point AND p.event IN ('MALLOC', 'FREE')
),
owned AS (
    SELECT u.side, u.u_step, u.u_device, u.u_point, u.kernel,
           CASE WHEN b.owner IS NOT NULL AND b.owner <> '' THEN b.owner WHEN b.stock THEN '(stock)' ELSE b.pool END AS owner,
           b.stack_py, COALESCE(b.size, 0) AS size, b.held_at_end
    FROM units u
    JOIN blocks b ON u.source = b.source AND u.row_idx = b.alloc_row
    WHERE u.event = 'MALLOC' AND b.alloc_ts IS NOT NULL
),
keyed AS (
    SELECT side, u_step, u_device, u_point, size, held_at_end, 1 AS n, 'owner' AS dimension, owner AS key FROM owned
    UNION ALL
    SELECT side, u_step, u_device, u_point, size, held_at_end, 1, 'category', categorize(owner, user_frame(stack_py)) FROM owned
    UNION ALL
    SELECT side, u_step, u_device, u_point, size, held_at_end, 1, 'user_frame', COALESCE(user_frame(stack_py), '(no user frame)') FROM owned
    UNION ALL
    SELECT side, u_step, u_device, u_point, size, held_at_end, 1, 'kernel', kernel FROM owned
    UNION ALL
    -- each point as a whole (named in the output; points where nothing is allocated are added there)
    SELECT side, u_step, u_device, u_point, size, held_at_end, 1, 'point', '' FROM owned WHERE u_point IS NOT NULL
),
allocs AS (
    SELECT side, dimension, key, u_step, u_device, u_point, SUM(size) AS alloc, SUM(n) AS blocks, CAST(NULL AS BIGINT) AS held_end,
           false AS whole
    FROM keyed WHERE u_step IS NOT NULL OR u_point IS NOT NULL
    GROUP BY side, dimension, key, u_step, u_device, u_point
    UNION ALL
    SELECT side, dimension, key, CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT), SUM(size), SUM(n),
           COALESCE(SUM(size) FILTER (WHERE held_at_end), 0), true
    FROM keyed WHERE dimension <> 'point'
    GROUP BY side, dimension, key
),
peaks AS (
    SELECT side, owner AS key, u_step, u_device, u_point, MAX(owner_live_bytes) AS peak, false AS whole
    FROM units
    WHERE owner IS NOT NULL AND (u_step IS NOT NULL OR u_point IS NOT NULL)
    GROUP BY side, owner, u_step, u_device, u_point
    UNION ALL
    SELECT side, owner, CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT), MAX(owner_live_bytes), true
    FROM units
    WHERE owner IS NOT NULL
    GROUP BY side, owner
),
per_side AS (
    SELECT a.*, p.peak
    FROM allocs a
    LEFT JOIN peaks p ON a.dimension = 'owner' AND p.side = a.side AND p.key = a.key AND p.whole = a.whole
                     AND (p.u_step IS NOT DISTINCT FROM a.u_step) AND (p.u_device IS NOT DISTINCT FROM a.u_device)
                     AND (p.u_point IS NOT DISTINCT FROM a.u_point)
),
-- steps present on both sides (whole-run rows and points always compare)
common_steps AS (
    SELECT u_step FROM owned WHERE u_step IS NOT NULL GROUP BY u_step HAVING COUNT(DISTINCT side) = 2
),
paired AS (
    SELECT COALESCE(x.dimension, y.dimension) AS dimension, COALESCE(x.key, y.key) AS key,
           COALESCE(x.u_step, y.u_step) AS step, COALESCE(x.u_device, y.u_device) AS device,
           COALESCE(x.u_point, y.u_point) AS point,
           x.alloc AS a_alloc, y.alloc AS b_alloc, x.peak AS a_peak, y.peak AS b_peak,
           x.held_end AS a_held_end, y.held_end AS b_held_end, x.blocks AS a_blocks, y.blocks AS b_blocks,
           x.key IS NOT NULL AS in_a, y.key IS NOT NULL AS in_b
    FROM (SELECT * FROM per_side WHERE side = 'a') x
    FULL OUTER JOIN (SELECT * FROM per_side WHERE side = 'b') y
      ON x.dimension = y.dimension AND x.key = y.key AND x.whole = y.whole
     AND (x.u_step IS NOT DISTINCT FROM y.u_step) AND (x.u_device IS NOT DISTINCT FROM y.u_device)
     AND (x.u_point IS NOT DISTINCT FROM y.u_point)
),
-- the points where neither side allocates
empty_points AS (
    SELECT al.device, al.point, al.point_name, al.a_pos, al.b_pos
    FROM aligned al
    LEFT JOIN (SELECT DISTINCT device, point FROM paired WHERE dimension = 'point') q
           ON q.device = al.device AND q.point = al.point
    WHERE q.point IS NULL
)
SELECT p.dimension,
       CASE WHEN p.dimension <> 'point' THEN p.key WHEN p.point = 0 THEN '(before the first)' ELSE al.point_name END AS key,
       p.step, p.device, p.point,
       CASE WHEN p.point = 0 THEN '(before the first)' ELSE al.point_name END AS point_name,
       CASE WHEN p.point = 0 THEN 0 ELSE al.a_pos END AS a_pos,
       CASE WHEN p.point = 0 THEN 0 ELSE al.b_pos END AS b_pos,
       COALESCE(a_alloc, 0) AS a_alloc, COALESCE(b_alloc, 0) AS b_alloc,
       COALESCE(b_alloc, 0) - COALESCE(a_alloc, 0) AS alloc_change,
       a_peak, b_peak, b_peak - a_peak AS peak_change,
       a_held_end, b_held_end, b_held_end - a_held_end AS held_change,
       COALESCE(a_blocks, 0) AS a_blocks, COALESCE(b_blocks, 0) AS b_blocks,
       CASE WHEN NOT in_b THEN 'only_a' WHEN NOT in_a THEN 'only_b'
            WHEN a_alloc = b_alloc AND (a_peak IS NOT DISTINCT FROM b_peak)
                 AND (a_held_end IS NOT DISTINCT FROM b_held_end) AND a_blocks = b_blocks THEN 'same'
            ELSE 'changed' END AS status
FROM paired p
LEFT JOIN aligned al ON al.device = p.device AND al.point = p.point
LEFT JOIN common_steps cs ON cs.u_step = p.step
WHERE p.step IS NULL OR cs.u_step IS NOT NULL
UNION ALL
SELECT 'point', point_name AS key, CAST(NULL AS BIGINT), device, point, point_name, a_pos, b_pos,
       0, 0, 0, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT),
       CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), 0, 0,
       CASE WHEN b_pos IS NULL THEN 'only_a' WHEN a_pos IS NULL THEN 'only_b' ELSE 'same' END
FROM empty_points
