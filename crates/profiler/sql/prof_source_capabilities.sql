-- prof_source_capabilities: the Ascend profiler CSVs' rows of source_capabilities (what each CSV can answer).
--
-- Each CSV answers what its table holds: memory_record.csv and npu_module_mem.csv the memory of
-- each component (or module) over time, operator_memory.csv each operator's allocations with
-- their release, static_op_mem.csv the memory a static graph planned per operator (logical
-- times, not clock times). No profiler CSV carries call stacks or steps.
--
-- @private
-- @part source_capabilities
-- @column source        VARCHAR the CSV (sources.source)
-- @column kind          VARCHAR profiler_memory_record or profiler_operator_memory
-- @column capability    VARCHAR see source_capabilities
-- @column present       BOOLEAN the CSV carries it
-- @column evidence_rows BIGINT  count: rows that carry it
-- @column answers       VARCHAR what it lets memq answer
-- @column when_missing  VARCHAR NULL when present; else what cannot be concluded and how to collect it
-- one pass over the source's tables, one row per source; the capabilities are that row unpivoted
WITH c AS (
    SELECT s.source, s.kind,
           COALESCE(r.samples, 0) + COALESCE(m.samples, 0) AS samples,
           COALESCE(r.reserved, 0) + COALESCE(m.reserved, 0) + COALESCE(o.reserved, 0) AS reserved,
           COALESCE(r.components, 0) + COALESCE(m.components, 0) AS components,
           COALESCE(o.allocs, 0) AS allocs, COALESCE(o.released, 0) AS released,
           COALESCE(o.allocs, 0) + COALESCE(st.ops, 0) AS ops
    FROM sources s
    LEFT JOIN (SELECT source, COUNT(*) AS samples, COUNT(reserved) AS reserved,
                      COUNT(*) FILTER (WHERE component <> '') AS components
               FROM prof_memory_record GROUP BY source) r ON r.source = s.source
    LEFT JOIN (SELECT source, COUNT(*) AS samples, COUNT(reserved) AS reserved,
                      COUNT(*) FILTER (WHERE component <> '') AS components
               FROM prof_module_mem GROUP BY source) m ON m.source = s.source
    LEFT JOIN (SELECT source, COUNT(*) AS allocs, COUNT(release_ts) AS released,
                      COUNT(alloc_total_reserved) AS reserved
               FROM prof_operator_memory GROUP BY source) o ON o.source = s.source
    LEFT JOIN (SELECT source, COUNT(*) FILTER (WHERE op_name <> 'TOTAL') AS ops
               FROM prof_static_op_mem GROUP BY source) st ON st.source = s.source
    WHERE s.kind IN ('profiler_memory_record', 'profiler_operator_memory')
),
k(capability, answers, missing) AS (VALUES
    ('timeline', 'memory over time per component or operator: prof_component_peaks, prof_module_peaks, prof_live_at_peak',
     'no sample over clock time (static_op_mem.csv plans by node index): collect with the profiler''s profile_memory=True'),
    ('block_lifetimes', 'operator allocations with their release: prof_longest_held, prof_live_at_peak',
     'no operator allocation in this CSV: lifetimes are in operator_memory.csv of the same profiler output'),
    ('owners', 'bytes by component (APP, PTA, GE) or module: prof_component_peaks, prof_module_peaks',
     'no component or module column in this CSV: memory_record.csv and npu_module_mem.csv of the same output hold them'),
    ('ops', 'memory by operator: prof_largest_allocations, prof_longest_held',
     'no operator in this CSV: operator_memory.csv (and static_op_mem.csv for static graphs) of the same output hold them'),
    ('reserved', 'reserved bytes over time: prof_component_peaks',
     'no Total Reserved in this CSV: reserved memory cannot be measured from it')
),
judged AS (
    SELECT c.source, c.kind, k.capability, k.answers, k.missing,
           CASE k.capability
           WHEN 'timeline' THEN samples + allocs > 0
           WHEN 'block_lifetimes' THEN allocs > 0
           WHEN 'owners' THEN components > 0
           WHEN 'ops' THEN ops > 0
           WHEN 'reserved' THEN reserved > 0
           END AS present,
           CASE k.capability
           WHEN 'timeline' THEN samples + allocs
           WHEN 'block_lifetimes' THEN released
           WHEN 'owners' THEN components
           WHEN 'ops' THEN ops
           WHEN 'reserved' THEN reserved
           END AS evidence_rows
    FROM c CROSS JOIN k
)
SELECT source, kind, capability, present,
       CAST(CASE WHEN present THEN evidence_rows ELSE 0 END AS BIGINT) AS evidence_rows, answers,
       CASE WHEN NOT present THEN missing END AS when_missing
FROM judged
