//! The `memq` binary end to end: ingest, sql with every format and writer, functions, exit codes.

use crate::common::*;

/// `memq ingest INPUT -o DATASET`, which must succeed.
fn ingest_to(input: std::path::PathBuf, dataset: &std::path::Path) {
    run_ok(memq().arg("ingest").arg(input).arg("-o").arg(dataset));
}

#[test]
fn ingest_then_sql_in_every_format() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    let baseline = real_fixture("memscope/real/v2_compare_baseline.csv");
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
    ingest_to(real_fixture("memscope/real/v2_compare_baseline.csv"), &ds);
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
        .arg(real_fixture("memscope/real/v2_compare_baseline.csv"))
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
    let (_i, engine) = open(&[real_fixture("memscope/real/v2_compare_baseline.csv")]).await;
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
///
/// The peak is the child's VmHWM, read from /proc while it runs. Not `wait4`'s `ru_maxrss`:
/// the child is spawned with vfork, and at its exec the kernel folds the high-water mark of the
/// memory it then shares — this test process's, with every dataset the other tests of the
/// suite hold — into the child's maximum (a full suite measured 314–328 MiB for a child that
/// peaks at 130 MiB).
fn run_measured(cmd: &mut std::process::Command) -> (Option<i32>, String, String, u64) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_file = std::path::PathBuf::from(format!("/proc/{}/status", child.id()));
    let poll = std::thread::spawn(move || {
        let mut peak_kb = 0u64;
        // a zombie's status has no VmHWM line: the loop ends when the child has exited
        while let Some(kb) = std::fs::read_to_string(&status_file).ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        }) {
            peak_kb = peak_kb.max(kb);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        peak_kb * 1024
    });
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
    let code = child.wait().unwrap().code();
    let rss = poll.join().unwrap();
    assert!(rss > 0, "no VmHWM read for the child");
    (code, so, se, rss)
}

/// `memq sql` streams: a big `SELECT *` shows its head and tail with
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
    ingest_to(real_fixture("memscope/real/v2_compare_baseline.csv"), &ds);
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

/// SQL errors read as one line with the SQL line and a caret under the
/// failing token; "did you mean" for unknown tables, views and table functions; no Rust Debug
/// text or internal catalog names.
#[test]
fn sql_errors_have_a_caret_and_suggestions() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    ingest_to(real_fixture("memscope/real"), &ds);
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

/// Scripting. Piped stdin runs its last statement without `;`, stops at
/// the first error with a non-zero status (`--no-bail` goes on), and keeps stdout for results;
/// `memq -c SQL` and `memq -f FILE` run and exit; `memq sql -f FILE`.
#[test]
fn scripting_like_duckdb() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    ingest_to(real_fixture("memscope/real/v2_compare_baseline.csv"), &ds);
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
    // --no-bail runs every statement and still exits 1 at the end: the script had an error
    let (code, out, err) = piped(&["--no-bail"], script);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("| a |") && out.contains("| b |"), "{out}");
    assert!(err.contains("--no-bail went on to the end"), "{err}");
    let (code, _, err) = piped(&["--no-bail"], "SELECT 1 AS a;\nSELECT 2 AS b;\n");
    assert_eq!(code, Some(0), "{err}");
    // a bare \format says the current format
    let (code, out, err) = piped(&[], "\\format\n\\format csv\n\\format\n");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "Output format is table.\nOutput format is csv.\nOutput format is csv.\n"
    );

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
        err.contains("column 'nope' not found") && err.contains("q.sql: statement 2 failed"),
        "{err}"
    );
    let (code, err) = run_err(memq().arg("sql").arg(&ds).arg("-f").arg(&q));
    assert_eq!(code, 1);
    assert!(
        err.contains("  SELECT nope FROM events\n         ^^^^"),
        "{err}"
    );
}

/// `-o FILE` with a different `--format` is an error; an `-o` into a
/// missing folder names the file asked for (no temporary name); Markdown escapes `<module>`.
#[test]
fn output_files_and_markdown_small_findings() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    ingest_to(real_fixture("memscope/real/v2_compare_baseline.csv"), &ds);
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

