//! Reading a Chrome trace as a stream: a small JSON scanner walks the top-level object and the
//! `traceEvents` array one event at a time (every other value is skipped without being built),
//! keeping the `[memory]` events and the CPU op intervals; numbers are kept as their text, so
//! that `ts` (µs with 3 decimals) becomes ns exactly, never through a float.

use std::collections::HashMap;
use std::io::{self, BufRead};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Int64Builder, StringBuilder, UInt64Builder,
};
use datafusion::arrow::record_batch::RecordBatch;

use memq_core::catalog::TableDef;
use memq_core::rejects::{Reject, RejectsBuilder};

/// The deepest nesting of a skipped value (a trace's args hold a few levels).
const MAX_DEPTH: usize = 512;

/// Why a trace could not be read: the byte offset and line where it went wrong, or I/O.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Syntax {
        offset: u64,
        line: u64,
        what: String,
    },
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

type R<T> = Result<T, ReadError>;

/// A byte-level JSON scanner over a buffered reader.
struct Scanner<B> {
    input: B,
    offset: u64,
    line: u64,
}

impl<B: BufRead> Scanner<B> {
    fn peek(&mut self) -> R<Option<u8>> {
        Ok(self.input.fill_buf()?.first().copied())
    }

    fn bump(&mut self) {
        self.input.consume(1);
        self.offset += 1;
    }

    fn error<T>(&self, what: impl Into<String>) -> R<T> {
        Err(ReadError::Syntax {
            offset: self.offset,
            line: self.line,
            what: what.into(),
        })
    }

    /// Skips whitespace; the next byte (None at the end).
    fn ws(&mut self) -> R<Option<u8>> {
        loop {
            match self.peek()? {
                Some(b'\n') => {
                    self.line += 1;
                    self.bump();
                }
                Some(b' ' | b'\t' | b'\r') => self.bump(),
                other => return Ok(other),
            }
        }
    }

    fn expect(&mut self, c: u8) -> R<()> {
        match self.ws()? {
            Some(b) if b == c => {
                self.bump();
                Ok(())
            }
            Some(b) => self.error(format!("expected `{}`, found `{}`", c as char, b as char)),
            None => self.error(format!(
                "expected `{}`, found the end of the file",
                c as char
            )),
        }
    }

    /// After `,` or the opening bracket: whether another member follows (false at `close`).
    fn more(&mut self, first: &mut bool, close: u8) -> R<bool> {
        match self.ws()? {
            Some(b) if b == close => {
                self.bump();
                Ok(false)
            }
            Some(b',') if !*first => {
                self.bump();
                Ok(true)
            }
            Some(_) if *first => {
                *first = false;
                Ok(true)
            }
            Some(b) => self.error(format!(
                "expected `,` or `{}`, found `{}`",
                close as char, b as char
            )),
            None => self.error("unexpected end of the file"),
        }
    }

