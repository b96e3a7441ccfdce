//! Guards around the built-in functions whose result size is chosen by an argument or grows
//! faster than their input (`repeat`, `lpad`, `rpad`, `concat`, `concat_ws`, `replace`,
//! `regexp_replace`, `encode`, `array_to_string`, `array_repeat`, `array_resize`, `range`,
//! `generate_series`, and the `||` operator on text): a call that would build more bytes than
//! the memory limit fails with a message naming the limit instead of allocating without bound
//! (unguarded, `SELECT repeat('x', 2000000000)` aborts the process — an allocation failure
//! outside the memory pool aborts, it cannot become an error — and a text result over 2 GiB
//! panics with "offset overflow").
//!
//! Each guard estimates the bytes of the result from its arguments before the call: sizes and
//! counts, a scalar counting once per row of the batch (`concat(name, <100 MB literal>)` builds
//! 100 MB per row). The estimate is at least the result's text or element bytes; only `replace`
//! counts the occurrences, and only when the cheap bound is over the limit.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::kernels::concat_elements::concat_elements_dyn;
use datafusion::arrow::datatypes::{
    DataType, FieldRef, Int64Type, IntervalMonthDayNanoType, IntervalUnit, TimeUnit,
};
use datafusion::common::{exec_err, DFSchema, Result, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExprSchemable, Operator, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::BinaryOperator;

/// How the size of the result follows from the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`: text bytes × n.
    Repeat,
    /// `lpad(text, n [, fill])`: n characters (at least a byte each) per row.
    Pad,
    /// `concat(a, b, …)`: the text of every argument, once per row.
    Concat,
    /// `concat_ws(sep, a, b, …)`: the same, plus the separator between the arguments.
    ConcatWs,
    /// `a || b` on text: the same as `concat`.
    ConcatOp,
    /// `replace(text, from, to)`: the text, plus `to` minus `from` per occurrence.
    Replace,
    /// `regexp_replace(text, pattern, to [, flags])`: the text, plus `to` (and the match per
    /// `\N` group reference in it) per match.
    RegexpReplace,
    /// `encode(text, 'hex' | 'base64')`: twice the text.
    Encode,
    /// `array_to_string(list, sep [, null])`: the separator (and null text) per element,
    /// plus the elements' text.
    ArrayToString,
    /// `array_repeat(value, n)`: the value's bytes × n.
    ArrayRepeat,
    /// `array_resize(list, n [, value])`: n elements per row.
    ArrayResize,
    /// `range(…)`, `generate_series(…)`: (stop − start) / step elements per row.
    Range,
}

