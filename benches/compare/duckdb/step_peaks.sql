-- step_peaks: the view of views.sql (it is shared with oom_findings.sql, as memq's view is).
SELECT * FROM step_peaks ORDER BY pid, device, pool, start_ts
