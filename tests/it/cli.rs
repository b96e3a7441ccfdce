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

/// Runs `cmd` to its end; returns (exit code, stdout, stderr, peak RSS in bytes of that child).
fn run_measured(cmd: &mut std::process::Command) -> (Option<i32>, String, String, u64) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut so = String::new();
    out.read_to_string(&mut so).unwrap();
    let se = t.join().unwrap();
    // wait4 reports this child's own peak RSS (KiB on Linux).
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: waits for our own child, whose handle is not waited on again.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    std::mem::forget(child);
    (code, so, se, usage.ru_maxrss as u64 * 1024)
}

/// Issue 11, finding 1: `memq sql` streams: a big `SELECT *` shows its head and tail with
/// "N rows, 40 shown" in bounded memory; csv and Parquet stream too; `--maxrows`.
#[test]
fn big_results_stream_with_bounded_memory() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = crate::repl_pty::generated_dataset(dir.path(), 200_000);
    let (code, out, err, rss) = run_measured(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", "SELECT * FROM events"]),
    );
    assert_eq!(code, Some(0), "{err}");
    let last = out.lines().last().unwrap();
    assert!(last.ends_with(" rows, 40 shown"), "{last}");
    let rows: u64 = last.split(' ').next().unwrap().parse().unwrap();
    assert!(rows > 150_000, "{last}");
    assert!(out.lines().count() <= 47, "{out}");
    assert!(rss < 300 << 20, "table: peak RSS {} MiB", rss >> 20);

    let (code, out, err, rss) = run_measured(memq().arg("sql").arg(&ds).args([
        "--format",
        "csv",
        "-e",
        "SELECT * FROM events",
    ]));
    assert_eq!(code, Some(0), "{err}");
    // (quoted cells may hold newlines: at least one line per row)
    assert!(out.lines().count() as u64 > rows, "csv lines");
    assert!(out.starts_with("source,row_idx,"));
    assert!(rss < 300 << 20, "csv: peak RSS {} MiB", rss >> 20);

    let pq = dir.path().join("all.parquet");
    let (code, _, err, rss) = run_measured(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", "SELECT * FROM events", "-o"])
            .arg(&pq),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("{rows} rows written")), "{err}");
    assert!(rss < 300 << 20, "parquet: peak RSS {} MiB", rss >> 20);

    // --maxrows: head and tail; 0 shows all.
    let q = "SELECT value FROM generate_series(1, 100) ORDER BY value";
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args(["--maxrows", "6", "-e", q]));
    assert!(out.ends_with("100 rows, 6 shown\n"), "{out}");
    assert!(
        out.contains("| 3 ") && out.contains("| 98 ") && !out.contains("| 4 "),
        "{out}"
    );
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args(["--maxrows", "0", "-e", q]));
    assert!(
        out.ends_with("\n100 rows\n") && out.contains("| 50 "),
        "{out}"
    );
}

/// Ctrl-C (SIGINT) stops `memq sql` at once with exit status 130; a file being written is not
/// left behind.
#[test]
fn sigint_stops_memq_sql_with_status_130() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(shared_fixture("memscope/real/v2_compare_baseline.csv"))
            .arg("-o")
            .arg(&ds),
    );
    let long = "SELECT e.id, g.value FROM events e CROSS JOIN generate_series(1, 10000000) g";
    let target = dir.path().join("never.parquet");
    for extra in [
        &["--format", "csv"][..],
        &["-o", target.to_str().unwrap()][..],
    ] {
        let mut child = memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", long])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 64];
        if extra[0] == "--format" {
            // Rows are streaming.
            out.read_exact(&mut first).unwrap();
            assert!(first.starts_with(b"id,value\n"));
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        let t = std::time::Instant::now();
        // SAFETY: signals our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        let reader = std::thread::spawn(move || {
            let mut rest = Vec::new();
            let _ = out.read_to_end(&mut rest);
        });
        let o = child.wait_with_output().unwrap();
        reader.join().unwrap();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(o.status.code(), Some(130), "{extra:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted"));
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("never"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Issue 11, finding 6: SQL errors read as one line with the SQL line and a caret under the
/// failing token; "did you mean" for unknown tables, views and table functions; no Rust Debug
/// text or internal catalog names.
#[test]
fn sql_errors_have_a_caret_and_suggestions() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(shared_fixture("memscope/real"))
            .arg("-o")
            .arg(&ds),
    );
    let err = |q: &str| run_err(memq().arg("sql").arg(&ds).args(["-e", q])).1;
    let e = err("SELECT * FORM events");
    assert_eq!(
        e,
        "memq: syntax error at line 1, column 10: expected end of statement, found FORM\n  \
         SELECT * FORM events\n           ^^^^\n"
    );
    let e = err("SELECT *\n  FROM peak");
    assert!(
        e.starts_with("memq: table 'peak' not found; did you mean `peaks`?\n"),
        "{e}"
    );
    assert!(e.ends_with("\n    FROM peak\n         ^^^^\n"), "{e}");
    let e = err("SELECT * FROM breakdown_a(1)");
    assert!(e.contains("did you mean `breakdown_at`?"), "{e}");
    let e = err("SELECT sizee FROM events");
    assert!(
        e.contains("column 'sizee' not found") && e.contains("'events.size'"),
        "{e}"
    );
    assert!(
        e.ends_with("  SELECT sizee FROM events\n         ^^^^^\n"),
        "{e}"
    );
    for e in [e, err("SELECT * FROM peak"), err("SELECT 1 +")] {
        for bad in [
            "ParserError(",
            "memq.main.",
            "Error during planning",
            "SQL error:",
        ] {
            assert!(!e.contains(bad), "{bad} in {e}");
        }
    }
}

