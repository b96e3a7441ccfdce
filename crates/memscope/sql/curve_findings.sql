-- curve_findings: the shape of each pool's memory curve — described, never judged a leak (rows of view findings).
--
-- Per series (the primary metric: live for HAL, used for the framework pools; HOST_PINNED
-- left out) over curve_buckets(240): the values at the end of the buckets that hold points, in
-- time order, classified by curve_shape (docs/formats/memscope.md §6.16) with the turning
-- points of curve_turns. "highest" is the series' peak (view peaks), which a short spike inside
-- one bucket keeps, not the highest bucket end. A rise is information only: whether memory
-- grows is the leak rule's to decide (leak_findings.sql), on what is held at the end of each
-- step or after the warm-up, never on a curve's ends. Only the shapes worth a word become
-- findings (rising, staircase, rising_with_dips, spike_then_drop, mixed: info); a plateau or a
-- saw-tooth is normal and a curve of fewer than 3 buckets has no shape.
--
-- @private
-- @part findings
-- @column section      VARCHAR curves
-- @column ord          BIGINT  rank: series by device, pool, process and file
-- @column kind         VARCHAR curve_shape
-- @column severity     VARCHAR info
-- @column pid          BIGINT  process id
-- @column device       VARCHAR Device Id as written
-- @column pool         VARCHAR pool
-- @column place        VARCHAR device D
-- @column bytes        BIGINT  bytes: the series' peak
-- @column title        VARCHAR Device D POOL: shape
-- @column problem      VARCHAR what the shape means
-- @column evidence     VARCHAR one per line
-- @column advice       VARCHAR NULL
-- @column missing      VARCHAR NULL
-- @column collect_with VARCHAR NULL
-- @column figures      VARCHAR JSON object
WITH
start AS (SELECT MIN(first_ts) AS t0 FROM event_counts WHERE first_ts > 0),
series AS (
    SELECT source, pid, device, pool, metric, COUNT(*) AS buckets,
           array_agg(end_bytes ORDER BY bucket) AS vals,
           array_agg(t0 / 2 + t1 / 2 ORDER BY bucket) AS mids,
           FIRST_VALUE(end_bytes ORDER BY bucket) AS first_bytes,
           LAST_VALUE(end_bytes ORDER BY bucket) AS last_bytes,
           MAX(max_bytes) AS bucket_max
    FROM curve_buckets(240)
    WHERE metric = CASE WHEN pool = 'HAL' THEN 'live' ELSE 'used' END AND pool <> 'HOST_PINNED'
      AND points > 0 AND t0 IS NOT NULL AND t1 IS NOT NULL
      AND min_bytes IS NOT NULL AND max_bytes IS NOT NULL AND end_bytes IS NOT NULL
    GROUP BY source, pid, device, pool, metric
),
shaped AS (
    SELECT s.*, curve_shape(s.vals) AS shape, curve_turns(s.vals) AS turns,
           COALESCE(p.peak_bytes, s.bucket_max) AS highest,
           CAST(ROW_NUMBER() OVER (ORDER BY s.device, s.pool, s.pid, s.source) AS BIGINT) AS k
    FROM series s
    LEFT JOIN peaks p ON p.source = s.source AND p.pid = s.pid AND p.device = s.device AND p.pool = s.pool
                     AND p.metric = s.metric AND (p.can_pair OR p.metric <> 'live')
),
turn_points AS (
    SELECT k, string_agg(point, '; ' ORDER BY t) AS text, array_agg(point ORDER BY t) AS list
    FROM (SELECT k, t, concat(fmt_bytes(array_element(vals, t)), ' at +',
                              fmt_duration(array_element(mids, t) - COALESCE((SELECT t0 FROM start), array_element(mids, t)))) AS point,
                 ROW_NUMBER() OVER (PARTITION BY k ORDER BY t) AS r
          FROM (SELECT k, vals, mids, unnest(turns) AS t FROM shaped))
    WHERE r <= 5 GROUP BY k
),
words(shape, words, meaning) AS (VALUES
    ('rising', 'rises and does not come back down within the data',
     'whether that is a leak is decided in the leaks section, on what is held at the end of each step (or, without steps, after the warm-up), not on the curve''s ends'),
    ('staircase', 'climbs in steps and does not come back down within the data',
     'whether that is a leak is decided in the leaks section, on what is held at the end of each step (or, without steps, after the warm-up), not on the curve''s ends'),
    ('rising_with_dips', 'rises overall, with dips',
     'growth under normal alloc/free cycles: check the level at the end of each step (section 4)'),
    ('spike_then_drop', 'peaks, then falls back',
     'a transient peak: the breakdown at the peak (section 3) says what it was'),
    ('mixed', 'moves up and down without a clear pattern', 'no shape rule applies')
)
SELECT 'curves' AS section, s.k AS ord, 'curve_shape' AS kind, 'info' AS severity, s.pid, s.device, s.pool,
       concat('device ', s.device) AS place, s.highest AS bytes,
       concat('Device ', s.device, ' ', s.pool, ': ', replace(s.shape, '_', ' ')) AS title,
       concat('The ', s.pool, ' ', s.metric, ' curve ', w.words, ': ', w.meaning, '.') AS problem,
       concat_ws(chr(10),
           concat(s.buckets, ' buckets: first ', COALESCE(fmt_bytes(s.first_bytes), '—'), ', highest ', COALESCE(fmt_bytes(s.highest), '—'),
                  ', last ', COALESCE(fmt_bytes(s.last_bytes), '—')),
           CASE WHEN t.text IS NOT NULL THEN concat('turning points: ', t.text) END) AS evidence,
       CAST(NULL AS VARCHAR) AS advice, CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('pid', s.pid, 'device', s.device, 'pool', s.pool, 'metric', s.metric, 'shape', s.shape,
                   'first_bytes', s.first_bytes, 'max_bytes', s.highest, 'last_bytes', s.last_bytes, 'buckets', s.buckets,
                   'turning_points', COALESCE(t.list, make_array())) AS figures
FROM shaped s
JOIN words w ON w.shape = s.shape
LEFT JOIN turn_points t ON t.k = s.k