    /// A string (the opening quote next); its bytes decoded into `out` when given.
    fn string(&mut self, mut out: Option<&mut Vec<u8>>) -> R<()> {
        self.expect(b'"')?;
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return self.error("unterminated string");
            }
            let stop = buf.iter().position(|&b| b == b'"' || b == b'\\');
            let take = stop.unwrap_or(buf.len());
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(&buf[..take]);
            }
            self.input.consume(take);
            self.offset += take as u64;
            let Some(_) = stop else { continue };
            let b = self.peek()?.unwrap_or(b'"');
            self.bump();
            if b == b'"' {
                return Ok(());
            }
            let esc = self.peek()?;
            self.bump();
            let ch: u32 = match esc {
                Some(b'"') => '"' as u32,
                Some(b'\\') => '\\' as u32,
                Some(b'/') => '/' as u32,
                Some(b'b') => 8,
                Some(b'f') => 12,
                Some(b'n') => '\n' as u32,
                Some(b'r') => '\r' as u32,
                Some(b't') => '\t' as u32,
                Some(b'u') => {
                    let hi = self.hex4()?;
                    if (0xd800..0xdc00).contains(&hi) && self.peek()? == Some(b'\\') {
                        self.bump();
                        if self.peek()? != Some(b'u') {
                            return self.error("bad surrogate pair");
                        }
                        self.bump();
                        let lo = self.hex4()?;
                        0x10000 + ((hi - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff)
                    } else {
                        hi
                    }
                }
                _ => return self.error("bad escape in a string"),
            };
            if let Some(o) = out.as_deref_mut() {
                let c = char::from_u32(ch).unwrap_or('\u{fffd}');
                let mut tmp = [0u8; 4];
                o.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
        }
    }

    fn hex4(&mut self) -> R<u32> {
        let mut v = 0;
        for _ in 0..4 {
            let d = self.peek()?.and_then(|b| (b as char).to_digit(16));
            let Some(d) = d else {
                return self.error("bad \\u escape");
            };
            self.bump();
            v = v * 16 + d;
        }
        Ok(v)
    }

    /// A bare token (number, true, false, null) into `out`.
    fn token(&mut self, mut out: Option<&mut Vec<u8>>) -> R<()> {
        let mut any = false;
        while let Some(b) = self.peek()? {
            if !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')) {
                break;
            }
            if let Some(o) = out.as_deref_mut() {
                o.push(b);
            }
            any = true;
            self.bump();
        }
        if !any {
            return self.error("expected a value");
        }
        Ok(())
    }

    /// A scalar's text into `out` (a string's contents, a number as written); an object or an
    /// array is skipped and leaves `out` empty.
    fn scalar(&mut self, out: &mut Vec<u8>) -> R<()> {
        out.clear();
        match self.ws()? {
            Some(b'"') => self.string(Some(out)),
            Some(b'{' | b'[') => self.skip(),
            _ => self.token(Some(out)),
        }
    }

    /// Skips one value of any shape.
    fn skip(&mut self) -> R<()> {
        self.skip_nested(0)
    }

    /// Skips one value `depth` levels down; a value nested deeper than [`MAX_DEPTH`] is an
    /// error rather than a stack overflow (a hostile `[[[[…` of any length).
    fn skip_nested(&mut self, depth: usize) -> R<()> {
        match self.ws()? {
            Some(b'"') => self.string(None),
            Some(open @ (b'{' | b'[')) => {
                if depth >= MAX_DEPTH {
                    return self.error(format!("values nested deeper than {MAX_DEPTH} levels"));
                }
                let close = if open == b'{' { b'}' } else { b']' };
                self.bump();
                let mut first = true;
                while self.more(&mut first, close)? {
                    if open == b'{' {
                        self.string(None)?;
                        self.expect(b':')?;
                    }
                    self.skip_nested(depth + 1)?;
                }
                Ok(())
            }
            _ => self.token(None),
        }
    }
}

/// The fields of one event memq looks at, as text; reused from event to event.
#[derive(Default)]
struct Event {
    ph: Vec<u8>,
    cat: Vec<u8>,
    name: Vec<u8>,
    pid: Vec<u8>,
    tid: Vec<u8>,
    ts: Vec<u8>,
    dur: Vec<u8>,
    /// Addr, Bytes, Total Allocated, Total Reserved, Device Type, Device Id.
    args: [Option<Vec<u8>>; 6],
}

const ARG_KEYS: [&[u8]; 6] = [
    b"Addr",
    b"Bytes",
    b"Total Allocated",
    b"Total Reserved",
    b"Device Type",
    b"Device Id",
];

impl Event {
    fn clear(&mut self) {
        for f in [
            &mut self.ph,
            &mut self.cat,
            &mut self.name,
            &mut self.pid,
            &mut self.tid,
            &mut self.ts,
            &mut self.dur,
        ] {
            f.clear();
        }
        for a in &mut self.args {
            *a = None;
        }
    }
}

/// A decimal number's text times 10^`scale`, rounded to the nearest integer (halves away from
/// zero); None when it is not a number or does not fit.
pub fn decimal(text: &[u8], scale: i32) -> Option<i128> {
    let text = std::str::from_utf8(text).ok()?;
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = int.bytes().chain(frac.bytes());
    let mut v: i128 = 0;
    let mut n = 0;
    for d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        if v == 0 && d == b'0' {
            continue; // leading zeros do not count against the width
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as i128)?;
        n += 1;
        if n > 36 {
            return None;
        }
    }
    let shift = scale.checked_add(exp)?.checked_sub(frac.len() as i32)?;
    if shift >= 0 {
        v = v.checked_mul(10i128.checked_pow(shift as u32)?)?;
    } else if v != 0 {
        let p = 10i128.checked_pow((-shift) as u32).unwrap_or(i128::MAX);
        let (q, r) = (v / p, v % p);
        v = if r * 2 >= p { q + 1 } else { q };
    }
    Some(if neg { -v } else { v })
}