impl Growth {
    /// Whether the result is text (capped at 1 GiB) rather than an array.
    fn is_text(self) -> bool {
        !matches!(
            self,
            Growth::ArrayRepeat | Growth::ArrayResize | Growth::Range
        )
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Guarded {
    inner: Arc<ScalarUDF>,
    growth: Growth,
}

/// The memory limit in bytes (`--memory-limit` / MEMQ_MEMORY_LIMIT_MB; 8 GiB by default).
pub fn memory_limit_bytes() -> u64 {
    memq_core::memory_limit() as u64
}

/// The most text one call may build, whatever the memory limit: a `Utf8` array holds at most
/// 2 GiB, and a result of more than 1 GiB of text is never what an analysis of a dump needs.
const MAX_TEXT_BYTES: u64 = 1 << 30;

/// One argument's size: the same for every row (a scalar), or per row of an array (total and
/// largest row).
#[derive(Debug, Clone, Copy)]
enum Size {
    Each(u64),
    Rows { sum: u64, max: u64 },
}

impl Size {
    /// The size over `rows` rows.
    fn total(self, rows: u64) -> u64 {
        match self {
            Size::Each(x) => x.saturating_mul(rows),
            Size::Rows { sum, .. } => sum,
        }
    }
}

impl Size {
    /// The sizes of two arguments added row by row (at most the sum of the largest rows).
    fn plus(self, other: Size) -> Size {
        match (self, other) {
            (Size::Each(a), Size::Each(b)) => Size::Each(a.saturating_add(b)),
            (Size::Each(x), Size::Rows { sum, max }) | (Size::Rows { sum, max }, Size::Each(x)) => {
                Size::Rows {
                    sum: sum.saturating_add(x),
                    max: max.saturating_add(x),
                }
            }
            (Size::Rows { sum: sa, max: ma }, Size::Rows { sum: sb, max: mb }) => Size::Rows {
                sum: sa.saturating_add(sb),
                max: ma.saturating_add(mb),
            },
        }
    }
}

/// At least Σ a·b over `rows` rows (an upper bound when both vary by row).
fn product(a: Size, b: Size, rows: u64) -> u64 {
    match (a, b) {
        (Size::Each(x), Size::Each(y)) => x.saturating_mul(y).saturating_mul(rows),
        (Size::Each(x), Size::Rows { sum, .. }) | (Size::Rows { sum, .. }, Size::Each(x)) => {
            x.saturating_mul(sum)
        }
        (Size::Rows { sum: sa, max: ma }, Size::Rows { sum: sb, max: mb }) => {
            sa.saturating_mul(mb).min(ma.saturating_mul(sb))
        }
    }
}

/// The text of row `i` of a string array (`None` for NULL or a non-string array).
fn text_at(a: &dyn Array, i: usize) -> Option<&str> {
    if a.is_null(i) {
        return None;
    }
    if let Some(s) = a.as_string_opt::<i32>() {
        Some(s.value(i))
    } else if let Some(s) = a.as_string_opt::<i64>() {
        Some(s.value(i))
    } else {
        a.as_string_view_opt().map(|s| s.value(i))
    }
}

/// The bytes of a text or binary argument (0 for other types: their text is small).
fn text_size(v: &ColumnarValue) -> Size {
    match v {
        ColumnarValue::Scalar(s) => match s {
            ScalarValue::Utf8(Some(t))
            | ScalarValue::LargeUtf8(Some(t))
            | ScalarValue::Utf8View(Some(t)) => Size::Each(t.len() as u64),
            ScalarValue::Binary(Some(b))
            | ScalarValue::LargeBinary(Some(b))
            | ScalarValue::BinaryView(Some(b)) => Size::Each(b.len() as u64),
            _ => Size::Each(0),
        },
        ColumnarValue::Array(a) => {
            let lens: Box<dyn Iterator<Item = u64>> = if let Some(s) = a.as_string_opt::<i32>() {
                Box::new(s.offsets().windows(2).map(|w| (w[1] - w[0]) as u64))
            } else if let Some(s) = a.as_string_opt::<i64>() {
                Box::new(s.offsets().windows(2).map(|w| (w[1] - w[0]) as u64))
            } else if let Some(s) = a.as_binary_opt::<i32>() {
                Box::new(s.offsets().windows(2).map(|w| (w[1] - w[0]) as u64))
            } else if let Some(s) = a.as_binary_opt::<i64>() {
                Box::new(s.offsets().windows(2).map(|w| (w[1] - w[0]) as u64))
            } else if let Some(s) = a.as_string_view_opt() {
                // A view's low 32 bits are its length.
                Box::new(s.views().iter().map(|v| *v as u32 as u64))
            } else if let Some(s) = a.as_binary_view_opt() {
                Box::new(s.views().iter().map(|v| *v as u32 as u64))
            } else {
                Box::new(std::iter::empty())
            };
            let (sum, max) = lens.fold((0u64, 0u64), |(s, m), n| (s + n, m.max(n)));
            Size::Rows { sum, max }
        }
    }
}

/// The bytes of a value argument (any type) as the elements of a new array.
fn value_size(v: &ColumnarValue) -> Size {
    let bytes = |a: &ArrayRef| a.to_data().get_slice_memory_size().map_or(0, |n| n as u64);
    match v {
        ColumnarValue::Scalar(s) => Size::Each(s.to_array().map_or(0, |a| bytes(&a))),
        ColumnarValue::Array(a) => {
            let sum = bytes(a);
            Size::Rows { sum, max: sum }
        }
    }
}

/// The counts of a count argument (negative counts count as 0).
fn count_size(v: &ColumnarValue) -> Size {
    let one = |s: &ScalarValue| match s.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(Some(n))) => n.max(0) as u64,
        _ => 0,
    };
    match v {
        ColumnarValue::Scalar(s) => Size::Each(one(s)),
        ColumnarValue::Array(a) => {
            let Ok(cast) = datafusion::arrow::compute::cast(a, &DataType::Int64) else {
                return Size::Each(0);
            };
            let (mut sum, mut max) = (0u64, 0u64);
            for n in cast.as_primitive::<Int64Type>().iter().flatten() {
                let n = n.max(0) as u64;
                max = max.max(n);
                sum = sum.saturating_add(n);
            }
            Size::Rows { sum, max }
        }
    }
}

