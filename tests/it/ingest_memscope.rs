//! Ingest of msMemScope dumps: real samples, the tool's db form, and bad inputs.

use std::fs;
use std::path::PathBuf;

use crate::common::*;
use memq::error::MemqError;

const SAMPLES: &[&str] = &[
    "v1_smoke_multiproc_a",
    "v1_smoke_multiproc_b",
    "v2_compare_baseline",
    "v2_compare_leaks",
];

fn real(sample: &str) -> PathBuf {
    real_fixture(&format!("memscope/real/{sample}.csv"))
}

#[tokio::test]
async fn real_samples_keep_every_record_and_match_reference_stats() {
    let golden = golden();
    for sample in SAMPLES {
        let (ing, engine) = open(&[real(sample)]).await;
        let g = &golden[sample]["stats"];
        assert_eq!(
            int(&engine, "SELECT count(*) FROM events").await,
            g["rows"].as_i64().unwrap(),
            "{sample}"
        );
        assert_eq!(
            int(&engine, "SELECT count(*) FROM rejects").await,
            0,
            "{sample}"
        );
        assert_eq!(ing.report.total_rejects(), 0);
        for pair in g["by_event"].as_array().unwrap() {
            let (event, n) = (pair[0].as_str().unwrap(), pair[1].as_i64().unwrap());
            let got = int(
                &engine,
                &format!("SELECT count(*) FROM events WHERE event = '{event}'"),
            )
            .await;
            assert_eq!(got, n, "{sample} {event}");
        }
        for pair in g["by_event_type"].as_array().unwrap() {
            let (t, n) = (pair[0].as_str().unwrap(), pair[1].as_i64().unwrap());
            let got = int(
                &engine,
                &format!("SELECT count(*) FROM events WHERE event_type = '{t}'"),
            )
            .await;
            assert_eq!(got, n, "{sample} {t}");
        }
        // The raw timestamps span the reference's time range (file unit).
        let r = rows(&engine, "SELECT min(ts_raw), max(ts_raw) FROM events").await;
        assert_eq!(r[0][0], g["first_ts"].to_string(), "{sample}");
        assert_eq!(r[0][1], g["last_ts"].to_string(), "{sample}");
        assert_eq!(
            int(
                &engine,
                "SELECT count(*) FROM events WHERE owner IS NOT NULL AND event = 'MALLOC'"
            )
            .await,
            g["malloc_with_owner"].as_i64().unwrap()
        );
        assert_eq!(
            int(
                &engine,
                "SELECT count(*) FROM events WHERE shadow AND event = 'FREE'"
            )
            .await,
            g["free_shadow"].as_i64().unwrap()
        );
        // Canonical order: the sorted file the reference writes, row for row.
        let order: Vec<String> = golden[sample]["sort"]["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        let got: Vec<String> = rows(
            &engine,
            "SELECT row_idx FROM events ORDER BY ts NULLS LAST, row_idx",
        )
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
        assert_eq!(
            got, order,
            "{sample}: canonical order differs from the reference's --sort"
        );
    }
}

#[tokio::test]
async fn g1_sample_types_microseconds_decimal_pointers_and_lone_frees() {
    let (_ing, engine) = open(&[real("v1_smoke_multiproc_a")]).await;
    let r = rows(&engine, "SELECT ts_unit, generation FROM sources").await;
    assert_eq!(r, vec![vec!["us".to_string(), "G1".to_string()]]);
    // µs converted to ns, raw kept.
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE ts <> ts_raw * 1000"
        )
        .await,
        0
    );
    // FREE without MALLOC: 7 blocks allocated before collection (docs/formats/memscope.md §5.4).
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM blocks WHERE alloc_ts IS NULL"
        )
        .await,
        7
    );
    // Negative FREE sizes stay as written in events; the block size comes from the MALLOC.
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE event = 'FREE' AND size < 0"
        )
        .await
            > 0
    );
    assert_eq!(
        int(&engine, "SELECT count(*) FROM blocks WHERE size < 0").await,
        0
    );
    // Two processes, devices 0/1 and host, MID parsed.
    assert_eq!(
        int(&engine, "SELECT count(DISTINCT pid) FROM events").await,
        2
    );
    assert!(int(&engine, "SELECT count(*) FROM events WHERE device = 'host'").await > 0);
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE module_id IS NOT NULL"
        )
        .await
            > 0
    );
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE event_type = 'acl init'"
        )
        .await,
        2
    );
    // A decimal Ptr is parsed (20616935636992 appears in the sample).
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE ptr = 20616935636992"
        )
        .await
            > 0
    );
}

