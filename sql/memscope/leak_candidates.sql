-- leak_candidates: blocks never really released: never freed, or ended only by a shadow FREE that fills in a missing release.
--
-- Blocks are keyed by (source, pid, device, pool, ptr). A block is listed when it had a MALLOC
-- and no real release:
--   reason 'no_free'     no FREE at all: still live at the end of the data (G2 and older
--                        writers leave blocks alive at exit without a FREE);
--   reason 'shadow_fill' its only FREE is a shadow FREE that is a fill-in (memscope-format.md
--                        §5.5): NOT followed by a later block on the same key (a following
--                        MALLOC means the address was released and reused: a residual-block
--                        fill-in), and NOT flushed at a `start()` (a shadow FREE whose next
--                        START_TRACE/STOP_TRACE row is a START_TRACE is a genuine release
--                        during a stop period). When the last trace marker before it is a
--                        STOP_TRACE the process exited while stopped and the block may also
--                        have been freed after that stop: reason 'shadow_after_stop'.
-- Stock memory (a promoted shadow MALLOC: allocated before collection started) is listed with
-- stock = true but is no leak verdict: `leak_summary` counts it apart.
-- Blocks ended by a real FREE, by address reuse, or FREEs without MALLOC are never listed.
-- The guide's "allocated in the first 20 % of the timeline" criterion is available as
-- timeline_pct (not applied). ORDER BY alloc_ts for allocation order (the reference's detail order).
--
-- @column source          input file
-- @column pid             process id
-- @column device          Device Id as written
-- @column pool            pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column ptr             block address
-- @column address         block address as 0x + 16 hex digits, as msMemScope writes Ptr
-- @column size            bytes: block size
-- @column owner           full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group     level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column allocation_id   the tool's allocation_id of the block (G2+), NULL when absent
-- @column alloc_ts        MALLOC time, ns since the Unix epoch (stock: the start() that promoted it)
-- @column timeline_pct    position of alloc_ts in the source's time range, percent (0 = first row, 100 = last row)
-- @column shadow_frees    number of shadow FREEs of the block (0 or 1)
-- @column last_shadow_ts  time of the shadow FREE, ns since the Unix epoch; NULL when none
-- @column reason          no_free, shadow_fill or shadow_after_stop (see above)
-- @column stock           true for stock memory (allocated before collection started): not a leak verdict
-- @column stack_top       innermost frame of the MALLOC's Python stack; NULL when there is no stack
WITH
-- Blocks that had a MALLOC and that no real FREE and no address reuse ended, each knowing
-- whether another block follows on the same key (the address was released and used again).
unreleased AS (
    SELECT *
    FROM (
        SELECT b.*,
               LEAD(COALESCE(alloc_row, free_row)) OVER (
                   PARTITION BY source, pid, device, pool, ptr
                   ORDER BY COALESCE(alloc_ts, free_ts), COALESCE(alloc_row, free_row)) AS next_block_row
        FROM blocks b
    ) keyed
    WHERE alloc_ts IS NOT NULL
      AND (free_kind = 'none' OR (free_kind = 'shadow' AND next_block_row IS NULL))
),
-- START_TRACE / STOP_TRACE rows of each file and process, each with the marker before it and
-- whether it is the last one: marker m covers the times (previous marker, m] and, when it is
-- the last marker, also (m, end of data].
trace_markers AS (
    SELECT source, pid, ts, event_type,
           LAG(ts) OVER (PARTITION BY source, pid ORDER BY ts) AS previous_ts,
           LAG(event_type) OVER (PARTITION BY source, pid ORDER BY ts) AS previous_type,
           LEAD(ts) OVER (PARTITION BY source, pid ORDER BY ts) IS NULL AS is_last
    FROM events
    WHERE event = 'SYSTEM' AND event_type IN ('START_TRACE', 'STOP_TRACE') AND ts IS NOT NULL
),
-- The time range of each source, for timeline_pct.
source_range AS (
    SELECT source, MIN(ts) AS first_ts, MAX(ts) AS last_ts
    FROM events
    GROUP BY source
),
-- Each unreleased block with the markers around its shadow FREE: the first marker at or after
-- it (next_marker) and the last one before it (previous_marker).
with_markers AS (
    SELECT u.*,
           CASE WHEN u.free_ts <= m.ts THEN m.event_type END AS next_marker,
           CASE WHEN u.free_ts <= m.ts THEN m.previous_type ELSE m.event_type END AS previous_marker
    FROM unreleased u
    LEFT JOIN trace_markers m
           ON m.source = u.source AND (m.pid IS NOT DISTINCT FROM u.pid) AND u.free_kind = 'shadow'
          AND ((u.free_ts <= m.ts AND (m.previous_ts IS NULL OR m.previous_ts < u.free_ts))
               OR (m.is_last AND u.free_ts > m.ts))
)
SELECT c.source, c.pid, c.device, c.pool, c.ptr,
       hex(c.ptr) AS address,
       c.size,
       COALESCE(NULLIF(c.owner, ''), CASE WHEN c.stock THEN '(stock)' ELSE c.pool END) AS owner,
       owner_group(COALESCE(NULLIF(c.owner, ''), CASE WHEN c.stock THEN '(stock)' ELSE c.pool END)) AS owner_group,
       c.allocation_id,
       c.alloc_ts,
       CASE WHEN r.last_ts > r.first_ts
            THEN 100.0 * (c.alloc_ts - r.first_ts) / (r.last_ts - r.first_ts)
            ELSE 0.0
       END AS timeline_pct,
       CASE WHEN c.free_kind = 'shadow' THEN 1 ELSE 0 END AS shadow_frees,
       CASE WHEN c.free_kind = 'shadow' THEN c.free_ts END AS last_shadow_ts,
       CASE WHEN c.free_kind = 'none' THEN 'no_free'
            WHEN c.previous_marker = 'STOP_TRACE' THEN 'shadow_after_stop'
            ELSE 'shadow_fill'
       END AS reason,
       c.stock,
       stack_frame(c.stack_py, 1) AS stack_top
FROM with_markers c
JOIN source_range r ON r.source = c.source
-- a shadow FREE flushed at a start() is a genuine release during a stop period
WHERE c.next_marker IS DISTINCT FROM 'START_TRACE'
