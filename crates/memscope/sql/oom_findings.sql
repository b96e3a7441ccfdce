-- oom_findings: the OOM guide's inference rules applied to every OOM trigger — which explanation the evidence supports, in the guide's attribution order.
--
-- One row per (trigger, rule); verdict yes / no / unknown (the data cannot decide), with the
-- figures behind it in `evidence`. R = free device memory of the latest SNAPSHOT of the same
-- process and device before the trigger (view oom_events; normally the automatic
-- OOM_Snapshot), not the last snapshot of the file. RECENT rows are used newest first as the
-- tool writes them (the first 5 = the 5 most recent allocations).
-- A process is (capture(source), pid), as in oom_events: ranks whose pids collide never mix.
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
-- Rows come in no particular order: ORDER BY oom_ts, priority for the attribution order.
-- Stored with the dataset when it is built (a few rows, many operators to plan).
-- @stored
-- @column source      VARCHAR input file of the trigger
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id of the trigger
-- @column trigger_id  BIGINT  ID of the trigger row
-- @column oom_ts      BIGINT  ns: time of the failed request, ns
-- @column priority    BIGINT  1..6: the guide's attribution order (check the lowest 'yes' first)
-- @column rule        VARCHAR single_huge_request, over_large_request, top_owner, same_stack_repeated, chain_of_large_allocations, accumulation
-- @column verdict     VARCHAR yes, no or unknown
-- @column evidence    VARCHAR the figures the verdict rests on, in words
-- @column req_size    BIGINT  bytes: requested by the failed call
-- @column free_mem    BIGINT  bytes: R, free device memory at the snapshot before the trigger; NULL when there is none
-- @column snapshot_ts BIGINT  ns: time of that snapshot, ns
WITH
-- the records of each trigger, with the call stack and owner category used by the rules
records AS (
    SELECT source, capture(source) AS capture, pid, device, trigger_id, oom_ts, kind, nth, req_size, free_mem, total_mem,
           snapshot_ts, snapshot_name, size, owner,
           CASE WHEN kind = 'recent' THEN alloc_ts END AS at_ts,
           kind = 'recent' AND nth <= 5 AS recent5,
           COALESCE(NULLIF(NULLIF(trim(stack_py), ''), 'NA'), NULLIF(NULLIF(trim(stack_c), ''), 'NA')) AS stack,
           CASE WHEN kind <> 'top' OR owner IS NULL THEN NULL
                WHEN concat('@', owner, '@') LIKE '%@weight@%' OR concat('@', owner, '@') LIKE '%@weights@%'
                  OR concat('@', owner, '@') LIKE '%@sharded_weight@%' OR concat('@', owner, '@') LIKE '%@optimizer_state@%'
                  OR concat('@', owner, '@') LIKE '%@gradient@%' THEN 'model_states'
                WHEN concat('@', owner, '@') LIKE '%@kv_cache@%' THEN 'kv_cache'
                WHEN concat('@', owner, '@') LIKE '%@ops@%' OR concat('@', owner, '@') LIKE '%@aten@%'
                  OR concat('@', owner, '@') LIKE '%@activation@%' THEN 'activations'
                ELSE 'other' END AS category,
           CAST(NULL AS BIGINT) AS step_k
    FROM oom_events
    WHERE trigger_id IS NOT NULL
),
-- step starts of every device in the same stream, to place RECENT allocations in steps:
-- a RECENT block belongs to the latest step started at or before its allocation
stream AS (
    SELECT * FROM records
    UNION ALL
    SELECT CAST(NULL AS VARCHAR) AS source, capture(source) AS capture, pid, device, CAST(NULL AS BIGINT) AS trigger_id,
           CAST(NULL AS BIGINT) AS oom_ts, 'step' AS kind, CAST(NULL AS BIGINT) AS nth,
           CAST(NULL AS BIGINT) AS req_size, CAST(NULL AS BIGINT) AS free_mem, CAST(NULL AS BIGINT) AS total_mem,
           CAST(NULL AS BIGINT) AS snapshot_ts, CAST(NULL AS VARCHAR) AS snapshot_name,
           CAST(NULL AS BIGINT) AS size, CAST(NULL AS VARCHAR) AS owner,
           start_ts AS at_ts, FALSE AS recent5, CAST(NULL AS VARCHAR) AS stack, CAST(NULL AS VARCHAR) AS category,
           CAST(step_k AS BIGINT) AS step_k
    FROM steps
),
placed AS (
    SELECT *,
           MAX(step_k) OVER (PARTITION BY capture, pid, device
                             ORDER BY at_ts, CASE WHEN kind = 'step' THEN 0 ELSE 1 END
                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS in_step
    FROM stream
),
-- per trigger, in one pass: its own figures, and the records grouped by call stack (among the 5
-- most recent), by owner category and by owner (grouping sets; `by_*` says which grouping a row is)
grouped AS (
    SELECT capture, pid, trigger_id, kind, recent5, stack, category, owner,
           GROUPING(stack) = 0 AS by_stack, GROUPING(category) = 0 AS by_category, GROUPING(owner) = 0 AS by_owner,
           COUNT(*) AS n,
           SUM(size) AS bytes,
           MAX(source) FILTER (WHERE kind = 'trigger') AS source,
           MAX(device) AS device,
           MAX(oom_ts) AS oom_ts,
           MAX(req_size) FILTER (WHERE kind = 'trigger') AS req_size,
           MAX(free_mem) AS free_mem,
           MAX(total_mem) AS total_mem,
           MAX(snapshot_ts) AS snapshot_ts,
           MAX(snapshot_name) AS snapshot_name,
           COUNT(*) FILTER (WHERE recent5) AS recent_n,
           SUM(size) FILTER (WHERE recent5) AS recent_bytes,
           COUNT(stack) FILTER (WHERE recent5) AS with_stack,
           MAX(size) FILTER (WHERE kind = 'recent') AS largest_recent,
           COUNT(DISTINCT in_step) FILTER (WHERE kind = 'recent') AS steps_spanned,
           COUNT(*) FILTER (WHERE kind = 'top') AS top_n,
           COUNT(owner) FILTER (WHERE kind = 'top') AS with_owner,
           MAX(size) FILTER (WHERE kind = 'top') AS top_largest
    FROM placed
    WHERE kind <> 'step'
    GROUP BY GROUPING SETS ((capture, pid, trigger_id),
                            (capture, pid, trigger_id, recent5, stack),
                            (capture, pid, trigger_id, kind, category),
                            (capture, pid, trigger_id, kind, owner))
),
-- everything the rules need, one row per trigger
facts AS (
    SELECT capture, pid, trigger_id,
           MAX(source) AS source, MAX(device) AS device, MAX(oom_ts) AS oom_ts, MAX(req_size) AS req_size,
           MAX(free_mem) AS free_mem, MAX(total_mem) AS total_mem, MAX(snapshot_ts) AS snapshot_ts,
           MAX(snapshot_name) AS snapshot_name,
           MAX(recent_n) FILTER (WHERE NOT (by_stack OR by_category OR by_owner)) AS recent_n,
           MAX(recent_bytes) FILTER (WHERE NOT (by_stack OR by_category OR by_owner)) AS recent_bytes,
           MAX(with_stack) FILTER (WHERE NOT (by_stack OR by_category OR by_owner)) AS with_stack,
           MAX(largest_recent) AS largest_recent,
           MAX(steps_spanned) FILTER (WHERE NOT (by_stack OR by_category OR by_owner)) AS steps_spanned,
           MAX(top_n) FILTER (WHERE NOT (by_stack OR by_category OR by_owner)) AS top_n,
           MAX(with_owner) FILTER (WHERE NOT (by_stack OR by_category OR by_owner)) AS with_owner,
           MAX(top_largest) AS top_largest,
           MAX(n) FILTER (WHERE by_stack AND recent5 AND stack IS NOT NULL) AS max_repeat,
           first_value(category ORDER BY bytes DESC, category)
               FILTER (WHERE by_category AND category IN ('model_states', 'kv_cache', 'activations')) AS top_category,
           MAX(bytes) FILTER (WHERE by_category AND category IN ('model_states', 'kv_cache', 'activations')) AS category_bytes,
           string_agg(concat(COALESCE(owner, '?'), ' ', fmt_bytes(bytes)), ', ' ORDER BY bytes DESC, owner)
               FILTER (WHERE by_owner AND kind = 'top') AS top_owners
    FROM grouped
    GROUP BY capture, pid, trigger_id
),
-- does `used` of a framework pool end every complete step higher than the step before?
step_growth AS (
    SELECT capture, pid, device,
           bool_or(comparisons >= 1 AND all_grow) AS grows_every_step,
           MAX(comparisons) AS comparisons
    FROM (
        SELECT capture(source) AS capture, pid, device, pool,
               COUNT(growth_vs_prev) AS comparisons,
               bool_and(growth_vs_prev IS NULL OR growth_vs_prev > 0) AS all_grow
        FROM step_peaks
        WHERE pool <> 'HAL' AND end_used IS NOT NULL
        GROUP BY capture(source), pid, device, pool
    ) p
    GROUP BY capture, pid, device
),
-- one row per trigger and rule
described AS (
    SELECT f.*, g.grows_every_step, g.comparisons, r.priority,
           CASE WHEN f.free_mem IS NULL THEN 'no SNAPSHOT before the trigger: R unknown'
                ELSE concat('R = ', fmt_bytes(f.free_mem), ' free (', COALESCE(f.snapshot_name, 'snapshot'), ' at ',
                            CAST(f.snapshot_ts AS VARCHAR), ')') END AS r_text
    FROM facts f
    LEFT JOIN step_growth g ON g.capture = f.capture AND (g.pid IS NOT DISTINCT FROM f.pid) AND g.device = f.device
    CROSS JOIN (VALUES (1), (2), (3), (4), (5), (6)) AS r(priority)
)
SELECT source, pid, device, trigger_id, oom_ts, priority,
       CASE priority WHEN 1 THEN 'single_huge_request' WHEN 2 THEN 'over_large_request' WHEN 3 THEN 'top_owner'
                     WHEN 4 THEN 'same_stack_repeated' WHEN 5 THEN 'chain_of_large_allocations'
                     ELSE 'accumulation' END AS rule,
       CASE priority
           -- 1: req_size >= 80 % of R
           WHEN 1 THEN CASE WHEN free_mem IS NULL OR req_size IS NULL THEN 'unknown'
                            WHEN free_mem > 0 AND req_size >= 0.8 * free_mem THEN 'yes'
                            ELSE 'no' END
           -- 2: R > 1 GiB and every RECENT block <= R
           WHEN 2 THEN CASE WHEN free_mem IS NULL THEN 'unknown'
                            WHEN free_mem > 1073741824 AND COALESCE(largest_recent, 0) <= free_mem THEN 'yes'
                            ELSE 'no' END
           -- 3: TOP bytes owned by model states, KV cache or activations
           WHEN 3 THEN CASE WHEN top_n = 0 OR with_owner = 0 THEN 'unknown'
                            WHEN top_category IS NOT NULL THEN 'yes'
                            ELSE 'no' END
           -- 4: one whole stack >= 3 times among the 5 most recent
           WHEN 4 THEN CASE WHEN with_stack < 3 THEN 'unknown'
                            WHEN max_repeat >= 3 THEN 'yes'
                            ELSE 'no' END
           -- 5: the 5 most recent hold more than 3 R
           WHEN 5 THEN CASE WHEN free_mem IS NULL OR recent_n = 0 THEN 'unknown'
                            WHEN recent_bytes > 3 * free_mem THEN 'yes'
                            ELSE 'no' END
           -- 6: spread over steps, growth every step, small TOP blocks
           ELSE CASE WHEN recent_n = 0 OR steps_spanned = 0 OR comparisons IS NULL
                       OR top_n = 0 OR total_mem IS NULL THEN 'unknown'
                     WHEN steps_spanned >= 2 AND grows_every_step AND top_largest < 0.05 * total_mem THEN 'yes'
                     ELSE 'no' END
       END AS verdict,
       CASE priority
           WHEN 1 THEN CASE WHEN free_mem IS NULL THEN r_text
                            WHEN req_size IS NULL THEN 'the trigger has no req_size'
                            WHEN free_mem = 0 THEN concat('request ', fmt_bytes(req_size), ' with no free memory left: ', r_text)
                            ELSE concat('request ', fmt_bytes(req_size), ' = ',
                                        CAST(round(CAST(req_size AS DOUBLE) / CAST(free_mem AS DOUBLE) * 100.0, 1) AS VARCHAR),
                                        ' % of ', r_text, '; threshold 80 %') END
           WHEN 2 THEN CASE WHEN free_mem IS NULL THEN r_text
                            ELSE concat(r_text, CASE WHEN free_mem > 1073741824 THEN ' > 1 GiB' ELSE ' ≤ 1 GiB' END,
                                        '; largest RECENT block ', COALESCE(fmt_bytes(largest_recent), 'none')) END
           WHEN 3 THEN CASE WHEN top_n = 0 THEN 'no TOP records'
                            WHEN with_owner = 0 THEN 'no owner known for the TOP blocks'
                            WHEN top_category = 'model_states' THEN concat('model states (weights/optimizer/gradients) hold ', fmt_bytes(category_bytes), ' of the TOP blocks: model too big for the device; TOP owners: ', top_owners)
                            WHEN top_category = 'kv_cache' THEN concat('KV cache holds ', fmt_bytes(category_bytes), ' of the TOP blocks: check the KV cache configuration; TOP owners: ', top_owners)
                            WHEN top_category = 'activations' THEN concat('activations hold ', fmt_bytes(category_bytes), ' of the TOP blocks; TOP owners: ', top_owners)
                            ELSE concat('TOP owners: ', top_owners) END
           WHEN 4 THEN CASE WHEN recent_n = 0 THEN 'no RECENT records'
                            WHEN with_stack < 3 THEN concat(CAST(with_stack AS VARCHAR), ' of the ', CAST(recent_n AS VARCHAR), ' most recent RECENT records have a call stack (3 needed)')
                            ELSE concat('most repeated call stack: ', CAST(max_repeat AS VARCHAR), ' of the ', CAST(recent_n AS VARCHAR), ' most recent RECENT records (threshold 3)') END
           WHEN 5 THEN CASE WHEN recent_n = 0 THEN 'no RECENT records'
                            WHEN free_mem IS NULL THEN r_text
                            ELSE concat('the ', CAST(recent_n AS VARCHAR), ' most recent RECENT blocks hold ', fmt_bytes(recent_bytes),
                                        '; 3 × R = ', fmt_bytes(3 * free_mem)) END
           ELSE concat('RECENT allocations span ', CAST(steps_spanned AS VARCHAR), ' step(s); ',
                       CASE WHEN comparisons IS NULL THEN 'no complete steps to compare'
                            WHEN grows_every_step THEN 'pool used grows at the end of every complete step'
                            ELSE 'pool used does not grow at the end of every complete step' END,
                       '; largest TOP block ', COALESCE(fmt_bytes(top_largest), 'unknown'),
                       CASE WHEN total_mem IS NULL THEN ' (device memory unknown)'
                            ELSE concat(' (5 % of device memory = ', fmt_bytes(CAST(total_mem / 20 AS BIGINT)), ')') END)
       END AS evidence,
       req_size, free_mem, snapshot_ts
FROM described
