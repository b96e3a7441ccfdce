-- snap_oom: every OOM entry with the memory state at that moment, the allocations just before it and a verdict that compares their stacks.
--
-- One row per `oom` trace entry. The context is the 50 entries of the same device before it (the
-- reference's methodology); its `alloc` entries are the candidates. The first allocations after
-- the OOM (within 50 entries) are listed too: they show what the program did next (a retry, a
-- smaller request). Verdict, first rule that holds:
--   insufficient_data         fewer than 3 allocations in the context;
--   same_stack_repeated       one allocation stack (identical frames: the same stack_id) made at least
--                             3 of the last 5 allocations before the OOM — repeated_stack_id says which;
--   run_of_large_allocations  the last 5 allocations add up to more than 3 × device_free;
--   single_oversized_request  otherwise: one request larger than what the device had left.
-- The reference differs (docs/formats/snapshot.md §4.6, §7.4): it takes the 5 *largest* allocations of
-- the context, and calls two stacks equal when the first 60 characters of their JSON text are,
-- which with C++ stacks is always (every one starts with the unwinder frame), so it nearly always
-- answers "same stack repeated". Its verdict is kept as reference_verdict, computed its way
-- (docs/reference-differences.md).
--
-- @column snapshot            VARCHAR  the snapshot (source name)
-- @column device              BIGINT   device ordinal
-- @column seq                 BIGINT   seq of the oom entry
-- @column time_us             BIGINT   us: time of the oom entry, µs; NULL when not recorded
-- @column requested_bytes     BIGINT   bytes: of the request that failed
-- @column device_free         BIGINT   bytes: the driver reported free at the OOM; NULL when not recorded
-- @column active_bytes        BIGINT   bytes: requested bytes of live allocations at the OOM (snap_timeline)
-- @column reserved_bytes      BIGINT   bytes: reserved at the OOM (snap_timeline)
-- @column stack_id            BIGINT   stack of the failed request (snap_frames.stack_id); NULL when none
-- @column user_frame          VARCHAR  text: first user frame of that stack (snap_stacks)
-- @column context_allocs      BIGINT   count: alloc entries among the 50 entries before the OOM
-- @column context_alloc_bytes BIGINT   bytes: requested by those allocations
-- @column last_allocs         STRUCT[] the last 5 allocations before the OOM, newest first: list of {seq, size (bytes), stack_id, user_frame}
-- @column last_allocs_bytes   BIGINT   bytes: Σ size of last_allocs
-- @column next_allocs         STRUCT[] the first 5 allocations within 50 entries after the OOM, oldest first: list of {seq, size (bytes), stack_id, user_frame}; NULL when there is none
-- @column distinct_stacks     BIGINT   count: distinct stacks among last_allocs (a missing stack counts as one)
-- @column repeated_stack_id   BIGINT   the stack with the most of last_allocs (ties: the newest); NULL when no stack repeats
-- @column repeated_count      BIGINT   count: allocations of last_allocs made by repeated_stack_id (0 when none repeats)
-- @column verdict             VARCHAR  insufficient_data, same_stack_repeated, run_of_large_allocations or single_oversized_request
-- @column largest_allocs      STRUCT[] the reference's list: the 5 largest allocations of the context (its 51 entries up to the OOM), ascending as it prints them: list of {seq, size (bytes), stack_id, user_frame}
-- @column reference_verdict   VARCHAR  the reference's verdict (insufficient_data, same_stack_repeated, run_of_large_allocations, single_oversized_request) computed its way
WITH
ooms AS (
    SELECT t.snapshot, t.device, t.seq, t.time_us, t.size AS requested_bytes, t.device_free, t.stack_id,
           tl.active_bytes, tl.reserved_bytes
    FROM snap_traces t
    LEFT JOIN snap_timeline tl ON tl.snapshot = t.snapshot AND tl.device = t.device AND tl.seq = t.seq
    WHERE t.action = 'oom'
),
-- the first 60 characters of the reference's frames_json of every stack (its "same stack" key)
frame_json AS (
    SELECT snapshot, stack_id, depth,
           '{"name": "' || replace(replace(COALESCE(name, ''), '\', '\\'), '"', '\"')
             || '", "filename": "' || replace(replace(COALESCE(filename, ''), '\', '\\'), '"', '\"')
             || '", "line": ' || CAST(CASE WHEN line = -1 THEN 18446744073709551615 ELSE COALESCE(line, 0) END AS VARCHAR) || '}' AS part
    FROM snap_frames
    WHERE depth < 2
),
reference_keys AS (
    SELECT snapshot, stack_id, substr('[' || string_agg(part, ', ' ORDER BY depth), 1, 60) AS stack_key
    FROM frame_json
    GROUP BY snapshot, stack_id
),
-- alloc entries from 50 before each OOM to 50 after it
around AS (
    SELECT o.snapshot, o.device, o.seq AS oom_seq, t.seq, t.size, t.stack_id,
           COALESCE(k.stack_key, '(none)') AS reference_key,
           s.user_frame
    FROM ooms o
    JOIN snap_traces t
      ON t.snapshot = o.snapshot AND t.device = o.device AND t.action = 'alloc'
     AND t.seq >= o.seq - 50 AND t.seq <= o.seq + 50
    LEFT JOIN snap_stacks s ON s.snapshot = t.snapshot AND s.stack_id = t.stack_id
    LEFT JOIN reference_keys k ON k.snapshot = t.snapshot AND k.stack_id = t.stack_id
),
context AS (
    SELECT *,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device, oom_seq ORDER BY seq DESC) AS newest,
           ROW_NUMBER() OVER (PARTITION BY snapshot, device, oom_seq ORDER BY size DESC, seq) AS largest
    FROM around
    WHERE seq < oom_seq
),
following AS (
    SELECT snapshot, device, oom_seq,
           array_agg(named_struct('seq', seq, 'size', size, 'stack_id', stack_id, 'user_frame', user_frame) ORDER BY seq) AS next_allocs
    FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY snapshot, device, oom_seq ORDER BY seq) AS n
        FROM around
        WHERE seq > oom_seq
    ) a
    WHERE n <= 5
    GROUP BY snapshot, device, oom_seq
),
context_sums AS (
    SELECT snapshot, device, oom_seq,
           COUNT(*) AS context_allocs,
           SUM(size) AS context_alloc_bytes,
           array_agg(named_struct('seq', seq, 'size', size, 'stack_id', stack_id, 'user_frame', user_frame) ORDER BY seq DESC)
             FILTER (WHERE newest <= 5) AS last_allocs,
           SUM(CASE WHEN newest <= 5 THEN size ELSE 0 END) AS last_allocs_bytes,
           COUNT(DISTINCT CASE WHEN newest <= 5 THEN COALESCE(stack_id, -1) END) AS distinct_stacks,
           array_agg(named_struct('seq', seq, 'size', size, 'stack_id', stack_id, 'user_frame', user_frame) ORDER BY largest DESC)
             FILTER (WHERE largest <= 5) AS largest_allocs,
           SUM(CASE WHEN largest <= 5 THEN 1 ELSE 0 END) AS largest_count,
           SUM(CASE WHEN largest <= 5 THEN size ELSE 0 END) AS largest_bytes
    FROM context
    GROUP BY snapshot, device, oom_seq
),
-- stacks repeating among the last 5 allocations (memq) and reference keys among the 5 largest
repeats AS (
    SELECT snapshot, device, oom_seq,
           first_value(stack_id ORDER BY n DESC, newest_seq DESC) AS repeated_stack_id,
           MAX(n) AS repeated_count
    FROM (
        SELECT snapshot, device, oom_seq, stack_id, COUNT(*) AS n, MAX(seq) AS newest_seq
        FROM context
        WHERE newest <= 5 AND stack_id IS NOT NULL
        GROUP BY snapshot, device, oom_seq, stack_id
        HAVING COUNT(*) >= 2
    ) r
    GROUP BY snapshot, device, oom_seq
),
reference_repeats AS (
    SELECT snapshot, device, oom_seq, MAX(n) AS n
    FROM (
        SELECT snapshot, device, oom_seq, reference_key, COUNT(*) AS n
        FROM context
        WHERE largest <= 5
        GROUP BY snapshot, device, oom_seq, reference_key
    ) r
    GROUP BY snapshot, device, oom_seq
)
SELECT o.snapshot, o.device, o.seq, o.time_us, o.requested_bytes, o.device_free,
       o.active_bytes, o.reserved_bytes, o.stack_id, s.user_frame,
       COALESCE(c.context_allocs, 0) AS context_allocs,
       COALESCE(c.context_alloc_bytes, 0) AS context_alloc_bytes,
       c.last_allocs,
       COALESCE(c.last_allocs_bytes, 0) AS last_allocs_bytes,
       n.next_allocs,
       COALESCE(c.distinct_stacks, 0) AS distinct_stacks,
       r.repeated_stack_id,
       COALESCE(r.repeated_count, 0) AS repeated_count,
       CASE WHEN o.requested_bytes > 0 AND o.reserved_bytes - o.active_bytes >= o.requested_bytes THEN 'fragmentation'
            WHEN COALESCE(c.context_allocs, 0) < 3 THEN 'insufficient_data'
            WHEN COALESCE(r.repeated_count, 0) >= 3 THEN 'same_stack_repeated'
            WHEN o.device_free IS NOT NULL AND c.last_allocs_bytes > 3 * o.device_free THEN 'run_of_large_allocations'
            ELSE 'single_oversized_request' END AS verdict,
       c.largest_allocs,
       CASE WHEN COALESCE(c.largest_count, 0) < 3 THEN 'insufficient_data'
            WHEN rr.n >= 3 THEN 'same_stack_repeated'
            WHEN c.largest_bytes > 3 * o.device_free THEN 'run_of_large_allocations'
            ELSE 'single_oversized_request' END AS reference_verdict
FROM ooms o
LEFT JOIN snap_stacks s ON s.snapshot = o.snapshot AND s.stack_id = o.stack_id
LEFT JOIN context_sums c ON c.snapshot = o.snapshot AND c.device = o.device AND c.oom_seq = o.seq
LEFT JOIN following n ON n.snapshot = o.snapshot AND n.device = o.device AND n.oom_seq = o.seq
LEFT JOIN repeats r ON r.snapshot = o.snapshot AND r.device = o.device AND r.oom_seq = o.seq
LEFT JOIN reference_repeats rr ON rr.snapshot = o.snapshot AND rr.device = o.device AND rr.oom_seq = o.seq
