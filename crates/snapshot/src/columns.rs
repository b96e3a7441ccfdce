//! Arrow column helpers and the batch limits, shared by every module that builds batches.
//!
//! A table comes as several batches, each of at most [`BATCH_ROWS`] rows and about
//! [`BATCH_TEXT_BYTES`] bytes of text per column: a text column of one batch must stay far
//! below Arrow's 2 GiB offset limit even when many rows repeat one long string (2 100 frames
//! sharing one 1 MiB name make 2.2 GB of text), and the writer never holds a whole table.

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int64Array, StringArray, StringBuilder, UInt64Array,
};
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::error::Result;

/// Most rows of one batch (= one row group of the trace table, as memq-core's writers).
pub const BATCH_ROWS: usize = 128 * 1024;
/// Text bytes of one batch (all its text columns together) beyond which it is cut.
pub const BATCH_TEXT_BYTES: usize = 128 << 20;

/// Consecutive row ranges of at most `max_rows` rows and `limit` text bytes (a single row over
/// the limit is a batch of its own). [`crate::trace_sink::TraceSink`] cuts a streamed trace the
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

pub(crate) fn flags(values: impl Iterator<Item = Option<bool>>) -> ArrayRef {
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