#[tokio::test]
async fn g2_baseline_blocks_show_the_irregular_cases() {
    let (_ing, engine) = open(&[real("v2_compare_baseline")]).await;
    // Blocks alive at exit: a MALLOC without any FREE (7 in baseline.csv).
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM blocks WHERE free_kind = 'none'"
        )
        .await,
        7
    );
    assert_eq!(
        int(
            &engine,
            "SELECT sum(size) FROM blocks WHERE free_kind = 'none'"
        )
        .await,
        7013044
    );
    // The same address live in HAL and PTA at once (2 cases).
    let overlaps = "SELECT count(*) FROM blocks h JOIN blocks p ON h.ptr = p.ptr AND h.pool = 'HAL' AND p.pool = 'PTA' \
                    AND p.alloc_ts >= h.alloc_ts AND (h.free_ts IS NULL OR p.alloc_ts < h.free_ts)";
    assert_eq!(int(&engine, overlaps).await, 2);
    // Every MALLOC and FREE is in exactly one block.
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM blocks WHERE alloc_id IS NOT NULL"
        )
        .await,
        23
    );
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM blocks WHERE free_id IS NOT NULL"
        )
        .await,
        16
    );
    // Typed columns of a known row (docs/formats/memscope.md §2.12).
    let r = rows(&engine, "SELECT event, event_type, ts, pid, device_index, hex(ptr), size, total, used, allocation_id, attr FROM events WHERE id = 10").await;
    assert_eq!(
        r[0],
        [
            "MALLOC",
            "PTA",
            "1764753084425691000",
            "3101864",
            "0",
            "0x000012c041400000",
            "16778240",
            "20971520",
            "16780288",
            "4",
            "{allocation_id:4,addr:0x000012c041400000,size:16778240,total:20971520,used:16780288}"
        ]
    );
    let leaks = real_fixture("memscope/real/v2_compare_leaks.csv");
    let (_i2, e2) = open(&[leaks]).await;
    assert_eq!(int(&e2, overlaps).await, 3);
}

/// Writes `csv` as the tool's db would (docs/formats/memscope.md §4.1): Attr as a JSON object of
/// strings, MSTX names and stacks with literal surrounding quotes, rows in file order.
fn write_tool_db(csv: &std::path::Path, db: &std::path::Path) {
    use memq_memscope::parse::records::{split_fields, RawRecord, RecordReader};
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(
        "CREATE TABLE memscope_dump (ID INTEGER, Event TEXT, \"Event Type\" TEXT, Name TEXT, \"Timestamp(ns)\" INTEGER, \
         \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, Ptr TEXT, Attr TEXT, \
         \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT)",
    )
    .unwrap();
    let mut reader = RecordReader::new(std::io::BufReader::new(fs::File::open(csv).unwrap()));
    let mut rec = RawRecord::default();
    reader.next_record(&mut rec).unwrap(); // header
    while reader.next_record(&mut rec).unwrap() {
        let f = split_fields(std::str::from_utf8(&rec.bytes).unwrap());
        let attr =
            memq_memscope::parse::attr::render_json(&memq_memscope::parse::attr::parse(&f[9]));
        let quoted = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("\"{s}\"")
            }
        };
        let name = if f[1] == "MSTX" {
            quoted(&f[3])
        } else {
            f[3].clone()
        };
        let pid = f[5].parse::<i64>().unwrap_or(-1);
        conn.execute(
            "INSERT INTO memscope_dump VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
            rusqlite::params![
                f[0].parse::<i64>().unwrap(),
                f[1],
                f[2],
                name,
                f[4].parse::<i64>().unwrap(),
                pid,
                f[6].parse::<i64>().unwrap_or(-1),
                f[7],
                f[8],
                attr,
                quoted(&f[10]),
                quoted(&f[11])
            ],
        )
        .unwrap();
    }
}

#[tokio::test]
async fn tool_db_ingests_to_the_same_events_as_its_csv() {
    let dir = tempfile::TempDir::new().unwrap();
    for sample in SAMPLES {
        let csv = real(sample);
        let db = dir.path().join(format!("memscope_dump_{sample}.db"));
        write_tool_db(&csv, &db);
        let (_a, from_csv) = open(&[csv]).await;
        let (_b, from_db) = open(&[db]).await;
        let cols = "row_idx, id, event, event_type, name, ts, ts_raw, pid, tid, device, device_index, ptr, attr, size, total, used, \
                    allocation_id, owner, shadow, alloc_type, page_type, module_id, stack_py, stack_c";
        let q = format!("SELECT {cols} FROM events ORDER BY ts, row_idx");
        assert_eq!(
            rows(&from_csv, &q).await,
            rows(&from_db, &q).await,
            "{sample}"
        );
        let b = "SELECT pool, ptr, size, alloc_ts, free_ts, free_kind FROM blocks ORDER BY alloc_ts, ptr, pool";
        assert_eq!(
            rows(&from_csv, b).await,
            rows(&from_db, b).await,
            "{sample}"
        );
    }
}

