-- snap_source_capabilities: the PyTorch snapshots' rows of source_capabilities (what each snapshot can answer).
--
-- Pinned host memory (`record_pinned_host_memory=True`) is in snap_host_segments and
-- snap_host_traces; notes attached to live blocks are `annotate` trace entries.
--
-- A snapshot always holds the allocator's state at the moment it was taken (snap_segments,
-- snap_blocks); everything over time comes from its trace ring buffer (snap_traces), which is
-- recorded only when `torch.cuda.memory._record_memory_history()` ran before the dump, and keeps
-- only the last `max_entries` entries: a trace that wrapped (snap_info section trace, key
-- wrapped) no longer shows the start of the run, so a peak before its first entry is unknown.
--
-- @private
-- @part source_capabilities
-- @column source        VARCHAR the snapshot (sources.source)
-- @column kind          VARCHAR snapshot
-- @column capability    VARCHAR see source_capabilities
-- @column present       BOOLEAN the snapshot carries it
-- @column evidence_rows BIGINT  count: trace entries, blocks, segments or info rows that carry it
-- @column answers       VARCHAR what it lets memq answer
-- @column when_missing  VARCHAR NULL when present; else what cannot be concluded and how to collect it
-- one pass over the source's tables, one row per source; the capabilities are that row unpivoted
WITH c AS (
    SELECT s.source, s.kind,
           COALESCE(t.entries, 0) AS entries, COALESCE(t.allocs, 0) AS allocs,
           COALESCE(t.frees, 0) AS frees, COALESCE(t.ooms, 0) AS ooms,
           COALESCE(t.stacked, 0) + COALESCE(b.stacked, 0) AS stacked,
           COALESCE(t.labelled, 0) + COALESCE(b.labelled, 0) AS labelled,
           COALESCE(seg.segments, 0) AS segments,
           COALESCE(i.wrapped_devices, 0) AS wrapped_devices,
           COALESCE(i.annotations, 0) + COALESCE(t.annotates, 0) AS annotations,
           COALESCE(h.host_rows, 0) AS host_rows
    FROM sources s
    LEFT JOIN (SELECT snapshot,
                      COUNT(*) AS entries,
                      COUNT(*) FILTER (WHERE action = 'alloc') AS allocs,
                      COUNT(*) FILTER (WHERE action IN ('free_requested', 'free_completed')) AS frees,
                      COUNT(stack_id) AS stacked,
                      COUNT(*) FILTER (WHERE user_metadata IS NOT NULL AND user_metadata <> '') AS labelled,
                      COUNT(*) FILTER (WHERE action = 'oom') AS ooms,
                      COUNT(*) FILTER (WHERE action = 'annotate') AS annotates
               FROM snap_traces GROUP BY snapshot) t ON t.snapshot = s.source
    LEFT JOIN (SELECT snapshot, COUNT(*) AS host_rows
               FROM (SELECT snapshot FROM snap_host_segments
                     UNION ALL SELECT snapshot FROM snap_host_traces) x
               GROUP BY snapshot) h ON h.snapshot = s.source
    LEFT JOIN (SELECT snapshot, COUNT(stack_id) AS stacked,
                      COUNT(*) FILTER (WHERE user_metadata IS NOT NULL AND user_metadata <> '') AS labelled
               FROM snap_blocks GROUP BY snapshot) b ON b.snapshot = s.source
    LEFT JOIN (SELECT snapshot, COUNT(*) AS segments FROM snap_segments GROUP BY snapshot) seg ON seg.snapshot = s.source
    LEFT JOIN (SELECT snapshot,
                      COUNT(*) FILTER (WHERE section = 'trace' AND key = 'wrapped' AND value = 'true') AS wrapped_devices,
                      COUNT(*) FILTER (WHERE section = 'external_annotations') AS annotations
               FROM snap_info GROUP BY snapshot) i ON i.snapshot = s.source
    WHERE s.kind = 'snapshot'
),
k(capability, answers, missing) AS (VALUES
    ('timeline', 'memory over time and the true peak: snap_timeline, snap_peak, snap_peak_blocks',
     'no trace entry: only the state at the dump is known, not the peak nor growth; call torch.cuda.memory._record_memory_history(max_entries=...) before the run'),
    ('block_lifetimes', 'which blocks were freed and when: snap_allocations, snap_long_lived, state_at',
     'the trace holds no alloc and free entries to pair: block lifetimes and leaks cannot be concluded; record the history (_record_memory_history) across at least one whole step'),
    ('full_history', 'a peak from the start of the recording: snap_peak is the true peak only when the trace did not wrap',
     'the trace ring buffer wrapped on {wrapped} device(s): it kept only its last entries, so a peak before them is unknown; raise _record_memory_history(max_entries=...) above the entries of a whole step'),
    ('stacks', 'the code that allocated: snap_stacks, snap_stack_attribution, user frames of snap_peak_blocks',
     'no stack on any block or entry: memory cannot be attributed to code; record with _record_memory_history(context=''all'', stacks=''all'')'),
    ('labels', 'user labels (user_metadata: module names) on blocks and entries',
     'no user_metadata: allocations carry no user label (optional: PyTorch''s memory metadata API attaches them)'),
    ('reserved', 'reserved memory per device and its segments: snap_overview, snap_segment_types, snap_expansions',
     'no segment: nothing was reserved when the snapshot was taken (take it while the model holds memory)'),
    ('allocator_state', 'fragmentation and cached free memory at the dump: snap_overview, snap_fragmentation, snap_block_states',
     'no segment: the allocator held nothing when the snapshot was taken'),
    ('oom', 'the OOM diagnosis: snap_oom',
     'no oom entry: no out-of-memory was recorded in the trace (dump from an OOM observer to catch one)'),
    ('host_memory', 'pinned host memory beside the devices'': snap_host_memory, snap_host_timeline',
     'no host_segments or host_traces: pinned host memory was not recorded; record it with _record_memory_history(..., record_pinned_host_memory=True) (PyTorch 2.14 and later)'),
    ('annotations', 'marks in the run (external_annotations) and notes attached to live blocks (annotate entries): snap_stage_memory, snap_annotations',
     'no annotation: memory cannot be aligned with stages of the run (record_function or torch.cuda.memory annotations add them)')
),
judged AS (
    SELECT c.source, c.kind, c.entries, c.wrapped_devices, k.capability, k.answers,
           CASE WHEN k.capability = 'full_history' AND c.entries = 0
                THEN 'no trace entry: nothing before the dump is known; call torch.cuda.memory._record_memory_history(max_entries=...) before the run'
                ELSE replace(k.missing, '{wrapped}', CAST(c.wrapped_devices AS VARCHAR)) END AS missing,
           CASE k.capability
           WHEN 'timeline' THEN entries > 0
           WHEN 'block_lifetimes' THEN allocs > 0 AND frees > 0
           WHEN 'full_history' THEN entries > 0 AND wrapped_devices = 0
           WHEN 'stacks' THEN stacked > 0
           WHEN 'labels' THEN labelled > 0
           WHEN 'reserved' THEN segments > 0
           WHEN 'allocator_state' THEN segments > 0
           WHEN 'oom' THEN ooms > 0
           WHEN 'host_memory' THEN host_rows > 0
           WHEN 'annotations' THEN annotations > 0
           END AS present,
           CASE k.capability
           WHEN 'timeline' THEN entries
           WHEN 'block_lifetimes' THEN allocs + frees
           WHEN 'full_history' THEN entries
           WHEN 'stacks' THEN stacked
           WHEN 'labels' THEN labelled
           WHEN 'reserved' THEN segments
           WHEN 'allocator_state' THEN segments
           WHEN 'oom' THEN ooms
           WHEN 'host_memory' THEN host_rows
           WHEN 'annotations' THEN annotations
           END AS evidence_rows
    FROM c CROSS JOIN k
)
SELECT source, kind, capability, present,
       CAST(CASE WHEN present THEN evidence_rows ELSE 0 END AS BIGINT) AS evidence_rows, answers,
       CASE WHEN NOT present THEN missing END AS when_missing
FROM judged
