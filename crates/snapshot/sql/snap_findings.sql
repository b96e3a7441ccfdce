-- snap_findings: each snapshot's true peak and what holds it, a wrapped trace, a trace-less snapshot and long-lived blocks (rows of view findings).
--
-- Per snapshot and device (view snap_peak):
-- - snapshot_peak (info): the true active peak (MemoryViz's method) and the reserved peak, with
--   the three user frames holding most of it (view snap_peak_split: allocations summed by
--   frame, not single blocks); the reference's "peak reserved" is quoted as what it is (net
--   segment growth since the window started);
-- - trace_wrapped (warning): the trace's ring buffer wrapped (snap_peak.trace_wrapped), so
--   the peak is the kept window's and anything higher before it is lost, with the fix
--   (`_record_memory_history(max_entries=…)` larger than the run);
-- - cannot_conclude: a snapshot without trace entries has no timeline and no true peak.
-- Then long_lived (info) per snapshot and device: blocks still live at the end that were
-- allocated before the trace window or in its first 20 % (view snap_long_lived), with the five
-- user frames holding most.
--
-- @private
-- @part findings
-- @column section      VARCHAR snapshots
-- @column ord          BIGINT  rank: by snapshot and device: peak, wrap, cannot_conclude; then long_lived
-- @column kind         VARCHAR snapshot_peak, trace_wrapped, cannot_conclude or long_lived
-- @column severity     VARCHAR warning (trace_wrapped) or info
-- @column pid          BIGINT  process id: NULL (a snapshot names no process)
-- @column device       VARCHAR device ordinal
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR SNAPSHOT device D
-- @column bytes        BIGINT  bytes: snapshot_peak, trace_wrapped: the active peak (of the kept window); long_lived: bytes held
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR one per line
-- @column missing      VARCHAR cannot_conclude: what is missing
-- @column collect_with VARCHAR cannot_conclude: how to collect it
-- @column figures      VARCHAR JSON object
WITH
peaks AS (
    SELECT *, CAST(ROW_NUMBER() OVER (ORDER BY snapshot, device) AS BIGINT) AS k,
           concat(snapshot, ' device ', device) AS place,
           CASE WHEN entries = 1 THEN 'entry' ELSE concat(entries, ' entries') END AS kept
    FROM snap_peak
),
holders AS (
    SELECT snapshot, device,
           string_agg(concat(COALESCE(fmt_bytes(bytes), '—'), ' (', fmt_pct(COALESCE(pct_of_peak, 0)), ' of the peak, ', blocks,
                             ' allocation(s)) from ', key), chr(10) ORDER BY r) AS lines
    FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY bytes DESC, key) AS r
          FROM snap_peak_split WHERE dimension = 'user_frame')
    WHERE r <= 3 GROUP BY snapshot, device
),
lived AS (
    SELECT snapshot, device, COUNT(*) AS blocks, SUM(size) AS bytes,
           SUM(CASE WHEN origin = 'before_window' THEN size ELSE 0 END) AS before_window_bytes
    FROM snap_long_lived WHERE long_lived GROUP BY snapshot, device
),
lived_frames AS (
    SELECT snapshot, device,
           string_agg(concat(COALESCE(fmt_bytes(bytes), '—'), ' in ', blocks, ' block(s) from ', COALESCE(user_frame, '(no stack)')),
                      chr(10) ORDER BY r) AS lines
    FROM (SELECT snapshot, device, user_frame, COUNT(*) AS blocks, SUM(size) AS bytes,
                 ROW_NUMBER() OVER (PARTITION BY snapshot, device ORDER BY SUM(size) DESC, user_frame) AS r
          FROM snap_long_lived WHERE long_lived GROUP BY snapshot, device, user_frame)
    WHERE r <= 5 GROUP BY snapshot, device
)
SELECT 'snapshots' AS section, 10 * p.k AS ord, 'snapshot_peak' AS kind, 'info' AS severity, CAST(NULL AS BIGINT) AS pid,
       CAST(p.device AS VARCHAR) AS device, CAST(NULL AS VARCHAR) AS pool, p.place, p.active_peak AS bytes,
       concat(p.place, ': ', CASE WHEN p.trace_wrapped THEN 'peak in the kept trace window' ELSE 'true peak' END, ' ',
              fmt_bytes(p.active_peak), ' active, ', fmt_bytes(p.reserved_peak), ' reserved') AS title,
       concat('Active memory (live tensors, requested bytes, including those allocated before the trace window) peaks at ',
              fmt_bytes(p.active_peak), ' at trace entry ', COALESCE(CAST(p.active_peak_seq AS VARCHAR), '— (no trace)'),
              '; reserved memory peaks at ', fmt_bytes(p.reserved_peak), ' at entry ', COALESCE(CAST(p.reserved_peak_seq AS VARCHAR), '—'), '.',
              CASE WHEN p.reference_peak IS NOT NULL THEN concat(' (The reference''s "peak reserved" of ', fmt_bytes(p.reference_peak),
                   ' is the net segment growth since the window started, not a memory level.)') END) AS problem,
       h.lines AS evidence, CAST(NULL AS VARCHAR) AS advice, CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('snapshot', p.snapshot, 'device', p.device, 'entries', p.entries, 'active_start', p.active_start,
                   'active_peak', p.active_peak, 'active_peak_seq', p.active_peak_seq, 'active_peak_time_us', p.active_peak_time_us,
                   'active_end', p.active_end, 'reserved_start', p.reserved_start, 'reserved_peak', p.reserved_peak,
                   'reserved_peak_seq', p.reserved_peak_seq, 'reserved_end', p.reserved_end, 'reference_peak', p.reference_peak,
                   'trace_wrapped', p.trace_wrapped) AS figures
