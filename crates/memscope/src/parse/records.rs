//! Splits a dump CSV into records the way msMemScope writes them (docs/formats/memscope.md §2.9):
//! fields are quoted only when they may hold commas or newlines (Attr, MSTX names, call stacks),
//! embedded quotes are never escaped by the tool (but `""` from Python's csv writer is accepted),
//! line ends are LF or CRLF, and the last line may be cut short by a killed writer.
//!
//! A quoted field may span lines (call stacks). An unclosed quote would otherwise swallow the rest
//! of the file, so a physical line that opens like a new event row (`<digits>,<EVENT>,`) while a
//! quote is open ends the broken record there.

use std::io::BufRead;

/// The longest record memq keeps, so that a huge or endless line cannot exhaust memory or
/// Arrow's 2 GiB text offsets: a longer one is a reject that keeps its first
/// [`KEPT_OF_OVERSIZED`] bytes, and the reader skips to the next line end in bounded memory.
/// A 10 MiB call stack is far below it.
pub const MAX_RECORD_BYTES: usize = 256 << 20;

/// The longest record memq keeps in this process: [`MAX_RECORD_BYTES`], or an eighth of the
/// memory limit when that is less (a record is held as bytes, as parsed fields and in a batch
/// at once; under a capped address space a bigger one would fail an allocation).
pub fn max_record_bytes() -> usize {
    MAX_RECORD_BYTES
        .min(memq_core::memory_limit() / 8)
        .max(1 << 20)
}

/// Why a record of `len` bytes is not kept (a reject's reason); `kept` says what of it the
/// reject keeps.
pub fn oversized_reason(len: u64, kept: &str) -> String {
    format!(
        "record of {len} bytes is longer than the {} MiB one record may hold (256 MiB, or an eighth of the memory limit when less; {kept} kept here)",
        max_record_bytes() >> 20,
    )
}

/// The bytes of an oversized record kept for `rejects`.
pub const KEPT_OF_OVERSIZED: usize = 64 << 10;

/// One record: its exact bytes (without the final line end) and where it starts.
#[derive(Debug, Default, Clone)]
pub struct RawRecord {
    /// 1-based physical line of the record's first byte.
    pub line: u64,
    /// Byte offset of the record's first byte.
    pub offset: u64,
    pub bytes: Vec<u8>,
    /// The record ended with a line end (false only for the last record of a file).
    pub terminated: bool,
    /// A quote was still open when the record was cut (next row or end of file).
    pub unclosed_quote: bool,
    /// The record was longer than the reader's limit: its full length in bytes (`bytes` holds
    /// only its start).
    pub oversized: Option<u64>,
}

pub struct RecordReader<R> {
    input: R,
    line: u64,
    offset: u64,
    /// A physical line read ahead while looking for the end of an unclosed quote.
    pending: Option<Vec<u8>>,
    /// Longest record kept ([`MAX_RECORD_BYTES`] unless set).
    limit: usize,
    /// The bytes of the line last read by `next_line` (reused: no allocation per line).
    scratch: Vec<u8>,
}

const EVENTS: &[&str] = &[
    "MALLOC",
    "FREE",
    "ACCESS",
    "OP_LAUNCH",
    "KERNEL_LAUNCH",
    "SYSTEM",
    "MSTX",
    "SNAPSHOT",
    "OOM_DETAIL",
];

impl<R: BufRead> RecordReader<R> {
    pub fn new(input: R) -> Self {
        RecordReader {
            input,
            line: 0,
            offset: 0,
            pending: None,
            limit: max_record_bytes(),
            scratch: Vec::new(),
        }
    }

    /// A reader whose first byte is at `offset` on (1-based) line `line + 1` of a larger file.
    pub fn with_position(input: R, line: u64, offset: u64) -> Self {
        let mut r = Self::new(input);
        r.line = line;
        r.offset = offset;
        r
    }

