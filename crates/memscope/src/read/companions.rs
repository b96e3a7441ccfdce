//! The companion files of an msMemScope output folder (docs/formats/memscope.md §5.6–5.7):
//! `python_trace_*.csv` (and `python_trace_<pid>` tables of a db), `memory_compare_*.csv` and
//! `config.json`. Each becomes one batch; malformed lines become rejects.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Builder, StringBuilder, UInt64Builder};
use datafusion::arrow::record_batch::RecordBatch;
use rusqlite::Connection;

use crate::parse::records::{split_fields, RawRecord, RecordReader};
use crate::read::db::{find_column, sqlite_error};
use crate::schema;
use memq_core::error::{Location, MemqError, Result};
use memq_core::rejects::{Reject, RejectsBuilder};

fn opt_int(s: &str) -> Option<i64> {
    let t = s.trim();
    (t != "N/A").then(|| t.parse().ok()).flatten()
}

#[derive(Default)]
struct TraceBuilder {
    source: StringBuilder,
    line: UInt64Builder,
    func_info: StringBuilder,
    start: Int64Builder,
    end: Int64Builder,
    tid: Int64Builder,
    pid: Int64Builder,
}

impl TraceBuilder {
    fn append(
        &mut self,
        source: &str,
        line: u64,
        func: &str,
        start: &str,
        end: &str,
        tid: &str,
        pid: &str,
    ) {
        self.source.append_value(source);
        self.line.append_value(line);
        self.func_info.append_value(func);
        self.start.append_option(opt_int(start));
        self.end.append_option(opt_int(end));
        self.tid.append_option(opt_int(tid));
        self.pid.append_option(opt_int(pid));
    }

    fn finish(&mut self) -> RecordBatch {
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("source", Arc::new(self.source.finish()) as ArrayRef),
            ("line", Arc::new(self.line.finish())),
            ("func_info", Arc::new(self.func_info.finish())),
            ("start_ts", Arc::new(self.start.finish())),
            ("end_ts", Arc::new(self.end.finish())),
            ("tid", Arc::new(self.tid.finish())),
            ("pid", Arc::new(self.pid.finish())),
        ];
        schema::python_trace()
            .batch(columns)
            .expect("every python_trace column is given once")
    }
}

/// Reads every record of a small CSV companion file, calling `row` with (record, fields).
fn for_each_record(
    path: &Path,
    rejects: &mut RejectsBuilder,
    mut row: impl FnMut(&RawRecord, Vec<String>) -> std::result::Result<(), String>,
) -> Result<u64> {
    let file = File::open(path).map_err(|e| MemqError::io(path, e))?;
    let mut reader = RecordReader::new(BufReader::new(file));
    let mut rec = RawRecord::default();
    let mut rows = 0;
    while reader
        .next_record(&mut rec)
        .map_err(|e| MemqError::io(path, e))?
    {
        if rec.bytes.is_empty() {
            continue;
        }
        let outcome = match std::str::from_utf8(&rec.bytes) {
            Ok(text) => row(
                &rec,
                split_fields(text.strip_prefix('\u{feff}').unwrap_or(text)),
            ),
            Err(e) => Err(format!("invalid UTF-8 at byte {}", e.valid_up_to())),
        };
        match outcome {
            Ok(()) => rows += 1,
            Err(reason) if reason.is_empty() => {} // header
            Err(reason) => rejects.push(Reject {
                line: rec.line,
                byte_offset: rec.offset,
                reason,
                raw: rec.bytes.clone(),
            }),
        }
    }
    Ok(rows)
}

/// `python_trace_*.csv`: FuncInfo is not quoted by the writer, so extra commas belong to it.
pub fn read_python_trace_csv(
    path: &Path,
    source: &str,
    rejects: &mut RejectsBuilder,
) -> Result<RecordBatch> {
    let mut b = TraceBuilder::default();
    for_each_record(path, rejects, |rec, f| {
        if rec.line == 1 && f.first().is_some_and(|h| h.trim() == "FuncInfo") {
            return Err(String::new());
        }
        if f.len() < 5 {
            return Err(format!("{} fields, python trace rows have 5", f.len()));
        }
        let n = f.len();
        let func = f[..n - 4].join(",");
        if [&f[n - 4], &f[n - 3]]
            .iter()
            .any(|t| opt_int(t).is_none() && t.trim() != "N/A")
        {
            return Err("start/end time is not an integer or N/A".into());
        }
        b.append(
            source,
            rec.line,
            &func,
            &f[n - 4],
            &f[n - 3],
            &f[n - 2],
            &f[n - 1],
        );
        Ok(())
    })?;
    Ok(b.finish())
}

