//! The memscope tables: declared once, with a doc per column.

use datafusion::arrow::datatypes::DataType::{
    Boolean, Float64, Int32, Int64, UInt32, UInt64, Utf8,
};

use std::sync::Arc;

use datafusion::arrow::datatypes as arrow_types;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::buffer::{Buffer, OffsetBuffer};
use memq_core::catalog::{col, req, ColumnDef, TableDef, Unit};

/// The `source` column of `n` rows of one source: its name repeated, built as one buffer (the
/// name is often 80–100 bytes, and the merge of a dump writes it into every events row).
pub fn source_column(source: &str, n: usize) -> ArrayRef {
    let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(source.len(), n));
    let values = Buffer::from_vec(source.as_bytes().repeat(n));
    Arc::new(StringArray::new(offsets, values, None))
}

pub fn events() -> TableDef {
    TableDef {
        name: "events",
        doc: "One row per dump row (MALLOC/FREE, OP/KERNEL launches, MSTX, SYSTEM, SNAPSHOT, OOM_DETAIL, ...), in canonical order: stable by timestamp, then file order.",
        sort_order: &["source", "ts", "row_idx"],
        columns: vec![
            req("source", Utf8, "the input file the row comes from (path relative to the ingested folder)"),
            req("row_idx", UInt64, "0-based position of the record in its file (file order)"),
            req("line", UInt64, "1-based physical line where the record starts"),
            req("id", Int64, "the tool's per-process event counter (ID column)"),
            req("event", Utf8, "base event: MALLOC, FREE, ACCESS, OP_LAUNCH, KERNEL_LAUNCH, SYSTEM, MSTX, SNAPSHOT, OOM_DETAIL"),
            req("event_type", Utf8, "sub type or pool (HAL, PTA, ATB, HOST_PINNED, ATEN_START, START_TRACE, ...)"),
            col("name", Utf8, "Name column (op/kernel name, MSTX message, snapshot name); NULL for N/A"),
            col("ts", Int64, "timestamp in ns since the Unix epoch (µs sources are converted)").time_ns(),
            col("ts_raw", Int64, "timestamp as written in the source (its unit is in `sources.ts_unit`)"),
            col("pid", Int64, "process id; NULL for N/A"),
            col("tid", Int64, "thread id; NULL for N/A"),
            req("device", Utf8, "Device Id as written: 0..31, cpu, host, N/A"),
            col("device_index", Int32, "Device Id as an integer; NULL for cpu/host/N/A"),
            col("ptr", UInt64, "block address (Ptr column, decimal or 0x-hex in the source); NULL for N/A").pointer(),
            col("attr", Utf8, "the raw Attr cell `{k:v,...}` (db sources rendered in the same form)"),
            col("size", Int64, "Attr size: bytes of the allocation or free (negative on G1 FREE rows)").bytes(),
            col("total", Int64, "Attr total: pool reservation after the event, bytes").bytes(),
            col("used", Int64, "Attr used: pool live bytes after the event (HOST_PINNED: process VmRSS), bytes").bytes(),
            col("process_used", Int64, "Attr process_used: process driver memory after the event, bytes").bytes(),
            col("device_used", Int64, "Attr device_used: whole-device used memory after the event, bytes (-1 unsupported)").bytes(),
            col("allocation_id", Int64, "Attr allocation_id: links MALLOC, ACCESS and FREE of one block (G2+)"),
            col("owner", Utf8, "Attr owner: multi-level owner `FRAMEWORK@...` (MALLOC only); NULL when absent"),
            req("shadow", Boolean, "Attr shadow:true: the row was produced by the shadow mechanism"),
            col("alloc_type", Utf8, "Attr alloc_type on HAL MALLOC: alloc (halMemAlloc) or create (halMemCreate)"),
            col("page_type", Utf8, "Attr page_type on HAL MALLOC: normal, huge, giant"),
            col("inefficient", Utf8, "Attr inefficient_type (or inefficient): comma list of inefficiency kinds"),
            col("module_id", Int32, "Attr MID (G1 HAL rows): driver module id"),
            col("stack_py", Utf8, "Python call stack, one frame per line, innermost first"),
            col("stack_c", Utf8, "C call stack, one frame per line, innermost first"),
        ],
    }
}

