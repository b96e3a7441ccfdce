//! The memscope SQL functions: the Attr language and the owner hierarchy
//! (docs/formats/memscope.md §3.4 and §4.1). `memq functions` and `\\df` print their docs.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, ListBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::Result as DfResult;
use memq_core::format::Function;
use memq_core::function::{ints, map_str, scalar, strings};

use crate::{attr, owner};

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

fn list_of_text() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)))
}

/// The memscope functions, in listing order.
pub fn functions() -> Vec<Function> {
    vec![
        scalar(
            "attr",
            "attr(attr_text, key) -> VARCHAR",
            "The value of `key` in an Attr cell ({k:v,...} or the db's JSON form); values may contain commas. NULL when the key is absent.",
            2,
            DataType::Utf8,
            attr_text,
        ),
        scalar(
            "attr_int",
            "attr_int(attr_text, key) -> BIGINT",
            "The value of `key` read as an integer the way Python int() reads trimmed text; NULL when absent or not an integer (hex, float, empty).",
            2,
            DataType::Int64,
            attr_int,
        ),
        scalar(
            "owner_parts",
            "owner_parts(owner) -> LIST<VARCHAR>",
            "The levels of an owner after its framework segment: 'CANN@HCCL@x' -> [HCCL, x], 'PTA@weight' -> [weight].",
            1,
            list_of_text(),
            owner_parts,
        ),
        scalar(
            "owner_group",
            "owner_group(owner) -> VARCHAR",
            "The level-1 group of an owner (first level after the framework), '(unlabelled)' when there is none or the owner is NULL.",
            1,
            DataType::Utf8,
            owner_group,
        ),
        scalar(
            "owner_level",
            "owner_level(owner, n) -> VARCHAR",
            "Level n (1-based) of an owner after its framework segment; NULL when the owner is shallower.",
            2,
            DataType::Utf8,
            owner_level,
        ),
        scalar(
            "owner_framework",
            "owner_framework(owner) -> VARCHAR",
            "The framework segment opening an owner (PTA, PTA_WORKSPACE, ATB, MINDSPORE, HAL, HOST, HOST_PINNED, CANN); NULL otherwise.",
            1,
            DataType::Utf8,
            owner_framework,
        ),
    ]
}
