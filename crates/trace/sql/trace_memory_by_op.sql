-- trace_memory_by_op: memory allocated, freed and retained by each CPU op of a torch.profiler trace, per device.
--
-- From trace_memory: the [memory] events grouped by the innermost CPU op running on their
-- thread (op NULL: events outside any op, or a trace recorded without ops). retained is
-- allocated − freed: what the op's runs left allocated (negative when they freed more than
-- they allocated). ORDER BY retained_bytes DESC, then source, device, op.
--
-- @column source          VARCHAR trace the events come from
-- @column device          VARCHAR cpu, cuda:0, npu:1, ...
-- @column op              VARCHAR CPU op name (aten::empty, ...); NULL outside any op
-- @column runs            BIGINT  count: distinct runs of the op (start times) with memory events
-- @column allocations     BIGINT  count: events with bytes > 0
-- @column allocated_bytes BIGINT  bytes: sum of the allocations
-- @column frees           BIGINT  count: events with bytes < 0
-- @column freed_bytes     BIGINT  bytes: sum of the frees, as a positive number
-- @column retained_bytes  BIGINT  bytes: allocated_bytes − freed_bytes
SELECT source, device, op,
       COUNT(DISTINCT op_ts) AS runs,
       COUNT(*) FILTER (WHERE bytes > 0) AS allocations,
       COALESCE(SUM(bytes) FILTER (WHERE bytes > 0), 0) AS allocated_bytes,
       COUNT(*) FILTER (WHERE bytes < 0) AS frees,
       COALESCE(-SUM(bytes) FILTER (WHERE bytes < 0), 0) AS freed_bytes,
       SUM(bytes) AS retained_bytes
FROM trace_memory
GROUP BY source, device, op