/// The g3 example ingested into a temporary dataset.
fn g3_dataset(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let ds = dir.path().join("g3.memq");
    ingest_to(fixture("memscope/g3_run"), &ds);
    ds
}

/// The rows of a csv result, as text cells (header left out).
fn count_rows(ds: &std::path::Path, sql: &str) -> Vec<Vec<String>> {
    let (out, _) = run_ok(
        memq()
            .arg("sql")
            .arg(ds)
            .args(["-e", sql, "--format", "csv"]),
    );
    out.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// The single value of a one-cell csv result.
fn csv_value(ds: &std::path::Path, sql: &str) -> String {
    let (out, _) = run_ok(
        memq()
            .arg("sql")
            .arg(ds)
            .args(["-e", sql, "--format", "csv"]),
    );
    out.lines().nth(1).unwrap_or_default().to_string()
}

/// The table view shows bytes, moments, durations, percentages and
/// floats by their unit; csv and `--raw` keep the stored values.
#[test]
fn table_view_shows_values_by_their_unit() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let pick = "FROM peaks WHERE pool = 'PTA' ORDER BY peak_ts LIMIT 1";
    let bytes: i64 = csv_value(&ds, &format!("SELECT peak_bytes {pick}"))
        .parse()
        .unwrap();
    let ts: i64 = csv_value(&ds, &format!("SELECT peak_ts {pick}"))
        .parse()
        .unwrap();
    let start: i64 = csv_value(&ds, "SELECT min(ts) FROM events")
        .parse()
        .unwrap();
    let (table, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        &format!("SELECT peak_bytes, -peak_bytes AS neg, peak_ts {pick}"),
    ]));
    let mib = bytes as f64 / 1048576.0;
    assert!(table.contains(&format!("| {mib:.2} MiB ")), "{table}");
    assert!(table.contains(&format!("| -{mib:.2} MiB ")), "{table}");
    // The dump's folder is named after its start, 2025-12-05 02:00:00 UTC (1764900000 s).
    assert_eq!(ts / 1_000_000_000, 1_764_900_000);
    let off = ts - start;
    let moment = format!(
        "2025-12-05T02:00:00.{:09}Z +{}.{:06} s",
        ts % 1_000_000_000,
        off / 1_000_000_000,
        off % 1_000_000_000 / 1000
    );
    assert!(table.contains(&moment), "{moment}\n{table}");
    // The step the moment falls in, when the processes and devices in a step agree on it.
    let steps = csv_value(
        &ds,
        &format!(
            "SELECT concat_ws('|', count(DISTINCT step), min(step)) FROM steps \
             WHERE start_ts <= {ts} AND (end_ts IS NULL OR end_ts >= {ts})"
        ),
    );
    let (n, step) = steps.split_once('|').unwrap_or((&steps, ""));
    let named = table.contains(&format!("{moment} step {step} |"));
    assert_eq!(named, n == "1", "{steps}\n{table}");
    let (raw, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "--raw",
        "-e",
        &format!("SELECT peak_bytes, peak_ts {pick}"),
    ]));
    assert!(
        raw.contains(&format!("| {bytes} ")) && raw.contains(&format!("| {ts} ")),
        "{raw}"
    );
    // Percentages with at most 2 decimals, durations with a unit.
    let q = format!("SELECT max(share) AS s FROM breakdown_at({ts}, 'PTA')");
    let share: f64 = csv_value(&ds, &q).parse().unwrap();
    let (table, _) = run_ok(memq().arg("sql").arg(&ds).args(["-e", &q]));
    let two = format!("{share:.2}");
    let two = two.trim_end_matches('0').trim_end_matches('.');
    assert!(table.contains(&format!("| {two} % ")), "{share} {table}");
    let q = "SELECT duration_ns FROM steps WHERE duration_ns IS NOT NULL ORDER BY start_ts LIMIT 1";
    let d: i64 = csv_value(&ds, q).parse().unwrap();
    let (table, _) = run_ok(memq().arg("sql").arg(&ds).args(["-e", q]));
    assert!(
        table.contains(&format!("| {:.3} ms ", d as f64 / 1e6)),
        "{d} {table}"
    );
    let (table, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", "SELECT 1.0 / 3 AS third"]),
    );
    assert!(table.contains("| 0.333333 |"), "{table}");
}

