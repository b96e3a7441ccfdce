-- snap_long_lived: allocations still live at the end that were made before the trace window or in its first 20 %, with their age and stack.
--
-- From snap_allocations (allocations live in the final state), per snapshot and device, N = trace
-- entries of the device: long_lived = allocated before the window, or by an alloc entry with
-- seq < floor(0.2 × N). Such blocks survived (almost) the whole recorded window: model state, caches
-- or leaks — the stack tells which.
-- The snapshot analysis scripts of the "ascend-npu-snapshot-analyzer" skill (mindstudio-agent
-- package), in their leak mode (`snapshot_analyze.py --mode leak`), count something else: live
-- blocks whose *segment* was created in the first 20 % of all trace entries (by a
-- segment_alloc/segment_map of that address on any device). That flag is kept as
-- reference_long_lived, and rows with only that flag are listed too; blocks of segments created
-- before the window can never have it, even when they are the oldest
-- (docs/formats/snapshot.md §4.5; docs/reference-differences.md).
--
-- @column snapshot             VARCHAR the snapshot (source name)
-- @column device               BIGINT  device ordinal
-- @column block_id             BIGINT  the block in the final state (snap_blocks.block_id)
-- @column addr                 UBIGINT pointer: block address
-- @column size                 BIGINT  bytes: requested by the caller
-- @column block_size           BIGINT  bytes: the block occupies (after rounding)
-- @column state_at_end         VARCHAR active_allocated or active_pending_free
-- @column origin               VARCHAR before_window or in_window
-- @column alloc_seq            BIGINT  seq of its alloc entry; NULL when allocated before the window
-- @column alloc_time_us        BIGINT  us: time of its alloc entry, µs; NULL when unknown
-- @column age_entries          BIGINT  count: trace entries after its alloc entry; NULL when allocated before the window (older than the window)
-- @column age_us               BIGINT  µs from its alloc entry to the device's last entry; NULL when unknown
-- @column window_entries       BIGINT  count: trace entries of the device (N)
-- @column long_lived           BOOLEAN true when allocated before the window or at seq < floor(0.2 × N)
-- @column reference_long_lived BOOLEAN true when `snapshot_analyze.py --mode leak` counts it (its segment was created at trace index < floor(0.2 × all entries))
-- @column stack_id             BIGINT  allocation stack (snap_frames.stack_id); NULL when unknown
-- @column call_path            VARCHAR text: the call path as snapshot_analyze.py displays it (snap_stacks); '(no stack)' when none
-- @column user_frame           VARCHAR text: first user frame (snap_stacks)
WITH
-- entry counts, last seq and time per device, counted at ingest
window_sizes AS (
    SELECT snapshot, device, entries, last_seq, last_time_us FROM snap_trace_levels
),
snapshot_sizes AS (
    SELECT snapshot, SUM(entries) AS entries FROM snap_trace_levels GROUP BY snapshot
),
-- the reference: first segment creation per address, over all devices
segment_created AS (
    SELECT snapshot, addr, MIN(seq) AS first_seq
    FROM snap_traces
    WHERE action IN ('segment_alloc', 'segment_map')
    GROUP BY snapshot, addr
),
reference_blocks AS (
    SELECT b.snapshot, b.block_id
    FROM snap_blocks b
    JOIN snap_segments g ON g.snapshot = b.snapshot AND g.segment_id = b.segment_id
    JOIN segment_created c ON c.snapshot = g.snapshot AND c.addr = g.address
    JOIN snapshot_sizes n ON n.snapshot = b.snapshot
    WHERE b.state = 'active_allocated' AND c.first_seq < CAST(floor(0.2 * n.entries) AS BIGINT)
),
live AS (
    SELECT a.*, COALESCE(w.entries, 0) AS window_entries, w.last_seq, w.last_time_us,
           a.origin = 'before_window' OR a.alloc_seq < CAST(floor(0.2 * w.entries) AS BIGINT) AS long_lived,
           r.block_id IS NOT NULL AS reference_long_lived
    FROM snap_allocations a
    LEFT JOIN window_sizes w ON w.snapshot = a.snapshot AND w.device = a.device
    LEFT JOIN reference_blocks r ON r.snapshot = a.snapshot AND r.block_id = a.block_id
    WHERE a.end_kind = 'live'
)
SELECT l.snapshot, l.device, l.block_id, l.addr, l.size, l.block_size, l.state_at_end, l.origin,
       l.alloc_seq, l.alloc_time_us,
       l.last_seq - l.alloc_seq AS age_entries,
       l.last_time_us - l.alloc_time_us AS age_us,
       l.window_entries, l.long_lived, l.reference_long_lived,
       l.stack_id,
       COALESCE(s.call_path, '(no stack)') AS call_path,
       s.user_frame
FROM live l
LEFT JOIN snap_stacks s ON s.snapshot = l.snapshot AND s.stack_id = l.stack_id
WHERE l.long_lived OR l.reference_long_lived
