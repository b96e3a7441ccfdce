-- snap_top_blocks: live blocks of the final state, largest first, with their segment and a readable call path.
--
-- Every active_allocated block, ranked per snapshot and device by size (largest first, lower
-- block_id first on ties, as the reference's `get_top_blocks_with_stack` orders them; take
-- `WHERE rank <= 10` for its table). call_path is the reference's display of the allocation stack
-- (docs/formats/snapshot.md §4.0, see snap_stacks); with C++ stacks it shows allocator plumbing, so
-- user_frame / user_path give the code that asked for the memory.
--
-- @column snapshot        VARCHAR the snapshot (source name)
-- @column device          BIGINT  device ordinal
-- @column rank            UBIGINT rank by size within the snapshot and device (1 = largest)
-- @column block_id        BIGINT  the block (snap_blocks.block_id)
-- @column address         UBIGINT pointer: block address
-- @column size            BIGINT  bytes: the block occupies (after rounding)
-- @column requested_size  BIGINT  bytes: the caller asked for
-- @column rounding_waste  BIGINT  bytes: lost to rounding (size - requested_size)
-- @column segment_id      BIGINT  its segment (snap_segments.segment_id)
-- @column segment_address UBIGINT pointer: base address of its segment
-- @column segment_size    BIGINT  bytes: of its segment (total_size)
-- @column segment_type    VARCHAR large or small
-- @column stack_id        BIGINT  allocation stack (snap_frames.stack_id); NULL when allocated before recording started
-- @column call_path       VARCHAR text: the reference's call path; '(no stack)' when none was recorded
-- @column user_frame      VARCHAR text: first user frame (snap_stacks); NULL when none
-- @column user_path       VARCHAR text: up to 5 user Python frames, innermost first (snap_stacks); NULL when none
-- @column label           VARCHAR user_metadata of the alloc entry that made the block (e.g. a module FQN from component tracking); NULL when empty or allocated before the trace window
SELECT b.snapshot, b.device,
       ROW_NUMBER() OVER (PARTITION BY b.snapshot, b.device ORDER BY b.size DESC, b.block_id) AS rank,
       b.block_id, b.address, b.size, b.requested_size,
       b.size - b.requested_size AS rounding_waste,
       b.segment_id, g.address AS segment_address, g.total_size AS segment_size, g.segment_type,
       b.stack_id,
       COALESCE(s.call_path, '(no stack)') AS call_path,
       s.user_frame, s.user_path,
       NULLIF(b.user_metadata, '') AS label
FROM snap_blocks b
JOIN snap_segments g ON g.snapshot = b.snapshot AND g.segment_id = b.segment_id
LEFT JOIN snap_stacks s ON s.snapshot = b.snapshot AND s.stack_id = b.stack_id
WHERE b.state = 'active_allocated'