fn int(text: &[u8]) -> Option<i64> {
    decimal(text, 0).and_then(|v| i64::try_from(v).ok())
}

/// Trace µs as written → ns.
fn us_to_ns(text: &[u8]) -> Option<i64> {
    decimal(text, 3).and_then(|v| i64::try_from(v).ok())
}

/// The name of a c10::DeviceType code (c10/core/DeviceType.h); 20 is PrivateUse1, which
/// torch_npu registers as `npu`.
pub fn device_type_name(code: i64) -> String {
    let name = match code {
        0 => "cpu",
        1 => "cuda",
        2 => "mkldnn",
        3 => "opengl",
        4 => "opencl",
        5 => "ideep",
        6 => "hip",
        7 => "fpga",
        8 => "maia",
        9 => "xla",
        10 => "vulkan",
        11 => "metal",
        12 => "xpu",
        13 => "mps",
        14 => "meta",
        15 => "hpu",
        16 => "ve",
        17 => "lazy",
        18 => "ipu",
        19 => "mtia",
        20 => "npu",
        _ => return format!("type {code}"),
    };
    name.to_string()
}

/// One `[memory]` event.
struct MemRow {
    event: u64,
    /// ns as written (before the base time is added).
    ts: i64,
    device_type: i64,
    device_index: i64,
    addr: Option<u64>,
    bytes: i64,
    total_allocated: Option<i64>,
    total_reserved: Option<i64>,
    thread: u32,
    pid: Option<i64>,
    tid: Option<i64>,
    op: Option<u32>,
    op_ts: Option<i64>,
}

/// One CPU op: [start, end] in ns as written, on one thread.
struct Op {
    thread: u32,
    start: i64,
    end: i64,
    name: u32,
}

/// What one trace gave.
pub struct Read {
    pub batch: RecordBatch,
    pub rejects: RejectsBuilder,
    /// Events in traceEvents.
    pub events: u64,
    /// CPU ops seen.
    pub ops: u64,
}

/// Reads a trace (uncompressed JSON) from `input` into a `trace_memory` batch.
pub fn read(input: impl BufRead, source: &str, def: &TableDef) -> R<Read> {
    let mut s = Scanner {
        input,
        offset: 0,
        line: 1,
    };
    let mut st = State::default();
    let mut rejects = RejectsBuilder::new(source);
    let mut base: i64 = 0;
    let mut found = false;
    match s.ws()? {
        Some(b'[') => {
            // The JSON Array Format of Chrome traces: the events alone.
            found = true;
            events(&mut s, &mut st, &mut rejects)?;
        }
        Some(b'{') => {
            s.bump();
            let mut first = true;
            let mut key = Vec::new();
            let mut text = Vec::new();
            while s.more(&mut first, b'}')? {
                key.clear();
                s.string(Some(&mut key))?;
                s.expect(b':')?;
                match key.as_slice() {
                    b"traceEvents" if s.ws()? == Some(b'[') => {
                        found = true;
                        events(&mut s, &mut st, &mut rejects)?;
                    }
                    b"baseTimeNanoseconds" => {
                        s.scalar(&mut text)?;
                        base = int(&text).unwrap_or(0);
                    }
                    _ => s.skip()?,
                }
            }
        }
        _ => return s.error("not a JSON object: a Chrome trace is `{\"traceEvents\": [...]}`"),
    }
    if !found {
        return s.error("no traceEvents array: not a torch.profiler (Kineto) Chrome trace");
    }
    let ops = st.ops.len() as u64;
    let events = st.events;
    let batch = st.finish(base, source, def);
    Ok(Read {
        batch: batch.map_err(|e| ReadError::Io(io::Error::other(e.to_string())))?,
        rejects,
        events,
        ops,
    })
}

#[derive(Default)]
struct State {
    events: u64,
    rows: Vec<MemRow>,
    ops: Vec<Op>,
    threads: HashMap<(Vec<u8>, Vec<u8>), u32>,
    names: Vec<String>,
    name_ids: HashMap<Vec<u8>, u32>,
}

impl State {
    fn thread(&mut self, e: &Event) -> u32 {
        let n = self.threads.len() as u32;
        *self
            .threads
            .entry((e.pid.clone(), e.tid.clone()))
            .or_insert(n)
    }

