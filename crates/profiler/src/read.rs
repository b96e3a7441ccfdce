//! Reads one profiler CSV (docs/formats/profiler.md §2–3) into its table and `rejects`.
//!
//! Columns are found by name without their bracketed unit (`Timestamp(us)` is `Timestamp` in
//! µs), compared ignoring case, spaces and `_`; the unit in the brackets drives the conversion
//! to ns or bytes, so a file written in other units reads right too. Cells are trimmed (the
//! profiler ends every timestamp cell with a TAB); CRLF and LF line ends are both accepted. A
//! row that cannot be read is a reject naming its line, byte offset, column and reason.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Builder, StringBuilder, UInt64Builder};
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::error::{Location, MemqError, Result};
use memq_core::rejects::{Reject, RejectsBuilder};

use crate::number::scaled;

/// A line longer than this is no profiler row: the file is refused, in bounded memory.
const MAX_LINE: u64 = 1 << 20;

/// What a column holds, and the unit assumed when its header names none.
#[derive(Clone, Copy)]
pub enum Kind {
    Text,
    /// A moment or a length of time; the default unit is µs.
    Time,
    /// An amount of memory; the default unit is given.
    Bytes(&'static str),
}

/// One column of a profiler file: the table column it fills, its header name (without unit),
/// what it holds, and whether a row needs a value in it.
pub struct Spec {
    pub column: &'static str,
    pub header: &'static str,
    pub kind: Kind,
    pub required: bool,
}

const fn spec(column: &'static str, header: &'static str, kind: Kind) -> Spec {
    Spec {
        column,
        header,
        kind,
        required: false,
    }
}

const fn needed(column: &'static str, header: &'static str, kind: Kind) -> Spec {
    Spec {
        required: true,
        ..spec(column, header, kind)
    }
}

/// `memory_record.csv`.
pub const MEMORY_RECORD: &[Spec] = &[
    needed("component", "Component", Kind::Text),
    needed("ts", "Timestamp", Kind::Time),
    spec("allocated", "Total Allocated", Kind::Bytes("MB")),
    spec("reserved", "Total Reserved", Kind::Bytes("MB")),
    spec("active", "Total Active", Kind::Bytes("MB")),
    spec("stream", "Stream Ptr", Kind::Text),
    spec("device", "Device Type", Kind::Text),
];

/// `operator_memory.csv`.
pub const OPERATOR_MEMORY: &[Spec] = &[
    needed("name", "Name", Kind::Text),
    needed("size", "Size", Kind::Bytes("KB")),
    needed("alloc_ts", "Allocation Time", Kind::Time),
    spec("release_ts", "Release Time", Kind::Time),
    spec("active_release_ts", "Active Release Time", Kind::Time),
    spec("duration", "Duration", Kind::Time),
    spec("active_duration", "Active Duration", Kind::Time),
    spec(
        "alloc_total_allocated",
        "Allocation Total Allocated",
        Kind::Bytes("MB"),
    ),
    spec(
        "alloc_total_reserved",
        "Allocation Total Reserved",
        Kind::Bytes("MB"),
    ),
    spec(
        "alloc_total_active",
        "Allocation Total Active",
        Kind::Bytes("MB"),
    ),
    spec(
        "release_total_allocated",
        "Release Total Allocated",
        Kind::Bytes("MB"),
    ),
    spec(
        "release_total_reserved",
        "Release Total Reserved",
        Kind::Bytes("MB"),
    ),
    spec(
        "release_total_active",
        "Release Total Active",
        Kind::Bytes("MB"),
    ),
    spec("stream", "Stream Ptr", Kind::Text),
    spec("device", "Device Type", Kind::Text),
];

/// A header name reduced to what every spelling shares, and its bracketed unit:
/// `Total Allocated(MB)` → (`totalallocated`, `MB`).
pub fn header_key(name: &str) -> (String, Option<String>) {
    let name = name.trim();
    let (base, unit) = match name.split_once('(') {
        Some((base, rest)) => (base, rest.strip_suffix(')').map(|u| u.trim().to_string())),
        None => (name, None),
    };
    let key = base
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    (key, unit)
}

/// The factor from `unit` to ns (times) or bytes (sizes).
fn factor(kind: Kind, unit: Option<&str>) -> Option<i64> {
    match kind {
        Kind::Text => Some(1),
        Kind::Time => match unit.unwrap_or("us").to_ascii_lowercase().as_str() {
            "ns" => Some(1),
            "us" | "µs" => Some(1_000),
            "ms" => Some(1_000_000),
            "s" => Some(1_000_000_000),
            _ => None,
        },
        Kind::Bytes(default) => match unit.unwrap_or(default).to_ascii_uppercase().as_str() {
            "B" => Some(1),
            "KB" | "KIB" => Some(1 << 10),
            "MB" | "MIB" => Some(1 << 20),
            "GB" | "GIB" => Some(1 << 30),
            _ => None,
        },
    }
}

/// One spec column as found in the header.
struct Found<'s> {
    spec: &'s Spec,
    /// Its position among the fields, and the header text (for messages).
    at: Option<(usize, String)>,
    factor: i64,
    text: StringBuilder,
    int: Int64Builder,
}