pub fn blocks() -> TableDef {
    TableDef {
        name: "blocks",
        doc: "One row per memory block lifetime: a MALLOC until the FREE that ends it, keyed by (source, pid, device, pool, ptr).",
        sort_order: &["source", "alloc_ts", "alloc_row", "free_row"],
        columns: vec![
            req("source", Utf8, "input file"),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id of the MALLOC (of the FREE when there is no MALLOC)"),
            col("device_index", Int32, "device as an integer"),
            req("pool", Utf8, "pool = Event Type of the MALLOC (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, N/A)"),
            req("ptr", UInt64, "block address").pointer(),
            col("size", Int64, "block size in bytes (from the MALLOC, else from the FREE)").bytes(),
            col("owner", Utf8, "owner of the MALLOC"),
            col("allocation_id", Int64, "allocation_id of the block where present"),
            col("alloc_id", Int64, "ID of the MALLOC row; NULL when the FREE had no MALLOC"),
            col("alloc_ts", Int64, "MALLOC time, ns; NULL when the block was allocated before collection").time_ns(),
            col("alloc_row", UInt64, "row_idx of the MALLOC row"),
            col("free_id", Int64, "ID of the FREE row that ended the block"),
            col("free_ts", Int64, "end time, ns: the FREE, or the MALLOC that reused the address; NULL = alive at the end").time_ns(),
            col("free_row", UInt64, "row_idx of the FREE row"),
            req("free_kind", Utf8, "real (a recorded FREE), shadow (a shadow FREE), replaced (address reused without FREE), none (alive at the end)"),
            req("stock", Boolean, "the MALLOC is a promoted shadow row: memory allocated before collection started"),
            col("stack_py", Utf8, "Python stack of the MALLOC"),
            req("fate", Utf8, "how the block ended (docs/formats/memscope.md §5.5): released, replaced, never_freed, stop_period_free, residual_fill_in, exit_while_stopped or exit_fill_in"),
            req("held_at_end", Boolean, "the memory still counts as live at the end of the data (fates exit_fill_in, exit_while_stopped, never_freed)"),
            col("end_ts", Int64, "time the memory stops counting as live (= free_ts); NULL when held_at_end").time_ns(),
            col("end_row", UInt64, "row_idx of the row that ends the block (the FREE, or for replaced the MALLOC that reused the address); NULL when held_at_end"),
        ],
    }
}

pub fn curve() -> TableDef {
    TableDef {
        name: "curve",
        doc: "Memory over time, per pool: one row per MALLOC/FREE row with the counters the tool wrote and memq's live bytes of the row's series (source, pid, device, pool), computed at ingest. Ordered by series, then time.",
        sort_order: &["source", "pid", "device", "pool", "ts", "row_idx"],
        columns: vec![
            req("source", Utf8, "input file"),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id as written (0..31, cpu, host); for a FREE, the device of its block"),
            req("pool", Utf8, "pool = Event Type (HAL, PTA, ATB, MINDSPORE, HOST_PINNED, ...)"),
            col("ts", Int64, "time of the row").time_ns(),
            col("ts_raw", Int64, "time of the row as written in the file (µs for G1 sources, see sources.ts_unit)"),
            req("row_idx", UInt64, "0-based position of the row in its file"),
            req("id", Int64, "the tool's event ID of the row"),
            req("event", Utf8, "MALLOC or FREE"),
            col("size", Int64, "Attr size of the row as written (negative on G1 FREE rows)").bytes(),
            col("used", Int64, "pool live bytes after the event, as written (HOST_PINNED: process VmRSS); NULL when absent").bytes(),
            col("total", Int64, "pool reservation after the event, as written; NULL when absent").bytes(),
            col("process_used", Int64, "process driver memory after the event, as written; NULL when absent").bytes(),
            col("device_used", Int64, "whole-device used memory after the event, as written (-1 = unsupported); NULL when absent").bytes(),
            req("live_bytes", Int64, "live bytes of the series after this row, from paired blocks (memq): the running sum of sizes allocated minus sizes ended; a block held at the end (blocks.held_at_end) ends nothing, a FREE without MALLOC changes nothing").bytes(),
            col("owner", Utf8, "owner of the block this row allocates or ends, as owner_peaks names it (the MALLOC's owner; (stock) or the pool when it has none); NULL when the row changes no block's bytes"),
            col("owner_live_bytes", Int64, "live bytes of that owner in the series after this row (same rules as live_bytes); NULL with owner").bytes(),
            col("step_k", UInt32, "1-based position (in time order) of the latest step of the row's process and device (table steps) started at or before the row; 0 before the first step; NULL when that device has no steps"),
            col("step", Int64, "number of the step the row falls in (steps.step: start_ts <= ts <= end_ts, or the step is open); NULL outside every step"),
        ],
    }
}

