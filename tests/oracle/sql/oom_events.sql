-- oom_events: what each OOM record says — the failed request, the RECENT and TOP live allocations the tool listed, and the SNAPSHOT taken before the trigger.
--
-- One row per OOM_DETAIL record (table `oom`). RECENT/TOP rows are device-less and the tool
-- copies them into every device file of the process; each is listed once (copies are equal
-- in capture, pid, ID, kind, time and Attr). Each RECENT/TOP row belongs to the trigger that
-- precedes it in the process's event order (ID), and takes the trigger's device.
-- A process is (capture(source), pid): the device files of one msMemScope output folder share
-- it, files of other captures never do — containers reuse pids, so two ranks may both be pid 1
-- (docs/formats/memscope.md §5.9).
-- The snapshot of a trigger is the latest SNAPSHOT of the same process and device that
-- precedes the trigger in event order (ID) — normally the automatic `OOM_Snapshot`, which the
-- tool takes right before recording the trigger but timestamps after the failed call, so
-- "latest snapshot before the trigger time" would miss it. Both SNAPSHOT key spellings (writer
-- free/total, docs free_mem/total_mem) are read (table mem_snapshots).
-- RECENT/TOP records carry no owner; it is recovered from the block with the same process,
-- pool, address and allocation time (table `blocks`).
-- Differences from the reference `--oom`: both snapshot spellings, snapshot per trigger by event
-- order instead of file order, RECENT listed newest first as written (docs/reference-differences.md).
--
-- Rows come in no particular order: ORDER BY oom_ts, kind, nth.
-- @column source          VARCHAR input file of the trigger (of the first copy for a RECENT/TOP row without trigger)
-- @column pid             BIGINT  process id
-- @column device          VARCHAR Device Id of the trigger (the device that ran out of memory)
-- @column trigger_id      BIGINT  ID of the trigger row this record belongs to; NULL for RECENT/TOP rows without a trigger
-- @column oom_ts          BIGINT  ns: time of the failed request (trigger), ns
-- @column kind            VARCHAR trigger, recent or top
-- @column nth             UBIGINT 1-based position within its kind for this trigger, in written order (recent: 1 = newest; top: 1 = largest)
-- @column id              BIGINT  ID of the record
-- @column ts              BIGINT  ns: time the record was written, ns
-- @column func            VARCHAR trigger: driver call that failed (halMemAlloc, halMemCreate)
-- @column req_size        BIGINT  trigger: requested bytes
-- @column flag            UBIGINT trigger: driver flag word
-- @column ret             BIGINT  trigger: driver return code (short-lived writers only)
-- @column pool            VARCHAR recent/top: pool of the live block (PTA, PTA_WORKSPACE, ATB, MINDSPORE, HAL, UNKNOWN)
-- @column ptr             UBIGINT recent/top: block address
-- @column size            BIGINT  recent/top: block bytes
-- @column alloc_ts        BIGINT  ns: recent/top: allocation time of the block, ns
-- @column owner           VARCHAR recent/top: owner of the matching MALLOC; NULL when unknown
-- @column owner_group     VARCHAR recent/top: level-1 group of that owner ('(unlabelled)' without one)
-- @column stack_top       VARCHAR innermost Python frame of the record (C frame when there is no Python stack); NULL without stacks
-- @column snapshot_ts     BIGINT  ns: time of the snapshot before the trigger, ns; NULL when there is none
-- @column snapshot_name   VARCHAR its name (OOM_Snapshot, Memory Snapshot, user names)
-- @column free_mem        BIGINT  bytes: free on the device at that snapshot (R of the OOM guide)
-- @column total_mem       BIGINT  bytes: of device memory at that snapshot
-- @column reserved_bytes  BIGINT  bytes: reserved by torch at that snapshot
-- @column allocated_bytes BIGINT  bytes: allocated by torch at that snapshot
-- @column req_pct_of_free DOUBLE  percent: trigger: percent, req_size / free_mem × 100 (NULL when free_mem is unknown or 0)
-- @column stack_py        VARCHAR full Python call stack of the record
-- @column stack_c         VARCHAR full C call stack of the record
WITH
-- every record once: RECENT/TOP rows are copied into each device file of the process
records AS (
    SELECT *
    FROM (
        SELECT o.*,
               ROW_NUMBER() OVER (PARTITION BY o.capture, o.pid, o.id, o.kind, o.ts, o.attr ORDER BY o.source, o.row_idx) AS copy
        FROM (SELECT *, capture(source) AS capture FROM oom) o
    ) c
    WHERE copy = 1
),
-- each record with the trigger that precedes it in the process's event order
with_trigger AS (
    SELECT r.*,
           MAX(CASE WHEN r.kind = 'trigger' THEN r.id END)
               OVER (PARTITION BY r.capture, r.pid ORDER BY r.id, CASE WHEN r.kind = 'trigger' THEN 0 ELSE 1 END
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS trigger_id
    FROM records r
),
triggers AS (
    SELECT source, capture, pid, device, id, ts FROM records WHERE kind = 'trigger'
),
-- snapshots once per (pid, device, ID)
snapshots AS (
    SELECT *
    FROM (
        SELECT s.*, ROW_NUMBER() OVER (PARTITION BY s.capture, s.pid, s.device, s.id ORDER BY s.source, s.row_idx) AS copy
        FROM (SELECT *, capture(source) AS capture FROM mem_snapshots) s
    ) c
    WHERE copy = 1
),
-- each trigger with the latest snapshot of its process and device before it (by ID)
trigger_snapshot AS (
    SELECT capture, pid, device, id AS trigger_id, snap_id
    FROM (
        SELECT capture, pid, device, id, is_trigger,
               MAX(CASE WHEN NOT is_trigger THEN id END)
                   OVER (PARTITION BY capture, pid, device ORDER BY id, CASE WHEN is_trigger THEN 1 ELSE 0 END
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS snap_id
        FROM (
            SELECT capture, pid, device, id, TRUE AS is_trigger FROM triggers
            UNION ALL
            SELECT capture, pid, device, id, FALSE AS is_trigger FROM snapshots
        ) u
    ) w
    WHERE is_trigger
),
-- owners of the blocks the RECENT/TOP records name (the few records are matched first, so the
-- blocks are only probed, never grouped)
block_owners AS (
    SELECT capture(b.source) AS capture, b.pid, b.pool, b.ptr, b.alloc_ts, MIN(b.owner) AS owner
    FROM blocks b
    JOIN (SELECT DISTINCT pid, pool, ptr, alloc_ts FROM records WHERE kind <> 'trigger') r
      ON b.pid = r.pid AND b.pool = r.pool AND b.ptr = r.ptr AND b.alloc_ts = r.alloc_ts
    GROUP BY capture(b.source), b.pid, b.pool, b.ptr, b.alloc_ts
)
SELECT COALESCE(t.source, r.source) AS source,
       r.pid,
       COALESCE(t.device, r.device) AS device,
       r.trigger_id,
       t.ts AS oom_ts,
       r.kind,
       ROW_NUMBER() OVER (PARTITION BY r.capture, r.pid, r.trigger_id, r.kind ORDER BY r.id) AS nth,
       r.id, r.ts,
       r.func, r.req_size, r.flag, r.ret,
       r.pool, r.ptr, r.size, r.alloc_ts,
       b.owner,
       CASE WHEN r.kind = 'trigger' THEN NULL ELSE owner_group(b.owner) END AS owner_group,
       COALESCE(NULLIF(stack_frame(r.stack_py, 1), 'NA'), stack_frame(r.stack_c, 1)) AS stack_top,
       s.ts AS snapshot_ts, s.name AS snapshot_name,
       s.free_mem, s.total_mem, s.reserved AS reserved_bytes, s.allocated AS allocated_bytes,
       CASE WHEN r.kind = 'trigger' AND s.free_mem > 0
            THEN CAST(r.req_size AS DOUBLE) / CAST(s.free_mem AS DOUBLE) * 100.0 END AS req_pct_of_free,
       r.stack_py, r.stack_c
FROM with_trigger r
LEFT JOIN triggers t ON t.capture = r.capture AND (t.pid IS NOT DISTINCT FROM r.pid) AND t.id = r.trigger_id
LEFT JOIN trigger_snapshot ts ON ts.capture = t.capture AND (ts.pid IS NOT DISTINCT FROM t.pid) AND ts.device = t.device AND ts.trigger_id = t.id
LEFT JOIN snapshots s ON s.capture = ts.capture AND (s.pid IS NOT DISTINCT FROM ts.pid) AND s.device = ts.device AND s.id = ts.snap_id
LEFT JOIN block_owners b
       ON b.capture = r.capture AND b.pid = r.pid AND b.pool = r.pool AND b.ptr = r.ptr AND b.alloc_ts = r.alloc_ts
