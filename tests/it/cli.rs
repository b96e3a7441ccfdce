//! The `memq` binary end to end: ingest, sql with every format and writer, functions, exit codes.

use crate::common::*;

#[test]
fn ingest_then_sql_in_every_format() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    let baseline = shared_fixture("memscope/real/v2_compare_baseline.csv");
    let (_, err) = run_ok(memq().arg("ingest").arg(&baseline).arg("-o").arg(&ds));
    assert!(
        err.contains("events") && err.contains("121 rows") && err.contains("0 rejects"),
        "{err}"
    );
    let q = "SELECT event, count(*) AS n FROM events GROUP BY event ORDER BY n DESC, event";
    let (csv, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", q, "--format", "csv"]),
    );
    assert_eq!(csv, "event,n\nOP_LAUNCH,80\nMALLOC,23\nFREE,16\nSYSTEM,2\n");
    let (tsv, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", q, "--format", "tsv"]),
    );
    assert!(tsv.starts_with("event\tn\nOP_LAUNCH\t80\n"), "{tsv}");
    let (json, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", q, "--format", "json"]),
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["event"], "OP_LAUNCH");
    assert_eq!(v[0]["n"], 80);
    let (nd, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", q, "--format", "ndjson"]),
    );
    assert_eq!(nd.lines().count(), 4);
    let (md, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", q, "--format", "markdown"]),
    );
    assert!(
        md.starts_with("| event | n |\n|---|---|\n| OP_LAUNCH | 80 |"),
        "{md}"
    );
    let (table, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT sum(size) AS bytes FROM blocks WHERE free_kind = 'none'",
    ]));
    assert!(
        table.contains("6.69 MiB") && table.contains("1 row"),
        "{table}"
    );
    // Lists cannot be CSV cells: they are written as text.
    let (list, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT owner_parts('PTA@a@b') AS p",
        "--format",
        "csv",
    ]));
    assert_eq!(list, "p\n\"[a, b]\"\n");
    // Several statements: each result printed.
    let (two, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT 1 AS a; SELECT 2 AS b",
        "--format",
        "csv",
    ]));
    assert_eq!(two, "a\n1\nb\n2\n");
    // Writers chosen by extension; Parquet read back through memq itself.
    for ext in ["parquet", "csv", "json", "ndjson"] {
        let out = dir.path().join(format!("r.{ext}"));
        run_ok(memq().arg("sql").arg(&ds).args(["-e", q, "-o"]).arg(&out));
        assert!(out.exists(), "{ext}");
    }
    let pq = dir.path().join("r.parquet");
    let (back, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "--format",
        "csv",
        "-e",
        &format!("SELECT * FROM '{}' ORDER BY n DESC", pq.display()),
    ]));
    assert_eq!(back, csv);
    // Raw inputs work directly (temporary ingest).
    let (direct, _) = run_ok(memq().arg("sql").arg(&baseline).args([
        "-e",
        "SELECT count(*) AS n FROM events",
        "--format",
        "csv",
    ]));
    assert_eq!(direct, "n\n121\n");
}

#[test]
fn exit_codes_and_error_messages() {
    let dir = tempfile::TempDir::new().unwrap();
    let bad = dir.path().join("empty.csv");
    std::fs::write(&bad, "").unwrap();
    let out = memq()
        .arg("ingest")
        .arg(&bad)
        .arg("-o")
        .arg(dir.path().join("x.memq"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("empty.csv") && err.contains("empty file"),
        "{err}"
    );
    let ds = dir.path().join("b.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(shared_fixture("memscope/real/v2_compare_baseline.csv"))
            .arg("-o")
            .arg(&ds),
    );
    let out = memq()
        .arg("sql")
        .arg(&ds)
        .args(["-e", "SELECT nope FROM events"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    let out = memq()
        .arg("ingest")
        .arg(shared_fixture("memscope/real/v2_compare_baseline.csv"))
        .arg("-o")
        .arg(&ds)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    let out = memq()
        .args(["sql", "/definitely/not/here.csv", "-e", "SELECT 1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn functions_are_listed_with_docs() {
    let (out, _) = run_ok(memq().arg("functions"));
    for f in [
        "attr(",
        "attr_int(",
        "owner_parts(",
        "owner_group(",
        "owner_level(",
        "owner_framework(",
        "fmt_bytes(",
        "hex(",
        "stack_frame(",
    ] {
        assert!(out.contains(f), "{f} missing from:\n{out}");
    }
}

#[tokio::test]
async fn functions_compute_in_sql() {
    let (_i, engine) = open(&[shared_fixture("memscope/real/v2_compare_baseline.csv")]).await;
    let r = rows(
        &engine,
        "SELECT attr('{shape:[1,5,],size:12}', 'shape'), attr_int('{size:12,x:0x10}', 'size'), attr_int('{x:0x10}', 'x'), \
         attr('{\"size\":\"7\"}', 'size'), owner_group('PTA@fsdp2@all_gather_output@ops'), owner_group(NULL), \
         owner_level('CANN@HCCL@buf', 2), owner_framework('CANN@HCCL'), array_to_string(owner_parts('PTA@a@b'), '/'), \
         fmt_bytes(1572864), hex(CAST(4096 AS BIGINT)), stack_frame('a.py(1): f\nb.py(2): g\n', 2)",
    )
    .await;
    assert_eq!(
        r[0],
        [
            "[1,5,]",
            "12",
            "NULL",
            "7",
            "fsdp2",
            "(unlabelled)",
            "buf",
            "CANN",
            "a/b",
            "1.50 MiB",
            "0x0000000000001000",
            "b.py(2): g"
        ]
    );
    // Typed columns agree with the functions over the raw Attr.
    assert_eq!(int(&engine, "SELECT count(*) FROM events WHERE attr IS NOT NULL AND attr_int(attr, 'size') IS DISTINCT FROM size").await, 0);
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE hex(ptr) <> attr(attr, 'addr')"
        )
        .await,
        0
    );
}
