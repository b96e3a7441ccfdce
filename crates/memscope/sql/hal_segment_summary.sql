-- hal_segment_summary: HAL MALLOCs per process and device by driver call (alloc / create), and whether expandable segments are in use.
--
-- Counts every HAL MALLOC (all sizes). `alloc` = halMemAlloc (classic segments), `create` =
-- halMemCreate (physical pages mapped into expandable segments), `other` = no alloc_type
-- recorded (G1/G2 writers). Promoted shadow MALLOCs (stock memory from before collection) are
-- written as `create` by the tool regardless of reality, so they are counted apart and do not
-- make the verdict. Difference from the reference `--hal-segments`: the summary is always
-- given (the reference prints it only when some segment passes --min-size), and promoted
-- blocks do not trigger the verdict (docs/reference-differences.md).
--
-- Rows come in no particular order.
-- @column source              VARCHAR input file
-- @column pid                 BIGINT  process id
-- @column device              VARCHAR Device Id as written
-- @column segments            BIGINT  count: HAL MALLOCs
-- @column total_bytes         BIGINT  bytes: sum of their sizes
-- @column alloc_segments      BIGINT  count: alloc_type alloc
-- @column alloc_bytes         BIGINT  bytes: of alloc_type alloc
-- @column create_segments     BIGINT  count: alloc_type create, promoted shadow rows excluded
-- @column create_bytes        BIGINT  bytes: of those
-- @column other_segments      BIGINT  count: no alloc_type (or an unknown value), promoted shadow rows excluded
-- @column other_bytes         BIGINT  bytes: of those
-- @column stock_segments      BIGINT  count: promoted shadow MALLOCs (memory allocated before collection)
-- @column stock_bytes         BIGINT  bytes: of those
-- @column ge_100mib_segments  BIGINT  count: segments of at least 100 MiB
-- @column ge_100mib_bytes     BIGINT  bytes: of those
-- @column largest_bytes       BIGINT  bytes: of the largest segment
-- @column expandable_segments BOOLEAN verdict: the process made a non-promoted alloc_type:create HAL MALLOC (on any device of this file)
WITH
-- the HAL MALLOC rows of events (table hal_mallocs: copied out at ingest)
hal_rows AS (
    SELECT source, pid, device, COALESCE(size, 0) AS size, alloc_type, shadow AS stock
    FROM hal_mallocs
),
per_device AS (
    SELECT source, pid, device,
           COUNT(*) AS segments,
           SUM(size) AS total_bytes,
           COUNT(*) FILTER (WHERE NOT stock AND alloc_type = 'alloc') AS alloc_segments,
           COALESCE(SUM(size) FILTER (WHERE NOT stock AND alloc_type = 'alloc'), 0) AS alloc_bytes,
           COUNT(*) FILTER (WHERE NOT stock AND alloc_type = 'create') AS create_segments,
           COALESCE(SUM(size) FILTER (WHERE NOT stock AND alloc_type = 'create'), 0) AS create_bytes,
           COUNT(*) FILTER (WHERE NOT stock AND (alloc_type IS NULL OR alloc_type NOT IN ('alloc', 'create'))) AS other_segments,
           COALESCE(SUM(size) FILTER (WHERE NOT stock AND (alloc_type IS NULL OR alloc_type NOT IN ('alloc', 'create'))), 0) AS other_bytes,
           COUNT(*) FILTER (WHERE stock) AS stock_segments,
           COALESCE(SUM(size) FILTER (WHERE stock), 0) AS stock_bytes,
           COUNT(*) FILTER (WHERE size >= 104857600) AS ge_100mib_segments,
           COALESCE(SUM(size) FILTER (WHERE size >= 104857600), 0) AS ge_100mib_bytes,
           MAX(size) AS largest_bytes
    FROM hal_rows
    GROUP BY source, pid, device
)
SELECT *,
       bool_or(create_segments > 0) OVER (PARTITION BY source, pid) AS expandable_segments
FROM per_device