    fn name(&mut self, name: &[u8]) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(String::from_utf8_lossy(name).into_owned());
        self.name_ids.insert(name.to_vec(), id);
        id
    }

    /// Attributes ops, rebuilds missing totals and builds the batch.
    fn finish(mut self, base: i64, source: &str, def: &TableDef) -> Result<RecordBatch, String> {
        // Time order (file order for ties) is the order of every pass below.
        self.rows.sort_by_key(|r| (r.ts, r.event));
        self.attribute();
        // Totals the 2021 layout does not write: the running sum of Bytes per device.
        let mut sums: HashMap<(i64, i64), i64> = HashMap::new();
        let mut rebuilt = Vec::with_capacity(self.rows.len());
        for r in &mut self.rows {
            let sum = sums.entry((r.device_type, r.device_index)).or_insert(0);
            *sum += r.bytes;
            rebuilt.push(r.total_allocated.is_none());
            if r.total_allocated.is_none() {
                r.total_allocated = Some(*sum);
            }
        }
        let n = self.rows.len();
        let mut source_b = StringBuilder::new();
        let mut event = UInt64Builder::with_capacity(n);
        let mut ts = Int64Builder::with_capacity(n);
        let mut dtype = StringBuilder::new();
        let mut dindex = Int64Builder::with_capacity(n);
        let mut device = StringBuilder::new();
        let mut addr = UInt64Builder::with_capacity(n);
        let mut bytes = Int64Builder::with_capacity(n);
        let mut alloc = Int64Builder::with_capacity(n);
        let mut reserved = Int64Builder::with_capacity(n);
        let mut rebuilt_b = BooleanBuilder::with_capacity(n);
        let mut pid = Int64Builder::with_capacity(n);
        let mut tid = Int64Builder::with_capacity(n);
        let mut op = StringBuilder::new();
        let mut op_ts = Int64Builder::with_capacity(n);
        let at = |t: i64| {
            base.checked_add(t)
                .ok_or_else(|| format!("ts {t} ns + baseTimeNanoseconds {base} overflows"))
        };
        for (r, rebuilt) in self.rows.iter().zip(rebuilt) {
            source_b.append_value(source);
            event.append_value(r.event);
            ts.append_value(at(r.ts)?);
            let type_name = device_type_name(r.device_type);
            device.append_value(if r.device_index < 0 {
                type_name.clone()
            } else {
                format!("{type_name}:{}", r.device_index)
            });
            dtype.append_value(type_name);
            dindex.append_value(r.device_index);
            addr.append_option(r.addr);
            bytes.append_value(r.bytes);
            alloc.append_option(r.total_allocated);
            reserved.append_option(r.total_reserved);
            rebuilt_b.append_value(rebuilt);
            pid.append_option(r.pid);
            tid.append_option(r.tid);
            op.append_option(r.op.map(|i| &self.names[i as usize]));
            op_ts.append_option(r.op_ts.map(at).transpose()?);
        }
        let cols: Vec<(&str, ArrayRef)> = vec![
            ("source", Arc::new(source_b.finish())),
            ("event", Arc::new(event.finish())),
            ("ts", Arc::new(ts.finish())),
            ("device_type", Arc::new(dtype.finish())),
            ("device_index", Arc::new(dindex.finish())),
            ("device", Arc::new(device.finish())),
            ("addr", Arc::new(addr.finish())),
            ("bytes", Arc::new(bytes.finish())),
            ("total_allocated", Arc::new(alloc.finish())),
            ("total_reserved", Arc::new(reserved.finish())),
            ("totals_rebuilt", Arc::new(rebuilt_b.finish())),
            ("pid", Arc::new(pid.finish())),
            ("tid", Arc::new(tid.finish())),
            ("op", Arc::new(op.finish())),
            ("op_ts", Arc::new(op_ts.finish())),
        ];
        def.batch(cols).map_err(|e| e.to_string())
    }

    /// The innermost op holding each event on its thread: of the ops with start ≤ ts ≤ end,
    /// the latest start, then the shortest, then the later in the file. One sweep per thread
    /// over ops sorted by (start, longest first) with a stack (rows are in time order).
    fn attribute(&mut self) {
        if self.ops.is_empty() {
            return;
        }
        // Stable: equal ops keep file order, so the later one is pushed last.
        self.ops
            .sort_by_key(|o| (o.thread, o.start, std::cmp::Reverse(o.end)));
        let mut by_thread: HashMap<u32, (usize, usize)> = HashMap::new();
        let mut i = 0;
        while i < self.ops.len() {
            let t = self.ops[i].thread;
            let j = i + self.ops[i..].iter().take_while(|o| o.thread == t).count();
            by_thread.insert(t, (i, j));
            i = j;
        }
        let mut state: HashMap<u32, (usize, Vec<usize>)> = HashMap::new();
        for r in &mut self.rows {
            let Some(&(lo, hi)) = by_thread.get(&r.thread) else {
                continue;
            };
            let (next, stack) = state.entry(r.thread).or_insert((lo, Vec::new()));
            while *next < hi && self.ops[*next].start <= r.ts {
                stack.push(*next);
                *next += 1;
            }
            while stack.last().is_some_and(|&k| self.ops[k].end < r.ts) {
                stack.pop();
            }
            if let Some(&k) = stack.last() {
                r.op = Some(self.ops[k].name);
                r.op_ts = Some(self.ops[k].start);
            }
        }
    }
}

