//! Reads one profiler CSV (docs/formats/profiler.md §2–3) into its table and `rejects`.
//!
//! The header names the layout ([`LAYOUTS`]: memory_record, npu_module_mem, operator_memory,
//! static_op_mem), whatever the file is called; a header that is none of them is refused with
//! what it lacks, never read as another file.
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

use crate::number::{integer, is_scientific, scaled, scientific_reason};
use crate::schema;

/// A line longer than this is no profiler row: the file is refused, in bounded memory.
const MAX_LINE: u64 = 1 << 20;

/// What a column holds, and the unit assumed when its header names none.
#[derive(Clone, Copy)]
pub enum Kind {
    Text,
    /// Text kept as written that is a number to the profiler (a stream address, a device id): a
    /// cell in scientific notation has lost its digits and is refused.
    Id,
    /// A whole number without a unit (graph ids, node indices).
    Int,
    /// A moment or a length of time; the default unit is µs.
    Time,
    /// An amount of memory; the default unit is given.
    Bytes(&'static str),
}

/// One column of a profiler file: the table column it fills, its header name (without unit),
/// what it holds, whether a row needs a value in it, and the converted value the profiler
/// writes for "none" (read as NULL).
pub struct Spec {
    pub column: &'static str,
    pub header: &'static str,
    pub kind: Kind,
    pub required: bool,
    pub null_at: Option<i64>,
}

const fn spec(column: &'static str, header: &'static str, kind: Kind) -> Spec {
    Spec {
        column,
        header,
        kind,
        required: false,
        null_at: None,
    }
}

const fn needed(column: &'static str, header: &'static str, kind: Kind) -> Spec {
    Spec {
        required: true,
        ..spec(column, header, kind)
    }
}

/// One file layout memq reads (docs/formats/profiler.md §2): its name, the file the profiler
/// writes it to, its columns, and how its header is told from the others: every `signature`
/// column present, no `absent` column.
pub struct Layout {
    pub name: &'static str,
    pub file: &'static str,
    pub specs: &'static [Spec],
    pub signature: &'static [&'static str],
    pub absent: &'static [&'static str],
    pub table: fn() -> TableDef,
}

/// `memory_record.csv`: the 7 columns of today, the 5 of 2023 (no `Total Active`, no `Stream
/// Ptr`).
pub const MEMORY_RECORD: Layout = Layout {
    name: "memory_record",
    file: "memory_record.csv",
    specs: &[
        needed("component", "Component", Kind::Text),
        needed("ts", "Timestamp", Kind::Time),
        spec("allocated", "Total Allocated", Kind::Bytes("MB")),
        spec("reserved", "Total Reserved", Kind::Bytes("MB")),
        spec("active", "Total Active", Kind::Bytes("MB")),
        spec("stream", "Stream Ptr", Kind::Id),
        spec("device", "Device Type", Kind::Text),
    ],
    signature: &["Component", "Timestamp", "Total Allocated"],
    absent: &[],
    table: schema::memory_record,
};

/// `npu_module_mem.csv`, with or without the leading `Device_id`.
pub const NPU_MODULE_MEM: Layout = Layout {
    name: "npu_module_mem",
    file: "npu_module_mem.csv",
    specs: &[
        spec("device_id", "Device_id", Kind::Id),
        needed("component", "Component", Kind::Text),
        needed("ts", "Timestamp", Kind::Time),
        Spec {
            // -1 KB: "only frees were seen for the component"; torch_npu writes it as
            // -0.0009765625 MB. Both are -1024 bytes.
            null_at: Some(-1024),
            ..needed("reserved", "Total Reserved", Kind::Bytes("KB"))
        },
        spec("device", "Device", Kind::Text),
    ],
    signature: &["Component", "Timestamp", "Total Reserved"],
    absent: &["Total Allocated"],
    table: schema::module_mem,
};

/// `operator_memory.csv`.
pub const OPERATOR_MEMORY: Layout = Layout {
    name: "operator_memory",
    file: "operator_memory.csv",
    specs: &[
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
        spec("stream", "Stream Ptr", Kind::Id),
        spec("device", "Device Type", Kind::Text),
    ],
    signature: &["Name", "Size", "Allocation Time"],
    absent: &[],
    table: schema::operator_memory,
};

/// `static_op_mem.csv`.
pub const STATIC_OP_MEM: Layout = Layout {
    name: "static_op_mem",
    file: "static_op_mem.csv",
    specs: &[
        spec("device_id", "Device_id", Kind::Id),
        needed("op_name", "Op Name", Kind::Text),
        spec("model_name", "Model Name", Kind::Text),
        needed("graph_id", "Graph ID", Kind::Int),
        needed("node_start", "Node Index Start", Kind::Int),
        Spec {
            // 4294967295: held until the graph ends.
            null_at: Some(u32::MAX as i64),
            ..needed("node_end", "Node Index End", Kind::Int)
        },
        needed("size", "Size", Kind::Bytes("KB")),
    ],
    signature: &["Op Name", "Graph ID", "Node Index Start"],
    absent: &[],
    table: schema::static_op_mem,
};

/// Every layout, in the order headers are tried.
pub const LAYOUTS: &[&Layout] = &[
    &MEMORY_RECORD,
    &NPU_MODULE_MEM,
    &OPERATOR_MEMORY,
    &STATIC_OP_MEM,
];