    /// Physical lines consumed so far.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The input, and the line read ahead (not yet consumed) if any.
    pub fn into_parts(self) -> (R, Option<Vec<u8>>) {
        (self.input, self.pending)
    }

    /// Sets the longest record kept (e.g. a small one for the header line).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next physical line with its line end. At most `room` bytes are kept; the rest of
    /// a longer line is read in bounded memory and dropped, its quotes scanned into `state`
    /// (the kept part is scanned first; `Line::scanned` says so). Without a cut the caller
    /// scans the line.
    fn next_line(&mut self, room: usize, state: &mut QuoteState) -> std::io::Result<Option<Line>> {
        if let Some(bytes) = self.pending.take() {
            let len = bytes.len() as u64;
            self.scratch = bytes;
            return Ok(Some(Line { len, cut: false }));
        }
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        let mut len = 0u64;
        let mut cut = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            let (take, done) = match find_byte(b'\n', chunk) {
                Some(p) => (p + 1, true),
                None => (chunk.len(), false),
            };
            if cut {
                state.scan(&chunk[..take]);
            } else if bytes.len() + take <= room {
                bytes.extend_from_slice(&chunk[..take]);
            } else {
                let keep = room.saturating_sub(bytes.len());
                bytes.extend_from_slice(&chunk[..keep]);
                state.scan(&bytes);
                state.scan(&chunk[keep..take]);
                cut = true;
            }
            len += take as u64;
            self.input.consume(take);
            if done {
                if cut {
                    bytes.push(b'\n'); // the line did end
                }
                break;
            }
        }
        self.scratch = bytes;
        if len == 0 {
            return Ok(None);
        }
        Ok(Some(Line { len, cut }))
    }

    /// The next record, or `None` at the end of the input.
    pub fn next_record(&mut self, rec: &mut RawRecord) -> std::io::Result<bool> {
        let mut state = QuoteState::default();
        let Some(first) = self.next_line(self.limit, &mut state)? else {
            return Ok(false);
        };
        rec.line = self.line + 1;
        rec.offset = self.offset;
        rec.bytes.clear();
        rec.unclosed_quote = false;
        rec.oversized = None;
        self.line += 1;
        self.offset += first.len;
        let mut total = first.len;
        let mut cut = first.cut;
        if !first.cut {
            state.scan(&self.scratch);
        }
        rec.bytes.extend_from_slice(&self.scratch);
        while state.in_quotes {
            let room = if cut {
                0
            } else {
                self.limit.saturating_sub(rec.bytes.len())
            };
            let Some(next) = self.next_line(room, &mut state)? else {
                rec.unclosed_quote = true;
                break;
            };
            if !next.cut && looks_like_row_start(&self.scratch) {
                self.pending = Some(std::mem::take(&mut self.scratch));
                rec.unclosed_quote = true;
                break;
            }
            self.line += 1;
            self.offset += next.len;
            total += next.len;
            if !next.cut {
                state.scan(&self.scratch);
            }
            cut |= next.cut;
            if cut {
                // Keep only the start of an oversized record (and whether it ended).
                let ended = self.scratch.ends_with(b"\n");
                rec.bytes.truncate(KEPT_OF_OVERSIZED);
                let room = KEPT_OF_OVERSIZED.saturating_sub(rec.bytes.len());
                rec.bytes
                    .extend_from_slice(&self.scratch[..self.scratch.len().min(room)]);
                if ended && !rec.bytes.ends_with(b"\n") {
                    rec.bytes.push(b'\n');
                }
            } else {
                rec.bytes.extend_from_slice(&self.scratch);
            }
        }
        rec.terminated = rec.bytes.last() == Some(&b'\n');
        if rec.terminated {
            rec.bytes.pop();
            if rec.bytes.last() == Some(&b'\r') {
                rec.bytes.pop();
            }
        }
        if cut {
            rec.oversized = Some(total);
            rec.bytes.truncate(KEPT_OF_OVERSIZED);
        }
        Ok(true)
    }
}

