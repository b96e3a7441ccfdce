//! The memscope SQL functions: the Attr language and the owner hierarchy
//! (docs/formats/memscope.md §3.4 and §4.1). `memq functions` and `\\df` print their docs.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, ListBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::Result as DfResult;
use memq_core::format::Function;
use memq_core::function::{ints, map_opt_str, map_str, scalar, strings};

use crate::parse::{attr, owner};

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
    map_opt_str(&args[0], |o| {
        Some(owner::group(o.unwrap_or("")).to_string())
    })
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

/// The capture a dump file belongs to (docs/formats/memscope.md §5.9): the msMemScope output
/// folder above its `device_*/` (and `dump/`) folders, else the file itself.
pub fn capture(source: &str) -> &str {
    let mut parts: Vec<&str> = source.split(['/', '\\']).collect();
    parts.pop();
    if parts.last() == Some(&"dump") {
        parts.pop();
    }
    match parts.last() {
        Some(d) if d.starts_with("device_") => {
            let n = parts.len() - 1;
            let keep: usize = parts[..n].iter().map(|p| p.len() + 1).sum();
            &source[..keep.saturating_sub(1)]
        }
        _ => source,
    }
}

fn capture_of(args: &[ArrayRef]) -> DfResult<ArrayRef> {
    map_str(&args[0], |s| Some(capture(s).to_string()))
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
            "capture",
            "capture(source) -> VARCHAR",
            "The capture (one msMemScope collection) a dump file belongs to: the output folder above its device_*/dump/ folders ('' for the ingested folder itself), else the file itself. The device files of one capture share process ids and OOM records; files of different captures never do.",
            1,
            DataType::Utf8,
            capture_of,
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

#[cfg(test)]
mod tests {
    use super::capture;

    #[test]
    fn capture_is_the_folder_above_the_device_folders() {
        let run = "job/node1/msmemscope_1_20251205_ascend";
        assert_eq!(
            capture(&format!("{run}/device_0/dump/memscope_dump_1.csv")),
            run
        );
        assert_eq!(
            capture(&format!("{run}/device_cpu/dump/memscope_dump_1.csv")),
            run
        );
        assert_eq!(capture(&format!("{run}/device_3/leaks_dump_1.db")), run);
        assert_eq!(capture("device_0/dump/memscope_dump_1.csv"), "");
        assert_eq!(capture("rank3.csv"), "rank3.csv");
        assert_eq!(
            capture("a/dump/memscope_dump_1.csv"),
            "a/dump/memscope_dump_1.csv"
        );
    }
}
