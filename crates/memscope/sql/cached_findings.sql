-- cached_findings: reserved-but-idle memory and pool expansions of msMemScope's framework pools (rows of view findings).
--
-- Per framework pool (view fragmentation, its last sample): the reservation it keeps and does
-- not use at the end is cached free memory, not fragmentation — `empty_cache()` returns it
-- (kind cached_free, info; `bytes` = the idle bytes). Whether that memory is fragmented (free
-- but unable to serve a large request) needs the layout of free blocks per segment, which a
-- dump does not hold: without a snapshot in the dataset (capability allocator_state of view
-- source_capabilities), one cannot_conclude finding says what to collect. The times the pools
-- grew their reservation (view pool_expansions) are one info finding: expansions are how a
-- cache warms up, a count alone is no problem; beyond 20 without expandable segments (view
-- hal_segment_summary) it advises them.
--
-- @private
-- @part findings
-- @column section      VARCHAR fragmentation
-- @column ord          BIGINT  rank: pools by device, pool and process, then cannot_conclude, then pool_expansion
-- @column kind         VARCHAR cached_free, cannot_conclude or pool_expansion
-- @column severity     VARCHAR info
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id as written
-- @column pool         VARCHAR pool
-- @column place        VARCHAR device D
-- @column bytes        BIGINT  bytes: cached_free: reserved but idle at the end; pool_expansion: reservation added
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR one per line
-- @column missing      VARCHAR cannot_conclude: what is missing
-- @column collect_with VARCHAR cannot_conclude: how to collect it
-- @column figures      VARCHAR JSON object
WITH
start AS (SELECT MIN(first_ts) AS t0 FROM event_counts WHERE first_ts > 0),
pools AS (
    SELECT *, total_last - used_last AS idle,
           CAST(ROW_NUMBER() OVER (ORDER BY device, pool, pid, source) AS BIGINT) AS k
    -- a last sample whose used exceeds total (counters written out of step) says nothing
    FROM fragmentation WHERE total_last > 0 AND used_last <= total_last
),
grown AS (
    SELECT source, pid, device, pool, COUNT(*) AS n, SUM(delta) AS grown, MIN(ts) AS first_ts,
           MIN(usage_before_pct) AS min_usage_before_pct
    FROM pool_expansions GROUP BY source, pid, device, pool
),
expansions AS (
    SELECT SUM(n) AS n, SUM(grown) AS grown,
           array_agg(named_struct('device', device, 'pool', pool, 'expansions', n, 'grown_bytes', grown,
                                  'min_usage_before_pct', min_usage_before_pct) ORDER BY device, pool, pid, source) AS series,
           string_agg(concat('device ', device, ' ', pool, ': ', n, ' expansions adding ', COALESCE(fmt_bytes(grown), '—'),
                             ', first at ', COALESCE(fmt_time(first_ts, (SELECT t0 FROM start)), '')),
                      chr(10) ORDER BY device, pool, pid, source) AS lines,
           COALESCE((SELECT bool_or(expandable_segments) FROM hal_segment_summary), false) AS expandable
    FROM grown
)
SELECT 'fragmentation' AS section, k AS ord, 'cached_free' AS kind, 'info' AS severity,
       pid, device, pool, concat('device ', device) AS place, GREATEST(idle, 0) AS bytes,
       concat('Device ', device, ' ', pool, ': ', fmt_bytes(idle), ' reserved but idle at the end') AS title,
       concat('The ', pool, ' pool reserves ', fmt_bytes(total_last), ' and uses ', fmt_bytes(used_last), ' at the end (',
              fmt_pct(COALESCE(current_frag_pct, 0)), ' idle; highest ', fmt_pct(COALESCE(peak_frag_pct, 0)), ' at ',
              COALESCE(fmt_time(peak_ts, (SELECT t0 FROM start)), ''),
              '). Idle reservation is memory the caching allocator keeps for reuse — cached free memory, not fragmentation; `torch_npu.npu.empty_cache()` returns it.') AS problem,
       CAST(NULL AS VARCHAR) AS evidence, CAST(NULL AS VARCHAR) AS advice,
       CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('pid', pid, 'device', device, 'pool', pool, 'samples', samples, 'expansions', expansions,
                   'current_frag_pct', current_frag_pct, 'peak_frag_pct', peak_frag_pct, 'mean_frag_pct', mean_frag_pct,
                   'used_last', used_last, 'total_last', total_last, 'peak_total', peak_total, 'idle_bytes', idle,
                   'cached_free_bytes', GREATEST(idle, 0)) AS figures
FROM pools
UNION ALL
SELECT 'fragmentation', 500, 'cannot_conclude', 'info', CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT),
       concat('Cannot conclude ', what), concat('cannot conclude ', what, ': missing ', missing, ' — collect with ', collect_with),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), missing, collect_with, json_object('what', what)
FROM (SELECT 'whether the idle reservation is fragmented (free memory that cannot serve a request)' AS what,
             'the layout of free blocks per segment' AS missing,
             'a memory snapshot: `torch_npu.npu.memory._record_memory_history()` then `torch_npu.npu.memory._dump_snapshot("snap.pickle")`, read by `memq report snap.pickle`' AS collect_with)
WHERE EXISTS (SELECT 1 FROM fragmentation)
  AND NOT EXISTS (SELECT 1 FROM source_capabilities WHERE capability = 'allocator_state' AND present)
UNION ALL
SELECT 'fragmentation', 600, 'pool_expansion', 'info', CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       CAST(NULL AS VARCHAR), grown,
       concat('The pools grew their reservation ', n, ' time(s)'),
       'Each expansion asks the driver for a new segment; many expansions at low usage mean the cache could not reuse its free blocks.',
       lines,
       CASE WHEN n > 20 AND NOT expandable THEN 'Set `expandable_segments:True` (PYTORCH_CUDA_ALLOC_CONF / PYTORCH_NPU_ALLOC_CONF): segments then grow in place, so memory freed in one place serves the next large request.' END,
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       json_object('expansions', n, 'series', series, 'expandable_segments', expandable)
FROM expansions WHERE n > 0
