//! Golden figures as sqllogictest files (`tests/slt/*.slt`, the record format DataFusion's own
//! tests use), run against memq's engine. Supported records:
//!
//! - `input real:REL` / `input repo:REL`: the dataset of the following records — the input at
//!   `fixtures/real/REL` (a real sample) or at `REL` in this repository, ingested once per test run;
//! - `statement ok` + SQL: the statement must succeed;
//! - `statement error FRAGMENT` + SQL: it must fail with an error containing FRAGMENT;
//! - `query TYPES [rowsort]` + SQL + `----` + rows: the result, one row per line, values
//!   separated by single spaces, NULL for null, in order (or sorted with `rowsort`).
//!
//! Records are separated by blank lines; `#` starts a comment line.

use std::path::{Path, PathBuf};

use crate::common::{fixture_root, real_fixture, rows, shared_engine};

struct Record {
    line: usize,
    head: String,
    sql: String,
    expected: Vec<String>,
}

fn records(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut record = Record {
            line: n + 1,
            head: t.to_string(),
            sql: String::new(),
            expected: Vec::new(),
        };
        let mut in_result = false;
        while let Some((_, l)) = lines.peek() {
            if l.trim().is_empty() {
                break;
            }
            let (_, l) = lines.next().unwrap_or_default();
            if l.trim() == "----" {
                in_result = true;
            } else if in_result {
                record.expected.push(l.trim_end().to_string());
            } else if !l.trim_start().starts_with('#') {
                record.sql.push_str(l);
                record.sql.push('\n');
            }
        }
        out.push(record);
    }
    out
}

async fn run_file(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.display();
    let mut engine = None;
    for r in records(&text) {
        let at = format!("{name}:{}", r.line);
        let mut words = r.head.split_whitespace();
        match words.next() {
            Some("input") => {
                let spec = words
                    .next()
                    .unwrap_or_else(|| panic!("{at}: input needs a path"));
                let input: PathBuf = match spec.split_once(':') {
                    Some(("real", rel)) => real_fixture(rel),
                    Some(("repo", rel)) => fixture_root().join(rel),
                    _ => panic!("{at}: input real:REL or repo:REL"),
                };
                engine = Some(shared_engine(&[input]).await);
            }
            Some("statement") => {
                let e = engine
                    .as_ref()
                    .unwrap_or_else(|| panic!("{at}: no input yet"));
                let result = e.query(&r.sql).await;
                match words.next() {
                    Some("ok") => {
                        result.unwrap_or_else(|err| panic!("{at}: {err}"));
                    }
                    Some("error") => {
                        let fragment = words.collect::<Vec<_>>().join(" ");
                        let err = match result {
                            Ok(_) => panic!("{at}: the statement succeeded"),
                            Err(err) => err.to_string(),
                        };
                        assert!(err.contains(&fragment), "{at}: {err}");
                    }
                    other => panic!("{at}: statement {other:?}"),
                }
            }
            Some("query") => {
                let e = engine
                    .as_ref()
                    .unwrap_or_else(|| panic!("{at}: no input yet"));
                let types = words.next().unwrap_or("");
                let sort = words.next() == Some("rowsort");
                let mut got: Vec<String> = rows(e, &r.sql)
                    .await
                    .into_iter()
                    .map(|row| {
                        assert_eq!(row.len(), types.len(), "{at}: column count vs `{types}`");
                        row.join(" ")
                    })
                    .collect();
                let mut expected = r.expected.clone();
                if sort {
                    got.sort();
                    expected.sort();
                }
                assert_eq!(got, expected, "{at}:\n{}", r.sql);
            }
            other => panic!("{at}: unknown record {other:?}"),
        }
    }
}

#[tokio::test]
async fn sqllogictest_files() {
    let dir = fixture_root().join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "no .slt files in {}", dir.display());
    for f in files {
        run_file(&f).await;
    }
}
