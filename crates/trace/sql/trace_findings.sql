-- trace_findings: what torch.profiler traces' memory events tell — each accelerator's allocated peak and the op at it — and what they cannot (rows of view findings).
--
-- Per trace and device (view trace_memory_peaks, metric allocated; the host's `cpu` row is
-- left out when the trace has an accelerator): trace_peak (info) with the moment, the op on the
-- thread at the peak and whether the totals were rebuilt from Bytes. A trace holds no owner of
-- what stays (growth) and no block layout (fragmentation): when no other input of the dataset
-- can tell them (no format listing steps or allocator_state in view source_capabilities, as
-- msMemScope dumps and snapshots do), two cannot_conclude findings say what to collect.
--
-- @private
-- @part findings
-- @column section      VARCHAR traces
-- @column ord          BIGINT  rank: peaks by trace and device, then cannot_conclude
-- @column kind         VARCHAR trace_peak or cannot_conclude
-- @column severity     VARCHAR info
-- @column pid          BIGINT  process id: NULL
-- @column device       VARCHAR cpu, cuda:0, npu:1, …
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR TRACE DEVICE
-- @column bytes        BIGINT  bytes: the allocated peak
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR NULL
-- @column missing      VARCHAR cannot_conclude: what is missing
-- @column collect_with VARCHAR cannot_conclude: how to collect it
-- @column figures      VARCHAR JSON object
WITH
span AS (SELECT MIN(ts) AS t0 FROM trace_memory),
peaks AS (
    SELECT *, regexp_replace(source, '^.*/', '') AS short,
           CAST(ROW_NUMBER() OVER (ORDER BY source, device) AS BIGINT) AS k
    FROM trace_memory_peaks
    WHERE metric = 'allocated' AND peak_bytes IS NOT NULL
      AND NOT (device = 'cpu' AND EXISTS (SELECT 1 FROM trace_memory_peaks WHERE device <> 'cpu'))
),
asks(ord, what, missing, collect_with) AS (VALUES
    (1000, 'whether memory grows without return', 'the owners and lifetimes of live blocks',
     'an msMemScope dump or torch.cuda.memory._dump_snapshot() with _record_memory_history()'),
    (1001, 'fragmentation', 'the allocator''s segment layout', 'torch.cuda.memory._dump_snapshot() (a memory snapshot)')
)
SELECT 'traces' AS section, k AS ord, 'trace_peak' AS kind, 'info' AS severity, CAST(NULL AS BIGINT) AS pid,
       device, CAST(NULL AS VARCHAR) AS pool, concat(short, ' ', device) AS place, peak_bytes AS bytes,
       concat(device, ' peak ', fmt_bytes(peak_bytes), ' allocated') AS title,
       concat('The allocator''s total allocated on ', device, ' peaked at ', fmt_bytes(peak_bytes), ' at ',
              COALESCE(fmt_time(peak_ts, (SELECT t0 FROM span)), ''), CASE WHEN op IS NOT NULL THEN concat(', inside ', op) END, '.') AS problem,
       concat('trace_memory_peaks: ', short, ' ', device, ' allocated peak ', fmt_bytes(peak_bytes), ' (', events, ' events',
              CASE WHEN rebuilt THEN '; totals rebuilt from Bytes' END, ')') AS evidence,
       CAST(NULL AS VARCHAR) AS advice, CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('device', device, 'peak_bytes', peak_bytes, 'peak_ts', peak_ts, 'op', op) AS figures
FROM peaks
UNION ALL
SELECT 'traces', CAST(ord AS BIGINT), 'cannot_conclude', 'info', CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT),
       concat('Cannot conclude ', what), concat('cannot conclude ', what, ': missing ', missing, ' — collect with ', collect_with),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), missing, collect_with, json_object('what', what)
FROM asks
WHERE EXISTS (SELECT 1 FROM trace_memory_peaks)
  AND NOT EXISTS (SELECT 1 FROM source_capabilities WHERE capability IN ('steps', 'allocator_state'))