#[tokio::test]
async fn ingesting_twice_gives_identical_tables_and_refuses_to_overwrite() {
    let inputs = [real("v1_smoke_multiproc_a"), real("v2_compare_leaks")];
    let (a, ea) = open(&inputs).await;
    let (_b, eb) = open(&inputs).await;
    for t in ["events", "blocks", "oom", "mem_snapshots", "rejects"] {
        // Files of different sources may be scanned in any order: compare as sorted sets.
        let q = format!("SELECT * FROM {t}");
        let (mut ra, mut rb) = (rows(&ea, &q).await, rows(&eb, &q).await);
        ra.sort();
        rb.sort();
        assert!(
            ra == rb,
            "{t} differs between two ingests of the same inputs"
        );
    }
    // An existing dataset is not replaced without --force; with it, it is.
    let opts = memq_ingest::IngestOptions {
        output: a.dataset.clone(),
        force: false,
        append: false,
        strict: false,
        progress: false,
    };
    let err = memq_ingest::ingest(&inputs, &opts, &memq::catalog())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("--force"), "{err}");
    let forced = memq_ingest::IngestOptions {
        force: true,
        append: false,
        ..opts
    };
    memq_ingest::ingest(&inputs[..1], &forced, &memq::catalog())
        .await
        .unwrap();
    let m = memq_core::dataset::Manifest::read(&a.dataset).unwrap();
    assert_eq!(m.sources.len(), 1);
    assert_eq!(m.sources[0].rows, 330);
    assert_eq!(m.sources[0].kind, "memscope_csv");
    assert_eq!(m.sources[0].ts_unit.as_deref(), Some("us"));
    // No temporary folder is left beside the dataset.
    let leftovers: Vec<_> = fs::read_dir(a.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

// ---- bad inputs: a clear error or rejected rows, never a panic -------------------------------

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
const GOOD: &str = "1,MALLOC,PTA,N/A,1764753084425691000,7,7,0,0x0000000000001000,\"{allocation_id:1,addr:0x1000,size:512,total:2097152,used:512}\",,\n";

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    fs::write(&p, bytes).unwrap();
    p
}

async fn ingest_err(path: PathBuf) -> MemqError {
    ingest_temp(&[path]).await.err().expect("should fail")
}

#[tokio::test]
async fn whole_file_errors_name_the_file_and_the_reason() {
    let dir = tempfile::TempDir::new().unwrap();
    let e = ingest_err(write(&dir, "empty.csv", b"")).await;
    assert!(
        e.to_string().contains("empty.csv") && e.to_string().contains("empty file"),
        "{e}"
    );
    assert_eq!(e.exit_code(), 2);
    let g0 = "Record Index,Timestamp(us),Event,Event Type,Process Id,Thread Id,Device Id,Kernel Index,Flag,Addr,Size(byte),Total Allocated(byte),Total Reserved(byte)\n1,2,malloc,pytorch,1,1,0,0,0,1,1,1,1\n";
    let e = ingest_err(write(&dir, "g0.csv", g0.as_bytes())).await;
    assert!(e.to_string().contains("legacy msLeaks (G0)"), "{e}");
    assert!(e.to_string().contains("g0.csv:1"), "{e}");
    let e = ingest_err(write(&dir, "other.csv", b"a,b,c\n1,2,3\n")).await;
    assert!(e.to_string().contains("not an msMemScope dump"), "{e}");
    let e = ingest_err(write(
        &dir,
        "x.db",
        b"this is not a database at all, just text",
    ))
    .await;
    assert!(e.to_string().contains("not an SQLite database"), "{e}");
    // A db with the SQLite magic but a corrupt body.
    let mut corrupt = b"SQLite format 3\0".to_vec();
    corrupt.extend(std::iter::repeat_n(0xA5u8, 4096));
    let e = ingest_err(write(&dir, "corrupt.db", &corrupt)).await;
    assert!(
        e.to_string().contains("corrupt.db") && e.to_string().contains("SQLite"),
        "{e}"
    );
    // A valid SQLite db without a dump table.
    let p = dir.path().join("nodump.db");
    rusqlite::Connection::open(&p)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    let e = ingest_err(p).await;
    assert!(
        e.to_string()
            .contains("no memscope_dump or leaks_dump table"),
        "{e}"
    );
    let empty_dir = dir.path().join("nothing");
    fs::create_dir(&empty_dir).unwrap();
    fs::write(empty_dir.join("notes.txt"), "hi").unwrap();
    let e = ingest_err(empty_dir).await;
    assert!(e.to_string().contains("no msMemScope dumps"), "{e}");
}

