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
-- A block still held at the end by view `block_fates` (a shadow FREE that only fills in a
-- release the tool never saw: exit_fill_in or exit_while_stopped) ends nothing, so the curve
-- ends at the memory still held; every other block ends at its `block_fates.end_row`.
-- A FREE whose block had no MALLOC (allocated before collection) changes nothing.
-- A G1 HAL FREE row written with Device Id N/A is placed in the series of the block it ends.
--
-- Rows come in no particular order: ORDER BY source, pid, device, pool, ts, row_idx walks each
-- series in time. The reference `--curve` lists every row with a `used` key, all pools,
-- processes and devices in one mixed series; see docs/reference-differences.md.
--
-- @column source       VARCHAR input file
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id as written (0..31, cpu, host); for a FREE, the device of its block
-- @column pool         VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column ts           BIGINT  ns: time of the row, ns since the Unix epoch
-- @column ts_raw       BIGINT  time of the row as written in the file (µs for G1 sources, see sources.ts_unit)
-- @column row_idx      UBIGINT 0-based position of the row in its file
-- @column id           BIGINT  the tool's event ID of the row
-- @column event        VARCHAR MALLOC or FREE
-- @column size         BIGINT  bytes: Attr size of the row as written (negative on G1 FREE rows)
-- @column used         BIGINT  bytes: pool live bytes after the event, as written (HOST_PINNED: process VmRSS); NULL when absent
-- @column total        BIGINT  bytes: pool reservation after the event, as written; NULL when absent
-- @column process_used BIGINT  bytes: process driver memory after the event, as written; NULL when absent
-- @column device_used  BIGINT  bytes: whole-device used memory after the event, as written (-1 = unsupported); NULL when absent
-- @column live_bytes   BIGINT  bytes: live bytes of the series after this row, from paired blocks (memq)
WITH
-- Change of live bytes caused by each row: +size at the MALLOC, -size where the block ends
-- (block_fates.end_row: the FREE, or the MALLOC that reused the address); a FREE without MALLOC
-- or a fill-in of a block held at the end changes nothing but tells which series its row
-- belongs to.
block_deltas AS (
    SELECT source, pid, device, pool,
           CASE WHEN change.kind = 'alloc' THEN alloc_row ELSE COALESCE(end_row, free_row) END AS row_idx,
           CASE WHEN change.kind = 'alloc' THEN COALESCE(size, 0)
                WHEN alloc_ts IS NULL OR held_at_end THEN 0
                ELSE -COALESCE(size, 0)
           END AS delta
    FROM block_fates
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
