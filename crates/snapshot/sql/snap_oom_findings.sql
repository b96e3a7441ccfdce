-- snap_oom_findings: one finding per out-of-memory entry of a snapshot's trace, with view snap_oom's verdict (rows of view findings).
--
-- Per oom entry (view snap_oom): the request that failed, what was reserved and active, the
-- verdict (fragmentation, single oversized request, repeated allocation from one site, a run of
-- large allocations, or insufficient data) and its advice. When more was reserved but not active
-- than the request asked for, the free memory was not in one piece: the evidence says so and the
-- advice adds expandable segments. Severity error.
--
-- @private
-- @part findings
-- @column section      VARCHAR oom
-- @column ord          BIGINT  rank: after the dumps' triggers, by snapshot, device and entry
-- @column kind         VARCHAR snapshot_oom
-- @column severity     VARCHAR error
-- @column pid          BIGINT  process id: NULL (a snapshot names no process)
-- @column device       VARCHAR device ordinal
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR SNAPSHOT device D
-- @column bytes        BIGINT  bytes: the request that failed
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR one per line
-- @column missing      VARCHAR NULL
-- @column collect_with VARCHAR NULL
-- @column figures      VARCHAR JSON object
WITH
entries AS (
    SELECT *, CASE verdict
                  WHEN 'fragmentation' THEN 'fragmentation: enough cached memory, no block as large'
                  WHEN 'single_oversized_request' THEN 'single huge request'
                  WHEN 'same_stack_repeated' THEN 'repeated allocation from one site'
                  WHEN 'run_of_large_allocations' THEN 'a chain of large allocations'
                  ELSE 'insufficient data' END AS label,
           COALESCE(reserved_bytes, 0) - COALESCE(active_bytes, 0) AS idle,
           CAST(ROW_NUMBER() OVER (ORDER BY snapshot, device, seq) AS BIGINT) AS k
    FROM snap_oom
)
SELECT 'oom' AS section, 1000 + k AS ord, 'snapshot_oom' AS kind, 'error' AS severity, CAST(NULL AS BIGINT) AS pid,
       CAST(device AS VARCHAR) AS device, CAST(NULL AS VARCHAR) AS pool, concat(snapshot, ' device ', device) AS place,
       requested_bytes AS bytes,
       concat('OOM in ', snapshot, ' device ', device, ': ', label) AS title,
       concat('A request of ', fmt_bytes(COALESCE(requested_bytes, 0)), ' failed at trace entry ', seq, ' with ',
              fmt_bytes(COALESCE(reserved_bytes, 0)), ' reserved, ', fmt_bytes(COALESCE(active_bytes, 0)), ' active',
              CASE WHEN device_free IS NOT NULL THEN concat(' and ', fmt_bytes(device_free), ' free on the device') END,
              '; verdict: ', label, '.') AS problem,
       concat_ws(chr(10),
           concat('last 5 allocations before it: ', COALESCE(fmt_bytes(last_allocs_bytes), '—'), ' (', repeated_count, ' from one stack)'),
           CASE WHEN user_frame IS NOT NULL THEN concat('failed request from ', user_frame) END,
           CASE WHEN idle >= requested_bytes AND requested_bytes > 0
                THEN concat(fmt_bytes(idle), ' was reserved but not active — more than the request: the free memory was not in one piece') END
       ) AS evidence,
       concat_ws(chr(10),
           CASE WHEN idle >= requested_bytes AND requested_bytes > 0
                THEN 'Set expandable_segments:True so cached segments can grow in place (section 6).' END,
           CASE verdict
                WHEN 'single_oversized_request' THEN 'Shrink or chunk the failing request.'
                WHEN 'same_stack_repeated' THEN 'Release tensors inside the loop that allocates them.'
                WHEN 'run_of_large_allocations' THEN 'Reduce the batch or free intermediates earlier.'
                ELSE 'Record a longer history (max_entries) to see the allocations before the OOM.' END
       ) AS advice,
       CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('snapshot', snapshot, 'device', device, 'seq', seq, 'time_us', time_us, 'requested_bytes', requested_bytes,
                   'device_free', device_free, 'active_bytes', active_bytes, 'reserved_bytes', reserved_bytes,
                   'user_frame', user_frame, 'last_allocs_bytes', last_allocs_bytes, 'repeated_count', repeated_count,
                   'verdict', verdict, 'reference_verdict', reference_verdict) AS figures
FROM entries
