-- snap_host_memory: pinned host memory per snapshot: what the host allocator holds at dump time and its peaks over the host trace.
--
-- One row per snapshot that recorded pinned host memory (`record_pinned_host_memory=True`):
-- the final state from snap_host_segments / snap_host_blocks and the highest levels of
-- snap_host_timeline (the earliest event reaching each). A peak is never below the level at the
-- start of the window nor below the final state. Device memory is in snap_overview and
-- snap_peak; this view never mixes the two.
--
-- @column snapshot             VARCHAR the snapshot (source name)
-- @column host_segments        BIGINT  count: host segments at dump time
-- @column reserved_bytes       BIGINT  bytes: pinned bytes the host allocator holds at dump time (sum of total_size)
-- @column allocated_bytes      BIGINT  bytes: of live host blocks (rounded block sizes)
-- @column active_bytes         BIGINT  bytes: requested by the callers of live host blocks
-- @column live_blocks          BIGINT  count: live host blocks (active_allocated, active_pending_free)
-- @column trace_entries        BIGINT  count: host trace events (snap_host_traces)
-- @column active_peak          BIGINT  bytes: highest active (requested) level over the host trace
-- @column active_peak_seq      BIGINT  seq of the first host event reaching it; NULL when the peak is the final state without events
-- @column reserved_peak        BIGINT  bytes: highest reserved level over the host trace
-- @column reserved_peak_seq    BIGINT  seq of the first host event reaching it; NULL as for active_peak_seq
WITH
seg AS (
    SELECT snapshot, count(*) AS host_segments, sum(total_size) AS reserved_bytes
    FROM snap_host_segments GROUP BY snapshot
),
blk AS (
    SELECT snapshot,
           sum(size) AS allocated_bytes,
           sum(requested_size) AS active_bytes,
           count(*) AS live_blocks
    FROM snap_host_blocks
    WHERE state IN ('active_allocated', 'active_pending_free')
    GROUP BY snapshot
),
tl AS (
    SELECT snapshot, seq, active_bytes, reserved_bytes,
           ROW_NUMBER() OVER (PARTITION BY snapshot ORDER BY active_bytes DESC, device, seq) AS active_rank,
           ROW_NUMBER() OVER (PARTITION BY snapshot ORDER BY reserved_bytes DESC, device, seq) AS reserved_rank
    FROM snap_host_timeline
),
tr AS (
    SELECT snapshot, count(*) AS trace_entries FROM snap_host_traces GROUP BY snapshot
),
snaps AS (
    SELECT snapshot FROM seg UNION SELECT snapshot FROM tr
)
SELECT s.snapshot,
       COALESCE(g.host_segments, 0) AS host_segments,
       COALESCE(g.reserved_bytes, 0) AS reserved_bytes,
       COALESCE(b.allocated_bytes, 0) AS allocated_bytes,
       COALESCE(b.active_bytes, 0) AS active_bytes,
       COALESCE(b.live_blocks, 0) AS live_blocks,
       COALESCE(t.trace_entries, 0) AS trace_entries,
       greatest(COALESCE(a.active_bytes, 0), COALESCE(b.active_bytes, 0)) AS active_peak,
       CASE WHEN a.active_bytes >= COALESCE(b.active_bytes, 0) THEN a.seq END AS active_peak_seq,
       greatest(COALESCE(r.reserved_bytes, 0), COALESCE(g.reserved_bytes, 0)) AS reserved_peak,
       CASE WHEN r.reserved_bytes >= COALESCE(g.reserved_bytes, 0) THEN r.seq END AS reserved_peak_seq
FROM snaps s
LEFT JOIN seg g ON g.snapshot = s.snapshot
LEFT JOIN blk b ON b.snapshot = s.snapshot
LEFT JOIN tr t ON t.snapshot = s.snapshot
LEFT JOIN tl a ON a.snapshot = s.snapshot AND a.active_rank = 1
LEFT JOIN tl r ON r.snapshot = s.snapshot AND r.reserved_rank = 1
