-- usage_series: every value of every pool counter, one series per (source, pid, device, pool), in canonical order.
--
-- @private: a helper the other analyses build on.
--
-- Framework pools (PTA, ATB, MINDSPORE, PTA_WORKSPACE, HOST_PINNED) carry their counters on
-- their own MALLOC/FREE rows (Attr `used`, `total`: the state after the row's event; for
-- HOST_PINNED `used` is the process VmRSS). HAL rows carry none, so the HAL series is the live
-- bytes of HAL blocks computed by pairing at ingest (`curve.live_bytes`): +size at each MALLOC,
-- -size when the block ends (FREE, shadow FREE, or address reuse: one row, the MALLOC that reuses
-- the address) unless blocks.held_at_end says the memory was still held at the end (a shadow
-- FREE that only fills in a release never observed, at exit while collecting or while stopped:
-- docs/formats/memscope.md §5.5), so the series ends at the memory still held. A HAL row is a
-- point when it changes some block's bytes (`curve.owner` is set): FREEs of blocks whose MALLOC
-- was never seen (allocated before collection) and held shadow FREEs are left out.
-- Promoted shadow MALLOCs (stock memory) count. A dump whose MALLOC and FREE rows cannot be
-- paired (view pairing: MALLOC only or FREE only) has no HAL series: its live bytes cannot be
-- concluded (its pools' counters stay).
-- For HAL, `total` repeats `used`: HAL live bytes are the driver-level reservation.
-- Counters of different processes, devices or pools are never mixed. Rows keep the curve's
-- stored order (series, then time), so windows over a series need no sort.
--
-- @column source  VARCHAR input file
-- @column pid     BIGINT  process id
-- @column device  VARCHAR Device Id as written (0..31, cpu, host)
-- @column pool    VARCHAR pool (Event Type): HAL, PTA, ATB, MINDSPORE, PTA_WORKSPACE, HOST_PINNED
-- @column ts      BIGINT  ns: time of the event, ns
-- @column row_idx UBIGINT row of the event in its file (ties at equal ts keep file order)
-- @column used    BIGINT  bytes: live in the pool after the event (HAL: paired live bytes; HOST_PINNED: VmRSS)
-- @column total   BIGINT  bytes: reserved by the pool after the event (HAL: = used; NULL when the row has none)
-- @column origin  VARCHAR attr (the row's own counters) or pairing (HAL live bytes from MALLOC/FREE pairing)
-- @column step_k  UBIGINT 1-based position of the latest step of the process and device started at or before the row (curve.step_k); 0 before the first step, NULL without steps
-- @column step    BIGINT  number of the step the row falls in (curve.step); NULL outside every step
SELECT source, pid, device, pool, ts, row_idx,
       CASE WHEN pool = 'HAL' THEN live_bytes ELSE used END AS used,
       CASE WHEN pool = 'HAL' THEN live_bytes ELSE total END AS total,
       CASE WHEN pool = 'HAL' THEN 'pairing' ELSE 'attr' END AS origin,
       step_k, step
FROM curve
WHERE ts IS NOT NULL
  AND CASE WHEN pool = 'HAL' THEN owner IS NOT NULL ELSE used IS NOT NULL OR total IS NOT NULL END
  AND (pool <> 'HAL' OR source IN (SELECT source FROM pairing WHERE can_pair))
