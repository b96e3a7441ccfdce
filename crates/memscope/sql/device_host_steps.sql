-- device_host_steps: device and host memory side by side at the end of every step — is the growth on the device or on the host?
--
-- One row per step of each process and device (table steps). Device memory comes from view
-- step_peaks of the step's own device: `hal_end` = the driver-level live bytes (HAL pairing, the
-- superset of every framework pool), `framework_end` = the sum of the framework pools' `used`
-- (PTA, ATB, MINDSPORE, ...). Host memory is the process's HOST / HOST_PINNED series of the same
-- capture (the device_cpu dump of the same output folder: capture(source), pid): its last value
-- at or before the step's end (`used`: for HOST_PINNED the process VmRSS as the tool writes it).
-- The *_growth columns compare with the previous complete step of the same device: growth on
-- the device with a flat host points at device memory, and the reverse at host memory.
--
-- Rows come in no particular order: ORDER BY source, pid, device, start_ts.
-- @column source           VARCHAR input file of the device dump
-- @column pid              BIGINT  process id
-- @column device           VARCHAR Device Id as written
-- @column step             BIGINT  step number (table steps)
-- @column start_ts         BIGINT  ns: step start, ns
-- @column end_ts           BIGINT  ns: step end, ns; NULL for an open step
-- @column hal_end          BIGINT  bytes: HAL live bytes at the end of the step; NULL without HAL rows or for an open step
-- @column framework_end    BIGINT  bytes: sum of the framework pools' used at the end of the step; NULL without framework pools
-- @column host_pool        VARCHAR the host series read (HOST_PINNED or HOST); NULL when the capture has none
-- @column host_end         BIGINT  bytes: host value at or before the end of the step (HOST_PINNED: process VmRSS)
-- @column hal_growth       BIGINT  bytes: hal_end minus that of the previous complete step
-- @column framework_growth BIGINT  bytes: framework_end minus that of the previous complete step
-- @column host_growth      BIGINT  bytes: host_end minus that of the previous complete step
WITH
device_steps AS (
    SELECT source, pid, device, step, MIN(start_ts) AS start_ts, MAX(end_ts) AS end_ts,
           MAX(end_used) FILTER (WHERE pool = 'HAL') AS hal_end,
           SUM(end_used) FILTER (WHERE pool NOT IN ('HAL', 'HOST', 'HOST_PINNED')) AS framework_end
    FROM step_peaks
    WHERE pool NOT IN ('HOST', 'HOST_PINNED')
    GROUP BY source, pid, device, step
),
all_steps AS (
    SELECT s.source, s.pid, s.device, s.step, s.start_ts, s.end_ts, d.hal_end, d.framework_end
    FROM steps s
    LEFT JOIN device_steps d ON d.source = s.source AND (d.pid IS NOT DISTINCT FROM s.pid)
                            AND d.device = s.device AND d.step = s.step AND d.start_ts = s.start_ts
),
host AS (
    SELECT capture(source) AS capture, pid, pool, ts, row_idx, used
    FROM usage_series
    WHERE pool IN ('HOST', 'HOST_PINNED') AND used IS NOT NULL
),
-- the host value in effect at each step end (steps are few, host rows are few)
host_at AS (
    SELECT s.source, s.pid, s.device, s.step, s.start_ts, h.pool AS host_pool,
           last_value(h.used ORDER BY h.ts, h.row_idx) AS host_end
    FROM all_steps s
    JOIN host h ON h.capture = capture(s.source) AND (h.pid IS NOT DISTINCT FROM s.pid)
               AND h.ts <= COALESCE(s.end_ts, s.start_ts)
    GROUP BY s.source, s.pid, s.device, s.step, s.start_ts, h.pool
),
joined AS (
    SELECT a.*, h.host_pool, h.host_end
    FROM all_steps a
    LEFT JOIN host_at h ON h.source = a.source AND (h.pid IS NOT DISTINCT FROM a.pid) AND h.device = a.device
                       AND h.step = a.step AND h.start_ts = a.start_ts
)
SELECT source, pid, device, step, start_ts, end_ts, hal_end, framework_end, host_pool, host_end,
       hal_end - LAG(hal_end) OVER w AS hal_growth,
       framework_end - LAG(framework_end) OVER w AS framework_growth,
       host_end - LAG(host_end) OVER w AS host_growth
FROM joined
WINDOW w AS (PARTITION BY source, pid, device, host_pool ORDER BY CASE WHEN end_ts IS NULL THEN 1 ELSE 0 END, start_ts)
