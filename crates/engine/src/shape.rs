//! The shape of a memory curve (docs/formats/memscope.md §6.16): `curve_shape(values)` and
//! `curve_turns(values)` over the values at the end of each bucket, in time order — a zig-zag
//! with a threshold of a tenth of the curve's range, which no window function expresses.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, StringArray};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type};
use datafusion::common::{exec_err, Result as DfResult};

/// The shape of a curve (docs/formats/memscope.md §6.16) and its turning points
/// (index into pts).
pub fn classify(vals: &[i64]) -> (&'static str, Vec<usize>) {
    if vals.len() < 3 {
        return ("too_short", Vec::new());
    }
    let mx = *vals.iter().max().unwrap_or(&0);
    let mn = *vals.iter().min().unwrap_or(&0);
    let range = (mx - mn) as f64;
    if mx <= 0 || range <= 0.05 * mx as f64 {
        return ("plateau", Vec::new());
    }
    let thr = 0.1 * range;
    // significant moves: zig-zag of the series with a threshold
    let mut turns = Vec::new();
    let mut dir = 0i8;
    let mut ext_i = 0usize;
    for i in 1..vals.len() {
        let v = vals[i] as f64;
        let e = vals[ext_i] as f64;
        match dir {
            0 => {
                if v - e > thr {
                    dir = 1;
                    ext_i = i;
                } else if e - v > thr {
                    dir = -1;
                    ext_i = i;
                }
            }
            1 => {
                if v >= e {
                    ext_i = i;
                } else if e - v > thr {
                    turns.push(ext_i);
                    dir = -1;
                    ext_i = i;
                }
            }
            _ => {
                if v <= e {
                    ext_i = i;
                } else if v - e > thr {
                    turns.push(ext_i);
                    dir = 1;
                    ext_i = i;
                }
            }
        }
    }
    let first = vals[0] as f64;
    let last = *vals.last().unwrap_or(&0) as f64;
    let peak_i = vals.iter().position(|v| *v == mx).unwrap_or(0);
    let ups = vals.windows(2).filter(|w| w[1] > w[0]).count();
    let downs_sig = vals
        .windows(2)
        .filter(|w| (w[0] - w[1]) as f64 > thr)
        .count();
    let n = vals.len() - 1;
    if turns.len() >= 4 {
        // repeated sharp drops then climbs
        return ("sawtooth", turns);
    }
    if downs_sig == 0 && last - first > 0.5 * range {
        // never comes back down
        let shape = if ups * 4 <= n { "staircase" } else { "rising" };
        return (shape, turns);
    }
    if peak_i > 0 && peak_i < vals.len() - 1 && (mx as f64 - last) > 0.5 * range {
        return ("spike_then_drop", turns);
    }
    if last - first > 0.5 * range {
        return ("rising_with_dips", turns);
    }
    ("mixed", turns)
}

/// The values of each row's list (NULL items left out); None for a NULL list.
fn lists(a: &ArrayRef) -> DfResult<Vec<Option<Vec<i64>>>> {
    if !matches!(
        a.data_type(),
        DataType::List(_) | DataType::LargeList(_) | DataType::Null
    ) {
        return exec_err!(
            "curve_shape takes a list of integers (array_agg(bytes ORDER BY t)), not {}",
            a.data_type()
        );
    }
    let list = cast(a, &turns_type())?;
    let list = list.as_list::<i32>();
    Ok((0..list.len())
        .map(|i| {
            let v = list.value(i);
            let v = v.as_primitive::<Int64Type>();
            list.is_valid(i).then(|| v.iter().flatten().collect())
        })
        .collect())
}

pub fn curve_shape_fn(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let out: StringArray = lists(&args[0])?
        .into_iter()
        .map(|v| v.map(|v| classify(&v).0))
        .collect();
    Ok(Arc::new(out))
}

/// The type of `curve_turns`: a list of 1-based positions.
pub fn turns_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)))
}

pub fn curve_turns_fn(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let rows = lists(&args[0])?;
    let mut offsets = vec![0i32];
    let mut values = Vec::new();
    let mut valid = Vec::new();
    for r in &rows {
        if let Some(v) = r {
            values.extend(classify(v).1.into_iter().map(|i| i as i64 + 1));
        }
        valid.push(r.is_some());
        offsets.push(values.len() as i32);
    }
    let list = ListArray::try_new(
        Arc::new(Field::new_list_field(DataType::Int64, true)),
        OffsetBuffer::new(offsets.into()),
        Arc::new(Int64Array::from(values)),
        Some(valid.into()),
    )?;
    Ok(Arc::new(list))
}