pub fn expansions() -> TableDef {
    TableDef {
        name: "expansions",
        doc: "Each time a framework pool's reservation grew: a curve row of a pool other than HAL whose `total` is larger than the `total` of the previous row of its series that carries one, with that previous row. Computed at ingest; view pool_expansions adds the HAL segments that came with it. Ordered by series, then time.",
        sort_order: &["source", "pid", "device", "pool", "ts", "row_idx"],
        columns: vec![
            req("source", Utf8, "input file"),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id as written"),
            req("pool", Utf8, "pool whose reservation grew (PTA, ATB, MINDSPORE, PTA_WORKSPACE, ...)"),
            col("ts", Int64, "time of the row that shows the larger total").time_ns(),
            col("ts_raw", Int64, "the same time as written in the file (µs for G1 sources)"),
            req("row_idx", UInt64, "row_idx of that row"),
            req("event", Utf8, "MALLOC or FREE: the row that shows the larger total"),
            req("total_before", Int64, "reservation on the previous row of the series").bytes(),
            req("total_after", Int64, "reservation on this row").bytes(),
            col("used_before", Int64, "live bytes on the previous row of the series; NULL when absent").bytes(),
            col("used_after", Int64, "live bytes on this row; NULL when absent").bytes(),
            col("prev_ts", Int64, "time of the previous row of the series").time_ns(),
            req("prev_row_idx", UInt64, "row_idx of the previous row of the series"),
        ],
    }
}

/// The five columns of one metric of `curve_tiles`.
macro_rules! tile_metric {
    ($m:literal, $what:literal) => {
        [
            req(
                concat!($m, "_points"),
                Int64,
                concat!("count: rows of the tile with a valid value of ", $what),
            ),
            col(
                concat!($m, "_first"),
                Int64,
                concat!(
                    "bytes: the tile's first value of ",
                    $what,
                    "; NULL when none"
                ),
            )
            .bytes(),
            col(
                concat!($m, "_last"),
                Int64,
                concat!(
                    "bytes: the tile's last value of ",
                    $what,
                    "; NULL when none"
                ),
            )
            .bytes(),
            col(
                concat!($m, "_min"),
                Int64,
                concat!(
                    "bytes: the tile's smallest value of ",
                    $what,
                    "; NULL when none"
                ),
            )
            .bytes(),
            col(
                concat!($m, "_max"),
                Int64,
                concat!(
                    "bytes: the tile's largest value of ",
                    $what,
                    "; NULL when none"
                ),
            )
            .bytes(),
        ]
    };
}

/// The key columns of the tables kept per series of `curve`: (source, pid, device, pool).
fn series_columns() -> Vec<ColumnDef> {
    vec![
        req("source", Utf8, "input file"),
        col("pid", Int64, "process id"),
        req("device", Utf8, "Device Id as written"),
        req("pool", Utf8, "pool = Event Type"),
    ]
}

