-- trace_source_capabilities: the torch.profiler traces' rows of source_capabilities (what each trace can answer).
--
-- A trace records a `[memory]` instant event per allocation and free while the profiler ran
-- (profile_memory=True): a timeline with the allocator's totals after each event. The 2021
-- layout writes no totals (total_allocated is rebuilt per device, reserved bytes are unknown);
-- the op at each event needs the CPU ops in the same trace.
--
-- @private
-- @part source_capabilities
-- @column source        VARCHAR the trace (sources.source)
-- @column kind          VARCHAR kineto_trace
-- @column capability    VARCHAR see source_capabilities
-- @column present       BOOLEAN the trace carries it
-- @column evidence_rows BIGINT  count: [memory] events that carry it
-- @column answers       VARCHAR what it lets memq answer
-- @column when_missing  VARCHAR NULL when present; else what cannot be concluded and how to collect it
-- one pass over the source's tables, one row per source; the capabilities are that row unpivoted
WITH c AS (
    SELECT s.source, s.kind,
           COUNT(m.source) AS events,
           COUNT(*) FILTER (WHERE m.addr IS NOT NULL AND m.bytes > 0) AS allocs,
           COUNT(*) FILTER (WHERE m.addr IS NOT NULL AND m.bytes < 0) AS frees,
           COUNT(m.op) AS with_op,
           COUNT(m.total_reserved) AS with_reserved,
           COUNT(*) FILTER (WHERE m.device_type = 'cpu') AS host_events
    FROM sources s
    LEFT JOIN trace_memory m ON m.source = s.source
    WHERE s.kind = 'kineto_trace'
    GROUP BY s.source, s.kind
),
k(capability, answers, missing) AS (VALUES
    ('timeline', 'allocated (and reserved) bytes over time per device: trace_memory_curve, trace_memory_peaks',
     'no [memory] event: the trace holds no memory data; profile with torch.profiler.profile(profile_memory=True)'),
    ('block_lifetimes', 'allocations paired with their frees by address: what each op retained (trace_memory_by_op)',
     'the events do not pair into blocks (no address, or no alloc or no free): retained memory cannot be concluded; profile a whole step with profile_memory=True'),
    ('ops', 'memory by operator and the op at the peak: trace_memory_by_op, trace_memory_peaks.op',
     'no CPU op encloses the memory events: memory cannot be attributed to ops; keep the cpu_op events in the trace'),
    ('reserved', 'the allocator''s reserved bytes: trace_memory_peaks (metric reserved)',
     'no Total Reserved (the 2021 layout): reserved memory and cached memory cannot be measured; a newer PyTorch writes it'),
    ('host_memory', 'CPU allocations beside the device''s: trace_memory_peaks per device',
     'no CPU memory event: host memory cannot be told; profile with activities=[ProfilerActivity.CPU, ...] and profile_memory=True')
),
judged AS (
    SELECT c.source, c.kind, k.capability, k.answers, k.missing,
           CASE k.capability
           WHEN 'timeline' THEN events > 0
           WHEN 'block_lifetimes' THEN allocs > 0 AND frees > 0
           WHEN 'ops' THEN with_op > 0
           WHEN 'reserved' THEN with_reserved > 0
           WHEN 'host_memory' THEN host_events > 0
           END AS present,
           CASE k.capability
           WHEN 'timeline' THEN events
           WHEN 'block_lifetimes' THEN allocs + frees
           WHEN 'ops' THEN with_op
           WHEN 'reserved' THEN with_reserved
           WHEN 'host_memory' THEN host_events
           END AS evidence_rows
    FROM c CROSS JOIN k
)
SELECT source, kind, capability, present,
       CAST(CASE WHEN present THEN evidence_rows ELSE 0 END AS BIGINT) AS evidence_rows, answers,
       CASE WHEN NOT present THEN missing END AS when_missing
FROM judged
