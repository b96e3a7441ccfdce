//! Table `pool_frag`: the figures of view `fragmentation` for each framework-pool series,
//! folded at ingest as `curve` is written (docs/performance.md, "What is computed once, at ingest"), so that the view reads one row per
//! series instead of every pool row.
//!
//! A series' rows are the curve rows of a pool other than HAL that carry `total`; its samples
//! are those that also carry `used`, with `total > 0`: fragmentation `(total - used) / total ×
//! 100` and usage `used / total × 100` (as DOUBLE, the same operations as the SQL of
//! tests/oracle/sql/fragmentation.sql). Rows reach [`Fragmentation::scan`] in the curve's order
//! (time, NULL times last, then `row_idx`), so "last" is the last seen and, on ties, "first"
//! the first seen.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Float64Array, Int64Array, ListArray, StringArray, StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::file::properties::WriterProperties;

use memq_core::dataset::ParquetSink;
use memq_core::error::Result;

use crate::derive::series::{opt, Series, SeriesMap, StagingCols};
use crate::schema;

/// How many of the lowest-usage samples are kept.
const LOWEST: usize = 5;

/// A sample among the lowest usage: (usage_pct, ts, row_idx) orders them, NULL times last.
#[derive(Clone, Copy)]
struct Low {
    usage_pct: f64,
    ts: Option<i64>,
    row_idx: u64,
    ts_raw: Option<i64>,
    used: i64,
    total: i64,
}

impl Low {
    fn cmp(&self, o: &Low) -> Ordering {
        self.usage_pct
            .total_cmp(&o.usage_pct)
            .then_with(|| match (self.ts, o.ts) {
                (Some(a), Some(b)) => a.cmp(&b),
                (a, b) => a.is_none().cmp(&b.is_none()),
            })
            .then(self.row_idx.cmp(&o.row_idx))
    }
}

/// The fold of one series.
#[derive(Default)]
struct Fold {
    rows: i64,
    peak_total: Option<i64>,
    samples: i64,
    frag_sum: f64,
    /// The last sample: fragmentation, ts_raw, used, total.
    current: Option<(f64, Option<i64>, i64, i64)>,
    current_ts: Option<i64>,
    /// The highest fragmentation and the first sample with it: pct, ts, ts_raw.
    peak: Option<(f64, Option<i64>, Option<i64>)>,
    /// The lowest-usage samples, lowest first.
    lowest: Vec<Low>,
}

/// The folds of one source's framework-pool series.
#[derive(Default)]
pub struct Fragmentation {
    series: SeriesMap<Fold>,
}

impl Fragmentation {
    /// Folds a batch of staging rows.
    pub fn scan(&mut self, c: &StagingCols) {
        for i in 0..c.total.len() {
            let series = c.series(i);
            if c.total.is_null(i) || series.2 == "HAL" {
                continue;
            }
            let (_, f) = self.series.get_or(series, |_| Fold::default());
            let tot = c.total.value(i);
            f.rows += 1;
            f.peak_total = Some(f.peak_total.map_or(tot, |p| p.max(tot)));
            let Some(u) = opt(c.used, i).filter(|_| tot > 0) else {
                continue;
            };
            let frag = (tot - u) as f64 / tot as f64 * 100.0;
            let t = opt(c.ts, i);
            let raw = opt(c.ts_raw, i);
            f.samples += 1;
            f.frag_sum += frag;
            f.current = Some((frag, raw, u, tot));
            if let Some(t) = t {
                f.current_ts = Some(f.current_ts.map_or(t, |c| c.max(t)));
            }
            if f.peak.is_none_or(|(p, ..)| frag > p) {
                f.peak = Some((frag, t, raw));
            }
            let low = Low {
                usage_pct: u as f64 / tot as f64 * 100.0,
                ts: t,
                row_idx: c.row_idx.value(i),
                ts_raw: raw,
                used: u,
                total: tot,
            };
            if f.lowest.len() < LOWEST || f.lowest.last().is_some_and(|l| low.cmp(l).is_lt()) {
                let at = f.lowest.partition_point(|l| l.cmp(&low).is_lt());
                f.lowest.insert(at, low);
                f.lowest.truncate(LOWEST);
            }
        }
    }

