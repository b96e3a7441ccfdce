//! Rows into Arrow record batches, built against the declared schemas. Each column is produced
//! by name, so the code cannot drift from the declared column order. Batches are cut at the
//! limits of [`crate::columns`].

use std::ops::Range;

use datafusion::arrow::array::new_null_array;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::error::Result;

use crate::columns::{build, chunks, flags, ints, texts, uints, BATCH_ROWS};
use crate::frames::Frame;
use crate::rows::{BlockRow, InfoRow, SegmentRow};
use crate::schema;
use crate::table_rows::Rows;
use crate::trace_columns::{Rare, TraceColumns};

/// The `device` of host trace rows read from one flat list.
pub const HOST_DEVICE: i64 = -1;

/// The batches of one table but snap_traces, whose rows leave through a
/// [`crate::trace_sink::TraceSink`] (none when it has no rows).
pub fn table_batches(
    snapshot: &str,
    rows: &Rows,
    table: &TableDef,
    limit: usize,
    mut emit: impl FnMut(RecordBatch) -> Result<()>,
) -> Result<()> {
    let name = snapshot.len();
    let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
    match table.name {
        schema::SEGMENTS | schema::HOST_SEGMENTS => {
            let r = if table.name == schema::SEGMENTS {
                &rows.segments
            } else {
                &rows.host_segments
            };
            for range in chunks(r.len(), BATCH_ROWS, limit, |i| {
                name + text(&r[i].segment_type) + text(&r[i].extra_json)
            }) {
                emit(segments(table, snapshot, &r[range])?)?;
            }
        }
        schema::BLOCKS | schema::HOST_BLOCKS => {
            let r = if table.name == schema::BLOCKS {
                &rows.blocks
            } else {
                &rows.host_blocks
            };
            for range in chunks(r.len(), BATCH_ROWS, limit, |i| {
                name + text(&r[i].state) + text(&r[i].user_metadata) + text(&r[i].extra_json)
            }) {
                emit(blocks(table, snapshot, &r[range])?)?;
            }
        }
        schema::TRACES | schema::LIFETIMES => {}
        schema::LEVELS | schema::OOM_ALLOCS => {
            crate::derive::table_batches(snapshot, &rows.derived, table, emit)?
        }
        // Built whole while walking (host traces are held: they are few).
        schema::HOST_TRACES => {
            for batch in &rows.host_traces {
                emit(batch.clone())?;
            }
        }
        schema::FRAMES => {
            let frames: Vec<_> = rows.stacks.rows().collect();
            let len = |t: Option<&str>| t.map_or(0, str::len);
            for range in chunks(frames.len(), BATCH_ROWS, limit, |i| {
                let f = frames[i].2;
                name + len(f.name()) + len(f.filename()) + len(f.extra_json())
            }) {
                emit(frame_batch(table, snapshot, &frames[range])?)?;
            }
        }
        _ => {
            let r = &rows.info;
            for range in chunks(r.len(), BATCH_ROWS, limit, |i| {
                name + r[i].section.len() + r[i].key.len() + text(&r[i].value) + 8
            }) {
                emit(info(table, snapshot, &r[range])?)?;
            }
        }
    }
    Ok(())
}

fn segments(table: &TableDef, snapshot: &str, rows: &[SegmentRow]) -> Result<RecordBatch> {
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
    build(table, snapshot, rows.len(), column)
}

fn blocks(table: &TableDef, snapshot: &str, rows: &[BlockRow]) -> Result<RecordBatch> {
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
    build(table, snapshot, rows.len(), column)
}

/// Rows `range` of `t` as a batch of snap_traces.
pub fn traces(
    table: &TableDef,
    snapshot: &str,
    t: &TraceColumns,
    range: Range<usize>,
) -> Result<RecordBatch> {
    let rows = range.clone();
    // Most batches have no row with a rare field: those columns are all NULL.
    let any_rare = t
        .rare
        .range(range.start as u32..range.end as u32)
        .next()
        .is_some();
    let rare = |f: fn(&Rare) -> Option<i64>| {
        if !any_rare {
            return new_null_array(&DataType::Int64, rows.len());
        }
        ints(rows.clone().map(|i| t.rare(i).and_then(f)))
    };
    let column = |name: &str| match name {
        "device" => ints(rows.clone().map(|i| {
            Some(if t.host {
                HOST_DEVICE
            } else {
                i64::from(t.device[i])
            })
        })),
        "seq" => ints(rows.clone().map(|i| Some(i64::from(t.seq[i])))),
        "action" => texts(rows.clone().map(|i| t.action(i))),
        "addr" => uints(rows.clone().map(|i| t.addr.get(i))),
        "device_free" => rare(|r| r.device_free),
        "size" => ints(rows.clone().map(|i| t.size.get(i))),
        "stream" => ints(rows.clone().map(|i| t.stream.get(i))),
        "time_us" => ints(rows.clone().map(|i| t.time_us.get(i))),
        "compile_context" => texts(rows.clone().map(|i| t.compile_context(i))),
        "user_metadata" => texts(rows.clone().map(|i| t.user_metadata(i))),
        "pool_id_0" => rare(|r| r.pool_id.0),
        "pool_id_1" => rare(|r| r.pool_id.1),
        "stack_id" => ints(
            rows.clone()
                .map(|i| (t.stack_id[i] != 0).then(|| i64::from(t.stack_id[i]))),
        ),
        "forward_stack_id" => rare(|r| r.forward_stack_id),
        "extra_json" => {
            if !any_rare {
                return new_null_array(&DataType::Utf8, rows.len());
            }
            texts(
                rows.clone()
                    .map(|i| t.rare(i).and_then(|r| r.extra_json.as_deref())),
            )
        }
        other => crate::derive::trace_column(&t.levels, rows.clone(), other)
            .unwrap_or_else(|| unreachable!("snap_traces has no column {other}")),
    };
    build(table, snapshot, range.len(), column)
}

fn frame_batch(
    table: &TableDef,
    snapshot: &str,
    frames: &[(i64, i64, &Frame)],
) -> Result<RecordBatch> {
    let column = |name: &str| match name {
        "stack_id" => ints(frames.iter().map(|&(stack_id, _, _)| Some(stack_id))),
        "depth" => ints(frames.iter().map(|&(_, depth, _)| Some(depth))),
        "name" => texts(frames.iter().map(|(_, _, f)| f.name())),
        "filename" => texts(frames.iter().map(|(_, _, f)| f.filename())),
        "line" => ints(frames.iter().map(|(_, _, f)| f.line())),
        "extra_json" => texts(frames.iter().map(|(_, _, f)| f.extra_json())),
        other => unreachable!("snap_frames has no column {other}"),
    };
    build(table, snapshot, frames.len(), column)
}

fn info(table: &TableDef, snapshot: &str, rows: &[InfoRow]) -> Result<RecordBatch> {
    let column = |name: &str| match name {
        "section" => texts(rows.iter().map(|r| Some(r.section))),
        "item" => ints(rows.iter().map(|r| r.item)),
        "key" => texts(rows.iter().map(|r| Some(r.key.as_str()))),
        "value" => texts(rows.iter().map(|r| r.value.as_deref())),
        "value_type" => texts(rows.iter().map(|r| Some(r.value_type))),
        other => unreachable!("snap_info has no column {other}"),
    };
    build(table, snapshot, rows.len(), column)
}
