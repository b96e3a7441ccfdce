//! Reads an msMemScope SQLite dump (docs/formats/memscope.md §4.1): the tool's own
//! `memscope_dump` table and the legacy msLeaks `leaks_dump` in every spelling met in the wild.
//!
//! * Columns are found by name, compared after [`column_key`] (case, spaces, `_`, brackets
//!   ignored), so the tool's `Event Type`, the legacy camelCase `eventType` and a snake_case
//!   `event_type` are one column; a table without the needed columns is an error listing the
//!   columns found and the ones needed.
//! * Attr is a JSON object of strings (compact or spaced), rendered back to the dump's `{k:v}`
//!   form so that a db and the CSV written from it give the same `events`; NULL, empty text and
//!   `{}` all mean no keys. MSTX names and stacks lose one pair of literal enclosing quotes.
//! * Cells follow the CSV reader's rules ([`csv::process_or_thread_id`] for Process and
//!   Thread Id); a cell that is not valid UTF-8 rejects its row.
//! * Every db is opened read-only and immutable, so nothing (`-wal`, `-shm`) is ever written
//!   beside the input, even in a read-only folder; a WAL-mode db whose `-wal` still holds
//!   committed rows is read from a private copy of the pair ([`open`]).

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::parse::attr;
use crate::parse::events::EventRow;
use crate::read::csv;
use crate::staging::DumpSummary;
use crate::staging::{SourceOutput, TsUnit};
use memq_core::error::{Location, MemqError, Result};
use memq_core::rejects::Reject;

const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// An open db; when it was read from a private copy, the copy lives as long as the connection.
pub struct Db {
    pub conn: Connection,
    _copy: Option<tempfile::TempDir>,
}

impl std::ops::Deref for Db {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

/// Opens a db after checking it is SQLite at all: read-only and immutable (an SQLite URI with
/// `mode=ro&immutable=1`), so SQLite never creates `-shm`/`-wal` files beside it. Immutable
/// mode ignores a `-wal` file, so a db whose `-wal` holds committed rows (a writer killed before
/// its checkpoint) is copied with its `-wal` into a private temporary folder and read there.
pub fn open(path: &Path) -> Result<Db> {
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
    let wal = wal_path(path);
    let pending = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
    if !pending {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let uri = format!("file:{}?mode=ro&immutable=1", uri_path(path));
        let conn = Connection::open_with_flags(uri, flags).map_err(|e| sqlite_error(path, e))?;
        return Ok(Db { conn, _copy: None });
    }
    let dir = tempfile::Builder::new()
        .prefix("memq-db-")
        .tempdir()
        .map_err(|e| MemqError::io(path, e))?;
    let copy = dir.path().join("dump.db");
    std::fs::copy(path, &copy).map_err(|e| MemqError::io(path, e))?;
    std::fs::copy(&wal, wal_path(&copy)).map_err(|e| MemqError::io(&wal, e))?;
    // Read-write on the copy: SQLite replays the -wal there, never beside the input.
    let conn = Connection::open_with_flags(
        &copy,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sqlite_error(path, e))?;
    Ok(Db {
        conn,
        _copy: Some(dir),
    })
}

fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// `path` for an SQLite `file:` URI: every byte outside the unreserved set and `/` escaped.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The column names of `SELECT rowid, * FROM table` (`""` for the rowid), read from
/// `pragma_table_xinfo` as bytes: rusqlite's `column_names()` panics on a name that is not
/// valid UTF-8 (found by the `db` fuzz target), so names are decoded lossily here.
pub fn select_column_names(
    conn: &Connection,
    path: &Path,
    table: &str,
    count: usize,
) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare("SELECT name, hidden FROM pragma_table_xinfo(?1)")
        .map_err(|e| sqlite_error(path, e))?;
    let mut rows = stmt.query([table]).map_err(|e| sqlite_error(path, e))?;
    let mut names = vec![String::new()];
    while let Some(row) = rows.next().map_err(|e| sqlite_error(path, e))? {
        let hidden = row
            .get_ref(1)
            .ok()
            .and_then(|v| v.as_i64().ok())
            .unwrap_or(0);
        if hidden == 1 {
            continue; // a virtual table's hidden column: not in `*`
        }
        let name = match row.get_ref(0).map_err(|e| sqlite_error(path, e))? {
            ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
            ValueRef::Integer(i) => i.to_string(),
            ValueRef::Real(f) => f.to_string(),
            ValueRef::Null => String::new(),
        };
        names.push(name);
    }
    if names.len() != count {
        return Err(MemqError::input(
            path,
            Location::None,
            format!(
                "table {table}: {} columns listed but {} selected",
                names.len() - 1,
                count.saturating_sub(1)
            ),
        ));
    }
    Ok(names)
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

/// The python trace tables of a db: the tool's `python_trace_<pid>`, and the legacy
/// `python_trace`.
pub fn python_trace_tables(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    Ok(table_names(conn, path)?
        .into_iter()
        .filter(|n| n == "python_trace" || n.starts_with("python_trace_"))
        .collect())
}

/// A column name reduced to what every spelling shares: ASCII letters and digits, lowercase
/// (`Event Type`, `eventType`, `event_type` → `eventtype`; `Timestamp(ns)` → `timestampns`).
pub fn column_key(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The position of the first of `spellings` (given as [`column_key`]s) among `names`.
pub fn find_column(names: &[String], spellings: &[&str]) -> Option<usize> {
    let keys: Vec<String> = names.iter().map(|n| column_key(n)).collect();
    spellings
        .iter()
        .find_map(|s| keys.iter().position(|k| k == s))
}

/// A cell as text; `None` for NULL. Text and blobs must be valid UTF-8.
pub fn cell_text(v: ValueRef<'_>) -> std::result::Result<Option<String>, String> {
    match v {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(i) => Ok(Some(i.to_string())),
        ValueRef::Real(f) => Ok(Some(f.to_string())),
        ValueRef::Text(t) | ValueRef::Blob(t) => std::str::from_utf8(t)
            .map(|s| Some(s.to_string()))
            .map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to())),
    }
}

