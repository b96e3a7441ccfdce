-- Not timed: the reference's own rules (docs/formats/memscope.md §6.5, §6.6) where they are
-- documented to differ from memq's, so that compare.sh can tell a documented difference from a
-- wrong answer. Rows in sorted order; blocks keyed by the Ptr text alone, pools mixed
-- (quirk 2).
--   leak_*: --leak-candidates: a MALLOC stays a candidate unless a later MALLOC or a later
--           non-shadow FREE follows on its Ptr (shadow FREEs keep it live: quirk 11 / §5.5).
--   at_*:   --at-timestamp T --pool P: the P MALLOCs up to T, each removed by a later FREE of
--           ANY pool on its Ptr (quirk 3) or replaced by a later P MALLOC on it.
WITH leak AS (
    SELECT ptr, last(event ORDER BY ts, row_idx) AS last_event, last(size ORDER BY ts, row_idx) AS size
    FROM mem
    WHERE event = 'MALLOC' OR NOT shadow
    GROUP BY ptr
),
at_ts AS (
    SELECT ptr, last(event ORDER BY ts, row_idx) AS last_event, last(size ORDER BY ts, row_idx) AS size
    FROM mem
    WHERE ts <= $TS AND (event = 'FREE' OR pool = $POOL)
    GROUP BY ptr
)
SELECT 'leak_count' AS name, COUNT(*) AS value FROM leak WHERE last_event = 'MALLOC'
UNION ALL SELECT 'leak_bytes', COALESCE(SUM(COALESCE(size, 0)), 0) FROM leak WHERE last_event = 'MALLOC'
UNION ALL SELECT 'at_blocks', COUNT(*) FROM at_ts WHERE last_event = 'MALLOC'
UNION ALL SELECT 'at_bytes', COALESCE(SUM(COALESCE(size, 0)), 0) FROM at_ts WHERE last_event = 'MALLOC'