pub fn curve_tiles() -> TableDef {
    let mut columns = series_columns();
    columns.extend([
        req("tile", Int64, "0-based tile of the series: min((ts - t_min) * 20160 div max(t_max - t_min, 1), 20159)"),
        req("t_min", Int64, "time of the series' first curve row with a time").time_ns(),
        req("t_max", Int64, "time of the series' last curve row with a time").time_ns(),
    ]);
    columns.extend(tile_metric!("used", "`used` (>= 0)"));
    columns.extend(tile_metric!("total", "`total` (>= 0)"));
    columns.extend(tile_metric!("process_used", "`process_used` (>= 0)"));
    columns.extend(tile_metric!("device_used", "`device_used` (>= 0)"));
    columns.extend(tile_metric!("live", "`live_bytes` (>= 0)"));
    TableDef {
        name: "curve_tiles",
        doc: "The curve of each series (source, pid, device, pool) folded into 20160 equal time tiles at ingest: per metric the count, first, last, smallest and largest value of the tile's rows (rows with a time; tiles without rows are not stored). curve_buckets(n) folds these tiles when n divides 20160 (crates/memscope/src/derive/tiles.rs). Ordered by series, then tile.",
        sort_order: &["source", "pid", "device", "pool", "tile"],
        columns,
    }
}

pub fn usage_tiles() -> TableDef {
    TableDef {
        name: "usage_tiles",
        doc: "The points of view usage_series (each pool's counters; for HAL the live bytes of the rows that change a block's bytes) folded into 20160 equal time tiles per series at ingest, over the series' span from its first to its last point with used >= 0 (points before or after it fall in the first or last tile). trend(buckets) folds these tiles when buckets divides 20160 (crates/memscope/src/derive/tiles.rs). Ordered by series, then tile.",
        sort_order: &["source", "pid", "device", "pool", "tile"],
        columns: [
            series_columns(),
            vec![
                req("tile", Int64, "0-based tile: (ts - ts_min) * 20160 div max(ts_max - ts_min, 1), clamped to 0..20159"),
                req("ts_min", Int64, "time of the series' first point with used >= 0").time_ns(),
                req("ts_max", Int64, "time of the series' last point with used >= 0").time_ns(),
                req("points", Int64, "count: points of the series in the tile (whatever their values)"),
                col("used_last", Int64, "bytes: the tile's last used >= 0; NULL when none").bytes(),
                col("used_min", Int64, "bytes: the tile's smallest used >= 0; NULL when none").bytes(),
                col("used_max", Int64, "bytes: the tile's largest used >= 0; NULL when none").bytes(),
                col("total_last", Int64, "bytes: the tile's last total >= 0 (HAL: its used); NULL when none").bytes(),
            ],
        ]
        .concat(),
    }
}

/// The columns of `events` that table `hal_mallocs` keeps.
const HAL_MALLOC_COLUMNS: &[&str] = &[
    "source",
    "row_idx",
    "pid",
    "device",
    "ts",
    "ts_raw",
    "ptr",
    "size",
    "owner",
    "alloc_type",
    "page_type",
    "shadow",
    "stack_py",
];

pub fn hal_mallocs() -> TableDef {
    let events = events();
    TableDef {
        name: "hal_mallocs",
        doc: "The HAL MALLOC rows of `events` (each a segment the driver handed out), with the columns hal_segments and hal_segment_summary read, copied at ingest so that they do not pick these rows out of every event. Same order as events.",
        sort_order: &["source", "ts", "row_idx"],
        columns: HAL_MALLOC_COLUMNS
            .iter()
            .filter_map(|n| events.columns.iter().find(|c| c.name == *n).cloned())
            .collect(),
    }
}

pub fn step_usage() -> TableDef {
    TableDef {
        name: "step_usage",
        doc: "The points of view usage_series folded per step interval at ingest: for each series and curve.step_k (from the start of that step of the process and device to the start of the next; 0 before the first step), the values of its points inside the step and the last value of the interval. Read by step_peaks (crates/memscope/src/derive/tiles.rs). Ordered by series, then step_k.",
        sort_order: &["source", "pid", "device", "pool", "step_k"],
        columns: [
            series_columns(),
            vec![
                req("step_k", Int64, "curve.step_k of the interval's points"),
                req("points", Int64, "count: points inside the step (curve.step set)"),
                col("max_used", Int64, "bytes: the largest used of the points inside the step; NULL when none").bytes(),
                col("max_ts", Int64, "time of the first point inside the step reaching max_used").time_ns(),
                col("last_inside", Int64, "bytes: the last used inside the step; NULL when none").bytes(),
                req("last_value", Int64, "bytes: the last used of the interval").bytes(),
            ],
        ]
        .concat(),
    }
}

