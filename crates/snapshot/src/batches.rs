//! Rows into Arrow record batches, one per table, built against the declared schemas. Each
//! column is produced by name, so the code cannot drift from the declared column order.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, StringArray, UInt64Array};
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::error::Result;

use crate::schema;
use crate::tables::{BlockRow, InfoRow, Rows, SegmentRow, TraceRow};

/// One batch per table with the table's definition, in the order of [`schema::tables`].
pub fn batches(snapshot: &str, rows: &Rows) -> Result<Vec<(TableDef, RecordBatch)>> {
    Ok(vec![
        segments(snapshot, &rows.segments)?,
        blocks(snapshot, &rows.blocks)?,
        traces(snapshot, &rows.traces)?,
        frames(snapshot, rows)?,
        info(snapshot, &rows.info)?,
    ])
}

fn segments(snapshot: &str, rows: &[SegmentRow]) -> Result<(TableDef, RecordBatch)> {
    let column = |name: &str| match name {
        "segment_id" => ints(rows.iter().map(|r| Some(r.segment_id))),
        "device" => ints(rows.iter().map(|r| r.device)),
        "address" => uints(rows.iter().map(|r| r.address)),
        "total_size" => ints(rows.iter().map(|r| r.total_size)),
        "allocated_size" => ints(rows.iter().map(|r| r.allocated_size)),
        "active_size" => ints(rows.iter().map(|r| r.active_size)),
        "requested_size" => ints(rows.iter().map(|r| r.requested_size)),
        "stream" => ints(rows.iter().map(|r| r.stream)),
        "segment_type" => texts(rows.iter().map(|r| r.segment_type.as_deref())),
        "pool_id_0" => ints(rows.iter().map(|r| r.pool_id.0)),
        "pool_id_1" => ints(rows.iter().map(|r| r.pool_id.1)),
        "is_expandable" => flags(rows.iter().map(|r| r.is_expandable)),
        "stack_id" => ints(rows.iter().map(|r| r.stack_id)),
        "extra_json" => texts(rows.iter().map(|r| r.extra_json.as_deref())),
        other => unreachable!("snap_segments has no column {other}"),
    };
    build(schema::segments(), snapshot, rows.len(), column)
}

fn blocks(snapshot: &str, rows: &[BlockRow]) -> Result<(TableDef, RecordBatch)> {
    let column = |name: &str| match name {
        "block_id" => ints(rows.iter().map(|r| Some(r.block_id))),
        "segment_id" => ints(rows.iter().map(|r| Some(r.segment_id))),
        "device" => ints(rows.iter().map(|r| r.device)),
        "address" => uints(rows.iter().map(|r| r.address)),
        "address_derived" => flags(rows.iter().map(|r| Some(r.address_derived))),
        "offset_in_segment" => ints(rows.iter().map(|r| r.offset_in_segment)),
        "size" => ints(rows.iter().map(|r| r.size)),
        "requested_size" => ints(rows.iter().map(|r| r.requested_size)),
        "state" => texts(rows.iter().map(|r| r.state.as_deref())),
        "stack_id" => ints(rows.iter().map(|r| r.stack_id)),
        "alloc_seq" => ints(rows.iter().map(|r| r.alloc_seq)),
        "user_metadata" => texts(rows.iter().map(|r| r.user_metadata.as_deref())),
        "extra_json" => texts(rows.iter().map(|r| r.extra_json.as_deref())),
        other => unreachable!("snap_blocks has no column {other}"),
    };
    build(schema::blocks(), snapshot, rows.len(), column)
}

fn traces(snapshot: &str, rows: &[TraceRow]) -> Result<(TableDef, RecordBatch)> {
    let column = |name: &str| match name {
        "device" => ints(rows.iter().map(|r| Some(r.device))),
        "seq" => ints(rows.iter().map(|r| Some(r.seq))),
        "action" => texts(rows.iter().map(|r| r.action.as_deref())),
        "addr" => uints(rows.iter().map(|r| r.addr)),
        "device_free" => ints(rows.iter().map(|r| r.device_free)),
        "size" => ints(rows.iter().map(|r| r.size)),
        "stream" => ints(rows.iter().map(|r| r.stream)),
        "time_us" => ints(rows.iter().map(|r| r.time_us)),
        "compile_context" => texts(rows.iter().map(|r| r.compile_context.as_deref())),
        "user_metadata" => texts(rows.iter().map(|r| r.user_metadata.as_deref())),
        "pool_id_0" => ints(rows.iter().map(|r| r.pool_id.0)),
        "pool_id_1" => ints(rows.iter().map(|r| r.pool_id.1)),
        "stack_id" => ints(rows.iter().map(|r| r.stack_id)),
        "forward_stack_id" => ints(rows.iter().map(|r| r.forward_stack_id)),
        "extra_json" => texts(rows.iter().map(|r| r.extra_json.as_deref())),
        other => unreachable!("snap_traces has no column {other}"),
    };
    build(schema::traces(), snapshot, rows.len(), column)
}

fn frames(snapshot: &str, rows: &Rows) -> Result<(TableDef, RecordBatch)> {
    let frames: Vec<_> = rows.stacks.rows().collect();
    let column = |name: &str| match name {
        "stack_id" => ints(frames.iter().map(|&(stack_id, _, _)| Some(stack_id))),
        "depth" => ints(frames.iter().map(|&(_, depth, _)| Some(depth))),
        "name" => texts(frames.iter().map(|(_, _, f)| f.name())),
        "filename" => texts(frames.iter().map(|(_, _, f)| f.filename())),
        "line" => ints(frames.iter().map(|(_, _, f)| f.line())),
        "extra_json" => texts(frames.iter().map(|(_, _, f)| f.extra_json())),
        other => unreachable!("snap_frames has no column {other}"),
    };
    build(schema::frames(), snapshot, frames.len(), column)
}

fn info(snapshot: &str, rows: &[InfoRow]) -> Result<(TableDef, RecordBatch)> {
    let column = |name: &str| match name {
        "section" => texts(rows.iter().map(|r| Some(r.section))),
        "item" => ints(rows.iter().map(|r| r.item)),
        "key" => texts(rows.iter().map(|r| Some(r.key.as_str()))),
        "value" => texts(rows.iter().map(|r| r.value.as_deref())),
        "value_type" => texts(rows.iter().map(|r| Some(r.value_type))),
        other => unreachable!("snap_info has no column {other}"),
    };
    build(schema::info(), snapshot, rows.len(), column)
}

/// A batch with the table's columns in declared order; `snapshot` is filled here.
fn build(
    table: TableDef,
    snapshot: &str,
    rows: usize,
    column: impl Fn(&str) -> ArrayRef,
) -> Result<(TableDef, RecordBatch)> {
    let columns = table
        .columns
        .iter()
        .map(|c| match c.name {
            "snapshot" => Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                snapshot, rows,
            ))) as ArrayRef,
            name => column(name),
        })
        .collect();
    let batch = RecordBatch::try_new(table.schema(), columns)?;
    Ok((table, batch))
}

fn ints(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from_iter(values))
}

fn uints(values: impl Iterator<Item = Option<u64>>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter(values))
}

fn texts<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

fn flags(values: impl Iterator<Item = Option<bool>>) -> ArrayRef {
    Arc::new(BooleanArray::from_iter(values))
}
