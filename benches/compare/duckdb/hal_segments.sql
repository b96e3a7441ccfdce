-- hal_segments(min_bytes): HAL MALLOCs of at least $MIN_BYTES bytes, with alloc/page type, how
-- and when each segment ended (memq view hal_segments).
SELECT e.pid, e.device, e.ts, e.ptr, e.size, e.owner,
       NULLIF(regexp_extract(e.attr, '[{,]alloc_type:([^,}]*)', 1), '') AS alloc_type,
       NULLIF(regexp_extract(e.attr, '[{,]page_type:([^,}]*)', 1), '') AS page_type,
       e.shadow AS stock, b.free_ts, COALESCE(b.free_kind, 'none') AS free_kind,
       b.free_ts - e.ts AS lifetime_ns
FROM events e
LEFT JOIN blocks b ON b.alloc_row = e.row_idx
WHERE e.event = 'MALLOC' AND e.event_type = 'HAL' AND e.size >= $MIN_BYTES
ORDER BY e.size DESC, e.ts
