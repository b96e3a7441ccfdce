//! Rows into Arrow record batches, built against the declared schemas. Each column is produced
//! by name, so the code cannot drift from the declared column order.
//!
//! A table comes as several batches, each of at most [`BATCH_ROWS`] rows and about
//! [`BATCH_TEXT_BYTES`] bytes of text per column: a text column of one batch must stay far
//! below Arrow's 2 GiB offset limit even when many rows repeat one long string (2 100 frames
//! sharing one 1 MiB name make 2.2 GB of text), and the writer never holds a whole table.

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    new_null_array, ArrayRef, BooleanArray, Int64Array, StringArray, StringBuilder, UInt64Array,
};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::error::Result;

use crate::frames::Frame;
use crate::schema;
use crate::tables::{BlockRow, InfoRow, Rows, SegmentRow};
use crate::traces::TraceColumns;

/// The `device` of host trace rows read from one flat list.
pub const HOST_DEVICE: i64 = -1;

/// Most rows of one batch (= one row group of the trace table, as memq-core's writers).
pub const BATCH_ROWS: usize = 128 * 1024;
/// Text bytes of one batch (all its text columns together) beyond which it is cut.
pub const BATCH_TEXT_BYTES: usize = 128 << 20;

/// The batches of one table but snap_traces, whose rows leave through a
/// [`crate::traces::TraceSink`] (none when it has no rows).
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
        schema::TRACES | crate::derive::LIFETIMES => {}
        crate::derive::LEVELS | crate::derive::OOM_ALLOCS => {
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

/// Consecutive row ranges of at most `max_rows` rows and `limit` text bytes (a single row over
/// the limit is a batch of its own). [`crate::traces::TraceSink`] cuts a streamed trace the
/// same way.
pub fn chunks(
    rows: usize,
    max_rows: usize,
    limit: usize,
    bytes: impl Fn(usize) -> usize,
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0usize);
    for i in 0..rows {
        let b = bytes(i);
        if i > start && (i - start >= max_rows || size.saturating_add(b) > limit) {
            out.push(start..i);
            (start, size) = (i, 0);
        }
        size = size.saturating_add(b);
    }
    if rows > start {
        out.push(start..rows);
    }
    out
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
    let rare = |f: fn(&crate::traces::Rare) -> Option<i64>| {
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

/// A batch with the table's columns in declared order; `snapshot` is filled here.
pub(crate) fn build(
    table: &TableDef,
    snapshot: &str,
    rows: usize,
    column: impl Fn(&str) -> ArrayRef,
) -> Result<RecordBatch> {
    let columns = table
        .columns
        .iter()
        .map(|c| match c.name {
            "snapshot" => {
                let mut b = StringBuilder::with_capacity(rows, rows * snapshot.len());
                (0..rows).for_each(|_| b.append_value(snapshot));
                Arc::new(b.finish()) as ArrayRef
            }
            name => column(name),
        })
        .collect();
    Ok(RecordBatch::try_new(table.schema(), columns)?)
}

pub(crate) fn ints(values: impl Iterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from_iter(values))
}

pub(crate) fn uints(values: impl Iterator<Item = Option<u64>>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter(values))
}

pub(crate) fn texts<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

fn flags(values: impl Iterator<Item = Option<bool>>) -> ArrayRef {
    Arc::new(BooleanArray::from_iter(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cut_by_rows_and_by_bytes() {
        assert_eq!(
            chunks(0, BATCH_ROWS, 100, |_| 1),
            Vec::<Range<usize>>::new()
        );
        assert_eq!(chunks(5, BATCH_ROWS, 100, |_| 10), vec![0..5]);
        assert_eq!(chunks(5, BATCH_ROWS, 25, |_| 10), vec![0..2, 2..4, 4..5]);
        // A row over the limit stands alone.
        assert_eq!(
            chunks(3, BATCH_ROWS, 25, |i| if i == 1 { 100 } else { 1 }),
            vec![0..1, 1..2, 2..3]
        );
        let rows = BATCH_ROWS * 2 + 1;
        let c = chunks(rows, BATCH_ROWS, usize::MAX, |_| 1);
        assert_eq!(
            c,
            vec![
                0..BATCH_ROWS,
                BATCH_ROWS..2 * BATCH_ROWS,
                2 * BATCH_ROWS..rows
            ]
        );
    }
}