/// The bytes of one element of a list type's elements (16 for variable-size ones: an offset
/// and a little text).
fn element_bytes(list: &DataType) -> u64 {
    match list {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            f.data_type().primitive_width().unwrap_or(16) as u64
        }
        _ => 8,
    }
}

/// The leaf elements of a list argument (a nested list counts its innermost elements).
fn element_count(v: &ColumnarValue) -> Size {
    fn leaves(d: &datafusion::arrow::array::ArrayData) -> u64 {
        match d.child_data().first() {
            Some(child) if d.data_type().is_nested() => leaves(child),
            _ => d.len() as u64,
        }
    }
    match v {
        ColumnarValue::Scalar(s) => Size::Each(s.to_array().map_or(0, |a| leaves(&a.to_data()))),
        ColumnarValue::Array(a) => {
            let n = leaves(&a.to_data());
            Size::Rows { sum: n, max: n }
        }
    }
}

/// Σ of `regexp_replace`'s result bytes at most, running the pattern: per match, `to` plus
/// the match for each `\N` in `to`. 0 when a pattern does not compile (the function says so).
fn regexp_replace_bytes(args: &[ColumnarValue]) -> u64 {
    let Ok(arrays) = ColumnarValue::values_to_arrays(args) else {
        return 0;
    };
    let (text, pattern, to, flags) = (&arrays[0], &arrays[1], &arrays[2], arrays.get(3));
    let mut compiled: Option<(String, regex::Regex)> = None;
    let mut total = 0u64;
    for i in 0..text.len() {
        let (Some(t), Some(p), Some(r)) = (
            text_at(text.as_ref(), i),
            text_at(pattern.as_ref(), i),
            text_at(to.as_ref(), i),
        ) else {
            continue;
        };
        let f = flags.and_then(|f| text_at(f.as_ref(), i)).unwrap_or("");
        let all = f.contains('g');
        let inline = f.replace('g', "");
        let source = if inline.is_empty() {
            p.to_string()
        } else {
            format!("(?{inline}){p}")
        };
        if compiled.as_ref().map(|(s, _)| s) != Some(&source) {
            let Ok(re) = regex::Regex::new(&source) else {
                return 0;
            };
            compiled = Some((source, re));
        }
        let Some((_, re)) = &compiled else { return 0 };
        let refs = r
            .as_bytes()
            .windows(2)
            .filter(|w| w[0] == b'\\' && w[1].is_ascii_digit())
            .count() as u64;
        let mut grown = t.len() as u64;
        for m in re.find_iter(t).take(if all { usize::MAX } else { 1 }) {
            grown = grown
                .saturating_add(r.len() as u64)
                .saturating_add(refs.saturating_mul(m.len() as u64));
        }
        total = total.saturating_add(grown);
    }
    total
}

const NS_PER_DAY: i128 = 86_400_000_000_000;

