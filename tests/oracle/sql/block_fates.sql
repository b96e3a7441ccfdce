-- block_fates: how every block of `blocks` ended: really released, or still held at the end (the single rule for shadow FREEs).
--
-- @private: a helper the other analyses build on.
--
-- One row per block of table `blocks` (keyed by source, pid, device, pool, ptr), with its
-- columns plus its fate. Every analysis that needs to know whether a block was still held at
-- the end (leak_candidates, leak_summary, curve, owner_peaks, usage_series and the views built
-- on them) reads it here. The rule follows docs/formats/memscope.md §5.5 ("How to tell them apart"):
--   released            ended by a real FREE;
--   replaced            ended by a MALLOC that reused its address without any FREE (G2 and older);
--   never_freed         no FREE at all: still live at the end (G2 and older write no FREE for
--                       blocks alive at exit);
-- and for a block ended by a shadow FREE, tested in this order:
--   stop_period_free    the first START_TRACE/STOP_TRACE row of its file and process at or after
--                       the shadow FREE is a START_TRACE: rule 3, a genuine free during the stop
--                       period, flushed at that start() (timestamp equal to or just before it);
--   residual_fill_in    another block with a MALLOC follows on the same key: rule 5, the tool
--                       closed the block when its address was allocated again (normally at the
--                       very moment of that MALLOC); the address was released and reused;
--   exit_while_stopped  the last marker before it is a STOP_TRACE and none follows: the process
--                       exited while stopped (timestamp last STOP_TRACE + 1 ns). Ambiguous: a
--                       free after that stop (rule 3) or a block never freed (rule 4); counted
--                       as held, the skill's leak candidate to be confirmed by growth analysis;
--   exit_fill_in        anything else: after the last START_TRACE with no STOP_TRACE after it,
--                       or no START/STOP rows at all (CLI immediate mode): rule 4, the tool's
--                       fill-in at exit for a block never freed. (A shadow FREE that no rule
--                       explains, e.g. inside a collecting period with no following MALLOC,
--                       lands here too: no release was observed.)
-- held_at_end is true for exit_fill_in, exit_while_stopped and never_freed: the memory still
-- counts as live at the end of the data, and end_ts / end_row are NULL. Otherwise the memory
-- stops counting as live at end_ts (= free_ts). Stock memory (a promoted shadow MALLOC) gets a
-- fate like any block; it is flagged by `stock`. Blocks without a MALLOC (alloc_ts NULL) are
-- listed too. Markers are matched per (source, pid) by an as-of computation (running MAX / MIN
-- over the time line of shadow FREEs and markers), with no range join.
--
-- @column source        VARCHAR input file
-- @column pid           BIGINT  process id
-- @column device        VARCHAR Device Id of the MALLOC (of the FREE when there is no MALLOC)
-- @column device_index  INT     device as an integer
-- @column pool          VARCHAR pool = Event Type of the MALLOC (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, N/A)
-- @column ptr           UBIGINT block address
-- @column size          BIGINT  bytes: block size (from the MALLOC, else from the FREE)
-- @column owner         VARCHAR owner of the MALLOC
-- @column allocation_id BIGINT  the tool's allocation_id of the block (G2+), NULL when absent
-- @column alloc_id      BIGINT  ID of the MALLOC row; NULL when the FREE had no MALLOC
-- @column alloc_ts      BIGINT  ns: MALLOC time, ns since the Unix epoch; NULL when the block was allocated before collection
-- @column alloc_row     UBIGINT row_idx of the MALLOC row
-- @column free_id       BIGINT  ID of the FREE row that ended the block
-- @column free_ts       BIGINT  ns: end time as paired, ns: the FREE (real or shadow), or the MALLOC that reused the address; NULL = no FREE
-- @column free_row      UBIGINT row_idx of the FREE row
-- @column free_kind     VARCHAR real, shadow, replaced or none (as in `blocks`)
-- @column stock         BOOLEAN the MALLOC is a promoted shadow row: memory allocated before collection started
-- @column stack_py      VARCHAR Python stack of the MALLOC
-- @column fate          VARCHAR released, stop_period_free, residual_fill_in, replaced, exit_while_stopped, exit_fill_in or never_freed (see above)
-- @column held_at_end   BOOLEAN true when the memory still counts as live at the end of the data (exit_fill_in, exit_while_stopped, never_freed)
-- @column end_ts        BIGINT  ns: time the memory stops counting as live, ns since the Unix epoch (= free_ts); NULL when held_at_end
-- @column end_row       UBIGINT row_idx of the row that ends the block (the FREE, or for replaced the MALLOC that reused the address); NULL when held_at_end
WITH
-- Every block with the MALLOC of the next block on the same key, if any.
keyed AS (
    SELECT b.*,
           LEAD(alloc_ts) OVER (
               PARTITION BY source, pid, device, pool, ptr
               ORDER BY COALESCE(alloc_ts, free_ts), COALESCE(alloc_row, free_row)) AS next_alloc_ts,
           LEAD(alloc_row) OVER (
               PARTITION BY source, pid, device, pool, ptr
               ORDER BY COALESCE(alloc_ts, free_ts), COALESCE(alloc_row, free_row)) AS next_alloc_row
    FROM blocks b
),
-- The shadow FREEs and the START_TRACE / STOP_TRACE rows of each file and process, on one time line.
timeline AS (
    SELECT source, pid, free_ts AS ts, free_row, CAST(NULL AS VARCHAR) AS marker
    FROM blocks
    WHERE free_kind = 'shadow'
    UNION ALL
    SELECT source, pid, ts, CAST(NULL AS BIGINT UNSIGNED), event_type
    FROM events
    WHERE event = 'SYSTEM' AND event_type IN ('START_TRACE', 'STOP_TRACE') AND ts IS NOT NULL
),
-- Each shadow FREE with the type of the last marker strictly before it and of the first marker
-- at or after it (as-of lookups by running MAX / MIN over the time line, both directions; a
-- marker at the same moment as the FREE counts as following it). NULL: no such marker.
shadow_placed AS (
    SELECT source, free_row,
           CASE WHEN last_start_ts IS NULL AND last_stop_ts IS NULL THEN NULL
                WHEN last_stop_ts IS NULL OR last_start_ts > last_stop_ts THEN 'START_TRACE'
                ELSE 'STOP_TRACE' END AS marker_before,
           CASE WHEN next_start_ts IS NULL AND next_stop_ts IS NULL THEN NULL
                WHEN next_stop_ts IS NULL OR next_start_ts <= next_stop_ts THEN 'START_TRACE'
                ELSE 'STOP_TRACE' END AS marker_after
    FROM (
        SELECT source, free_row, marker,
               MAX(CASE WHEN marker = 'START_TRACE' THEN ts END) OVER w_before AS last_start_ts,
               MAX(CASE WHEN marker = 'STOP_TRACE' THEN ts END) OVER w_before AS last_stop_ts,
               MIN(CASE WHEN marker = 'START_TRACE' THEN ts END) OVER w_after AS next_start_ts,
               MIN(CASE WHEN marker = 'STOP_TRACE' THEN ts END) OVER w_after AS next_stop_ts
        FROM timeline
        WINDOW w_before AS (PARTITION BY source, pid ORDER BY ts, marker NULLS FIRST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
               w_after AS (PARTITION BY source, pid ORDER BY ts DESC, marker NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    ) placed
    WHERE marker IS NULL
),
-- The fate of every block.
fated AS (
    SELECT k.*,
           CASE k.free_kind
               WHEN 'real' THEN 'released'
               WHEN 'replaced' THEN 'replaced'
               WHEN 'none' THEN 'never_freed'
               ELSE CASE
                   WHEN p.marker_after = 'START_TRACE' THEN 'stop_period_free'
                   WHEN k.next_alloc_ts IS NOT NULL THEN 'residual_fill_in'
                   WHEN p.marker_before = 'STOP_TRACE' AND p.marker_after IS NULL THEN 'exit_while_stopped'
                   ELSE 'exit_fill_in'
               END
           END AS fate
    FROM keyed k
    LEFT JOIN shadow_placed p
           ON p.source = k.source AND p.free_row = k.free_row AND k.free_kind = 'shadow'
)
SELECT source, pid, device, device_index, pool, ptr, size, owner, allocation_id,
       alloc_id, alloc_ts, alloc_row, free_id, free_ts, free_row, free_kind, stock, stack_py,
       fate,
       fate IN ('exit_fill_in', 'exit_while_stopped', 'never_freed') AS held_at_end,
       CASE WHEN fate IN ('exit_fill_in', 'exit_while_stopped', 'never_freed') THEN NULL
            ELSE free_ts
       END AS end_ts,
       CASE WHEN fate IN ('exit_fill_in', 'exit_while_stopped', 'never_freed') THEN NULL
            WHEN free_kind = 'replaced' THEN COALESCE(free_row, next_alloc_row)
            ELSE free_row
       END AS end_row
FROM fated
