-- leak_findings: the leak rule on msMemScope dumps — growing against resident memory, per owner, pool, process and device (rows of view findings).
--
-- Memory held to the end (view leak_candidates, stock memory excluded) is split, per
-- (pid, device, pool, owner):
-- - with steps (some dump has two complete steps), an owner grows when the bytes of its
--   never-released blocks allocated by the end of each complete step never decrease from step
--   to step, rise more than once (with two steps: rise) and still rise in the second half of the
--   steps: a steady leak rises every step, a periodic one every n-th step; a plateau after a
--   warm-up, or state built over the first steps, stops rising. Severity error; `bytes` = all it
--   holds;
-- - without steps, growth is what a pool allocated after it first released memory (its warm-up
--   is over) and still holds at the end, when that is at least 1 MiB and 5 % of the pool's peak
--   (view peaks, live for HAL, used otherwise): a possible leak, severity warning, `bytes` =
--   that late part. HAL blocks without an owner include the segments the framework pools of the
--   same process and device reserve: only what exceeds those pools' highest reservation (view
--   fragmentation, peak_total) counts;
-- - a pool that never released anything, whose held blocks (3 or more, at least the floor
--   above) were allocated over more than half the run, cannot be judged without steps:
--   cannot_conclude.
-- Everything else held to the end is resident (one info finding with the largest owners). On a
-- device with a framework pool, the HAL segments it reserves (owner CANN@APP…) nest the bytes
-- its own owners report: they are left out of the totals and never judged. When nothing grows
-- and nothing is unknown (and every dump's rows pair into blocks), one `no_leak` finding says so. Stock memory (allocated before
-- collection started) is never a leak verdict: one `stock` finding gives its bytes.
-- `place` names the device, and the process too when the dumps hold several.
--
-- @private
-- @part findings
-- @column section      VARCHAR leaks
-- @column ord          BIGINT  rank: owners by held bytes, then no_leak, resident, stock
-- @column kind         VARCHAR leak, cannot_conclude, no_leak, resident or stock
-- @column severity     VARCHAR error (grows step after step), warning (possible leak), info, ok
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id as written
-- @column pool         VARCHAR pool
-- @column place        VARCHAR device D, or device D pid P when several processes
-- @column bytes        BIGINT  bytes: leak: growing bytes; resident, stock: bytes held
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR one per line
-- @column missing      VARCHAR cannot_conclude: what is missing
-- @column collect_with VARCHAR cannot_conclude: how to collect it
-- @column figures      VARCHAR JSON object
WITH
span AS (
    SELECT MIN(first_ts) AS t0, GREATEST(MAX(last_ts) - MIN(first_ts), 1) AS span
    FROM event_counts WHERE first_ts > 0
),
judged_by_steps AS (
    SELECT COALESCE(MAX(complete_steps), 0) >= 2 AS has_steps FROM capabilities
),
first_free AS (
    SELECT source, pid, device, pool, MIN(free_ts) AS t FROM blocks
    WHERE free_kind = 'real' GROUP BY source, pid, device, pool
),
-- what each owner holds at the end
owners AS (
    SELECT c.pid, c.device, c.pool, c.owner, MAX(c.owner_group) AS owner_group,
           COUNT(CASE WHEN NOT c.stock THEN 1 END) AS blocks,
           COALESCE(SUM(CASE WHEN NOT c.stock THEN c.size END), 0) AS held,
           COALESCE(SUM(CASE WHEN NOT c.stock AND c.alloc_ts > f.t THEN c.size END), 0) AS late_all,
           MIN(f.t) AS first_free_ts,
           COALESCE(SUM(CASE WHEN c.stock THEN c.size END), 0) AS stock_bytes,
           MAX(c.stack_top) AS stack_top,
           MIN(CASE WHEN NOT c.stock THEN c.alloc_ts END) AS first_alloc_ts,
           MAX(CASE WHEN NOT c.stock THEN c.alloc_ts END) AS last_alloc_ts
    FROM leak_candidates c
    LEFT JOIN first_free f ON f.source = c.source AND f.pid = c.pid AND f.device = c.device AND f.pool = c.pool
    GROUP BY c.pid, c.device, c.pool, c.owner
),
-- what each owner holds at the end of every complete step
held_at AS (
    SELECT c.pid, c.device, c.pool, c.owner, s.step, s.end_ts,
           SUM(CASE WHEN c.alloc_ts <= s.end_ts THEN c.size ELSE 0 END) AS held
    FROM leak_candidates c
    JOIN steps s ON c.source = s.source AND c.pid = s.pid AND c.device = s.device
    WHERE NOT c.stock AND s.complete
    GROUP BY c.pid, c.device, c.pool, c.owner, s.step, s.end_ts
),
moves AS (
    SELECT *, held - LAG(held) OVER w AS change, ROW_NUMBER() OVER w - 2 AS interval_k
    FROM held_at
    WINDOW w AS (PARTITION BY pid, device, pool, owner ORDER BY end_ts, step)
),
levels AS (
    SELECT pid, device, pool, owner, COUNT(*) AS n,
           COUNT(CASE WHEN change > 0 THEN 1 END) AS rises,
           COUNT(CASE WHEN change < 0 THEN 1 END) AS drops,
           MAX(CASE WHEN change > 0 THEN interval_k END) AS last_rise,
           FIRST_VALUE(held ORDER BY end_ts, step) AS first_held,
           LAST_VALUE(held ORDER BY end_ts, step) AS last_held,
           array_agg(named_struct('step', step, 'held_bytes', held) ORDER BY end_ts, step) AS per_step,
           string_agg(concat('step ', step, ': ', fmt_bytes(held)), ', ' ORDER BY end_ts, step) AS per_step_text
    FROM moves GROUP BY pid, device, pool, owner
),
-- devices with a framework pool, and the pools' highest reservation per process and device
framework AS (
    SELECT DISTINCT device FROM owners WHERE pool NOT IN ('HAL', 'HOST_PINNED')
),
reserved AS (
    SELECT pid, device, SUM(peak_total) AS bytes FROM fragmentation GROUP BY pid, device
),
floors AS (
    SELECT pid, device, pool, GREATEST(1048576, MAX(peak_bytes) / 20) AS floor
    FROM peaks
    WHERE (can_pair OR metric <> 'live') AND metric = CASE WHEN pool = 'HAL' THEN 'live' ELSE 'used' END
    GROUP BY pid, device, pool
),
judged AS (
    SELECT o.*, l.n, l.rises, l.per_step, l.per_step_text,
           COALESCE(l.n, 0) AS steps_seen,
           CASE WHEN l.n >= 2 THEN (l.last_held - l.first_held) / (l.n - 1) ELSE 0 END AS per_step_bytes,
           COALESCE(l.n >= 2 AND l.drops = 0
                    AND (l.rises >= 2 OR (l.n = 2 AND l.rises = 1))
                    AND 2 * l.last_rise >= GREATEST(l.n - 2, 0), false) AS by_steps,
           CASE WHEN o.pool = 'HAL' AND o.owner = 'HAL' THEN GREATEST(o.late_all - COALESCE(r.bytes, 0), 0)
                ELSE o.late_all END AS late,
           COALESCE(fl.floor, 1048576) AS floor,
           o.pool = 'HAL' AND o.owner LIKE 'CANN@APP%' AND fw.device IS NOT NULL AS nested,
           CASE WHEN o.owner = o.pool THEN concat(o.pool, ' memory without an owner') ELSE o.owner END AS who,
           CASE WHEN (SELECT COUNT(DISTINCT pid) FROM owners) > 1 THEN concat('device ', o.device, ' pid ', o.pid)
                ELSE concat('device ', o.device) END AS place,
           (SELECT has_steps FROM judged_by_steps) AS has_steps,
           fmt_time(o.first_alloc_ts, (SELECT t0 FROM span)) AS first_at,
           fmt_time(o.last_alloc_ts, (SELECT t0 FROM span)) AS last_at,
           COALESCE(fmt_time(o.first_free_ts, (SELECT t0 FROM span)), '') AS first_free_at,
           CAST(ROW_NUMBER() OVER (ORDER BY o.held DESC, o.device, o.pool, o.owner, o.pid) AS BIGINT) AS k
    FROM owners o
    LEFT JOIN levels l ON l.pid = o.pid AND l.device = o.device AND l.pool = o.pool AND l.owner = o.owner
    LEFT JOIN reserved r ON r.pid = o.pid AND r.device = o.device
    LEFT JOIN floors fl ON fl.pid = o.pid AND fl.device = o.device AND fl.pool = o.pool
    LEFT JOIN framework fw ON fw.device = o.device
    WHERE o.held > 0
),
verdicts AS (
    SELECT *,
           CASE WHEN NOT nested AND (by_steps OR (NOT has_steps AND late >= floor)) THEN 'growing'
                WHEN NOT has_steps AND NOT nested AND first_free_ts IS NULL AND blocks >= 3
                     AND (last_alloc_ts - first_alloc_ts) > 0.5 * (SELECT span FROM span)
                     AND held >= floor THEN 'unknown'
                ELSE 'resident' END AS verdict
    FROM judged
),
growing AS (
    SELECT 'leaks' AS section, k AS ord, 'leak' AS kind,
           CASE WHEN by_steps THEN 'error' ELSE 'warning' END AS severity,
           pid, device, pool, place,
           CASE WHEN by_steps THEN held ELSE late END AS bytes,
           CASE WHEN by_steps THEN concat('Leak on device ', device, ' (', pool, '): ', who, ' holds ', fmt_bytes(held), ' and grows')
                ELSE concat('Possible leak on device ', device, ' (', pool, '): ', who, ' still holds ', fmt_bytes(late), ' allocated after the warm-up')
           END AS title,
           CASE WHEN by_steps THEN concat(who, ' keeps ', fmt_bytes(held), ' in ', blocks, ' block(s) that are never released; what it holds at the end of each complete step never goes down and rose in ',
                                          rises, ' of the ', n - 1, ' step-to-step intervals (by ', fmt_bytes(per_step_bytes), ' per step on average).')
                ELSE concat(who, ' keeps ', fmt_bytes(held), ' in ', blocks, ' block(s) never released; ', fmt_bytes(late),
                            ' of it was allocated after the pool first released memory (', first_free_at, ': its warm-up was over), the last at ', last_at,
                            '. Without step markers memq cannot tell a leak from a cache that fills once and stays.')
           END AS problem,
           concat_ws(chr(10),
               CASE WHEN steps_seen = 0 THEN concat('held at the end: ', fmt_bytes(held), ' in ', blocks, ' block(s), ', fmt_bytes(late),
                                                    ' of it allocated after the pool''s first free at ', first_free_at)
                    ELSE concat('held at the end of each complete step: ', per_step_text) END,
               concat('first allocated ', first_at, ', last ', last_at),
               CASE WHEN COALESCE(stack_top, '') <> '' THEN concat('allocated at ', stack_top) ELSE 'no call stack on these blocks' END
           ) AS evidence,
           concat_ws(chr(10),
               CASE WHEN by_steps THEN concat('Find where ', who, ' keeps a reference each step (a list that grows, a tensor kept with its graph: store `loss.item()`, not `loss`).')
                    ELSE concat('Find what keeps the late blocks of ', who, ' alive (a list that grows, a tensor kept with its graph, a cache without a bound); the call stacks of these blocks name the line.') END,
               CASE WHEN NOT by_steps THEN 'Mark the steps (`msmemscope.step()` in the training loop) so that memq can check whether what is held grows step after step.' END,
               CASE WHEN stack_top IS NULL THEN 'Collect Python stacks (`--call-stack python:50`) to see the allocating line.' END
           ) AS advice,
           CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
           json_object('pid', pid, 'device', device, 'pool', pool, 'owner', owner, 'owner_group', owner_group,
                       'bytes', held, 'late_bytes', late, 'blocks', blocks, 'stack_top', stack_top,
                       'first_alloc_ts', first_alloc_ts, 'last_alloc_ts', last_alloc_ts,
                       'held_per_step', COALESCE(per_step, make_array()), 'growth_per_step_bytes', per_step_bytes) AS figures
    FROM verdicts WHERE verdict = 'growing'
),
unknown AS (
    SELECT *, concat('whether ', CASE WHEN owner = pool THEN concat(pool, ' memory') ELSE owner END, ' on device ', device,
                     ' grows (', fmt_bytes(held), ' held, allocated from ', first_at, ' to ', last_at, ', never released)') AS what,
           'step markers, or a trace long enough for the pool to release memory' AS missing,
           '`msmemscope.step()` in the training loop, or mstx ranges named "step start"' AS collect_with
    FROM verdicts WHERE verdict = 'unknown'
),
resident AS (
    SELECT *, ROW_NUMBER() OVER (ORDER BY held DESC, k) AS r FROM verdicts WHERE verdict <> 'growing'
),
summary AS (
    SELECT (SELECT COUNT(*) FROM growing) AS growing, (SELECT COUNT(*) FROM unknown) AS unknown,
           (SELECT COUNT(*) FROM resident) AS resident_owners,
           (SELECT SUM(CASE WHEN nested THEN 0 ELSE held END) FROM resident) AS resident_bytes,
           (SELECT SUM(stock_bytes) FROM owners) AS stock_bytes,
           (SELECT has_steps FROM judged_by_steps) AS has_steps
)
SELECT * FROM growing
UNION ALL
SELECT 'leaks', k, 'cannot_conclude', 'info', pid, device, pool, place, CAST(NULL AS BIGINT),
       concat('Cannot conclude ', what),
       concat('cannot conclude ', what, ': missing ', missing, ' — collect with ', collect_with),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), missing, collect_with,
       json_object('what', what, 'pid', pid, 'device', device, 'pool', pool, 'owner', owner, 'bytes', held)
