-- capability_findings: what the msMemScope dumps cannot answer, and how to collect it (rows of view findings).
--
-- From view capabilities (one row per dump), each a cannot_conclude finding with what is missing
-- and the collection option that adds it:
-- - owners, Python stacks or alloc/free pairs that no dump carries (section sources);
-- - dumps whose rows cannot pair into blocks (MALLOC rows only, FREE rows only) beside dumps
--   that can: whether their memory grows is unknown (sources);
-- - no OOM record in any input: why an OOM happened, should one happen (sources; a note on
--   what the dump could hold, not a question this run raised);
-- - OOM records without SNAPSHOT records: the free memory at the OOM (section oom);
-- - fewer than two complete steps in every dump: growth per step (section leaks; the leak rule
--   then judges growth after the warm-up instead).
--
-- @private
-- @part findings
-- @column section      VARCHAR sources, oom or leaks
-- @column ord          BIGINT  rank: in the order above
-- @column kind         VARCHAR cannot_conclude
-- @column severity     VARCHAR info
-- @column pid          BIGINT  process id: NULL
-- @column device       VARCHAR NULL
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR NULL
-- @column bytes        BIGINT  bytes: NULL
-- @column title        VARCHAR Cannot conclude …
-- @column problem      VARCHAR what cannot be concluded, what is missing and how to collect it
-- @column evidence     VARCHAR NULL
-- @column advice       VARCHAR NULL
-- @column missing      VARCHAR what the dumps lack
-- @column collect_with VARCHAR how to collect it
-- @column figures      VARCHAR JSON object: what, and the dumps concerned
WITH
dumps AS (
    SELECT COUNT(*) AS n, bool_or(has_owners) AS owners, bool_or(has_py_stacks) AS stacks,
           bool_or(has_alloc_free) AS pairs, bool_or(has_oom) AS oom, bool_or(has_snapshots) AS snapshots,
           bool_or(has_steps) AS steps, COALESCE(MAX(complete_steps), 0) AS complete_steps
    FROM capabilities
),
unpaired AS (
    SELECT array_agg(item ORDER BY source) AS sources, string_agg(item, ', ' ORDER BY source) AS list
    FROM (SELECT source, concat(short, ' (', replace(pairing, '_', ' '), ')') AS item FROM (SELECT source, pairing,
                 CASE WHEN regexp_like(source, '(^|/)device_[^/]*/')
                      THEN regexp_replace(source, '^(?:[^/]*/)*?(device_[^/]*)/(?:.*/)?([^/]*)$', '${1}/${2}')
                      ELSE regexp_replace(source, '^.*/', '') END AS short
          FROM capabilities WHERE pairing IN ('malloc_only', 'free_only', 'none')))
),
asks(section, ord, what, missing, collect_with, applies) AS (
    SELECT 'sources', 1, 'which owner (framework component) holds the memory', 'owners on MALLOC rows',
           '`--analysis=decompose` (config.json analysisType bit 1)', NOT owners FROM dumps
    UNION ALL
    SELECT 'sources', 2, 'which line of user code allocated the memory', 'Python call stacks',
           '`--call-stack python:50` (config.json enablePyStack)', NOT stacks FROM dumps
    UNION ALL
    SELECT 'sources', 3, 'block lifetimes (leaks, live memory)', 'alloc/free pairs (MALLOC and FREE rows)',
           'alloc and free events collected and dumped (config.json eventType / dumpEventType bits 0 and 1)', NOT pairs FROM dumps
    UNION ALL
    SELECT 'sources', 4, concat('whether memory grows in ', u.list), 'both MALLOC and FREE rows in each dump',
           'alloc and free events dumped (config.json dumpEventType: alloc,free)', pairs AND u.list IS NOT NULL
    FROM dumps CROSS JOIN unpaired u
    UNION ALL
    SELECT 'sources', 5, 'why an out-of-memory error happened, should one happen', 'OOM records (OOM_DETAIL rows)',
           '`--analysis=oom` (config.json analysisType bit 3), which also takes the OOM_Snapshot',
           NOT oom AND NOT EXISTS (SELECT 1 FROM source_capabilities WHERE capability = 'oom' AND present) FROM dumps
    UNION ALL
    SELECT 'oom', 0, 'how much device memory was free at the OOM', 'SNAPSHOT records',
           '`--analysis=oom` (takes an OOM_Snapshot before the trigger)', oom AND NOT snapshots FROM dumps
    UNION ALL
    SELECT 'leaks', 0, 'growth per step (leak algorithm A)',
           CASE WHEN steps THEN 'two complete steps (the dump marks steps but closes fewer than two)' ELSE 'step markers' END,
           '`msmemscope.step()` in the training loop, or mstx ranges named "step start"', complete_steps < 2 FROM dumps
)
SELECT section, CAST(ord AS BIGINT) AS ord, 'cannot_conclude' AS kind, 'info' AS severity, CAST(NULL AS BIGINT) AS pid,
       CAST(NULL AS VARCHAR) AS device, CAST(NULL AS VARCHAR) AS pool, CAST(NULL AS VARCHAR) AS place, CAST(NULL AS BIGINT) AS bytes,
       concat('Cannot conclude ', what) AS title,
       concat('cannot conclude ', what, ': missing ', missing, ' — collect with ', collect_with) AS problem,
       CAST(NULL AS VARCHAR) AS evidence, CAST(NULL AS VARCHAR) AS advice, missing, collect_with,
       CASE WHEN ord = 4 AND section = 'sources' THEN json_object('what', what, 'sources', (SELECT sources FROM unpaired))
            ELSE json_object('what', what) END AS figures
FROM asks WHERE applies AND (SELECT n FROM dumps) > 0
