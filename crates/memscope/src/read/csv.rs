//! Reads a `memscope_dump_*.csv` (every generation of docs/formats/memscope.md §0) into `events` rows
//! and `rejects`. Columns are found by header name; rows that cannot be parsed are rejected with
//! their line, byte offset and reason, never dropped.

use std::io::{BufReader, Read};
use std::path::Path;

use datafusion::arrow::record_batch::RecordBatch;

use crate::parse::attr;
use crate::parse::events::{EventRef, EventRow};
use crate::parse::records::{split_fields, split_fields_cow, RawRecord, RecordReader};
use crate::staging::{DumpSummary, SourceOutput, TsUnit};

mod parallel;
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

/// Reads one CSV dump into `out`. Errors only when the file as a whole is unusable (unreadable,
/// empty, not a dump); bad rows become rejects.
/// `input` is the file's content (possibly wrapped for progress reporting); `path` names it in
/// errors.
pub fn read(path: &Path, input: impl Read, mut out: SourceOutput) -> Result<DumpSummary> {
    read_from(path, BufReader::with_capacity(1 << 20, input), &mut out)?;
    out.close()
}

/// What takes each batch of the sorted events (with the dump's timestamp unit) as it is
/// written.
pub type EachBatch<'a> = dyn FnMut(TsUnit, &RecordBatch) -> Result<()> + Send + 'a;

/// Reads one CSV dump (the file at `path`, read through `input`) into sorted `events` at
/// `events_path` (the table file, marked final), using `runs_path` as scratch, on `workers`
/// threads; rejects and the summary go to `out` (made by [`SourceOutput::create_for_runs`]).
/// The sorted events stream through `each` as they are written.
pub fn read_sorted(
    path: &Path,
    input: impl Read + Send,
    out: SourceOutput,
    (events_path, runs_path): (&Path, &Path),
    workers: usize,
    each: &mut EachBatch<'_>,
) -> Result<DumpSummary> {
    read_sorted_in(
        path,
        input,
        out,
        (events_path, runs_path),
        workers,
        (parallel::CHUNK_BYTES, parallel::FALLBACK_BYTES),
        each,
    )
}

fn read_sorted_in(
    path: &Path,
    input: impl Read + Send,
    mut out: SourceOutput,
    (events_path, runs_path): (&Path, &Path),
    workers: usize,
    (chunk_bytes, fallback_bytes): (usize, usize),
    each: &mut EachBatch<'_>,
) -> Result<DumpSummary> {
    let mut reader = RecordReader::new(BufReader::with_capacity(1 << 20, input));
    let cols = read_header(path, &mut reader, &mut out)?;
    let (line, offset) = (reader.line(), reader.offset());
    let (input, pending) = reader.into_parts();
    parallel::read(
        &parallel::Job {
            path,
            cols: &cols,
            workers,
            chunk_bytes,
            fallback_bytes,
        },
        input,
        pending.unwrap_or_default(),
        (line, offset),
        &mut out,
        events_path,
        runs_path,
        each,
    )?;
    out.close()
}

/// Reads and checks the header line; returns the columns it names.
fn read_header<R: std::io::BufRead>(
    path: &Path,
    reader: &mut RecordReader<R>,
    out: &mut SourceOutput,
) -> Result<Columns> {
    let mut rec = RawRecord::default();
    let io_err = |e: std::io::Error| MemqError::io(path, e);
    // The header is read in bounded memory: a file without a line end (8 MiB of zeros, a
    // binary) is refused after HEADER_LIMIT bytes.
    reader.set_limit(HEADER_LIMIT);
    if !reader.next_record(&mut rec).map_err(io_err)? {
        return Err(MemqError::input(
            path,
            Location::None,
            "empty file: no header line",
        ));
    }
    reader.set_limit(crate::parse::records::max_record_bytes());
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
    Ok(cols)
}

