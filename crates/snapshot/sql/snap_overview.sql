-- snap_overview: the allocator state at dump time per snapshot and device: reserved, allocated, active, requested, free memory split into cached and fragmented, counts and a health verdict.
--
-- Sums over the final segments (snap_segments), as the reference's `--mode overview` does, but
-- one row per snapshot and device (a device that only has trace entries gets zero bytes; a
-- snapshot with no segment and no trace entry at all — an empty dump such as
-- `torch.cuda.memory._snapshot()` before anything was allocated — gets one row for device 0 with
-- zero totals, so that it reads as an empty snapshot, not as no snapshot):
--   allocated = Σ allocated_size (rounded sizes of active_allocated blocks), requested = Σ their
--   requested bytes, active = Σ active_size (allocated + pending-free blocks, rounded sizes).
--   PyTorch rounds every request up (to 512 bytes, 2 MiB, …): `size` is what a block occupies,
--   `requested_size` what the program asked for, so requested <= allocated <= active.
--
-- Free memory (free = reserved - allocated) is split the way the report judges it
-- (docs/report.md, section 6; docs/formats/snapshot.md §6.2):
--   cached free      the free bytes of wholly free segments (no live and no pending-free block):
--                    memory the caching allocator keeps for reuse, which `empty_cache()` returns.
--                    Cached free memory is NOT fragmentation: an idle cache (everything cached
--                    free, nothing allocated) is healthy;
--   fragmented       Σ over segments of (free - largest free block of that segment): free memory
--                    that cannot serve a request as large as its segment's largest hole;
--   frag_pct         fragmented / free in percent: 0 for an idle cache, 100 when every free byte
--                    sits in small holes between live blocks;
--   fragmented (flag) frag_pct >= 30 and some bytes fragmented.
--   free_pct         (reserved - allocated) / reserved in percent: the share of reserved memory not
--                    held by live tensors. This is what the reference calls its "fragmentation"
--                    (rounded to 2 decimals half away from zero like its per-device figure); it
--                    counts cached free memory and is no health rule here.
--   pending_free_pct pending-free bytes / free bytes; above 50 the free memory is mostly blocks
--                    waiting for other streams (false fragmentation), not allocator holes.
-- health, on the device's unrounded figures (the report's definition):
--   ERR  an OOM entry in the trace (fragmented bytes are named beside it when flagged);
--   WARN fragmentation that wastes a real share of the device: flagged as fragmented and at
--        least 1 GiB fragmented that is also at least 10 % of reserved; or more than 100
--        segments (the reference's segment rule);
--   OK   otherwise: cached free memory and small fragmentation (under 1 GiB or under 10 % of
--        reserved) are noted in health_reason, not flagged.
-- reference_health keeps the reference's threshold rules (ERR an OOM or free_pct > 15, WARN
-- free_pct > 5 or more than 100 segments), which call an idle cache ERR because they count cached
-- free memory as fragmentation. The reference compares its rounded summary value and applies the
-- rules to all devices summed; on a single-device snapshot only a value within 0.05 of a
-- threshold can differ (docs/reference-differences.md).
--
-- @column snapshot                VARCHAR the snapshot (source name)
-- @column device                  BIGINT  device ordinal (0 for an empty snapshot)
-- @column reserved_bytes          BIGINT  bytes: reserved from the device (Σ segment total_size)
-- @column allocated_bytes         BIGINT  bytes: of live blocks after rounding (Σ allocated_size)
-- @column active_bytes            BIGINT  bytes: of live and pending-free blocks after rounding (Σ active_size); snap_peak.active_end counts the same blocks at their requested size, so it is smaller by the rounding
-- @column requested_bytes         BIGINT  bytes: the callers of live blocks asked for (Σ requested_size, before rounding)
-- @column free_bytes              BIGINT  bytes: reserved but not allocated (reserved - allocated: cached free, holes and pending-free blocks)
-- @column cached_free_bytes       BIGINT  bytes: free bytes of wholly free segments (cached, not fragmentation; empty_cache() returns them)
-- @column pending_free_bytes      BIGINT  bytes: of active_pending_free blocks (freed, still used by another stream)
-- @column pending_free_pct        DOUBLE  percent: pending_free_bytes / free_bytes, 2 decimals; 0 when nothing is free
-- @column false_fragmentation     BOOLEAN true when pending_free_pct > 50: free memory is mostly waiting for cross-stream frees
-- @column largest_free_bytes      BIGINT  bytes: the largest free (inactive) block of the device; 0 when none
-- @column fragmented_bytes        BIGINT  bytes: Σ over segments of (free bytes - the segment's largest free block): free memory that cannot serve a request as large as its segment's largest hole
-- @column frag_pct                DOUBLE  percent: fragmented_bytes / free_bytes, 2 decimals; 0 when nothing is free (an idle cache is 0)
-- @column fragmented              BOOLEAN true when frag_pct >= 30 and fragmented_bytes > 0 (the report's fragmentation finding)
-- @column free_pct                DOUBLE  percent: free_bytes / reserved_bytes, 2 decimals (the reference's "frag_pct"; counts cached free memory); NULL when nothing is reserved
-- @column segments                BIGINT  count: segments
-- @column blocks                  BIGINT  count: blocks (every state)
-- @column expandable_segments     BIGINT  count: expandable segments
-- @column oom_count               BIGINT  count: oom entries in the device's trace
-- @column health                  VARCHAR OK, WARN or ERR (rules above: an OOM, costly fragmentation, more than 100 segments)
-- @column health_reason           VARCHAR text: the rules that fired, e.g. 'oom entries: 1' or 'segments 405 > 100'; for OK 'within thresholds', then notes such as 'cached_free_bytes 551550976: cached, not fragmentation'
-- @column reference_health        VARCHAR OK, WARN or ERR by the reference's threshold rules on free_pct (above)
-- @column reference_health_reason VARCHAR text: the reference rules that fired, e.g. 'oom entries: 1; free_pct 63.67 > 15'; 'within thresholds' for OK
WITH
seen AS (
    SELECT DISTINCT snapshot, device FROM snap_segments
    UNION
    SELECT snapshot, device FROM snap_trace_levels
),
-- a snapshot with neither segments nor trace entries: one row for device 0
empty_snapshots AS (
    SELECT DISTINCT i.snapshot, CAST(0 AS BIGINT) AS device
    FROM snap_info i
    LEFT JOIN (SELECT DISTINCT snapshot FROM seen) s ON s.snapshot = i.snapshot
    WHERE s.snapshot IS NULL
),
devices AS (
    SELECT snapshot, device FROM seen
    UNION ALL
    SELECT snapshot, device FROM empty_snapshots
),
block_per_segment AS (
    SELECT snapshot, segment_id,
           MAX(CASE WHEN state = 'inactive' THEN size ELSE 0 END) AS largest_free,
           SUM(CASE WHEN state = 'active_allocated' THEN 1 ELSE 0 END) AS live_blocks,
           SUM(CASE WHEN state = 'active_pending_free' THEN size ELSE 0 END) AS pending
    FROM snap_blocks
    GROUP BY snapshot, segment_id
),
per_segment AS (
    SELECT g.snapshot, g.device, g.total_size, g.allocated_size, g.active_size, g.requested_size, g.is_expandable,
           g.total_size - g.allocated_size AS free,
           COALESCE(b.largest_free, 0) AS largest_free,
           COALESCE(b.live_blocks, 0) AS live_blocks,
           COALESCE(b.pending, 0) AS pending
    FROM snap_segments g
    LEFT JOIN block_per_segment b ON b.snapshot = g.snapshot AND b.segment_id = g.segment_id
),
segment_sums AS (
    SELECT snapshot, device,
           SUM(total_size) AS reserved_bytes,
           SUM(allocated_size) AS allocated_bytes,
           SUM(active_size) AS active_bytes,
           SUM(requested_size) AS requested_bytes,
           SUM(CASE WHEN live_blocks = 0 AND pending = 0 THEN free ELSE 0 END) AS cached_free_bytes,
           SUM(GREATEST(free - largest_free, 0)) AS fragmented_bytes,
           MAX(largest_free) AS largest_free_bytes,
           COUNT(*) AS segments,
           SUM(CASE WHEN is_expandable THEN 1 ELSE 0 END) AS expandable_segments
    FROM per_segment
    GROUP BY snapshot, device
),
block_sums AS (
    SELECT snapshot, device,
           COUNT(*) AS blocks,
           SUM(CASE WHEN state = 'active_pending_free' THEN size ELSE 0 END) AS pending_free_bytes
    FROM snap_blocks
    GROUP BY snapshot, device
),
-- the devices with trace entries and their oom entries, counted at ingest
ooms AS (
    SELECT snapshot, device, oom_count FROM snap_trace_levels WHERE oom_count > 0
),
figures AS (
    SELECT d.snapshot, d.device,
           COALESCE(s.reserved_bytes, 0) AS reserved_bytes,
           COALESCE(s.allocated_bytes, 0) AS allocated_bytes,
           COALESCE(s.active_bytes, 0) AS active_bytes,
           COALESCE(s.requested_bytes, 0) AS requested_bytes,
           COALESCE(s.reserved_bytes, 0) - COALESCE(s.allocated_bytes, 0) AS free_bytes,
           COALESCE(s.cached_free_bytes, 0) AS cached_free_bytes,
           COALESCE(b.pending_free_bytes, 0) AS pending_free_bytes,
           COALESCE(s.largest_free_bytes, 0) AS largest_free_bytes,
           COALESCE(s.fragmented_bytes, 0) AS fragmented_bytes,
           CASE WHEN s.reserved_bytes > 0
                THEN 100.0 * CAST(s.reserved_bytes - s.allocated_bytes AS DOUBLE) / CAST(s.reserved_bytes AS DOUBLE) END AS free_share,
           COALESCE(s.segments, 0) AS segments,
           COALESCE(b.blocks, 0) AS blocks,
           COALESCE(s.expandable_segments, 0) AS expandable_segments,
           COALESCE(o.oom_count, 0) AS oom_count
    FROM devices d
    LEFT JOIN segment_sums s ON s.snapshot = d.snapshot AND s.device = d.device
    LEFT JOIN block_sums b ON b.snapshot = d.snapshot AND b.device = d.device
    LEFT JOIN ooms o ON o.snapshot = d.snapshot AND o.device = d.device
),
shares AS (
    SELECT *,
           CASE WHEN free_bytes > 0 THEN 100.0 * CAST(pending_free_bytes AS DOUBLE) / CAST(free_bytes AS DOUBLE) ELSE 0.0 END AS pending_pct,
           CASE WHEN free_bytes > 0 THEN 100.0 * CAST(fragmented_bytes AS DOUBLE) / CAST(free_bytes AS DOUBLE) ELSE 0.0 END AS frag
    FROM figures
),
flags AS (
    SELECT *,
           fragmented_bytes > 0 AND frag >= 30 AS is_fragmented,
           fragmented_bytes >= 1073741824 AND CAST(fragmented_bytes AS DOUBLE) >= 0.1 * CAST(reserved_bytes AS DOUBLE) AS costly,
           'fragmented_bytes ' || CAST(fragmented_bytes AS VARCHAR) || ' = ' || CAST(round(frag, 2) AS VARCHAR) || ' % of free' AS frag_text
    FROM shares
),
checks AS (
    SELECT *,
           concat_ws('; ',
               CASE WHEN oom_count > 0 THEN 'oom entries: ' || CAST(oom_count AS VARCHAR) END,
               CASE WHEN oom_count > 0 AND is_fragmented THEN frag_text END) AS err_reasons,
           concat_ws('; ',
               CASE WHEN is_fragmented AND costly THEN frag_text || ' (>= 30 %), >= 1 GiB and >= 10 % of reserved' END,
               CASE WHEN segments > 100 THEN 'segments ' || CAST(segments AS VARCHAR) || ' > 100' END) AS warn_reasons,
           concat_ws('; ',
               'within thresholds',
               CASE WHEN reserved_bytes = 0 THEN 'nothing reserved' END,
               CASE WHEN is_fragmented THEN frag_text || ', under 1 GiB or 10 % of reserved: noted' END,
               CASE WHEN cached_free_bytes > 0 THEN 'cached_free_bytes ' || CAST(cached_free_bytes AS VARCHAR) || ': cached, not fragmentation' END) AS ok_notes,
           concat_ws('; ',
               CASE WHEN oom_count > 0 THEN 'oom entries: ' || CAST(oom_count AS VARCHAR) END,
               CASE WHEN free_share > 15 THEN 'free_pct ' || CAST(round(free_share, 2) AS VARCHAR) || ' > 15' END) AS ref_err_reasons,
           concat_ws('; ',
               CASE WHEN free_share > 5 THEN 'free_pct ' || CAST(round(free_share, 2) AS VARCHAR) || ' > 5' END,
               CASE WHEN segments > 100 THEN 'segments ' || CAST(segments AS VARCHAR) || ' > 100' END) AS ref_warn_reasons
    FROM flags
)
SELECT snapshot, device, reserved_bytes, allocated_bytes, active_bytes, requested_bytes, free_bytes,
       cached_free_bytes, pending_free_bytes,
       round(pending_pct, 2) AS pending_free_pct,
       pending_pct > 50 AS false_fragmentation,
       largest_free_bytes, fragmented_bytes,
       round(frag, 2) AS frag_pct,
       is_fragmented AS fragmented,
       round(free_share, 2) AS free_pct,
       segments, blocks, expandable_segments, oom_count,
       CASE WHEN err_reasons <> '' THEN 'ERR' WHEN warn_reasons <> '' THEN 'WARN' ELSE 'OK' END AS health,
       CASE WHEN err_reasons <> '' THEN err_reasons WHEN warn_reasons <> '' THEN warn_reasons ELSE ok_notes END AS health_reason,
       CASE WHEN ref_err_reasons <> '' THEN 'ERR' WHEN ref_warn_reasons <> '' THEN 'WARN' ELSE 'OK' END AS reference_health,
       CASE WHEN ref_err_reasons <> '' THEN ref_err_reasons WHEN ref_warn_reasons <> '' THEN ref_warn_reasons ELSE 'within thresholds' END AS reference_health_reason
FROM checks
