-- oom_findings: the OOM guide's rules for every OOM_TRIGGER (memq view oom_findings; verdicts
-- only, memq's evidence texts are not rebuilt). R = free memory of the latest SNAPSHOT of the
-- trigger's process and device before it in event order (ID), read in either key spelling
-- (free / free_mem). RECENT and TOP rows belong to the latest trigger before them (by ID);
-- RECENT rank 1 is the first written, i.e. the newest. Owners of TOP blocks come from the
-- block with the same pid, pool, address and allocation time.
-- memq also drops the copies of RECENT/TOP rows that the tool writes into every device file
-- of a process; one file holds one copy, so that step is left out.
WITH rec AS (
    SELECT id, ts, pid, device, event_type, stack_py, stack_c,
           CASE event_type WHEN 'OOM_TRIGGER' THEN 'trigger' WHEN 'OOM_RECENT_ALLOC' THEN 'recent'
                           WHEN 'OOM_TOP_ALLOC' THEN 'top' END AS kind,
           TRY_CAST(NULLIF(regexp_extract(attr, '[{,]req_size:(-?[0-9]+)', 1), '') AS BIGINT) AS req_size,
           NULLIF(regexp_extract(attr, '[{,]pool:([^,}]*)', 1), '') AS rpool,
           NULLIF(regexp_extract(attr, '[{,]ptr:([^,}]*)', 1), '') AS rptr,
           TRY_CAST(NULLIF(regexp_extract(attr, '[{,]size:(-?[0-9]+)', 1), '') AS BIGINT) AS rsize,
           TRY_CAST(NULLIF(regexp_extract(attr, '[{,]timestamp:(-?[0-9]+)', 1), '') AS BIGINT) AS alloc_ts
    FROM events
    WHERE event = 'OOM_DETAIL'
),
with_trigger AS (
    SELECT *,
           MAX(CASE WHEN kind = 'trigger' THEN id END) OVER (
               PARTITION BY pid ORDER BY id, CASE WHEN kind = 'trigger' THEN 0 ELSE 1 END
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS trigger_id
    FROM rec
),
triggers AS (
    SELECT id AS trigger_id, pid, device, ts AS oom_ts, req_size FROM rec WHERE kind = 'trigger'
),
snapshots AS (
    SELECT id, pid, device, ts,
           TRY_CAST(COALESCE(NULLIF(regexp_extract(attr, '[{,]free_mem:([0-9]+)', 1), ''),
                             NULLIF(regexp_extract(attr, '[{,]free:([0-9]+)', 1), '')) AS BIGINT) AS free_mem,
           TRY_CAST(COALESCE(NULLIF(regexp_extract(attr, '[{,]total_mem:([0-9]+)', 1), ''),
                             NULLIF(regexp_extract(attr, '[{,]total:([0-9]+)', 1), '')) AS BIGINT) AS total_mem
    FROM events
    WHERE event = 'SNAPSHOT'
),
trigger_snap AS (
    SELECT t.*, s.free_mem, s.total_mem, s.ts AS snapshot_ts
    FROM triggers t
    ASOF LEFT JOIN snapshots s ON s.pid IS NOT DISTINCT FROM t.pid AND s.device = t.device AND s.id < t.trigger_id
),
owners AS (
    SELECT pid, pool, ptr, alloc_ts, MIN(owner) AS owner FROM blocks WHERE alloc_ts IS NOT NULL GROUP BY ALL
),
records AS (
    SELECT r.*, t.device AS tdevice,
           ROW_NUMBER() OVER (PARTITION BY r.pid, r.trigger_id, r.kind ORDER BY r.id) AS rank,
           COALESCE(NULLIF(NULLIF(trim(r.stack_py), ''), 'NA'), NULLIF(NULLIF(trim(r.stack_c), ''), 'NA')) AS stack,
           o.owner
    FROM with_trigger r
    JOIN triggers t ON t.trigger_id = r.trigger_id AND t.pid IS NOT DISTINCT FROM r.pid
    LEFT JOIN owners o ON o.pid IS NOT DISTINCT FROM r.pid AND o.pool = r.rpool AND o.ptr = r.rptr AND o.alloc_ts = r.alloc_ts
    WHERE r.kind IN ('recent', 'top')
),
categorised AS (
    SELECT *,
           kind = 'recent' AND rank <= 5 AS recent5,
           CASE WHEN kind <> 'top' OR owner IS NULL THEN NULL
                WHEN regexp_matches('@' || owner || '@', '@(weight|weights|sharded_weight|optimizer_state|gradient)@') THEN 'model_states'
                WHEN regexp_matches('@' || owner || '@', '@kv_cache@') THEN 'kv_cache'
                WHEN regexp_matches('@' || owner || '@', '@(ops|aten|activation)@') THEN 'activations'
                ELSE 'other' END AS category
    FROM records
),
-- the step of each RECENT allocation (latest step of the trigger's device started at or before it)
recent_steps AS (
    SELECT c.trigger_id, COUNT(DISTINCT s.k) AS steps_spanned
    FROM (SELECT * FROM categorised WHERE kind = 'recent') c
    ASOF LEFT JOIN steps s ON s.pid IS NOT DISTINCT FROM c.pid AND s.device = c.tdevice AND s.start_ts <= c.alloc_ts
    GROUP BY ALL
),
stack_counts AS (
    SELECT trigger_id, MAX(n) AS max_repeat
    FROM (SELECT trigger_id, stack, COUNT(*) AS n FROM categorised WHERE recent5 AND stack IS NOT NULL GROUP BY ALL)
    GROUP BY ALL
),
facts AS (
    SELECT trigger_id,
           COUNT(*) FILTER (WHERE recent5) AS recent_n,
           SUM(rsize) FILTER (WHERE recent5) AS recent_bytes,
           COUNT(stack) FILTER (WHERE recent5) AS with_stack,
           MAX(rsize) FILTER (WHERE kind = 'recent') AS largest_recent,
           COUNT(*) FILTER (WHERE kind = 'top') AS top_n,
           COUNT(owner) FILTER (WHERE kind = 'top') AS with_owner,
           MAX(rsize) FILTER (WHERE kind = 'top') AS top_largest,
           COUNT(*) FILTER (WHERE category IN ('model_states', 'kv_cache', 'activations')) AS categorised_top
    FROM categorised
    GROUP BY ALL
),
step_growth AS (
    SELECT pid, device, bool_or(comparisons >= 1 AND all_grow) AS grows_every_step, MAX(comparisons) AS comparisons
    FROM (
        SELECT pid, device, pool, COUNT(growth_vs_prev) AS comparisons,
               bool_and(growth_vs_prev IS NULL OR growth_vs_prev > 0) AS all_grow
        FROM step_peaks
        WHERE pool <> 'HAL' AND end_used IS NOT NULL
        GROUP BY ALL
    )
    GROUP BY ALL
),
joined AS (
    SELECT t.*, COALESCE(f.recent_n, 0) AS recent_n, f.recent_bytes, COALESCE(f.with_stack, 0) AS with_stack,
           f.largest_recent, COALESCE(f.top_n, 0) AS top_n, COALESCE(f.with_owner, 0) AS with_owner,
           f.top_largest, COALESCE(f.categorised_top, 0) AS categorised_top, c.max_repeat,
           COALESCE(rs.steps_spanned, 0) AS steps_spanned, g.grows_every_step, g.comparisons
    FROM trigger_snap t
    LEFT JOIN facts f USING (trigger_id)
    LEFT JOIN stack_counts c USING (trigger_id)
    LEFT JOIN recent_steps rs USING (trigger_id)
    LEFT JOIN step_growth g ON g.pid IS NOT DISTINCT FROM t.pid AND g.device = t.device
)
SELECT pid, device, trigger_id, oom_ts, r.priority,
       CASE r.priority WHEN 1 THEN 'single_huge_request' WHEN 2 THEN 'over_large_request' WHEN 3 THEN 'top_owner'
                       WHEN 4 THEN 'same_stack_repeated' WHEN 5 THEN 'chain_of_large_allocations'
                       ELSE 'accumulation' END AS rule,
       CASE r.priority
           WHEN 1 THEN CASE WHEN free_mem IS NULL OR req_size IS NULL THEN 'unknown'
                            WHEN free_mem > 0 AND req_size >= 0.8 * free_mem THEN 'yes' ELSE 'no' END
           WHEN 2 THEN CASE WHEN free_mem IS NULL THEN 'unknown'
                            WHEN free_mem > 1073741824 AND COALESCE(largest_recent, 0) <= free_mem THEN 'yes' ELSE 'no' END
           WHEN 3 THEN CASE WHEN top_n = 0 OR with_owner = 0 THEN 'unknown'
                            WHEN categorised_top > 0 THEN 'yes' ELSE 'no' END
           WHEN 4 THEN CASE WHEN with_stack < 3 THEN 'unknown' WHEN max_repeat >= 3 THEN 'yes' ELSE 'no' END
           WHEN 5 THEN CASE WHEN free_mem IS NULL OR recent_n = 0 THEN 'unknown'
                            WHEN recent_bytes > 3 * free_mem THEN 'yes' ELSE 'no' END
           ELSE CASE WHEN recent_n = 0 OR steps_spanned = 0 OR comparisons IS NULL OR top_n = 0 OR total_mem IS NULL THEN 'unknown'
                     WHEN steps_spanned >= 2 AND grows_every_step AND top_largest < 0.05 * total_mem THEN 'yes'
                     ELSE 'no' END
       END AS verdict,
       req_size, free_mem, snapshot_ts
FROM joined, (VALUES (1), (2), (3), (4), (5), (6)) r(priority)
ORDER BY oom_ts, r.priority
