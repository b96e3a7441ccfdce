-- prof_longest_held: operator allocations ranked by how long they were held, longest first.
--
-- Released allocations are ranked by release_ts − alloc_ts (1 = longest; ties share a rank).
-- Allocations never released in the profiled window (release_ts NULL) come with a NULL rank and
-- `held_to_end` = the time from their allocation to the last moment of the profile (the latest
-- time of any operator or memory record on the device): they may be leaks, or simply outlive
-- the window. ORDER BY held_rank NULLS LAST, alloc_ts, line.
--
-- @column held_rank   BIGINT  count: rank among released allocations by time held, 1 = longest; NULL when never released
-- @column name        VARCHAR operator
-- @column size        BIGINT  bytes: size of the allocation
-- @column alloc_ts    BIGINT  ns: when it was allocated
-- @column release_ts  BIGINT  ns: when it was released; NULL = never in the profiled window
-- @column held        BIGINT  duration_ns: release_ts − alloc_ts; NULL when never released
-- @column held_to_end BIGINT  duration_ns: never-released allocations: from alloc_ts to the end of the profile; NULL otherwise
-- @column stream      VARCHAR Stream Ptr as written; NULL for graph-engine (cann::) rows
-- @column device      VARCHAR Device Type as written
-- @column source      VARCHAR operator_memory.csv the allocation comes from
-- @column line        BIGINT  line of the allocation in its file
WITH
profile_end AS (
    SELECT device, MAX(t) AS end_ts
    FROM (
        SELECT device, GREATEST(alloc_ts, COALESCE(release_ts, alloc_ts)) AS t FROM prof_operator_memory
        UNION ALL
        SELECT device, ts AS t FROM prof_memory_record
    ) AS moments
    GROUP BY device
)
SELECT CASE WHEN o.release_ts IS NOT NULL THEN
           CAST(RANK() OVER (PARTITION BY o.device, o.release_ts IS NULL
                             ORDER BY o.release_ts - o.alloc_ts DESC) AS BIGINT)
       END AS held_rank,
       o.name, o.size, o.alloc_ts, o.release_ts, o.release_ts - o.alloc_ts AS held,
       CASE WHEN o.release_ts IS NULL THEN e.end_ts - o.alloc_ts END AS held_to_end,
       o.stream, o.device, o.source, CAST(o.line AS BIGINT) AS line
FROM prof_operator_memory o
LEFT JOIN profile_end e ON e.device = o.device
