-- peaks: the peak of each memory counter, per pool of each process and device.
--
-- One row per series (source, pid, device, pool) and metric:
--   used, total, process_used, device_used  the highest value the tool wrote on the series' rows
--                                           (only values >= 0 count: device_used = -1 means unsupported);
--   live                                    the highest live bytes memq computes from `blocks`
--                                           (`curve.live_bytes`), for every pool: this is the only
--                                           peak of pools without counters, such as HAL.
-- A metric without any valid point is not listed. can_pair is false on every row of a dump
-- whose MALLOC and FREE rows cannot be paired (view pairing: MALLOC rows only, as msMemScope
-- writes with `--events=alloc` since July 2026, or FREE rows only): its live metric then cannot
-- be concluded (without FREEs live bytes only rise; without MALLOCs they stay 0) and is no peak;
-- its used/total peaks (the tool's own counters) stand. On ties the earliest row wins (time,
-- then file order; rows without a time last).
-- Found at ingest, as the curve is written (table curve_peaks, crates/memscope/src/derive/tiles.rs);
-- tests/oracle/sql/peaks.sql is the same answer as a query over `curve`, and the tests check
-- that both agree. Rows come in no particular order.
-- Pools, processes and devices are never mixed. (The `--peak` of aggregate_dump.py, the
-- msMemScope Python analysis script of the mindstudio-agent package, sums the counters of every
-- pool, device and process together without `--pool`, HOST_PINNED's host memory included.)
--
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column pool        VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column metric      VARCHAR used, total, process_used, device_used (counters written by the tool) or live (memq's pairing)
-- @column peak_bytes  BIGINT  bytes: the highest value of the metric in the series
-- @column peak_ts     BIGINT  ns: time of the first row reaching the peak, ns since the Unix epoch
-- @column peak_ts_raw BIGINT  the same time as written in the file (µs for G1 sources)
-- @column peak_event  VARCHAR MALLOC or FREE: the event of that row
-- @column peak_id     BIGINT  the tool's event ID of that row
-- @column points      BIGINT  count: number of rows with a valid value of the metric in the series
-- @column can_pair    BOOLEAN false when the dump's MALLOC and FREE rows cannot be paired (view pairing): its live metric cannot be concluded
SELECT p.source, p.pid, p.device, p.pool, p.metric, p.peak_bytes, p.peak_ts, p.peak_ts_raw, p.peak_event, p.peak_id, p.points,
       COALESCE(g.can_pair, false) AS can_pair
FROM curve_peaks p
LEFT JOIN pairing g ON g.source = p.source