/// The `python_trace_<pid>` tables of a tool db.
pub fn read_python_trace_db(
    path: &Path,
    conn: &Connection,
    source: &str,
    tables: &[String],
) -> Result<RecordBatch> {
    let mut b = TraceBuilder::default();
    for table in tables {
        let sql = format!("SELECT rowid, * FROM \"{table}\" ORDER BY rowid");
        let mut stmt = conn.prepare(&sql).map_err(|e| sqlite_error(path, e))?;
        let names = crate::read::db::select_column_names(conn, path, table, stmt.column_count())?;
        // The tool's columns, or the legacy msLeaks spellings (name, startTimestamp, ...).
        let cols = [
            find_column(&names, &["funcinfo", "name"]),
            find_column(&names, &["starttimens", "starttimestamp", "starttime"]),
            find_column(&names, &["endtimens", "endtimestamp", "endtime"]),
            find_column(&names, &["threadid"]),
            find_column(&names, &["processid"]),
        ];
        let mut rows = stmt.query([]).map_err(|e| sqlite_error(path, e))?;
        let name = format!("{source}#{table}");
        while let Some(r) = rows.next().map_err(|e| sqlite_error(path, e))? {
            let text = |col: usize| -> String {
                let Some(i) = cols[col] else {
                    return String::new();
                };
                match r.get_ref(i) {
                    Ok(rusqlite::types::ValueRef::Integer(v)) => v.to_string(),
                    Ok(rusqlite::types::ValueRef::Text(t)) => {
                        String::from_utf8_lossy(t).into_owned()
                    }
                    _ => String::new(),
                }
            };
            let rowid: i64 = r.get(0).unwrap_or(0);
            b.append(
                &name,
                rowid.max(0) as u64,
                &text(0),
                &text(1),
                &text(2),
                &text(3),
                &text(4),
            );
        }
    }
    Ok(b.finish())
}

/// `memory_compare_*.csv`: two header lines, then event, name, device, base, compare, diff.
pub fn read_memory_compare(
    path: &Path,
    source: &str,
    rejects: &mut RejectsBuilder,
) -> Result<RecordBatch> {
    let mut src = StringBuilder::new();
    let mut line = UInt64Builder::new();
    let mut event = StringBuilder::new();
    let mut name = StringBuilder::new();
    let mut device = StringBuilder::new();
    let mut base = Int64Builder::new();
    let mut compare = Int64Builder::new();
    let mut diff = Int64Builder::new();
    for_each_record(path, rejects, |rec, f| {
        if rec.line <= 2 && (f.first().is_some_and(|h| h.is_empty() || h == "Event")) {
            return Err(String::new());
        }
        if f.len() != 6 {
            return Err(format!("{} fields, memory compare rows have 6", f.len()));
        }
        src.append_value(source);
        line.append_value(rec.line);
        event.append_value(&f[0]);
        name.append_value(&f[1]);
        device.append_value(&f[2]);
        base.append_option(opt_int(&f[3]));
        compare.append_option(opt_int(&f[4]));
        diff.append_option(opt_int(&f[5]));
        Ok(())
    })?;
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("source", Arc::new(src.finish()) as ArrayRef),
        ("line", Arc::new(line.finish())),
        ("event", Arc::new(event.finish())),
        ("name", Arc::new(name.finish())),
        ("device", Arc::new(device.finish())),
        ("base_bytes", Arc::new(base.finish())),
        ("compare_bytes", Arc::new(compare.finish())),
        ("diff_bytes", Arc::new(diff.finish())),
    ];
    Ok(schema::step_compare()
        .batch(columns)
        .expect("every step_compare column is given once"))
}

/// `config.json`, flattened to key/value rows.
pub fn read_config(path: &Path, source: &str) -> Result<RecordBatch> {
    let text = std::fs::read_to_string(path).map_err(|e| MemqError::io(path, e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        MemqError::input(
            path,
            Location::Line(e.line() as u64),
            format!("invalid JSON: {e}"),
        )
    })?;
    let mut pairs = Vec::new();
    flatten("", &value, &mut pairs);
    let mut src = StringBuilder::new();
    let mut key = StringBuilder::new();
    let mut val = StringBuilder::new();
    for (k, v) in pairs {
        src.append_value(source);
        key.append_value(k);
        val.append_option(v);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("source", Arc::new(src.finish()) as ArrayRef),
        ("key", Arc::new(key.finish())),
        ("value", Arc::new(val.finish())),
    ];
    Ok(schema::config()
        .batch(columns)
        .expect("every config column is given once"))
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, Option<String>)>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&path, child, out);
            }
        }
        serde_json::Value::Null => out.push((prefix.to_string(), None)),
        serde_json::Value::String(s) => out.push((prefix.to_string(), Some(s.clone()))),
        other => out.push((prefix.to_string(), Some(other.to_string()))),
    }
}
