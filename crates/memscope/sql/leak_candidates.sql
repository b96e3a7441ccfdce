-- leak_candidates: blocks never really released: never freed, or ended only by a shadow FREE that fills in a missing release.
--
-- Blocks are keyed by (source, pid, device, pool, ptr). A block is listed when it had a MALLOC
-- and is still held at the end of the data. Whether a block was released is decided once, at
-- ingest, and kept in the column `blocks.fate` (docs/formats/memscope.md §5.5 explains the
-- rules). msMemScope G3 dumps end every block with a FREE, but some of those FREEs are "shadow"
-- FREEs (Attr shadow:true) that the tool writes itself rather than records: either a release
-- that happened while collection was stopped, or a fill-in that closes a block the program never
-- released. `reason` says why a block is listed:
--   reason 'no_free'           the block has no FREE at all and is still live at the end
--                              (fate never_freed; G2 and older dumps write no FREE for blocks
--                              still allocated when the process exits);
--   reason 'shadow_fill'       the block's only FREE is a fill-in that msMemScope added when the
--                              process exited, for memory that was still allocated then: the
--                              program never released it (fate exit_fill_in). That is a shadow
--                              FREE after the last START_TRACE with no STOP_TRACE after it
--                              (collection was on at exit), or in a file without START/STOP
--                              rows, or any other shadow FREE that no rule below explains;
--   reason 'shadow_after_stop' its shadow FREE is stamped 1 ns after the last STOP_TRACE (fate
--                              exit_while_stopped): the process exited while collection was
--                              stopped, so it is either such an exit fill-in or a real release
--                              after that stop; the timestamp cannot tell them apart.
-- Not listed, because the memory was released: blocks ended by a real FREE; blocks whose
-- address was allocated again (closed by a new MALLOC, with or without the tool's fill-in FREE);
-- blocks whose shadow FREE was written when collection started again (a start() after a stop:
-- the release really happened while collection was stopped).
-- Stock memory (a block allocated before collection started, which msMemScope writes as a
-- shadow MALLOC at the start) is listed with stock = true but is no leak verdict: `leak_summary`
-- counts it apart.
-- FREEs without a MALLOC are never listed.
-- A dump whose memory rows cannot be paired (view pairing: MALLOC rows only, or FREE rows only,
-- as msMemScope writes with `--events=alloc` or `--events=free` since July 2026) lists nothing:
-- without its FREE rows every block would look never freed. That is no verdict: capabilities
-- says pairing = 'malloc_only' / 'free_only' and has_alloc_free = false for it (cannot conclude).
-- The leak guide that comes with the msMemScope Python analysis scripts (the "memory-analysis"
-- skill of the mindstudio-agent package) also asks for "allocated in the first 20 % of the
-- timeline": that position is given as timeline_pct, not applied. ORDER BY alloc_ts for
-- allocation order (the order in which those scripts' aggregate_dump.py lists its candidates).
-- Stored with the dataset when it is built (one of the questions asked most, a few hundred rows
-- whose plan and file opening cost several times their run).
-- @stored
-- @column source         VARCHAR input file
-- @column pid            BIGINT  process id
-- @column device         VARCHAR Device Id as written
-- @column pool           VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column ptr            UBIGINT pointer: block address
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
JOIN pairing p ON p.source = c.source AND p.can_pair
WHERE c.held_at_end AND c.alloc_ts IS NOT NULL
