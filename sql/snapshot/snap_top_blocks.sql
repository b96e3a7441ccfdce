-- snap_top_blocks: live blocks of the final state, largest first, with their segment and a readable call path.
--
-- Every active_allocated block, ranked per snapshot and device by size (largest first, lower
-- block_id first on ties, as the reference's `get_top_blocks_with_stack` orders them; take
-- `WHERE rank <= 10` for its table). call_path is the reference's display of the allocation stack
-- (snapshot-format.md §4.0, see snap_stacks); with C++ stacks it shows allocator plumbing, so
-- user_frame / user_path give the code that asked for the memory.
--
-- @column snapshot         the snapshot (source name)
-- @column device           device ordinal
-- @column rank             rank by size within the snapshot and device (1 = largest)
-- @column block_id         the block (snap_blocks.block_id)
-- @column address          block address
-- @column size             bytes the block occupies (after rounding)
-- @column requested_size   bytes the caller asked for
-- @column rounding_waste   bytes lost to rounding (size - requested_size)
-- @column segment_id       its segment (snap_segments.segment_id)
-- @column segment_address  base address of its segment
-- @column segment_size     bytes of its segment (total_size)
-- @column segment_type     large or small
-- @column stack_id         allocation stack (snap_frames.stack_id); NULL when allocated before recording started
-- @column call_path        text: the reference's call path; '(no stack)' when none was recorded
-- @column user_frame       text: first user frame (snap_stacks); NULL when none
-- @column user_path        text: up to 5 user Python frames, innermost first (snap_stacks); NULL when none
SELECT b.snapshot, b.device,
       ROW_NUMBER() OVER (PARTITION BY b.snapshot, b.device ORDER BY b.size DESC, b.block_id) AS rank,
       b.block_id, b.address, b.size, b.requested_size,
       b.size - b.requested_size AS rounding_waste,
       b.segment_id, g.address AS segment_address, g.total_size AS segment_size, g.segment_type,
       b.stack_id,
       COALESCE(s.call_path, '(no stack)') AS call_path,
       s.user_frame, s.user_path
FROM snap_blocks b
JOIN snap_segments g ON g.snapshot = b.snapshot AND g.segment_id = b.segment_id
LEFT JOIN snap_stacks s ON s.snapshot = b.snapshot AND s.stack_id = b.stack_id
WHERE b.state = 'active_allocated'
