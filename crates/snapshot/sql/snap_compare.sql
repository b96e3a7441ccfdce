-- snap_compare: two snapshots of one dataset compared by totals, segment sizes, allocation stacks and user frames — never by raw addresses.
--
-- b is taken as the later snapshot: every diff is b - a. Addresses are meaningless across
-- processes (and reused within one), so segments are matched by (segment_type, total_size) and
-- live blocks by the content of their allocation stack (snap_stacks.stack_key: the same frames in
-- the same order) or by their first user frame. Rows, told apart by `kind`:
--   total         key reserved (count = segments), allocated (count = live blocks), requested,
--                 free (reserved - allocated; count = inactive blocks), pending_free,
--                 active_peak (snap_peak, summed over devices), reserved_peak, oom (count only);
--   segment_size  key '<type> <total_size>': segments of that size in each snapshot;
--   stack         one per distinct allocation stack of live blocks (key = its user path, else its
--                 call path; '(no stack)' for blocks allocated before recording);
--   user_frame    one per first user frame of live blocks.
-- rank orders each kind by the size of the change (|diff_bytes|, then |diff_count|; ties by key
-- and stack ids, so that the order is the same on every run).
-- Rows come out in a fixed order: kind first — total, then segment_size, then stack, then
-- user_frame (the overall figures before the details that explain them) — and within a kind by
-- rank (1 = largest change first). Every tie is broken, so the order is the same on every run,
-- in one process or on a cluster.
-- status says whether a stack, user frame or segment size is only in a, only in b, changed or
-- the same: `WHERE kind = 'stack' AND status = 'only_b'` lists what the later snapshot added.
-- The reference's compare matches segments by address and reports the positional database as the
-- "before"; see docs/reference-differences.md.
--
-- @param a VARCHAR  [one of snapshots or a part] the earlier snapshot (its source name, as in snap_segments.snapshot)
-- @param b VARCHAR  [one of snapshots or a part] the later snapshot
-- @column snapshot_a VARCHAR the earlier snapshot (argument a)
-- @column snapshot_b VARCHAR the later snapshot (argument b)
-- @column kind       VARCHAR total, segment_size, stack or user_frame (rows come in this order)
-- @column rank       UBIGINT rank within kind by the size of the change (1 = largest)
-- @column key        VARCHAR text: metric name, '<segment_type> <total_size>', the stack's user path / call path, or the user frame
-- @column user_frame VARCHAR text: first user frame (stack and user_frame rows)
-- @column stack_id_a BIGINT  the stack's id in snapshot a (stack rows); NULL when absent there
-- @column stack_id_b BIGINT  the stack's id in snapshot b (stack rows); NULL when absent there
-- @column a_count    BIGINT  count: count in a: segments, blocks or events (see kind); NULL when the metric has no count
-- @column b_count    BIGINT  count: count in b
-- @column diff_count BIGINT  count: b_count - a_count
-- @column a_bytes    BIGINT  bytes: in a; NULL for count-only metrics
-- @column b_bytes    BIGINT  bytes: in b
-- @column diff_bytes BIGINT  bytes: b_bytes - a_bytes
-- @column trend      VARCHAR +, - or = : direction of diff_bytes (of diff_count for count-only rows)
-- @column status     VARCHAR only_a (a stack, user frame or segment size present in a only), only_b (in b only), changed or same
WITH
segs AS (
    SELECT snapshot, segment_type, total_size, allocated_size, requested_size
    FROM snap_segments
    WHERE snapshot IN ($a, $b)
),
blks AS (
    SELECT b.snapshot, b.state, b.size, b.stack_id, s.stack_key, s.user_frame,
           COALESCE(s.user_path, s.call_path, '(no stack)') AS path
    FROM snap_blocks b
    LEFT JOIN snap_stacks s ON s.snapshot = b.snapshot AND s.stack_id = b.stack_id
    WHERE b.snapshot IN ($a, $b)
),
peaks AS (
    SELECT snapshot, SUM(active_peak) AS active_peak, SUM(reserved_peak) AS reserved_peak
    FROM snap_peak
    WHERE snapshot IN ($a, $b)
    GROUP BY snapshot
),
-- (snapshot, kind, key, ...) facts, one row per snapshot side
facts AS (
    SELECT snapshot, 'total' AS kind, 'reserved' AS key, CAST(NULL AS VARCHAR) AS user_frame, CAST(NULL AS BIGINT) AS stack_id,
           COUNT(*) AS n, SUM(total_size) AS bytes
    FROM segs GROUP BY snapshot
    UNION ALL
    SELECT snapshot, 'total', 'allocated', NULL, NULL, SUM(CASE WHEN state = 'active_allocated' THEN 1 ELSE 0 END),
           SUM(CASE WHEN state = 'active_allocated' THEN size ELSE 0 END)
    FROM blks GROUP BY snapshot
    UNION ALL
    SELECT snapshot, 'total', 'requested', NULL, NULL, NULL, SUM(requested_size)
    FROM segs GROUP BY snapshot
    UNION ALL
    SELECT snapshot, 'total', 'free', NULL, NULL, SUM(CASE WHEN state = 'inactive' THEN 1 ELSE 0 END),
           SUM(CASE WHEN state = 'active_allocated' THEN 0 ELSE size END)
    FROM blks GROUP BY snapshot
    UNION ALL
    SELECT snapshot, 'total', 'pending_free', NULL, NULL, SUM(CASE WHEN state = 'active_pending_free' THEN 1 ELSE 0 END),
           SUM(CASE WHEN state = 'active_pending_free' THEN size ELSE 0 END)
    FROM blks GROUP BY snapshot
    UNION ALL
    SELECT snapshot, 'total', 'active_peak', NULL, NULL, NULL, active_peak FROM peaks
    UNION ALL
    SELECT snapshot, 'total', 'reserved_peak', NULL, NULL, NULL, reserved_peak FROM peaks
    UNION ALL
    SELECT s.snapshot, 'total', 'oom', NULL, NULL, COALESCE(SUM(l.oom_count), 0), NULL
    FROM (SELECT $a AS snapshot UNION SELECT $b) s
    LEFT JOIN snap_trace_levels l ON l.snapshot = s.snapshot
    GROUP BY s.snapshot
    UNION ALL
    SELECT snapshot, 'segment_size', segment_type || ' ' || CAST(total_size AS VARCHAR), NULL, NULL, COUNT(*), SUM(total_size)
    FROM segs GROUP BY snapshot, segment_type, total_size
    UNION ALL
    SELECT snapshot, 'stack', MIN(path), MIN(user_frame), MIN(stack_id), COUNT(*), SUM(size)
    FROM blks WHERE state = 'active_allocated'
    GROUP BY snapshot, COALESCE(stack_key, '(no stack)')
    UNION ALL
    SELECT snapshot, 'user_frame', COALESCE(user_frame, CASE WHEN stack_id IS NULL THEN '(no stack)' ELSE '(no user frame)' END),
           COALESCE(user_frame, CASE WHEN stack_id IS NULL THEN '(no stack)' ELSE '(no user frame)' END), NULL, COUNT(*), SUM(size)
    FROM blks WHERE state = 'active_allocated'
    GROUP BY snapshot, COALESCE(user_frame, CASE WHEN stack_id IS NULL THEN '(no stack)' ELSE '(no user frame)' END)
),
-- stack rows are matched on the stack content, the others on the key
keyed AS (
    SELECT f.*,
           CASE WHEN f.kind = 'stack' THEN COALESCE(s.stack_key, '(no stack)') ELSE f.key END AS match_key
    FROM facts f
    LEFT JOIN snap_stacks s ON f.kind = 'stack' AND s.snapshot = f.snapshot AND s.stack_id = f.stack_id
),
paired AS (
    SELECT COALESCE(x.kind, y.kind) AS kind,
           COALESCE(y.key, x.key) AS key,
           COALESCE(y.user_frame, x.user_frame) AS user_frame,
           CASE WHEN COALESCE(x.kind, y.kind) = 'stack' THEN x.stack_id END AS stack_id_a,
           CASE WHEN COALESCE(x.kind, y.kind) = 'stack' THEN y.stack_id END AS stack_id_b,
           x.n AS a_count, y.n AS b_count, x.bytes AS a_bytes, y.bytes AS b_bytes,
           (x.kind IS NULL OR y.kind IS NULL) AS one_sided
    FROM (SELECT * FROM keyed WHERE snapshot = $a) x
    FULL OUTER JOIN (SELECT * FROM keyed WHERE snapshot = $b) y
      ON x.kind = y.kind AND x.match_key = y.match_key
),
diffs AS (
    SELECT kind, key, user_frame, stack_id_a, stack_id_b,
           CASE WHEN kind = 'total' AND a_count IS NULL AND b_count IS NULL THEN NULL ELSE COALESCE(a_count, 0) END AS a_count,
           CASE WHEN kind = 'total' AND a_count IS NULL AND b_count IS NULL THEN NULL ELSE COALESCE(b_count, 0) END AS b_count,
           CASE WHEN kind = 'total' AND a_bytes IS NULL AND b_bytes IS NULL THEN NULL ELSE COALESCE(a_bytes, 0) END AS a_bytes,
           CASE WHEN kind = 'total' AND a_bytes IS NULL AND b_bytes IS NULL THEN NULL ELSE COALESCE(b_bytes, 0) END AS b_bytes
    FROM paired
),
changes AS (
    SELECT *,
           b_count - a_count AS diff_count,
           b_bytes - a_bytes AS diff_bytes,
           COALESCE(abs(b_bytes - a_bytes), 0) AS bytes_change,
           COALESCE(abs(b_count - a_count), 0) AS count_change
    FROM diffs
)
SELECT $a AS snapshot_a, $b AS snapshot_b, kind,
       ROW_NUMBER() OVER (PARTITION BY kind ORDER BY bytes_change DESC, count_change DESC, key, stack_id_a, stack_id_b) AS rank,
       key, user_frame, stack_id_a, stack_id_b,
       a_count, b_count, diff_count, a_bytes, b_bytes, diff_bytes,
       CASE WHEN COALESCE(diff_bytes, diff_count) > 0 THEN '+'
            WHEN COALESCE(diff_bytes, diff_count) < 0 THEN '-'
            ELSE '=' END AS trend,
       CASE WHEN kind <> 'total' AND COALESCE(a_count, 0) = 0 AND COALESCE(b_count, 0) > 0 THEN 'only_b'
            WHEN kind <> 'total' AND COALESCE(b_count, 0) = 0 AND COALESCE(a_count, 0) > 0 THEN 'only_a'
            WHEN COALESCE(diff_bytes, 0) = 0 AND COALESCE(diff_count, 0) = 0 THEN 'same'
            ELSE 'changed' END AS status
FROM changes
ORDER BY CASE kind WHEN 'total' THEN 1 WHEN 'segment_size' THEN 2 WHEN 'stack' THEN 3 ELSE 4 END, rank
