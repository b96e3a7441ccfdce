-- capabilities: which analyses the data of each dump supports, with the counts behind each answer.
--
-- One row per msMemScope dump (source). Read it before choosing an analysis:
--   has_owners        owners on MALLOC rows  -> decomposition by owner (breakdown_at, owner_peaks)
--   has_py_stacks     Python stacks           -> code attribution (leak_summary.stack_top)
--   has_alloc_free    MALLOC and FREE rows    -> block pairing (curve.live_bytes, leak_candidates)
--                     can be paired (pairing = 'paired': both kinds of rows, or config.json
--                     says both were dumped); false for a MALLOC-only or FREE-only stream
--                     (`--events=alloc` / `--events=free`): leaks and live bytes cannot be
--                     concluded, and the leak and live-peak analyses list nothing for it
--   has_pool_counters used/total on rows      -> counter curves and peaks, fragmentation
--   has_device_used   device_used >= 0 rows   -> whole-device curve
--   has_shadow        shadow rows (G3)        -> leaks are judged by shadow fill-ins, not missing FREEs
--   has_stop_periods  STOP_TRACE rows         -> shadow FREEs may be genuine frees of stop periods
--   has_snapshots     SNAPSHOT rows           -> OOM quantification (remaining device memory)
--   has_oom           OOM_DETAIL rows         -> OOM diagnosis
--   has_steps         steps (table steps: SYSTEM STEP rows, else step-named MSTX ranges or
--                     step marks)             -> per-step growth
-- Each boolean is "count > 0" of the matching count column (has_steps: of steps; has_alloc_free:
-- pairing = 'paired', view pairing).
--
-- @column source            VARCHAR input file
-- @column generation        VARCHAR format generation guessed at ingest: G1, G2, G3
-- @column ts_unit           VARCHAR timestamp unit as written in the file: ns or us
-- @column rows              BIGINT  count: rows ingested
-- @column processes         BIGINT  count: distinct process ids
-- @column devices           BIGINT  count: distinct Device Ids other than N/A
-- @column pools             BIGINT  count: distinct pools (Event Type of MALLOC/FREE rows)
-- @column malloc_rows       BIGINT  count: MALLOC rows
-- @column free_rows         BIGINT  count: FREE rows
-- @column has_alloc_free    BOOLEAN MALLOC and FREE rows can be paired into block lifetimes (pairing = 'paired')
-- @column pairing           VARCHAR paired, malloc_only (MALLOC rows and no FREE row), free_only or none (no memory row): view pairing
-- @column dump_event_type   BIGINT  dumpEventType of the capture's config.json (bit 0 alloc, bit 1 free, bit 2 launch, bit 3 access); NULL without one
-- @column owner_rows        BIGINT  count: MALLOC rows with a non-empty owner
-- @column has_owners        BOOLEAN owner_rows > 0
-- @column py_stack_rows     BIGINT  count: rows with a non-empty Python call stack
-- @column has_py_stacks     BOOLEAN py_stack_rows > 0
-- @column c_stack_rows      BIGINT  count: rows with a non-empty C call stack
-- @column has_c_stacks      BOOLEAN c_stack_rows > 0
-- @column counter_rows      BIGINT  count: MALLOC/FREE rows carrying used or total
-- @column has_pool_counters BOOLEAN counter_rows > 0
-- @column device_used_rows  BIGINT  count: rows with device_used >= 0
-- @column has_device_used   BOOLEAN device_used_rows > 0
-- @column shadow_rows       BIGINT  count: rows with shadow:true
-- @column has_shadow        BOOLEAN shadow_rows > 0
-- @column stock_blocks      BIGINT  count: blocks whose MALLOC is a promoted shadow row (allocated before collection)
-- @column start_trace_rows  BIGINT  count: SYSTEM START_TRACE rows
-- @column stop_trace_rows   BIGINT  count: SYSTEM STOP_TRACE rows
-- @column has_stop_periods  BOOLEAN stop_trace_rows > 0
-- @column snapshot_rows     BIGINT  count: SNAPSHOT rows
-- @column has_snapshots     BOOLEAN snapshot_rows > 0
-- @column oom_rows          BIGINT  count: OOM_DETAIL rows
-- @column has_oom           BOOLEAN oom_rows > 0
-- @column step_rows         BIGINT  count: SYSTEM STEP rows
-- @column steps             BIGINT  count: distinct step numbers in table steps (from SYSTEM STEP rows, else step-named MSTX ranges, else step marks)
-- @column complete_steps    BIGINT  count: distinct numbers of complete steps (closed by the next step or their end marker); growth per step needs two
-- @column has_steps         BOOLEAN steps > 0
-- @column access_rows       BIGINT  count: ACCESS rows
-- @column unmatched_frees   BIGINT  count: FREE rows without a MALLOC (blocks allocated before collection)
-- @column never_freed       BIGINT  count: blocks without any FREE (still live at the end)
-- @column clean_up_rows     BIGINT  count: CLEAN_UP rows (RESIDUAL_BLOCK, PROC_EXIT): the tool's clean-up reasons; no known writer emits them as rows, its shadow FREE rows carry their effect
WITH
-- the rows counted at ingest (table event_counts), summed per source
per_source AS (
    SELECT source,
           SUM(rows) AS rows,
           COUNT(DISTINCT pid) AS processes,
           COUNT(DISTINCT NULLIF(device, 'N/A')) AS devices,
           COUNT(DISTINCT CASE WHEN event IN ('MALLOC', 'FREE') THEN event_type END) AS pools,
           SUM(CASE WHEN event = 'MALLOC' THEN rows ELSE 0 END) AS malloc_rows,
           SUM(CASE WHEN event = 'FREE' THEN rows ELSE 0 END) AS free_rows,
           SUM(CASE WHEN event = 'MALLOC' THEN owner_rows ELSE 0 END) AS owner_rows,
           SUM(py_stack_rows) AS py_stack_rows,
           SUM(c_stack_rows) AS c_stack_rows,
           SUM(CASE WHEN event IN ('MALLOC', 'FREE') THEN counter_rows ELSE 0 END) AS counter_rows,
           SUM(device_used_rows) AS device_used_rows,
           SUM(shadow_rows) AS shadow_rows,
           SUM(CASE WHEN event = 'SYSTEM' AND event_type = 'START_TRACE' THEN rows ELSE 0 END) AS start_trace_rows,
           SUM(CASE WHEN event = 'SYSTEM' AND event_type = 'STOP_TRACE' THEN rows ELSE 0 END) AS stop_trace_rows,
           SUM(CASE WHEN event = 'SNAPSHOT' THEN rows ELSE 0 END) AS snapshot_rows,
           SUM(CASE WHEN event = 'OOM_DETAIL' THEN rows ELSE 0 END) AS oom_rows,
           SUM(CASE WHEN event = 'SYSTEM' AND event_type = 'STEP' THEN rows ELSE 0 END) AS step_rows,
           SUM(CASE WHEN event = 'ACCESS' THEN rows ELSE 0 END) AS access_rows,
           SUM(CASE WHEN event = 'CLEAN_UP' THEN rows ELSE 0 END) AS clean_up_rows
    FROM event_counts
    GROUP BY source
),
block_counts AS (
    SELECT source,
           COUNT(CASE WHEN stock THEN 1 END) AS stock_blocks,
           COUNT(CASE WHEN alloc_ts IS NULL THEN 1 END) AS unmatched_frees,
           COUNT(CASE WHEN free_kind = 'none' THEN 1 END) AS never_freed
    FROM blocks
    GROUP BY source
)
SELECT s.source, s.generation, s.ts_unit,
       COALESCE(e.rows, 0) AS rows,
       COALESCE(e.processes, 0) AS processes,
       COALESCE(e.devices, 0) AS devices,
       COALESCE(e.pools, 0) AS pools,
       COALESCE(e.malloc_rows, 0) AS malloc_rows,
       COALESCE(e.free_rows, 0) AS free_rows,
       COALESCE(pr.can_pair, false) AS has_alloc_free,
       COALESCE(pr.pairing, 'none') AS pairing,
       pr.dump_event_type,
       COALESCE(e.owner_rows, 0) AS owner_rows,
       COALESCE(e.owner_rows > 0, false) AS has_owners,
       COALESCE(e.py_stack_rows, 0) AS py_stack_rows,
       COALESCE(e.py_stack_rows > 0, false) AS has_py_stacks,
       COALESCE(e.c_stack_rows, 0) AS c_stack_rows,
       COALESCE(e.c_stack_rows > 0, false) AS has_c_stacks,
       COALESCE(e.counter_rows, 0) AS counter_rows,
       COALESCE(e.counter_rows > 0, false) AS has_pool_counters,
       COALESCE(e.device_used_rows, 0) AS device_used_rows,
       COALESCE(e.device_used_rows > 0, false) AS has_device_used,
       COALESCE(e.shadow_rows, 0) AS shadow_rows,
       COALESCE(e.shadow_rows > 0, false) AS has_shadow,
       COALESCE(b.stock_blocks, 0) AS stock_blocks,
       COALESCE(e.start_trace_rows, 0) AS start_trace_rows,
       COALESCE(e.stop_trace_rows, 0) AS stop_trace_rows,
       COALESCE(e.stop_trace_rows > 0, false) AS has_stop_periods,
       COALESCE(e.snapshot_rows, 0) AS snapshot_rows,
       COALESCE(e.snapshot_rows > 0, false) AS has_snapshots,
       COALESCE(e.oom_rows, 0) AS oom_rows,
       COALESCE(e.oom_rows > 0, false) AS has_oom,
       COALESCE(e.step_rows, 0) AS step_rows,
       COALESCE(st.steps, 0) AS steps,
       COALESCE(st.complete_steps, 0) AS complete_steps,
       COALESCE(st.steps > 0, false) AS has_steps,
       COALESCE(e.access_rows, 0) AS access_rows,
       COALESCE(b.unmatched_frees, 0) AS unmatched_frees,
       COALESCE(b.never_freed, 0) AS never_freed,
       COALESCE(e.clean_up_rows, 0) AS clean_up_rows
FROM sources s
LEFT JOIN per_source e ON e.source = s.source
LEFT JOIN block_counts b ON b.source = s.source
LEFT JOIN pairing pr ON pr.source = s.source
LEFT JOIN (SELECT source, COUNT(DISTINCT step) AS steps, COUNT(DISTINCT step) FILTER (WHERE complete) AS complete_steps
           FROM steps GROUP BY source) st ON st.source = s.source
WHERE s.kind IN ('memscope_csv', 'memscope_db')
