//! memq's display functions, for every format: bytes, addresses and stack frames. Each has a
//! doc string that `memq functions` and `\\df` print.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, UInt64Type};
use datafusion::common::{exec_err, Result as DfResult};
use datafusion::execution::session_state::SessionState;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::ScalarUDF;
use datafusion::prelude::SessionContext;
use memq_core::format::{Catalog, Function};
use memq_core::function::{
    format_bytes, format_pct, ints, scalar, scalar_optional, scalar_variadic, scalar_volatile,
    strings,
};

use crate::units::{format_duration, format_epoch};

fn fmt_bytes(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let n = ints(&args[0])?;
    let out: StringArray = n.iter().map(|v| v.map(format_bytes)).collect();
    Ok(Arc::new(out))
}

fn fmt_pct(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let p = cast(&args[0], &DataType::Float64)?;
    let out: StringArray = p
        .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
        .iter()
        .map(|v| v.map(format_pct))
        .collect();
    Ok(Arc::new(out))
}

fn fmt_duration(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let n = ints(&args[0])?;
    let out: StringArray = n
        .iter()
        .map(|v| v.map(|v| format_duration(v as f64)))
        .collect();
    Ok(Arc::new(out))
}

/// A moment as the report writes it: `2026-12-07 19:40:06.123 UTC`, and with a start
/// `+1.234 s (2026-12-07 19:40:06.123 UTC)` when the moment is not before it.
pub fn format_moment(ns: i64, start: Option<i64>) -> String {
    let iso = format_epoch(ns, 3);
    let at = format!("{} UTC", iso.replacen('T', " ", 1).trim_end_matches('Z'));
    match start {
        Some(s) if ns >= s => format!("+{} ({at})", format_duration((ns - s) as f64)),
        _ => at,
    }
}

fn fmt_time(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let n = ints(&args[0])?;
    let start = args.get(1).map(ints).transpose()?;
    let out: StringArray = (0..n.len())
        .map(|i| {
            let s = start
                .as_ref()
                .and_then(|s| s.is_valid(i).then(|| s.value(i)));
            n.is_valid(i).then(|| format_moment(n.value(i), s))
        })
        .collect();
    Ok(Arc::new(out))
}

fn hex(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let a = &args[0];
    let values = match a.data_type() {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let i = ints(a)?;
            i.iter().map(|v| v.map(|v| v as u64)).collect::<Vec<_>>()
        }
        DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Null => {
            let u = cast(a, &DataType::UInt64)?;
            u.as_primitive::<UInt64Type>().iter().collect()
        }
        other => return exec_err!("hex() takes an integer, not {other}"),
    };
    let out: StringArray = values
        .into_iter()
        .map(|v| v.map(|v| format!("0x{v:016x}")))
        .collect();
    Ok(Arc::new(out))
}

fn stack_frame(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let (stacks, n) = (strings(&args[0])?, ints(&args[1])?);
    let out: StringArray = (0..stacks.len())
        .map(|i| {
            if stacks.is_null(i) || n.is_null(i) {
                return None;
            }
            let k = usize::try_from(n.value(i)).ok()?.checked_sub(1)?;
            stacks
                .value(i)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .nth(k)
                .map(str::to_string)
        })
        .collect();
    Ok(Arc::new(out))
}

/// `raise_unless(condition, message)`: TRUE, or the query fails with `message` (the first
/// message of a row where the condition is not true).
fn raise_unless(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let cond = cast(&args[0], &DataType::Boolean)?;
    let cond = cond.as_boolean();
    let messages = strings(&args[1])?;
    if let Some(i) = (0..cond.len()).find(|&i| cond.is_null(i) || !cond.value(i)) {
        let message = if messages.is_valid(i) {
            messages.value(i)
        } else {
            "check failed"
        };
        return exec_err!("{message}");
    }
    Ok(Arc::new(datafusion::arrow::array::BooleanArray::from(
        vec![true; cond.len()],
    )))
}