/// Issue 11, finding 9: scripting. Piped stdin runs its last statement without `;`, stops at
/// the first error with a non-zero status (`--no-bail` goes on), and keeps stdout for results;
/// `memq -c SQL` and `memq -f FILE` run and exit; `memq sql -f FILE`.
#[test]
fn scripting_like_duckdb() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(shared_fixture("memscope/real/v2_compare_baseline.csv"))
            .arg("-o")
            .arg(&ds),
    );
    let piped = |args: &[&str], input: &str| {
        let mut child = memq()
            .args(args)
            .arg(&ds)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, err) = piped(&[], "SELECT 1 AS a\n");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "+---+\n| a |\n+---+\n| 1 |\n+---+\n1 row\n");
    assert!(
        err.contains("\\? for help"),
        "the banner goes to stderr: {err}"
    );
    let script = "SELECT 1 AS a;\nSELEC x;\nSELECT 2 AS b;\n";
    let (code, out, err) = piped(&[], script);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("| a |") && !out.contains("| b |"), "{out}");
    assert!(
        err.contains("syntax error") && err.contains("^^^^^"),
        "{err}"
    );
    let (code, out, _) = piped(&["--no-bail"], script);
    assert_eq!(code, Some(0));
    assert!(out.contains("| b |"), "{out}");

    let (out, _) = run_ok(
        memq()
            .args(["-c", "SELECT count(*) AS n FROM events"])
            .arg(&ds),
    );
    assert!(out.contains("| 121 |"), "{out}");
    let q = dir.path().join("q.sql");
    std::fs::write(&q, "SELECT 40 + 2 AS answer;\nSELECT nope FROM events\n").unwrap();
    let (code, err) = run_err(memq().arg("-f").arg(&q).arg(&ds));
    assert_eq!(code, 1);
    assert!(
        err.contains("q.sql: statement 2: column 'nope' not found"),
        "{err}"
    );
    let (code, err) = run_err(memq().arg("sql").arg(&ds).arg("-f").arg(&q));
    assert_eq!(code, 1);
    assert!(
        err.contains("  SELECT nope FROM events\n         ^^^^"),
        "{err}"
    );
}

/// Issue 11, finding 10: `-o FILE` with a different `--format` is an error; an `-o` into a
/// missing folder names the file asked for (no temporary name); Markdown escapes `<module>`.
#[test]
fn output_files_and_markdown_small_findings() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(shared_fixture("memscope/real/v2_compare_baseline.csv"))
            .arg("-o")
            .arg(&ds),
    );
    let (code, err) = run_err(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT 1 AS a",
        "-o",
        "x.parquet",
        "--format",
        "csv",
    ]));
    assert_eq!(code, 2);
    assert!(
        err.contains("--format csv does not match -o x.parquet"),
        "{err}"
    );
    let missing = dir.path().join("nodir/a.parquet");
    let (code, err) = run_err(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", "SELECT 1 AS a", "-o"])
            .arg(&missing),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("nodir/a.parquet: cannot write: the folder"),
        "{err}"
    );
    assert!(!err.contains(".tmp-"), "{err}");
    let (md, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT '<module>' AS frame, 'a|b' AS t",
        "--format",
        "markdown",
    ]));
    assert_eq!(md, "| frame | t |\n|---|---|\n| &lt;module&gt; | a\\|b |\n");
}
