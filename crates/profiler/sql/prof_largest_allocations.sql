-- prof_largest_allocations: operator allocations ranked by size, largest first.
--
-- Every row of prof_operator_memory with its rank by size (1 = largest; ties share a rank) and
-- how long it was held (NULL when never released). ORDER BY size_rank, alloc_ts, line; add
-- `WHERE size_rank <= 10` for the ten largest.
--
-- @column size_rank  BIGINT  count: rank by size, 1 = largest; equal sizes share a rank
-- @column name       VARCHAR operator
-- @column size       BIGINT  bytes: size of the allocation
-- @column alloc_ts   BIGINT  ns: when it was allocated
-- @column release_ts BIGINT  ns: when it was released; NULL = never in the profiled window
-- @column held       BIGINT  duration_ns: release_ts − alloc_ts; NULL when never released
-- @column stream     VARCHAR Stream Ptr as written; NULL for graph-engine (cann::) rows
-- @column device     VARCHAR Device Type as written
-- @column source     VARCHAR operator_memory.csv the allocation comes from
-- @column line       BIGINT  line of the allocation in its file
SELECT CAST(RANK() OVER (PARTITION BY device ORDER BY size DESC) AS BIGINT) AS size_rank,
       name, size, alloc_ts, release_ts, release_ts - alloc_ts AS held,
       stream, device, source, CAST(line AS BIGINT) AS line
FROM prof_operator_memory
WHERE size IS NOT NULL
