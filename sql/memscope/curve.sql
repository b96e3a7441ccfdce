-- curve: memory over time, per pool: one point per MALLOC/FREE row with the pool's counters and memq's live bytes.
--
-- A series is one pool of one process on one device: (source, pid, device, pool). Series are
-- never mixed: PTA and HAL (nested views of the same memory), two processes, two devices and
-- HOST_PINNED (whose `used` is the process VmRSS) each get their own series.
--
-- The counters are the values the tool wrote on the row, i.e. the state AFTER the event; they
-- are NULL when the row carries none (HAL rows of every known writer carry none).
-- live_bytes is computed by memq from `blocks`, so it exists for every pool, HAL included: the
-- running sum, in canonical order (ts, then file order), of the sizes of blocks allocated minus
-- the sizes of blocks ended (by a FREE, a shadow FREE, or a MALLOC that reused the address).
-- A shadow FREE that only fills in a release the tool never saw (the block was still held at
-- exit: the rule of `leak_candidates`) ends nothing, so the curve ends at the memory still held.
-- A FREE whose block had no MALLOC (allocated before collection) changes nothing.
-- A G1 HAL FREE row written with Device Id N/A is placed in the series of the block it ends.
--
-- Rows come in no particular order: ORDER BY source, pid, device, pool, ts, row_idx walks each
-- series in time. The reference `--curve` lists every row with a `used` key, all pools,
-- processes and devices in one mixed series; see docs/reference-differences.md.
--
-- @column source        input file
-- @column pid           process id
-- @column device        Device Id as written (0..31, cpu, host); for a FREE, the device of its block
-- @column pool          pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column ts            time of the row, ns since the Unix epoch
-- @column ts_raw        time of the row as written in the file (µs for G1 sources, see sources.ts_unit)
-- @column row_idx       0-based position of the row in its file
-- @column id            the tool's event ID of the row
-- @column event         MALLOC or FREE
-- @column size          bytes: Attr size of the row as written (negative on G1 FREE rows)
-- @column used          bytes: pool live bytes after the event, as written (HOST_PINNED: process VmRSS); NULL when absent
-- @column total         bytes: pool reservation after the event, as written; NULL when absent
-- @column process_used  bytes: process driver memory after the event, as written; NULL when absent
-- @column device_used   bytes: whole-device used memory after the event, as written (-1 = unsupported); NULL when absent
-- @column live_bytes    bytes: live bytes of the series after this row, from paired blocks (memq)
WITH
-- Every block with the first row of the next block on the same key (NULL when none follows):
-- a block ended by address reuse ('replaced') ends at that row.
keyed_blocks AS (
    SELECT source, pid, device, pool, COALESCE(size, 0) AS size, alloc_ts, alloc_row,
           free_ts, free_row, free_kind,
           LEAD(COALESCE(alloc_row, free_row)) OVER (
               PARTITION BY source, pid, device, pool, ptr
               ORDER BY COALESCE(alloc_ts, free_ts), COALESCE(alloc_row, free_row)) AS next_block_row
    FROM blocks
),
-- START_TRACE / STOP_TRACE rows: marker m covers the times (previous marker, m] and, when it is
-- the last one, also the times after it.
trace_markers AS (
    SELECT source, pid, ts, event_type,
           LAG(ts) OVER (PARTITION BY source, pid ORDER BY ts) AS previous_ts,
           LEAD(ts) OVER (PARTITION BY source, pid ORDER BY ts) IS NULL AS is_last
    FROM events
    WHERE event = 'SYSTEM' AND event_type IN ('START_TRACE', 'STOP_TRACE') AND ts IS NOT NULL
),
-- A shadow FREE with no later block on its key that was not flushed at a start() (next marker
-- START_TRACE) is a fill-in: the block was still held at exit and its end does not count.
block_ends AS (
    SELECT k.*,
           COALESCE(k.free_kind = 'shadow' AND k.next_block_row IS NULL
                    AND NOT (m.event_type = 'START_TRACE' AND k.free_ts <= m.ts), false) AS held_at_exit
    FROM keyed_blocks k
    LEFT JOIN trace_markers m
           ON m.source = k.source AND (m.pid IS NOT DISTINCT FROM k.pid)
          AND k.free_kind = 'shadow' AND k.next_block_row IS NULL
          AND ((k.free_ts <= m.ts AND (m.previous_ts IS NULL OR m.previous_ts < k.free_ts))
               OR (m.is_last AND k.free_ts > m.ts))
),
-- Change of live bytes caused by each row: +size at the MALLOC, -size where the block ends;
-- a FREE without MALLOC or a fill-in changes nothing but tells which series its row belongs to.
block_deltas AS (
    SELECT source, pid, device, pool,
           CASE WHEN change.kind = 'alloc' THEN alloc_row ELSE COALESCE(free_row, next_block_row) END AS row_idx,
           CASE WHEN change.kind = 'alloc' THEN size
                WHEN alloc_ts IS NULL OR held_at_exit THEN 0
                ELSE -size
           END AS delta
    FROM block_ends
    CROSS JOIN (VALUES ('alloc'), ('end')) AS change(kind)
    WHERE (change.kind = 'alloc' AND alloc_ts IS NOT NULL)
       OR (change.kind = 'end' AND free_ts IS NOT NULL)
),
row_deltas AS (
    SELECT source, row_idx, pid, device, pool, SUM(delta) AS delta
    FROM block_deltas
    WHERE row_idx IS NOT NULL
    GROUP BY source, row_idx, pid, device, pool
),
-- Every MALLOC/FREE row, placed in its series.
memory_rows AS (
    SELECT e.source,
           COALESCE(d.pid, e.pid) AS pid,
           COALESCE(d.device, e.device) AS device,
           COALESCE(d.pool, e.event_type) AS pool,
           e.ts, e.ts_raw, e.row_idx, e.id, e.event, e.size,
           e.used, e.total, e.process_used, e.device_used,
           COALESCE(d.delta, 0) AS delta
    FROM events e
    LEFT JOIN row_deltas d ON d.source = e.source AND d.row_idx = e.row_idx
    WHERE e.event IN ('MALLOC', 'FREE')
)
SELECT source, pid, device, pool, ts, ts_raw, row_idx, id, event, size,
       used, total, process_used, device_used,
       SUM(delta) OVER (PARTITION BY source, pid, device, pool
                        ORDER BY ts, row_idx
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live_bytes
FROM memory_rows
