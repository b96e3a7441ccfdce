//! The fuzz targets: each takes arbitrary bytes and checks that the parser neither panics nor
//! breaks its invariants (an `Err` names the broken invariant). The driver (`src/main.rs`)
//! mutates a seed corpus and feeds them; `tests/props.rs` feeds structured inputs.

use std::io::BufReader;
use std::path::Path;

use memq_memscope::parse::attr;
use memq_memscope::parse::records::{split_fields, RawRecord, RecordReader, KEPT_OF_OVERSIZED};

pub type Outcome = Result<(), String>;

pub const TARGETS: &[&str] = &["attr", "records", "pickle", "db"];

/// Runs target `name` on `data`.
pub fn run(name: &str, data: &[u8], scratch: &Path) -> Outcome {
    match name {
        "attr" => attr_target(data),
        "records" => records_target(data),
        "pickle" => pickle_target(data),
        "db" => db_target(data, scratch),
        _ => Err(format!("unknown target {name}")),
    }
}

/// The Attr parser: every item is a slice of the cell, every key looks like a key; the other
/// entry points (JSON form, lookup, numbers, addresses) do not panic.
pub fn attr_target(data: &[u8]) -> Outcome {
    let cell = String::from_utf8_lossy(data);
    let items = attr::parse(&cell);
    let range = cell.as_ptr() as usize..cell.as_ptr() as usize + cell.len() + 1;
    for (k, v) in &items {
        if k.is_empty() {
            return Err(format!("empty key in {items:?}"));
        }
        for s in [k, v] {
            let p = s.as_ptr() as usize;
            if !(s.is_empty() || range.contains(&p) && range.contains(&(p + s.len()))) {
                return Err("an item is not a slice of the cell".into());
            }
        }
    }
    let owned = attr::parse_owned(&cell);
    let _ = attr::render(&owned);
    let _ = attr::lookup(&cell, "size");
    let _ = attr::parse_json_object(&cell);
    for (_, v) in &items {
        let _ = attr::parse_int(v);
        let _ = attr::parse_addr(v);
    }
    let _ = attr::parse_int(&cell);
    let _ = attr::parse_addr(&cell);
    Ok(())
}

fn read_all(
    data: &[u8],
    capacity: usize,
    limit: Option<usize>,
) -> Result<(Vec<RawRecord>, u64), String> {
    let mut r = RecordReader::new(BufReader::with_capacity(capacity, data));
    if let Some(l) = limit {
        r.set_limit(l);
    }
    let mut out = Vec::new();
    let mut rec = RawRecord::default();
    while r.next_record(&mut rec).map_err(|e| e.to_string())? {
        out.push(rec.clone());
        if out.len() > data.len() + 1 {
            return Err("more records than bytes".into());
        }
    }
    Ok((out, r.offset()))
}

/// The CSV record reader: it consumes the whole input, records start at increasing offsets
/// and lines, a record's bytes are the input's bytes at its offset (without its line end),
/// the result does not depend on the read buffer's size, and a small limit bounds every
/// record.
pub fn records_target(data: &[u8]) -> Outcome {
    let (big, end) = read_all(data, 1 << 16, None)?;
    if end != data.len() as u64 {
        return Err(format!("consumed {end} of {} bytes", data.len()));
    }
    let mut last = None;
    for rec in &big {
        if let Some((line, off)) = last {
            if rec.line <= line || rec.offset <= off {
                return Err(format!(
                    "record at line {} offset {} after line {line} offset {off}",
                    rec.line, rec.offset
                ));
            }
        }
        last = Some((rec.line, rec.offset));
        let at = rec.offset as usize;
        if data.get(at..at + rec.bytes.len()) != Some(rec.bytes.as_slice()) {
            return Err(format!("record at offset {at} is not the input's bytes"));
        }
        if let Ok(text) = std::str::from_utf8(&rec.bytes) {
            let fields = split_fields(text);
            if fields.is_empty() {
                return Err("no fields".into());
            }
        }
    }
    let (small, _) = read_all(data, 7, None)?;
    let key = |v: &[RawRecord]| -> Vec<(u64, u64, Vec<u8>, bool, bool)> {
        v.iter()
            .map(|r| {
                (
                    r.line,
                    r.offset,
                    r.bytes.clone(),
                    r.terminated,
                    r.unclosed_quote,
                )
            })
            .collect()
    };
    if key(&big) != key(&small) {
        return Err("the records depend on the read buffer's size".into());
    }
    let limit = 64;
    let (cut, end) = read_all(data, 13, Some(limit))?;
    if end != data.len() as u64 {
        return Err(format!(
            "with a limit: consumed {end} of {} bytes",
            data.len()
        ));
    }
    for rec in &cut {
        if rec.bytes.len() > limit.max(KEPT_OF_OVERSIZED) + 2 {
            return Err(format!(
                "a record of {} bytes passed the limit",
                rec.bytes.len()
            ));
        }
        if rec.oversized.is_none() && rec.bytes.len() > limit {
            return Err("a record over the limit is not marked oversized".into());
        }
    }
    Ok(())
}

/// The pickle decoder: any bytes decode or fail with an offset inside the input.
pub fn pickle_target(data: &[u8]) -> Outcome {
    match memq_pickle::decode(data) {
        Ok(_) => Ok(()),
        Err(e) if e.offset <= data.len() as u64 => Ok(()),
        Err(e) => Err(format!(
            "error offset {} beyond the input's {} bytes: {}",
            e.offset,
            data.len(),
            e.reason
        )),
    }
}

/// The db reader, through the memscope format's ingest of one `memscope_dump_x.db` into a
/// dataset under construction: any bytes ingest or fail with an error naming the file.
pub fn db_target(data: &[u8], scratch: &Path) -> Outcome {
    use memq_core::format::{Format, Source};
    let dir = tempfile::TempDir::new_in(scratch).map_err(|e| e.to_string())?;
    let db = dir.path().join("memscope_dump_fuzz.db");
    std::fs::write(&db, data).map_err(|e| e.to_string())?;
    let format = memq_memscope::Memscope;
    let builder = memq_core::dataset::DatasetBuilder::create(
        &dir.path().join("o.memq"),
        true,
        &format.tables(),
    )
    .map_err(|e| e.to_string())?;
    let sources = vec![Source {
        index: 0,
        path: db.clone(),
        name: "memscope_dump_fuzz.db".into(),
        kind: memq_memscope::MEMSCOPE_DB,
    }];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let progress: memq_core::format::Progress = std::sync::Arc::new(|_| {});
    match rt.block_on(format.ingest(&sources, &builder, progress)) {
        Ok(reports) => {
            let r = reports.first().ok_or("no report")?;
            let _ = (r.rows, r.rejects);
            Ok(())
        }
        Err(e) => {
            let text = e.to_string();
            if text.contains("memscope_dump_fuzz.db") {
                Ok(())
            } else {
                Err(format!("error does not name the file: {text}"))
            }
        }
    }
}