/// One physical line as read (its kept bytes, with the line end if any, are in the reader's
/// `scratch`): the line's full length, and whether it was cut at the reader's limit.
struct Line {
    len: u64,
    cut: bool,
}

/// Tracks whether a quote is open across the lines of one record.
#[derive(Default)]
struct QuoteState {
    in_quotes: bool,
    /// Previous byte of the record (for field starts).
    at_field_start: bool,
    started: bool,
}

impl QuoteState {
    /// Follows the quotes of `line` (jumping from quote to quote: only a quote can change the
    /// state, and only the byte before it says whether it opens a field).
    fn scan(&mut self, line: &[u8]) {
        if !self.started {
            self.started = true;
            self.at_field_start = true;
        }
        let mut i = 0;
        while i < line.len() {
            let Some(p) = find_byte(b'"', &line[i..]) else {
                // No quote left: inside quotes nothing changes; outside, the last byte decides.
                self.at_field_start = !self.in_quotes && line[line.len() - 1] == b',';
                return;
            };
            let q = i + p;
            if self.in_quotes {
                match line.get(q + 1) {
                    Some(b'"') => i = q + 2, // escaped quote
                    Some(b',') | Some(b'\n') | Some(b'\r') | None => {
                        self.in_quotes = false;
                        i = q + 1;
                    }
                    _ => i = q + 1, // an unescaped quote inside the value (the tool never escapes)
                }
                self.at_field_start = false;
            } else {
                let at_start = if q == i {
                    self.at_field_start
                } else {
                    line[q - 1] == b','
                };
                self.in_quotes = at_start;
                self.at_field_start = false;
                i = q + 1;
            }
        }
    }

    /// The byte-by-byte form of [`Self::scan`] (the reference it is tested against).
    #[cfg(test)]
    fn scan_bytes(&mut self, line: &[u8]) {
        if !self.started {
            self.started = true;
            self.at_field_start = true;
        }
        let mut i = 0;
        while i < line.len() {
            let b = line[i];
            if self.in_quotes {
                if b == b'"' {
                    match line.get(i + 1) {
                        Some(b'"') => i += 1,
                        Some(b',') | Some(b'\n') | Some(b'\r') | None => self.in_quotes = false,
                        _ => {}
                    }
                }
                self.at_field_start = false;
            } else if b == b'"' && self.at_field_start {
                self.in_quotes = true;
                self.at_field_start = false;
            } else {
                self.at_field_start = b == b',';
            }
            i += 1;
        }
    }
}

/// The first position of `needle` in `hay` (eight bytes at a time).
pub fn find_byte(needle: u8, hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO * needle as u64;
    let mut i = 0;
    while i + 8 <= hay.len() {
        let word = u64::from_le_bytes(hay[i..i + 8].try_into().expect("8 bytes")) ^ pattern;
        let found = word.wrapping_sub(LO) & !word & HI;
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay[i..].iter().position(|&b| b == needle).map(|p| i + p)
}

/// Whether a physical line opens like a new event row (`<digits>,<EVENT>,`): such a line always
/// starts a record (it ends a record whose quote is still open), unless the record before it
/// is being cut for its size.
pub fn looks_like_row_start(line: &[u8]) -> bool {
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || line.get(digits) != Some(&b',') {
        return false;
    }
    let rest = &line[digits + 1..];
    EVENTS
        .iter()
        .any(|e| rest.starts_with(e.as_bytes()) && rest.get(e.len()) == Some(&b','))
}

/// [`split_fields`] without copying: the fields borrow from `record` (only a field with `""`
/// inside is copied, to unescape it).
pub fn split_fields_cow<'a>(record: &'a str, fields: &mut Vec<std::borrow::Cow<'a, str>>) {
    use std::borrow::Cow;
    let bytes = record.as_bytes();
    fields.clear();
    let mut i = 0;
    loop {
        if bytes.get(i) == Some(&b'"') {
            i += 1;
            let start = i;
            let mut doubled = false;
            let end;
            loop {
                match find_byte(b'"', &bytes[i..]) {
                    None => {
                        end = bytes.len();
                        i = bytes.len();
                        break;
                    }
                    Some(p) => {
                        let q = i + p;
                        match bytes.get(q + 1) {
                            Some(b'"') => {
                                doubled = true;
                                i = q + 2;
                            }
                            Some(b',') | None => {
                                end = q;
                                i = q + 1;
                                break;
                            }
                            _ => i = q + 1,
                        }
                    }
                }
            }
            let text = &record[start..end];
            fields.push(if doubled {
                Cow::Owned(text.replace("\"\"", "\""))
            } else {
                Cow::Borrowed(text)
            });
        } else {
            let end = find_byte(b',', &bytes[i..]).map_or(bytes.len(), |p| i + p);
            fields.push(Cow::Borrowed(&record[i..end]));
            i = end;
        }
        if i >= bytes.len() {
            break;
        }
        // bytes[i] is the comma after the field
        i += 1;
        if i == bytes.len() {
            fields.push(Cow::Borrowed(""));
            break;
        }
    }
}