fn read_from<R: Read>(path: &Path, input: BufReader<R>, out: &mut SourceOutput) -> Result<()> {
    let mut reader = RecordReader::new(input);
    let io_err = |e: std::io::Error| MemqError::io(path, e);
    let cols = read_header(path, &mut reader, out)?;
    let mut rec = RawRecord::default();
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

/// [`parse_record`] without copying: the row borrows from `fields`, which borrow from the
/// record's bytes.
fn parse_record_ref<'a>(
    rec: &'a RawRecord,
    cols: &Columns,
    fields: &'a mut Vec<std::borrow::Cow<'a, str>>,
) -> std::result::Result<(EventRef<'a>, bool), String> {
    if let Some(len) = rec.oversized {
        return Err(crate::parse::records::oversized_reason(
            len,
            &format!(
                "its first {} KiB are",
                crate::parse::records::KEPT_OF_OVERSIZED >> 10
            ),
        ));
    }
    let text = std::str::from_utf8(&rec.bytes)
        .map_err(|e| format!("invalid UTF-8 at byte {} of the record", e.valid_up_to()))?;
    if let Some(p) = crate::parse::records::find_byte(0, &rec.bytes) {
        return Err(format!("NUL byte at byte {p} of the record"));
    }
    if rec.unclosed_quote {
        return Err(if rec.terminated {
            "unclosed quote: the quoted field never ends before the next row".into()
        } else {
            "truncated last record: unclosed quote at end of file".into()
        });
    }
    split_fields_cow(text, fields);
    let fields: &'a [std::borrow::Cow<'a, str>] = fields;
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
    let get = |i: Option<usize>| -> &'a str { i.map(|i| fields[i].as_ref()).unwrap_or("") };
    let mut row = EventRef::default();
    let id_text = fields[cols.id].trim();
    row.id = id_text
        .parse::<i64>()
        .map_err(|_| format!("ID `{}` is not an integer", truncate(id_text, 40)))?;
    if row.id < 0 {
        return Err(format!("ID `{}` is negative", truncate(id_text, 40)));
    }
    row.event = fields[cols.event].trim();
    if row.event.is_empty() {
        return Err("empty Event".into());
    }
    row.event_type = get(cols.event_type).trim();
    row.name = optional_str(get(cols.name));
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
    row.device = if device.is_empty() { "N/A" } else { device };
    let ptr = get(cols.ptr).trim();
    row.ptr = if is_na(ptr) {
        None
    } else {
        Some(
            attr::parse_addr(ptr)
                .ok_or_else(|| format!("Ptr `{}` is not an address", truncate(ptr, 40)))?,
        )
    };
    row.attr = get(cols.attr).trim();
    row.stack_py = optional_str(get(cols.stack_py));
    row.stack_c = optional_str(get(cols.stack_c));
    Ok((row, row.ptr.is_some() && !ptr.starts_with("0x")))
}

fn optional_str(s: &str) -> Option<&str> {
    (!s.is_empty() && s != "N/A").then_some(s)
}

/// Parses one record into `row`; returns whether its Ptr was written in decimal (a G1 trait).
/// The owned form of [`parse_record_ref`] (the sequential reader, kept as the parallel one's
/// oracle in the tests).
fn parse_record(
    rec: &RawRecord,
    cols: &Columns,
    row: &mut EventRow,
) -> std::result::Result<bool, String> {
    let mut fields = Vec::new();
    let (r, decimal_ptr) = parse_record_ref(rec, cols, &mut fields)?;
    row.id = r.id;
    row.event = r.event.to_string();
    row.event_type = r.event_type.to_string();
    row.name = r.name.map(str::to_string);
    row.ts_raw = r.ts_raw;
    row.pid = r.pid;
    row.tid = r.tid;
    row.device = r.device.to_string();
    row.ptr = r.ptr;
    row.attr = r.attr.to_string();
    row.stack_py = r.stack_py.map(str::to_string);
    row.stack_c = r.stack_c.map(str::to_string);
    Ok(decimal_ptr)
}

/// The longest header line read (a dump's header is under 200 bytes).
pub const HEADER_LIMIT: usize = 1 << 20;

