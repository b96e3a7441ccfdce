//! A small frame for memq's scalar SQL functions: a function is a name, a fixed argument
//! count, a return type and a body over whole arrays. Formats and the engine declare theirs
//! with [`scalar`].

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::format::Function;

/// The body of a function: its argument arrays (scalars expanded) to the result array.
pub type Body = fn(&[ArrayRef]) -> DfResult<ArrayRef>;

/// A scalar function over whole arrays with a fixed argument count and return type.
#[derive(Debug)]
pub struct MemqUdf {
    name: &'static str,
    signature: Signature,
    returns: DataType,
    body: Body,
}

impl PartialEq for MemqUdf {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for MemqUdf {}
impl std::hash::Hash for MemqUdf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for MemqUdf {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(self.returns.clone())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let out = (self.body)(&arrays)?;
        if all_scalar && out.len() == 1 {
            return Ok(ColumnarValue::Scalar(
                datafusion::common::ScalarValue::try_from_array(&out, 0)?,
            ));
        }
        Ok(ColumnarValue::Array(out))
    }
}

/// A documented scalar function of `args` arguments returning `returns`.
pub fn scalar(
    name: &'static str,
    usage: &'static str,
    doc: &'static str,
    args: usize,
    returns: DataType,
    body: Body,
) -> Function {
    scalar_optional(name, usage, doc, args..=args, returns, body)
}

/// [`scalar`] whose last arguments are optional: from `args.start()` to `args.end()` arguments.
pub fn scalar_optional(
    name: &'static str,
    usage: &'static str,
    doc: &'static str,
    args: std::ops::RangeInclusive<usize>,
    returns: DataType,
    body: Body,
) -> Function {
    let signature = if args.start() == args.end() {
        Signature::any(*args.start(), Volatility::Immutable)
    } else {
        let arities = args
            .map(datafusion::logical_expr::TypeSignature::Any)
            .collect();
        Signature::one_of(arities, Volatility::Immutable)
    };
    function(name, usage, doc, signature, returns, body)
}

/// [`scalar`] that the optimizer must neither fold, move nor drop (checks that raise errors).
pub fn scalar_volatile(
    name: &'static str,
    usage: &'static str,
    doc: &'static str,
    args: usize,
    returns: DataType,
    body: Body,
) -> Function {
    let signature = Signature::any(args, Volatility::Volatile);
    function(name, usage, doc, signature, returns, body)
}

/// [`scalar`] with any number of arguments (`json_object(name, value, …)`).
pub fn scalar_variadic(
    name: &'static str,
    usage: &'static str,
    doc: &'static str,
    returns: DataType,
    body: Body,
) -> Function {
    let signature = Signature::variadic_any(Volatility::Immutable);
    function(name, usage, doc, signature, returns, body)
}

fn function(
    name: &'static str,
    usage: &'static str,
    doc: &'static str,
    signature: Signature,
    returns: DataType,
    body: Body,
) -> Function {
    let udf = MemqUdf {
        name,
        signature,
        returns,
        body,
    };
    Function {
        udf: ScalarUDF::new_from_impl(udf),
        usage,
        doc,
    }
}

pub fn strings(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

pub fn ints(a: &ArrayRef) -> DfResult<Int64Array> {
    Ok(cast(a, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}

pub fn map_str(a: &ArrayRef, f: impl Fn(&str) -> Option<String>) -> DfResult<ArrayRef> {
    map_opt_str(a, |v| v.and_then(&f))
}

/// `f` of each value (NULL as `None`), computed once per distinct value of the batch: the
/// columns these functions read (owners, sources) repeat a few values over many rows.
pub fn map_opt_str(a: &ArrayRef, f: impl Fn(Option<&str>) -> Option<String>) -> DfResult<ArrayRef> {
    let s = strings(a)?;
    let mut memo: HashMap<Option<&str>, Option<String>> = HashMap::new();
    let mut out = StringBuilder::with_capacity(s.len(), s.len() * 8);
    for v in s.iter() {
        out.append_option(memo.entry(v).or_insert_with(|| f(v)).as_deref());
    }
    Ok(Arc::new(out.finish()))
}

/// A percentage with one decimal: `12.3 %`.
pub fn format_pct(p: f64) -> String {
    format!("{p:.1} %")
}

/// Bytes in IEC units with two decimals: `512 B`, `1.50 KiB`, `16.00 MiB`.
pub fn format_bytes(n: i64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let neg = n < 0;
    let mut v = n.unsigned_abs() as f64;
    if v < 1024.0 {
        return format!("{n} B");
    }
    let mut unit = 0;
    v /= 1024.0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{}{v:.2} {}", if neg { "-" } else { "" }, UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_formatted_in_iec_units() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(16 * 1024 * 1024), "16.00 MiB");
        assert_eq!(format_bytes(-2048), "-2.00 KiB");
    }
}
