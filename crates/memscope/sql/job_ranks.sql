-- job_ranks: the ranks of a job as ingested — one row per rank with its node, NPU, pid, files, rows and time span.
--
-- From table sources: every source is placed in the job by its path at ingest (its rank
-- written in the path, rank3 or rank_3, else the processes numbered by node, NPU and pid;
-- its node the folder named node<N>/host<N>/worker<N>/…, else the input folder's name;
-- docs/scale-out.md). Pids repeat across machines, so a rank is never keyed by pid alone.
-- first_ts/last_ts come from the rank's events.
--
-- Rows come in no particular order: ORDER BY rank.
-- @column rank      BIGINT  rank of the job
-- @column node      VARCHAR machine of the rank
-- @column device    VARCHAR NPU of the rank (device_<N>); NULL when the path names none
-- @column pid       BIGINT  process id of the rank; NULL when the path names none
-- @column sources   BIGINT  count: input files of the rank
-- @column dumps     BIGINT  count: msMemScope dumps among them (CSV or db)
-- @column rows      BIGINT  count: rows ingested from them
-- @column rejects   BIGINT  count: records rejected
-- @column size_bytes BIGINT bytes: size of its input files
-- @column first_ts  BIGINT  ns: first event of the rank, ns; NULL without events
-- @column last_ts   BIGINT  ns: last event of the rank, ns
-- each rank's time range from table event_counts (counted at ingest: the events' own range)
WITH span AS (
    SELECT rank, MIN(first_ts) AS first_ts, MAX(last_ts) AS last_ts
    FROM event_counts
    GROUP BY rank
)
SELECT s.rank, MIN(s.node) AS node, MIN(s.device) AS device, MIN(s.pid) AS pid,
       COUNT(*) AS sources,
       COUNT(*) FILTER (WHERE s.kind IN ('memscope_csv', 'memscope_db')) AS dumps,
       SUM(s.rows) AS rows, SUM(s.rejects) AS rejects, SUM(s.size_bytes) AS size_bytes,
       MIN(p.first_ts) AS first_ts, MAX(p.last_ts) AS last_ts
FROM sources s
LEFT JOIN span p ON p.rank = s.rank
GROUP BY s.rank
