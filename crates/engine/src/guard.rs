//! Guards around the built-in string functions whose result size is chosen by an argument
//! (`repeat`, `lpad`, `rpad`): a call that would build more bytes than the memory limit fails
//! with a message instead of allocating without bound (issue 13, finding 3:
//! `SELECT repeat('x', 2000000000)` aborted the process).

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};

/// How the size of the result follows from the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`: text bytes × n.
    Repeat,
    /// `lpad(text, n [, fill])`: n characters (up to 4 bytes each) per row.
    Pad,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Guarded {
    inner: Arc<ScalarUDF>,
    growth: Growth,
}

/// The memory limit in bytes (`--memory-limit` / MEMQ_MEMORY_LIMIT_MB; 8 GiB by default).
pub fn memory_limit_bytes() -> u64 {
    std::env::var("MEMQ_MEMORY_LIMIT_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|mb| mb << 20)
        .unwrap_or(8 << 30)
}

/// The most text one call may build, whatever the memory limit: a `Utf8` array holds at most
/// 2 GiB, and a result of more than 1 GiB of text is never what an analysis of a dump needs.
const MAX_TEXT_BYTES: u64 = 1 << 30;

/// (rows, total text bytes) of a text argument.
fn text_bytes(v: &ColumnarValue) -> (u64, u64) {
    match v {
        ColumnarValue::Scalar(s) => match s {
            ScalarValue::Utf8(Some(t))
            | ScalarValue::LargeUtf8(Some(t))
            | ScalarValue::Utf8View(Some(t)) => (1, t.len() as u64),
            _ => (1, 0),
        },
        ColumnarValue::Array(a) => {
            let bytes = if let Some(s) = a.as_string_opt::<i32>() {
                s.value_data().len() as u64
            } else if let Some(s) = a.as_string_opt::<i64>() {
                s.value_data().len() as u64
            } else if let Some(s) = a.as_string_view_opt() {
                (0..s.len()).map(|i| s.value(i).len() as u64).sum()
            } else {
                0
            };
            (a.len() as u64, bytes)
        }
    }
}

/// (max, sum) of a count argument (negative counts count as 0).
fn counts(v: &ColumnarValue) -> (u64, u64) {
    let one = |s: &ScalarValue| match s.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(Some(n))) => n.max(0) as u64,
        _ => 0,
    };
    match v {
        ColumnarValue::Scalar(s) => {
            let n = one(s);
            (n, n)
        }
        ColumnarValue::Array(a) => {
            let Ok(cast) = datafusion::arrow::compute::cast(a, &DataType::Int64) else {
                return (0, 0);
            };
            let ints = cast.as_primitive::<Int64Type>();
            let mut max = 0u64;
            let mut sum = 0u64;
            for n in ints.iter().flatten() {
                let n = n.max(0) as u64;
                max = max.max(n);
                sum = sum.saturating_add(n);
            }
            (max, sum)
        }
    }
}

impl Guarded {
    /// The bytes the call would build, at least.
    fn estimate(&self, args: &[ColumnarValue]) -> u64 {
        let (Some(text), Some(n)) = (args.first(), args.get(1)) else {
            return 0;
        };
        let (rows, bytes) = text_bytes(text);
        let (max_n, sum_n) = counts(n);
        match self.growth {
            Growth::Repeat => match (text, n) {
                (ColumnarValue::Scalar(_), _) => bytes.saturating_mul(sum_n),
                (_, ColumnarValue::Scalar(_)) => bytes.saturating_mul(max_n),
                _ => bytes.saturating_mul(max_n),
            },
            Growth::Pad => match n {
                ColumnarValue::Scalar(_) => rows.max(1).saturating_mul(max_n),
                ColumnarValue::Array(_) => sum_n,
            },
        }
    }
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
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let estimate = self.estimate(&args.args);
        let limit = memory_limit_bytes();
        if estimate > limit.min(MAX_TEXT_BYTES) {
            return exec_err!(
                "{}() would build {} MiB of text, more than {} (--memory-limit is {} MiB)",
                self.inner.name(),
                estimate >> 20,
                if estimate > MAX_TEXT_BYTES && MAX_TEXT_BYTES < limit {
                    "the 1 GiB memq allows one call to build".to_string()
                } else {
                    "the memory limit".to_string()
                },
                limit >> 20
            );
        }
        self.inner.invoke_with_args(args)
    }
}

/// `repeat`, `lpad` and `rpad` with the size guard; register them after the built-ins so that
/// they replace them.
pub fn guarded_functions() -> Vec<ScalarUDF> {
    let wrap = |inner: Arc<ScalarUDF>, growth| ScalarUDF::new_from_impl(Guarded { inner, growth });
    vec![
        wrap(datafusion::functions::string::repeat(), Growth::Repeat),
        wrap(datafusion::functions::unicode::lpad(), Growth::Pad),
        wrap(datafusion::functions::unicode::rpad(), Growth::Pad),
    ]
}
