//! The tool's writer, re-enacted: one dump file per device (created lazily at its first row,
//! stamped with the simulated wall-clock time), device-less rows buffered and appended to every
//! dump file of the process at exit, `printf`-style quoting (§2.9), or the db layout of §4.1.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::truth::FileTruth;
use super::{Dev, Format};
use memq_core::error::{Location, MemqError, Result};

/// One dump row, borrowed. `attr` is the text between the braces (empty → empty field);
/// `py`/`c` are raw stack texts (empty → empty field, else written inside double quotes).
pub struct RowRef<'a> {
    pub id: u64,
    pub event: &'static str,
    pub etype: &'static str,
    pub name: &'a str,
    pub ts: u64,
    pub pid: u32,
    pub tid: u32,
    pub dev: Dev,
    pub ptr: Option<u64>,
    pub attr: &'a str,
    pub py: &'a str,
    pub c: &'a str,
}

/// A buffered device-less row (SYSTEM start/stop/init/fini, OOM RECENT/TOP).
pub struct OwnedRow {
    pub id: u64,
    pub event: &'static str,
    pub etype: &'static str,
    pub name: String,
    pub ts: u64,
    pub tid: u32,
    pub attr: String,
}

enum Kind {
    Csv(BufWriter<File>),
    Db(Box<rusqlite::Connection>),
}

