-- usage_series: every value of every pool counter, one series per (source, pid, device, pool), in canonical order.
--
-- @private: a helper the other analyses build on.
--
-- Framework pools (PTA, ATB, MINDSPORE, PTA_WORKSPACE, HOST_PINNED) carry their counters on
-- their own MALLOC/FREE rows (Attr `used`, `total`: the state after the row's event; for
-- HOST_PINNED `used` is the process VmRSS). HAL rows carry none, so the HAL series is the live
-- bytes of HAL blocks computed by pairing (`blocks.fate` (decided at ingest)): +size at each MALLOC, -size when
-- the block ends (FREE, shadow FREE, or address reuse) unless blocks.held_at_end says the memory was
-- still held at the end (a shadow FREE that only fills in a release never observed, at exit
-- while collecting or while stopped: docs/formats/memscope.md §5.5), so the series ends at the memory
-- still held. Blocks whose MALLOC was never seen (allocated before collection) are left out.
-- Promoted shadow MALLOCs (stock memory) count.
-- For HAL, `total` repeats `used`: HAL live bytes are the driver-level reservation.
-- Counters of different processes, devices or pools are never mixed.
--
-- @column source  VARCHAR input file
-- @column pid     BIGINT  process id
-- @column device  VARCHAR Device Id as written (0..31, cpu, host)
-- @column pool    VARCHAR pool (Event Type): HAL, PTA, ATB, MINDSPORE, PTA_WORKSPACE, HOST_PINNED
-- @column ts      BIGINT  ns: time of the event, ns
-- @column row_idx UBIGINT row of the event in its file (ties at equal ts keep file order); NULL for an address reuse without FREE
-- @column used    BIGINT  bytes: live in the pool after the event (HAL: paired live bytes; HOST_PINNED: VmRSS)
-- @column total   BIGINT  bytes: reserved by the pool after the event (HAL: = used; NULL when the row has none)
-- @column origin  VARCHAR attr (the row's own counters) or pairing (HAL live bytes from MALLOC/FREE pairing)
WITH
-- framework pools: the counters written on the rows themselves (shadow rows carry none)
attr_points AS (
    SELECT source, pid, device, pool, ts, row_idx, used, total
    FROM curve
    WHERE pool <> 'HAL'
      AND (used IS NOT NULL OR total IS NOT NULL)
),
-- +size when a HAL block starts, -size when it really ends (one pass: each block twice)
hal_deltas AS (
    SELECT source, pid, device,
           CASE WHEN d.sign = 1 THEN alloc_ts ELSE end_ts END AS ts,
           CASE WHEN d.sign = 1 THEN alloc_row ELSE free_row END AS row_idx,
           d.sign * size AS delta
    FROM blocks
    CROSS JOIN (VALUES (1), (-1)) AS d(sign)
    WHERE pool = 'HAL' AND alloc_ts IS NOT NULL
      AND (d.sign = 1 OR end_ts IS NOT NULL)
),
hal_points AS (
    SELECT source, pid, device, 'HAL' AS pool, ts, row_idx,
           SUM(delta) OVER (PARTITION BY source, pid, device
                            ORDER BY ts, row_idx NULLS FIRST
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS live
    FROM hal_deltas
)
SELECT source, pid, device, pool, ts, row_idx, used, total, 'attr' AS origin
FROM attr_points
UNION ALL
SELECT source, pid, device, pool, ts, row_idx, live AS used, live AS total, 'pairing' AS origin
FROM hal_points
