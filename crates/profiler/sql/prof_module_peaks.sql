-- prof_module_peaks: the peak of the memory each CANN component reserved, with its time.
--
-- From prof_module_mem (Ascend PyTorch Profiler, npu_module_mem.csv): one row per (source,
-- device, component). The peak is the highest `reserved`; its time is that of the first row
-- reaching it in time order (file order for rows of the same time). Rows where the profiler
-- wrote -1 KB (NULL: only frees were seen) are left out; a component with only such rows is not
-- listed. ORDER BY peak_bytes DESC, component.
--
-- @column source     VARCHAR npu_module_mem.csv the rows come from
-- @column device     VARCHAR Device as written (NPU:0)
-- @column component  VARCHAR CANN component: APP, HCCL, RUNTIME, SLOG, …
-- @column peak_bytes BIGINT  bytes: the highest reserved value
-- @column peak_ts    BIGINT  ns: time of the first row reaching the peak, ns since the Unix epoch
-- @column peak_line  BIGINT  line of that row in its file
-- @column last_bytes BIGINT  bytes: the reserved value of the component's last row in time order
-- @column first_ts   BIGINT  ns: time of the component's first row
-- @column last_ts    BIGINT  ns: time of its last row
-- @column points     BIGINT  count: rows with a reserved value
SELECT source, device, component,
       MAX(reserved) AS peak_bytes,
       FIRST_VALUE(ts ORDER BY reserved DESC, ts, line) AS peak_ts,
       FIRST_VALUE(CAST(line AS BIGINT) ORDER BY reserved DESC, ts, line) AS peak_line,
       FIRST_VALUE(reserved ORDER BY ts DESC, line DESC) AS last_bytes,
       MIN(ts) AS first_ts,
       MAX(ts) AS last_ts,
       COUNT(*) AS points
FROM prof_module_mem
WHERE reserved IS NOT NULL
GROUP BY source, device, component