pub fn step_levels() -> TableDef {
    TableDef {
        name: "step_levels",
        doc: "The rows of view step_peaks, found at ingest from the step intervals of each series (table step_usage) and the steps of its process and device (crates/memscope/src/derive/tiles.rs): per pool and step, the level at the start, the peak, the level at the end and the growth. Ordered by series, then step.",
        sort_order: &["source", "pid", "device", "pool", "start_ts"],
        columns: vec![
            req("source", Utf8, "input file"),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id as written"),
            col("step", Int64, "step number (table steps)"),
            col("origin", Utf8, "SYSTEM_STEP, MSTX_RANGE or MSTX_MARK"),
            col("start_ts", Int64, "step start").time_ns(),
            col("end_ts", Int64, "step end; NULL for an open step").time_ns(),
            req("pool", Utf8, "pool (Event Type); HAL values are paired live bytes"),
            req("points", Int64, "count: counter values written inside the step"),
            col("start_used", Int64, "bytes: live when the step starts (last value before start_ts); NULL when the pool had no value yet").bytes(),
            col("peak_used", Int64, "bytes: highest level during the step").bytes(),
            col("peak_ts", Int64, "time the peak was reached (start_ts when the level at the start is the peak)").time_ns(),
            col("end_used", Int64, "bytes: live at end_ts (last value at or before it); NULL for an open step").bytes(),
            col("growth", Int64, "bytes: end_used - start_used; NULL for an open step").bytes(),
            col("growth_vs_prev", Int64, "bytes: end_used - end_used of the previous complete step of the same pool; NULL for the first one").bytes(),
        ],
    }
}

pub fn pool_frag() -> TableDef {
    let lowest = ColumnDef {
        name: "lowest_usage",
        data_type: lowest_type(),
        nullable: true,
        unit: Unit::None,
        doc: "the 5 samples with the lowest usage (used / total, %), lowest first (ties: earlier first): {ts (ns), ts_raw, usage_pct (%), used (bytes), total (bytes)}; NULL without samples",
    };
    TableDef {
        name: "pool_frag",
        doc: "The figures of view fragmentation for each series of a framework pool (not HAL) with rows carrying `total`, folded at ingest as curve is written (crates/memscope/src/derive/frag.rs). A sample is a row with `used` and `total > 0`; fragmentation = (total - used) / total * 100. Ordered by series.",
        sort_order: &["source", "pid", "device", "pool"],
        columns: [
            series_columns(),
            vec![
                req("rows", Int64, "count: rows of the series carrying total"),
                col("peak_total", Int64, "bytes: the largest total").bytes(),
                req("samples", Int64, "count: samples (rows with used and total > 0)"),
                col("current_frag_pct", Float64, "%: fragmentation of the last sample").unit(Unit::Percent),
                col("current_ts", Int64, "time of the latest sample").time_ns(),
                col("current_ts_raw", Int64, "time of the last sample as written"),
                col("peak_frag_pct", Float64, "%: the highest fragmentation of a sample").unit(Unit::Percent),
                col("peak_ts", Int64, "time of the first sample with the highest fragmentation").time_ns(),
                col("peak_ts_raw", Int64, "the same time as written"),
                col("mean_frag_pct", Float64, "%: mean fragmentation of the samples").unit(Unit::Percent),
                col("used_last", Int64, "bytes: used of the last sample").bytes(),
                col("total_last", Int64, "bytes: total of the last sample").bytes(),
                lowest,
            ],
        ]
        .concat(),
    }
}

pub fn owner_live_peaks() -> TableDef {
    TableDef {
        name: "owner_live_peaks",
        doc: "The peak of each owner's live bytes in each series (curve.owner_live_bytes over the curve rows of that owner), found at ingest as the running sums are: what view owner_peaks reports as peak_bytes and peak_ts. Ordered by series, then owner.",
        sort_order: &["source", "pid", "device", "pool", "owner"],
        columns: [
            series_columns(),
            vec![
                req("owner", Utf8, "owner, as curve.owner names it"),
                req("peak_bytes", Int64, "the highest owner_live_bytes of the owner's curve rows").bytes(),
                col("peak_ts", Int64, "time of the first curve row reaching it").time_ns(),
            ],
        ]
        .concat(),
    }
}

