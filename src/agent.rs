//! Agent mode (docs/repl.md, "Agent mode"): when stdout is not a terminal and an AI agent is
//! detected (`AI_AGENT` or one of [`AGENT_ENV`] set), or with `--agent`, results that would be
//! shown as a table are written as compact Markdown tables with `name:TYPE` headers and raw
//! values (head only, at most `maxrows` rows, then one line saying how many there were), and
//! every error is one JSON line on stderr.

use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::arrow::datatypes::{DataType, Field};
use memq_core::error::MemqError;

/// Environment variables that say an AI agent runs memq (any value but empty or `0`).
pub const AGENT_ENV: &[&str] = &["AI_AGENT", "CLAUDECODE", "CURSOR_AGENT", "GEMINI_CLI"];

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// True when one of [`AGENT_ENV`] is set.
pub fn detected() -> bool {
    AGENT_ENV
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|x| !x.is_empty() && x != "0"))
}

/// Whether agent mode applies: `--agent`, or an agent detected with stdout not a terminal.
pub fn wanted(flag: bool) -> bool {
    use std::io::IsTerminal;
    flag || (detected() && !std::io::stdout().is_terminal())
}

/// Turns agent mode on or off for the process (once, at start-up).
pub fn init(on: bool) {
    ACTIVE.store(on, Ordering::Relaxed);
}

pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// A column type as SQL names it: `BIGINT`, `DOUBLE`, `VARCHAR`, `VARCHAR[]`, ...
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "TINYINT UNSIGNED".into(),
        DataType::UInt16 => "SMALLINT UNSIGNED".into(),
        DataType::UInt32 => "INT UNSIGNED".into(),
        DataType::UInt64 => "BIGINT UNSIGNED".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BLOB".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Timestamp(..) => "TIMESTAMP".into(),
        DataType::Duration(_) | DataType::Interval(_) => "INTERVAL".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("DECIMAL({p},{s})"),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            format!("{}[]", type_name(f.data_type()))
        }
        DataType::Struct(_) => "STRUCT".into(),
        DataType::Map(..) => "MAP".into(),
        DataType::Dictionary(_, v) => type_name(v),
        DataType::Null => "NULL".into(),
        other => other.to_string(),
    }
}

/// The header cell of a column: `name:TYPE`.
pub fn header(field: &Field) -> String {
    format!("{}:{}", field.name(), type_name(field.data_type()))
}

/// An error as one JSON line: `{"error": …, "kind": "query"|"usage"|"input", "exit_code": n}`.
pub fn error_json(e: &MemqError) -> String {
    let kind = match e {
        MemqError::Input { .. } => "input",
        MemqError::Usage(_) => "usage",
        MemqError::Query(_) => "query",
    };
    serde_json::json!({
        "error": e.to_string().trim_end(),
        "kind": kind,
        "exit_code": e.exit_code(),
    })
    .to_string()
}

/// Prints an error on stderr: one JSON line in agent mode, else `{prefix}{error}`.
pub fn report_error(prefix: &str, e: &MemqError) {
    if active() {
        if e.to_string().is_empty() {
            return; // already reported, as the failing statement's own line
        }
        eprintln!("{}", error_json(e));
    } else {
        eprintln!("{prefix}{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn headers_and_error_lines() {
        let f = Field::new(
            "frames",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        );
        assert_eq!(header(&f), "frames:VARCHAR[]");
        assert_eq!(
            header(&Field::new("size", DataType::Int64, false)),
            "size:BIGINT"
        );
        let line = error_json(&MemqError::Query(
            "syntax error at line 1\n  SELECT * FORM events\n           ^^^^".into(),
        ));
        assert!(!line.contains('\n'), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["kind"], "query");
        assert_eq!(v["exit_code"], 1);
        assert!(v["error"].as_str().unwrap().ends_with("^^^^"));
    }
}
