-- The DuckDB user's "ingest" of one msMemScope dump CSV: read it with read_csv, pull the
-- memory fields out of Attr with regexp_extract, sort by time (ties keep file order: the
-- canonical order of docs/formats/memscope.md §2.8, the same as the reference's --sort), store
-- it as a native table of the .duckdb file and write a Parquet copy. $CSV and $PARQUET are
-- replaced by the driver (duck.py).
--
-- Attr keys: size/used/total/owner are never the first key of a MALLOC/FREE Attr (allocation_id
-- or addr is), so ',key:' finds them (and not req_size, process_used, ...).
-- The file is first loaded as it is (DuckDB keeps insertion order, so rowid = position in the
-- file), then sorted; `row_idx` is that position, the tie-breaker memq uses as well.
CREATE TEMP TABLE raw AS
SELECT *
FROM read_csv($CSV, header = true, delim = ',', quote = '"', escape = '"',
              columns = {'ID': 'BIGINT', 'Event': 'VARCHAR', 'Event Type': 'VARCHAR',
                         'Name': 'VARCHAR', 'Timestamp(ns)': 'BIGINT', 'Process Id': 'VARCHAR',
                         'Thread Id': 'VARCHAR', 'Device Id': 'VARCHAR', 'Ptr': 'VARCHAR',
                         'Attr': 'VARCHAR', 'Call Stack(Python)': 'VARCHAR',
                         'Call Stack(C)': 'VARCHAR'});

CREATE TABLE events AS
SELECT rowid AS row_idx,
       "ID" AS id,
       "Event" AS event,
       "Event Type" AS event_type,
       "Name" AS name,
       "Timestamp(ns)" AS ts,
       TRY_CAST("Process Id" AS BIGINT) AS pid,
       TRY_CAST("Thread Id" AS BIGINT) AS tid,
       "Device Id" AS device,
       "Ptr" AS ptr,
       TRY_CAST(NULLIF(regexp_extract("Attr", ',size:(-?[0-9]+)', 1), '') AS BIGINT) AS size,
       TRY_CAST(NULLIF(regexp_extract("Attr", ',used:(-?[0-9]+)', 1), '') AS BIGINT) AS used,
       TRY_CAST(NULLIF(regexp_extract("Attr", ',total:(-?[0-9]+)', 1), '') AS BIGINT) AS total,
       NULLIF(trim(regexp_extract("Attr", ',owner:([^,}]*)', 1)), '') AS owner,
       COALESCE(contains("Attr", 'shadow:true'), false) AS shadow,
       "Attr" AS attr,
       "Call Stack(Python)" AS stack_py,
       "Call Stack(C)" AS stack_c
FROM raw
ORDER BY ts NULLS LAST, row_idx;

COPY events TO $PARQUET (FORMAT parquet);
