//! Cell texts of the table view, driven by each column's unit (`memq.unit` field metadata):
//! bytes as `16.65 GiB`, moments as ISO time with the offset from the run's start
//! (`2025-12-05T02:00:12.345678901Z +12.345678 s`), durations as `1.234 ms`, percentages with
//! at most 2 decimals, other floats with 6 significant digits. [`BytesDisplay::Raw`] shows the values
//! as stored, as csv/json/parquet always do.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::ArrayFormatter;

use memq_core::catalog::Unit;
use memq_core::error::Result;
use memq_core::function::format_bytes;
use memq_engine::facts::Steps;
use memq_engine::units::{format_duration, format_epoch, format_offset};
use std::sync::Arc;

use super::{options, BytesDisplay};

/// How values are shown in the table view.
#[derive(Debug, Clone)]
pub struct CellStyle {
    /// Units applied (`Human`) or raw values (`Raw`: `\set raw on`, `--raw`, `\bytes raw`).
    pub values: BytesDisplay,
    /// The run's start, ns since the Unix epoch: moments show their offset from it.
    pub origin_ns: Option<i64>,
    /// The run's steps: a moment in a step names it (`step 4`).
    pub steps: Option<Arc<Steps>>,
}

/// A float with 6 significant digits, trailing zeros dropped (`0.333333`, `1234.57`, `2.5`);
/// very small or large ones in scientific notation.
pub fn format_float(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let a = v.abs();
    if !(1e-4..1e15).contains(&a) {
        return format!("{v:.3e}");
    }
    let decimals = (5 - a.log10().floor() as i64).clamp(0, 6) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A percentage (0-100) with at most 2 decimals: `12.35 %`, `100 %`.
fn format_percent(v: f64) -> String {
    let text = format!("{v:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} %")
}

/// One number as the table view shows a value of `unit` (to the precision of an f64: for
/// chart axes).
pub fn value_text(unit: Unit, v: f64, style: &CellStyle) -> String {
    if style.values == BytesDisplay::Raw {
        return format_float(v);
    }
    match unit {
        Unit::Bytes => format_bytes(v.round() as i64),
        Unit::TimeNs | Unit::TimeUs => {
            let ns = if unit == Unit::TimeUs { v * 1e3 } else { v };
            match style.origin_ns {
                // An f64 holds an epoch in ns to ~256 ns: closer to the start is the start.
                Some(o) => {
                    let off = ns - o as f64;
                    format_offset(if off.abs() < 1e3 { 0 } else { off as i64 })
                }
                None => format_epoch(ns as i64, if unit == Unit::TimeUs { 6 } else { 9 }),
            }
        }
        Unit::DurationNs => format_duration(v),
        Unit::Percent => format_percent(v),
        _ => format_float(v),
    }
}

/// An address as dumps and stacks print it: `0x` and 16 hex digits.
pub fn format_pointer(v: u64) -> String {
    format!("0x{v:016x}")
}

fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

fn ints(col: &ArrayRef) -> Result<Vec<Option<i64>>> {
    let c = cast(col, &DataType::Int64)?;
    Ok(c.as_primitive::<Int64Type>().iter().collect())
}

fn floats(col: &ArrayRef) -> Result<Vec<Option<f64>>> {
    let c = cast(col, &DataType::Float64)?;
    Ok(c.as_primitive::<Float64Type>().iter().collect())
}

fn or_null(v: Option<String>) -> String {
    v.unwrap_or_else(|| "NULL".to_string())
}

/// The unit of each row `from..to`, for a result whose columns take their unit from the row
/// (`SUMMARIZE`: a row per column summarised, its unit in the `unit` column); None otherwise.
pub fn row_units(batch: &RecordBatch, from: usize, to: usize) -> Option<Vec<Unit>> {
    let schema = batch.schema();
    let by_row = schema.fields().iter().any(|f| {
        f.metadata()
            .contains_key(memq_engine::summarize::UNIT_FROM_KEY)
    });
    let i = schema.index_of("unit").ok().filter(|_| by_row)?;
    let col = cast(&batch.column(i).slice(from, to - from), &DataType::Utf8).ok()?;
    let names = col.as_string::<i32>();
    Some(
        (0..names.len())
            .map(|r| {
                (!names.is_null(r))
                    .then(|| Unit::parse(names.value(r)))
                    .flatten()
                    .unwrap_or(Unit::None)
            })
            .collect(),
    )
}

/// The texts of one column whose values are in each row's own unit (`units`, from
/// [`row_units`]); a column that does not take the row's unit is shown by [`texts`].
pub fn texts_by_row(
    field: &Field,
    col: &ArrayRef,
    units: &[Unit],
    style: &CellStyle,
) -> Result<Vec<String>> {
    let how = field
        .metadata()
        .get(memq_engine::summarize::UNIT_FROM_KEY)
        .map(String::as_str);
    let plain = texts(field, col, style)?;
    let Some(how) = how.filter(|_| style.values == BytesDisplay::Human) else {
        return Ok(plain);
    };
    let numbers = match cast(col, &DataType::Float64) {
        Ok(c) => c,
        Err(_) => return Ok(plain),
    };
    let numbers = numbers.as_primitive::<Float64Type>();
    Ok(plain
        .into_iter()
        .enumerate()
        .map(|(r, text)| {
            let unit = match (units.get(r).copied().unwrap_or(Unit::None), how) {
                (Unit::TimeNs, "spread") => Unit::DurationNs,
                (Unit::TimeUs | Unit::Pointer, "spread") => Unit::None,
                (u, _) => u,
            };
            if unit == Unit::None || numbers.is_null(r) {
                return text;
            }
            let v = numbers.value(r);
            if unit == Unit::Pointer {
                return format_pointer(v as u64);
            }
            value_text(unit, v, style)
        })
        .collect())
}

/// The texts of one column (before they are made one line and cut), by its unit.
pub fn texts(field: &Field, col: &ArrayRef, style: &CellStyle) -> Result<Vec<String>> {
    let t = field.data_type();
    let human = style.values == BytesDisplay::Human;
    let unit = if human && t.is_numeric() {
        Unit::of(field)
    } else {
        Unit::None
    };
    Ok(match unit {
        Unit::Bytes => floats(col)?
            .into_iter()
            .map(|v| or_null(v.map(|v| format_bytes(v.round() as i64))))
            .collect(),
        Unit::TimeNs | Unit::TimeUs if is_integer(t) => {
            let (scale, digits) = if unit == Unit::TimeUs {
                (1000, 6)
            } else {
                (1, 9)
            };
            ints(col)?
                .into_iter()
                .map(|v| {
                    or_null(v.map(|v| {
                        let ns = v.saturating_mul(scale);
                        let mut text = format_epoch(ns, digits);
                        if let Some(o) = style.origin_ns {
                            text.push(' ');
                            text.push_str(&format_offset(ns.saturating_sub(o)));
                        }
                        if let Some(step) = style.steps.as_ref().and_then(|s| s.step_at(ns)) {
                            text.push_str(&format!(" step {step}"));
                        }
                        text
                    }))
                })
                .collect()
        }
        Unit::DurationNs => floats(col)?
            .into_iter()
            .map(|v| or_null(v.map(format_duration)))
            .collect(),
        Unit::Percent => floats(col)?
            .into_iter()
            .map(|v| or_null(v.map(format_percent)))
            .collect(),
        Unit::Pointer if is_integer(t) => {
            let c = cast(col, &DataType::UInt64)?;
            c.as_primitive::<datafusion::arrow::datatypes::UInt64Type>()
                .iter()
                .map(|v| or_null(v.map(format_pointer)))
                .collect()
        }
        _ if human && matches!(t, DataType::Float64 | DataType::Float32 | DataType::Float16) => {
            floats(col)?
                .into_iter()
                .map(|v| or_null(v.map(format_float)))
                .collect()
        }
        _ => {
            let opts = options();
            let fmt = ArrayFormatter::try_new(col.as_ref(), &opts)?;
            (0..col.len()).map(|i| fmt.value(i).to_string()).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, Int64Array};
    use std::sync::Arc;

    fn shown(unit: Unit, col: ArrayRef, origin: Option<i64>) -> Vec<String> {
        let field = unit.annotate(Field::new("c", col.data_type().clone(), true));
        let style = CellStyle {
            values: BytesDisplay::Human,
            origin_ns: origin,
            steps: None,
        };
        texts(&field, &col, &style).unwrap()
    }

    #[test]
    fn values_follow_their_unit() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(17_602_723_840),
            Some(-2048),
            None,
        ]));
        assert_eq!(
            shown(Unit::Bytes, ints.clone(), None),
            ["16.39 GiB", "-2.00 KiB", "NULL"]
        );
        let ts: ArrayRef = Arc::new(Int64Array::from(vec![1_764_900_012_458_413_334]));
        assert_eq!(
            shown(Unit::TimeNs, ts, Some(1_764_900_000_113_413_334)),
            ["2025-12-05T02:00:12.458413334Z +12.345000 s"]
        );
        let us: ArrayRef = Arc::new(Int64Array::from(vec![1_764_900_001_000_001]));
        assert_eq!(
            shown(Unit::TimeUs, us, Some(1_764_900_000_000_000_000)),
            ["2025-12-05T02:00:01.000001Z +1.000001 s"]
        );
        let d: ArrayRef = Arc::new(Int64Array::from(vec![1_234_000]));
        assert_eq!(shown(Unit::DurationNs, d, None), ["1.234 ms"]);
        let p: ArrayRef = Arc::new(Float64Array::from(vec![33.333333333333336, 100.0]));
        assert_eq!(shown(Unit::Percent, p, None), ["33.33 %", "100 %"]);
        let f: ArrayRef = Arc::new(Float64Array::from(vec![0.1 + 0.2, 1234.56789, 2.5e-9]));
        assert_eq!(
            shown(Unit::None, f.clone(), None),
            ["0.3", "1234.57", "2.500e-9"]
        );
        // Raw: as stored.
        let field = Unit::Bytes.annotate(Field::new("c", DataType::Int64, true));
        let raw = CellStyle {
            values: BytesDisplay::Raw,
            origin_ns: None,
            steps: None,
        };
        assert_eq!(texts(&field, &ints, &raw).unwrap()[0], "17602723840");
        let field = Field::new("c", DataType::Float64, true);
        assert_eq!(texts(&field, &f, &raw).unwrap()[0], "0.30000000000000004");
    }
}
