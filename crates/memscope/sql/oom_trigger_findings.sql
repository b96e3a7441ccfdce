-- oom_trigger_findings: one finding per out-of-memory trigger of an msMemScope dump, with the verdict of the OOM guide's rules (rows of view findings).
--
-- Per trigger (view oom_events, kind trigger) the verdict is the first rule of view
-- oom_findings, in the guide's attribution order, whose verdict is yes; when none holds and the
-- request was smaller than the free device memory of the snapshot before the trigger, the
-- memory was free but not in one piece: fragmentation or a pool-expansion failure; otherwise
-- undetermined. Every rule's verdict and figures are listed as evidence; the advice is the
-- verdict's. Severity error.
--
-- @private
-- @part findings
-- @column section      VARCHAR oom
-- @column ord          BIGINT  rank: triggers by time
-- @column kind         VARCHAR oom
-- @column severity     VARCHAR error
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id of the trigger
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR device D
-- @column bytes        BIGINT  bytes: the request that failed
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR one per line
-- @column missing      VARCHAR NULL
-- @column collect_with VARCHAR NULL
-- @column figures      VARCHAR JSON object
WITH
start AS (SELECT MIN(first_ts) AS t0 FROM event_counts WHERE first_ts > 0),
triggers AS (
    SELECT *, CAST(ROW_NUMBER() OVER (ORDER BY oom_ts, source, trigger_id) AS BIGINT) AS k
    FROM oom_events WHERE kind = 'trigger'
),
rules AS (
    SELECT source, trigger_id,
           MIN(CASE WHEN verdict = 'yes' THEN priority END) AS first_yes,
           array_agg(named_struct('priority', priority, 'rule', rule, 'verdict', verdict, 'evidence', evidence) ORDER BY priority) AS rules,
           string_agg(concat(priority, ' ', rule, ': ', verdict, ' — ', evidence), chr(10) ORDER BY priority) AS lines
    FROM oom_findings GROUP BY source, trigger_id
),
judged AS (
    SELECT t.*, r.rules, r.lines, y.rule AS yes_rule, y.evidence AS yes_evidence,
           COALESCE(y.rule, CASE WHEN t.free_mem IS NOT NULL AND t.req_size < t.free_mem THEN 'fragmentation' ELSE 'undetermined' END) AS verdict
    FROM triggers t
    LEFT JOIN rules r ON r.source = t.source AND r.trigger_id = t.trigger_id
    LEFT JOIN oom_findings y ON y.source = t.source AND y.trigger_id = t.trigger_id AND y.priority = r.first_yes
),
-- what each verdict means and what to do, in whole sentences
words(verdict, label, advice) AS (VALUES
    ('single_huge_request', 'single huge request',
     'Find the call that asked for it (trigger stack) and make it smaller: a shape bug, an unchunked operation, a batch or sequence too large.'),
    ('over_large_request', 'single over-large request',
     'Plenty of memory was free, yet one request exceeded it: shrink or chunk that request.'),
    ('top_owner', 'model states / KV cache / activations too large',
     'Shard or offload the largest owner (FSDP/ZeRO for weights and optimizer state, smaller KV cache, activation checkpointing for activations).'),
    ('same_stack_repeated', 'repeated allocation from one site',
     'A loop allocates from the same line again and again: release the tensors inside the loop or pre-allocate once.'),
    ('chain_of_large_allocations', 'a chain of large allocations',
     'Several large allocations in a row exhausted memory: reduce the batch or free intermediates earlier.'),
    ('accumulation', 'accumulation (leak or cache growth)',
     'Memory grew step after step until it ran out: fix the growing owner of section 4.'),
    ('fragmentation', 'fragmentation or pool-expansion failure',
     'Enough memory was free but not in one piece: set expandable_segments:True, or max_split_size_mb where expandable segments cannot be used (section 6).'),
    ('undetermined', 'undetermined',
     'Collect OOM records with snapshots (`--analysis=oom`) to decide.')
)
SELECT 'oom' AS section, j.k AS ord, 'oom' AS kind, 'error' AS severity, j.pid, j.device, CAST(NULL AS VARCHAR) AS pool,
       concat('device ', j.device) AS place, j.req_size AS bytes,
       concat('OOM on device ', j.device, ': ', w.label) AS title,
       concat('At ', fmt_time(j.oom_ts, (SELECT t0 FROM start)), ' a ', fmt_bytes(COALESCE(j.req_size, 0)), ' request (', j.func, ') failed',
              CASE WHEN j.free_mem IS NOT NULL THEN concat(' with ', fmt_bytes(j.free_mem), ' free on the device') END,
              '. Verdict: ', w.label,
              CASE WHEN j.yes_rule IS NOT NULL THEN concat(' — ', j.yes_evidence)
                   WHEN j.verdict = 'fragmentation' THEN ' — no rule of the OOM guide holds and the request was smaller than the free memory' END,
              '.') AS problem,
       concat_ws(chr(10), j.lines, CASE WHEN j.stack_top IS NOT NULL THEN concat('failed call at ', j.stack_top) END) AS evidence,
       w.advice AS advice, CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('source', j.source, 'trigger_id', j.trigger_id, 'pid', j.pid, 'device', j.device, 'oom_ts', j.oom_ts,
                   'func', j.func, 'req_size', j.req_size, 'free_mem', j.free_mem, 'total_mem', j.total_mem,
                   'snapshot', j.snapshot_name, 'verdict', j.verdict, 'verdict_label', w.label, 'stack_top', j.stack_top,
                   'rules', COALESCE(j.rules, make_array())) AS figures
FROM judged j JOIN words w ON w.verdict = j.verdict
