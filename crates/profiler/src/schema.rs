//! The profiler tables (docs/formats/profiler.md §4): declared once, sizes in bytes, moments in
//! ns since the Unix epoch, lengths of time in ns, whatever unit the file wrote.

use datafusion::arrow::datatypes::DataType::{Int64, UInt64, Utf8};

use memq_core::catalog::{col, req, TableDef, Unit};

pub const MEMORY_RECORD: &str = "prof_memory_record";
pub const OPERATOR_MEMORY: &str = "prof_operator_memory";
pub const MODULE_MEM: &str = "prof_module_mem";
pub const STATIC_OP_MEM: &str = "prof_static_op_mem";

pub fn tables() -> Vec<TableDef> {
    vec![
        memory_record(),
        operator_memory(),
        module_mem(),
        static_op_mem(),
    ]
}

const SOURCE_DOC: &str = "input file (its source name)";
const LINE_DOC: &str = "1-based line of the row in its file (the header is line 1)";
const STREAM_DOC: &str = "`Stream Ptr` as written (the stream's address, decimal); NULL when empty";
const DEVICE_DOC: &str = "`Device Type` as written, e.g. NPU:0";
const DEVICE_ID_DOC: &str = "`Device_id` as written (a device number, `host` for memory planned on the host); NULL when the file has no such column";

/// `memory_record.csv`: the memory of each component over time.
pub fn memory_record() -> TableDef {
    TableDef {
        name: MEMORY_RECORD,
        doc: "One row per row of the profiler's memory_record.csv: the memory a component (APP = the whole process, PTA = torch_npu's caching allocator, GE = the graph engine, PTA+GE = both) held at one moment.",
        sort_order: &["source", "ts", "line"],
        columns: vec![
            req("source", Utf8, SOURCE_DOC),
            req("line", UInt64, LINE_DOC),
            col("component", Utf8, "APP, PTA, GE or PTA+GE, as written"),
            col("ts", Int64, "moment of the record, ns since the Unix epoch (the file's µs with 3 decimals, converted exactly)").time_ns(),
            col("allocated", Int64, "Total Allocated: bytes handed out to tensors; NULL when the component has none (APP)").bytes(),
            col("reserved", Int64, "Total Reserved: bytes reserved from the device").bytes(),
            col("active", Int64, "Total Active: bytes of allocated blocks including those awaiting a free on another stream; NULL when the component has none (APP, GE)").bytes(),
            col("stream", Utf8, STREAM_DOC),
            col("device", Utf8, DEVICE_DOC),
        ],
    }
}

/// `operator_memory.csv`: one allocation made by one operator.
pub fn operator_memory() -> TableDef {
    let totals = |name, doc| col(name, Int64, doc).bytes();
    TableDef {
        name: OPERATOR_MEMORY,
        doc: "One row per row of the profiler's operator_memory.csv: one allocation an operator made (aten:: rows from torch_npu, cann:: rows from the graph engine), with when it was allocated and released.",
        sort_order: &["source", "alloc_ts", "line"],
        columns: vec![
            req("source", Utf8, SOURCE_DOC),
            req("line", UInt64, LINE_DOC),
            col("name", Utf8, "operator name, e.g. aten::mm, cann::Conv2D1"),
            col("size", Int64, "bytes allocated (Size(KB) × 1024)").bytes(),
            col("alloc_ts", Int64, "Allocation Time, ns since the Unix epoch").time_ns(),
            col("release_ts", Int64, "Release Time, ns since the Unix epoch; NULL when the allocation was never released in the profiled window").time_ns(),
            col("active_release_ts", Int64, "Active Release Time (the release as seen by the stream that used the block), ns since the Unix epoch; NULL when not written").time_ns(),
            col("duration", Int64, "Duration: release − allocation, ns; NULL when never released").unit(Unit::DurationNs),
            col("active_duration", Int64, "Active Duration, ns; NULL when not written").unit(Unit::DurationNs),
            totals("alloc_total_allocated", "Allocation Total Allocated: the allocator's allocated bytes right after the allocation"),
            totals("alloc_total_reserved", "Allocation Total Reserved: reserved bytes right after the allocation"),
            totals("alloc_total_active", "Allocation Total Active: active bytes right after the allocation"),
            totals("release_total_allocated", "Release Total Allocated: allocated bytes right after the release; NULL when never released"),
            totals("release_total_reserved", "Release Total Reserved: reserved bytes right after the release"),
            totals("release_total_active", "Release Total Active: active bytes right after the release"),
            col("stream", Utf8, STREAM_DOC),
            col("device", Utf8, DEVICE_DOC),
        ],
    }
}

/// `npu_module_mem.csv`: the memory each CANN module (component) reserved over time.
pub fn module_mem() -> TableDef {
    TableDef {
        name: MODULE_MEM,
        doc: "One row per row of the profiler's npu_module_mem.csv (with or without its leading Device_id): the device memory one CANN component (APP = the whole process, HCCL, RUNTIME, SLOG, …) had reserved at one moment.",
        sort_order: &["source", "ts", "line"],
        columns: vec![
            req("source", Utf8, SOURCE_DOC),
            req("line", UInt64, LINE_DOC),
            col("device_id", Utf8, DEVICE_ID_DOC),
            col("component", Utf8, "CANN component as written: APP, HCCL, RUNTIME, SLOG, …"),
            col("ts", Int64, "moment of the sample, ns since the Unix epoch (the file's µs with 3 decimals, converted exactly)").time_ns(),
            col("reserved", Int64, "Total Reserved: bytes the component held (the file's MB or KB × 1 048 576 or × 1 024); NULL where the profiler writes -1 KB (-0.0009765625 MB): only frees were seen for the component").bytes(),
            col("device", Utf8, "`Device` as written, e.g. NPU:0"),
        ],
    }
}

/// `static_op_mem.csv`: the memory a static graph planned for each operator.
pub fn static_op_mem() -> TableDef {
    TableDef {
        name: STATIC_OP_MEM,
        doc: "One row per row of the profiler's static_op_mem.csv: the memory the graph compiler planned for one operator of a static graph, between two logical times (node indices, not clock times). The last row of each graph, op_name TOTAL, is the profiler's total for the graph, not an operator: leave it out when summing.",
        sort_order: &["source", "graph_id", "node_start", "line"],
        columns: vec![
            req("source", Utf8, SOURCE_DOC),
            req("line", UInt64, LINE_DOC),
            col("device_id", Utf8, DEVICE_ID_DOC),
            col("op_name", Utf8, "operator name as written; TOTAL on the graph's total row"),
            col("model_name", Utf8, "Model Name: the root node of the static subgraph; 0 = a static graph without subgraphs"),
            col("graph_id", Int64, "Graph ID: one id per computational graph"),
            col("node_start", Int64, "Node Index Start: logical time (node index) at which the memory is allocated"),
            col("node_end", Int64, "Node Index End: logical time at which it is released; NULL where the file writes 4294967295 (held until the graph's life ends)"),
            col("size", Int64, "bytes planned (Size(KB) × 1024)").bytes(),
        ],
    }
}
