-- snap_peak_blocks: the allocations live at the active-memory peak (snap_peak), largest first, with their user frame.
--
-- For each snapshot and device, the allocations of snap_allocations alive just after the entry
-- active_peak_seq (or before the first entry when the peak is there): allocated at or before it
-- (or before the window) and not freed by then. Their sizes add up to active_peak. Allocations
-- made before the window that were freed inside it have no allocation stack in the trace; their
-- free-site stack is given instead (free_stack_id), as MemoryViz shows it. Both inputs are
-- read from what ingest derived from the trace (snap_lifetimes, snap_trace_levels), not
-- windowed from it; the answer is as large as the allocations live at the peak.
--
-- @column snapshot      VARCHAR the snapshot (source name)
-- @column device        BIGINT  device ordinal
-- @column peak_seq      BIGINT  seq of the peak entry (snap_peak.active_peak_seq; -1 = before the first entry)
-- @column peak_bytes    BIGINT  bytes: the active peak (snap_peak.active_peak)
-- @column rank          UBIGINT rank by size (1 = largest; ties: earlier allocation, then address)
-- @column addr          UBIGINT pointer: block address
-- @column size          BIGINT  bytes: requested by the caller
-- @column pct_of_peak   DOUBLE  percent: size / peak_bytes, 2 decimals
-- @column origin        VARCHAR in_window (allocated by an entry of the trace) or before_window
-- @column alloc_seq     BIGINT  seq of its alloc entry; NULL when allocated before the window
-- @column free_seq      BIGINT  seq of the entry that frees it later; NULL when it is never freed in the window
-- @column end_kind      VARCHAR freed, live (still allocated in the final state) or unended (see snap_allocations)
-- @column block_id      BIGINT  its final block (snap_blocks.block_id) when still live at the end; NULL otherwise
-- @column stack_id      BIGINT  allocation stack (snap_frames.stack_id); NULL when unknown
-- @column free_stack_id BIGINT  free-site stack, for allocations without an allocation stack; NULL otherwise
-- @column call_path     VARCHAR text: the reference's call path of the allocation stack; '(no stack)' when none
-- @column user_frame    VARCHAR text: first user frame of the allocation stack (or of the free site when there is none)
-- @column user_path     VARCHAR text: up to 5 user Python frames of that stack, innermost first
-- @column label         VARCHAR user_metadata of its alloc entry (e.g. a module FQN from component tracking); NULL when empty or allocated before the window
WITH
at_peak AS (
    SELECT a.*, p.active_peak_seq AS peak_seq, p.active_peak AS peak_bytes,
           CASE WHEN a.stack_id IS NULL THEN a.free_stack_id END AS shown_free_stack
    FROM snap_allocations a
    JOIN snap_peak p ON p.snapshot = a.snapshot AND p.device = a.device
    WHERE (a.alloc_seq IS NULL OR a.alloc_seq <= COALESCE(p.active_peak_seq, -1))
      AND (a.free_seq IS NULL OR a.free_seq > COALESCE(p.active_peak_seq, -1))
)
SELECT a.snapshot, a.device, a.peak_seq, a.peak_bytes,
       ROW_NUMBER() OVER (PARTITION BY a.snapshot, a.device ORDER BY a.size DESC, a.alloc_seq NULLS FIRST, a.addr) AS rank,
       a.addr, a.size,
       round(100.0 * CAST(a.size AS DOUBLE) / CAST(NULLIF(a.peak_bytes, 0) AS DOUBLE), 2) AS pct_of_peak,
       a.origin, a.alloc_seq, a.free_seq, a.end_kind, a.block_id, a.stack_id,
       a.shown_free_stack AS free_stack_id,
       COALESCE(s.call_path, '(no stack)') AS call_path,
       COALESCE(s.user_frame, f.user_frame) AS user_frame,
       COALESCE(s.user_path, f.user_path) AS user_path,
       t.user_metadata AS label
FROM at_peak a
LEFT JOIN snap_stacks s ON s.snapshot = a.snapshot AND s.stack_id = a.stack_id
LEFT JOIN snap_stacks f ON f.snapshot = a.snapshot AND f.stack_id = a.shown_free_stack
-- Only labelled alloc entries are joined: most traces have none, and the join stays small.
-- `IS NOT NULL` first: an all-NULL column is then skipped, where `<> ''` alone decoded it for
-- every entry (1.6 s of a 16.9 M-entry trace against 0.04 s).
LEFT JOIN (SELECT snapshot, device, seq, user_metadata FROM snap_traces
           WHERE user_metadata IS NOT NULL AND user_metadata <> '' AND action = 'alloc') t
       ON t.snapshot = a.snapshot AND t.device = a.device AND t.seq = a.alloc_seq