/// Refuses a header that shows the file is not made of LF or CRLF lines: no line end within
/// HEADER_LIMIT bytes, or lone CRs (classic Mac line ends, which would make the whole file one
/// line).
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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray, RecordBatch};
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};

    fn read_all(path: &Path) -> Vec<RecordBatch> {
        if !path.exists() {
            return Vec::new();
        }
        let file = std::fs::File::open(path).unwrap();
        datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
    }

    fn concat(batches: &[RecordBatch]) -> Option<RecordBatch> {
        let first = batches.first()?;
        Some(datafusion::arrow::compute::concat_batches(&first.schema(), batches).unwrap())
    }

    /// The rows of `batch` in canonical order (ts NULLs last, then row_idx).
    fn canonical(batch: &RecordBatch) -> RecordBatch {
        let ts = batch.column(7).as_primitive::<Int64Type>();
        let ri = batch.column(1).as_primitive::<UInt64Type>();
        let mut order: Vec<u32> = (0..batch.num_rows() as u32).collect();
        order.sort_by_key(|&i| {
            let i = i as usize;
            (
                ts.is_null(i),
                if ts.is_null(i) { 0 } else { ts.value(i) },
                ri.value(i),
            )
        });
        datafusion::arrow::compute::take_record_batch(
            batch,
            &datafusion::arrow::array::UInt32Array::from(order),
        )
        .unwrap()
    }

    /// `MEMQ_TEST_DUMP=path cargo test -p memq-memscope --lib -- --ignored big_dump`: the
    /// parallel reader on a large dump gives what the sequential one gives, sorted.
    #[test]
    #[ignore]
    fn big_dump_reads_like_the_sequential_reader() {
        let path = std::path::PathBuf::from(std::env::var("MEMQ_TEST_DUMP").unwrap());
        let dir = std::env::temp_dir().join(format!("memq-csv-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seq_events = dir.join("seq.parquet");
        let out = SourceOutput::create("s.csv", &seq_events, &dir.join("sr.parquet")).unwrap();
        let a = read(&path, std::fs::File::open(&path).unwrap(), out).unwrap();
        let par_events = dir.join("par.parquet");
        let out = SourceOutput::create_for_runs("s.csv", &dir.join("pr.parquet"));
        let b = read_sorted(
            &path,
            std::fs::File::open(&path).unwrap(),
            out,
            (&par_events, &dir.join("runs.parquet")),
            2,
            &mut |_, _| Ok(()),
        )
        .unwrap();
        assert_eq!(
            (a.rows, a.rejects, a.ts_unit, a.generation),
            (b.rows, b.rejects, b.ts_unit, b.generation)
        );
        let x = canonical(&concat(&read_all(&seq_events)).unwrap());
        let y = concat(&read_all(&par_events)).unwrap();
        for c in 0..x.num_columns() {
            assert_eq!(x.column(c).to_data(), y.column(c).to_data(), "column {c}");
        }
        eprintln!("{} rows identical", x.num_rows());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A staging file that cannot be written (here: its folder is gone; a full disk in the
    /// fault tests) ends the parallel read with that file's error, however many pieces are left
    /// to read: the reader once waited forever for room that only the stopped collector frees.
    #[test]
    fn a_failing_staging_write_ends_the_parallel_read() {
        let dir = std::env::temp_dir().join(format!("memq-csv-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut dump = String::from(
            "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr\n",
        );
        for i in 0..20_000u64 {
            dump.push_str(&format!(
                "{i},MALLOC,PTA,,{},1,1,0,{},\"{{size:512,total:1024,used:512,owner:}}\"\n",
                1000 + i,
                0x1000 + i * 512
            ));
        }
        let path = dir.join("d.csv");
        std::fs::write(&path, &dump).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (p, d) = (path.clone(), dir.clone());
        std::thread::spawn(move || {
            let out = SourceOutput::create_for_runs("s.csv", &d.join("rejects.parquet"));
            let got = read_sorted_in(
                &p,
                std::fs::File::open(&p).unwrap(),
                out,
                (&d.join("ev.parquet"), &d.join("gone/runs")),
                2,
                (512, 1 << 20),
                &mut |_, _| Ok(()),
            );
            let _ = tx.send(got.map(|s| s.rows));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the read must end, not hang");
        let err = got.expect_err("nothing could be staged").to_string();
        assert!(err.contains("gone/runs"), "names the staging file: {err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The parallel reader (tiny pieces, two workers) gives exactly what the sequential one
    /// gives, sorted: events, rejects and summary, for every hostile CSV fixture.
    #[test]
    fn pieces_read_like_the_whole_file() {
        let dir = std::env::temp_dir().join(format!("memq-csv-par-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hostile");
        let mut checked = 0;
        let mut names: Vec<_> = std::fs::read_dir(&fixtures)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "csv"))
            .collect();
        names.sort();
        for path in names {
            let bytes = std::fs::read(&path).unwrap();
            let seq_events = dir.join("seq.parquet");
            let seq_rejects = dir.join("seq-rejects.parquet");
            let _ = std::fs::remove_file(&seq_rejects);
            let out = SourceOutput::create("s.csv", &seq_events, &seq_rejects).unwrap();
            let seq = read(&path, &bytes[..], out);
            for (chunk, fallback) in [
                (1usize, 1 << 20),
                (7, 1 << 20),
                (64, 1 << 20),
                (1 << 20, 1 << 20),
                (16, 40),
                (1, 1),
            ] {
                let par_events = dir.join("par.parquet");
                let par_rejects = dir.join("par-rejects.parquet");
                let _ = std::fs::remove_file(&par_rejects);
                let _ = std::fs::remove_file(&par_events);
                let out = SourceOutput::create_for_runs("s.csv", &par_rejects);
                let mut streamed = Vec::new();
                let par = read_sorted_in(
                    &path,
                    &bytes[..],
                    out,
                    (&par_events, &dir.join("runs.parquet")),
                    2,
                    (chunk, fallback),
                    &mut |_, b| {
                        streamed.push(b.clone());
                        Ok(())
                    },
                );
                let name = format!("{} (pieces of {chunk})", path.display());
                match (&seq, &par) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(
                            (a.rows, a.rejects, a.ts_unit, a.generation),
                            (b.rows, b.rejects, b.ts_unit, b.generation),
                            "{name}"
                        );
                        let a_ev = concat(&read_all(&seq_events)).map(|b| canonical(&b));
                        let b_ev = concat(&read_all(&par_events));
                        // The batches handed on as they were written are the file's rows.
                        assert_eq!(
                            concat(&streamed).map(|b| b.num_rows()),
                            b_ev.as_ref().map(|b| b.num_rows()),
                            "{name}: streamed"
                        );
                        if let (Some(x), Some(y)) = (concat(&streamed), &b_ev) {
                            for c in 0..x.num_columns() {
                                assert_eq!(x.column(c).to_data(), y.column(c).to_data(), "{name}");
                            }
                        }
                        match (a_ev, b_ev) {
                            (Some(x), Some(y)) => {
                                assert_eq!(x.num_columns(), y.num_columns(), "{name}");
                                for c in 0..x.num_columns() {
                                    assert_eq!(
                                        x.column(c).to_data(),
                                        y.column(c).to_data(),
                                        "{name}: column {c}"
                                    );
                                }
                            }
                            (None, None) => {}
                            (x, y) => panic!(
                                "{name}: {:?} vs {:?} rows",
                                x.map(|b| b.num_rows()),
                                y.map(|b| b.num_rows())
                            ),
                        }
                        let a_rej = concat(&read_all(&seq_rejects));
                        let b_rej = concat(&read_all(&par_rejects));
                        assert_eq!(
                            a_rej.map(|b| b
                                .columns()
                                .iter()
                                .map(|c| c.to_data())
                                .collect::<Vec<_>>()),
                            b_rej.map(|b| b
                                .columns()
                                .iter()
                                .map(|c| c.to_data())
                                .collect::<Vec<_>>()),
                            "{name}: rejects"
                        );
                    }
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}"),
                    (a, b) => panic!(
                        "{name}: {:?} vs {:?}",
                        a.as_ref().map(|s| s.rows),
                        b.as_ref().map(|s| s.rows)
                    ),
                }
            }
            checked += 1;
        }
        assert!(checked > 20, "{checked} fixtures");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
