-- input_findings: records of any input that memq could not parse (rows of view findings).
--
-- When table sources counts rejected records (kept in table rejects with file, offset and
-- reason), one warning says how many and how to look at them: the figures leave them out.
--
-- @private
-- @part findings
-- @column section      VARCHAR sources
-- @column ord          BIGINT  rank: 100
-- @column kind         VARCHAR rejects
-- @column severity     VARCHAR warning
-- @column pid          BIGINT  process id: NULL
-- @column device       VARCHAR NULL
-- @column pool         VARCHAR NULL
-- @column place        VARCHAR NULL
-- @column bytes        BIGINT  bytes: NULL
-- @column title        VARCHAR N record(s) could not be parsed
-- @column problem      VARCHAR sentences
-- @column evidence     VARCHAR NULL
-- @column advice       VARCHAR how to look at them
-- @column missing      VARCHAR NULL
-- @column collect_with VARCHAR NULL
-- @column figures      VARCHAR JSON object: rejects (count)
SELECT 'sources' AS section, CAST(100 AS BIGINT) AS ord, 'rejects' AS kind, 'warning' AS severity, CAST(NULL AS BIGINT) AS pid,
       CAST(NULL AS VARCHAR) AS device, CAST(NULL AS VARCHAR) AS pool, CAST(NULL AS VARCHAR) AS place, CAST(NULL AS BIGINT) AS bytes,
       concat(rejects, ' record(s) could not be parsed') AS title,
       'Some input records were unreadable; figures leave them out.' AS problem,
       CAST(NULL AS VARCHAR) AS evidence,
       'Look at them: `memq sql INPUT -e "SELECT * FROM rejects"`.' AS advice,
       CAST(NULL AS VARCHAR) AS missing, CAST(NULL AS VARCHAR) AS collect_with,
       json_object('rejects', rejects) AS figures
FROM (SELECT CAST(SUM(rejects) AS BIGINT) AS rejects FROM sources)
WHERE rejects > 0
