-- prof_live_at_peak: the operator allocations live at each component's allocated peak.
--
-- For each component peak of `allocated` (prof_component_peaks), every row of
-- prof_operator_memory on the same device with alloc_ts <= peak_ts < release_ts (a NULL
-- release_ts = never released, so live to the end). Operator rows name no component: aten::
-- rows are torch_npu's (PTA), cann:: rows with an empty stream the graph engine's (GE); all are
-- listed for every component, with `stream` to tell them apart. Sum `size` per component for
-- the live bytes. ORDER BY component, alloc_ts, line.
--
-- @column device     VARCHAR Device Type as written
-- @column component  VARCHAR the component whose peak this is
-- @column peak_ts    BIGINT  ns: time of the component's allocated peak
-- @column peak_bytes BIGINT  bytes: the component's allocated peak
-- @column name       VARCHAR operator of the live allocation
-- @column size       BIGINT  bytes: size of the allocation
-- @column alloc_ts   BIGINT  ns: when it was allocated
-- @column release_ts BIGINT  ns: when it was released; NULL = never in the profiled window
-- @column stream     VARCHAR Stream Ptr as written; NULL for graph-engine (cann::) rows
-- @column source     VARCHAR operator_memory.csv the allocation comes from
-- @column line       BIGINT  line of the allocation in its file
SELECT p.device, p.component, p.peak_ts, p.peak_bytes,
       o.name, o.size, o.alloc_ts, o.release_ts, o.stream, o.source, CAST(o.line AS BIGINT) AS line
FROM prof_component_peaks p
JOIN prof_operator_memory o
  ON o.device = p.device
 AND o.alloc_ts <= p.peak_ts
 AND (o.release_ts IS NULL OR o.release_ts > p.peak_ts)
WHERE p.metric = 'allocated'