/// The traceEvents array (the `[` next), one event at a time.
fn events<B: BufRead>(s: &mut Scanner<B>, st: &mut State, rejects: &mut RejectsBuilder) -> R<()> {
    s.expect(b'[')?;
    let mut first = true;
    let mut e = Event::default();
    let mut key = Vec::new();
    while s.more(&mut first, b']')? {
        let index = st.events;
        st.events += 1;
        if s.ws()? != Some(b'{') {
            s.skip()?;
            continue;
        }
        let (offset, line) = (s.offset, s.line);
        e.clear();
        s.bump();
        let mut first_key = true;
        while s.more(&mut first_key, b'}')? {
            key.clear();
            s.string(Some(&mut key))?;
            s.expect(b':')?;
            let slot = match key.as_slice() {
                b"ph" => &mut e.ph,
                b"cat" => &mut e.cat,
                b"name" => &mut e.name,
                b"pid" => &mut e.pid,
                b"tid" => &mut e.tid,
                b"ts" => &mut e.ts,
                b"dur" => &mut e.dur,
                b"args" if s.ws()? == Some(b'{') => {
                    s.bump();
                    let mut first_arg = true;
                    while s.more(&mut first_arg, b'}')? {
                        key.clear();
                        s.string(Some(&mut key))?;
                        s.expect(b':')?;
                        match ARG_KEYS.iter().position(|k| *k == key.as_slice()) {
                            Some(i) => {
                                let mut v = e.args[i].take().unwrap_or_default();
                                s.scalar(&mut v)?;
                                e.args[i] = Some(v);
                            }
                            None => s.skip()?,
                        }
                    }
                    continue;
                }
                _ => {
                    s.skip()?;
                    continue;
                }
            };
            s.scalar(slot)?;
        }
        if e.ph == b"X" && e.cat == b"cpu_op" {
            if let (Some(start), Some(dur)) = (us_to_ns(&e.ts), us_to_ns(&e.dur)) {
                let thread = st.thread(&e);
                let name = st.name(&e.name);
                st.ops.push(Op {
                    thread,
                    start,
                    end: start.saturating_add(dur),
                    name,
                });
            }
        } else if e.name == b"[memory]" && matches!(e.ph.as_slice(), b"i" | b"I") {
            match memory_row(&e, index) {
                Ok(mut row) => {
                    row.thread = st.thread(&e);
                    st.rows.push(row);
                }
                Err(reason) => rejects.push(Reject {
                    line,
                    byte_offset: offset,
                    reason,
                    raw: Vec::new(),
                }),
            }
        }
    }
    Ok(())
}

/// A `[memory]` event as a row, or why it cannot be one.
fn memory_row(e: &Event, event: u64) -> Result<MemRow, String> {
    let arg = |i: usize| e.args[i].as_deref().filter(|v| !v.is_empty());
    let need = |i: usize| {
        let text = arg(i).ok_or_else(|| format!("[memory] event without {}", key_name(i)))?;
        int(text).ok_or_else(|| {
            format!(
                "[memory] event: {} `{}` is not an integer",
                key_name(i),
                String::from_utf8_lossy(text)
            )
        })
    };
    let ts = us_to_ns(&e.ts).ok_or_else(|| {
        format!(
            "[memory] event: ts `{}` is not a number of µs",
            String::from_utf8_lossy(&e.ts)
        )
    })?;
    Ok(MemRow {
        event,
        ts,
        device_type: need(4)?,
        device_index: need(5)?,
        addr: arg(0)
            .and_then(|t| decimal(t, 0))
            .and_then(|v| u64::try_from(v).ok()),
        bytes: need(1)?,
        total_allocated: arg(2).and_then(int),
        total_reserved: arg(3).and_then(int),
        thread: 0,
        pid: int(&e.pid),
        tid: int(&e.tid),
        op: None,
        op_ts: None,
    })
}

