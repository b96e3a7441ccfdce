//! Structured generators (proptest): inputs built to be *almost* valid, where the mutation
//! driver's random bytes rarely go. Each property also runs the fuzz target on the input.

use std::io::BufReader;

use memq_memscope::parse::attr;
use memq_memscope::parse::records::{split_fields, RawRecord, RecordReader};
use proptest::prelude::*;

/// A CSV field as msMemScope writes it: plain text, or quoted when it holds `,` or a line end
/// (embedded quotes are written doubled here, as Python's csv writer does).
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_ ./()@-]{0,12}",
        "[A-Za-z0-9,:{}\\[\\] ]{0,20}",
        "[a-z/().:0-9 ]{0,10}(\n[a-z/().:0-9 ]{0,10}){0,4}",
        "[a-z\"]{0,8}",
    ]
}

fn encode(f: &str) -> String {
    if f.contains([',', '\n', '"']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

fn records(text: &[u8], capacity: usize) -> Vec<RawRecord> {
    let mut r = RecordReader::new(BufReader::with_capacity(capacity, text));
    let mut out = Vec::new();
    let mut rec = RawRecord::default();
    while r.next_record(&mut rec).unwrap() {
        out.push(rec.clone());
    }
    out
}

fn key() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,10}"
}

/// Attr values without the `,key:` pattern that would start a new item.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,12}",
        "0x[0-9a-f]{1,16}",
        "[A-Za-z@.]{0,12}",
        "\\[[0-9, ]{0,10}\\]"
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// Rows written the tool's way read back as the same fields, line ends LF or CRLF, any
    /// read buffer size.
    #[test]
    fn csv_rows_round_trip(rows in prop::collection::vec(prop::collection::vec(field(), 3..6), 1..8),
                           crlf in any::<bool>(), capacity in 1usize..64) {
        let mut text = String::new();
        let eol = if crlf { "\r\n" } else { "\n" };
        // The first field of each row is an integer ID, so a broken row never looks like a
        // continuation.
        for (i, r) in rows.iter().enumerate() {
            let mut cells = vec![(i + 1).to_string()];
            cells.extend(r.iter().map(|f| encode(f)));
            text.push_str(&cells.join(","));
            text.push_str(eol);
        }
        let recs = records(text.as_bytes(), capacity);
        prop_assert_eq!(recs.len(), rows.len());
        for (rec, row) in recs.iter().zip(&rows) {
            prop_assert!(rec.terminated && !rec.unclosed_quote);
            let fields = split_fields(std::str::from_utf8(&rec.bytes).unwrap());
            let mut fields = fields.into_iter();
            fields.next();
            let fields: Vec<String> = fields.collect();
            // CRLF inside a quoted value stays as written; the record's own line end goes.
            prop_assert_eq!(&fields, row);
        }
        prop_assert!(memq_fuzz::records_target(text.as_bytes()).is_ok());
    }

    /// `{k:v,...}` of identifier keys and key-free values parses to the same pairs.
    #[test]
    fn attr_round_trips(pairs in prop::collection::vec((key(), value()), 0..10)) {
        let cell = format!("{{{}}}", pairs.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(","));
        let got: Vec<(String, String)> = attr::parse(&cell).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let want: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
        prop_assert_eq!(got, want);
        prop_assert!(memq_fuzz::attr_target(cell.as_bytes()).is_ok());
    }

    /// Pickles assembled from real opcodes in random order decode or fail cleanly.
    #[test]
    fn pickle_opcode_soup(body in prop::collection::vec(prop_oneof![
        Just(vec![b'}']), Just(vec![b']']), Just(vec![b'(']), Just(vec![b't']), Just(vec![b's']),
        Just(vec![b'a']), Just(vec![b'e']), Just(vec![b'u']), Just(vec![b'N']), Just(vec![0x88]),
        Just(vec![b'K', 7]), Just(vec![b'J', 1, 0, 0, 0]), Just(vec![0x8c, 1, b'x']),
        Just(vec![b'X', 2, 0, 0, 0, b'h', b'i']), Just(vec![0x94]), Just(vec![b'h', 0]),
        Just(vec![b'q', 0]), Just(vec![b'0']), Just(vec![b'2']), Just(vec![0x85]), Just(vec![0x86]),
    ], 0..200)) {
        let mut data = vec![0x80, 4];
        for op in body { data.extend(op); }
        data.push(b'.');
        prop_assert!(memq_fuzz::pickle_target(&data).is_ok());
    }

    /// Any bytes: the record reader's invariants hold.
    #[test]
    fn record_reader_on_any_bytes(data in prop::collection::vec(prop_oneof![
        Just(b'\n'), Just(b'\r'), Just(b'"'), Just(b','), Just(b'1'), Just(b'M'), any::<u8>()
    ], 0..400)) {
        prop_assert_eq!(memq_fuzz::records_target(&data), Ok(()));
    }
}
