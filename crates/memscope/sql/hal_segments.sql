-- hal_segments: large driver (HAL) segments — size, owner, driver call, page type, lifetime — and whether the process uses expandable segments.
--
-- Every HAL MALLOC of at least `min_bytes` (all processes and devices, one row per segment).
-- `free_ts`/`free_kind` come from the block pairing (table `blocks`). `expandable_segments`
-- is the verdict for the segment's process: true when the process made at least one
-- `alloc_type:create` HAL MALLOC that is not a promoted shadow row — promoted stock blocks
-- are written as `create` by the tool whatever the real driver call was, so they prove nothing
-- (docs/formats/memscope.md §3.4). Counts per alloc_type for all segments are in the view
-- hal_segment_summary. Reference sizes: an HCCL communicator buffer ≈ 401 MB (200 MB in +
-- 200 MB out + 1 MB), MC2 +16 MB, AIV +40 MB, PTA large-pool segment 20 MB.
--
-- Rows are ordered by size descending, then time (the reference script's listing order).
-- @param min_bytes BIGINT = 104857600 smallest segment listed, bytes (default 100 MiB)
-- @column source              VARCHAR input file
-- @column pid                 BIGINT  process id
-- @column device              VARCHAR Device Id as written
-- @column ts                  BIGINT  ns: MALLOC time, ns
-- @column ts_raw              BIGINT  the same time as written in the file (µs for G1 sources)
-- @column ptr                 UBIGINT pointer: segment address
-- @column size                BIGINT  segment bytes
-- @column owner               VARCHAR owner of the MALLOC (CANN@HCCL, CANN@APP, ...); NULL when not recorded
-- @column alloc_type          VARCHAR alloc (halMemAlloc, classic segment), create (halMemCreate, physical page of an expandable segment); NULL when not recorded
-- @column page_type           VARCHAR normal, huge or giant; NULL when not recorded
-- @column stock               BOOLEAN the MALLOC is a promoted shadow row: allocated before collection started (its alloc_type/page_type are not reliable)
-- @column free_ts             BIGINT  ns: the row that ended the segment, ns: its FREE (or the MALLOC that reused the address); NULL = no such row
-- @column free_kind           VARCHAR real, shadow (a shadow FREE: a stop-period free or a fill-in at exit/reuse), replaced, none
-- @column end_ts              BIGINT  ns: time the segment stops counting as live (blocks.end_ts), ns; NULL = still held at the end of the data (no FREE, or a shadow FREE that only fills in an exit: docs/formats/memscope.md §5.5)
-- @column lifetime_ns         BIGINT  duration_ns: end_ts - ts; NULL when held at the end
-- @column stack_top           VARCHAR innermost Python frame of the MALLOC; NULL without a Python stack
-- @column expandable_segments BOOLEAN verdict for the process: it made a non-promoted alloc_type:create HAL MALLOC
WITH
-- the HAL MALLOC rows of events (table hal_mallocs: copied out at ingest)
hal_rows AS (
    SELECT source, row_idx, pid, device, ts, ts_raw, ptr, size, owner, alloc_type, page_type,
           shadow AS stock, stack_py
    FROM hal_mallocs
),
-- expandable-segments verdict per process of a file
process_verdict AS (
    SELECT source, pid,
           bool_or(alloc_type = 'create' AND NOT stock) AS expandable_segments
    FROM hal_rows
    GROUP BY source, pid
),
-- HAL blocks, to find where each segment ended
hal_blocks AS (
    SELECT source, alloc_row, free_ts, free_kind, end_ts
    FROM blocks
    WHERE pool = 'HAL' AND alloc_row IS NOT NULL
)
SELECT m.source, m.pid, m.device, m.ts, m.ts_raw, m.ptr, m.size, m.owner, m.alloc_type, m.page_type, m.stock,
       b.free_ts, COALESCE(b.free_kind, 'none') AS free_kind, b.end_ts,
       b.end_ts - m.ts AS lifetime_ns,
       NULLIF(stack_frame(m.stack_py, 1), 'NA') AS stack_top,
       COALESCE(v.expandable_segments, FALSE) AS expandable_segments
FROM hal_rows m
LEFT JOIN hal_blocks b ON b.source = m.source AND b.alloc_row = m.row_idx
LEFT JOIN process_verdict v ON v.source = m.source AND (v.pid IS NOT DISTINCT FROM m.pid)
WHERE m.size >= $min_bytes
ORDER BY size DESC, ts