fn key_name(i: usize) -> String {
    String::from_utf8_lossy(ARG_KEYS[i]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_convert_exactly() {
        assert_eq!(
            decimal(b"5590677568980.403", 3),
            Some(5_590_677_568_980_403)
        );
        assert_eq!(decimal(b"12", 3), Some(12_000));
        assert_eq!(decimal(b"-1.5e2", 0), Some(-150));
        assert_eq!(decimal(b"0.0004", 3), Some(0));
        assert_eq!(decimal(b"0.0005", 3), Some(1));
        assert_eq!(decimal(b"1e400", 0), None);
        assert_eq!(decimal(b"abc", 0), None);
        assert_eq!(decimal(b"", 0), None);
    }

    #[test]
    fn streams_events_attributes_ops_and_rebuilds_totals() {
        let text = br#"{"schemaVersion": 1, "traceEvents": [
          {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 2, "ts": 10.000, "dur": 100.000, "args": {"x": [1, {"y": "]"}]}},
          {"ph": "X", "cat": "cpu_op", "name": "in\"ner", "pid": 1, "tid": 2, "ts": 20.5, "dur": 10},
          {"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 25.001, "args": {"Addr": 4096, "Bytes": 512, "Device Type": 1, "Device Id": 0}},
          {"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 50, "args": {"Addr": 4096, "Bytes": -512, "Device Type": 1, "Device Id": 0}},
          {"ph": "i", "name": "[memory]", "pid": 1, "tid": 3, "ts": 50, "args": {"Bytes": 8, "Device Type": 20, "Device Id": 1, "Total Allocated": 8, "Total Reserved": 16}},
          {"ph": "i", "name": "[memory]", "pid": 1, "tid": 3, "ts": 51, "args": {"Device Type": 0, "Device Id": -1}}
        ], "baseTimeNanoseconds": 1000000000}"#;
        let def = crate::schema::trace_memory();
        let got = read(&text[..], "t.json", &def).unwrap();
        assert_eq!(got.events, 6);
        assert_eq!(got.ops, 2);
        assert_eq!(got.rejects.len(), 1);
        use datafusion::arrow::array::AsArray;
        use datafusion::arrow::datatypes::Int64Type;
        let b = &got.batch;
        let i64s = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let strs = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        assert_eq!(b.num_rows(), 3);
        assert_eq!(i64s("ts").value(0), 1_000_025_001);
        assert_eq!(strs("op").value(0), "in\"ner");
        assert_eq!(strs("op").value(1), "outer");
        assert_eq!(i64s("op_ts").value(1), 1_000_010_000);
        assert_eq!(i64s("total_allocated").value(0), 512);
        assert_eq!(i64s("total_allocated").value(1), 0);
        assert_eq!(strs("device").value(2), "npu:1");
        assert_eq!(i64s("total_reserved").value(2), 16);
    }

    /// A value nested a million levels deep is an error naming the line, not a stack overflow.
    #[test]
    fn deep_nesting_is_an_error() {
        let mut text = b"{\"traceEvents\": [{\"ph\": \"X\", \"args\": ".to_vec();
        text.extend(std::iter::repeat_n(b'[', 1_000_000));
        let def = crate::schema::trace_memory();
        match read(&text[..], "deep.json", &def) {
            Err(ReadError::Syntax { what, line, .. }) => {
                assert!(what.contains("nested deeper than 512"), "{what}");
                assert_eq!(line, 1);
            }
            Err(e) => panic!("a deep trace is a syntax error, not {e:?}"),
            Ok(_) => panic!("a truncated, deep trace cannot be read"),
        }
    }

    #[test]
    fn a_json_without_events_is_refused() {
        let def = crate::schema::trace_memory();
        let err = read(&br#"{"loss": [1.0]}"#[..], "m.json", &def)
            .err()
            .unwrap();
        assert!(
            matches!(err, ReadError::Syntax { ref what, .. } if what.contains("no traceEvents"))
        );
    }
}
