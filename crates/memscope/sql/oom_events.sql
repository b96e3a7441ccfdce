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
-- Stored with the dataset when it is built (a few rows, many operators to plan).
-- @stored
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
-- @column ptr             UBIGINT pointer: recent/top: block address
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
        FROM (SELECT source, row_idx, capture(source) AS capture, pid, device, id, kind, ts, attr, func, req_size, flag,
                     ret, pool, ptr, size, alloc_ts, stack_py, stack_c
              FROM oom) o
    ) c
    WHERE copy = 1
),
-- the records and the SNAPSHOTs of each process and device in event order (ID; a snapshot
-- before a record of the same ID): every record learns the latest snapshot before it — the
-- least of the snapshots so far by (-ID, file, row), which is the latest, and of copies of it
-- the first. (Not last_value … IGNORE NULLS: a cluster loses IGNORE NULLS with the plan.)
with_snapshot AS (
    SELECT *,
           MIN(CASE WHEN kind = 'snapshot'
                    THEN named_struct('neg_id', -id, 'source', source, 'row_idx', row_idx, 'ts', ts, 'name', snap_name,
                                      'free_mem', free_mem, 'total_mem', total_mem, 'reserved', reserved,
                                      'allocated', allocated) END) OVER (
               PARTITION BY capture, pid, device ORDER BY id, CASE WHEN kind = 'snapshot' THEN 0 ELSE 1 END
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS snapshot
    FROM (
        SELECT source, row_idx, capture, pid, device, id, kind, ts, func, req_size, flag, ret, pool, ptr, size,
               alloc_ts, stack_py, stack_c, CAST(NULL AS VARCHAR) AS snap_name, CAST(NULL AS BIGINT) AS free_mem,
               CAST(NULL AS BIGINT) AS total_mem, CAST(NULL AS BIGINT) AS reserved, CAST(NULL AS BIGINT) AS allocated
        FROM records
        UNION ALL
        SELECT source, row_idx, capture(source), pid, device, id, 'snapshot', ts, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               NULL, NULL, NULL, name, free_mem, total_mem, reserved, allocated
        FROM mem_snapshots
    ) u
),
-- each record with the trigger that precedes it in the process's event order (a trigger before
-- a RECENT/TOP row of the same ID), and that trigger's file, device, time and snapshot (the
-- least of the triggers so far by (-ID, file, row) is the latest)
with_trigger AS (
    SELECT *,
           MAX(CASE WHEN kind = 'trigger' THEN id END) OVER process AS trigger_id,
           MIN(CASE WHEN kind = 'trigger'
                    THEN named_struct('neg_id', -id, 'source', source, 'row_idx', row_idx, 'device', device, 'ts', ts,
                                      'snapshot', snapshot) END) OVER process AS t
    FROM with_snapshot
    WHERE kind <> 'snapshot'
    WINDOW process AS (PARTITION BY capture, pid ORDER BY id, CASE WHEN kind = 'trigger' THEN 0 ELSE 1 END
                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
-- the owner of the block a RECENT/TOP record names (MALLOC of the same process, pool, address
-- and time; the least when several match)
with_owner AS (
    SELECT r.capture, r.pid, r.trigger_id, r.kind, r.id, r.ts, r.source, r.device, r.func, r.req_size, r.flag, r.ret,
           r.pool, r.ptr, r.size, r.alloc_ts, r.stack_py, r.stack_c,
           r.t['source'] AS t_source, r.t['device'] AS t_device, r.t['ts'] AS oom_ts, r.t['snapshot'] AS s,
           MIN(b.owner) AS owner
    FROM with_trigger r
    LEFT JOIN blocks b
           ON r.kind <> 'trigger' AND capture(b.source) = r.capture AND b.pid = r.pid AND b.pool = r.pool
          AND b.ptr = r.ptr AND b.alloc_ts = r.alloc_ts
    GROUP BY r.capture, r.pid, r.trigger_id, r.kind, r.id, r.ts, r.source, r.row_idx, r.device, r.func, r.req_size, r.flag,
             r.ret, r.pool, r.ptr, r.size, r.alloc_ts, r.stack_py, r.stack_c, r.t
)
SELECT COALESCE(t_source, source) AS source,
       pid,
       COALESCE(t_device, device) AS device,
       trigger_id,
       oom_ts,
       kind,
       ROW_NUMBER() OVER (PARTITION BY capture, pid, trigger_id, kind ORDER BY id) AS nth,
       id, ts,
       func, req_size, flag, ret,
       pool, ptr, size, alloc_ts,
       owner,
       CASE WHEN kind = 'trigger' THEN NULL ELSE owner_group(owner) END AS owner_group,
       COALESCE(NULLIF(stack_frame(stack_py, 1), 'NA'), stack_frame(stack_c, 1)) AS stack_top,
       s['ts'] AS snapshot_ts, s['name'] AS snapshot_name,
       s['free_mem'] AS free_mem, s['total_mem'] AS total_mem, s['reserved'] AS reserved_bytes,
       s['allocated'] AS allocated_bytes,
       CASE WHEN kind = 'trigger' AND s['free_mem'] > 0
            THEN CAST(req_size AS DOUBLE) / CAST(s['free_mem'] AS DOUBLE) * 100.0 END AS req_pct_of_free,
       stack_py, stack_c
FROM with_owner