/// Σ of the element bytes `range`/`generate_series` would build: per row, |stop − start| /
/// |step| elements (an interval step taken at its longest, months of 31 days, so the count is
/// at least the real one).
fn range_bytes(args: &[ColumnarValue]) -> u64 {
    let Ok(arrays) = ColumnarValue::values_to_arrays(args) else {
        return 0;
    };
    // Each argument as i128 per row: integers as they are, dates in days, timestamps in ns,
    // intervals in the unit of the bounds.
    let (unit_ns, width) = match arrays.first().map(|a| a.data_type()) {
        Some(DataType::Date32 | DataType::Date64) => (NS_PER_DAY, 4),
        Some(DataType::Timestamp(..)) => (1, 8),
        _ => (0, 8),
    };
    let as_i128 = |a: &ArrayRef| -> Option<Vec<Option<i128>>> {
        let target = match a.data_type() {
            DataType::Interval(IntervalUnit::MonthDayNano) => {
                let iv = a.as_primitive::<IntervalMonthDayNanoType>();
                return Some(
                    iv.iter()
                        .map(|v| {
                            v.map(|v| {
                                let ns = (v.months as i128 * 31 + v.days as i128) * NS_PER_DAY
                                    + v.nanoseconds as i128;
                                ns / unit_ns.max(1)
                            })
                        })
                        .collect(),
                );
            }
            DataType::Date64 => DataType::Date32,
            DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Nanosecond, tz.clone()),
            other => other.clone(),
        };
        let a = datafusion::arrow::compute::cast(a, &target).ok()?;
        let a = datafusion::arrow::compute::cast(&a, &DataType::Int64).ok()?;
        Some(
            a.as_primitive::<Int64Type>()
                .iter()
                .map(|v| v.map(i128::from))
                .collect(),
        )
    };
    let Some(cols) = arrays.iter().map(as_i128).collect::<Option<Vec<_>>>() else {
        return 0;
    };
    let rows = cols.first().map_or(0, Vec::len);
    let mut total = 0u64;
    for i in 0..rows {
        let get = |c: usize| cols.get(c).and_then(|col| col[i]);
        let (start, stop, step) = match cols.len() {
            1 => (Some(0), get(0), Some(1)),
            2 => (get(0), get(1), Some(1)),
            _ => (get(0), get(1), get(2)),
        };
        let (Some(start), Some(stop), Some(step)) = (start, stop, step) else {
            continue;
        };
        if step == 0 {
            continue; // the function refuses it
        }
        let count = ((stop - start).unsigned_abs() / step.unsigned_abs()).min(u64::MAX as u128);
        total = total.saturating_add((count as u64).saturating_mul(width));
    }
    total
}

/// Σ of `replace(text, from, to)`'s result bytes, counting the occurrences (an empty `from`
/// leaves the text as it is).
fn replace_bytes(args: &[ColumnarValue]) -> u64 {
    let Ok(arrays) = ColumnarValue::values_to_arrays(args) else {
        return 0;
    };
    let [text, from, to] = &arrays[..] else {
        return 0;
    };
    let mut total = 0u64;
    for i in 0..text.len() {
        let (Some(t), Some(f), Some(r)) = (
            text_at(text.as_ref(), i),
            text_at(from.as_ref(), i),
            text_at(to.as_ref(), i),
        ) else {
            continue;
        };
        let grow = r.len().saturating_sub(f.len()) as u64;
        let n = if f.is_empty() || grow == 0 {
            0
        } else {
            t.matches(f).count() as u64
        };
        total = total
            .saturating_add(t.len() as u64)
            .saturating_add(n.saturating_mul(grow));
    }
    total
}

