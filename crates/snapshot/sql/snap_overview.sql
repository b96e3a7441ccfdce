-- snap_overview: the allocator state at dump time per snapshot and device: reserved, allocated, active, requested, free share, counts and a health verdict.
--
-- Sums over the final segments (snap_segments), as the reference's `--mode overview` does, but
-- one row per snapshot and device (a device that only has trace entries gets zero bytes):
--   allocated = Σ allocated_size (rounded sizes of active_allocated blocks), requested = Σ their
--   requested bytes, active = Σ active_size (allocated + pending-free blocks).
--   frag_pct = (reserved - allocated) / reserved in percent: the share of reserved memory not held
--   by live tensors (cached free memory), rounded to 2 decimals half away from zero like the
--   reference's per-device figure (its summary line rounds to 1 decimal).
--   pending_free_pct = pending-free bytes / (reserved - allocated); above 50 the free memory is
--   mostly blocks waiting for other streams (false fragmentation), not allocator holes.
-- health follows the reference's overview rules, on the device's unrounded figures:
--   ERR  an OOM entry in the trace, or frag_pct > 15;
--   WARN frag_pct > 5, or more than 100 segments;
--   OK   otherwise.
-- The reference compares its rounded summary value and applies the rules to all devices summed;
-- on a single-device snapshot only a value within 0.05 of a threshold can differ
-- (docs/reference-differences.md).
--
-- @column snapshot            VARCHAR the snapshot (source name)
-- @column device              BIGINT  device ordinal
-- @column reserved_bytes      BIGINT  bytes: reserved from the device (Σ segment total_size)
-- @column allocated_bytes     BIGINT  bytes: of live blocks after rounding (Σ allocated_size)
-- @column active_bytes        BIGINT  bytes: of live and pending-free blocks (Σ active_size)
-- @column requested_bytes     BIGINT  bytes: the callers of live blocks asked for (Σ requested_size)
-- @column free_bytes          BIGINT  bytes: reserved but not allocated (reserved - allocated: cached free and pending-free blocks)
-- @column pending_free_bytes  BIGINT  bytes: of active_pending_free blocks (freed, still used by another stream)
-- @column pending_free_pct    DOUBLE  percent: pending_free_bytes / free_bytes, 2 decimals; 0 when nothing is free
-- @column false_fragmentation BOOLEAN true when pending_free_pct > 50: free memory is mostly waiting for cross-stream frees
-- @column frag_pct            DOUBLE  percent: free_bytes / reserved_bytes, 2 decimals; NULL when nothing is reserved
-- @column segments            BIGINT  count: segments
-- @column blocks              BIGINT  count: blocks (every state)
-- @column expandable_segments BIGINT  count: expandable segments
-- @column oom_count           BIGINT  count: oom entries in the device's trace
-- @column health              VARCHAR OK, WARN or ERR (rules above)
-- @column health_reason       VARCHAR text: the rules that fired, e.g. 'oom entries: 1; frag_pct 63.67 > 15'; 'within thresholds' for OK
WITH
devices AS (
    SELECT DISTINCT snapshot, device FROM snap_segments
    UNION
    SELECT DISTINCT snapshot, device FROM snap_traces
),
segment_sums AS (
    SELECT snapshot, device,
           SUM(total_size) AS reserved_bytes,
           SUM(allocated_size) AS allocated_bytes,
           SUM(active_size) AS active_bytes,
           SUM(requested_size) AS requested_bytes,
           COUNT(*) AS segments,
           SUM(CASE WHEN is_expandable THEN 1 ELSE 0 END) AS expandable_segments
    FROM snap_segments
    GROUP BY snapshot, device
),
block_sums AS (
    SELECT snapshot, device,
           COUNT(*) AS blocks,
           SUM(CASE WHEN state = 'active_pending_free' THEN size ELSE 0 END) AS pending_free_bytes
    FROM snap_blocks
    GROUP BY snapshot, device
),
ooms AS (
    SELECT snapshot, device, COUNT(*) AS oom_count
    FROM snap_traces
    WHERE action = 'oom'
    GROUP BY snapshot, device
),
figures AS (
    SELECT d.snapshot, d.device,
           COALESCE(s.reserved_bytes, 0) AS reserved_bytes,
           COALESCE(s.allocated_bytes, 0) AS allocated_bytes,
           COALESCE(s.active_bytes, 0) AS active_bytes,
           COALESCE(s.requested_bytes, 0) AS requested_bytes,
           COALESCE(s.reserved_bytes, 0) - COALESCE(s.allocated_bytes, 0) AS free_bytes,
           COALESCE(b.pending_free_bytes, 0) AS pending_free_bytes,
           CASE WHEN s.reserved_bytes > 0
                THEN 100.0 * CAST(s.reserved_bytes - s.allocated_bytes AS DOUBLE) / CAST(s.reserved_bytes AS DOUBLE) END AS frag,
           COALESCE(s.segments, 0) AS segments,
           COALESCE(b.blocks, 0) AS blocks,
           COALESCE(s.expandable_segments, 0) AS expandable_segments,
           COALESCE(o.oom_count, 0) AS oom_count
    FROM devices d
    LEFT JOIN segment_sums s ON s.snapshot = d.snapshot AND s.device = d.device
    LEFT JOIN block_sums b ON b.snapshot = d.snapshot AND b.device = d.device
    LEFT JOIN ooms o ON o.snapshot = d.snapshot AND o.device = d.device
),
checks AS (
    SELECT *,
           CASE WHEN free_bytes > 0 THEN 100.0 * CAST(pending_free_bytes AS DOUBLE) / CAST(free_bytes AS DOUBLE) ELSE 0.0 END AS pending_pct,
           concat_ws('; ',
               CASE WHEN oom_count > 0 THEN 'oom entries: ' || CAST(oom_count AS VARCHAR) END,
               CASE WHEN frag > 15 THEN 'frag_pct ' || CAST(round(frag, 2) AS VARCHAR) || ' > 15' END) AS err_reasons,
           concat_ws('; ',
               CASE WHEN frag > 5 THEN 'frag_pct ' || CAST(round(frag, 2) AS VARCHAR) || ' > 5' END,
               CASE WHEN segments > 100 THEN 'segments ' || CAST(segments AS VARCHAR) || ' > 100' END) AS warn_reasons
    FROM figures
)
SELECT snapshot, device, reserved_bytes, allocated_bytes, active_bytes, requested_bytes, free_bytes,
       pending_free_bytes,
       round(pending_pct, 2) AS pending_free_pct,
       pending_pct > 50 AS false_fragmentation,
       round(frag, 2) AS frag_pct,
       segments, blocks, expandable_segments, oom_count,
       CASE WHEN err_reasons <> '' THEN 'ERR' WHEN warn_reasons <> '' THEN 'WARN' ELSE 'OK' END AS health,
       CASE WHEN err_reasons <> '' THEN err_reasons WHEN warn_reasons <> '' THEN warn_reasons ELSE 'within thresholds' END AS health_reason
FROM checks
