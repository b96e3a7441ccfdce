//! Terminal charts (`\chart`, `memq sql --chart`, format `chart`): the result's first numeric
//! column (after the first column) over its first column. Over a numeric or time first column
//! it is a line chart of the memory-curve kind, as columns of Unicode blocks: the x range is cut
//! into one bucket per terminal column and each shows the highest value in it (a bucket without
//! a point keeps the value before it, as a counter does). Over a text first column it is one
//! horizontal bar per row.

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::ArrayFormatter;

use memq_core::catalog::Unit;
use memq_core::error::Result;

use super::cells::{value_text, CellStyle};
use super::options;
use super::table::{cut_right, text_width, TableOptions};

/// Rows of the plot area of a line chart.
const HEIGHT: usize = 16;
/// Bars drawn at most.
const MAX_BARS: usize = 200;
/// Points kept at most (16 bytes each).
const MAX_POINTS: usize = 4_000_000;
const EIGHTHS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
const BAR_EIGHTHS: [char; 9] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉', '█'];

/// A chart being fed a result's batches.
pub struct ChartView {
    schema: SchemaRef,
    width: usize,
    style: CellStyle,
    /// The column charted (`None`: no numeric column).
    y: Option<usize>,
    /// The first column is numeric: a line chart; else bars.
    series: bool,
    points: Vec<(f64, f64)>,
    bars: Vec<(String, f64)>,
    rows: u64,
}

impl ChartView {
    pub fn new(schema: SchemaRef, opts: TableOptions) -> ChartView {
        let numeric = |i: usize| schema.field(i).data_type().is_numeric();
        let n = schema.fields().len();
        let y = (1..n)
            .find(|&i| numeric(i))
            .or((n == 1 && numeric(0)).then_some(0));
        let series = n > 1 && numeric(0) || n == 1;
        ChartView {
            width: opts.width.unwrap_or(80).max(30),
            style: CellStyle {
                values: opts.bytes,
                origin_ns: opts.origin_ns,
                steps: None,
            },
            y,
            series,
            points: Vec::new(),
            bars: Vec::new(),
            rows: 0,
            schema,
        }
    }

    pub fn push(&mut self, batch: &RecordBatch) -> Result<()> {
        let first = self.rows;
        self.rows += batch.num_rows() as u64;
        let Some(yi) = self.y else { return Ok(()) };
        let y = cast(batch.column(yi), &DataType::Float64)?;
        let y = y.as_primitive::<Float64Type>();
        if self.series {
            let x = if self.schema.fields().len() == 1 {
                None
            } else {
                Some(cast(batch.column(0), &DataType::Float64)?)
            };
            for i in 0..batch.num_rows() {
                if self.points.len() >= MAX_POINTS {
                    break;
                }
                let xv = match &x {
                    Some(x) if x.is_null(i) => continue,
                    Some(x) => x.as_primitive::<Float64Type>().value(i),
                    None => (first + i as u64) as f64,
                };
                if !y.is_null(i) {
                    self.points.push((xv, y.value(i)));
                }
            }
        } else {
            let opts = options();
            let labels = ArrayFormatter::try_new(batch.column(0).as_ref(), &opts)?;
            for i in 0..batch.num_rows() {
                if self.bars.len() >= MAX_BARS {
                    break;
                }
                let v = if y.is_null(i) { 0.0 } else { y.value(i) };
                self.bars.push((labels.value(i).to_string(), v));
            }
        }
        Ok(())
    }

    fn unit(&self, i: usize) -> Unit {
        Unit::of(self.schema.field(i))
    }

    fn y_text(&self, v: f64) -> String {
        value_text(
            self.y.map(|i| self.unit(i)).unwrap_or(Unit::None),
            v,
            &self.style,
        )
    }

