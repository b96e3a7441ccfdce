-- trace_memory_curve: total allocated and reserved memory of each device over time, one point per [memory] event of a torch.profiler trace.
--
-- From trace_memory: the allocator's totals right after each event, in time order (trace order
-- for events of the same time), with the change and the op running then. In a trace without
-- totals (2021 layout) allocated is the running sum of Bytes and reserved is NULL. ORDER BY
-- source, device, ts, event.
--
-- @column source     VARCHAR trace the event comes from
-- @column device     VARCHAR cpu, cuda:0, npu:1, ...
-- @column ts         BIGINT  ns: moment of the event, ns since the Unix epoch
-- @column event      BIGINT  position of the event in traceEvents (0-based)
-- @column delta      BIGINT  bytes: the event's Bytes (negative: a free)
-- @column allocated  BIGINT  bytes: Total Allocated after the event
-- @column reserved   BIGINT  bytes: Total Reserved after the event; NULL when not written
-- @column op         VARCHAR the innermost CPU op on the event's thread; NULL when none
SELECT source, device, ts, CAST(event AS BIGINT) AS event,
       bytes AS delta,
       total_allocated AS allocated,
       total_reserved AS reserved,
       op
FROM trace_memory