/// The snapshot's time_us, peak and byte columns by their unit (`snap_peak.active_peak`
/// among them, not printed raw).
#[test]
fn snapshot_views_show_bytes_and_times() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("s.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(real_fixture(
                "snapshots/real/cuda_transformer_forward.pickle",
            ))
            .arg("-o")
            .arg(&ds),
    );
    let peak: i64 = csv_value(&ds, "SELECT active_peak FROM snap_peak")
        .parse()
        .unwrap();
    let (table, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT active_peak, active_peak_time_us FROM snap_peak",
    ]));
    let gib = peak as f64 / (1u64 << 30) as f64;
    assert!(table.contains(&format!("| {gib:.2} GiB ")), "{table}");
    let t: i64 = csv_value(&ds, "SELECT active_peak_time_us FROM snap_peak")
        .parse()
        .unwrap();
    assert!(
        table.contains(&format!(".{:06}Z +", t % 1_000_000)),
        "{table}"
    );
}

/// Table-function arguments are checked (a clear error, not 0 rows), and
/// a moment may be written readably or as a scalar subquery.
#[test]
fn table_function_arguments_are_checked_and_readable() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let fails = |sql: &str| run_err(memq().arg("sql").arg(&ds).args(["-e", sql])).1;
    let count = |sql: &str| csv_value(&ds, sql);
    let peak: i64 = csv_value(
        &ds,
        "SELECT ts FROM curve WHERE pool = 'PTA' ORDER BY live_bytes DESC, ts LIMIT 1",
    )
    .parse()
    .unwrap();
    let e = fails(&format!("SELECT * FROM breakdown_at({peak}, 'pta')"));
    assert!(e.contains("unknown pool 'pta'; did you mean 'PTA'?"), "{e}");
    let us = peak / 1000;
    let e = fails(&format!("SELECT * FROM breakdown_at({us}, 'PTA')"));
    assert!(
        e.contains("looks like µs") && e.contains(&format!("use {}", us * 1000)),
        "{e}"
    );
    let e = fails("SELECT * FROM window_summary(0, 5)");
    assert!(e.contains("window_summary: t1: 5 is not in the run"), "{e}");
    // Readable forms give the rows of the moment they name.
    let at = |arg: &str| count(&format!("SELECT count(*) FROM breakdown_at({arg}, 'PTA')"));
    let expected = at(&peak.to_string());
    assert_ne!(expected, "0");
    // 'peak' is each series' own peak: the rows of every PTA series at its own peak moment.
    let mut own_rows = 0u64;
    for s in count_rows(
        &ds,
        "SELECT source, pid, device, peak_ts FROM peaks WHERE pool = 'PTA' AND metric = 'live'",
    ) {
        own_rows += count(&format!(
            "SELECT count(*) FROM breakdown_at({}, 'PTA') WHERE source = '{}' AND pid = {} AND device = '{}'",
            s[3], s[0], s[1], s[2]
        ))
        .parse::<u64>()
        .unwrap();
    }
    assert!(own_rows > 0);
    assert_eq!(at("'peak'"), own_rows.to_string());
    // Per device: each device's rows at its own peak, as its own moment gives them.
    let per_device =
        count("SELECT count(DISTINCT device) FROM breakdown_at('peak', NULL) WHERE pool = 'HAL'");
    let devices =
        count("SELECT count(DISTINCT device) FROM peaks WHERE pool = 'HAL' AND metric = 'live'");
    assert_eq!(per_device, devices);
    for dev in count_rows(
        &ds,
        "SELECT device, peak_ts FROM peaks WHERE pool = 'HAL' AND metric = 'live'",
    ) {
        let own = count(&format!(
            "SELECT sum(bytes) FROM breakdown_at({}, 'HAL') WHERE device = '{}'",
            dev[1], dev[0]
        ));
        let via_peak = count(&format!(
            "SELECT sum(bytes) FROM breakdown_at('peak', 'HAL') WHERE device = '{}'",
            dev[0]
        ));
        assert_eq!(via_peak, own, "device {}", dev[0]);
    }
    assert_eq!(
        at("(SELECT ts FROM curve WHERE pool = 'PTA' ORDER BY live_bytes DESC, ts LIMIT 1)"),
        expected
    );
    let start: i64 = csv_value(&ds, "SELECT min(ts) FROM events")
        .parse()
        .unwrap();
    assert_eq!(at("'+0.1s'"), at(&(start + 100_000_000).to_string()));
    let e = fails("SELECT * FROM breakdown_at((SELECT ts FROM curve), 'PTA')");
    assert!(e.contains("a scalar subquery must give one"), "{e}");
    let e = fails("SELECT * FROM breakdown_at('yesterday')");
    assert!(e.contains("'yesterday' is not a moment"), "{e}");

    let snap = dir.path().join("s.memq");
    ingest_to(
        real_fixture("snapshots/real/torch_npu_two_devices.pkl"),
        &snap,
    );
    let fails = |sql: &str| run_err(memq().arg("sql").arg(&snap).args(["-e", sql])).1;
    let e = fails("SELECT * FROM snap_compare('torch_npu_two_devices.pkl', 'x')");
    assert!(e.contains("unknown snapshot 'x'"), "{e}");
    // A unique part of a snapshot's name names it.
    let whole = csv_value(
        &snap,
        "SELECT count(*) FROM state_at(5, 'torch_npu_two_devices.pkl', 1)",
    );
    let part = csv_value(&snap, "SELECT count(*) FROM state_at(5, 'two_devices', 1)");
    assert_eq!(part, whole);
    let e = fails("SELECT * FROM state_at(5, NULL, 7)");
    assert!(e.contains("unknown device 7 (devices: 0, 1)"), "{e}");
    let e = fails("SELECT * FROM state_at(5, 'torch_npu_two_devices.pkl', 2)");
    assert!(
        e.contains("unknown device 2 (devices of torch_npu_two_devices.pkl: 0, 1)"),
        "{e}"
    );
    let n = csv_value(
        &snap,
        "SELECT count(*) FROM state_at(5, 'torch_npu_two_devices.pkl', 1)",
    );
    assert_ne!(n, "0");
}