/// Splits one record into unquoted fields (lenient: a quote closes only before a comma or the
/// end of the record; `""` inside a quoted field is a literal quote).
pub fn split_fields(record: &str) -> Vec<String> {
    let bytes = record.as_bytes();
    let mut fields = Vec::new();
    let mut i = 0;
    loop {
        let mut field = String::new();
        if bytes.get(i) == Some(&b'"') {
            i += 1;
            let start = i;
            let mut seg_start = start;
            loop {
                match bytes[i..].iter().position(|&b| b == b'"') {
                    None => {
                        field.push_str(&record[seg_start..]);
                        i = bytes.len();
                        break;
                    }
                    Some(p) => {
                        let q = i + p;
                        match bytes.get(q + 1) {
                            Some(b'"') => {
                                field.push_str(&record[seg_start..=q]);
                                i = q + 2;
                                seg_start = i;
                            }
                            Some(b',') | None => {
                                field.push_str(&record[seg_start..q]);
                                i = q + 1;
                                break;
                            }
                            _ => i = q + 1,
                        }
                    }
                }
            }
        } else {
            let end = bytes[i..]
                .iter()
                .position(|&b| b == b',')
                .map_or(bytes.len(), |p| i + p);
            field.push_str(&record[i..end]);
            i = end;
        }
        fields.push(field);
        if i >= bytes.len() {
            break;
        }
        // bytes[i] is the comma after the field
        i += 1;
        if i == bytes.len() {
            fields.push(String::new());
            break;
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str) -> Vec<RawRecord> {
        let mut r = RecordReader::new(text.as_bytes());
        let mut out = Vec::new();
        let mut rec = RawRecord::default();
        while r.next_record(&mut rec).unwrap() {
            out.push(rec.clone());
        }
        out
    }

    #[test]
    fn multi_line_stacks_make_one_record() {
        let text = "1,MALLOC,PTA,N/A,5,1,1,0,0x1,\"{size:1}\",\"a.py(1): f\nb.py(2): g\n\",\n2,FREE,PTA,N/A,6,1,1,0,0x1,,,\n";
        let recs = records(text);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].line, 1);
        assert_eq!(recs[1].line, 4);
        let f = split_fields(std::str::from_utf8(&recs[0].bytes).unwrap());
        assert_eq!(f.len(), 12);
        assert_eq!(f[9], "{size:1}");
        assert_eq!(f[10], "a.py(1): f\nb.py(2): g\n");
    }

    #[test]
    fn unclosed_quote_stops_at_the_next_row() {
        let text = "1,MSTX,Mark,\"oops,5,1,1,0,N/A,,,\n2,FREE,PTA,N/A,6,1,1,0,0x1,,,\n";
        let recs = records(text);
        assert_eq!(recs.len(), 2);
        assert!(recs[0].unclosed_quote);
        assert!(!recs[1].unclosed_quote);
    }

    #[test]
    fn crlf_and_doubled_quotes() {
        let recs = records("a,\"x \"\"y\"\"\",b\r\nc,d\r\n");
        assert_eq!(recs.len(), 2);
        let f = split_fields(std::str::from_utf8(&recs[0].bytes).unwrap());
        assert_eq!(f, vec!["a", "x \"y\"", "b"]);
        assert!(!records("x,y")[0].terminated);
    }

    #[test]
    fn oversized_records_are_cut_and_the_reader_goes_on() {
        let long = "x".repeat(5000);
        let text = format!("1,MSTX,{long},3\n2,\"{long}\n{long}\",4\n3,ok\n4,{long}");
        let mut r = RecordReader::new(std::io::BufReader::with_capacity(64, text.as_bytes()));
        r.set_limit(1000);
        let mut out = Vec::new();
        let mut rec = RawRecord::default();
        while r.next_record(&mut rec).unwrap() {
            out.push(rec.clone());
        }
        assert_eq!(out.len(), 4);
        assert_eq!(out[0].oversized, Some(5000 + 10));
        assert!(out[0].terminated);
        assert!(out[0].bytes.len() <= KEPT_OF_OVERSIZED);
        assert_eq!(out[1].line, 2);
        assert_eq!(out[1].oversized, Some(2 * 5000 + 8));
        assert!(!out[1].unclosed_quote);
        assert_eq!(
            (out[2].line, out[2].bytes.as_slice(), out[2].oversized),
            (4, &b"3,ok"[..], None)
        );
        assert_eq!(out[3].oversized, Some(5002));
        assert!(!out[3].terminated);
        assert_eq!(r.offset(), text.len() as u64);
    }

    #[test]
    fn borrowed_split_matches_the_owned_one() {
        let mut v = Vec::new();
        for rec in [
            "1,\"{owner:my\"label}\",3",
            ",,",
            "",
            "a,\"x \"\"y\"\"\",b",
            "a,\"\"\"\",b",
            "\"unclosed,x\"\"y",
            "a,\"q\"",
            "1,2,",
            "\"\",\"\"",
            "x\"y,\"z\"w\",v",
        ] {
            split_fields_cow(rec, &mut v);
            let cow: Vec<String> = v.iter().map(|c| c.to_string()).collect();
            assert_eq!(cow, split_fields(rec), "{rec}");
        }
        assert_eq!(find_byte(b'x', b"0123456789abcdefx"), Some(16));
        assert_eq!(find_byte(b'x', b"x"), Some(0));
        assert_eq!(find_byte(b'x', b"0123456789"), None);
    }

    #[test]
    fn quote_scan_jumps_like_it_steps() {
        let alphabet = [b'"', b',', b'a', b'\n', b'\r'];
        let mut seed = 12345u64;
        for _ in 0..20000 {
            let mut pieces = Vec::new();
            for _ in 0..3 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let len = (seed >> 60) as usize;
                let piece: Vec<u8> = (0..len)
                    .map(|k| alphabet[((seed >> (k * 3 % 50)) % 5) as usize])
                    .collect();
                pieces.push(piece);
            }
            let (mut a, mut b) = (QuoteState::default(), QuoteState::default());
            for p in &pieces {
                a.scan(p);
                b.scan_bytes(p);
                assert_eq!(
                    (a.in_quotes, a.at_field_start, a.started),
                    (b.in_quotes, b.at_field_start, b.started),
                    "{pieces:?}"
                );
            }
        }
    }

    #[test]
    fn unescaped_quote_inside_a_value() {
        let f = split_fields("1,\"{owner:my\"label}\",3");
        assert_eq!(f, vec!["1", "{owner:my\"label}", "3"]);
        assert_eq!(split_fields(",,"), vec!["", "", ""]);
    }
}
