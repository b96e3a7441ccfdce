//! Splits a dump CSV into records the way msMemScope writes them (docs/formats/memscope.md §2.9):
//! fields are quoted only when they may hold commas or newlines (Attr, MSTX names, call stacks),
//! embedded quotes are never escaped by the tool (but `""` from Python's csv writer is accepted),
//! line ends are LF or CRLF, and the last line may be cut short by a killed writer.
//!
//! A quoted field may span lines (call stacks). An unclosed quote would otherwise swallow the rest
//! of the file, so a physical line that opens like a new event row (`<digits>,<EVENT>,`) while a
//! quote is open ends the broken record there.

use std::io::BufRead;

/// The longest record memq keeps (issue 13, findings 1 and 10): a longer one is a reject that
/// keeps its first [`KEPT_OF_OVERSIZED`] bytes, and the reader skips to the next line end in
/// bounded memory. A 10 MiB call stack is far below it.
pub const MAX_RECORD_BYTES: usize = 256 << 20;

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
            limit: MAX_RECORD_BYTES,
        }
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
            return Ok(Some(Line {
                bytes,
                len,
                cut: false,
            }));
        }
        let mut bytes = Vec::new();
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
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
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
        if len == 0 {
            return Ok(None);
        }
        Ok(Some(Line { bytes, len, cut }))
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
            state.scan(&first.bytes);
        }
        rec.bytes.extend_from_slice(&first.bytes);
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
            if !next.cut && looks_like_row_start(&next.bytes) {
                self.pending = Some(next.bytes);
                rec.unclosed_quote = true;
                break;
            }
            self.line += 1;
            self.offset += next.len;
            total += next.len;
            if !next.cut {
                state.scan(&next.bytes);
            }
            cut |= next.cut;
            if cut {
                // Keep only the start of an oversized record (and whether it ended).
                let ended = next.bytes.ends_with(b"\n");
                rec.bytes.truncate(KEPT_OF_OVERSIZED);
                let room = KEPT_OF_OVERSIZED.saturating_sub(rec.bytes.len());
                rec.bytes
                    .extend_from_slice(&next.bytes[..next.bytes.len().min(room)]);
                if ended && !rec.bytes.ends_with(b"\n") {
                    rec.bytes.push(b'\n');
                }
            } else {
                rec.bytes.extend_from_slice(&next.bytes);
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

/// One physical line as read: the bytes kept (with the line end, if any), the line's full
/// length, and whether it was cut at the reader's limit.
struct Line {
    bytes: Vec<u8>,
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
    fn scan(&mut self, line: &[u8]) {
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
                        Some(b'"') => i += 1, // escaped quote
                        Some(b',') | Some(b'\n') | Some(b'\r') | None => self.in_quotes = false,
                        _ => {} // an unescaped quote inside the value (the tool never escapes)
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

fn looks_like_row_start(line: &[u8]) -> bool {
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || line.get(digits) != Some(&b',') {
        return false;
    }
    let rest = &line[digits + 1..];
    EVENTS
        .iter()
        .any(|e| rest.starts_with(e.as_bytes()) && rest.get(e.len()) == Some(&b','))
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
    fn unescaped_quote_inside_a_value() {
        let f = split_fields("1,\"{owner:my\"label}\",3");
        assert_eq!(f, vec!["1", "{owner:my\"label}", "3"]);
        assert_eq!(split_fields(",,"), vec!["", "", ""]);
    }
}