/// `memq views NAME` and `memq export --views NAME` say which analysis was meant; `memq views`
/// lists the analyses by source, like `\dv`.
#[test]
fn views_listing_groups_and_suggests() {
    let (code, err) = run_err(memq().args(["views", "peak"]));
    assert_eq!(code, 2);
    assert!(
        err.contains("no analysis named peak; did you mean `peaks`?"),
        "{err}"
    );
    let (out, _) = run_ok(memq().arg("views"));
    let memscope = out.find("memscope (").expect(&out);
    let snapshot = out.find("snapshot (").expect(&out);
    assert!(memscope < out.find("  peaks ").unwrap() && out.find("  peaks ").unwrap() < snapshot);
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let (code, err) = run_err(
        memq()
            .arg("export")
            .arg(&ds)
            .args(["--views", "leak_sumary", "-o"])
            .arg(dir.path().join("x")),
    );
    assert_eq!(code, 2);
    assert!(err.contains("did you mean `leak_summary`?"), "{err}");
}

/// `--format line` (one record per row) and `--chart` (bars over text, a curve over
/// numbers and times).
#[test]
fn line_format_and_charts() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "--format",
        "line",
        "-e",
        "SELECT pool, peak_bytes FROM peaks ORDER BY peak_bytes DESC LIMIT 2",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("-[ row 1 ]---"), "{out}");
    assert!(lines[1].starts_with("pool       | "), "{out}");
    assert!(
        lines[2].starts_with("peak_bytes | ") && lines[2].ends_with("iB"),
        "{out}"
    );
    assert!(lines[3].starts_with("-[ row 2 ]---"), "{out}");
    assert_eq!(lines.last(), Some(&"2 rows"), "{out}");
    let q = "SELECT pool, max(live_bytes) AS peak FROM curve GROUP BY pool ORDER BY peak DESC";
    let pools = csv_value(&ds, "SELECT count(DISTINCT pool) FROM curve");
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args(["--chart", "-e", q]));
    let bars = out.lines().filter(|l| l.contains(" │█")).count();
    assert_eq!(bars.to_string(), pools, "{out}");
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "--chart",
        "-e",
        "SELECT ts, live_bytes FROM curve WHERE pool = 'HAL' ORDER BY ts",
    ]));
    let n = csv_value(
        &ds,
        "SELECT count(*) FROM curve WHERE pool = 'HAL' AND live_bytes IS NOT NULL",
    );
    assert!(
        out.starts_with(&format!("live_bytes over ts ({n} points)\n")),
        "{out}"
    );
    assert!(
        out.contains(" ┤") && out.contains("└─") && out.contains("+0.000000 s"),
        "{out}"
    );
}

