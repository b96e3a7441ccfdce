-- snap_timeline_points: active and reserved bytes after every trace entry (snap_timeline's curve), stored with the dataset so that a range of entries is read, not replayed.
--
-- One row per trace entry, per snapshot and device: snap_timeline's seq, active_bytes and
-- reserved_bytes. snap_timeline replays the whole trace (running sums and window functions over
-- every entry) on each query; this view is computed once when the dataset is built and stored
-- in seq order, so a query for a range of entries of one device (the timeline of `memq serve`
-- zoomed in, docs/serve.md) reads only the row groups whose seq statistics overlap it.
--
-- Rows are ordered by snapshot, device, seq.
-- Stored with the dataset when it is built (a replay of every entry, read by range).
-- @stored
-- @column snapshot       VARCHAR the snapshot (source name)
-- @column device         BIGINT  device ordinal
-- @column seq            BIGINT  0-based position of the entry in its device list (snap_traces.seq)
-- @column active_bytes   BIGINT  bytes: requested bytes of live allocations after the entry (snap_timeline.active_bytes)
-- @column reserved_bytes BIGINT  bytes: reserved (segment) bytes after the entry (snap_timeline.reserved_bytes)
SELECT snapshot, device, seq, active_bytes, reserved_bytes
FROM snap_timeline
ORDER BY snapshot, device, seq