#[tokio::test]
async fn bad_rows_become_rejects_kept_verbatim() {
    let dir = tempfile::TempDir::new().unwrap();
    // Header only: a valid, empty dump.
    let ing = ingest_temp(&[write(&dir, "header_only.csv", HEADER.as_bytes())])
        .await
        .unwrap();
    assert_eq!(ing.report.manifest.sources[0].rows, 0);

    let mut text = String::from(HEADER);
    text.push_str(GOOD);
    text.push_str("2,FREE,PTA,N/A,1764753084425691001,7,7,0,0x1000,,\n"); // 11 fields
    text.push_str("3,MALLOC,PTA,N/A,not-a-time,7,7,0,0x2000,\"{size:1}\",,\n");
    text.push_str("4,MSTX,Mark,\"unclosed,1764753084425691002,7,7,0,N/A,,,\n");
    text.push_str(GOOD.replacen("1,", "5,", 1).as_str());
    let mut bytes = text.into_bytes();
    bytes
        .extend_from_slice(b"6,MSTX,Mark,\"bad \xff\xfe byte\",1764753084425691003,7,7,0,N/A,,,\n");
    bytes.extend_from_slice(b"7,MALLOC,PTA,N/A,17647530844256910"); // truncated last line
    let ing = ingest_temp(&[write(&dir, "memscope_dump_bad.csv", &bytes)])
        .await
        .unwrap();
    let engine = memq_engine::Engine::open(&ing.dataset, &memq::catalog())
        .await
        .unwrap();
    assert_eq!(int(&engine, "SELECT count(*) FROM events").await, 2);
    let r = rows(
        &engine,
        "SELECT line, reason, text FROM rejects ORDER BY line",
    )
    .await;
    let reasons: Vec<(&str, &str)> = r.iter().map(|x| (x[0].as_str(), x[1].as_str())).collect();
    assert_eq!(reasons.len(), 5, "{r:?}");
    assert_eq!(reasons[0], ("3", "11 fields, header has 12"));
    assert_eq!(
        reasons[1],
        ("4", "timestamp `not-a-time` is not an integer")
    );
    assert!(
        reasons[2].0 == "5" && reasons[2].1.starts_with("unclosed quote"),
        "{r:?}"
    );
    assert!(
        reasons[3].0 == "7" && reasons[3].1.starts_with("invalid UTF-8"),
        "{r:?}"
    );
    assert!(
        reasons[4].0 == "8" && reasons[4].1.starts_with("truncated last record"),
        "{r:?}"
    );
    assert_eq!(r[0][2], "2,FREE,PTA,N/A,1764753084425691001,7,7,0,0x1000,,");
    // The exact bytes of the invalid UTF-8 row are kept.
    let raw = engine
        .query("SELECT raw FROM rejects WHERE line = 7")
        .await
        .unwrap();
    let raw = datafusion::arrow::array::AsArray::as_binary::<i32>(raw[0].column(0))
        .value(0)
        .to_vec();
    assert!(raw.windows(2).any(|w| w == b"\xff\xfe"));
    assert_eq!(ing.report.total_rejects(), 5);

    // --strict turns any reject into an error (exit 2) and writes no dataset.
    let out = dir.path().join("strict.memq");
    let opts = memq_ingest::IngestOptions {
        output: out.clone(),
        force: false,
        append: false,
        strict: true,
        progress: false,
    };
    let e = memq_ingest::ingest(
        &[dir.path().join("memscope_dump_bad.csv")],
        &opts,
        &memq::catalog(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(e.exit_code(), 2);
    assert!(!out.exists());
}

#[tokio::test]
async fn crlf_bom_and_quoted_rewrites_are_read() {
    let dir = tempfile::TempDir::new().unwrap();
    let text = format!(
        "\u{feff}{}{}",
        HEADER.replace('\n', "\r\n"),
        GOOD.replace('\n', "\r\n")
    );
    let (_i, engine) = open(&[write(&dir, "crlf.csv", text.as_bytes())]).await;
    let r = rows(&engine, "SELECT id, size, used, stack_c FROM events").await;
    assert_eq!(r, vec![vec!["1", "512", "512", "NULL"]]);
}