/// `memq sql --param` binds `$name` as a typed value; every command on a
/// raw input goes through the ingest cache, so only the first one ingests (the cache's note and
/// the dataset's unchanged manifest say so); `--no-cache` leaves the cache alone.
#[test]
fn every_command_on_a_raw_input_uses_the_ingest_cache() {
    let dir = tempfile::TempDir::new().unwrap();
    let dump = dir.path().join("baseline.csv");
    std::fs::copy(real_fixture("memscope/real/v2_compare_baseline.csv"), &dump).unwrap();
    let cache = dir.path().join("cache");
    let cmd = |args: &[&str]| {
        let mut c = memq();
        c.args(&args[..1])
            .arg(&dump)
            .args(&args[1..])
            .env("XDG_CACHE_HOME", &cache);
        c
    };
    let (out, err) = run_ok(&mut cmd(&[
        "sql",
        "-e",
        "SELECT $n + 1 AS n1, $who AS who, count(*) AS rows FROM events",
        "--param",
        "n=41",
        "--param",
        "who='a b'",
        "--format",
        "csv",
    ]));
    assert_eq!(out, "n1,who,rows\n42,a b,121\n");
    assert!(err.contains("ingested into cache"), "{err}");
    let datasets: Vec<std::path::PathBuf> = std::fs::read_dir(cache.join("memq/datasets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(datasets.len(), 1, "{datasets:?}");
    let manifest = datasets[0].join("manifest.json");
    let stamp = std::fs::metadata(&manifest).unwrap().modified().unwrap();

    let q = dir.path().join("q.sql");
    std::fs::write(&q, "SELECT count(*) AS n FROM events;\n").unwrap();
    let export = dir.path().join("export");
    let db = dir.path().join("x.db");
    let runs: Vec<Vec<&str>> = vec![
        vec!["sql", "-e", "SELECT count(*) AS n FROM events"],
        vec!["run", q.to_str().unwrap()],
        vec!["export", "--views", "peaks", "-o", export.to_str().unwrap()],
        vec!["report"],
        vec!["check", "--max-peak", "1TiB"],
        vec!["to-db", "-o", db.to_str().unwrap()],
    ];
    for args in &runs {
        let (_, err) = run_ok(&mut cmd(args));
        assert!(
            err.contains(&format!("using cached dataset {}", datasets[0].display())),
            "{args:?}: {err}"
        );
        assert!(!err.contains("ingested"), "{args:?}: {err}");
    }
    assert_eq!(
        std::fs::metadata(&manifest).unwrap().modified().unwrap(),
        stamp,
        "the cached dataset was not rebuilt"
    );
    let (out, err) = run_ok(&mut cmd(&[
        "sql",
        "--no-cache",
        "-e",
        "SELECT count(*) AS n FROM events",
        "--format",
        "csv",
    ]));
    assert_eq!(out, "n\n121\n");
    assert!(!err.contains("cache"), "{err}");
}

/// Agent mode: with `AI_AGENT` set and stdout a pipe (or with `--agent`), results are
/// Markdown tables with `name:TYPE` headers and raw values, cut at `--maxrows` with a count, and
/// errors are one JSON line on stderr; without either, the usual table.
#[test]
fn agent_mode_writes_typed_markdown_and_json_errors() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    ingest_to(real_fixture("memscope/real/v2_compare_baseline.csv"), &ds);
    let agent = |args: &[&str]| {
        let mut c = memq();
        c.arg("sql").arg(&ds).args(args).env("AI_AGENT", "1");
        c
    };
    let (out, _) = run_ok(&mut agent(&[
        "-e",
        "SELECT event, count(*) AS n, max(size) AS size FROM events WHERE event = 'MALLOC' GROUP BY event",
    ]));
    let engine_rows = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let e = memq_engine::Engine::open(&ds, &memq::catalog())
            .await
            .unwrap();
        rows(
            &e,
            "SELECT count(*), max(size) FROM events WHERE event = 'MALLOC'",
        )
        .await
    });
    assert_eq!(
        out,
        format!(
            "| event:VARCHAR | n:BIGINT | size:BIGINT |\n|---|---|---|\n| MALLOC | {} | {} |\n",
            engine_rows[0][0], engine_rows[0][1]
        )
    );
    let (out, _) = run_ok(&mut agent(&[
        "-e",
        "SELECT id FROM events ORDER BY id",
        "--maxrows",
        "2",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(lines[0], "| id:BIGINT |");
    assert_eq!(
        lines[4],
        "121 rows, 2 shown (LIMIT/OFFSET or --maxrows 0 for the others)"
    );
    // An error: one JSON line, the exit status as without agent mode.
    let (code, err) = run_err(&mut agent(&["-e", "SELECT * FORM events"]));
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    let v: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(v["kind"], "query");
    assert_eq!(v["exit_code"], 1);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("syntax error at line 1, column 10"),
        "{v}"
    );
    // A script piped into the shell stops at its first error: still one JSON line.
    let mut piped = memq();
    piped
        .arg(&ds)
        .env("AI_AGENT", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = piped.spawn().unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        b"SELECT nope FROM peaks;\nSELECT 1;\n",
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let json: Vec<&str> = err.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(json.len(), 1, "{err}");
    assert!(json[0].contains("column 'nope' not found"), "{err}");
    let (code, err) = run_err(&mut agent(&["--no-such-flag"]));
    assert_eq!(code, 2);
    let v: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(v["kind"], "usage");
    // --agent without the variable; neither: the table.
    let mut plain = memq();
    plain.arg("sql").arg(&ds).args(["-e", "SELECT 1 AS a"]);
    for v in memq::agent::AGENT_ENV {
        plain.env_remove(v);
    }
    let (out, _) = run_ok(plain.arg("--agent"));
    assert_eq!(out, "| a:BIGINT |\n|---|\n| 1 |\n");
    let mut plain = memq();
    plain.arg("sql").arg(&ds).args(["-e", "SELECT 1 AS a"]);
    for v in memq::agent::AGENT_ENV {
        plain.env_remove(v);
    }
    let (out, _) = run_ok(&mut plain);
    assert_eq!(out, "+---+\n| a |\n+---+\n| 1 |\n+---+\n1 row\n");
}

/// `SUMMARIZE` gives one row per column with figures that match direct aggregates.
#[test]
fn summarize_gives_a_row_per_column() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let q = "SELECT size, pool, owner FROM blocks WHERE pool = 'PTA'";
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "--format",
        "csv",
        "-e",
        &format!("SUMMARIZE {q}"),
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "column_name,column_type,min,max,approx_unique,avg,std,q25,q50,q75,count,null_percentage,unit"
    );
    assert!(lines[1].ends_with(",bytes"), "{out}");
    // The table view shows each row's figures in its column's unit.
    let (table, _) = run_ok(
        memq()
            .arg("sql")
            .arg(&ds)
            .args(["-e", &format!("SUMMARIZE {q}")]),
    );
    let size_row = table.lines().find(|l| l.starts_with("| size ")).unwrap();
    assert!(
        size_row.contains(" MiB ") || size_row.contains(" KiB "),
        "{table}"
    );
    assert_eq!(lines.len(), 4, "{out}");
    let direct = csv_value(
        &ds,
        &format!("SELECT concat_ws('|', min(size), max(size), count(DISTINCT size)) FROM ({q})"),
    );
    let size: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(&size[..2], ["size", "BIGINT"], "{out}");
    assert_eq!(size[2..5].join("|"), direct, "{out}");
    let n = csv_value(&ds, &format!("SELECT count(*) FROM ({q})"));
    let owners = csv_value(&ds, &format!("SELECT count(owner) FROM ({q})"));
    let owner: Vec<&str> = lines[3].split(',').collect();
    assert_eq!(owner[10], owners, "{out}");
    let nulls = 100.0 * (n.parse::<f64>().unwrap() - owners.parse::<f64>().unwrap())
        / n.parse::<f64>().unwrap();
    assert!(
        (owner[11].parse::<f64>().unwrap() - nulls).abs() < 1e-9,
        "{out}"
    );
    let e = run_err(memq().arg("sql").arg(&ds).args(["-e", "SUMMARIZE nope"])).1;
    assert!(e.contains("SUMMARIZE: no table or view named nope"), "{e}");
}