    pub fn finish(self) -> String {
        let Some(yi) = self.y else {
            return "no numeric column to chart (\\chart draws the first numeric column over the first column)\n".into();
        };
        if self.rows == 0 {
            return "(0 rows: nothing to chart)\n".into();
        }
        let y_name = self.schema.field(yi).name().clone();
        if self.series {
            self.line_chart(&y_name)
        } else {
            self.bar_chart(&y_name)
        }
    }

    fn bar_chart(&self, y_name: &str) -> String {
        let label_w = self
            .bars
            .iter()
            .map(|(l, _)| text_width(l))
            .max()
            .unwrap_or(1)
            .min(30);
        let texts: Vec<String> = self.bars.iter().map(|(_, v)| self.y_text(*v)).collect();
        let value_w = texts.iter().map(|t| text_width(t)).max().unwrap_or(1);
        let bar_w = self.width.saturating_sub(label_w + value_w + 4).max(10);
        let top = self.bars.iter().map(|(_, v)| v.abs()).fold(0.0, f64::max);
        let mut out = format!("{y_name} by {}\n", self.schema.field(0).name());
        for ((label, v), text) in self.bars.iter().zip(&texts) {
            let eighths = if top > 0.0 {
                (v.abs() / top * (bar_w * 8) as f64).round() as usize
            } else {
                0
            };
            let mut bar = "█".repeat(eighths / 8);
            if eighths % 8 > 0 {
                bar.push(BAR_EIGHTHS[eighths % 8]);
            }
            let label = cut_right(label, label_w);
            let pad = label_w - text_width(&label);
            let fill = bar_w.saturating_sub(text_width(&bar));
            out.push_str(&format!(
                "{label}{} │{bar}{} {text}\n",
                " ".repeat(pad),
                " ".repeat(fill)
            ));
        }
        if self.rows > self.bars.len() as u64 {
            out.push_str(&format!("{} rows, {} drawn\n", self.rows, self.bars.len()));
        }
        out
    }

