//! `memq run` (query files with parameters), `memq export` (canned analyses to a folder with an
//! index) and `memq to-db` (an msMemScope-style SQLite db): every file written is read back
//! (DataFusion, rusqlite, memq's own db ingest) and compared with the in-engine results.

use std::path::{Path, PathBuf};

use crate::common::*;

use memq_engine::Engine;
use tempfile::TempDir;

/// The 4 real samples ingested into `dir/real.memq`.
fn real_dataset(dir: &Path) -> PathBuf {
    let ds = dir.join("real.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(real_fixture("memscope/real"))
            .arg("-o")
            .arg(&ds),
    );
    ds
}

async fn read_parquet(path: &Path) -> Vec<Vec<String>> {
    let ctx = datafusion::prelude::SessionContext::new();
    let df = ctx
        .read_parquet(path.to_str().unwrap(), Default::default())
        .await
        .unwrap();
    cells(&df.collect().await.unwrap())
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

#[tokio::test]
async fn run_binds_parameters_as_values_and_writes_each_result() {
    let dir = TempDir::new().unwrap();
    let ds = real_dataset(dir.path());
    let q1 = dir.path().join("setup.sql");
    std::fs::write(
        &q1,
        "-- a view used by the next file\nCREATE VIEW per_event AS SELECT event, count(*) AS n FROM events GROUP BY event;\n\
         SELECT n FROM per_event WHERE event = $ev;\n",
    )
    .unwrap();
    let q2 = dir.path().join("probe.sql");
    std::fs::write(
        &q2,
        "SELECT $evil AS v, (SELECT count(*) FROM per_event) AS views_left;\n\
         SELECT count(*) AS big FROM blocks WHERE size >= $min_size AND pool = $pool;\n",
    )
    .unwrap();
    let evil = "1; DROP VIEW per_event";
    let params = [
        "--param",
        "ev=MALLOC",
        "--param",
        &format!("evil={evil}"),
        "--param",
        "min_size=1048576",
        "--param",
        "pool=HAL",
    ];

    // To a folder: one Parquet file per result.
    let out = dir.path().join("out");
    let (_, err) = run_ok(
        memq()
            .arg("run")
            .arg(&ds)
            .arg(&q1)
            .arg(&q2)
            .args(params)
            .arg("-o")
            .arg(&out),
    );
    assert!(err.contains("1 row written to"), "{err}");
    let engine = Engine::open(&ds, &memq::catalog()).await.unwrap();
    let malloc = rows(
        &engine,
        "SELECT count(*) AS n FROM events WHERE event = 'MALLOC'",
    )
    .await;
    let views = rows(&engine, "SELECT count(DISTINCT event) FROM events").await[0][0].clone();
    let big = rows(
        &engine,
        "SELECT count(*) AS big FROM blocks WHERE size >= 1048576 AND pool = 'HAL'",
    )
    .await;
    assert_eq!(read_parquet(&out.join("setup.parquet")).await, malloc);
    assert_eq!(
        read_parquet(&out.join("probe_1.parquet")).await,
        vec![vec![evil.to_string(), views.clone()]]
    );
    assert_eq!(read_parquet(&out.join("probe_2.parquet")).await, big);
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["probe_1.parquet", "probe_2.parquet", "setup.parquet"]
    );

    // To stdout, in order.
    let (csv, _) = run_ok(
        memq()
            .arg("run")
            .arg(&ds)
            .arg(&q1)
            .arg(&q2)
            .args(params)
            .args(["--format", "csv"]),
    );
    let expected = format!(
        "n\n{}\nv,views_left\n{evil},{views}\nbig\n{}\n",
        malloc[0][0], big[0][0]
    );
    assert_eq!(csv, expected);

    // A value with quotes stays a value too.
    let q3 = dir.path().join("quote.sql");
    std::fs::write(&q3, "SELECT $s AS s, length($s) AS len;").unwrap();
    let (out3, _) = run_ok(memq().arg("run").arg(&ds).arg(&q3).args([
        "--param",
        "s=x'); DROP VIEW curve; --",
        "--format",
        "tsv",
    ]));
    assert_eq!(out3, "s\tlen\nx'); DROP VIEW curve; --\t24\n");
}