/// `--param NAME=VALUE` also binds `$NAME` for `memq -c` / `-f` and for the shell (piped here),
/// as a typed value (`$n + 1` is arithmetic, `$who` a string).
#[test]
fn params_reach_memq_c_and_the_shell() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::TempDir::new().unwrap();
    let ds = dir.path().join("b.memq");
    ingest_to(real_fixture("memscope/real/v2_compare_baseline.csv"), &ds);
    let sql = "SELECT $n + 1 AS n1, $who AS who";
    let (out, _) = run_ok(
        memq()
            .args(["-c", sql, "--param", "n=41", "--param", "who='x y'"])
            .arg(&ds),
    );
    assert_eq!(
        out,
        "+----+-----+\n| n1 | who |\n+----+-----+\n| 42 | x y |\n+----+-----+\n1 row\n"
    );
    let mut child = memq()
        .args(["--param", "n=1", "--param", "who=z"])
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
        .write_all(format!("{sql};\n").as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "+----+-----+\n| n1 | who |\n+----+-----+\n| 2  | z   |\n+----+-----+\n1 row\n"
    );
    let (code, err) = run_err(memq().args(["-c", "SELECT 1", "--param", "bad"]).arg(&ds));
    assert_eq!(code, 2);
    assert!(err.contains("--param bad: expected name=value"), "{err}");
}

