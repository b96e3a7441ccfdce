-- stats: what the data holds: rows per source, process, device, event and event type, with time range and attribute counts.
--
-- One row per (source, pid, device, event, event_type). The reference `--stats` figures of a file
-- are sums over its rows: total rows = SUM(rows); per Event / Event Type = SUM(rows) grouped by
-- event / event_type; MALLOC rows with an owner = SUM(owner_rows) of event 'MALLOC'; shadow FREE
-- rows = SUM(shadow_rows) of event 'FREE'; rows with a Python stack on MALLOC and OOM_DETAIL =
-- SUM(py_stack_rows) of those events; time range = MIN(first_ts_raw) .. MAX(last_ts_raw). The counts are taken at ingest
-- (table event_counts), so this reads a few rows, not the events.
-- Device-less rows (SYSTEM, OOM recent/top) have device 'N/A'. Rows come in no particular order.
--
-- @column source        VARCHAR input file
-- @column pid           BIGINT  process id; NULL for N/A
-- @column device        VARCHAR Device Id as written (0..31, cpu, host, N/A)
-- @column event         VARCHAR base event: MALLOC, FREE, ACCESS, OP_LAUNCH, KERNEL_LAUNCH, SYSTEM, MSTX, SNAPSHOT, OOM_DETAIL
-- @column event_type    VARCHAR sub type or pool (HAL, PTA, ATEN_START, START_TRACE, ...)
-- @column rows          BIGINT  count: number of rows
-- @column share         DOUBLE  percent: percent (0-100) of the rows of the source
-- @column first_ts      BIGINT  ns: earliest timestamp, ns since the Unix epoch
-- @column last_ts       BIGINT  ns: latest timestamp, ns since the Unix epoch
-- @column first_ts_raw  BIGINT  earliest timestamp as written in the file (µs for G1 sources)
-- @column last_ts_raw   BIGINT  latest timestamp as written in the file
-- @column owner_rows    BIGINT  count: rows with a non-empty owner attribute
-- @column shadow_rows   BIGINT  count: rows with shadow:true
-- @column py_stack_rows BIGINT  count: rows with a non-empty Python call stack ('NA' counts as a stack, as in the reference)
-- @column c_stack_rows  BIGINT  count: rows with a non-empty C call stack
-- @column counter_rows  BIGINT  count: rows carrying a pool counter (used or total)
-- @column size_bytes    BIGINT  bytes: sum of the Attr size of the rows (MALLOC: bytes allocated; G1 FREE sizes are negative)
SELECT source, pid, device, event, event_type, rows,
       100.0 * rows / SUM(rows) OVER (PARTITION BY source) AS share,
       first_ts, last_ts, first_ts_raw, last_ts_raw,
       owner_rows, shadow_rows, py_stack_rows, c_stack_rows, counter_rows, size_bytes
FROM event_counts