    /// Writes table `pool_frag` of `source` to `out`, in series order; returns its rows.
    pub fn close(self, source: &str, out: &Path, properties: WriterProperties) -> Result<u64> {
        let series = self.series.into_sorted();
        let def = schema::pool_frag();
        let mut sink = ParquetSink::create_with(out, def.schema(), properties)?;
        let n = series.len();
        let ints = |f: &dyn Fn(&Fold) -> Option<i64>| -> ArrayRef {
            Arc::new(series.iter().map(|(_, x)| f(x)).collect::<Int64Array>())
        };
        let floats = |f: &dyn Fn(&Fold) -> Option<f64>| -> ArrayRef {
            Arc::new(series.iter().map(|(_, x)| f(x)).collect::<Float64Array>())
        };
        let columns: Vec<ArrayRef> = vec![
            crate::schema::source_column(source, n),
            Arc::new(series.iter().map(|(s, _)| s.0).collect::<Int64Array>()),
            Arc::new(
                series
                    .iter()
                    .map(|(s, _)| Some(s.1.as_str()))
                    .collect::<StringArray>(),
            ),
            Arc::new(
                series
                    .iter()
                    .map(|(s, _)| Some(s.2.as_str()))
                    .collect::<StringArray>(),
            ),
            ints(&|f| Some(f.rows)),
            ints(&|f| f.peak_total),
            ints(&|f| Some(f.samples)),
            floats(&|f| f.current.map(|c| c.0)),
            ints(&|f| f.current_ts),
            ints(&|f| f.current.and_then(|c| c.1)),
            floats(&|f| f.peak.map(|p| p.0)),
            ints(&|f| f.peak.and_then(|p| p.1)),
            ints(&|f| f.peak.and_then(|p| p.2)),
            floats(&|f| (f.samples > 0).then(|| f.frag_sum / f.samples as f64)),
            ints(&|f| f.current.map(|c| c.2)),
            ints(&|f| f.current.map(|c| c.3)),
            Arc::new(lowest_list(&series)?),
        ];
        sink.write(&RecordBatch::try_new(def.schema(), columns)?)?;
        sink.close()
    }
}

/// Column `lowest_usage`: each series' lowest samples, NULL for a series without samples.
fn lowest_list(series: &[(Series, Fold)]) -> Result<ListArray> {
    let all: Vec<&Low> = series.iter().flat_map(|(_, f)| f.lowest.iter()).collect();
    let children: Vec<ArrayRef> = vec![
        Arc::new(all.iter().map(|l| l.ts).collect::<Int64Array>()),
        Arc::new(all.iter().map(|l| l.ts_raw).collect::<Int64Array>()),
        Arc::new(
            all.iter()
                .map(|l| Some(l.usage_pct))
                .collect::<Float64Array>(),
        ),
        Arc::new(all.iter().map(|l| Some(l.used)).collect::<Int64Array>()),
        Arc::new(all.iter().map(|l| Some(l.total)).collect::<Int64Array>()),
    ];
    let values = StructArray::try_new(schema::lowest_fields(), children, None)?;
    let offsets = OffsetBuffer::from_lengths(series.iter().map(|(_, f)| f.lowest.len()));
    let nulls = series
        .iter()
        .map(|(_, f)| f.samples > 0)
        .collect::<Vec<bool>>();
    let field = match schema::lowest_type() {
        DataType::List(f) => f,
        _ => unreachable!("lowest_type is a list"),
    };
    Ok(ListArray::try_new(
        field,
        offsets,
        Arc::new(values),
        Some(nulls.into()),
    )?)
}
