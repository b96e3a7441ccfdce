-- rank_leaks: leaks across the ranks of a job — each periodic leak (step_leaks) with the ranks it appears on, flagging those that appear on some ranks only.
--
-- A leak origin is (pool, owner, user frame) as step_leaks finds it on each series: memory
-- allocated in one step and still held steps later, with high or medium confidence. The same
-- code leaks on every rank of a data-parallel job; a leak on some ranks only points at
-- rank-dependent code (the last pipeline stage, rank 0 logging, an uneven data shard).
-- ranks_total counts the ranks of the dataset with memscope dumps.
--
-- Rows come in no particular order: ORDER BY some_ranks_only DESC, held_bytes DESC.
-- @column pool                VARCHAR pool (Event Type)
-- @column owner               VARCHAR owner of the leaking MALLOCs ('(stock)' or the pool name without one)
-- @column owner_group         VARCHAR level-1 group of the owner
-- @column user_frame          VARCHAR innermost user frame of the MALLOCs' Python stack; '(no user frame)' without one
-- @column ranks_with          BIGINT  count: ranks where this origin leaks
-- @column ranks_total         BIGINT  count: ranks of the dataset with memscope dumps
-- @column some_ranks_only     BOOLEAN the origin leaks on some ranks but not on all
-- @column ranks               VARCHAR the ranks where it leaks, comma-separated in rank order
-- @column held_bytes          BIGINT  bytes: held at the end of the last complete step, summed over those ranks
-- @column max_held_bytes      BIGINT  bytes: the largest of those per rank
-- @column max_rank            BIGINT  the rank holding the most
-- @column max_growth_per_step DOUBLE  bytes: the steepest growth per step among those ranks
WITH per_rank AS (
    SELECT s.rank, l.pool, l.owner, l.owner_group, l.user_frame,
           SUM(l.held_last) AS held, MAX(l.growth_per_step) AS growth
    FROM step_leaks l
    JOIN sources s ON s.source = l.source
    WHERE l.confidence IN ('high', 'medium')
    GROUP BY s.rank, l.pool, l.owner, l.owner_group, l.user_frame
),
total AS (
    SELECT COUNT(DISTINCT rank) AS n
    FROM sources
    WHERE kind IN ('memscope_csv', 'memscope_db')
)
SELECT pool, owner, owner_group, user_frame,
       COUNT(*) AS ranks_with,
       MAX(t.n) AS ranks_total,
       COUNT(*) < MAX(t.n) AS some_ranks_only,
       array_to_string(array_agg(rank ORDER BY rank), ', ') AS ranks,
       CAST(SUM(held) AS BIGINT) AS held_bytes,
       CAST(MAX(held) AS BIGINT) AS max_held_bytes,
       first_value(rank ORDER BY held DESC, rank) AS max_rank,
       MAX(growth) AS max_growth_per_step
FROM per_rank
CROSS JOIN total t
GROUP BY pool, owner, owner_group, user_frame
