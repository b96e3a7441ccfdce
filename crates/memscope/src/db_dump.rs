//! Reads a tool-written `memscope_dump_*.db` (SQLite; docs/formats/memscope.md §4.1): table
//! `memscope_dump` (or legacy `leaks_dump`), columns by name, Attr as a JSON object of strings
//! (rendered back to the dump's `{k:v}` form, so a db and its CSV give the same `events`), MSTX
//! names and stacks with their literal surrounding quotes stripped.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::csv_dump::DumpSummary;
use crate::events::EventRow;
use crate::output::{SourceOutput, TsUnit};
use memq_core::rejects::Reject;
use crate::attr;
use memq_core::error::{Location, MemqError, Result};

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Opens a db read-only after checking it is SQLite at all.
pub fn open(path: &Path) -> Result<Connection> {
    let mut head = [0u8; 16];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| MemqError::io(path, e))?;
        f.read(&mut head).map_err(|e| MemqError::io(path, e))?
    };
    if n < 16 || head != SQLITE_MAGIC {
        return Err(MemqError::input(
            path,
            Location::ByteOffset(0),
            format!(
                "not an SQLite database (first bytes: {:?})",
                String::from_utf8_lossy(&head[..n])
            ),
        ));
    }
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sqlite_error(path, e))
}

pub fn sqlite_error(path: &Path, e: rusqlite::Error) -> MemqError {
    MemqError::input(path, Location::None, format!("SQLite: {e}"))
}

fn table_names(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .map_err(|e| sqlite_error(path, e))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(|e| sqlite_error(path, e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| sqlite_error(path, e))?;
    Ok(names)
}

/// The names of the `python_trace_<pid>` tables of a db.
pub fn python_trace_tables(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    Ok(table_names(conn, path)?
        .into_iter()
        .filter(|n| n.starts_with("python_trace"))
        .collect())
}

fn text_of(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}

fn strip_quotes(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
}

/// Reads the dump table of a db into `out`.
pub fn read(path: &Path, conn: &Connection, mut out: SourceOutput) -> Result<DumpSummary> {
    let tables = table_names(conn, path)?;
    let table = ["memscope_dump", "leaks_dump"]
        .into_iter()
        .find(|t| tables.iter().any(|n| n == t))
        .ok_or_else(|| {
            MemqError::input(
                path,
                Location::None,
                format!(
                    "no memscope_dump or leaks_dump table (tables: {})",
                    if tables.is_empty() {
                        "none".into()
                    } else {
                        tables.join(", ")
                    }
                ),
            )
        })?;
    let mut stmt = conn
        .prepare(&format!("SELECT rowid, * FROM \"{table}\" ORDER BY rowid"))
        .map_err(|e| sqlite_error(path, e))?;
    let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let find = |n: &str| names.iter().position(|h| h.eq_ignore_ascii_case(n));
    let ts_col = find("Timestamp(ns)").or_else(|| find("Timestamp(us)"));
    let (Some(id_col), Some(event_col), Some(ts_col)) = (find("ID"), find("Event"), ts_col) else {
        return Err(MemqError::input(
            path,
            Location::None,
            format!(
                "table {table} lacks ID, Event or Timestamp columns (has: {})",
                names.join(", ")
            ),
        ));
    };
    let cols = [
        find("Event Type"),
        find("Name"),
        find("Process Id"),
        find("Thread Id"),
        find("Device Id"),
        find("Ptr"),
        find("Attr"),
        find("Call Stack(Python)"),
        find("Call Stack(C)"),
    ];
    if find("Timestamp(us)").is_some() {
        out.declare_unit(TsUnit::Us);
    }
    let mut rows = stmt.query([]).map_err(|e| sqlite_error(path, e))?;
    let mut row_idx = 0u64;
    let mut ev = EventRow::default();
    while let Some(r) = rows.next().map_err(|e| sqlite_error(path, e))? {
        let rowid: i64 = r.get(0).unwrap_or(0);
        let cell = |i: Option<usize>| i.and_then(|i| r.get_ref(i).ok()).and_then(text_of);
        let result = (|| -> std::result::Result<(), String> {
            let id = cell(Some(id_col)).unwrap_or_default();
            ev.id = id
                .trim()
                .parse()
                .map_err(|_| format!("ID `{id}` is not an integer"))?;
            ev.event = cell(Some(event_col)).unwrap_or_default().trim().to_string();
            if ev.event.is_empty() {
                return Err("empty Event".into());
            }
            ev.event_type = cell(cols[0]).unwrap_or_default();
            ev.name = cell(cols[1])
                .map(|s| strip_quotes(&s).to_string())
                .filter(|s| !s.is_empty() && s != "N/A");
            ev.ts_raw = match cell(Some(ts_col)) {
                None => None,
                Some(t) if t.is_empty() || t == "N/A" => None,
                Some(t) => Some(
                    t.trim()
                        .parse()
                        .map_err(|_| format!("timestamp `{t}` is not an integer"))?,
                ),
            };
            let int = |i: Option<usize>| {
                cell(i)
                    .and_then(|s| s.trim().parse::<i64>().ok())
                    .filter(|v| *v >= 0)
            };
            ev.pid = int(cols[2]);
            ev.tid = int(cols[3]);
            ev.device = cell(cols[4])
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "N/A".into());
            ev.ptr = match cell(cols[5]) {
                None => None,
                Some(p) if p.is_empty() || p == "N/A" => None,
                Some(p) => Some(
                    attr::parse_addr(&p).ok_or_else(|| format!("Ptr `{p}` is not an address"))?,
                ),
            };
            let raw_attr = cell(cols[6]).unwrap_or_default();
            ev.attr = match attr::parse_json_object(&raw_attr) {
                Some(pairs) => attr::render(&pairs),
                None => raw_attr.trim().to_string(), // invalid JSON: keep the text, parsed by the §3.2 rule
            };
            let stack = |i| {
                cell(i)
                    .map(|s| strip_quotes(&s).to_string())
                    .filter(|s| !s.is_empty() && s != "N/A")
            };
            ev.stack_py = stack(cols[7]);
            ev.stack_c = stack(cols[8]);
            Ok(())
        })();
        match result {
            Ok(()) => {
                ev.row_idx = row_idx;
                ev.line = rowid.max(0) as u64;
                out.push_event(&ev)?;
            }
            Err(reason) => {
                let values: Vec<Option<String>> = (1..names.len()).map(|i| cell(Some(i))).collect();
                out.push_reject(Reject {
                    line: rowid.max(0) as u64,
                    byte_offset: 0,
                    reason,
                    raw: serde_json::to_vec(&values).unwrap_or_default(),
                })?;
            }
        }
        row_idx += 1;
    }
    out.close()
}
