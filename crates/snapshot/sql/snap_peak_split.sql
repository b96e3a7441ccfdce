-- snap_peak_split: what holds memory at each device's active peak, by user frame and by category.
--
-- Sums of snap_peak_blocks (the allocations live at the peak; see there): one row per snapshot,
-- device, dimension (user_frame or category) and key, with the bytes and allocations live at
-- the peak under that key. The rows of one dimension add up to peak_bytes. This is the answer to
-- "what holds memory at the peak" that ten anonymous blocks are not: e.g. Adam's state at
-- optimizer.py:74 and :75 and the gradients made by AccumulateGrad, each as one row. The twin of
-- peak_split for msMemScope dumps.
--
-- user_frame follows snap_stacks' rule (the user's Python frame; else a library frame that is
-- not plumbing; else autograd's work, e.g. 'gradients (AccumulateGrad)'; else a native frame that
-- is not allocator or dispatch machinery); '(no stack)' when the allocation has no stack and
-- '(no user frame)' when no frame of its stack qualifies. category is categorize(NULL,
-- user_frame) with the default rules (docs/attribution.md): the frame rules alone, snapshots
-- have no owners.
--
-- Rows come in no particular order: ORDER BY snapshot, device, dimension, bytes DESC.
-- @column snapshot            VARCHAR the snapshot (source name)
-- @column device              BIGINT  device ordinal
-- @column peak_seq            BIGINT  seq of the peak entry (snap_peak.active_peak_seq; -1 = before the first entry)
-- @column peak_bytes          BIGINT  bytes: the active peak (snap_peak.active_peak)
-- @column dimension           VARCHAR user_frame or category: what key is
-- @column key                 VARCHAR the user frame, or the category
-- @column bytes               BIGINT  bytes: live at the peak under this key (requested sizes)
-- @column before_window_bytes BIGINT  bytes: of those, allocated before the trace window (no alloc entry)
-- @column blocks              BIGINT  count: allocations live at the peak under this key
-- @column pct_of_peak         DOUBLE  percent: bytes / peak_bytes × 100, 2 decimals
WITH
framed AS (
    SELECT snapshot, device, peak_seq, peak_bytes, size, origin,
           COALESCE(user_frame,
                    CASE WHEN stack_id IS NULL AND free_stack_id IS NULL THEN '(no stack)' ELSE '(no user frame)' END) AS frame,
           categorize(CAST(NULL AS VARCHAR), user_frame) AS category
    FROM snap_peak_blocks
),
keyed AS (
    SELECT snapshot, device, peak_seq, peak_bytes, size, origin, 'user_frame' AS dimension, frame AS key FROM framed
    UNION ALL
    SELECT snapshot, device, peak_seq, peak_bytes, size, origin, 'category' AS dimension, category AS key FROM framed
)
SELECT snapshot, device, MAX(peak_seq) AS peak_seq, MAX(peak_bytes) AS peak_bytes, dimension, key,
       SUM(size) AS bytes,
       COALESCE(SUM(size) FILTER (WHERE origin = 'before_window'), 0) AS before_window_bytes,
       COUNT(*) AS blocks,
       round(100.0 * CAST(SUM(size) AS DOUBLE) / CAST(NULLIF(MAX(peak_bytes), 0) AS DOUBLE), 2) AS pct_of_peak
FROM keyed
GROUP BY snapshot, device, dimension, key
