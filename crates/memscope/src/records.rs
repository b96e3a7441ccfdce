//! Splits a dump CSV into records the way msMemScope writes them (docs/formats/memscope.md §2.9):
//! fields are quoted only when they may hold commas or newlines (Attr, MSTX names, call stacks),
//! embedded quotes are never escaped by the tool (but `""` from Python's csv writer is accepted),
//! line ends are LF or CRLF, and the last line may be cut short by a killed writer.
//!
//! A quoted field may span lines (call stacks). An unclosed quote would otherwise swallow the rest
//! of the file, so a physical line that opens like a new event row (`<digits>,<EVENT>,`) while a
//! quote is open ends the broken record there.

use std::io::BufRead;

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
}

pub struct RecordReader<R> {
    input: R,
    line: u64,
    offset: u64,
    /// A physical line read ahead while looking for the end of an unclosed quote.
    pending: Option<Vec<u8>>,
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
        }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn next_line(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        if let Some(l) = self.pending.take() {
            return Ok(Some(l));
        }
        let mut buf = Vec::new();
        let n = self.input.read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(buf))
    }

    /// The next record, or `None` at the end of the input.
    pub fn next_record(&mut self, rec: &mut RawRecord) -> std::io::Result<bool> {
        let Some(first) = self.next_line()? else {
            return Ok(false);
        };
        rec.line = self.line + 1;
        rec.offset = self.offset;
        rec.bytes.clear();
        rec.unclosed_quote = false;
        self.line += 1;
        self.offset += first.len() as u64;
        rec.bytes.extend_from_slice(&first);
        let mut state = QuoteState::default();
        state.scan(&first);
        while state.in_quotes {
            let Some(next) = self.next_line()? else {
                rec.unclosed_quote = true;
                break;
            };
            if looks_like_row_start(&next) {
                self.pending = Some(next);
                rec.unclosed_quote = true;
                break;
            }
            self.line += 1;
            self.offset += next.len() as u64;
            state.scan(&next);
            rec.bytes.extend_from_slice(&next);
        }
        rec.terminated = rec.bytes.last() == Some(&b'\n');
        if rec.terminated {
            rec.bytes.pop();
            if rec.bytes.last() == Some(&b'\r') {
                rec.bytes.pop();
            }
        }
        Ok(true)
    }
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
    fn unescaped_quote_inside_a_value() {
        let f = split_fields("1,\"{owner:my\"label}\",3");
        assert_eq!(f, vec!["1", "{owner:my\"label}", "3"]);
        assert_eq!(split_fields(",,"), vec!["", "", ""]);
    }
}
