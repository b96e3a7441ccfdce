-- snap_block_states: blocks of the final state by state, per snapshot and device: count, bytes, requested bytes, share of reserved.
--
-- States: active_allocated (held by a tensor), active_pending_free (freed by the user, still in
-- use on another stream; PyTorch's TypedDict spelling active_awaiting_free is read as this) and
-- inactive (cached free). The reference's `get_block_state_dist` gives count, bytes and average;
-- requested bytes and the share of reserved memory are added here.
--
-- @column snapshot        VARCHAR the snapshot (source name)
-- @column device          BIGINT  device ordinal
-- @column state           VARCHAR active_allocated, active_pending_free or inactive
-- @column blocks          BIGINT  count: blocks in the state
-- @column bytes           BIGINT  bytes: occupied by those blocks (Σ size, after rounding)
-- @column avg_bytes       DOUBLE  bytes: average block size (fractional)
-- @column requested_bytes BIGINT  bytes: the callers asked for (Σ requested_size; 0 for inactive blocks)
-- @column pct_of_reserved DOUBLE  percent: bytes / all block bytes of the device (= reserved), 2 decimals
WITH
per_state AS (
    SELECT snapshot, device, state,
           COUNT(*) AS blocks,
           SUM(size) AS bytes,
           AVG(CAST(size AS DOUBLE)) AS avg_bytes,
           SUM(CASE WHEN state = 'inactive' THEN 0 ELSE COALESCE(requested_size, 0) END) AS requested_bytes
    FROM snap_blocks
    GROUP BY snapshot, device, state
)
SELECT snapshot, device, state, blocks, bytes, avg_bytes, requested_bytes,
       round(100.0 * CAST(bytes AS DOUBLE) / CAST(NULLIF(SUM(bytes) OVER (PARTITION BY snapshot, device), 0) AS DOUBLE), 2) AS pct_of_reserved
FROM per_state
