-- leak_candidates: blocks never really released: never freed, or ended only by a shadow FREE that fills in a missing release.
--
-- Blocks are keyed by (source, pid, device, pool, ptr). A block is listed when it had a MALLOC
-- and is still held at the end of the data by the single rule of `blocks.fate` (decided at ingest)
-- (docs/formats/memscope.md §5.5); `reason` maps its fate:
--   reason 'no_free'           fate never_freed: no FREE at all, still live at the end (G2 and
--                              older writers leave blocks alive at exit without a FREE);
--   reason 'shadow_fill'       fate exit_fill_in: its only FREE is the tool's shadow fill-in at
--                              exit while collecting (after the last START_TRACE with no
--                              STOP_TRACE after it, or a file without START/STOP rows; also a
--                              shadow FREE no other rule explains, see blocks.fate);
--   reason 'shadow_after_stop' fate exit_while_stopped: its shadow FREE is at the last
--                              STOP_TRACE + 1 ns (the process exited while stopped): a fill-in,
--                              or a free after that stop that the timestamp cannot tell apart.
-- Blocks whose shadow FREE was flushed at a start() (a genuine release during a stop period) or
-- that were closed because their address was allocated again (residual-block fill-in) are
-- released, as are blocks ended by a real FREE or by address reuse.
-- Stock memory (a promoted shadow MALLOC: allocated before collection started) is listed with
-- stock = true but is no leak verdict: `leak_summary` counts it apart.
-- FREEs without MALLOC are never listed.
-- The guide's "allocated in the first 20 % of the timeline" criterion is available as
-- timeline_pct (not applied). ORDER BY alloc_ts for allocation order (the reference's detail order).
-- Stored with the dataset when it is built (one of the questions asked most, a few hundred rows
-- whose plan and file opening cost several times their run).
-- @stored
-- @column source         VARCHAR input file
-- @column pid            BIGINT  process id
-- @column device         VARCHAR Device Id as written
-- @column pool           VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column ptr            UBIGINT block address
-- @column address        VARCHAR block address as 0x + 16 hex digits, as msMemScope writes Ptr
-- @column size           BIGINT  bytes: block size
-- @column owner          VARCHAR full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group    VARCHAR level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column allocation_id  BIGINT  the tool's allocation_id of the block (G2+), NULL when absent
-- @column alloc_ts       BIGINT  ns: MALLOC time, ns since the Unix epoch (stock: the start() that promoted it)
-- @column timeline_pct   DOUBLE  percent: position of alloc_ts in the source's time range, percent (0 = first row, 100 = last row)
-- @column shadow_frees   BIGINT  count: number of shadow FREEs of the block (0 or 1)
-- @column last_shadow_ts BIGINT  ns: time of the shadow FREE, ns since the Unix epoch; NULL when none
-- @column reason         VARCHAR no_free, shadow_fill or shadow_after_stop (see above)
-- @column stock          BOOLEAN true for stock memory (allocated before collection started): not a leak verdict
-- @column stack_top      VARCHAR innermost frame of the MALLOC's Python stack; NULL when there is no stack
WITH
-- The time range of each source, for timeline_pct (table event_counts: each group's range of
-- events, counted at ingest; the same as MIN/MAX over events, without reading them).
source_range AS (
    SELECT source, MIN(first_ts) AS first_ts, MAX(last_ts) AS last_ts
    FROM event_counts
    GROUP BY source
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
       CASE c.fate WHEN 'never_freed' THEN 'no_free'
                   WHEN 'exit_while_stopped' THEN 'shadow_after_stop'
                   ELSE 'shadow_fill'
       END AS reason,
       c.stock,
       stack_frame(c.stack_py, 1) AS stack_top
FROM source_range r
JOIN blocks c ON r.source = c.source
WHERE c.held_at_end AND c.alloc_ts IS NOT NULL
