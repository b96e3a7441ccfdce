-- leak_candidates: blocks with a MALLOC still held at the end: no FREE at all, or only a
-- shadow fill-in at exit (memq view leak_candidates; fates as in view block_fates).
SELECT pid, device, pool, ptr, size,
       COALESCE(owner, CASE WHEN stock THEN '(stock)' ELSE pool END) AS owner,
       alloc_ts,
       CASE WHEN free_kind = 'shadow' THEN free_ts END AS last_shadow_ts,
       CASE fate WHEN 'never_freed' THEN 'no_free' ELSE 'shadow_fill' END AS reason,
       stock
FROM block_fates
WHERE held_at_end AND alloc_ts IS NOT NULL
ORDER BY pid, device, pool, alloc_ts, alloc_row