FROM unknown
UNION ALL
SELECT 'leaks', 1000000, 'no_leak', 'ok', CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       CAST(NULL AS VARCHAR), CAST(0 AS BIGINT), 'No growing memory',
       CASE WHEN has_steps THEN 'No owner''s held memory grows from step to step; what stays to the end was allocated once (resident).'
            ELSE 'No owner holds memory allocated all across the run; what stays to the end was allocated once.' END,
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       json_object('resident_owners', resident_owners)
FROM summary WHERE growing = 0 AND unknown = 0 AND EXISTS (SELECT 1 FROM capabilities)
  -- a dump whose rows cannot pair (MALLOC or FREE rows only) cannot tell either
  AND NOT EXISTS (SELECT 1 FROM capabilities WHERE pairing IN ('malloc_only', 'free_only', 'none'))
UNION ALL
SELECT 'leaks', 1000001, 'resident', 'info', CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       CAST(NULL AS VARCHAR), resident_bytes,
       concat('Resident memory held to the end: ', fmt_bytes(resident_bytes)),
       'Memory allocated once and kept until the end (weights, optimizer state, communication buffers): it sets the floor of the curve but does not grow, so it is not a leak by itself.',
       (SELECT string_agg(concat('device ', device, ' ', pool, ' ', owner, ': ', fmt_bytes(held), ' in ', blocks, ' block(s)'), chr(10) ORDER BY r)
        FROM resident WHERE r <= 3),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       json_object('bytes', resident_bytes, 'owners', resident_owners,
                   'largest', (SELECT array_agg(named_struct('device', device, 'pool', pool, 'owner', owner, 'bytes', held, 'blocks', blocks) ORDER BY r)
                               FROM resident WHERE r <= 5))
FROM summary WHERE resident_owners > 0
UNION ALL
SELECT 'leaks', 1000002, 'stock', 'info', CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       CAST(NULL AS VARCHAR), stock_bytes,
       concat('Stock memory excluded from leak verdicts: ', fmt_bytes(stock_bytes)),
       concat('Stock memory (allocated before collection started, ', fmt_bytes(stock_bytes), ') is excluded from leak verdicts: when it was allocated, and whether it grew before, is not in the dump.'),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       json_object('bytes', stock_bytes)
FROM summary WHERE stock_bytes > 0
