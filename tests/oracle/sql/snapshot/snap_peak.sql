-- snap_peak: start, peak and end of active and reserved memory over the trace window, per snapshot and device (PyTorch's MemoryViz method).
--
-- From snap_timeline (docs/formats/snapshot.md §6.2, figures of §7.2): `active` = requested bytes of
-- live allocations, including those made before the ring-buffer window; `reserved` = segment
-- bytes. start = the state before the first entry, end = after the last entry (= the final
-- state), peak = the highest value over start and every entry; the peak's seq is the first entry
-- reaching it, -1 when the state before the first entry already is the peak. A device with
-- segments but no trace entries gets start = peak = end from the final state and NULL seqs.
--
-- The figure that `snapshot_analyze.py --mode peak` reports (the snapshot analysis scripts of
-- the "ascend-npu-snapshot-analyzer" skill in the mindstudio-agent package) is kept beside it
-- as reference_peak: the highest net segment growth since the start of the window, replayed
-- from zero over segment events only (NULL when there is none, as that script then reports "no
-- timeline data"). It is not a memory level: segments that existed before the window are not
-- counted (docs/formats/snapshot.md §5.5; docs/reference-differences.md).
--
-- In plain words:
--   reference_peak answers "how much more memory did the allocator reserve from the device
--   during the recorded window, at most, than at its start?" It starts at 0 at the first trace
--   entry, adds a segment's size when one is reserved (segment_alloc / segment_map) and takes it
--   away when one is released (segment_free / segment_unmap), and keeps the highest value. It
--   ignores tensors being allocated and freed inside segments and everything reserved before
--   the window, so it is usually far below the real peak (cuda_transformer_forward.pickle:
--   4 114 612 224 bytes against an active peak of 17 602 723 840): read active_peak and
--   reserved_peak for "how much memory did the program need".
--   active_end / active_peak count what the program asked for (each block's requested_size).
--   PyTorch hands out blocks rounded up (at least to a multiple of 512 bytes, and a reused
--   cached block may be larger still), so snap_overview.active_bytes — the same live and
--   pending-free blocks counted at their rounded size — is larger than active_end by that
--   rounding; allocated_bytes vs requested_bytes in snap_overview shows the same gap for the
--   live blocks alone.
--
-- @column snapshot            VARCHAR the snapshot (source name)
-- @column device              BIGINT  device ordinal
-- @column entries             BIGINT  count: trace entries of the device
-- @column active_start        BIGINT  bytes: requested bytes of live allocations before the first entry
-- @column active_peak         BIGINT  bytes: highest requested bytes of live allocations
-- @column active_peak_seq     BIGINT  seq of the first entry reaching active_peak; -1 = before the first entry; NULL without entries
-- @column active_peak_time_us BIGINT  us: time of that entry, µs; NULL when unknown
-- @column active_end          BIGINT  bytes: requested bytes of live allocations after the last entry (the final active_allocated and active_pending_free blocks at the size the program asked for); at most snap_overview.active_bytes, which counts the same blocks at the size PyTorch rounded them up to (the difference is the rounding: bytes the blocks occupy but no tensor asked for)
-- @column reserved_start      BIGINT  bytes: reserved (segment) bytes before the first entry
-- @column reserved_peak       BIGINT  bytes: highest reserved bytes
-- @column reserved_peak_seq   BIGINT  seq of the first entry reaching reserved_peak; -1 = before the first entry; NULL without entries
-- @column reserved_end        BIGINT  bytes: reserved bytes after the last entry (= Σ total_size of the final segments)
-- @column reference_peak      BIGINT  bytes: the reference's "peak", not a memory level: the most memory reserved during the trace window beyond what was reserved at its start (segment reservations minus releases, from 0; tensors and segments older than the window not counted); NULL without segment events
-- @column reference_peak_seq  BIGINT  seq of the segment event setting reference_peak (the first segment event when growth never exceeds 0)
-- @column trace_wrapped       BOOLEAN the device's trace ring buffer wrapped (snap_info section trace: frees of addresses it never allocated, or a single entry): the start and peak only cover the entries kept; NULL without entries
WITH
devices AS (
    SELECT DISTINCT snapshot, device FROM snap_segments
    UNION
    SELECT DISTINCT snapshot, device FROM snap_traces
),
-- the final state, for devices without entries
final_active AS (
    SELECT snapshot, device, SUM(requested_size) AS bytes
    FROM snap_blocks
    WHERE state IN ('active_allocated', 'active_pending_free')
    GROUP BY snapshot, device
),
final_reserved AS (
    SELECT snapshot, device, SUM(total_size) AS bytes FROM snap_segments GROUP BY snapshot, device
),
final_state AS (
    SELECT d.snapshot, d.device, COALESCE(a.bytes, 0) AS active_bytes, COALESCE(r.bytes, 0) AS reserved_bytes
    FROM devices d
    LEFT JOIN final_active a ON a.snapshot = d.snapshot AND a.device = d.device
    LEFT JOIN final_reserved r ON r.snapshot = d.snapshot AND r.device = d.device
),
series AS (
    SELECT snapshot, device,
           COUNT(*) AS entries,
           first_value(active_bytes - active_delta ORDER BY seq) AS active_start,
           MAX(active_bytes) AS active_max,
           first_value(seq ORDER BY active_bytes DESC, seq) AS active_max_seq,
           first_value(time_us ORDER BY active_bytes DESC, seq) AS active_max_time_us,
           last_value(active_bytes ORDER BY seq) AS active_end,
           first_value(reserved_bytes - reserved_delta ORDER BY seq) AS reserved_start,
           MAX(reserved_bytes) AS reserved_max,
           first_value(seq ORDER BY reserved_bytes DESC, seq) AS reserved_max_seq,
           last_value(reserved_bytes ORDER BY seq) AS reserved_end
    FROM snap_timeline
    GROUP BY snapshot, device
),
-- the reference's replay, over segment events only
reference AS (
    SELECT snapshot, device,
           MAX(segment_growth_bytes) AS growth_max,
           first_value(seq ORDER BY segment_growth_bytes DESC, seq) AS growth_max_seq,
           MIN(seq) AS first_segment_seq
    FROM snap_timeline
    WHERE action IN ('segment_alloc', 'segment_map', 'segment_free', 'segment_unmap')
    GROUP BY snapshot, device
),
wrapped AS (
    SELECT snapshot, item AS device, value = 'true' AS wrapped
    FROM snap_info
    WHERE section = 'trace' AND key = 'wrapped'
)
SELECT d.snapshot, d.device,
       COALESCE(s.entries, 0) AS entries,
       COALESCE(s.active_start, f.active_bytes) AS active_start,
       COALESCE(GREATEST(s.active_start, s.active_max), f.active_bytes) AS active_peak,
       CASE WHEN s.entries IS NULL THEN NULL
            WHEN s.active_start >= s.active_max THEN -1
            ELSE s.active_max_seq END AS active_peak_seq,
       CASE WHEN s.active_start < s.active_max THEN s.active_max_time_us END AS active_peak_time_us,
       COALESCE(s.active_end, f.active_bytes) AS active_end,
       COALESCE(s.reserved_start, f.reserved_bytes) AS reserved_start,
       COALESCE(GREATEST(s.reserved_start, s.reserved_max), f.reserved_bytes) AS reserved_peak,
       CASE WHEN s.entries IS NULL THEN NULL
            WHEN s.reserved_start >= s.reserved_max THEN -1
            ELSE s.reserved_max_seq END AS reserved_peak_seq,
       COALESCE(s.reserved_end, f.reserved_bytes) AS reserved_end,
       CASE WHEN r.growth_max IS NULL THEN NULL
            WHEN r.growth_max > 0 THEN r.growth_max
            ELSE 0 END AS reference_peak,
       CASE WHEN r.growth_max IS NULL THEN NULL
            WHEN r.growth_max > 0 THEN r.growth_max_seq
            ELSE r.first_segment_seq END AS reference_peak_seq,
       CASE WHEN s.entries IS NOT NULL THEN COALESCE(w.wrapped, false) END AS trace_wrapped
FROM devices d
JOIN final_state f ON f.snapshot = d.snapshot AND f.device = d.device
LEFT JOIN series s ON s.snapshot = d.snapshot AND s.device = d.device
LEFT JOIN reference r ON r.snapshot = d.snapshot AND r.device = d.device
LEFT JOIN wrapped w ON w.snapshot = d.snapshot AND w.device = d.device
