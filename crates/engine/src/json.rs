//! `json_object(name, value, …)`: figures as one JSON object per row, so that an analysis can
//! hand a program (the report's JSON, Python, the web page) its evidence with names and types.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{exec_err, Result as DfResult};
use memq_core::function::strings;
use serde_json::{Map, Number, Value};

/// Value `i` of an array as JSON: numbers, text, booleans and NULL as themselves, lists as
/// arrays, structs as objects, anything else as its display text.
pub fn value(a: &dyn Array, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    macro_rules! int {
        ($t:ty) => {
            Value::from(a.as_primitive::<$t>().value(i))
        };
    }
    let float = |f: f64| {
        Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    };
    match a.data_type() {
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Float32 => float(a.as_primitive::<Float32Type>().value(i) as f64),
        DataType::Float64 => float(a.as_primitive::<Float64Type>().value(i)),
        DataType::Boolean => Value::Bool(a.as_boolean().value(i)),
        DataType::Utf8 => Value::from(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Value::from(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Value::from(a.as_string_view().value(i)),
        DataType::List(_) => {
            let items = a.as_list::<i32>().value(i);
            Value::Array((0..items.len()).map(|k| value(&items, k)).collect())
        }
        DataType::LargeList(_) => {
            let items = a.as_list::<i64>().value(i);
            Value::Array((0..items.len()).map(|k| value(&items, k)).collect())
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), value(c, i)))
                    .collect(),
            )
        }
        _ => match ArrayFormatter::try_new(a, &FormatOptions::default()) {
            Ok(f) => Value::from(f.value(i).to_string()),
            Err(_) => Value::Null,
        },
    }
}

pub fn json_object(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    if !args.len().is_multiple_of(2) {
        return exec_err!(
            "json_object takes names and values in pairs, not {} arguments",
            args.len()
        );
    }
    let rows = args.first().map(|a| a.len()).unwrap_or(1);
    let names = args
        .iter()
        .step_by(2)
        .map(strings)
        .collect::<DfResult<Vec<_>>>()?;
    let out: StringArray = (0..rows)
        .map(|i| {
            let mut object = Map::new();
            for (name, v) in names.iter().zip(args.iter().skip(1).step_by(2)) {
                if name.is_valid(i) {
                    object.insert(name.value(i).to_string(), value(v.as_ref(), i));
                }
            }
            Some(Value::Object(object).to_string())
        })
        .collect();
    Ok(Arc::new(out))
}
