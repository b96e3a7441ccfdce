-- snap_frag_findings: fragmentation against cached free memory in each snapshot's allocator state (rows of view findings).
--
-- Per snapshot and device, the free memory of the segments (view snap_fragmentation) is split
-- into memory in wholly free segments (cached: `empty_cache()` returns it), memory waiting for
-- other streams (pending free) and memory outside the largest hole of its segment
-- (fragmented: it cannot serve a request as large as that hole). frag_pct = fragmented / free.
-- Fragmentation is a problem (kind fragmentation, warning) when frag_pct ≥ 30 and it cost a
-- request (an OOM on the device, view snap_overview's oom_count) or wastes a real share of the
-- device (at least 1 GiB and a tenth of what is reserved); with frag_pct ≥ 30 and fragmented
-- bytes it is noted (fragmentation, info); otherwise the free memory is cached (kind
-- cached_free: info, ok when nothing is free). snap_overview's threshold verdict, which counts
-- cached free memory as fragmentation, is quoted when it says WARN or ERR. The advice names the
-- allocator settings that act on fragmentation, without the split limit when expandable segments
-- are already on (snap_info, snap_overview).
--
-- @private
-- @part findings
-- @column section      VARCHAR fragmentation
-- @column ord          BIGINT  rank: after the dumps' findings, by snapshot and device
-- @column kind         VARCHAR fragmentation or cached_free
-- @column severity     VARCHAR warning, info or ok
-- @column pid          BIGINT  process id: NULL (a snapshot names no process)
-- @column device       VARCHAR device ordinal
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR SNAPSHOT device D
-- @column bytes        BIGINT  bytes: fragmentation: outside the largest hole of their segment; cached_free: in wholly free segments
-- @column title        VARCHAR one line
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR one per line
-- @column missing      VARCHAR NULL
-- @column collect_with VARCHAR NULL
-- @column figures      VARCHAR JSON object
WITH
devices AS (
    SELECT snapshot, device, COUNT(*) AS segments, SUM(total_size) AS reserved, SUM(free_bytes) AS free,
           SUM(CASE WHEN live_blocks = 0 AND pending_free_bytes = 0 THEN free_bytes ELSE 0 END) AS empty,
           SUM(CASE WHEN live_blocks = 0 AND pending_free_bytes = 0 THEN 1 ELSE 0 END) AS empty_segments,
           SUM(pending_free_bytes) AS pending, SUM(free_bytes - largest_free_bytes) AS unusable,
           SUM(internal_waste) AS internal_waste, MAX(largest_free_bytes) AS largest_free, SUM(free_pieces) AS free_pieces
    FROM snap_fragmentation GROUP BY snapshot, device
),
settings AS (
    SELECT snapshot, string_agg(concat(key, '=', value), ', ' ORDER BY key) AS text,
           bool_or(key = 'expandable_segments' AND value = 'true') AS expandable
    FROM snap_info WHERE section = 'allocator_settings' GROUP BY snapshot
),
judged AS (
    SELECT d.*, CASE WHEN d.free > 0 THEN d.unusable * 100.0 / d.free ELSE 0.0 END AS pct,
           CASE WHEN o.snapshot IS NULL THEN '' ELSE concat(o.reference_health, ' ', o.reference_health_reason) END AS ref_health,
           COALESCE(o.oom_count, 0) > 0 AS oom_here,
           COALESCE(s.expandable, false) OR COALESCE(o.expandable_segments, 0) > 0 AS expandable,
           s.text AS settings,
           CAST(ROW_NUMBER() OVER (ORDER BY d.snapshot, d.device) AS BIGINT) AS k
    FROM devices d
    LEFT JOIN snap_overview o ON o.snapshot = d.snapshot AND o.device = d.device
    LEFT JOIN settings s ON s.snapshot = d.snapshot
),
rated AS (
    SELECT *,
           CASE WHEN pct >= 30 AND ((unusable >= 1073741824 AND unusable >= 0.1 * reserved) OR (oom_here AND unusable > 0)) THEN 'warning'
                WHEN free = 0 THEN 'ok' ELSE 'info' END AS severity
    FROM judged
),
kinds AS (
    SELECT *, CASE WHEN severity = 'warning' OR (unusable > 0 AND pct >= 30) THEN 'fragmentation' ELSE 'cached_free' END AS kind
    FROM rated
)
SELECT 'fragmentation' AS section, 1000 + k AS ord, kind, severity, CAST(NULL AS BIGINT) AS pid,
       CAST(device AS VARCHAR) AS device, CAST(NULL AS VARCHAR) AS pool, concat(snapshot, ' device ', device) AS place,
       CASE WHEN kind = 'fragmentation' THEN unusable ELSE empty END AS bytes,
       CASE WHEN kind = 'fragmentation'
            THEN concat('Fragmented: ', fmt_bytes(unusable), ' of free memory on ', snapshot, ' device ', device, ' cannot serve a large request')
            ELSE concat(snapshot, ' device ', device, ': ', fmt_bytes(free), ' free, of which ', fmt_bytes(unusable), ' fragmented') END AS title,
       concat('Of ', fmt_bytes(reserved), ' reserved, ', fmt_bytes(free), ' is free: ', fmt_bytes(empty),
              ' in wholly free segments (cached; `empty_cache()` returns it), ', fmt_bytes(pending),
              ' waiting for other streams, and ', fmt_bytes(unusable), ' outside the largest hole of its segment — ', fmt_pct(pct),
              ' of the free memory cannot serve a request as large as that hole.',
              CASE WHEN ref_health LIKE 'ERR%' OR ref_health LIKE 'WARN%'
                   THEN concat(' (snap_overview''s threshold rule says ', ref_health, '; that counts cached free memory as fragmentation.)') END) AS problem,
       concat_ws(chr(10),
           concat(segments, ' segments, ', free_pieces, ' free pieces, largest free block ', COALESCE(fmt_bytes(largest_free), '—')),
           CASE WHEN kind = 'fragmentation' AND settings IS NOT NULL THEN concat('allocator settings: ', settings) END) AS evidence,
       concat_ws(chr(10),
           CASE WHEN empty > 0 THEN concat(fmt_bytes(empty), ' sits in ', empty_segments,
                ' wholly free cached segment(s): `torch.cuda.empty_cache()` (torch_npu: `torch.npu.empty_cache()`) hands it back to the device for other processes.') END,
           CASE WHEN kind = 'fragmentation' AND expandable
                THEN 'Expandable segments are already on, so a split limit (`max_split_size_mb`) has little left to do: reduce what is live at the peak instead (the largest holders are listed with the peak).' END,
           CASE WHEN kind = 'fragmentation' AND NOT expandable
                THEN 'Set `expandable_segments:True` (PYTORCH_CUDA_ALLOC_CONF / PYTORCH_NPU_ALLOC_CONF): segments then grow in place, so memory freed in one place serves the next large request.' END,
           CASE WHEN kind = 'fragmentation' AND NOT expandable
                THEN 'Where expandable segments cannot be used, set `max_split_size_mb:N` instead: cached blocks larger than N MB are then never split, which keeps big holes for big requests.' END,
           CASE WHEN kind = 'fragmentation'
                THEN 'Set `garbage_collection_threshold:0.8` to free unused cached blocks before the limit is reached (it acts relative to the per-process memory fraction), instead of a costly flush-and-retry under pressure.' END,
           CASE WHEN kind = 'fragmentation'
                THEN 'Call `empty_cache()` to return wholly free cached segments to the device; it does not fix holes inside segments that still hold live blocks.' END
       ) AS advice,
       CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('snapshot', snapshot, 'device', device, 'reserved_bytes', reserved, 'free_bytes', free,
                   'cached_free_bytes', empty, 'empty_segments', empty_segments, 'pending_free_bytes', pending,
                   'fragmented_bytes', unusable, 'frag_pct', round(pct, 2), 'largest_free_bytes', largest_free,
                   'internal_waste_bytes', internal_waste, 'overview_health', ref_health) AS figures
FROM kinds
