//! `memq to-db INPUT -o FILE.db`: an msMemScope-style SQLite db that MindStudio Insight imports
//! (docs/formats/memscope.md §4.1 and §4.3).
//!
//! - `memscope_dump`: the 12 columns and declared types the tool writes, one row per `events`
//!   row, each source's rows in its file order (sources one after the other). Cells follow the
//!   tool-written db `fixtures/real/memscope/insight/memscope_host_pinned.db` (a current
//!   msMemScope db from MindStudio Insight's test data): Attr is a compact JSON object whose
//!   values are all strings, and an empty string when the row has no Attr keys (not `{}`); call
//!   stacks are stored as plain text without enclosing quotes, and a missing stack is an empty
//!   string (not NULL, not `N/A`); Ptr is `0x` + 16 hex digits; MSTX names carry literal
//!   surrounding double quotes; other missing text (Name, Event Type, Device Id, Ptr) is `N/A`
//!   and a missing process / thread id `-1`.
//! - `Timestamp(ns)` holds nanoseconds (`events.ts`): sources written in µs are converted, so
//!   a dataset mixing generations gives one consistent time axis.
//! - `python_trace_<pid>`: the Python trace records, one table per process, as the tool writes.
//! - A dataset without msMemScope events (snapshots or profiler CSVs only) is refused: no empty
//!   db is written.
//!
//! memq's own db ingest reads the file back to the same `events` (apart from `source`, `line`,
//! `row_idx`, and `ts_raw` of µs sources, which becomes the ns value), and `to-db` of the
//! tool's db, once ingested, gives back the tool's cells.

use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::arrow::record_batch::RecordBatch;
use futures::StreamExt;
use rusqlite::{params, Connection};

use crate::parse::attr;
use datafusion::prelude::SessionContext;
use memq_core::error::{Location, MemqError, Result};

/// The main table, as the tool declares it (§4.1).
const CREATE_DUMP: &str = "CREATE TABLE memscope_dump (\
    ID INTEGER, Event TEXT, \"Event Type\" TEXT, Name TEXT, \"Timestamp(ns)\" INTEGER, \
    \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, Ptr TEXT, Attr TEXT, \
    \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT)";

/// What `to_db` wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToDbReport {
    pub dump_rows: u64,
    pub trace_rows: u64,
    pub trace_tables: usize,
}

fn db_error(path: &Path, e: rusqlite::Error) -> MemqError {
    MemqError::input(path, Location::None, format!("SQLite: {e}"))
}

/// Typed column accessors over one batch (every column cast once).
struct Columns {
    arrays: Vec<std::sync::Arc<dyn Array>>,
}

impl Columns {
    fn new(batch: &RecordBatch, types: &[DataType]) -> Result<Columns> {
        let arrays = batch
            .columns()
            .iter()
            .zip(types)
            .map(|(c, t)| cast(c, t))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Columns { arrays })
    }

    fn str(&self, col: usize, row: usize) -> Option<&str> {
        let a = self.arrays[col].as_string::<i32>();
        (!a.is_null(row)).then(|| a.value(row))
    }

    fn i64(&self, col: usize, row: usize) -> Option<i64> {
        let a = self.arrays[col].as_primitive::<Int64Type>();
        (!a.is_null(row)).then(|| a.value(row))
    }

    fn u64(&self, col: usize, row: usize) -> Option<u64> {
        let a = self.arrays[col].as_primitive::<UInt64Type>();
        (!a.is_null(row)).then(|| a.value(row))
    }
}

fn quoted(s: &str) -> String {
    format!("\"{s}\"")
}

/// A call stack cell as the tool writes it: the text as is, `''` when there is none. A stack
/// whose own text starts and ends with `"` gets one more pair, because the db reader removes
/// one pair of enclosing quotes (docs/formats/memscope.md §4.1 records tool builds that wrote
/// them), so it reads back unchanged.
fn stack_cell(stack: Option<&str>) -> String {
    match stack {
        None => String::new(),
        Some(s) if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') => quoted(s),
        Some(s) => s.to_string(),
    }
}