    fn line_chart(&self, y_name: &str) -> String {
        let pts = &self.points;
        if pts.is_empty() {
            return format!("{y_name}: no values to chart\n");
        }
        let (x0, x1) = pts
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let (lo, hi) = pts
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        // A baseline of 0 unless the values sit far above it (the change would not show).
        let base = if lo >= 0.0 && lo < hi * 0.5 { 0.0 } else { lo };
        // Every label drawn: the middle one (`602.75 MiB`) can be wider than the ends.
        let label_w = [hi, base, base + (hi - base) / 2.0]
            .iter()
            .map(|v| text_width(&self.y_text(*v)))
            .max()
            .unwrap_or(1);
        let cols = self.width.saturating_sub(label_w + 2).max(10);
        // The highest value in each bucket of x; empty buckets keep the last value.
        let mut bucket: Vec<Option<f64>> = vec![None; cols];
        let span = x1 - x0;
        for &(x, y) in pts {
            let b = if span > 0.0 {
                (((x - x0) / span) * (cols - 1) as f64).round() as usize
            } else {
                0
            };
            let b = b.min(cols - 1);
            bucket[b] = Some(bucket[b].map_or(y, |v: f64| v.max(y)));
        }
        let mut last = base;
        let heights: Vec<usize> = bucket
            .iter()
            .map(|v| {
                let v = v.unwrap_or(last);
                last = v;
                if hi > base {
                    (((v - base) / (hi - base)) * (HEIGHT * 8) as f64).round() as usize
                } else {
                    HEIGHT * 8 / 2
                }
            })
            .collect();
        let mut out = format!(
            "{y_name} over {} ({} points)\n",
            self.schema.field(0).name(),
            pts.len()
        );
        for row in (0..HEIGHT).rev() {
            let label = match row {
                r if r == HEIGHT - 1 => self.y_text(hi),
                0 => self.y_text(base),
                r if r == HEIGHT / 2 => self.y_text(base + (hi - base) / 2.0),
                _ => String::new(),
            };
            out.push_str(&format!("{label:>label_w$} ┤"));
            let line: String = heights
                .iter()
                .map(|&h| EIGHTHS[h.saturating_sub(row * 8).min(8)])
                .collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str(&format!("{} └{}\n", " ".repeat(label_w), "─".repeat(cols)));
        let xu = self.unit(0);
        let (left, right) = if self.schema.fields().len() == 1 {
            ("row 1".to_string(), format!("row {}", self.rows))
        } else {
            (
                value_text(xu, x0, &self.style),
                value_text(xu, x1, &self.style),
            )
        };
        let gap = cols.saturating_sub(text_width(&left) + text_width(&right));
        out.push_str(&format!(
            "{}  {left}{}{right}\n",
            " ".repeat(label_w),
            " ".repeat(gap)
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::BytesDisplay;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn opts() -> TableOptions {
        TableOptions {
            width: Some(60),
            bytes: BytesDisplay::Human,
            ..TableOptions::default()
        }
    }

    #[test]
    fn a_curve_becomes_a_line_chart() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Int64, false),
            Unit::Bytes.annotate(Field::new("live", DataType::Int64, false)),
        ]));
        let ts: Int64Array = (0..100).collect();
        let live: Int64Array = (0..100)
            .map(|i| if i == 50 { 1 << 30 } else { 1 << 20 })
            .collect();
        let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(ts), Arc::new(live)]).unwrap();
        let mut c = ChartView::new(schema, opts());
        c.push(&b).unwrap();
        let out = c.finish();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "live over ts (100 points)", "{out}");
        assert!(lines[1].trim_start().starts_with("1.00 GiB ┤"), "{out}");
        // The peak is one full column at the middle; the rest stays near the bottom.
        let top = lines[1];
        assert_eq!(top.matches('█').count(), 1, "{out}");
        assert!(lines.iter().all(|l| text_width(l) <= 60), "{out}");
        assert!(
            out.contains("└") && lines.last().unwrap().trim().starts_with('0'),
            "{out}"
        );
    }

    /// The middle label (`602.75 MiB`) is wider than the top one (`1.18 GiB`): every row of
    /// the axis starts at the same column.
    #[test]
    fn the_axis_is_as_wide_as_its_widest_label() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Int64, false),
            Unit::Bytes.annotate(Field::new("live", DataType::Int64, false)),
        ]));
        let ts: Int64Array = (0..10).collect();
        let top = 1_264_058_368i64; // 1.18 GiB: the middle is 602.75 MiB
        let live: Int64Array = (0..10).map(|i| if i == 5 { top } else { 0 }).collect();
        let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(ts), Arc::new(live)]).unwrap();
        let mut c = ChartView::new(schema, opts());
        c.push(&b).unwrap();
        let out = c.finish();
        let axis: Vec<usize> = out
            .lines()
            .filter_map(|l| l.find(['┤', '└']).map(|b| text_width(&l[..b])))
            .collect();
        assert!(out.contains("602.75 MiB ┤"), "{out}");
        assert!(
            axis.len() > 3 && axis.iter().all(|&a| a == axis[0]),
            "{axis:?}\n{out}"
        );
    }

    #[test]
    fn text_over_numbers_becomes_bars() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("pool", DataType::Utf8, false),
            Unit::Bytes.annotate(Field::new("peak", DataType::Int64, false)),
        ]));
        let pool = StringArray::from(vec!["HAL", "PTA"]);
        let peak = Int64Array::from(vec![2 << 30, 1 << 30]);
        let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(pool), Arc::new(peak)]).unwrap();
        let mut c = ChartView::new(schema, opts());
        c.push(&b).unwrap();
        let out = c.finish();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "peak by pool", "{out}");
        let full = lines[1].matches('█').count();
        let half = lines[2].matches('█').count();
        assert!(
            lines[1].starts_with("HAL │") && lines[1].ends_with(" 2.00 GiB"),
            "{out}"
        );
        assert!(full >= 2 * half - 1 && full <= 2 * half + 1, "{out}");
    }
}