/// Addresses read as dumps and stacks print them: pointer columns show `0x` + 16 hex digits in
/// the table view (csv keeps the number), and a bare `0x…` literal, a `'0x…'` string compared
/// with an address column, an IN list and a `--param` in hex all find the same rows as the
/// decimal value.
#[test]
fn pointers_are_hex_in_and_out() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let ptr: u64 = csv_value(
        &ds,
        "SELECT ptr FROM events WHERE ptr IS NOT NULL ORDER BY row_idx LIMIT 1",
    )
    .parse()
    .unwrap();
    let hex = format!("0x{ptr:016x}");
    let n = csv_value(
        &ds,
        &format!("SELECT count(*) FROM events WHERE ptr = {ptr}"),
    );
    assert_ne!(n, "0");
    for form in [
        format!("ptr = {hex}"),
        format!("ptr = '{hex}'"),
        format!("'{hex}' = ptr"),
        format!("ptr IN ({hex}, 1)"),
        format!("ptr BETWEEN {hex} AND '{hex}'"),
    ] {
        let got = csv_value(&ds, &format!("SELECT count(*) FROM events WHERE {form}"));
        assert_eq!(got, n, "{form}");
    }
    let (out, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        "SELECT count(*) AS n FROM events WHERE ptr = $p",
        "--format",
        "csv",
        "--param",
        &format!("p={hex}"),
    ]));
    assert_eq!(out.lines().nth(1), Some(n.as_str()), "{out}");
    // A string compared with a text column stays a string.
    let text = csv_value(
        &ds,
        &format!("SELECT count(*) FROM events WHERE event = '{hex}'"),
    );
    assert_eq!(text, "0");
    let (table, _) = run_ok(memq().arg("sql").arg(&ds).args([
        "-e",
        &format!("SELECT ptr, size FROM events WHERE ptr = {ptr} LIMIT 1"),
    ]));
    assert!(table.contains(&format!("| {hex} |")), "{table}");
}