/// The engine's own functions, in listing order.
pub fn functions() -> Vec<Function> {
    vec![
        scalar(
            "fmt_bytes",
            "fmt_bytes(n) -> VARCHAR",
            "Bytes in IEC units with two decimals: 512 B, 1.50 KiB, 16.00 MiB, 1.25 GiB.",
            1,
            DataType::Utf8,
            fmt_bytes,
        ),
        scalar(
            "fmt_pct",
            "fmt_pct(percent) -> VARCHAR",
            "A percentage with one decimal: 12.3 %.",
            1,
            DataType::Utf8,
            fmt_pct,
        ),
        scalar(
            "fmt_duration",
            "fmt_duration(ns) -> VARCHAR",
            "A duration in ns as the shell prints it: 950 ns, 3.200 µs, 1.234 ms, 12.345 s, 2 min 05 s, 3 h 02 min.",
            1,
            DataType::Utf8,
            fmt_duration,
        ),
        scalar_optional(
            "fmt_time",
            "fmt_time(ns [, start_ns]) -> VARCHAR",
            "A moment (ns since the Unix epoch) in UTC to the millisecond: 2026-12-07 19:40:06.123 UTC; with a start, the time since it first: +1.234 s (2026-12-07 19:40:06.123 UTC).",
            1..=2,
            DataType::Utf8,
            fmt_time,
        ),
        scalar(
            "curve_shape",
            "curve_shape(values LIST<BIGINT>) -> VARCHAR",
            "The shape of a memory curve from its values in time order (e.g. array_agg(end_bytes ORDER BY bucket)): plateau, rising, staircase, rising_with_dips, sawtooth, spike_then_drop, mixed, or too_short under 3 values (docs/formats/memscope.md §6.16).",
            1,
            DataType::Utf8,
            crate::shape::curve_shape_fn,
        ),
        scalar(
            "curve_turns",
            "curve_turns(values LIST<BIGINT>) -> LIST<BIGINT>",
            "The turning points of a memory curve (1-based positions in the list): where it turns after a move of more than a tenth of its range, as curve_shape reads them.",
            1,
            crate::shape::turns_type(),
            crate::shape::curve_turns_fn,
        ),
        scalar_variadic(
            "json_object",
            "json_object(name, value [, name, value …]) -> VARCHAR",
            "A JSON object of the named values, as text: numbers, text, booleans and NULL as themselves, lists as arrays, structs (named_struct) as objects. The findings carry their figures in it.",
            DataType::Utf8,
            crate::json::json_object,
        ),
        scalar(
            "hex",
            "hex(n) -> VARCHAR",
            "An address as 0x followed by 16 lowercase hex digits, the way msMemScope writes Ptr.",
            1,
            DataType::Utf8,
            hex,
        ),
        scalar(
            "stack_frame",
            "stack_frame(stack, n) -> VARCHAR",
            "Frame n (1 = innermost) of a call stack text, trimmed; NULL when the stack is shorter.",
            2,
            DataType::Utf8,
            stack_frame,
        ),
        scalar_volatile(
            "raise_unless",
            "raise_unless(condition, message) -> BOOLEAN",
            "TRUE when the condition holds on every row; otherwise the query fails with the message. The SQL library checks its arguments with it.",
            2,
            DataType::Boolean,
            raise_unless,
        ),
        scalar_optional(
            "user_frame",
            "user_frame(stack [, library_regex]) -> VARCHAR",
            "The innermost user frame of a call stack text (one frame per line, innermost first): the first Python frame whose file matches no library pattern (default: site-packages, dist-packages, lib/python*, torch/, torch_npu/, Ascend/ (CANN), torchinductor_, <frozen …>; docs/attribution.md). A second argument replaces the library regex. NULL when no frame qualifies.",
            1..=2,
            DataType::Utf8,
            crate::attribution::user_frame_fn,
        ),
        scalar_optional(
            "categorize",
            "categorize(owner, frame [, rules]) -> VARCHAR",
            "The category of an allocation (weights, gradients, optimizer_state, kv_cache, activations, workspace, communication, stock, framework_pool, runtime, other; unknown without owner and frame): the first default rule matching the owner, else the user frame (docs/attribution.md). A third argument replaces the rules: lines `owner: REGEX => CATEGORY` / `frame: REGEX => CATEGORY`, e.g. from a rules table: (SELECT string_agg(kind || ': ' || pattern || ' => ' || category, chr(10) ORDER BY priority) FROM my_rules).",
            2..=3,
            DataType::Utf8,
            crate::attribution::categorize_fn,
        ),
        scalar(
            "seq_align",
            "seq_align(a, b) -> LIST<BIGINT>",
            "Two lists of names (the ops, kernels or marks of two runs, in order) aligned like a text diff: a longest common subsequence by Myers' algorithm, as msMemScope's --compare aligns op sequences. Gives the 1-based ordinal of the aligned point of every name of a, then of every name of b (as many as both lists hold): two names share a point when they pair, a name of one list alone has a point of its own. A NULL list counts as empty. run_diff(a, b, align) uses it beside unnest(array_concat(a, b)).",
            2,
            crate::align::aligned_type(),
            crate::align::seq_align_fn,
        ),
    ]
}

/// Registers every memq function in `ctx`: the engine's and the formats' functions
/// ([`crate::all_functions`]) and the guarded built-ins with the `||` planner
/// ([`crate::guard::register`]). [`crate::Engine::open`] and a cluster client call it.
pub fn register_all(ctx: &SessionContext, catalog: &Catalog) -> DfResult<()> {
    for f in crate::all_functions(catalog) {
        ctx.register_udf(f.udf);
    }
    crate::guard::register(ctx)
}

/// Every scalar function a memq plan may name beyond DataFusion's built-ins: the engine's and
/// the formats' functions, the guarded built-ins (replacing theirs) and `memq_concat_operator`.
/// The function registries of a cluster's scheduler and executors hold them, so that plans
/// naming them decode there.
pub fn cluster_udfs(catalog: &Catalog) -> Vec<Arc<ScalarUDF>> {
    let mut all: Vec<Arc<ScalarUDF>> = crate::all_functions(catalog)
        .into_iter()
        .map(|f| Arc::new(f.udf))
        .collect();
    all.extend(crate::guard::udfs());
    all
}

/// Registers [`cluster_udfs`] and the `||` planner in a session state (a cluster scheduler's
/// sessions, a cluster client's state once Ballista has reset its functions).
pub fn register_in_state(state: &mut SessionState, catalog: &Catalog) -> DfResult<()> {
    for f in cluster_udfs(catalog) {
        state.register_udf(f)?;
    }
    state.register_expr_planner(crate::guard::planner())
}
