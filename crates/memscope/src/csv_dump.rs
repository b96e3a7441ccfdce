//! Reads a `memscope_dump_*.csv` (every generation of docs/formats/memscope.md §0) into `events` rows
//! and `rejects`. Columns are found by header name; rows that cannot be parsed are rejected with
//! their line, byte offset and reason, never dropped.

use std::io::{BufReader, Read};
use std::path::Path;

use crate::attr;
use crate::events::EventRow;
use crate::output::{SourceOutput, TsUnit};
use crate::records::{split_fields, RawRecord, RecordReader};
use memq_core::error::{Location, MemqError, Result};
use memq_core::rejects::Reject;

/// Column positions found in the header.
struct Columns {
    count: usize,
    id: usize,
    event: usize,
    event_type: Option<usize>,
    name: Option<usize>,
    ts: usize,
    pid: Option<usize>,
    tid: Option<usize>,
    device: Option<usize>,
    ptr: Option<usize>,
    attr: Option<usize>,
    stack_py: Option<usize>,
    stack_c: Option<usize>,
    header_unit: Option<TsUnit>,
}

impl Columns {
    fn from_header(path: &Path, header: &[String]) -> Result<Columns> {
        let names: Vec<&str> = header.iter().map(|h| h.trim()).collect();
        let find = |n: &str| names.iter().position(|h| h.eq_ignore_ascii_case(n));
        if find("Record Index").is_some() && find("Addr").is_some() {
            return Err(MemqError::input(
                path,
                Location::Line(1),
                format!(
                    "this is a legacy msLeaks (G0) CSV (header starts `{}`); it predates msMemScope's \
                     dump format and is not supported: re-collect with msMemScope",
                    names.iter().take(4).copied().collect::<Vec<_>>().join(",")
                ),
            ));
        }
        let (ts, header_unit) = match (find("Timestamp(ns)"), find("Timestamp(us)")) {
            (Some(i), _) => (Some(i), None),
            (None, Some(i)) => (Some(i), Some(TsUnit::Us)),
            _ => (find("Timestamp"), None),
        };
        let missing: Vec<&str> = [
            ("ID", find("ID")),
            ("Event", find("Event")),
            ("Timestamp(ns)", ts),
        ]
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| *n)
        .collect();
        if !missing.is_empty() {
            return Err(MemqError::input(
                path,
                Location::Line(1),
                format!(
                    "not an msMemScope dump: header lacks {} (header: `{}`)",
                    missing.join(", "),
                    truncate(&names.join(","), 120)
                ),
            ));
        }
        Ok(Columns {
            count: names.len(),
            id: find("ID").unwrap_or(0),
            event: find("Event").unwrap_or(1),
            event_type: find("Event Type"),
            name: find("Name"),
            ts: ts.unwrap_or(4),
            pid: find("Process Id"),
            tid: find("Thread Id"),
            device: find("Device Id"),
            ptr: find("Ptr"),
            attr: find("Attr"),
            stack_py: find("Call Stack(Python)"),
            stack_c: find("Call Stack(C)"),
            header_unit,
        })
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// Summary of one dump file.
pub struct DumpSummary {
    pub rows: u64,
    pub rejects: u64,
    pub ts_unit: TsUnit,
    pub generation: &'static str,
}

/// Reads one CSV dump into `out`. Errors only when the file as a whole is unusable (unreadable,
/// empty, not a dump); bad rows become rejects.
/// `input` is the file's content (possibly wrapped for progress reporting); `path` names it in
/// errors.
pub fn read(path: &Path, input: impl Read, mut out: SourceOutput) -> Result<DumpSummary> {
    read_from(path, BufReader::with_capacity(1 << 20, input), &mut out)?;
    out.close()
}

fn read_from<R: Read>(path: &Path, input: BufReader<R>, out: &mut SourceOutput) -> Result<()> {
    let mut reader = RecordReader::new(input);
    let mut rec = RawRecord::default();
    let io_err = |e: std::io::Error| MemqError::io(path, e);
    // The header is read in bounded memory: a file without a line end (8 MiB of zeros, a
    // binary) is refused after HEADER_LIMIT bytes (issue 13, finding 10).
    reader.set_limit(HEADER_LIMIT);
    if !reader.next_record(&mut rec).map_err(io_err)? {
        return Err(MemqError::input(
            path,
            Location::None,
            "empty file: no header line",
        ));
    }
    reader.set_limit(crate::records::MAX_RECORD_BYTES);
    check_line_ends(path, &rec)?;
    let header_text = std::str::from_utf8(&rec.bytes).map_err(|e| {
        MemqError::input(
            path,
            Location::Line(1),
            format!("header is not valid UTF-8 (byte {})", e.valid_up_to()),
        )
    })?;
    let header_text = header_text.strip_prefix('\u{feff}').unwrap_or(header_text);
    if header_text.trim().is_empty() {
        return Err(MemqError::input(
            path,
            Location::Line(1),
            "empty header line",
        ));
    }
    let cols = Columns::from_header(path, &split_fields(header_text))?;
    if let Some(u) = cols.header_unit {
        out.declare_unit(u);
    }
    let mut row_idx = 0u64;
    let mut row = EventRow::default();
    while reader.next_record(&mut rec).map_err(io_err)? {
        if rec.bytes.is_empty() && rec.terminated {
            continue; // blank line
        }
        let idx = row_idx;
        row_idx += 1;
        match parse_record(&rec, &cols, &mut row).and_then(|d| out.check_ts(&row).map(|_| d)) {
            Ok(decimal_ptr) => {
                row.row_idx = idx;
                row.line = rec.line;
                out.hints.decimal_ptr |= decimal_ptr;
                out.push_event(&row)?;
            }
            Err(reason) => out.push_reject(Reject {
                line: rec.line,
                byte_offset: rec.offset,
                reason,
                raw: std::mem::take(&mut rec.bytes),
            })?,
        }
    }
    Ok(())
}

/// Parses one record into `row`; returns whether its Ptr was written in decimal (a G1 trait).
fn parse_record(
    rec: &RawRecord,
    cols: &Columns,
    row: &mut EventRow,
) -> std::result::Result<bool, String> {
    if let Some(len) = rec.oversized {
        return Err(format!(
            "record of {len} bytes is longer than the {} MiB limit (its first {} KiB are kept here)",
            crate::records::MAX_RECORD_BYTES >> 20,
            crate::records::KEPT_OF_OVERSIZED >> 10
        ));
    }
    let text = std::str::from_utf8(&rec.bytes)
        .map_err(|e| format!("invalid UTF-8 at byte {} of the record", e.valid_up_to()))?;
    if let Some(p) = rec.bytes.iter().position(|&b| b == 0) {
        return Err(format!("NUL byte at byte {p} of the record"));
    }
    if rec.unclosed_quote {
        return Err(if rec.terminated {
            "unclosed quote: the quoted field never ends before the next row".into()
        } else {
            "truncated last record: unclosed quote at end of file".into()
        });
    }
    let fields = split_fields(text);
    if fields.len() != cols.count {
        return Err(if !rec.terminated && fields.len() < cols.count {
            format!(
                "truncated last record: {} of {} fields and no line end",
                fields.len(),
                cols.count
            )
        } else {
            format!("{} fields, header has {}", fields.len(), cols.count)
        });
    }
    let get = |i: Option<usize>| i.map(|i| fields[i].as_str()).unwrap_or("");
    let id_text = fields[cols.id].trim();
    row.id = id_text
        .parse::<i64>()
        .map_err(|_| format!("ID `{}` is not an integer", truncate(id_text, 40)))?;
    if row.id < 0 {
        return Err(format!("ID `{}` is negative", truncate(id_text, 40)));
    }
    row.event = fields[cols.event].trim().to_string();
    if row.event.is_empty() {
        return Err("empty Event".into());
    }
    row.event_type = get(cols.event_type).trim().to_string();
    row.name = optional_text(get(cols.name));
    let ts = fields[cols.ts].trim();
    row.ts_raw = if is_na(ts) {
        None
    } else {
        Some(
            ts.parse::<i64>()
                .map_err(|_| format!("timestamp `{}` is not an integer", truncate(ts, 40)))?,
        )
    };
    row.pid = process_or_thread_id(get(cols.pid), "Process Id")?;
    row.tid = process_or_thread_id(get(cols.tid), "Thread Id")?;
    let device = get(cols.device).trim();
    row.device = if device.is_empty() {
        "N/A".into()
    } else {
        device.to_string()
    };
    let ptr = get(cols.ptr).trim();
    row.ptr = if is_na(ptr) {
        None
    } else {
        Some(
            attr::parse_addr(ptr)
                .ok_or_else(|| format!("Ptr `{}` is not an address", truncate(ptr, 40)))?,
        )
    };
    row.attr = get(cols.attr).trim().to_string();
    row.stack_py = optional_text(get(cols.stack_py));
    row.stack_c = optional_text(get(cols.stack_c));
    Ok(row.ptr.is_some() && !ptr.starts_with("0x"))
}

/// The longest header line read (a dump's header is under 200 bytes).
pub const HEADER_LIMIT: usize = 1 << 20;

/// Refuses a header that shows the file is not made of LF or CRLF lines: no line end within
/// HEADER_LIMIT bytes, or lone CRs (classic Mac line ends, which would make the whole file one
/// line: finding 5).
fn check_line_ends(path: &Path, header: &RawRecord) -> Result<()> {
    let lone_cr = header.bytes.contains(&b'\r');
    if lone_cr {
        return Err(MemqError::input(
            path,
            Location::Line(1),
            "the line ends are lone CR characters (classic Mac OS style): memq reads LF or CRLF \
             line ends; convert the file first, e.g. `tr '\\r' '\\n' < in.csv > out.csv`",
        ));
    }
    if header.oversized.is_some() {
        return Err(MemqError::input(
            path,
            Location::Line(1),
            format!(
                "no line end in the first {} MiB: not a CSV dump (a binary file or a single \
                 endless line)",
                HEADER_LIMIT >> 20
            ),
        ));
    }
    Ok(())
}

fn is_na(s: &str) -> bool {
    s.is_empty() || s == "N/A"
}

fn optional_text(s: &str) -> Option<String> {
    (!s.is_empty() && s != "N/A").then(|| s.to_string())
}

/// A `Process Id` / `Thread Id` cell, by the rule both readers (CSV and db) apply: an integer
/// in 0..=i64::MAX; `N/A`, empty or `-1` (the tool's "invalid" marker, §4.1) is NULL; any other
/// negative, fractional or text value is an error naming the column.
pub fn process_or_thread_id(s: &str, what: &str) -> std::result::Result<Option<i64>, String> {
    let t = s.trim();
    if is_na(t) || t == "-1" {
        return Ok(None);
    }
    match t.parse::<i64>() {
        Ok(v) if v >= 0 => Ok(Some(v)),
        Ok(_) => Err(format!("{what} `{}` is negative", truncate(t, 40))),
        Err(_) => Err(format!("{what} `{}` is not an integer", truncate(t, 40))),
    }
}
