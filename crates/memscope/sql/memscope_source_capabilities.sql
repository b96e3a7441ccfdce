-- memscope_source_capabilities: the msMemScope dumps' rows of source_capabilities (what each dump can answer).
--
-- Read from view capabilities (the counts behind each answer) and table event_counts (host
-- pools: HOST and HOST_PINNED rows, Device Id cpu or host). A dump always has a timeline of
-- rows; whether they pair into blocks is view pairing's answer (a MALLOC-only or FREE-only
-- stream, `--events=alloc` or `--events=free`, cannot).
--
-- @private
-- @part source_capabilities
-- @column source        VARCHAR the dump (sources.source)
-- @column kind          VARCHAR memscope_csv or memscope_db
-- @column capability    VARCHAR see source_capabilities
-- @column present       BOOLEAN the dump carries it
-- @column evidence_rows BIGINT  count: rows that carry it
-- @column answers       VARCHAR what it lets memq answer
-- @column when_missing  VARCHAR NULL when present; else what cannot be concluded and how to collect it
-- one pass over the source's tables, one row per source; the capabilities are that row unpivoted
WITH c AS (
    SELECT s.source, s.kind,
           COALESCE(p.malloc_rows, 0) + COALESCE(p.free_rows, 0) AS memory_rows,
           COALESCE(p.can_pair, false) AS can_pair, COALESCE(p.pairing, 'none') AS pairing,
           COALESCE(e.stack_rows, 0) AS stack_rows, COALESCE(e.owner_rows, 0) AS owner_rows,
           COALESCE(e.counter_rows, 0) AS counter_rows, COALESCE(e.oom_rows, 0) AS oom_rows,
           COALESCE(e.host_rows, 0) AS host_rows, COALESCE(e.mark_rows, 0) AS mark_rows,
           COALESCE(st.steps, 0) AS steps
    FROM sources s
    LEFT JOIN pairing p ON p.source = s.source
    LEFT JOIN (SELECT source,
                      SUM(py_stack_rows + c_stack_rows) AS stack_rows,
                      SUM(CASE WHEN event = 'MALLOC' THEN owner_rows ELSE 0 END) AS owner_rows,
                      SUM(CASE WHEN event IN ('MALLOC', 'FREE') THEN counter_rows ELSE 0 END) AS counter_rows,
                      SUM(CASE WHEN event = 'OOM_DETAIL' THEN rows ELSE 0 END) AS oom_rows,
                      SUM(CASE WHEN event IN ('MALLOC', 'FREE') AND upper(event_type) IN ('HOST', 'HOST_PINNED') THEN rows ELSE 0 END) AS host_rows,
                      SUM(CASE WHEN event = 'MSTX' THEN rows ELSE 0 END) AS mark_rows
               FROM event_counts GROUP BY source) e ON e.source = s.source
    LEFT JOIN (SELECT source, COUNT(DISTINCT step) AS steps FROM steps GROUP BY source) st ON st.source = s.source
    WHERE s.kind IN ('memscope_csv', 'memscope_db')
),
k(capability, answers, missing) AS (VALUES
    ('timeline', 'memory over time per device and pool: curve, usage_series, peaks',
     'no MALLOC or FREE row: the dump has no memory events; collect with msMemScope --events=alloc,free'),
    ('block_lifetimes', 'live bytes, leaks and what was live at a moment: leak_candidates, breakdown_at, owner_peaks',
     'the rows do not pair (pairing {pairing}): leaks and live bytes cannot be concluded; collect alloc and free events together (msMemScope --events=alloc,free)'),
    ('stacks', 'the code that allocated: leak_summary.stack_top, peak_blocks, user frames',
     'no call stack: leaks and peaks cannot be attributed to code; collect with msMemScope --call-stack python:N (and c:N)'),
    ('owners', 'bytes by owner: breakdown_at, breakdown_tree_at, owner_peaks',
     'no owner on MALLOC rows: bytes cannot be split by owner; collect with msMemScope --analysis=decompose'),
    ('steps', 'growth per step and step peaks: step_peaks, step_leaks, trend',
     'no step: growth cannot be judged per step, only on the curve; call msmemscope.step() each step (or mark steps with MSTX ranges named step)'),
    ('reserved', 'the pools'' used and total bytes (reserved), cached memory and fragmentation: peaks, fragmentation',
     'no used/total on the memory rows: reserved memory and fragmentation cannot be measured; a newer msMemScope writes them'),
    ('oom', 'the OOM diagnosis: oom_events, oom_findings',
     'no OOM_DETAIL row: no out-of-memory was recorded; to diagnose one, collect with msMemScope --analysis=oom'),
    ('host_memory', 'host memory beside device memory: device_host_steps',
     'no HOST or HOST_PINNED row: host memory growth cannot be told from device growth; the device_cpu dump of the same capture holds it'),
    ('annotations', 'MSTX marks and ranges in the run: stage_memory, steps from step ranges',
     'no MSTX row: no user mark to align memory with stages; mark stages with mstx (msMemScope records them)')
),
judged AS (
    SELECT c.source, c.kind, c.pairing, k.capability, k.answers, k.missing,
           CASE k.capability
           WHEN 'timeline' THEN memory_rows > 0
           WHEN 'block_lifetimes' THEN can_pair
           WHEN 'stacks' THEN stack_rows > 0
           WHEN 'owners' THEN owner_rows > 0
           WHEN 'steps' THEN steps > 0
           WHEN 'reserved' THEN counter_rows > 0
           WHEN 'oom' THEN oom_rows > 0
           WHEN 'host_memory' THEN host_rows > 0
           WHEN 'annotations' THEN mark_rows > 0
           END AS present,
           CASE k.capability
           WHEN 'timeline' THEN memory_rows
           WHEN 'block_lifetimes' THEN memory_rows
           WHEN 'stacks' THEN stack_rows
           WHEN 'owners' THEN owner_rows
           WHEN 'steps' THEN steps
           WHEN 'reserved' THEN counter_rows
           WHEN 'oom' THEN oom_rows
           WHEN 'host_memory' THEN host_rows
           WHEN 'annotations' THEN mark_rows
           END AS evidence_rows
    FROM c CROSS JOIN k
)
SELECT source, kind, capability, present,
       CAST(CASE WHEN present THEN evidence_rows ELSE 0 END AS BIGINT) AS evidence_rows, answers,
       CASE WHEN NOT present THEN replace(missing, '{pairing}', pairing) END AS when_missing
FROM judged