pub fn owner_totals() -> TableDef {
    TableDef {
        name: "owner_totals",
        doc: "The blocks of each owner in each series, summed at ingest as `blocks` is written (crates/memscope/src/derive/mod.rs): what view owner_peaks reports as total_bytes, blocks and end_bytes. Blocks without an allocation time (a FREE with no MALLOC) are left out. Ordered by series, then owner.",
        sort_order: &["source", "pid", "device", "pool", "owner"],
        columns: [
            series_columns(),
            vec![
                req("owner", Utf8, "the MALLOC's owner; '(stock)' for stock memory without one, else the pool name (as owner_peaks names it)"),
                req("total_bytes", Int64, "bytes: sum of the sizes of the owner's blocks (a missing size counts 0)").bytes(),
                req("blocks", Int64, "count: the owner's blocks (MALLOC rows)"),
                req("end_bytes", Int64, "bytes: sum of the sizes of those still held at the end (blocks.end_ts NULL)").bytes(),
            ],
        ]
        .concat(),
    }
}

pub fn curve_peaks() -> TableDef {
    TableDef {
        name: "curve_peaks",
        doc: "The peak of each metric of each series of `curve`, found at ingest: what view `peaks` lists (see its documentation).",
        sort_order: &["source", "pid", "device", "pool", "metric"],
        columns: [
            series_columns(),
            vec![
                req("metric", Utf8, "used, total, process_used, device_used (counters written by the tool) or live (curve.live_bytes)"),
                req("peak_bytes", Int64, "the highest valid (>= 0) value of the metric in the series").bytes(),
                col("peak_ts", Int64, "time of the first row reaching the peak").time_ns(),
                col("peak_ts_raw", Int64, "the same time as written in the file (µs for G1 sources)"),
                req("peak_event", Utf8, "MALLOC or FREE: the event of that row"),
                req("peak_id", Int64, "the tool's event ID of that row"),
                req("points", Int64, "count: rows with a valid value of the metric in the series"),
            ],
        ]
        .concat(),
    }
}

pub fn oom() -> TableDef {
    TableDef {
        name: "oom",
        doc: "OOM_DETAIL rows, typed: the trigger (failed request) and the recent / top live allocations the tool listed.",
        sort_order: &["source", "ts", "row_idx"],
        columns: vec![
            req("source", Utf8, "input file"),
            req("row_idx", UInt64, "row position in the file"),
            req("id", Int64, "ID of the row"),
            col("ts", Int64, "row time, ns").time_ns(),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id as written (N/A on recent/top rows)"),
            req("kind", Utf8, "trigger, recent or top"),
            req("nth", Int64, "1-based position among the rows of the same kind in file order (recent: 1 = newest as the tool writes them; top: 1 = largest)"),
            col("func", Utf8, "trigger: the driver call that failed (halMemAlloc, halMemCreate)"),
            col("req_size", Int64, "trigger: requested bytes").bytes(),
            col("flag", UInt64, "trigger: driver flag word"),
            col("ret", Int64, "trigger: driver return code (short-lived writers only)"),
            col("pool", Utf8, "recent/top: pool of the live block"),
            col("ptr", UInt64, "recent/top: block address").pointer(),
            col("size", Int64, "recent/top: block bytes").bytes(),
            col("alloc_ts", Int64, "recent/top: allocation time of the block, ns").time_ns(),
            col("step", Int64, "recent/top: step number (short-lived writers only)"),
            col("kernel", Int64, "recent/top: kernel index (short-lived writers only)"),
            col("client", Int64, "recent/top: client process id (short-lived writers only)"),
            col("stack_py", Utf8, "Python call stack"),
            col("stack_c", Utf8, "C call stack"),
            col("attr", Utf8, "raw Attr"),
        ],
    }
}

