-- run_diff: one run against another — two captures, two ranks or two files of one dataset — aligned on step numbers, per owner, category and user frame.
--
-- What msMemScope's `--compare` does with two separate collections, inside one dataset. A side
-- is every dump file whose capture (capture(source): the output folder of one collection,
-- docs/formats/memscope.md §5.9) or whose own name equals the argument; its devices and
-- processes are added up (name one file per side to compare two devices). Blocks are placed in
-- the step of their MALLOC (curve.step, table steps); steps align by number, so a run whose
-- collection stopped for some steps compares only the steps both sides have, and `step` NULL
-- rows compare the whole runs. Per key (dimension owner, category or user_frame):
--   alloc_bytes  bytes allocated (MALLOCs with a time) in the step / in the run;
--   peak_bytes   the highest live bytes of that owner during the step / the run (curve.owner_live_bytes;
--                owner rows only, the largest over the side's series);
--   held_end     bytes of its blocks never released (whole-run rows only).
-- status: only_a, only_b (the key appears on one side only), changed, same.
--
-- Rows come in no particular order: ORDER BY abs(alloc_change) DESC.
-- @param a VARCHAR side A: a capture (see capture()) or a source file
-- @param b VARCHAR side B: a capture or a source file
-- @column dimension    VARCHAR owner, category or user_frame
-- @column key          VARCHAR the owner, category or user frame ('(no user frame)' without one)
-- @column step         BIGINT  step number; NULL = the whole run
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
    SELECT raise_unless($a <> $b, concat('run_diff: `', $a, '` and `', $b, '` must name two different captures or sources of this dataset')) AS ok
),
sides AS (
    SELECT n.source, CASE WHEN capture(n.source) = $a OR n.source = $a THEN 'a' ELSE 'b' END AS side
    FROM checked c CROSS JOIN names n
    WHERE c.ok AND (capture(n.source) IN ($a, $b) OR n.source IN ($a, $b))
),
owned AS (
    SELECT s.side, c.step,
           CASE WHEN b.owner IS NOT NULL AND b.owner <> '' THEN b.owner WHEN b.stock THEN '(stock)' ELSE b.pool END AS owner,
           b.stack_py, COALESCE(b.size, 0) AS size, b.held_at_end
    -- the few sources first: the side a join holds in memory (the rows stream past it)
    FROM sides s
    JOIN blocks b ON s.source = b.source
    JOIN curve c ON c.source = b.source AND c.row_idx = b.alloc_row AND c.event = 'MALLOC'
    WHERE b.alloc_ts IS NOT NULL
),
keyed AS (
    SELECT side, step, size, held_at_end, 'owner' AS dimension, owner AS key FROM owned
    UNION ALL
    SELECT side, step, size, held_at_end, 'category', categorize(owner, user_frame(stack_py)) FROM owned
    UNION ALL
    SELECT side, step, size, held_at_end, 'user_frame', COALESCE(user_frame(stack_py), '(no user frame)') FROM owned
),
allocs AS (
    SELECT side, dimension, key, step, SUM(size) AS alloc, COUNT(*) AS blocks, CAST(NULL AS BIGINT) AS held_end
    FROM keyed WHERE step IS NOT NULL
    GROUP BY side, dimension, key, step
    UNION ALL
    SELECT side, dimension, key, CAST(NULL AS BIGINT), SUM(size), COUNT(*),
           COALESCE(SUM(size) FILTER (WHERE held_at_end), 0)
    FROM keyed
    GROUP BY side, dimension, key
),
peaks AS (
    SELECT s.side, c.owner AS key, c.step, MAX(c.owner_live_bytes) AS peak
    FROM sides s JOIN curve c ON s.source = c.source
    WHERE c.owner IS NOT NULL AND c.step IS NOT NULL
    GROUP BY s.side, c.owner, c.step
    UNION ALL
    SELECT s.side, c.owner, CAST(NULL AS BIGINT), MAX(c.owner_live_bytes)
    FROM sides s JOIN curve c ON s.source = c.source
    WHERE c.owner IS NOT NULL
    GROUP BY s.side, c.owner
),
per_side AS (
    SELECT a.*, p.peak
    FROM allocs a
    LEFT JOIN peaks p ON a.dimension = 'owner' AND p.side = a.side AND p.key = a.key
                     AND (p.step IS NOT DISTINCT FROM a.step)
),
-- steps present on both sides (whole-run rows always compare)
common_steps AS (
    SELECT step FROM owned WHERE step IS NOT NULL GROUP BY step HAVING COUNT(DISTINCT side) = 2
),
paired AS (
    SELECT COALESCE(x.dimension, y.dimension) AS dimension, COALESCE(x.key, y.key) AS key,
           COALESCE(x.step, y.step) AS step,
           x.alloc AS a_alloc, y.alloc AS b_alloc, x.peak AS a_peak, y.peak AS b_peak,
           x.held_end AS a_held_end, y.held_end AS b_held_end, x.blocks AS a_blocks, y.blocks AS b_blocks,
           x.key IS NOT NULL AS in_a, y.key IS NOT NULL AS in_b
    FROM (SELECT * FROM per_side WHERE side = 'a') x
    FULL OUTER JOIN (SELECT * FROM per_side WHERE side = 'b') y
      ON x.dimension = y.dimension AND x.key = y.key AND (x.step IS NOT DISTINCT FROM y.step)
)
SELECT dimension, key, step,
       COALESCE(a_alloc, 0) AS a_alloc, COALESCE(b_alloc, 0) AS b_alloc,
       COALESCE(b_alloc, 0) - COALESCE(a_alloc, 0) AS alloc_change,
       a_peak, b_peak, b_peak - a_peak AS peak_change,
       a_held_end, b_held_end, b_held_end - a_held_end AS held_change,
       COALESCE(a_blocks, 0) AS a_blocks, COALESCE(b_blocks, 0) AS b_blocks,
       CASE WHEN NOT in_b THEN 'only_a' WHEN NOT in_a THEN 'only_b'
            WHEN a_alloc = b_alloc AND (a_peak IS NOT DISTINCT FROM b_peak)
                 AND (a_held_end IS NOT DISTINCT FROM b_held_end) AND a_blocks = b_blocks THEN 'same'
            ELSE 'changed' END AS status
FROM paired
WHERE step IS NULL OR step IN (SELECT step FROM common_steps)
