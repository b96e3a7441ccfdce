//! `seq_align(a, b)`: two sequences of names (op, kernel or mark names of two runs, in time
//! order) aligned the way a text diff aligns lines — a longest common subsequence found with
//! Myers' algorithm, as msMemScope's `--compare` aligns the op sequences of two collections
//! (docs/attribution.md, "Run against run"). `run_diff(a, b, align)` places each run's
//! allocations on the aligned points.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Builder, ListArray, ListBuilder};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, Result as DfResult};
use memq_core::function::strings;
use similar::{capture_diff_slices_deadline, Algorithm, DiffTag};

/// Time one alignment may take before the diff stops looking for the shortest edit script
/// and finishes with a longer one (every pair it gives still has equal names).
const DEADLINE: Duration = Duration::from_secs(20);

/// The return type: `LIST<BIGINT>`.
pub fn aligned_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true)))
}

/// The aligned points of `a` and `b`, in order: `(Some(i), Some(j))` pairs equal names,
/// `(Some(i), None)` is only in `a`, `(None, Some(j))` only in `b` (0-based positions).
pub fn align<T: Ord + std::hash::Hash>(a: &[T], b: &[T]) -> Vec<(Option<usize>, Option<usize>)> {
    let deadline = Instant::now() + DEADLINE;
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    for op in capture_diff_slices_deadline(Algorithm::Myers, a, b, Some(deadline)) {
        let (tag, old, new) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => out.extend(old.zip(new).map(|(i, j)| (Some(i), Some(j)))),
            DiffTag::Delete => out.extend(old.map(|i| (Some(i), None))),
            DiffTag::Insert => out.extend(new.map(|j| (None, Some(j)))),
            DiffTag::Replace => {
                out.extend(old.map(|i| (Some(i), None)));
                out.extend(new.map(|j| (None, Some(j))));
            }
        }
    }
    out
}

/// The names of row `i` of a list-of-text argument; empty when the list is NULL.
fn names(list: &ListArray, i: usize) -> DfResult<Vec<Option<String>>> {
    if list.is_null(i) {
        return Ok(Vec::new());
    }
    Ok(strings(&list.value(i))?
        .iter()
        .map(|v| v.map(str::to_string))
        .collect())
}

/// The SQL body, per row of two list arguments: the 1-based ordinal of the aligned point of
/// every name of `a`, then of every name of `b` (a flat list: it unnests beside
/// `array_concat(a, b)` and travels to a cluster as plain integers).
pub fn seq_align_fn(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let list = |a: &ArrayRef| -> DfResult<ListArray> {
        match a.data_type() {
            DataType::List(_) => Ok(a.as_list::<i32>().clone()),
            DataType::Null => Ok(ListArray::new_null(
                Arc::new(Field::new_list_field(DataType::Utf8, true)),
                a.len(),
            )),
            other => exec_err!("seq_align: arguments must be lists of names, got {other}"),
        }
    };
    let (a, b) = (list(&args[0])?, list(&args[1])?);
    let mut out = ListBuilder::new(Int64Builder::new())
        .with_field(Arc::new(Field::new_list_field(DataType::Int64, true)));
    for row in 0..a.len() {
        let (xs, ys) = (names(&a, row)?, names(&b, row)?);
        let mut points = vec![0i64; xs.len() + ys.len()];
        for (k, (i, j)) in align(&xs, &ys).into_iter().enumerate() {
            if let Some(i) = i {
                points[i] = k as i64 + 1;
            }
            if let Some(j) = j {
                points[xs.len() + j] = k as i64 + 1;
            }
        }
        out.values().append_slice(&points);
        out.append(true);
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::align;

    #[test]
    fn an_inserted_op_is_only_on_its_side_and_the_rest_still_pairs() {
        let a = ["t", "mm", "t", "sum", "t"];
        let b = ["t", "mm", "randn", "t", "sum", "t"];
        assert_eq!(
            align(&a, &b),
            vec![
                (Some(0), Some(0)),
                (Some(1), Some(1)),
                (None, Some(2)),
                (Some(2), Some(3)),
                (Some(3), Some(4)),
                (Some(4), Some(5)),
            ]
        );
    }

    #[test]
    fn the_sql_body_gives_each_name_of_a_then_of_b_its_point() {
        use datafusion::arrow::array::{AsArray, ListBuilder, StringBuilder};
        use std::sync::Arc;
        let list = |names: &[&str]| {
            let mut b = ListBuilder::new(StringBuilder::new());
            for n in names {
                b.values().append_value(n);
            }
            b.append(true);
            Arc::new(b.finish()) as datafusion::arrow::array::ArrayRef
        };
        let out = super::seq_align_fn(&[list(&["t", "mm"]), list(&["t", "x", "mm"])]).unwrap();
        let points = out.as_list::<i32>().value(0);
        let points: Vec<i64> = points
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .values()
            .to_vec();
        // t pairs (point 1), x is B's alone (2), mm pairs (3)
        assert_eq!(points, vec![1, 3, 1, 2, 3]);
    }

    #[test]
    fn a_replaced_name_is_one_point_per_side() {
        assert_eq!(
            align(&["x", "y"], &["x", "z"]),
            vec![(Some(0), Some(0)), (Some(1), None), (None, Some(1))]
        );
        assert!(align::<&str>(&[], &[]).is_empty());
    }
}
