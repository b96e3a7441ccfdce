//! The trace table (docs/formats/trace.md): declared once, sizes in bytes, moments in ns since
//! the Unix epoch.

use datafusion::arrow::datatypes::DataType::{Boolean, Int64, UInt64, Utf8};

use memq_core::catalog::{col, req, TableDef};

pub const TRACE_MEMORY: &str = "trace_memory";

pub fn tables() -> Vec<TableDef> {
    vec![trace_memory()]
}

/// One `[memory]` instant event of a torch.profiler (Kineto) Chrome trace.
pub fn trace_memory() -> TableDef {
    TableDef {
        name: TRACE_MEMORY,
        doc: "One row per `[memory]` instant event of a torch.profiler (Kineto) Chrome trace: one allocation (bytes > 0) or free (bytes < 0) of the CPU or of a device allocator, with the allocator's totals right after it and the CPU op running on the same thread.",
        sort_order: &["source", "ts", "event"],
        columns: vec![
            req("source", Utf8, "input file (its source name)"),
            req("event", UInt64, "0-based position of the event in the trace's traceEvents array"),
            req("ts", Int64, "moment of the event, ns since the Unix epoch: the trace's baseTimeNanoseconds (0 when absent) + ts (µs with 3 decimals, converted exactly)").time_ns(),
            req("device_type", Utf8, "Device Type as a name: cpu (0), cuda (1), npu (20, PrivateUse1: torch_npu), hip, xpu, mps, ... (c10::DeviceType); `type N` for an unknown code"),
            req("device_index", Int64, "Device Id as written (-1 for the CPU)"),
            req("device", Utf8, "device_type:device_index (cuda:0), or cpu when the index is negative"),
            col("addr", UInt64, "Addr: the block's address").pointer(),
            req("bytes", Int64, "Bytes: size of the block, positive when allocated, negative when freed").bytes(),
            col("total_allocated", Int64, "Total Allocated: bytes allocated on the device right after the event; when the trace does not write it (2021 layout), rebuilt as the running sum of bytes per device in time order").bytes(),
            col("total_reserved", Int64, "Total Reserved: bytes the allocator reserved on the device right after the event; NULL when the trace does not write it (it cannot be rebuilt)").bytes(),
            req("totals_rebuilt", Boolean, "whether total_allocated was rebuilt (the event has no Total Allocated)"),
            col("pid", Int64, "process id of the event; NULL when not an integer"),
            col("tid", Int64, "thread id of the event; NULL when not an integer"),
            col("op", Utf8, "name of the innermost CPU op (`ph: X`, `cat: cpu_op`) on the same pid/tid whose [ts, ts + dur] holds the event; NULL when none does (or the trace has no ops)"),
            col("op_ts", Int64, "start of that op, ns since the Unix epoch (tells apart two runs of an op of the same name)").time_ns(),
        ],
    }
}