impl Growth {
    /// The bytes the call would build: an upper bound (for `lpad`/`rpad` a character counts
    /// one byte); for `replace` and `regexp_replace` the occurrences are counted when the cheap
    /// bound is over `limit`.
    fn estimate(self, args: &[ColumnarValue], rows: u64, limit: u64) -> u64 {
        let arg = |i: usize| args.get(i);
        let texts = |args: &[ColumnarValue]| {
            args.iter()
                .map(|a| text_size(a).total(rows))
                .fold(0, u64::saturating_add)
        };
        match (self, arg(0), arg(1)) {
            (Growth::Repeat, Some(text), Some(n)) => product(text_size(text), count_size(n), rows),
            (Growth::Pad, Some(_), Some(n)) => product(Size::Each(1), count_size(n), rows),
            (Growth::Concat | Growth::ConcatOp, ..) => texts(args),
            (Growth::ConcatWs, Some(sep), _) => texts(args).saturating_add(
                (args.len().saturating_sub(2) as u64).saturating_mul(text_size(sep).total(rows)),
            ),
            (Growth::Replace | Growth::RegexpReplace, Some(text), Some(_)) => {
                let Some(to) = arg(2) else { return 0 };
                // (text + 1) × (to + 1) per row bounds any result of `replace`; twice that
                // covers the `\N` group references of `regexp_replace` (each at most its match).
                let cheap = product(text_size(text), text_size(to), rows)
                    .saturating_add(text_size(text).total(rows))
                    .saturating_add(text_size(to).total(rows))
                    .saturating_add(rows)
                    .saturating_mul(if self == Growth::Replace { 1 } else { 2 });
                match self {
                    _ if cheap <= limit => cheap,
                    Growth::Replace => replace_bytes(args),
                    _ => regexp_replace_bytes(args),
                }
            }
            (Growth::Encode, Some(text), _) => text_size(text).total(rows).saturating_mul(2),
            (Growth::ArrayToString, Some(list), Some(sep)) => {
                let per_element = args[1..]
                    .iter()
                    .map(text_size)
                    .fold(Size::Each(0), Size::plus);
                product(element_count(list), per_element, rows)
                    .saturating_add(value_size(list).total(rows).saturating_mul(3))
                    .saturating_add(text_size(sep).total(rows))
            }
            (Growth::ArrayRepeat, Some(value), Some(n)) => {
                product(value_size(value), count_size(n), rows)
            }
            (Growth::ArrayResize, Some(list), Some(n)) => product(
                Size::Each(element_bytes(&list.data_type())),
                count_size(n),
                rows,
            ),
            (Growth::Range, ..) => range_bytes(args),
            _ => 0,
        }
    }
}

/// Fails when the call `name` (`repeat()`, `` `||` ``) with `args` would build more than the
/// limit.
fn check(name: &str, growth: Growth, args: &ScalarFunctionArgs) -> Result<()> {
    let any_array = args
        .args
        .iter()
        .any(|a| matches!(a, ColumnarValue::Array(_)));
    let rows = if any_array {
        args.number_rows as u64
    } else {
        1
    };
    let limit = memory_limit_bytes();
    let text = growth.is_text();
    let cap = if text {
        limit.min(MAX_TEXT_BYTES)
    } else {
        limit
    };
    let estimate = growth.estimate(&args.args, rows, cap);
    if estimate > cap {
        return exec_err!(
            "{name} would build {} MiB of {}, more than {} (--memory-limit is {} MiB)",
            estimate >> 20,
            if text { "text" } else { "array elements" },
            if text && MAX_TEXT_BYTES < limit {
                "the 1 GiB of text memq allows one call to build"
            } else {
                "the memory limit"
            },
            limit >> 20
        );
    }
    Ok(())
}

impl ScalarUDFImpl for Guarded {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.return_field_from_args(args)
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }
    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
    // `simplify` is not passed on: the built-ins' simplifications build calls of the unguarded
    // function.
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        check(&format!("{}()", self.inner.name()), self.growth, &args)?;
        self.inner.invoke_with_args(args)
    }
}

/// `a || b` on text or bytes, planned as this function instead of the operator (same
/// coercion, result type and column name): the operator turns a scalar side into an array of
/// the batch's rows before it concatenates, so `name || <100 MB literal>` built 100 MB per row
/// without a check.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ConcatOp {
    signature: Signature,
}