#[tokio::test]
async fn run_parameters_reach_table_functions_and_are_checked() {
    let dir = TempDir::new().unwrap();
    let ds = real_dataset(dir.path());
    let engine = Engine::open(&ds, &memq::catalog()).await.unwrap();
    // A parameterised analysis of the library, called with parameters.
    if let Some(a) = memq::analyses().iter().find(|a| a.name == "hal_segments") {
        let q = dir.path().join("segs.sql");
        std::fs::write(&q, "SELECT * FROM hal_segments($min);").unwrap();
        let out = dir.path().join("o");
        run_ok(
            memq()
                .arg("run")
                .arg(&ds)
                .arg(&q)
                .args(["--param", "min=2097152", "-o"])
                .arg(&out),
        );
        let expected = rows(&engine, "SELECT * FROM hal_segments(2097152)").await;
        assert_eq!(
            sorted(read_parquet(&out.join("segs.parquet")).await),
            sorted(expected),
            "{}",
            a.name
        );
    }
    // A missing parameter: exit 1, naming it and the file; nothing runs.
    let q = dir.path().join("need.sql");
    std::fs::write(&q, "SELECT 1 AS a;\nSELECT $absent AS b;").unwrap();
    let (code, err) = run_err(memq().arg("run").arg(&ds).arg(&q));
    assert_eq!(code, 1);
    assert!(
        err.contains("need.sql: statement 2") && err.contains("$absent"),
        "{err}"
    );
    // A malformed --param is a usage error; an unused one is a warning.
    let (code, err) = run_err(
        memq()
            .arg("run")
            .arg(&ds)
            .arg(&q)
            .args(["--param", "noequals"]),
    );
    assert_eq!(code, 2, "{err}");
    let (_, err) = run_ok(
        memq()
            .arg("run")
            .arg(&ds)
            .arg(&q)
            .args(["--param", "absent=3", "--param", "spare=1"]),
    );
    assert!(err.contains("--param spare is not used"), "{err}");
    // A missing query file: exit 2.
    let (code, _) = run_err(memq().arg("run").arg(&ds).arg(dir.path().join("nope.sql")));
    assert_eq!(code, 2);
}

#[tokio::test]
async fn export_writes_every_parameterless_analysis_with_an_index() {
    let dir = TempDir::new().unwrap();
    let ds = real_dataset(dir.path());
    let engine = Engine::open(&ds, &memq::catalog()).await.unwrap();
    let out = dir.path().join("export");
    run_ok(memq().arg("export").arg(&ds).arg("-o").arg(&out));
    let index: memq::export::Index =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    // Every parameterless analysis of the memscope library; those of the snapshot and profiler
    // libraries have no data in a memscope dataset and are skipped.
    let parameterless = |family: &str| -> Vec<String> {
        let mut v: Vec<String> = memq::analyses()
            .iter()
            .filter(|a| !a.is_table_function() && !a.private)
            .filter(|a| a.path.starts_with(&format!("{family}/")))
            .map(|a| a.name.clone())
            .collect();
        v.sort();
        v
    };
    // the memscope analyses, and those every format answers (source_capabilities)
    let mut expected = [parameterless("memscope"), parameterless("common")].concat();
    expected.sort();
    let mut got: Vec<String> = index.views.iter().map(|v| v.view.clone()).collect();
    got.sort();
    assert_eq!(got, expected);
    let mut skipped = index.skipped.clone();
    skipped.sort();
    let mut others = [
        parameterless("snapshot"),
        parameterless("profiler"),
        parameterless("trace"),
    ]
    .concat();
    others.sort();
    assert_eq!(skipped, others);
    assert_eq!(index.format, "parquet");
    for v in &index.views {
        let back = read_parquet(&out.join(&v.file)).await;
        assert_eq!(back.len() as u64, v.rows, "{}", v.view);
        let in_engine = rows(&engine, &format!("SELECT * FROM \"{}\"", v.view)).await;
        assert_eq!(sorted(back), sorted(in_engine), "{}", v.view);
    }

    // A named subset as CSV and JSON.
    let names: Vec<String> = got.iter().take(2).cloned().collect();
    if !names.is_empty() {
        for (format, ext) in [("csv", "csv"), ("json", "json")] {
            let sub = dir.path().join(format!("sub_{format}"));
            run_ok(
                memq()
                    .arg("export")
                    .arg(&ds)
                    .args(["--views", &names.join(","), "--format", format, "-o"])
                    .arg(&sub),
            );
            let index: memq::export::Index =
                serde_json::from_str(&std::fs::read_to_string(sub.join("index.json")).unwrap())
                    .unwrap();
            assert_eq!(
                index
                    .views
                    .iter()
                    .map(|v| v.view.clone())
                    .collect::<Vec<_>>(),
                names
            );
            for v in &index.views {
                assert_eq!(v.file, format!("{}.{ext}", v.view));
                let text = std::fs::read_to_string(sub.join(&v.file)).unwrap();
                let n = rows(&engine, &format!("SELECT count(*) FROM \"{}\"", v.view)).await[0][0]
                    .parse::<u64>()
                    .unwrap();
                assert_eq!(v.rows, n);
                if format == "csv" {
                    assert_eq!(text.lines().count() as u64, n + 1, "{}", v.view);
                } else {
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(json.as_array().unwrap().len() as u64, n, "{}", v.view);
                }
            }
        }
    }
    // Unknown names and analyses that need parameters are usage errors.
    let (code, err) = run_err(
        memq()
            .arg("export")
            .arg(&ds)
            .args(["--views", "no_such_view", "-o"])
            .arg(dir.path().join("x")),
    );
    assert_eq!(code, 2);
    assert!(err.contains("no_such_view"), "{err}");
    if let Some(tf) = memq::analyses().iter().find(|a| a.is_table_function()) {
        let (code, err) = run_err(
            memq()
                .arg("export")
                .arg(&ds)
                .args(["--views", &tf.name, "-o"])
                .arg(dir.path().join("y")),
        );
        assert_eq!(code, 2);
        assert!(err.contains("needs parameters"), "{err}");
    }
}

