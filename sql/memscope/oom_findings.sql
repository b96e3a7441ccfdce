-- oom_findings: the OOM guide's inference rules applied to every OOM trigger — which explanation the evidence supports, in the guide's attribution order.
--
-- One row per (trigger, rule); verdict yes / no / unknown (the data cannot decide), with the
-- figures behind it in `evidence`. R = free device memory of the latest SNAPSHOT of the same
-- process and device before the trigger (view oom_events; normally the automatic
-- OOM_Snapshot), not the last snapshot of the file. RECENT rows are used newest first as the
-- tool writes them (the first 5 = the 5 most recent allocations).
-- Rules, in attribution order (priority):
-- 1 single_huge_request   req_size ≥ 80 % of R.
-- 2 over_large_request    R > 1 GiB yet OOM, and every RECENT block ≤ R: the request itself is over-large.
-- 3 top_owner             owners of the TOP blocks (recovered from their MALLOC rows):
--                         weight / optimizer_state / gradient → model states too big;
--                         kv_cache → KV cache configuration; ops / aten / activation → activations.
--                         Verdict yes when some TOP bytes have one of these owners; the category
--                         holding most TOP bytes is reported.
-- 4 same_stack_repeated   among the 5 most recent RECENT rows, one whole call stack (Python stack,
--                         or C stack when there is no Python stack; 'NA' is no stack) appears ≥ 3
--                         times: repeated allocation from one site (loop). Unknown when fewer than
--                         3 of them have a stack.
-- 5 chain_of_large_allocations  Σ size of the 5 most recent RECENT rows > 3 × R.
-- 6 accumulation          RECENT allocations spread over ≥ 2 steps, `used` of a framework pool of
--                         the device ends every complete step higher than the step before (≥ 2
--                         complete steps), and every TOP block is small (< 5 % of device memory):
--                         accumulation (leak or cache growth) rather than one big request.
-- The guide's note on pool-expansion failures cannot be decided from `func` (always the driver
-- call at HEAD) and is not a rule here.
-- Differences from the reference `--oom` hints: R from the snapshot before each trigger (both
-- key spellings) instead of the file's last snapshot, whole-stack comparison, rules 2, 3 and 6
-- added (docs/reference-differences.md).
--
-- @column source        input file of the trigger
-- @column pid           process id
-- @column device        Device Id of the trigger
-- @column trigger_id    ID of the trigger row
-- @column oom_ts        time of the failed request, ns
-- @column priority      1..6: the guide's attribution order (check the lowest 'yes' first)
-- @column rule          single_huge_request, over_large_request, top_owner, same_stack_repeated, chain_of_large_allocations, accumulation
-- @column verdict       yes, no or unknown
-- @column evidence      the figures the verdict rests on, in words
-- @column req_size      bytes requested by the failed call
-- @column free_mem      bytes: R, free device memory at the snapshot before the trigger; NULL when there is none
-- @column snapshot_ts   time of that snapshot, ns
WITH
triggers AS (
    SELECT source, pid, device, trigger_id, oom_ts, req_size, free_mem, total_mem, snapshot_ts, snapshot_name
    FROM oom_events
    WHERE kind = 'trigger'
),
recent5 AS (
    SELECT pid, trigger_id, size, alloc_ts,
           COALESCE(NULLIF(NULLIF(trim(stack_py), ''), 'NA'), NULLIF(NULLIF(trim(stack_c), ''), 'NA')) AS stack
    FROM oom_events
    WHERE kind = 'recent' AND rank <= 5 AND trigger_id IS NOT NULL
),
recent_stats AS (
    SELECT pid, trigger_id, COUNT(*) AS n, SUM(size) AS bytes, MAX(size) AS largest,
           COUNT(stack) AS with_stack
    FROM recent5
    GROUP BY pid, trigger_id
),
-- how often the most repeated stack appears among the 5 most recent
stack_repeats AS (
    SELECT pid, trigger_id, MAX(n) AS max_repeat
    FROM (SELECT pid, trigger_id, stack, COUNT(*) AS n FROM recent5 WHERE stack IS NOT NULL
          GROUP BY pid, trigger_id, stack) s
    GROUP BY pid, trigger_id
),
all_recent AS (
    SELECT pid, trigger_id, device, alloc_ts, MAX(size) OVER (PARTITION BY pid, trigger_id) AS largest_recent
    FROM oom_events
    WHERE kind = 'recent' AND trigger_id IS NOT NULL
),
-- TOP blocks by owner category
top_rows AS (
    SELECT pid, trigger_id, size, owner,
           CASE WHEN owner IS NULL THEN NULL
                WHEN concat('@', owner, '@') LIKE '%@weight@%' OR concat('@', owner, '@') LIKE '%@weights@%'
                  OR concat('@', owner, '@') LIKE '%@sharded_weight@%' OR concat('@', owner, '@') LIKE '%@optimizer_state@%'
                  OR concat('@', owner, '@') LIKE '%@gradient@%' THEN 'model_states'
                WHEN concat('@', owner, '@') LIKE '%@kv_cache@%' THEN 'kv_cache'
                WHEN concat('@', owner, '@') LIKE '%@ops@%' OR concat('@', owner, '@') LIKE '%@aten@%'
                  OR concat('@', owner, '@') LIKE '%@activation@%' THEN 'activations'
                ELSE 'other' END AS category
    FROM oom_events
    WHERE kind = 'top' AND trigger_id IS NOT NULL
),
top_stats AS (
    SELECT pid, trigger_id, COUNT(*) AS n, COUNT(owner) AS with_owner, MAX(size) AS largest, SUM(size) AS bytes
    FROM top_rows
    GROUP BY pid, trigger_id
),
top_category AS (
    SELECT pid, trigger_id,
           first_value(category ORDER BY bytes DESC, category) AS category,
           first_value(bytes ORDER BY bytes DESC, category) AS category_bytes
    FROM (SELECT pid, trigger_id, category, SUM(size) AS bytes FROM top_rows
          WHERE category IN ('model_states', 'kv_cache', 'activations') GROUP BY pid, trigger_id, category) c
    GROUP BY pid, trigger_id
),
top_groups AS (
    SELECT pid, trigger_id,
           string_agg(concat(COALESCE(owner, '?'), ' ', fmt_bytes(bytes)), ', ' ORDER BY bytes DESC, owner) AS owners
    FROM (SELECT pid, trigger_id, owner, SUM(size) AS bytes FROM top_rows GROUP BY pid, trigger_id, owner) g
    GROUP BY pid, trigger_id
),
-- steps of the trigger's device, and how many of them the RECENT allocations fall into
device_steps AS (
    SELECT DISTINCT s.pid, s.device, s.step, s.start_ts
    FROM steps s
),
recent_steps AS (
    SELECT r.pid, r.trigger_id, COUNT(DISTINCT r.step) AS steps_spanned
    FROM (
        SELECT a.pid, a.trigger_id, a.alloc_ts,
               MAX(d.step) AS step
        FROM all_recent a
        JOIN device_steps d ON (d.pid IS NOT DISTINCT FROM a.pid) AND d.device = a.device AND d.start_ts <= a.alloc_ts
        GROUP BY a.pid, a.trigger_id, a.alloc_ts
    ) r
    GROUP BY r.pid, r.trigger_id
),
-- does `used` of a framework pool end every complete step higher than the step before?
step_growth AS (
    SELECT pid, device,
           MAX(CASE WHEN comparisons >= 1 AND all_grow THEN 1 ELSE 0 END) = 1 AS grows_every_step,
           MAX(comparisons) AS comparisons
    FROM (
        SELECT pid, device, pool,
               COUNT(growth_vs_prev) AS comparisons,
               bool_and(growth_vs_prev IS NULL OR growth_vs_prev > 0) AS all_grow
        FROM step_peaks
        WHERE pool <> 'HAL' AND end_used IS NOT NULL
        GROUP BY pid, device, pool
    ) p
    GROUP BY pid, device
),
facts AS (
    SELECT t.*,
           r.n AS recent_n, r.bytes AS recent_bytes, r.with_stack, sr.max_repeat,
           a.largest_recent,
           tp.n AS top_n, tp.with_owner, tp.largest AS top_largest,
           tc.category AS top_category, tc.category_bytes, tg.owners AS top_owners,
           rs.steps_spanned, sg.grows_every_step, sg.comparisons
    FROM triggers t
    LEFT JOIN recent_stats r ON (r.pid IS NOT DISTINCT FROM t.pid) AND r.trigger_id = t.trigger_id
    LEFT JOIN stack_repeats sr ON (sr.pid IS NOT DISTINCT FROM t.pid) AND sr.trigger_id = t.trigger_id
    LEFT JOIN (SELECT DISTINCT pid, trigger_id, largest_recent FROM all_recent) a
           ON (a.pid IS NOT DISTINCT FROM t.pid) AND a.trigger_id = t.trigger_id
    LEFT JOIN top_stats tp ON (tp.pid IS NOT DISTINCT FROM t.pid) AND tp.trigger_id = t.trigger_id
    LEFT JOIN top_category tc ON (tc.pid IS NOT DISTINCT FROM t.pid) AND tc.trigger_id = t.trigger_id
    LEFT JOIN top_groups tg ON (tg.pid IS NOT DISTINCT FROM t.pid) AND tg.trigger_id = t.trigger_id
    LEFT JOIN recent_steps rs ON (rs.pid IS NOT DISTINCT FROM t.pid) AND rs.trigger_id = t.trigger_id
    LEFT JOIN step_growth sg ON (sg.pid IS NOT DISTINCT FROM t.pid) AND sg.device = t.device
),
-- the text for "R" used by several rules
described AS (
    SELECT *,
           CASE WHEN free_mem IS NULL THEN 'no SNAPSHOT before the trigger: R unknown'
                ELSE concat('R = ', fmt_bytes(free_mem), ' free (', COALESCE(snapshot_name, 'snapshot'), ' at ',
                            CAST(snapshot_ts AS VARCHAR), ')') END AS r_text
    FROM facts
),
findings AS (
    SELECT *, 1 AS priority, 'single_huge_request' AS rule,
           CASE WHEN free_mem IS NULL OR req_size IS NULL THEN 'unknown'
                WHEN free_mem > 0 AND req_size >= 0.8 * free_mem THEN 'yes'
                ELSE 'no' END AS verdict,
           CASE WHEN free_mem IS NULL THEN r_text
                WHEN req_size IS NULL THEN 'the trigger has no req_size'
                WHEN free_mem = 0 THEN concat('request ', fmt_bytes(req_size), ' with no free memory left: ', r_text)
                ELSE concat('request ', fmt_bytes(req_size), ' = ',
                            CAST(round(CAST(req_size AS DOUBLE) / CAST(free_mem AS DOUBLE) * 100.0, 1) AS VARCHAR),
                            ' % of ', r_text, '; threshold 80 %') END AS evidence
    FROM described
    UNION ALL
    SELECT *, 2, 'over_large_request',
           CASE WHEN free_mem IS NULL THEN 'unknown'
                WHEN free_mem > 1073741824 AND COALESCE(largest_recent, 0) <= free_mem THEN 'yes'
                ELSE 'no' END,
           CASE WHEN free_mem IS NULL THEN r_text
                ELSE concat(r_text, CASE WHEN free_mem > 1073741824 THEN ' > 1 GiB' ELSE ' ≤ 1 GiB' END,
                            '; largest RECENT block ', COALESCE(fmt_bytes(largest_recent), 'none')) END
    FROM described
    UNION ALL
    SELECT *, 3, 'top_owner',
           CASE WHEN COALESCE(top_n, 0) = 0 OR COALESCE(with_owner, 0) = 0 THEN 'unknown'
                WHEN top_category IS NOT NULL THEN 'yes'
                ELSE 'no' END,
           CASE WHEN COALESCE(top_n, 0) = 0 THEN 'no TOP records'
                WHEN COALESCE(with_owner, 0) = 0 THEN 'no owner known for the TOP blocks'
                WHEN top_category = 'model_states' THEN concat('model states (weights/optimizer/gradients) hold ', fmt_bytes(category_bytes), ' of the TOP blocks: model too big for the device; TOP owners: ', top_owners)
                WHEN top_category = 'kv_cache' THEN concat('KV cache holds ', fmt_bytes(category_bytes), ' of the TOP blocks: check the KV cache configuration; TOP owners: ', top_owners)
                WHEN top_category = 'activations' THEN concat('activations hold ', fmt_bytes(category_bytes), ' of the TOP blocks; TOP owners: ', top_owners)
                ELSE concat('TOP owners: ', top_owners) END
    FROM described
    UNION ALL
    SELECT *, 4, 'same_stack_repeated',
           CASE WHEN COALESCE(with_stack, 0) < 3 THEN 'unknown'
                WHEN max_repeat >= 3 THEN 'yes'
                ELSE 'no' END,
           CASE WHEN COALESCE(recent_n, 0) = 0 THEN 'no RECENT records'
                WHEN COALESCE(with_stack, 0) < 3 THEN concat(CAST(COALESCE(with_stack, 0) AS VARCHAR), ' of the ', CAST(recent_n AS VARCHAR), ' most recent RECENT records have a call stack (3 needed)')
                ELSE concat('most repeated call stack: ', CAST(max_repeat AS VARCHAR), ' of the ', CAST(recent_n AS VARCHAR), ' most recent RECENT records (threshold 3)') END
    FROM described
    UNION ALL
    SELECT *, 5, 'chain_of_large_allocations',
           CASE WHEN free_mem IS NULL OR COALESCE(recent_n, 0) = 0 THEN 'unknown'
                WHEN recent_bytes > 3 * free_mem THEN 'yes'
                ELSE 'no' END,
           CASE WHEN COALESCE(recent_n, 0) = 0 THEN 'no RECENT records'
                WHEN free_mem IS NULL THEN r_text
                ELSE concat('the ', CAST(recent_n AS VARCHAR), ' most recent RECENT blocks hold ', fmt_bytes(recent_bytes),
                            '; 3 × R = ', fmt_bytes(3 * free_mem)) END
    FROM described
    UNION ALL
    SELECT *, 6, 'accumulation',
           CASE WHEN COALESCE(recent_n, 0) = 0 OR steps_spanned IS NULL OR comparisons IS NULL
                  OR COALESCE(top_n, 0) = 0 OR total_mem IS NULL THEN 'unknown'
                WHEN steps_spanned >= 2 AND grows_every_step AND top_largest < 0.05 * total_mem THEN 'yes'
                ELSE 'no' END,
           concat('RECENT allocations span ', COALESCE(CAST(steps_spanned AS VARCHAR), 'no known'), ' step(s); ',
                  CASE WHEN comparisons IS NULL THEN 'no complete steps to compare'
                       WHEN grows_every_step THEN 'pool used grows at the end of every complete step'
                       ELSE 'pool used does not grow at the end of every complete step' END,
                  '; largest TOP block ', COALESCE(fmt_bytes(top_largest), 'unknown'),
                  CASE WHEN total_mem IS NULL THEN ' (device memory unknown)'
                       ELSE concat(' (5 % of device memory = ', fmt_bytes(CAST(total_mem / 20 AS BIGINT)), ')') END)
    FROM described
)
SELECT source, pid, device, trigger_id, oom_ts, priority, rule, verdict, evidence,
       req_size, free_mem, snapshot_ts
FROM findings
ORDER BY pid, oom_ts, trigger_id, priority