/// The layout whose header `fields` is.
fn identify(fields: &[String]) -> Option<&'static Layout> {
    let keys: Vec<String> = fields.iter().map(|f| header_key(f).0).collect();
    let has = |name: &str| keys.contains(&header_key(name).0);
    LAYOUTS
        .iter()
        .copied()
        .find(|l| l.signature.iter().all(|c| has(c)) && !l.absent.iter().any(|c| has(c)))
}

/// The layout of a file whose first line is `header`.
pub fn layout_of(header: &str) -> Option<&'static Layout> {
    identify(&split(header))
}

/// Whether `header` looks like a profiler memory CSV without being one memq reads: it has two
/// columns of some layout's signature. Such a file is claimed so that its refusal says what its
/// header lacks, instead of being read as something else.
pub fn looks_like_profiler(header: &str) -> bool {
    let keys: Vec<String> = split(header).iter().map(|f| header_key(f).0).collect();
    LAYOUTS.iter().any(|l| {
        l.signature
            .iter()
            .filter(|c| keys.contains(&header_key(c).0))
            .count()
            >= 2
    })
}

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
        Kind::Text | Kind::Id | Kind::Int => Some(1),
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
    /// The layout its header named.
    pub layout: &'static Layout,
    pub batch: RecordBatch,
    pub rejects: RejectsBuilder,
    /// The unit of its times as written (`us`), when it has times.
    pub ts_unit: Option<String>,
}

/// Reads `input` (the content of `path`): its header names the layout, each row goes to the
/// layout's table or to `rejects`. A header memq does not know is refused.
pub fn read(path: &Path, source: &str, input: impl Read) -> Result<FileRows> {
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
    let layout = identify(&header).ok_or_else(|| unknown_header(path, &header))?;
    let def = (layout.table)();
    let mut found = columns(path, &header, layout.specs)?;
    let ts_unit = found
        .iter()
        .find(|f| matches!(f.spec.kind, Kind::Time) && f.at.is_some())
        .map(|f| {
            let (i, _) = f.at.as_ref().expect("found");
            header_key(&header[*i])
                .1
                .unwrap_or_else(|| "us".to_string())
                .to_ascii_lowercase()
                .replace('µ', "u")
        });
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
            Kind::Text | Kind::Id => Arc::new(f.text.finish()),
            _ => Arc::new(f.int.finish()),
        };
        arrays.push((f.spec.column, array));
    }
    let batch = def
        .batch(arrays)
        .map_err(|e| MemqError::Query(format!("{}: {e}", def.name)))?;
    Ok(FileRows {
        layout,
        batch,
        rejects,
        ts_unit,
    })
}

/// The refusal of a header that is no layout's: what it lacks for the nearest layouts (those
/// missing the fewest signature columns), what it has, and the files memq reads.
fn unknown_header(path: &Path, header: &[String]) -> MemqError {
    let keys: Vec<String> = header.iter().map(|f| header_key(f).0).collect();
    let has = |name: &str| keys.contains(&header_key(name).0);
    let lacks: Vec<(&Layout, Vec<&str>)> = LAYOUTS
        .iter()
        .map(|l| {
            let mut wrong: Vec<&str> = l.signature.iter().copied().filter(|c| !has(c)).collect();
            wrong.extend(l.absent.iter().copied().filter(|c| has(c)));
            (*l, wrong)
        })
        .collect();
    let fewest = lacks.iter().map(|(_, m)| m.len()).min().unwrap_or(0);
    let nearest: Vec<String> = lacks
        .iter()
        .filter(|(_, m)| m.len() == fewest)
        .map(|(l, m)| {
            let (missing, extra): (Vec<&str>, Vec<&str>) =
                m.iter().partition(|c| !l.absent.contains(c));
            let mut what = Vec::new();
            if !missing.is_empty() {
                what.push(format!("lacks {}", missing.join(", ")));
            }
            if !extra.is_empty() {
                what.push(format!("has {}", extra.join(", ")));
            }
            format!("{} for {}", what.join(" and "), l.file)
        })
        .collect();
    MemqError::input(
        path,
        Location::Line(1),
        format!(
            "not a profiler memory CSV memq reads: header {} (found: {}; memq reads {})",
            nearest.join(", or "),
            header
                .iter()
                .map(|h| h.trim())
                .collect::<Vec<_>>()
                .join(", "),
            LAYOUTS
                .iter()
                .map(|l| l.file)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
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
            (_, None) | (Kind::Text, _) => None,
            (Kind::Id, Some(c)) if is_scientific(c) => {
                return Err(format!("{}: {}", name(), scientific_reason(c)))
            }
            (Kind::Id, Some(_)) => None,
            (Kind::Int, Some(c)) => Some(integer(c).map_err(|e| format!("{}: {e}", name()))?),
            (_, Some(c)) => Some(scaled(c, f.factor).map_err(|e| format!("{}: {e}", name()))?),
        };
        values.push((cell, int.filter(|v| Some(*v) != f.spec.null_at)));
    }
    for (f, (cell, int)) in found.iter_mut().zip(values) {
        match f.spec.kind {
            Kind::Text | Kind::Id => f.text.append_option(cell),
            _ => f.int.append_option(int),
        }
    }
    Ok(())
}