pub fn mem_snapshots() -> TableDef {
    TableDef {
        name: "mem_snapshots",
        doc: "SNAPSHOT rows, typed; both key spellings (writer: free/total/max_*/device_rate, docs: free_mem/total_mem/peak_*/device_utilization) map to one set of columns.",
        sort_order: &["source", "ts", "row_idx"],
        columns: vec![
            req("source", Utf8, "input file"),
            req("row_idx", UInt64, "row position in the file"),
            req("id", Int64, "ID of the row"),
            col("ts", Int64, "time, ns").time_ns(),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id as written"),
            col("name", Utf8, "snapshot name (Memory Snapshot, OOM_Snapshot, user names)"),
            col("total_mem", Int64, "device total memory, bytes (total / total_mem)").bytes(),
            col("free_mem", Int64, "device free memory, bytes (free / free_mem)").bytes(),
            col("reserved", Int64, "torch memory_reserved, bytes").bytes(),
            col("peak_reserved", Int64, "torch max_memory_reserved, bytes (max_reserved / peak_reserved)").bytes(),
            col("allocated", Int64, "torch memory_allocated, bytes").bytes(),
            col("peak_allocated", Int64, "torch max_memory_allocated, bytes (max_allocated / peak_allocated)").bytes(),
            col("device_utilization", Float64, "(total-free)/total × 100, percent (device_rate / device_utilization)"),
            col("pt_utilization", Float64, "allocated/reserved × 100, percent (reserved_rate / pt_utilization)"),
            req("spelling", Utf8, "which key spelling the row used: writer or doc"),
            col("attr", Utf8, "raw Attr"),
        ],
    }
}

pub fn python_trace() -> TableDef {
    TableDef {
        name: "python_trace",
        doc: "Python trace records (python_trace_*.csv, or python_trace_<pid> tables of a db).",
        sort_order: &[],
        columns: vec![
            req("source", Utf8, "input file (db: file#table)"),
            req("line", UInt64, "1-based line (db: rowid)"),
            req(
                "func_info",
                Utf8,
                "`<file>(<line>): <func>`, `nn.Module: <Class>` or a C function",
            ),
            col("start_ts", Int64, "start time, ns; NULL for N/A").time_ns(),
            col("end_ts", Int64, "end time, ns; NULL for N/A").time_ns(),
            col("tid", Int64, "thread id"),
            col("pid", Int64, "process id"),
        ],
    }
}

pub fn step_compare() -> TableDef {
    TableDef {
        name: "step_compare",
        doc: "memory_compare_*.csv: per aligned op of two runs, the bytes allocated by the base and the compare run.",
        sort_order: &[],
        columns: vec![
            req("source", Utf8, "input file"),
            req("line", UInt64, "1-based line"),
            req("event", Utf8, "op or kernel event"),
            col("name", Utf8, "op or kernel name"),
            col("device", Utf8, "Device Id"),
            col("base_bytes", Int64, "bytes in the base run; NULL for N/A").bytes(),
            col("compare_bytes", Int64, "bytes in the compare run; NULL for N/A").bytes(),
            col("diff_bytes", Int64, "compare - base (N/A counted as 0)").bytes(),
        ],
    }
}

pub fn steps() -> TableDef {
    TableDef {
        name: "steps",
        doc: "The training/inference steps of each process and device, found at ingest (docs/formats/memscope.md §5.8): from SYSTEM STEP rows, else from MSTX ranges named as steps, else from MSTX marks whose whole name is a step marker.",
        sort_order: &["source", "pid", "device", "start_ts", "start_row"],
        columns: vec![
            req("source", Utf8, "input file"),
            col("pid", Int64, "process id"),
            req("device", Utf8, "Device Id as written"),
            req("step", Int64, "step number: SYSTEM STEP as written; MSTX: the number in the marker's name (`step 12`), else the 1-based order"),
            req("step_k", UInt32, "1-based position among the steps of its process and device, in time order (what curve.step_k counts)"),
            req("origin", Utf8, "the marker kind the steps come from: SYSTEM_STEP, MSTX_RANGE or MSTX_MARK"),
            req("name", Utf8, "Name of the marker row that starts the step"),
            req("start_ts", Int64, "step start: time of the marker row, ns").time_ns(),
            col("end_ts", Int64, "step end, ns: the step's Range_end (SYSTEM_STEP, MSTX_RANGE) or end mark (MSTX_MARK), else the next step's start; NULL = the step never ended in the data (e.g. OOM)").time_ns(),
            col("duration_ns", Int64, "end_ts - start_ts; NULL for an open step").unit(Unit::DurationNs),
            req("complete", Boolean, "the step has an end"),
            req("start_row", UInt64, "row_idx of the marker row in its file"),
        ],
    }
}

