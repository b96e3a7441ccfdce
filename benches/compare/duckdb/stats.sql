-- stats: rows per (pid, device, event, event_type) and the time range (memq view stats; the
-- reference's --stats).
SELECT pid, device, event, event_type, COUNT(*) AS rows,
       MIN(ts) AS first_ts, MAX(ts) AS last_ts,
       COUNT(*) FILTER (WHERE event = 'MALLOC' AND owner IS NOT NULL) AS owned_mallocs,
       COUNT(*) FILTER (WHERE event = 'FREE' AND shadow) AS shadow_frees
FROM events
GROUP BY ALL
ORDER BY pid, device, event, event_type
