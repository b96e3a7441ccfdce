-- peak_blocks: who holds the peak — the blocks live at the peak of every pool of each process and device, with owner, category, user frame and whether each is static or dynamic memory.
--
-- The twin of snap_peak_blocks for msMemScope dumps. The peak of a series (source, pid,
-- device, pool) is the first row where its paired live bytes (curve.live_bytes, computed at
-- ingest) reach their highest value; the blocks live just after that row — allocated at or
-- before it in canonical order (ts, row_idx) and not ended by it (blocks.end_ts/end_row, the
-- end-state rule of every view) — add up to peak_bytes exactly. Blocks whose MALLOC was never
-- seen (allocated before collection) have no place on the curve and are not listed.
-- user_frame is the innermost user frame of the MALLOC's Python stack (function user_frame:
-- outside Python's library, site-packages, torch, torch_npu, CANN; docs/attribution.md);
-- category is categorize(owner, user_frame) with the default rules (weights, gradients,
-- optimizer_state, kv_cache, activations, workspace, communication, stock, framework_pool,
-- runtime, other).
-- Static memory is alive for the whole window: allocated before the first step of its process
-- and device started (table steps) — or, without steps, in the first 10 % of the series' time
-- span — and never released (held at the end of the data: weights, optimizer state,
-- communication buffers). Everything else is dynamic (activations, temporaries, caches that
-- come and go). peak_split sums these rows by category and by user frame.
--
-- A dump whose MALLOC and FREE rows cannot be paired (view pairing: MALLOC only or FREE only)
-- has no row: its live bytes, and so its peak, cannot be concluded.
-- Rows come in no particular order: ORDER BY source, pid, device, pool, rank.
-- @column source       VARCHAR input file
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id as written
-- @column pool         VARCHAR pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)
-- @column peak_ts      BIGINT  ns: time of the first row reaching the peak, ns
-- @column peak_bytes   BIGINT  bytes: live bytes of the series at the peak (= the sum of size over its rows here)
-- @column rank         UBIGINT count: rank by size (1 = largest; ties: earlier allocation, then address)
-- @column ptr          UBIGINT pointer: block address
-- @column size         BIGINT  bytes: block size
-- @column pct_of_peak  DOUBLE  percent: size / peak_bytes × 100, 2 decimals
-- @column owner        VARCHAR full owner string of the MALLOC; NULL when it had none
-- @column owner_group  VARCHAR level-1 group of the owner, '(unlabelled)' when none
-- @column category     VARCHAR categorize(owner, user_frame): weights, gradients, optimizer_state, kv_cache, activations, workspace, communication, stock, framework_pool, runtime, other, unknown
-- @column user_frame   VARCHAR innermost user frame of the MALLOC's Python stack (`file(line): function`); NULL without a stack or user frame
-- @column kind         VARCHAR static (allocated before the window started and never released) or dynamic
-- @column alloc_ts     BIGINT  ns: MALLOC time, ns
-- @column age_ns       BIGINT  duration_ns: peak_ts - alloc_ts, how long the block had been live at the peak
-- @column held_at_end  BOOLEAN the block is never released (still live at the end of the data)
-- @column stock        BOOLEAN stock memory (allocated before collection started, promoted by the tool)
-- @column stack_py     VARCHAR the MALLOC's whole Python call stack
WITH
-- the first row of each series reaching its highest live bytes, and the series' time span
peak_rows AS (
    SELECT source, pid, device, pool,
           MAX(live_bytes) AS peak_bytes,
           first_value(ts ORDER BY live_bytes DESC, ts, row_idx) AS peak_ts,
           first_value(row_idx ORDER BY live_bytes DESC, ts, row_idx) AS peak_row,
           MIN(ts) AS first_ts, MAX(ts) AS last_ts
    FROM curve
    WHERE ts IS NOT NULL
      AND source IN (SELECT source FROM pairing WHERE can_pair)
    GROUP BY source, pid, device, pool
),
-- where the window starts: the first step of the process and device
first_steps AS (
    SELECT source, pid, device, MIN(start_ts) AS first_step_ts
    FROM steps
    GROUP BY source, pid, device
),
live AS (
    SELECT b.source, b.pid, b.device, b.pool, p.peak_ts, p.peak_bytes,
           b.ptr, COALESCE(b.size, 0) AS size, b.owner, b.alloc_ts, b.alloc_row, b.held_at_end, b.stock,
           b.stack_py,
           user_frame(b.stack_py) AS user_frame,
           b.held_at_end AND b.alloc_ts < COALESCE(f.first_step_ts, p.first_ts + (p.last_ts - p.first_ts) / 10) AS is_static
    -- the few peaks first: the side a join holds in memory (the blocks stream past it)
    FROM peak_rows p
    JOIN blocks b
      ON p.source = b.source AND (p.pid IS NOT DISTINCT FROM b.pid) AND p.device = b.device AND p.pool = b.pool
    LEFT JOIN first_steps f
      ON f.source = b.source AND (f.pid IS NOT DISTINCT FROM b.pid) AND f.device = b.device
    WHERE b.alloc_ts IS NOT NULL
      AND (b.alloc_ts < p.peak_ts OR (b.alloc_ts = p.peak_ts AND b.alloc_row <= p.peak_row))
      AND (b.end_ts IS NULL OR b.end_ts > p.peak_ts OR (b.end_ts = p.peak_ts AND b.end_row > p.peak_row))
)
SELECT source, pid, device, pool, peak_ts, peak_bytes,
       ROW_NUMBER() OVER (PARTITION BY source, pid, device, pool ORDER BY size DESC, alloc_ts, alloc_row, ptr) AS rank,
       ptr, size,
       round(100.0 * CAST(size AS DOUBLE) / CAST(NULLIF(peak_bytes, 0) AS DOUBLE), 2) AS pct_of_peak,
       owner, owner_group(owner) AS owner_group,
       categorize(CASE WHEN stock AND (owner IS NULL OR owner = '') THEN '(stock)' ELSE owner END, user_frame) AS category,
       user_frame,
       CASE WHEN is_static THEN 'static' ELSE 'dynamic' END AS kind,
       alloc_ts, peak_ts - alloc_ts AS age_ns, held_at_end, stock, stack_py
FROM live
