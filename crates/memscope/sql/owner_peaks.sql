-- owner_peaks: the largest owners of each pool: peak live bytes, bytes allocated and blocks per owner.
--
-- One row per owner of each series (source, pid, device, pool); pools, processes and devices are
-- never mixed. The owner is the MALLOC's `owner` attribute, complete (commas included); a block
-- without one is listed under '(stock)' when it is stock memory (allocated before collection
-- started) and under its pool name otherwise (as the reference does), which owner_group reports
-- as '(unlabelled)'.
-- peak_bytes is the highest sum of that owner's live blocks, from the running sum over the blocks'
-- allocations and ends in canonical order that ingest stores in `curve.owner_live_bytes` (peaks
-- of different owners are reached at different moments, so they do not add up to a
-- simultaneous total). As in `curve`, a block still held at
-- the end by `blocks.fate` (decided at ingest) (a shadow FREE that only fills in a release never observed)
-- ends nothing; every other block ends at blocks.end_ts.
-- can_pair is false for a dump whose MALLOC and FREE rows cannot be paired (view pairing:
-- MALLOC only or FREE only): its peak_bytes, peak_ts and end_bytes cannot be concluded (without
-- FREEs an owner's live bytes only rise); total_bytes and blocks stand.
-- ORDER BY peak_bytes DESC for the largest first.
--
-- @column source      VARCHAR input file
-- @column pid         BIGINT  process id
-- @column device      VARCHAR Device Id as written
-- @column pool        VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column owner       VARCHAR full owner string; '(stock)' or the pool name when the MALLOC had none
-- @column owner_group VARCHAR level-1 group of the owner (first level after the framework), '(unlabelled)' when none
-- @column peak_bytes  BIGINT  bytes: the highest live bytes of the owner's blocks at any moment
-- @column peak_ts     BIGINT  ns: first time the owner reached peak_bytes, ns since the Unix epoch
-- @column total_bytes BIGINT  bytes: sum of the sizes of every block allocated (MALLOC rows, reused addresses counted again)
-- @column blocks      BIGINT  count: number of blocks allocated (MALLOC rows)
-- @column end_bytes   BIGINT  bytes: the owner's bytes still held at the end of the data (blocks never released, stock included)
-- @column can_pair    BOOLEAN false when the dump's MALLOC and FREE rows cannot be paired (view pairing): peak_bytes, peak_ts and end_bytes cannot be concluded
WITH
-- Each owner's peak: the highest of its live bytes after the rows that change them
-- (curve.owner_live_bytes, the running sum per owner of each series) and the first time it is
-- reached, kept at ingest as the running sums are computed (table owner_live_peaks).
owner_curve AS (
    SELECT source, pid, device, pool, owner, peak_bytes, peak_ts
    FROM owner_live_peaks
),
-- Allocated blocks per owner: bytes and count, and the bytes never released, summed at ingest
-- as the blocks are written (table owner_totals: the blocks with an allocation time, the owner
-- named as above: the MALLOC's, else '(stock)' for stock memory, else the pool).
owner_blocks AS (
    SELECT source, pid, device, pool, owner, total_bytes, blocks, end_bytes
    FROM owner_totals
)
SELECT b.source, b.pid, b.device, b.pool, b.owner,
       owner_group(b.owner) AS owner_group,
       c.peak_bytes, c.peak_ts, b.total_bytes, b.blocks, b.end_bytes,
       COALESCE(g.can_pair, false) AS can_pair
FROM owner_blocks b
LEFT JOIN pairing g ON g.source = b.source
JOIN owner_curve c
  ON c.source = b.source AND (c.pid IS NOT DISTINCT FROM b.pid) AND c.device = b.device
 AND c.pool = b.pool AND c.owner = b.owner
