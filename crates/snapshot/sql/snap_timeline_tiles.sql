-- snap_timeline_tiles: the active and reserved curve of every snapshot device folded into tiles of 8, 64, 512, 4 096, 32 768 and 262 144 trace entries — each tile's first and last entry and each metric's minimum, maximum and last value.
--
-- Tile `tile` of width `width` holds the entries with `seq div width = tile` (seq from
-- snap_timeline_points). A window of entries is drawn from the tiles of the widest width that
-- still gives one per pixel (docs/serve.md, "How it stays fast"): widths are 8 apart, so a
-- window of up to 262 144 entries a pixel reads at most 8 rows a pixel. Folding is exact: the
-- maximum over the tiles of a range is the maximum over its entries, so the highest tile of a
-- device is snap_peak's peak when the peak is reached at an entry.
--
-- Rows are ordered by snapshot, device, width, tile.
-- Stored with the dataset when it is built (a pass over every entry).
-- @stored
-- @column snapshot     VARCHAR the snapshot (source name)
-- @column device       BIGINT  device ordinal
-- @column width        BIGINT  count: trace entries per tile: 8, 64, 512, 4096, 32768 or 262144
-- @column tile         BIGINT  the tile: seq div width
-- @column seq_min      BIGINT  the tile's first entry (snap_traces.seq)
-- @column seq_max      BIGINT  the tile's last entry (snap_traces.seq)
-- @column entries      BIGINT  count: entries in the tile
-- @column active_min   BIGINT  bytes: lowest active_bytes after an entry of the tile
-- @column active_max   BIGINT  bytes: highest active_bytes after an entry of the tile
-- @column active_last  BIGINT  bytes: active_bytes after the tile's last entry
-- @column reserved_min BIGINT  bytes: lowest reserved_bytes after an entry of the tile
-- @column reserved_max BIGINT  bytes: highest reserved_bytes after an entry of the tile
-- @column reserved_last BIGINT bytes: reserved_bytes after the tile's last entry
SELECT p.snapshot, p.device, w.width, p.seq / w.width AS tile,
       MIN(p.seq) AS seq_min, MAX(p.seq) AS seq_max, COUNT(*) AS entries,
       MIN(p.active_bytes) AS active_min, MAX(p.active_bytes) AS active_max,
       last_value(p.active_bytes ORDER BY p.seq) AS active_last,
       MIN(p.reserved_bytes) AS reserved_min, MAX(p.reserved_bytes) AS reserved_max,
       last_value(p.reserved_bytes ORDER BY p.seq) AS reserved_last
FROM snap_timeline_points p
CROSS JOIN (VALUES (CAST(8 AS BIGINT)), (CAST(64 AS BIGINT)), (CAST(512 AS BIGINT)), (CAST(4096 AS BIGINT)),
                   (CAST(32768 AS BIGINT)), (CAST(262144 AS BIGINT))) AS w(width)
GROUP BY p.snapshot, p.device, w.width, p.seq / w.width
ORDER BY snapshot, device, width, tile