pub fn event_counts() -> TableDef {
    TableDef {
        name: "event_counts",
        doc: "The rows of `events` counted at ingest, one row per (source, pid, device, event, event_type): what `stats` and `capabilities` report, without reading the call stacks again.",
        sort_order: &["source", "pid", "device", "event", "event_type"],
        columns: vec![
            req("source", Utf8, "input file"),
            col("pid", Int64, "process id; NULL for N/A"),
            req("device", Utf8, "Device Id as written (0..31, cpu, host, N/A)"),
            req("event", Utf8, "base event (events.event)"),
            req("event_type", Utf8, "sub type or pool (events.event_type)"),
            col("first_ts", Int64, "earliest timestamp of the group, ns").time_ns(),
            col("last_ts", Int64, "latest timestamp of the group, ns").time_ns(),
            col("first_ts_raw", Int64, "earliest timestamp as written in the file"),
            col("last_ts_raw", Int64, "latest timestamp as written in the file"),
            col("size_bytes", Int64, "sum of the Attr size of the rows; NULL when no row has one").bytes(),
            req("rows", Int64, "number of rows").unit(Unit::Count),
            req("owner_rows", Int64, "rows with a non-empty owner").unit(Unit::Count),
            req("shadow_rows", Int64, "rows with shadow:true").unit(Unit::Count),
            req("py_stack_rows", Int64, "rows with a Python call stack that is not blank").unit(Unit::Count),
            req("c_stack_rows", Int64, "rows with a C call stack that is not blank").unit(Unit::Count),
            req("counter_rows", Int64, "rows carrying a pool counter (used or total)").unit(Unit::Count),
            req("device_used_rows", Int64, "rows with device_used >= 0").unit(Unit::Count),
        ],
    }
}

pub fn config() -> TableDef {
    TableDef {
        name: "config",
        doc: "config.json of each msMemScope project folder, flattened to key/value rows (nested keys joined with '.').",
        sort_order: &[],
        columns: vec![
            req("source", Utf8, "the config.json file"),
            req("key", Utf8, "key path, e.g. analysisType or watchConfig.start"),
            col("value", Utf8, "value as JSON text (strings unquoted)"),
        ],
    }
}

/// Every memscope table, in the order they are listed to users.
pub fn tables() -> Vec<TableDef> {
    vec![
        events(),
        event_counts(),
        blocks(),
        curve(),
        hal_mallocs(),
        curve_tiles(),
        usage_tiles(),
        step_usage(),
        step_levels(),
        curve_peaks(),
        owner_live_peaks(),
        owner_totals(),
        pool_frag(),
        expansions(),
        oom(),
        mem_snapshots(),
        steps(),
        python_trace(),
        step_compare(),
        config(),
    ]
}

/// The fields of one `lowest_usage` entry (table `pool_frag`).
pub fn lowest_fields() -> arrow_types::Fields {
    arrow_types::Fields::from(vec![
        arrow_types::Field::new("ts", Int64, true),
        arrow_types::Field::new("ts_raw", Int64, true),
        arrow_types::Field::new("usage_pct", Float64, true),
        arrow_types::Field::new("used", Int64, true),
        arrow_types::Field::new("total", Int64, true),
    ])
}

/// The type of column `lowest_usage`.
pub fn lowest_type() -> arrow_types::DataType {
    arrow_types::DataType::List(Arc::new(arrow_types::Field::new(
        "item",
        arrow_types::DataType::Struct(lowest_fields()),
        true,
    )))
}