/// Whether `header` (the first line, fields split) is one of `specs`' files: every required
/// column is there.
pub fn header_matches(header: &str, specs: &[Spec]) -> bool {
    let keys: Vec<String> = split(header).iter().map(|f| header_key(f).0).collect();
    specs
        .iter()
        .filter(|s| s.required)
        .all(|s| keys.contains(&header_key(s.header).0))
}

/// Fields of one line: comma-separated, a field may be double-quoted (`""` inside is `"`).
fn split(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            c => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// What one file gave.
pub struct FileRows {
    pub batch: RecordBatch,
    pub rejects: RejectsBuilder,
}

/// Reads `input` (the content of `path`) as a file of `specs` into a batch of `def`.
pub fn read(
    path: &Path,
    source: &str,
    input: impl Read,
    specs: &[Spec],
    def: &TableDef,
) -> Result<FileRows> {
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut bytes = Vec::new();
    let mut next_line = |bytes: &mut Vec<u8>, line: u64| -> Result<bool> {
        bytes.clear();
        let n = (&mut reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', bytes)
            .map_err(|e| MemqError::io(path, e))?;
        if n as u64 > MAX_LINE {
            return Err(MemqError::input(
                path,
                Location::Line(line),
                "a line longer than 1 MiB: not a profiler memory CSV",
            ));
        }
        Ok(n > 0)
    };
    if !next_line(&mut bytes, 1)? {
        return Err(MemqError::input(
            path,
            Location::None,
            "empty file: no header line",
        ));
    }
    let header = std::str::from_utf8(&bytes).map_err(|e| {
        MemqError::input(
            path,
            Location::Line(1),
            format!("header is not valid UTF-8 (byte {})", e.valid_up_to()),
        )
    })?;
    let header = split(
        header
            .trim_start_matches('\u{feff}')
            .trim_end_matches(['\r', '\n']),
    );
    let mut found = columns(path, &header, specs)?;
    let (mut src, mut line_b) = (StringBuilder::new(), UInt64Builder::new());
    let mut rejects = RejectsBuilder::new(source);
    let (mut line, mut offset) = (1u64, bytes.len() as u64);
    while next_line(&mut bytes, line + 1)? {
        line += 1;
        let at = offset;
        offset += bytes.len() as u64;
        let outcome = std::str::from_utf8(&bytes)
            .map_err(|e| format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()))
            .and_then(|text| {
                let text = text.trim_end_matches(['\r', '\n']);
                if text.trim().is_empty() {
                    return Ok(false);
                }
                parse_row(&split(text), header.len(), &mut found).map(|()| true)
            });
        match outcome {
            Ok(false) => {}
            Ok(true) => {
                src.append_value(source);
                line_b.append_value(line);
            }
            Err(reason) => rejects.push(Reject {
                line,
                byte_offset: at,
                reason,
                raw: bytes.clone(),
            }),
        }
    }
    let mut arrays: Vec<(&str, ArrayRef)> = vec![
        ("source", Arc::new(src.finish())),
        ("line", Arc::new(line_b.finish())),
    ];
    for f in &mut found {
        let array: ArrayRef = match f.spec.kind {
            Kind::Text => Arc::new(f.text.finish()),
            _ => Arc::new(f.int.finish()),
        };
        arrays.push((f.spec.column, array));
    }
    let batch = def
        .batch(arrays)
        .map_err(|e| MemqError::Query(format!("{}: {e}", def.name)))?;
    Ok(FileRows { batch, rejects })
}

/// The spec columns in `header`; a missing required column, or a unit memq cannot convert, is
/// an error listing what was found and what is needed.
fn columns<'s>(path: &Path, header: &[String], specs: &'s [Spec]) -> Result<Vec<Found<'s>>> {
    let keys: Vec<(String, Option<String>)> = header.iter().map(|h| header_key(h)).collect();
    let mut found = Vec::with_capacity(specs.len());
    let mut missing = Vec::new();
    for spec in specs {
        let key = header_key(spec.header).0;
        let at = keys.iter().position(|(k, _)| *k == key);
        let unit = at.and_then(|i| keys[i].1.as_deref());
        let factor = factor(spec.kind, unit).ok_or_else(|| {
            MemqError::input(
                path,
                Location::Line(1),
                format!(
                    "column `{}`: unit `{}` is not one memq converts",
                    header[at.unwrap_or(0)].trim(),
                    unit.unwrap_or("")
                ),
            )
        })?;
        if spec.required && at.is_none() {
            missing.push(spec.header);
        }
        found.push(Found {
            spec,
            at: at.map(|i| (i, header[i].trim().to_string())),
            factor,
            text: StringBuilder::new(),
            int: Int64Builder::new(),
        });
    }
    if !missing.is_empty() {
        let needed: Vec<&str> = specs
            .iter()
            .filter(|s| s.required)
            .map(|s| s.header)
            .collect();
        return Err(MemqError::input(
            path,
            Location::Line(1),
            format!(
                "not a profiler memory CSV: header lacks {} (found: {}; needed: {})",
                missing.join(", "),
                header
                    .iter()
                    .map(|h| h.trim())
                    .collect::<Vec<_>>()
                    .join(", "),
                needed.join(", ")
            ),
        ));
    }
    Ok(found)
}

