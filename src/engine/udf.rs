//! memq's scalar functions (design.md §5): the Attr language, the owner hierarchy, and display
//! helpers. Each has a doc string that `memq functions` and `\df` print.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, ListBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, UInt64Type};
use datafusion::common::{exec_err, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;

use crate::{attr, owner};

/// A function's name, call form and description.
pub struct FunctionDoc {
    pub name: &'static str,
    pub usage: &'static str,
    pub doc: &'static str,
}

type Body = fn(&[ArrayRef]) -> DfResult<ArrayRef>;

/// A scalar function over whole arrays with a fixed argument count and return type.
#[derive(Debug)]
struct MemqUdf {
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

fn strings(a: &ArrayRef) -> DfResult<StringArray> {
    Ok(cast(a, &DataType::Utf8)?.as_string::<i32>().clone())
}

fn ints(a: &ArrayRef) -> DfResult<Int64Array> {
    Ok(cast(a, &DataType::Int64)?
        .as_primitive::<Int64Type>()
        .clone())
}

fn map_str(a: &ArrayRef, f: impl Fn(&str) -> Option<String>) -> DfResult<ArrayRef> {
    let s = strings(a)?;
    let out: StringArray = s.iter().map(|v| v.and_then(&f)).collect();
    Ok(Arc::new(out))
}

fn attr_text(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let (cells, keys) = (strings(&args[0])?, strings(&args[1])?);
    let out: StringArray = (0..cells.len())
        .map(|i| {
            if cells.is_null(i) || keys.is_null(i) {
                return None;
            }
            attr::lookup(cells.value(i), keys.value(i))
        })
        .collect();
    Ok(Arc::new(out))
}

fn attr_int(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let text = attr_text(args)?;
    let text = text.as_string::<i32>();
    let out: Int64Array = text.iter().map(|v| v.and_then(attr::parse_int)).collect();
    Ok(Arc::new(out))
}

fn owner_parts(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let owners = strings(&args[0])?;
    let mut b = ListBuilder::new(StringBuilder::new())
        .with_field(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    for o in owners.iter() {
        match o {
            None => b.append_null(),
            Some(o) => {
                for p in owner::parts(o) {
                    b.values().append_value(p);
                }
                b.append(true);
            }
        }
    }
    Ok(Arc::new(b.finish()))
}

fn owner_group(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let owners = strings(&args[0])?;
    let out: StringArray = owners
        .iter()
        .map(|o| Some(owner::group(o.unwrap_or("")).to_string()))
        .collect();
    Ok(Arc::new(out))
}

fn owner_level(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let (owners, levels) = (strings(&args[0])?, ints(&args[1])?);
    let out: StringArray = (0..owners.len())
        .map(|i| {
            if owners.is_null(i) || levels.is_null(i) {
                return None;
            }
            let n = usize::try_from(levels.value(i)).ok()?;
            owner::level(owners.value(i), n).map(str::to_string)
        })
        .collect();
    Ok(Arc::new(out))
}

fn owner_framework(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    map_str(&args[0], |o| owner::framework(o).map(str::to_string))
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

fn fmt_bytes(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    let n = ints(&args[0])?;
    let out: StringArray = n.iter().map(|v| v.map(format_bytes)).collect();
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

struct Def {
    doc: FunctionDoc,
    args: usize,
    returns: DataType,
    body: Body,
}

fn defs() -> Vec<Def> {
    let list = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    vec![
        Def { doc: FunctionDoc { name: "attr", usage: "attr(attr_text, key) -> VARCHAR", doc: "The value of `key` in an Attr cell ({k:v,...} or the db's JSON form); values may contain commas. NULL when the key is absent." }, args: 2, returns: DataType::Utf8, body: attr_text },
        Def { doc: FunctionDoc { name: "attr_int", usage: "attr_int(attr_text, key) -> BIGINT", doc: "The value of `key` read as an integer the way Python int() reads trimmed text; NULL when absent or not an integer (hex, float, empty)." }, args: 2, returns: DataType::Int64, body: attr_int },
        Def { doc: FunctionDoc { name: "owner_parts", usage: "owner_parts(owner) -> LIST<VARCHAR>", doc: "The levels of an owner after its framework segment: 'CANN@HCCL@x' -> [HCCL, x], 'PTA@weight' -> [weight]." }, args: 1, returns: list, body: owner_parts },
        Def { doc: FunctionDoc { name: "owner_group", usage: "owner_group(owner) -> VARCHAR", doc: "The level-1 group of an owner (first level after the framework), '(unlabelled)' when there is none or the owner is NULL." }, args: 1, returns: DataType::Utf8, body: owner_group },
        Def { doc: FunctionDoc { name: "owner_level", usage: "owner_level(owner, n) -> VARCHAR", doc: "Level n (1-based) of an owner after its framework segment; NULL when the owner is shallower." }, args: 2, returns: DataType::Utf8, body: owner_level },
        Def { doc: FunctionDoc { name: "owner_framework", usage: "owner_framework(owner) -> VARCHAR", doc: "The framework segment opening an owner (PTA, PTA_WORKSPACE, ATB, MINDSPORE, HAL, HOST, HOST_PINNED, CANN); NULL otherwise." }, args: 1, returns: DataType::Utf8, body: owner_framework },
        Def { doc: FunctionDoc { name: "fmt_bytes", usage: "fmt_bytes(n) -> VARCHAR", doc: "Bytes in IEC units with two decimals: 512 B, 1.50 KiB, 16.00 MiB, 1.25 GiB." }, args: 1, returns: DataType::Utf8, body: fmt_bytes },
        Def { doc: FunctionDoc { name: "hex", usage: "hex(n) -> VARCHAR", doc: "An address as 0x followed by 16 lowercase hex digits, the way msMemScope writes Ptr." }, args: 1, returns: DataType::Utf8, body: hex },
        Def { doc: FunctionDoc { name: "stack_frame", usage: "stack_frame(stack, n) -> VARCHAR", doc: "Frame n (1 = innermost) of a call stack text, trimmed; NULL when the stack is shorter." }, args: 2, returns: DataType::Utf8, body: stack_frame },
    ]
}

/// Docs of every memq function, in listing order.
pub fn docs() -> Vec<FunctionDoc> {
    defs().into_iter().map(|d| d.doc).collect()
}

/// Registers every memq function in `ctx`.
pub fn register(ctx: &SessionContext) {
    for d in defs() {
        let udf = MemqUdf {
            name: d.doc.name,
            signature: Signature::any(d.args, Volatility::Immutable),
            returns: d.returns,
            body: d.body,
        };
        ctx.register_udf(ScalarUDF::new_from_impl(udf));
    }
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