/// Writes the db for the engine's dataset to `out`. The file is built under a temporary name and
/// renamed into place, replacing an existing file only when complete.
pub async fn to_db(ctx: &SessionContext, out: &Path) -> Result<ToDbReport> {
    let file_name = out
        .file_name()
        .ok_or_else(|| MemqError::Usage(format!("-o {}: not a file name", out.display())))?
        .to_string_lossy()
        .into_owned();
    // A dataset without msMemScope events (snapshots or profiler CSVs only) has nothing the
    // db could hold: say so instead of writing an empty db.
    let events = ctx
        .sql("SELECT count(*) FROM events")
        .await?
        .collect()
        .await?;
    let count = events
        .first()
        .filter(|b| b.num_rows() > 0)
        .map(|b| b.column(0).as_primitive::<Int64Type>().value(0))
        .unwrap_or(0);
    if count == 0 {
        return Err(MemqError::Usage(
            "the dataset holds no msMemScope events (its `events` table is empty): to-db converts \
             msMemScope dumps, and PyTorch snapshots or profiler CSVs have no memscope_dump form; \
             nothing written"
                .into(),
        ));
    }
    let tmp: PathBuf = out.with_file_name(format!(".{file_name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = write(ctx, &tmp).await;
    match result {
        Ok(report) => {
            std::fs::rename(&tmp, out).map_err(|e| MemqError::io(out, e))?;
            Ok(report)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

async fn write(ctx: &SessionContext, path: &Path) -> Result<ToDbReport> {
    let mut conn = Connection::open(path).map_err(|e| db_error(path, e))?;
    conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
        .map_err(|e| db_error(path, e))?;
    conn.execute_batch(CREATE_DUMP)
        .map_err(|e| db_error(path, e))?;
    let mut report = ToDbReport::default();

    let tx = conn.transaction().map_err(|e| db_error(path, e))?;
    {
        let mut insert = tx
            .prepare("INSERT INTO memscope_dump VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)")
            .map_err(|e| db_error(path, e))?;
        let df = ctx
            .sql(
                "SELECT id, event, event_type, name, ts, pid, tid, device, ptr, attr, stack_py, stack_c \
                 FROM events ORDER BY source, row_idx",
            )
            .await?;
        let types = [
            DataType::Int64,
            DataType::Utf8,
            DataType::Utf8,
            DataType::Utf8,
            DataType::Int64,
            DataType::Int64,
            DataType::Int64,
            DataType::Utf8,
            DataType::UInt64,
            DataType::Utf8,
            DataType::Utf8,
            DataType::Utf8,
        ];
        let mut stream = df.execute_stream().await?;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let c = Columns::new(&batch, &types)?;
            let mut pairs: Vec<(&str, &str)> = Vec::new();
            for r in 0..batch.num_rows() {
                let event = c.str(1, r).unwrap_or("N/A");
                let name = match c.str(3, r) {
                    Some(n) if event == "MSTX" => quoted(n),
                    Some(n) => n.to_string(),
                    None => "N/A".to_string(),
                };
                let ptr = c
                    .u64(8, r)
                    .map(|p| format!("0x{p:016x}"))
                    .unwrap_or_else(|| "N/A".into());
                attr::parse_into(c.str(9, r).unwrap_or(""), &mut pairs);
                // The tool stores an Attr without keys as an empty string.
                let attr_json = if pairs.is_empty() {
                    String::new()
                } else {
                    attr::render_json(&pairs)
                };
                insert
                    .execute(params![
                        c.i64(0, r),
                        event,
                        c.str(2, r).unwrap_or("N/A"),
                        name,
                        c.i64(4, r),
                        c.i64(5, r).unwrap_or(-1),
                        c.i64(6, r).unwrap_or(-1),
                        c.str(7, r).unwrap_or("N/A"),
                        ptr,
                        attr_json,
                        stack_cell(c.str(10, r)),
                        stack_cell(c.str(11, r)),
                    ])
                    .map_err(|e| db_error(path, e))?;
                report.dump_rows += 1;
            }
        }
    }

    // Python traces: one python_trace_<pid> table per process, rows in source order.
    let df = ctx
        .sql("SELECT pid, func_info, start_ts, end_ts, tid FROM python_trace ORDER BY source, line")
        .await?;
    let types = [
        DataType::Int64,
        DataType::Utf8,
        DataType::Int64,
        DataType::Int64,
        DataType::Int64,
    ];
    let mut stream = df.execute_stream().await?;
    let mut created = std::collections::HashSet::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let c = Columns::new(&batch, &types)?;
        for r in 0..batch.num_rows() {
            let pid = c.i64(0, r);
            let table = format!("python_trace_{}", pid.unwrap_or(0));
            if created.insert(table.clone()) {
                tx.execute_batch(&format!(
                    "CREATE TABLE \"{table}\" (FuncInfo TEXT, \"StartTime(ns)\" TEXT, \"EndTime(ns)\" TEXT, \
                     \"Thread Id\" INTEGER, \"Process Id\" INTEGER)"
                ))
                .map_err(|e| db_error(path, e))?;
            }
            let time = |v: Option<i64>| v.map(|t| t.to_string()).unwrap_or_else(|| "N/A".into());
            tx.execute(
                &format!("INSERT INTO \"{table}\" VALUES (?1, ?2, ?3, ?4, ?5)"),
                params![
                    c.str(1, r).unwrap_or(""),
                    time(c.i64(2, r)),
                    time(c.i64(3, r)),
                    c.i64(4, r).unwrap_or(-1),
                    pid.unwrap_or(-1)
                ],
            )
            .map_err(|e| db_error(path, e))?;
            report.trace_rows += 1;
        }
    }
    report.trace_tables = created.len();
    tx.commit().map_err(|e| db_error(path, e))?;
    drop(conn);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::stack_cell;

    #[test]
    fn stacks_are_written_as_the_tool_writes_them() {
        // No stack: an empty string, as in the tool's db (not NULL, not `N/A`).
        assert_eq!(stack_cell(None), "");
        // A stack: its text, without enclosing quotes, newlines kept.
        assert_eq!(
            stack_cell(Some("a.py(1): f\nb.py(2): g\n")),
            "a.py(1): f\nb.py(2): g\n"
        );
        // Text that is itself quoted keeps its quotes through the reader's one-pair strip.
        assert_eq!(stack_cell(Some("\"NA\"")), "\"\"NA\"\"");
        assert_eq!(stack_cell(Some("\"")), "\"");
    }
}