struct Sink {
    rel: String,
    path: PathBuf,
    dev: Dev,
    kind: Kind,
    rows: u64,
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

struct TraceSink {
    rel: String,
    path: PathBuf,
    dev: Dev,
    w: BufWriter<File>,
    rows: u64,
}

pub struct Out {
    root: PathBuf,
    pub dir_rel: String,
    format: Format,
    pid: u32,
    sinks: Vec<Sink>,
    traces: Vec<TraceSink>,
    deviceless: Vec<OwnedRow>,
    other_files: Vec<FileTruth>,
    db_stamp: Option<String>,
    line: Vec<u8>,
    pub rows_written: u64,
    /// The latest timestamp written per device, and over the device-less rows.
    max_ts: BTreeMap<Dev, u64>,
    deviceless_max: u64,
}

pub fn stamp(ts_ns: u64) -> String {
    let secs = ts_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Howard Hinnant's days → (year, month, day), proleptic Gregorian, UTC.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = (z - era * 146_097) as u64;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe as i64 + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn io_err(path: &Path, e: std::io::Error) -> MemqError {
    MemqError::io(path, e)
}

fn db_err(path: &Path, e: rusqlite::Error) -> MemqError {
    MemqError::input(path, Location::None, format!("sqlite: {e}"))
}

pub fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

pub fn push_hex(buf: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.extend_from_slice(b"0x");
    for i in (0..16).rev() {
        buf.push(HEX[((v >> (i * 4)) & 0xf) as usize]);
    }
}

pub fn hex(v: u64) -> String {
    format!("0x{v:016x}")
}

/// The tool's `FixJson` (§3.2 / §4.1): Attr body → JSON object with all-string values.
pub fn fix_json(body: &str) -> String {
    let s = body;
    let mut parts: Vec<&str> = Vec::new();
    let mut pos = 0usize;
    while pos < s.len() {
        let Some(colon) = s[pos..].find(':').map(|i| i + pos) else {
            parts.push(&s[pos..]);
            break;
        };
        match s[..=colon].rfind(',') {
            Some(comma) if comma >= pos => {
                parts.push(&s[pos..comma]);
                parts.push(&s[comma + 1..colon]);
            }
            _ => parts.push(&s[pos..colon]),
        }
        pos = colon + 1;
    }
    let mut o = String::with_capacity(body.len() + 16);
    o.push('{');
    let n = parts.len();
    let mut i = 0;
    while i < n {
        o.push('"');
        o.push_str(parts[i]);
        o.push_str("\":");
        i += 1;
        if i >= n {
            o.push_str("\"\"");
            break;
        }
        o.push('"');
        o.push_str(parts[i]);
        o.push('"');
        if i != n - 1 {
            o.push(',');
        }
        i += 1;
    }
    o.push('}');
    o
}

const DB_SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS memscope_dump (\"ID\" INTEGER, \"Event\" TEXT, \
\"Event Type\" TEXT, \"Name\" TEXT, \"Timestamp(ns)\" INTEGER, \"Process Id\" INTEGER, \
\"Thread Id\" INTEGER, \"Device Id\" TEXT, \"Ptr\" TEXT, \"Attr\" TEXT, \
\"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT);";

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";

impl Out {
    pub fn new(root: &Path, pid: u32, start_ts: u64, format: Format) -> Result<Out> {
        let dir_rel = format!("msmemscope_{pid}_{}_ascend", stamp(start_ts));
        let dir = root.join(&dir_rel);
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        Ok(Out {
            root: root.to_path_buf(),
            dir_rel,
            format,
            pid,
            sinks: Vec::new(),
            traces: Vec::new(),
            deviceless: Vec::new(),
            other_files: Vec::new(),
            db_stamp: None,
            line: Vec::with_capacity(512),
            rows_written: 0,
            max_ts: BTreeMap::new(),
            deviceless_max: 0,
        })
    }

    fn dir(&self) -> PathBuf {
        self.root.join(&self.dir_rel)
    }

    /// Writes a companion text file (config.json, log, compare csv) relative to the project dir.
    pub fn write_file(
        &mut self,
        rel_in_dir: &str,
        kind: &str,
        text: &str,
        rows: u64,
    ) -> Result<()> {
        let path = self.dir().join(rel_in_dir);
        if let Some(p) = path.parent() {
            fs::create_dir_all(p).map_err(|e| io_err(p, e))?;
        }
        fs::write(&path, text).map_err(|e| io_err(&path, e))?;
        let rel = format!("{}/{}", self.dir_rel, rel_in_dir);
        self.other_files.retain(|f| f.path != rel);
        self.other_files.push(FileTruth {
            path: rel,
            kind: kind.to_string(),
            pid: self.pid,
            device: String::new(),
            rows,
            counts: BTreeMap::new(),
        });
        Ok(())
    }

    fn sink_index(&mut self, dev: Dev, now: u64) -> Result<usize> {
        if let Some(i) = self.sinks.iter().position(|s| s.dev == dev) {
            return Ok(i);
        }
        let folder = self.dir().join(dev.folder()).join("dump");
        fs::create_dir_all(&folder).map_err(|e| io_err(&folder, e))?;
        let (name, kind) = match self.format {
            Format::Csv => {
                let name = format!("memscope_dump_{}.csv", stamp(now));
                let path = folder.join(&name);
                let f = File::create(&path).map_err(|e| io_err(&path, e))?;
                let mut w = BufWriter::with_capacity(1 << 16, f);
                w.write_all(HEADER.as_bytes())
                    .map_err(|e| io_err(&path, e))?;
                (name, Kind::Csv(w))
            }
            Format::Db => {
                let st = self.db_stamp.get_or_insert_with(|| stamp(now)).clone();
                let name = format!("memscope_dump_{st}.db");
                let path = folder.join(&name);
                if path.exists() {
                    fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                }
                let conn = rusqlite::Connection::open(&path).map_err(|e| db_err(&path, e))?;
                conn.execute_batch(DB_SCHEMA)
                    .map_err(|e| db_err(&path, e))?;
                conn.execute_batch("BEGIN").map_err(|e| db_err(&path, e))?;
                (name, Kind::Db(Box::new(conn)))
            }
        };
        let path = folder.join(&name);
        let rel = format!("{}/{}/dump/{}", self.dir_rel, dev.folder(), name);
        self.sinks.push(Sink {
            rel,
            path,
            dev,
            kind,
            rows: 0,
            counts: BTreeMap::new(),
        });
        Ok(self.sinks.len() - 1)
    }

    /// Writes a row to its device's file now (creating the file on first use).
    pub fn write(&mut self, r: &RowRef<'_>, now: u64) -> Result<()> {
        let m = self.max_ts.entry(r.dev).or_insert(r.ts);
        *m = (*m).max(r.ts);
        let i = self.sink_index(r.dev, now)?;
        self.write_to(i, r)
    }

    fn write_to(&mut self, i: usize, r: &RowRef<'_>) -> Result<()> {
        let sink = &mut self.sinks[i];
        match &mut sink.kind {
            Kind::Csv(w) => {
                let b = &mut self.line;
                b.clear();
                push_u64(b, r.id);
                b.push(b',');
                b.extend_from_slice(r.event.as_bytes());
                b.push(b',');
                b.extend_from_slice(r.etype.as_bytes());
                b.push(b',');
                if r.event == "MSTX" {
                    b.push(b'"');
                    b.extend_from_slice(r.name.as_bytes());
                    b.push(b'"');
                } else {
                    b.extend_from_slice(r.name.as_bytes());
                }
                b.push(b',');
                push_u64(b, r.ts);
                b.push(b',');
                push_u64(b, r.pid as u64);
                b.push(b',');
                push_u64(b, r.tid as u64);
                b.push(b',');
                b.extend_from_slice(r.dev.label().as_bytes());
                b.push(b',');
                match r.ptr {
                    Some(p) => push_hex(b, p),
                    None => b.extend_from_slice(b"N/A"),
                }
                b.push(b',');
                if !r.attr.is_empty() {
                    b.extend_from_slice(b"\"{");
                    b.extend_from_slice(r.attr.as_bytes());
                    b.extend_from_slice(b"}\"");
                }
                b.push(b',');
                if !r.py.is_empty() {
                    b.push(b'"');
                    b.extend_from_slice(r.py.as_bytes());
                    b.push(b'"');
                }
                b.push(b',');
                if !r.c.is_empty() {
                    b.push(b'"');
                    b.extend_from_slice(r.c.as_bytes());
                    b.push(b'"');
                }
                b.push(b'\n');
                w.write_all(b).map_err(|e| io_err(&sink.path, e))?;
            }
            Kind::Db(conn) => {
                let name = if r.event == "MSTX" {
                    format!("\"{}\"", r.name)
                } else {
                    r.name.to_string()
                };
                let quote = |s: &str| {
                    if s.is_empty() {
                        String::new()
                    } else {
                        format!("\"{s}\"")
                    }
                };
                let ptr = match r.ptr {
                    Some(p) => hex(p),
                    None => "N/A".to_string(),
                };
                let mut st = conn
                    .prepare_cached(
                        "INSERT INTO memscope_dump VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
                    )
                    .map_err(|e| db_err(&sink.path, e))?;
                st.execute(rusqlite::params![
                    r.id as i64,
                    r.event,
                    r.etype,
                    name,
                    r.ts as i64,
                    r.pid as i32,
                    r.tid as i32,
                    r.dev.label(),
                    ptr,
                    fix_json(r.attr),
                    quote(r.py),
                    quote(r.c),
                ])
                .map_err(|e| db_err(&sink.path, e))?;
            }
        }
        sink.rows += 1;
        *sink.counts.entry((r.event, r.etype)).or_insert(0) += 1;
        self.rows_written += 1;
        Ok(())
    }

    /// Buffers a device-less row; it is appended to every dump file of the process at exit.
    pub fn deviceless(&mut self, row: OwnedRow) {
        self.deviceless_max = self.deviceless_max.max(row.ts);
        self.deviceless.push(row);
    }

    /// The timestamp of the last row the dump file of `dev` will hold (its own rows and the
    /// device-less rows appended to every file); `None` when it has no file.
    pub fn last_ts(&self, dev: Dev) -> Option<u64> {
        self.max_ts.get(&dev).map(|&m| m.max(self.deviceless_max))
    }

    /// One Python trace record (written when the function returns).
    pub fn trace(
        &mut self,
        dev: Dev,
        func: &str,
        start: u64,
        end: u64,
        tid: u32,
        now: u64,
    ) -> Result<()> {
        match self.format {
            Format::Csv => {
                let i = match self.traces.iter().position(|t| t.dev == dev) {
                    Some(i) => i,
                    None => {
                        let folder = self.dir().join(dev.folder()).join("dump");
                        fs::create_dir_all(&folder).map_err(|e| io_err(&folder, e))?;
                        let name = format!("python_trace_{}.csv", stamp(now));
                        let path = folder.join(&name);
                        let f = File::create(&path).map_err(|e| io_err(&path, e))?;
                        let mut w = BufWriter::new(f);
                        w.write_all(b"FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id\n")
                            .map_err(|e| io_err(&path, e))?;
                        self.traces.push(TraceSink {
                            rel: format!("{}/{}/dump/{}", self.dir_rel, dev.folder(), name),
                            path,
                            dev,
                            w,
                            rows: 0,
                        });
                        self.traces.len() - 1
                    }
                };
                let t = &mut self.traces[i];
                writeln!(t.w, "{func},{start},{end},{tid},{}", self.pid)
                    .map_err(|e| io_err(&t.path, e))?;
                t.rows += 1;
            }
            Format::Db => {
                let i = self.sink_index(dev, now)?;
                let pid = self.pid;
                let sink = &mut self.sinks[i];
                if let Kind::Db(conn) = &mut sink.kind {
                    let table = format!("python_trace_{pid}");
                    conn.execute_batch(&format!(
                        "CREATE TABLE IF NOT EXISTS {table} (\"FuncInfo\" TEXT, \"StartTime(ns)\" TEXT, \
                         \"EndTime(ns)\" TEXT, \"Thread Id\" INTEGER, \"Process Id\" INTEGER);"
                    ))
                    .map_err(|e| db_err(&sink.path, e))?;
                    let mut st = conn
                        .prepare_cached(&format!("INSERT INTO {table} VALUES (?1,?2,?3,?4,?5)"))
                        .map_err(|e| db_err(&sink.path, e))?;
                    st.execute(rusqlite::params![
                        func,
                        start.to_string(),
                        end.to_string(),
                        tid as i64,
                        pid as i64
                    ])
                    .map_err(|e| db_err(&sink.path, e))?;
                }
            }
        }
        Ok(())
    }

    /// Process exit: appends the device-less rows to every dump file, closes everything and
    /// returns the per-file facts.
    pub fn finish(mut self) -> Result<(Vec<FileTruth>, u64)> {
        let rows = std::mem::take(&mut self.deviceless);
        for i in 0..self.sinks.len() {
            for r in &rows {
                let rr = RowRef {
                    id: r.id,
                    event: r.event,
                    etype: r.etype,
                    name: &r.name,
                    ts: r.ts,
                    pid: self.pid,
                    tid: r.tid,
                    dev: Dev::NA,
                    ptr: None,
                    attr: &r.attr,
                    py: "",
                    c: "",
                };
                self.write_to(i, &rr)?;
            }
        }
        let mut files = Vec::new();
        for s in self.sinks {
            match s.kind {
                Kind::Csv(mut w) => w.flush().map_err(|e| io_err(&s.path, e))?,
                Kind::Db(conn) => conn
                    .execute_batch("COMMIT")
                    .map_err(|e| db_err(&s.path, e))?,
            }
            let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
            for ((e, t), n) in s.counts {
                counts
                    .entry(e.to_string())
                    .or_default()
                    .insert(t.to_string(), n);
            }
            files.push(FileTruth {
                path: s.rel,
                kind: "dump".to_string(),
                pid: self.pid,
                device: s.dev.label(),
                rows: s.rows,
                counts,
            });
        }
        for mut t in self.traces {
            t.w.flush().map_err(|e| io_err(&t.path, e))?;
            files.push(FileTruth {
                path: t.rel,
                kind: "python_trace".to_string(),
                pid: self.pid,
                device: t.dev.label(),
                rows: t.rows,
                counts: BTreeMap::new(),
            });
        }
        files.extend(self.other_files);
        Ok((files, self.rows_written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_json_matches_tool() {
        assert_eq!(fix_json(""), "{}");
        assert_eq!(
            fix_json("allocation_id:4,addr:0x1,size:16,shadow:true"),
            r#"{"allocation_id":"4","addr":"0x1","size":"16","shadow":"true"}"#
        );
        assert_eq!(
            fix_json("allocation_id:12,type:ATB,shape:[1,5,]"),
            r#"{"allocation_id":"12","type":"ATB","shape":"[1,5,]"}"#
        );
        assert_eq!(
            fix_json("owner:PTA@a,inefficient_type:early_allocation,late_deallocation"),
            r#"{"owner":"PTA@a","inefficient_type":"early_allocation,late_deallocation"}"#
        );
    }

    #[test]
    fn stamps() {
        assert_eq!(stamp(1_764_753_083_996_495_030), "20251203091123");
        assert_eq!(stamp(0), "19700101000000");
    }
}