FROM peaks p LEFT JOIN holders h ON h.snapshot = p.snapshot AND h.device = p.device
UNION ALL
SELECT 'snapshots', 10 * k + 1, 'trace_wrapped', 'warning', CAST(NULL AS BIGINT), CAST(device AS VARCHAR), CAST(NULL AS VARCHAR),
       place, active_peak,
       concat(place, ': the trace wrapped; the peak before its last ', kept, ' is unknown'),
       concat('The allocator''s trace is a ring buffer and it kept only its last ', kept,
              ' (it frees addresses it never saw allocated). Within them active memory peaks at ', fmt_bytes(active_peak),
              ', but anything higher before the window is lost: the run''s true peak cannot be concluded from this snapshot.'),
       concat('snap_peak.trace_wrapped is true; ', entries, ' entries kept; highest active level in them ', fmt_bytes(active_peak)),
       concat('Record again with a ring buffer larger than the run: `torch.cuda.memory._record_memory_history(max_entries=N)` with N well above ',
              entries, ', or dump the snapshot earlier (right after the step that peaks).'),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       json_object('snapshot', snapshot, 'device', device, 'entries', entries, 'window_active_peak', active_peak)
FROM peaks WHERE trace_wrapped
UNION ALL
SELECT 'snapshots', 10 * k + 2, 'cannot_conclude', 'info', CAST(NULL AS BIGINT), CAST(device AS VARCHAR), CAST(NULL AS VARCHAR),
       place, CAST(NULL AS BIGINT),
       concat('Cannot conclude ', what), concat('cannot conclude ', what, ': missing ', missing, ' — collect with ', collect_with),
       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), missing, collect_with,
       json_object('what', what, 'snapshot', snapshot, 'device', device)
FROM (SELECT *, concat('the memory timeline and true peak of ', snapshot, ' device ', device) AS what,
             'trace entries (only the final allocator state was dumped)' AS missing,
             '`torch.cuda.memory._record_memory_history(max_entries=100000)` (torch_npu: `torch_npu.npu.memory._record_memory_history`) before the run, then `_dump_snapshot()`' AS collect_with
      FROM peaks WHERE COALESCE(entries, 0) = 0)
UNION ALL
SELECT 'snapshots', 1000000 + CAST(ROW_NUMBER() OVER (ORDER BY l.snapshot, l.device) AS BIGINT), 'long_lived', 'info',
       CAST(NULL AS BIGINT), CAST(l.device AS VARCHAR), CAST(NULL AS VARCHAR), concat(l.snapshot, ' device ', l.device), l.bytes,
       concat(l.snapshot, ' device ', l.device, ': ', COALESCE(fmt_bytes(l.bytes), '—'), ' in ', l.blocks, ' long-lived block(s)'),
       'Blocks still live at the end that were allocated before the trace window or in its first 20 %: model state, caches or leaks — the frames say which.',
       f.lines, CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR),
       json_object('snapshot', l.snapshot, 'device', l.device, 'blocks', l.blocks, 'bytes', l.bytes, 'before_window_bytes', l.before_window_bytes)
FROM lived l LEFT JOIN lived_frames f ON f.snapshot = l.snapshot AND f.device = l.device
