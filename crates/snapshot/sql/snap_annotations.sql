-- snap_annotations: notes attached to live blocks after their allocation (trace action annotate), with the allocation they label.
--
-- Newer PyTorch records an `annotate` trace entry when a note is attached to memory already
-- allocated (`torch.cuda.memory._annotate_memory` / `_annotate_tensor`): its addr is the block's,
-- its user_metadata the note. Each note is matched to the latest alloc entry of the same address
-- before it (its label, the alloc's user_metadata, e.g. a module FQN from component tracking) and
-- to the block that alloc made when that block is still live at dump time. Device traces and the
-- pinned host trace alike (column memory). Empty when no snapshot has annotate entries.
--
-- @column memory         VARCHAR device (snap_traces) or host (snap_host_traces)
-- @column snapshot       VARCHAR the snapshot (source name)
-- @column device         BIGINT  device ordinal (-1 = the host)
-- @column seq            BIGINT  seq of the annotate entry
-- @column time_us        BIGINT  us: time of the note, µs; NULL when not recorded
-- @column addr           UBIGINT pointer: the annotated block's address
-- @column size           BIGINT  bytes: as the entry gives them
-- @column note           VARCHAR the note (the entry's user_metadata)
-- @column alloc_seq      BIGINT  seq of the latest alloc entry of that address before the note; NULL when allocated before the window
-- @column label          VARCHAR user_metadata of that alloc entry; NULL when empty or unknown
-- @column block_id       BIGINT  the block that alloc made, when still live at dump time (snap_blocks / snap_host_blocks .block_id); NULL otherwise
-- @column stack_id       BIGINT  stack of the annotate call (snap_frames.stack_id); NULL when none was recorded
WITH
ev AS (
    SELECT 'device' AS memory, snapshot, device, seq, time_us, action, addr, size, user_metadata, stack_id
    FROM snap_traces WHERE action IN ('annotate', 'alloc')
    UNION ALL
    SELECT 'host' AS memory, snapshot, device, seq, time_us, action, addr, size, user_metadata, stack_id
    FROM snap_host_traces WHERE action IN ('annotate', 'alloc')
),
-- the last alloc of the same address before each entry: a running maximum over the entries
-- of that address (an equality partition, not a join on seq < seq)
marked AS (
    SELECT ev.*,
           max(CASE WHEN action = 'alloc' THEN seq END) OVER (
               PARTITION BY memory, snapshot, device, addr ORDER BY seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS alloc_seq
    FROM ev
),
notes AS (SELECT * FROM marked WHERE action = 'annotate'),
blocks AS (
    SELECT 'device' AS memory, snapshot, block_id, alloc_seq, device, address FROM snap_blocks
    WHERE alloc_seq IS NOT NULL
    UNION ALL
    SELECT 'host' AS memory, snapshot, block_id, alloc_seq, device, address FROM snap_host_blocks
    WHERE alloc_seq IS NOT NULL
)
SELECT n.memory, n.snapshot, n.device, n.seq, n.time_us, n.addr, n.size,
       n.user_metadata AS note,
       n.alloc_seq,
       NULLIF(a.user_metadata, '') AS label,
       b.block_id,
       n.stack_id
FROM notes n
LEFT JOIN ev a ON a.memory = n.memory AND a.snapshot = n.snapshot AND a.device = n.device
              AND a.seq = n.alloc_seq AND a.action = 'alloc'
LEFT JOIN blocks b ON b.memory = n.memory AND b.snapshot = n.snapshot AND b.alloc_seq = n.alloc_seq
                  AND b.address = n.addr