/// One data row into the builders; on error nothing is appended.
fn parse_row(
    fields: &[String],
    width: usize,
    found: &mut [Found],
) -> std::result::Result<(), String> {
    if fields.len() != width {
        return Err(format!("{} fields, header has {width}", fields.len()));
    }
    // Parse every cell first, so that a bad cell leaves the builders untouched.
    let mut values: Vec<(Option<&str>, Option<i64>)> = Vec::with_capacity(found.len());
    for f in found.iter() {
        let cell =
            f.at.as_ref()
                .map(|(i, _)| fields[*i].trim())
                .filter(|c| !c.is_empty());
        let name = || f.at.as_ref().map_or(f.spec.header, |(_, h)| h.as_str());
        if cell.is_none() && f.spec.required {
            return Err(format!("empty {}", name()));
        }
        let int = match (f.spec.kind, cell) {
            (Kind::Text, _) | (_, None) => None,
            (_, Some(c)) => Some(scaled(c, f.factor).map_err(|e| format!("{}: {e}", name()))?),
        };
        values.push((cell, int));
    }
    for (f, (cell, int)) in found.iter_mut().zip(values) {
        match f.spec.kind {
            Kind::Text => f.text.append_option(cell),
            _ => f.int.append_option(int),
        }
    }
    Ok(())
}
