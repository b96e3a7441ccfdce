-- snap_segment_types: segments of the final state by pool (large/small), per snapshot and device: count, reserved, allocated and free bytes.
--
-- The large pool serves requests above 1 MiB (segments of 2 MiB upwards, often 20 MiB), the small
-- pool the rest (2 MiB segments). Private pools (CUDA graphs, MemPool: segment_pool_id other than
-- (0, 0)) and expandable segments are counted per type.
--
-- @column snapshot              VARCHAR the snapshot (source name)
-- @column device                BIGINT  device ordinal
-- @column segment_type          VARCHAR large or small
-- @column segments              BIGINT  count: segments of the type
-- @column reserved_bytes        BIGINT  bytes: reserved (Σ total_size)
-- @column allocated_bytes       BIGINT  bytes: of live blocks after rounding (Σ allocated_size)
-- @column requested_bytes       BIGINT  bytes: requested by the callers of live blocks (Σ requested_size)
-- @column free_bytes            BIGINT  bytes: reserved but not allocated (reserved - allocated)
-- @column largest_segment_bytes BIGINT  bytes: the largest segment
-- @column expandable_segments   BIGINT  count: expandable segments among them
-- @column private_pool_segments BIGINT  count: segments of a private pool (pool id other than (0, 0))
SELECT snapshot, device, segment_type,
       COUNT(*) AS segments,
       SUM(total_size) AS reserved_bytes,
       SUM(allocated_size) AS allocated_bytes,
       SUM(requested_size) AS requested_bytes,
       SUM(total_size) - SUM(allocated_size) AS free_bytes,
       MAX(total_size) AS largest_segment_bytes,
       SUM(CASE WHEN is_expandable THEN 1 ELSE 0 END) AS expandable_segments,
       SUM(CASE WHEN COALESCE(pool_id_0, 0) <> 0 OR COALESCE(pool_id_1, 0) <> 0 THEN 1 ELSE 0 END) AS private_pool_segments
FROM snap_segments
GROUP BY snapshot, device, segment_type
