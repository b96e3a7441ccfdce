-- pairing: whether the MALLOC and FREE rows of each dump can be paired into block lifetimes, or the stream is one-sided.
--
-- @private: a helper the other analyses build on.
-- @stored
--
-- Since msMemScope's change "取消联动事件落盘，由events参数精确控制" (July 2026, Ascend/msmemscope
-- commit 69fbe9c: csrc/analysis/dump.cpp Dump::ShouldDumpEvent) the `--events` option decides
-- exactly which memory rows are written: `--events=alloc` writes MALLOC rows and no FREE row
-- (not even the tool's shadow fill-ins), `--events=free` FREE rows and no MALLOC row. Before
-- it, collecting alloc also wrote free. A one-sided dump cannot tell a block that was released
-- from one that was not: pairing would call every block of a MALLOC-only dump "never freed"
-- (a false leak, and live bytes that only rise), and a FREE-only dump has no block with a known
-- start. docs/formats/memscope.md §5.4.
-- pairing, per dump (source):
--   paired       MALLOC and FREE rows are both there, or the capture's config.json says both
--                were dumped (dumpEventType bits 0 and 1) and the dump has memory rows;
--   malloc_only  MALLOC rows and no FREE row (config.json, when present, does not say both
--                were dumped): leaks and live bytes cannot be concluded;
--   free_only    FREE rows and no MALLOC row: likewise;
--   none         no memory row at all.
-- can_pair is pairing = 'paired'. The leak analyses (leak_candidates, leak_summary, step_leaks,
-- rank_leaks) list nothing for a dump that cannot pair, and the analyses of paired live bytes
-- (peak_blocks, peak_split, breakdown_at, breakdown_tree_at, window_summary, the owner and block
-- rows of mem_state_at, the HAL rows of usage_series and so trend's) leave it out; peaks and
-- owner_peaks keep its rows with can_pair = false; capabilities shows pairing and
-- has_alloc_free per dump. The counters the tool writes on pool rows (used, total) do not
-- depend on pairing and stay.
-- Stored at ingest: trend, usage_series, window_summary, breakdown_at and the leak analyses
-- read it in every call (planned per query it cost 14 ms of each).
-- The config.json of a dump is the one of its msMemScope project folder: the config.json whose
-- folder is the longest prefix of the dump's path (`<project>/device_N/dump/…`).
--
-- @column source          VARCHAR input file (a memscope CSV or db dump with rows; a dump without rows has none: capabilities says none)
-- @column malloc_rows     BIGINT  count: MALLOC rows
-- @column free_rows       BIGINT  count: FREE rows
-- @column dump_event_type BIGINT  dumpEventType of the capture's config.json (bit 0 alloc, bit 1 free, bit 2 launch, bit 3 access); NULL without one
-- @column pairing         VARCHAR paired, malloc_only, free_only or none (see above)
-- @column can_pair        BOOLEAN pairing = 'paired': MALLOC and FREE rows can be paired into block lifetimes
WITH
counts AS (
    SELECT source,
           SUM(CASE WHEN event = 'MALLOC' THEN rows ELSE 0 END) AS malloc_rows,
           SUM(CASE WHEN event = 'FREE' THEN rows ELSE 0 END) AS free_rows
    FROM event_counts
    GROUP BY source
),
configs AS (
    SELECT substr(source, 1, length(source) - length('config.json')) AS dir,
           try_cast(value AS BIGINT) AS dump_event_type
    FROM config
    WHERE key = 'dumpEventType' AND source LIKE '%config.json'
),
-- every dump with rows (table sources is not read: a dataset without dumps, a snapshot-only
-- one, then reads no table with rows here and the stored views built on this are skipped)
dumps AS (
    SELECT source, malloc_rows, free_rows
    FROM counts
),
dump_config AS (
    SELECT d.source, first_value(g.dump_event_type ORDER BY length(g.dir) DESC) AS dump_event_type
    FROM dumps d
    JOIN configs g ON starts_with(d.source, g.dir)
    GROUP BY d.source
),
judged AS (
    SELECT d.source, d.malloc_rows, d.free_rows, c.dump_event_type,
           CASE WHEN d.malloc_rows > 0 AND d.free_rows > 0 THEN 'paired'
                WHEN d.malloc_rows + d.free_rows > 0 AND COALESCE(c.dump_event_type & 3 = 3, false) THEN 'paired'
                WHEN d.malloc_rows > 0 THEN 'malloc_only'
                WHEN d.free_rows > 0 THEN 'free_only'
                ELSE 'none'
           END AS pairing
    FROM dumps d
    LEFT JOIN dump_config c ON c.source = d.source
)
SELECT source, malloc_rows, free_rows, dump_event_type, pairing, pairing = 'paired' AS can_pair
FROM judged