/// The ingest summary lines up its counts, whatever the length of the table names.
#[test]
fn ingest_summary_lines_up() {
    let dir = tempfile::TempDir::new().unwrap();
    let (_, out) = run_ok(
        memq()
            .arg("ingest")
            .arg(real_fixture("memscope/real"))
            .arg("-o")
            .arg(dir.path().join("r.memq")),
    );
    let ends: Vec<usize> = out
        .lines()
        .filter(|l| l.starts_with("  ") && l.ends_with(" rows"))
        .map(|l| l.len())
        .collect();
    assert!(ends.len() > 10, "{out}");
    assert!(ends.iter().all(|&e| e == ends[0]), "{out}");
    assert!(out.contains("owner_live_peaks"), "{out}");
}

/// `memq INPUT -f FILE` takes the meta commands `\i` takes, stops at the first error (exit 1,
/// naming the file) unless --no-bail; `memq run` without -o labels each table with its file and
/// result, and leaves csv bare.
#[test]
fn scripts_take_meta_commands_and_run_labels_results() {
    let dir = tempfile::TempDir::new().unwrap();
    let ds = g3_dataset(&dir);
    let script = dir.path().join("s.sql");
    std::fs::write(
        &script,
        "\\format csv\nSELECT 2 AS b;\n\\set maxrows 3\nSELECT 3 AS c\n",
    )
    .unwrap();
    let (out, _) = run_ok(memq().arg(&ds).arg("-f").arg(&script));
    assert_eq!(
        out,
        "Output format is csv.\nb\n2\nmaxrows = 3: tables show at most 3 rows (head and tail).\nc\n3\n"
    );
    let bad = dir.path().join("bad.sql");
    std::fs::write(&bad, "SELECT nope;\nSELECT 4 AS d;\n").unwrap();
    let (code, err) = run_err(memq().arg(&ds).arg("-f").arg(&bad));
    assert_eq!(code, 1);
    assert!(
        err.contains("column 'nope' not found") && err.contains("bad.sql"),
        "{err}"
    );
    let mut go_on = memq();
    go_on.arg(&ds).arg("-f").arg(&bad).arg("--no-bail");
    let o = go_on.output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("| 4 |"));
    let (q1, q2) = (dir.path().join("q1.sql"), dir.path().join("q2.sql"));
    std::fs::write(&q1, "SELECT 1 AS a;\nSELECT 2 AS b;\n").unwrap();
    std::fs::write(&q2, "SELECT 3 AS c;\n").unwrap();
    let (out, _) = run_ok(memq().arg("run").arg(&ds).arg(&q1).arg(&q2));
    let labels: Vec<&str> = out.lines().filter(|l| l.starts_with("-- ")).collect();
    assert_eq!(labels.len(), 3, "{out}");
    assert!(
        labels[0].ends_with("q1.sql, result 1 of 2") && labels[2].ends_with("q2.sql"),
        "{out}"
    );
    let (out, _) = run_ok(
        memq()
            .arg("run")
            .arg(&ds)
            .arg(&q2)
            .args(["--format", "csv"]),
    );
    assert_eq!(out, "c\n3\n");
}