fn strip_quotes(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(s)
}

/// The positions of the dump columns in a table.
struct Columns {
    id: usize,
    event: usize,
    ts: usize,
    event_type: Option<usize>,
    name: Option<usize>,
    pid: Option<usize>,
    tid: Option<usize>,
    device: Option<usize>,
    ptr: Option<usize>,
    attr: Option<usize>,
    stack_py: Option<usize>,
    stack_c: Option<usize>,
    /// The timestamp column names its unit `us` (`Timestamp(us)`); else decided by magnitude
    /// (§2.6: the legacy `timestamp` and G1's `Timestamp(ns)` hold µs).
    us: bool,
}

impl Columns {
    /// `names` are the table's columns (after the rowid at position 0).
    fn find(path: &Path, table: &str, names: &[String]) -> Result<Columns> {
        let f = |spellings: &[&str]| find_column(names, spellings);
        let us = f(&["timestampus"]);
        let (Some(id), Some(event), Some(ts)) = (
            f(&["id"]),
            f(&["event"]),
            f(&["timestampns"]).or(us).or_else(|| f(&["timestamp"])),
        ) else {
            return Err(MemqError::input(
                path,
                Location::None,
                format!(
                    "table {table} lacks ID, Event or Timestamp columns: found {}; needed ID, \
                     Event and Timestamp(ns), Timestamp(us) or timestamp (optional: Event Type, \
                     Name, Process Id, Thread Id, Device Id, Ptr, Attr, Call Stack(Python), Call \
                     Stack(C)); names match ignoring case, spaces, `_` and brackets, so \
                     eventType and event_type are Event Type",
                    names[1..].join(", ")
                ),
            ));
        };
        Ok(Columns {
            id,
            event,
            ts,
            event_type: f(&["eventtype"]),
            name: f(&["name"]),
            pid: f(&["processid", "pid"]),
            tid: f(&["threadid", "tid"]),
            device: f(&["deviceid", "device"]),
            ptr: f(&["ptr", "addr"]),
            attr: f(&["attr"]),
            stack_py: f(&["callstackpython", "pythonstack"]),
            stack_c: f(&["callstackc", "cstack"]),
            us: us == Some(ts),
        })
    }
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
    // Position 0 is the rowid (SQLite may label it with an INTEGER PRIMARY KEY's name).
    let names = select_column_names(conn, path, table, stmt.column_count())?;
    let cols = Columns::find(path, table, &names)?;
    if cols.us {
        out.declare_unit(TsUnit::Us);
    }
    let mut rows = stmt.query([]).map_err(|e| sqlite_error(path, e))?;
    let mut row_idx = 0u64;
    let mut ev = EventRow::default();
    let max_row_bytes = crate::parse::records::max_record_bytes();
    while let Some(r) = rows.next().map_err(|e| sqlite_error(path, e))? {
        let rowid: i64 = r.get(0).unwrap_or(0);
        // Measured on SQLite's own buffers before anything is copied: a row bigger than a
        // record may be (a generated column that expands to gigabytes) is a reject that keeps
        // the start of each cell, as an oversized CSV record is.
        let bytes = row_bytes(r, names.len());
        if bytes > max_row_bytes {
            out.push_reject(Reject {
                line: rowid.max(0) as u64,
                byte_offset: 0,
                reason: crate::parse::records::oversized_reason(
                    bytes as u64,
                    &format!("the first {} KiB of each cell are", KEPT_OF_CELL >> 10),
                ),
                raw: row_json(r, names.len(), KEPT_OF_CELL),
            })?;
            row_idx += 1;
            continue;
        }
        match parse_row(r, &cols, &mut ev) {
            Ok(()) => {
                ev.row_idx = row_idx;
                ev.line = rowid.max(0) as u64;
                out.push_event(&ev)?;
            }
            Err(reason) => {
                out.push_reject(Reject {
                    line: rowid.max(0) as u64,
                    byte_offset: 0,
                    reason,
                    raw: row_json(r, names.len(), usize::MAX),
                })?;
            }
        }
        row_idx += 1;
    }
    out.close()
}