const EVENT_COLUMNS: &str = "id, event, event_type, name, ts, pid, tid, device, device_index, ptr, attr, size, total, used, \
    process_used, device_used, allocation_id, owner, shadow, alloc_type, page_type, inefficient, module_id, stack_py, stack_c";

#[tokio::test]
async fn to_db_writes_the_tool_table_and_reads_back_to_the_same_events() {
    let dir = TempDir::new().unwrap();
    let ds = real_dataset(dir.path());
    let db = dir.path().join("memscope_dump_real.db");
    let (_, err) = run_ok(memq().arg("to-db").arg(&ds).arg("-o").arg(&db));
    assert!(err.contains("909 rows in memscope_dump"), "{err}");
    let engine = Engine::open(&ds, &memq::catalog()).await.unwrap();

    // The tool's 12 columns with its declared types (docs/formats/memscope.md §4.1).
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, type FROM pragma_table_info('memscope_dump') ORDER BY cid")
        .unwrap();
    let cols: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let expected = [
        ("ID", "INTEGER"),
        ("Event", "TEXT"),
        ("Event Type", "TEXT"),
        ("Name", "TEXT"),
        ("Timestamp(ns)", "INTEGER"),
        ("Process Id", "INTEGER"),
        ("Thread Id", "INTEGER"),
        ("Device Id", "TEXT"),
        ("Ptr", "TEXT"),
        ("Attr", "TEXT"),
        ("Call Stack(Python)", "TEXT"),
        ("Call Stack(C)", "TEXT"),
    ];
    assert_eq!(cols, expected.map(|(a, b)| (a.to_string(), b.to_string())));

    // Row for row, in each source's file order, the values the engine holds.
    let mut stmt = conn
        .prepare("SELECT ID, Event, \"Event Type\", \"Timestamp(ns)\", \"Device Id\", Ptr, Attr FROM memscope_dump ORDER BY rowid")
        .unwrap();
    let db_rows: Vec<Vec<String>> = stmt
        .query_map([], |r| {
            let id: i64 = r.get(0)?;
            let ts: Option<i64> = r.get(3)?;
            Ok(vec![
                id.to_string(),
                r.get(1)?,
                r.get(2)?,
                ts.map(|t| t.to_string()).unwrap_or("NULL".into()),
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ])
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let engine_rows = rows(
        &engine,
        "SELECT id, event, event_type, ts, device, CASE WHEN ptr IS NULL THEN 'N/A' ELSE hex(ptr) END, size FROM events ORDER BY source, row_idx",
    )
    .await;
    assert_eq!(db_rows.len(), engine_rows.len());
    for (d, e) in db_rows.iter().zip(&engine_rows) {
        assert_eq!(d[..6], e[..6]);
        // Attr: a JSON object whose values are all strings, or (no keys) an empty string as in
        // the tool's db; size as the engine reads it.
        assert_ne!(d[6], "{}", "an Attr without keys is written as ''");
        let attr: serde_json::Map<String, serde_json::Value> = if d[6].is_empty() {
            serde_json::Map::new()
        } else {
            serde_json::from_str(&d[6]).unwrap_or_else(|e| panic!("{}: {e}", d[6]))
        };
        assert!(attr.values().all(|v| v.is_string()), "{}", d[6]);
        let size = attr
            .get("size")
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .unwrap_or("NULL".into());
        assert_eq!(size, e[6], "{}", d[6]);
    }

    // A missing call stack is an empty string, as the tool writes it: never NULL or `N/A`.
    for (col, engine_col) in [
        ("Call Stack(Python)", "stack_py"),
        ("Call Stack(C)", "stack_c"),
    ] {
        let (nulls, empty, na): (i64, i64, i64) = conn
            .query_row(
                &format!(
                    "SELECT count(*) FILTER (WHERE \"{col}\" IS NULL), \
                     count(*) FILTER (WHERE \"{col}\" = ''), \
                     count(*) FILTER (WHERE \"{col}\" = 'N/A') FROM memscope_dump"
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let missing = int(
            &engine,
            &format!("SELECT count(*) FROM events WHERE {engine_col} IS NULL"),
        )
        .await;
        assert!(
            missing > 0,
            "{engine_col}: the sample has rows without a stack"
        );
        assert_eq!(
            (nulls, empty, na),
            (0, missing, 0),
            "{col}: NULL, '', 'N/A' cells"
        );
    }

    // memq's own db ingest reads it back to the same events.
    let back = dir.path().join("back.memq");
    run_ok(memq().arg("ingest").arg(&db).arg("-o").arg(&back));
    let from_db = Engine::open(&back, &memq::catalog()).await.unwrap();
    let q = format!("SELECT {EVENT_COLUMNS} FROM events ORDER BY {EVENT_COLUMNS}");
    assert_eq!(rows(&from_db, &q).await, rows(&engine, &q).await);
    // Timestamps are written as ns, so a db of µs (G1) and ns sources has one time axis.
    assert_eq!(
        int(
            &from_db,
            "SELECT count(*) FROM events WHERE ts_raw IS DISTINCT FROM ts"
        )
        .await,
        0
    );
    assert_eq!(
        int(&from_db, "SELECT count(DISTINCT source) FROM events").await,
        1
    );
}

/// The cells of `table` in rowid order, each as SQLite's `quote()` shows it, so that NULL,
/// `''` and `'N/A'` (and TEXT against INTEGER) stay apart.
fn quoted_cells(db: &Path, table: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let cols: Vec<String> = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let select = cols
        .iter()
        .map(|c| format!("quote(\"{c}\")"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = conn
        .prepare(&format!("SELECT {select} FROM \"{table}\" ORDER BY rowid"))
        .unwrap()
        .query_map([], |r| {
            (0..cols.len())
                .map(|i| r.get::<_, String>(i))
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (cols, rows)
}

/// `to-db` writes what the tool writes: the real tool-written db (MindStudio Insight's test data,
/// a current msMemScope db with SYSTEM rows that have no Attr and no stacks, and multi-line
/// stacks on its HOST_PINNED rows), ingested and written back, gives the tool's cells one for
/// one: a missing stack is `''` (not NULL or `N/A`), a stack has no enclosing quotes, an Attr
/// without keys is `''` (not `{}`), Name/Device Id/Ptr without a value are `N/A`.
#[test]
fn to_db_writes_the_cells_the_tool_writes() {
    let dir = TempDir::new().unwrap();
    let tool_db = real_fixture("memscope/insight/memscope_host_pinned.db");
    let ds = dir.path().join("hp.memq");
    run_ok(memq().arg("ingest").arg(&tool_db).arg("-o").arg(&ds));
    let db = dir.path().join("hp.db");
    run_ok(memq().arg("to-db").arg(&ds).arg("-o").arg(&db));

    let (tool_cols, tool_rows) = quoted_cells(&tool_db, "memscope_dump");
    let (cols, rows) = quoted_cells(&db, "memscope_dump");
    assert_eq!(cols, tool_cols);
    assert_eq!(rows.len(), 10);
    // The facts this test rests on, as the tool wrote them.
    let system: Vec<&Vec<String>> = tool_rows.iter().filter(|r| r[1] == "'SYSTEM'").collect();
    assert_eq!(system.len(), 3);
    for r in &system {
        assert_eq!(r[3], "'N/A'"); // Name
        assert_eq!(r[7], "'N/A'"); // Device Id
        assert_eq!(r[8], "'N/A'"); // Ptr
        assert_eq!(r[9..], ["''", "''", "''"]); // Attr, both stacks
    }
    let mut differences = Vec::new();
    for (tool, ours) in tool_rows.iter().zip(&rows) {
        for ((col, t), o) in cols.iter().zip(tool).zip(ours) {
            if t != o {
                differences.push(format!("ID {} {col}: tool {t}, memq {o}", tool[0]));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "cells that differ from the tool's db:\n{}",
        differences.join("\n")
    );
}

#[tokio::test]
async fn to_db_keeps_python_traces_and_replaces_the_file_whole() {
    let dir = TempDir::new().unwrap();
    let ds = dir.path().join("g3.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(fixture("memscope/g3_run"))
            .arg("-o")
            .arg(&ds),
    );
    let engine = Engine::open(&ds, &memq::catalog()).await.unwrap();
    let traces = int(&engine, "SELECT count(*) FROM python_trace").await;
    assert!(traces > 0);
    let db = dir.path().join("g3.db");
    std::fs::write(&db, b"an old file").unwrap();
    // Straight from the raw folder (ingested through the cache), replacing the old file.
    let (_, err) = run_ok(
        memq()
            .arg("to-db")
            .arg(fixture("memscope/g3_run"))
            .arg("-o")
            .arg(&db),
    );
    assert!(
        err.contains(&format!("{traces} python trace rows")),
        "{err}"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'python_trace_%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!tables.is_empty());
    drop(conn);

    let back = dir.path().join("back.memq");
    run_ok(memq().arg("ingest").arg(&db).arg("-o").arg(&back));
    let from_db = Engine::open(&back, &memq::catalog()).await.unwrap();
    let q = "SELECT func_info, start_ts, end_ts, tid, pid FROM python_trace ORDER BY pid, start_ts, end_ts, func_info, tid";
    assert_eq!(rows(&from_db, q).await, rows(&engine, q).await);
    let q = format!("SELECT {EVENT_COLUMNS} FROM events ORDER BY {EVENT_COLUMNS}");
    assert_eq!(rows(&from_db, &q).await, rows(&engine, &q).await);
    // No temporary file is left beside the output.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The 6 real PyTorch snapshots ingested into `dir/snap.memq` (no msMemScope data).
fn snapshot_dataset(dir: &Path) -> PathBuf {
    let ds = dir.join("snap.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(real_fixture("snapshots/real"))
            .arg("-o")
            .arg(&ds),
    );
    ds
}

/// The names in a folder, hidden ones included, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// On a snapshot-only dataset `memq export` skips the memscope and
/// profiler analyses (and says so) unless they are named; a non-empty folder is refused unless
/// `--force`, which replaces a previous export whole (no stale file) and nothing else.
#[tokio::test]
async fn export_skips_analyses_without_data_and_replaces_only_its_own_output() {
    let dir = TempDir::new().unwrap();
    let ds = snapshot_dataset(dir.path());
    let engine = Engine::open(&ds, &memq::catalog()).await.unwrap();
    let out = dir.path().join("ex");
    let (_, err) = run_ok(memq().arg("export").arg(&ds).arg("-o").arg(&out));
    let index: memq::export::Index =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    let of = |pred: &dyn Fn(&str) -> bool| -> Vec<String> {
        let mut v: Vec<String> = memq::analyses()
            .iter()
            .filter(|a| !a.is_table_function() && !a.private && pred(&a.path))
            .map(|a| a.name.clone())
            .collect();
        v.sort();
        v
    };
    let mut skipped = index.skipped.clone();
    skipped.sort();
    // the other formats' analyses, and the snapshot's host-memory ones: this snapshot recorded
    // no pinned host memory
    let mut expected = of(&|p| {
        ["memscope/", "profiler/", "trace/"]
            .iter()
            .any(|f| p.starts_with(f))
            || p.starts_with("snapshot/snap_host_")
    });
    expected.sort();
    assert_eq!(skipped, expected);
    assert!(
        err.contains(&format!("skipped {} analyses with no data", skipped.len())),
        "{err}"
    );
    let mut written: Vec<String> = index.views.iter().map(|v| v.view.clone()).collect();
    written.sort();
    let mut expected = of(&|p| {
        p.starts_with("snapshot/") && !p.starts_with("snapshot/snap_host_")
            || p.starts_with("common/")
    });
    expected.sort();
    assert_eq!(written, expected);
    for v in &index.views {
        let n = int(&engine, &format!("SELECT count(*) FROM \"{}\"", v.view)).await;
        assert_eq!(v.rows as i64, n, "{}", v.view);
    }
    let mut files: Vec<String> = index.views.iter().map(|v| v.file.clone()).collect();
    files.push("index.json".into());
    files.sort();
    assert_eq!(listing(&out), files);

    // Not empty: refused, nothing changed.
    let before = std::fs::read(out.join("index.json")).unwrap();
    let (code, err) = run_err(
        memq()
            .arg("export")
            .arg(&ds)
            .args(["--views", "snap_overview", "-o"])
            .arg(&out),
    );
    assert_eq!(code, 2);
    assert!(err.contains("the folder is not empty; --force"), "{err}");
    assert_eq!(listing(&out), files);

    // --force: the previous export is replaced whole; a named analysis without data is written.
    let (_, err) = run_ok(
        memq()
            .arg("export")
            .arg(&ds)
            .args(["--views", "snap_overview,peaks", "--force", "-o"])
            .arg(&out),
    );
    assert!(!err.contains("skipped"), "{err}");
    assert_eq!(
        listing(&out),
        ["index.json", "peaks.parquet", "snap_overview.parquet"]
    );
    assert_eq!(read_parquet(&out.join("peaks.parquet")).await.len(), 0);
    assert_ne!(std::fs::read(out.join("index.json")).unwrap(), before);

    // A file memq did not write: refused even with --force, and left alone.
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let (code, err) = run_err(
        memq()
            .arg("export")
            .arg(&ds)
            .args(["--force", "-o"])
            .arg(&out),
    );
    assert_eq!(code, 2);
    assert!(err.contains("not memq's export (notes.txt)"), "{err}");
    assert_eq!(
        listing(&out),
        [
            "index.json",
            "notes.txt",
            "peaks.parquet",
            "snap_overview.parquet"
        ]
    );
    // No staging folder nor lock file is left beside the export.
    assert_eq!(listing(dir.path()), ["ex", "snap.memq"]);
}

/// `memq to-db` on a dataset without msMemScope events is an error (exit
/// 2) that says why, and writes no file.
#[test]
fn to_db_refuses_a_dataset_without_memscope_events() {
    let dir = TempDir::new().unwrap();
    let ds = snapshot_dataset(dir.path());
    let db = dir.path().join("x.db");
    let (code, err) = run_err(memq().arg("to-db").arg(&ds).arg("-o").arg(&db));
    assert_eq!(code, 2);
    assert!(
        err.contains("the dataset holds no msMemScope events"),
        "{err}"
    );
    assert_eq!(listing(dir.path()), ["snap.memq"]);
    // And on memscope data the count has its grammar.
    let real = real_dataset(dir.path());
    let (_, err) = run_ok(memq().arg("to-db").arg(&real).arg("-o").arg(&db));
    assert!(
        err.contains("909 rows in memscope_dump, 0 python trace rows in 0 tables"),
        "{err}"
    );
}

/// Ctrl-C (SIGINT) stops `memq run -o DIR` with status 130 and removes the result file being
/// written, as `memq sql` does.
#[test]
fn sigint_stops_memq_run_and_removes_the_partial_output() {
    use std::process::Stdio;
    let dir = TempDir::new().unwrap();
    let ds = real_dataset(dir.path());
    let q = dir.path().join("long.sql");
    std::fs::write(
        &q,
        "SELECT e.id, g.value FROM events e CROSS JOIN generate_series(1, 10000000) g;\n",
    )
    .unwrap();
    let out = dir.path().join("results");
    let child = memq()
        .arg("run")
        .arg(&ds)
        .arg(&q)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the result file is being written.
    let t = std::time::Instant::now();
    while !out.is_dir() || listing(&out).is_empty() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "no output began"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let partial = listing(&out);
    assert!(partial[0].starts_with(".long.parquet.tmp-"), "{partial:?}");
    let t = std::time::Instant::now();
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(o.status.code(), Some(130));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("interrupted"), "{err}");
    assert!(listing(&out).is_empty(), "{:?}", listing(&out));
}