impl ConcatOp {
    /// The operands' types after coercion, and the result's.
    fn types(arg_types: &[DataType]) -> Result<(DataType, DataType, DataType)> {
        let [l, r] = arg_types else {
            return exec_err!("||: two operands, not {}", arg_types.len());
        };
        let coercer = BinaryTypeCoercer::new(l, &Operator::StringConcat, r);
        let (l, r) = coercer.get_input_types()?;
        Ok((l, r, coercer.get_result_type()?))
    }
}

impl ScalarUDFImpl for ConcatOp {
    fn name(&self) -> &str {
        "memq_concat_operator"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        let [l, r] = args else {
            return exec_err!("||: two operands, not {}", args.len());
        };
        Ok(format!("{} || {}", l.schema_name(), r.schema_name()))
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let (l, r, _) = Self::types(arg_types)?;
        Ok(vec![l, r])
    }
    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(Self::types(arg_types)?.2)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        check("`||`", Growth::ConcatOp, &args)?;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = concat_elements_dyn(&arrays[0], &arrays[1])?;
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// Plans `a || b` (but not on lists: `array_concat` and friends) as [`ConcatOp`].
#[derive(Debug)]
struct ConcatOpPlanner {
    udf: Arc<ScalarUDF>,
}

impl ExprPlanner for ConcatOpPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let is_list = |e: &Expr| {
            matches!(
                e.get_type(schema),
                Ok(DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
            )
        };
        if expr.op != BinaryOperator::StringConcat || is_list(&expr.left) || is_list(&expr.right) {
            return Ok(PlannerResult::Original(expr));
        }
        Ok(PlannerResult::Planned(
            self.udf.call(vec![expr.left, expr.right]),
        ))
    }
}

/// Registers the guarded functions in place of the built-ins, and the `||` planner.
pub fn register(ctx: &SessionContext) -> Result<()> {
    for f in guarded_functions() {
        ctx.register_udf(f);
    }
    ctx.state_ref().write().register_expr_planner(planner())
}

/// The function `a || b` on text is planned as ([`ConcatOp`], `memq_concat_operator`).
fn concat_operator() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(ConcatOp {
        signature: Signature::user_defined(Volatility::Immutable),
    }))
}

/// The planner of `a || b` on text ([`ConcatOpPlanner`]).
pub fn planner() -> Arc<dyn ExprPlanner> {
    Arc::new(ConcatOpPlanner {
        udf: concat_operator(),
    })
}

/// Every function a plan planned with [`register`] may name: the guarded built-ins and
/// `memq_concat_operator`. A session that decodes such plans (a cluster's scheduler and
/// executors) needs them all in its function registry.
pub fn udfs() -> Vec<Arc<ScalarUDF>> {
    let mut all: Vec<Arc<ScalarUDF>> = guarded_functions().into_iter().map(Arc::new).collect();
    all.push(concat_operator());
    all
}

/// The guarded built-ins (registered after the built-ins, they replace them).
fn guarded_functions() -> Vec<ScalarUDF> {
    use datafusion::functions::{encoding, regex, string, unicode};
    use datafusion::functions_nested::string as nested_string;
    use datafusion::functions_nested::{range, repeat, resize};
    let wrap = |inner: Arc<ScalarUDF>, growth| ScalarUDF::new_from_impl(Guarded { inner, growth });
    vec![
        wrap(string::repeat(), Growth::Repeat),
        wrap(unicode::lpad(), Growth::Pad),
        wrap(unicode::rpad(), Growth::Pad),
        wrap(string::concat(), Growth::Concat),
        wrap(string::concat_ws(), Growth::ConcatWs),
        wrap(string::replace(), Growth::Replace),
        wrap(regex::regexp_replace(), Growth::RegexpReplace),
        wrap(encoding::encode(), Growth::Encode),
        wrap(nested_string::array_to_string_udf(), Growth::ArrayToString),
        wrap(repeat::array_repeat_udf(), Growth::ArrayRepeat),
        wrap(resize::array_resize_udf(), Growth::ArrayResize),
        wrap(range::range_udf(), Growth::Range),
        wrap(range::gen_series_udf(), Growth::Range),
    ]
}