/// The bytes of a cell of an oversized row kept in its reject.
const KEPT_OF_CELL: usize = 4 << 10;

/// The text and blob bytes of the row's cells after the rowid, read in place.
fn row_bytes(r: &rusqlite::Row<'_>, columns: usize) -> usize {
    (1..columns)
        .map(|i| match r.get_ref(i) {
            Ok(ValueRef::Text(t) | ValueRef::Blob(t)) => t.len(),
            _ => 8,
        })
        .sum()
}

/// The row's cells after the rowid as a JSON array (a reject's raw bytes), each text cut to
/// its first `keep` bytes.
fn row_json(r: &rusqlite::Row<'_>, columns: usize, keep: usize) -> Vec<u8> {
    let values: Vec<serde_json::Value> = (1..columns)
        .map(|i| match r.get_ref(i) {
            Ok(ValueRef::Integer(v)) => v.into(),
            Ok(ValueRef::Real(v)) => v.into(),
            Ok(ValueRef::Text(t) | ValueRef::Blob(t)) => {
                String::from_utf8_lossy(&t[..t.len().min(keep)])
                    .into_owned()
                    .into()
            }
            _ => serde_json::Value::Null,
        })
        .collect();
    serde_json::to_vec(&values).unwrap_or_default()
}

/// One row into `ev`, by the CSV reader's rules; the error is the reject reason.
fn parse_row(
    r: &rusqlite::Row<'_>,
    cols: &Columns,
    ev: &mut EventRow,
) -> std::result::Result<(), String> {
    let cell = |i: Option<usize>, what: &str| -> std::result::Result<Option<String>, String> {
        match i {
            None => Ok(None),
            Some(i) => r
                .get_ref(i)
                .map_err(|e| format!("{what}: {e}"))
                .and_then(|v| cell_text(v).map_err(|e| format!("{what}: {e}"))),
        }
    };
    let text = |i, what| -> std::result::Result<Option<String>, String> {
        Ok(cell(i, what)?
            .map(|s| strip_quotes(&s).to_string())
            .filter(|s| !s.is_empty() && s != "N/A"))
    };
    let id = cell(Some(cols.id), "ID")?;
    ev.id = match id.as_deref().map(str::trim) {
        None => return Err("ID is NULL".into()),
        Some(t) => t
            .parse()
            .map_err(|_| format!("ID `{t}` is not an integer"))?,
    };
    ev.event = cell(Some(cols.event), "Event")?
        .unwrap_or_default()
        .trim()
        .to_string();
    if ev.event.is_empty() {
        return Err("empty Event".into());
    }
    ev.event_type = cell(cols.event_type, "Event Type")?.unwrap_or_default();
    ev.name = text(cols.name, "Name")?;
    ev.ts_raw = match cell(Some(cols.ts), "Timestamp")? {
        None => None,
        Some(t) if t.trim().is_empty() || t.trim() == "N/A" => None,
        Some(t) => Some(
            t.trim()
                .parse()
                .map_err(|_| format!("timestamp `{t}` is not an integer"))?,
        ),
    };
    let id_cell = |i, what| -> std::result::Result<Option<i64>, String> {
        csv::process_or_thread_id(&cell(i, what)?.unwrap_or_default(), what)
    };
    ev.pid = id_cell(cols.pid, "Process Id")?;
    ev.tid = id_cell(cols.tid, "Thread Id")?;
    ev.device = cell(cols.device, "Device Id")?
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "N/A".into());
    ev.ptr = match cell(cols.ptr, "Ptr")? {
        None => None,
        Some(p) if p.is_empty() || p == "N/A" => None,
        Some(p) => {
            Some(attr::parse_addr(&p).ok_or_else(|| format!("Ptr `{p}` is not an address"))?)
        }
    };
    let raw_attr = cell(cols.attr, "Attr")?.unwrap_or_default();
    ev.attr = match attr::parse_json_object(&raw_attr) {
        Some(pairs) => attr::render(&pairs),
        None => raw_attr.trim().to_string(), // invalid JSON: keep the text, parsed by the §3.2 rule
    };
    ev.stack_py = text(cols.stack_py, "Call Stack(Python)")?;
    ev.stack_c = text(cols.stack_c, "Call Stack(C)")?;
    Ok(())
}
