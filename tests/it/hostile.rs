//! The hostile-input corpus (fixtures/hostile/): every file of `expected.tsv` through
//! the `memq` binary — `memq ingest FILE -o TMP/x.memq --force` under a timeout and an address
//! space limit — checked against its expected exit code, `rejects` and `events` rows (from the
//! manifest) and stderr fragment. A refused file must leave no dataset, name the file, and never
//! panic (101) or abort (134). All differences are collected and reported together.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::fixture;

const TIMEOUT: Duration = Duration::from_secs(60);
/// Address space of each run (the binary reserves big thread stacks, which count).
const ADDRESS_SPACE_BYTES: u64 = 4 << 30;

struct Expected {
    file: String,
    exit: i32,
    rejects: Option<u64>,
    events: Option<u64>,
    fragment: Option<String>,
}

fn expected() -> Vec<Expected> {
    let text = std::fs::read_to_string(fixture("hostile/expected.tsv")).expect("expected.tsv");
    let dash = |s: &str| (s != "-").then(|| s.to_string());
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            assert!(c.len() >= 5, "expected.tsv: short line {l:?}");
            Expected {
                file: c[0].to_string(),
                exit: c[1].parse().expect("exit code"),
                rejects: dash(c[2]).map(|v| v.parse().expect("rejects")),
                events: dash(c[3]).map(|v| v.parse().expect("events")),
                fragment: dash(c[4]),
            }
        })
        .collect()
}

pub struct Run {
    pub code: Option<i32>,
    pub stderr: String,
    pub timed_out: bool,
}

/// Runs the memq binary with `args`, a timeout and an address-space limit; stdin is closed.
pub fn run_memq(args: &[&std::ffi::OsStr], env: &[(&str, &Path)]) -> Run {
    run_memq_capped(args, env, ADDRESS_SPACE_BYTES)
}

/// [`run_memq`] under an address space of `cap` bytes (`prlimit --as`).
pub fn run_memq_capped(args: &[&std::ffi::OsStr], env: &[(&str, &Path)], cap: u64) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memq"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: cap,
                    rlim_max: cap,
                };
                libc::setrlimit(libc::RLIMIT_AS, &lim);
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().expect("spawn memq");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap_or_default();
    #[cfg(unix)]
    let code = {
        use std::os::unix::process::ExitStatusExt;
        status.code().or(status.signal().map(|s| 128 + s))
    };
    #[cfg(not(unix))]
    let code = status.code();
    Run {
        code,
        stderr,
        timed_out,
    }
}

/// Rows of `table` in a dataset's manifest.
pub fn manifest_rows(dataset: &Path, table: &str) -> u64 {
    let text = std::fs::read_to_string(dataset.join("manifest.json")).expect("manifest");
    let v: serde_json::Value = serde_json::from_str(&text).expect("manifest json");
    v["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .find(|t| t["name"] == table)
        .and_then(|t| t["rows"].as_u64())
        .unwrap_or(0)
}

/// Where the file of an entry is: `gen/NAME` in the generated folder, an absolute path as is,
/// the WAL dbs copied (SQLite must not touch the committed files), the rest in place.
fn locate(file: &str, gen: &Path, copies: &Path) -> PathBuf {
    if let Some(name) = file.strip_prefix("gen/") {
        return gen.join(name);
    }
    if file.starts_with('/') {
        return PathBuf::from(file);
    }
    let src = fixture("hostile").join(file);
    if file.starts_with("db_wal") {
        let dst = copies.join(file);
        std::fs::copy(&src, &dst).expect("copy wal db");
        let wal = fixture("hostile").join(format!("{file}-wal"));
        if wal.exists() {
            std::fs::copy(&wal, copies.join(format!("{file}-wal"))).expect("copy -wal");
        }
        return dst;
    }
    src
}

#[test]
fn every_corpus_file_behaves_as_expected() {
    let work = tempfile::TempDir::new().expect("temp dir");
    let gen = work.path().join("gen");
    let copies = work.path().join("copies");
    std::fs::create_dir_all(&gen).unwrap();
    std::fs::create_dir_all(&copies).unwrap();
    let made = Command::new("python3")
        .arg(fixture("hostile/make.py"))
        .arg("--generated")
        .arg(&gen)
        .status()
        .expect(
            "python3 fixtures/hostile/make.py --generated (python3 is needed for the gen/ files)",
        );
    assert!(made.success(), "make.py --generated failed");

    let entries = expected();
    assert!(
        entries.len() >= 69,
        "expected.tsv has {} entries",
        entries.len()
    );
    let mut failures = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let input = locate(&e.file, &gen, &copies);
        let out = work.path().join(format!("out{i}.memq"));
        let run = run_memq(
            &[
                "ingest".as_ref(),
                input.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
                "--force".as_ref(),
            ],
            &[("XDG_CACHE_HOME", work.path())],
        );
        let mut why = Vec::new();
        if run.timed_out {
            why.push(format!("timed out after {TIMEOUT:?}"));
        }
        if run.code != Some(e.exit) {
            why.push(format!("exit {:?}, expected {}", run.code, e.exit));
        }
        if matches!(run.code, Some(101) | Some(134)) || run.stderr.contains("panicked") {
            why.push("panic or abort".into());
        }
        if let Some(f) = &e.fragment {
            if !run.stderr.to_lowercase().contains(&f.to_lowercase()) {
                why.push(format!("stderr lacks `{f}`"));
            }
        }
        if run.code == Some(0) {
            if let Some(r) = e.rejects {
                let got = manifest_rows(&out, "rejects");
                if got != r {
                    why.push(format!("rejects {got}, expected {r}"));
                }
            }
            if let Some(n) = e.events {
                let got = manifest_rows(&out, "events");
                if got != n {
                    why.push(format!("events {got}, expected {n}"));
                }
            }
        } else {
            if out.exists() {
                why.push("a refused input left a dataset at -o".into());
            }
            let name = Path::new(&e.file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if e.exit == 2 && !run.stderr.contains(&name) {
                why.push(format!("stderr does not name {name}"));
            }
        }
        // No temporary folder is left beside the target.
        let left: Vec<String> = std::fs::read_dir(work.path())
            .unwrap()
            .flatten()
            .map(|d| d.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!(".out{i}.memq.tmp")))
            .collect();
        if !left.is_empty() {
            why.push(format!("left {left:?}"));
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n    stderr: {}",
                e.file,
                why.join("; "),
                run.stderr.trim().replace('\n', "\n            ")
            ));
        }
        let _ = std::fs::remove_dir_all(&out);
    }
    // SQLite must not have written next to the WAL copies' originals.
    for f in [
        "db_wal_clean.db-shm",
        "db_wal_pending.db-shm",
        "db_wal_clean.db-wal",
    ] {
        assert!(
            !fixture("hostile").join(f).exists(),
            "{f} appeared in fixtures/hostile"
        );
    }
    assert!(
        !Path::new("/tmp/memq-hostile-pickle-ran").exists(),
        "a hostile pickle ran code"
    );
    assert!(
        failures.is_empty(),
        "{} of {} corpus entries differ from expected.tsv:\n{}",
        failures.len(),
        entries.len(),
        failures.join("\n")
    );
}

/// Runs `memq sql DATASET -e SQL [extra...]` and returns (exit code, stdout, stderr).
fn sql(dataset: &Path, query: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_memq"))
        .arg("sql")
        .arg(dataset)
        .arg("-e")
        .arg(query)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("memq sql");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ingest_fixture(work: &Path, file: &str) -> (PathBuf, String) {
    ingest_file(work, &fixture("hostile").join(file))
}

/// Ingests `input` into `WORK/NAME.memq`, which it returns with the stderr; must succeed.
fn ingest_file(work: &Path, input: &Path) -> (PathBuf, String) {
    let name = input.file_name().expect("a file name").to_string_lossy();
    let out = work.join(format!("{name}.memq"));
    let o = Command::new(env!("CARGO_BIN_EXE_memq"))
        .args([
            "ingest".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ])
        .output()
        .expect("memq ingest");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    (out, stderr)
}

/// A switch of unit mid-file is read row by row, warned about at its line, and no
/// value saturates; a declared µs column with ns values rejects the overflowing rows.
#[test]
fn timestamp_units_are_decided_per_row() {
    let work = tempfile::TempDir::new().unwrap();
    for file in ["csv_ts_us_then_ns.csv", "csv_ts_ns_then_us.csv"] {
        let (ds, stderr) = ingest_fixture(work.path(), file);
        assert!(
            stderr.contains("timestamp unit changes") && stderr.contains(&format!("{file}:7:")),
            "{stderr}"
        );
        let (code, out, err) = sql(&ds, "SELECT min(ts), max(ts), count(*) FROM events WHERE ts BETWEEN 1764900000000000000 AND 1764900001000000000", &["--format", "csv"]);
        assert_eq!(code, Some(0), "{err}");
        let row = out.lines().nth(1).unwrap_or_default();
        assert!(
            row.ends_with(",10"),
            "{file}: every ts is a December 2025 ns value: {out}"
        );
    }
    let (ds, _) = ingest_fixture(work.path(), "csv_ts_declared_us_ns_values.csv");
    let (_, out, _) = sql(
        &ds,
        "SELECT count(*) FROM rejects WHERE reason LIKE '%overflows%'",
        &["--format", "csv"],
    );
    assert_eq!(out.lines().nth(1), Some("5"), "{out}");
    let (_, out, _) = sql(
        &ds,
        "SELECT count(*) FROM events WHERE ts = 9223372036854775807",
        &["--format", "csv"],
    );
    assert_eq!(out.lines().nth(1), Some("0"), "{out}");
}

/// Long OR chains plan (5 000 terms) or are refused with a message (over 10 000
/// operators), in `memq sql` and in the shell, which goes on.
#[test]
fn deep_expressions_never_overflow_the_stack() {
    let work = tempfile::TempDir::new().unwrap();
    let (ds, _) = ingest_fixture(work.path(), "csv_valid_base.csv");
    let or = |n: usize| {
        let terms: Vec<String> = (0..n).map(|i| format!("id = {i}")).collect();
        format!(
            "SELECT count(*) AS n FROM events WHERE {}",
            terms.join(" OR ")
        )
    };
    let (code, out, err) = sql(&ds, &or(5000), &["--format", "csv"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.lines().nth(1),
        Some("10"),
        "ids 36.. are all below 5000: {out}"
    );
    let (code, _, err) = sql(&ds, &or(6000), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("more than 10000 operators"), "{err}");
    // The shell: a refused statement, then the session goes on.
    let mut child = Command::new(env!("CARGO_BIN_EXE_memq"))
        .arg("--no-bail")
        .arg(&ds)
        .env("XDG_STATE_HOME", work.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let script = format!("{};\n{};\nSELECT 4242 AS alive;\n\\q\n", or(1000), or(6000));
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), script.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // the session went on; the script's exit code still says that a statement failed
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("4242"), "{stdout}\n{stderr}");
    assert!(stderr.contains("more than 10000 operators"), "{stderr}");
}

/// `--memory-limit` bounds results and functions that build text; the process
/// fails with a message instead of aborting.
#[test]
fn memory_limits_fail_cleanly() {
    let work = tempfile::TempDir::new().unwrap();
    let (ds, _) = ingest_fixture(work.path(), "csv_valid_base.csv");
    for extra in [&["--memory-limit", "512M"][..], &[][..]] {
        let (code, _, err) = sql(&ds, "SELECT length(repeat('x', 2000000000))", extra);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("repeat() would build 1907 MiB"), "{err}");
    }
    // A result is streamed, never held: 200 MB of rows print within a 64M limit.
    let (code, out, err) = sql(
        &ds,
        "SELECT repeat('y', 1000) AS s FROM generate_series(1, 200000)",
        &["--memory-limit", "64M", "--format", "csv"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 200_001);
    // An operator that cannot spill (a hash join's build side) fails with the message.
    let (code, _, err) = sql(
        &ds,
        "SELECT count(*) FROM (SELECT repeat('y', 1000) || value AS s FROM generate_series(1, 200000)) a \
         JOIN (SELECT repeat('y', 1000) || value AS s FROM generate_series(1, 200000)) b USING (s)",
        &["--memory-limit", "64M", "--format", "csv"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("needs more than the memory limit of 64 MiB"),
        "{err}"
    );
    // Within the limit the same kind of query runs.
    let (code, out, err) = sql(
        &ds,
        "SELECT count(*) FROM (SELECT repeat('y', 1000) AS s FROM generate_series(1, 200000))",
        &["--memory-limit", "64M", "--format", "csv"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().nth(1), Some("200000"));
    let (code, _, err) = sql(&ds, "SELECT 1", &["--memory-limit", "lots"]);
    assert_eq!(code, Some(2), "{err}");
}

/// Runs every `(query, expected)` of `cases` with `extra` and checks its exit code 1 and
/// message fragment (`Err`) or its one-value answer (`Ok`); collects the differences.
fn check_queries(ds: &Path, extra: &[&str], cases: &[(String, Result<String, String>)]) {
    let mut failures = Vec::new();
    for (query, expected) in cases {
        let (code, out, err) = sql(ds, query, extra);
        let got = match (code, out.lines().nth(1)) {
            (Some(0), Some(v)) => Ok(v.to_string()),
            _ => Err((code, err.trim().to_string())),
        };
        let fine = match (expected, &got) {
            (Ok(v), Ok(g)) => v == g,
            (Err(fragment), Err((code, err))) => {
                *code == Some(1) && err.contains(fragment) && !err.contains("panicked")
            }
            _ => false,
        };
        if !fine {
            failures.push(format!("{query}\n    expected {expected:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Functions whose result size an argument chooses, or that grow faster than their input, fail
/// with exit 1 and a message naming the limit before they allocate (an allocation failure
/// aborts the process); within the limit they give their real values. A
/// scalar argument counts once per row (10 events × 10 MB).
#[test]
fn functions_that_build_big_values_fail_with_the_limit() {
    let work = tempfile::TempDir::new().unwrap();
    let (ds, _) = ingest_fixture(work.path(), "csv_valid_base.csv");
    let limit = " more than the memory limit (--memory-limit is 64 MiB)";
    let over = |what: &str| format!("{what}{limit}");
    let text = |f: &str, mib: u64| over(&format!("{f} would build {mib} MiB of text,"));
    let elems = |f: &str, mib: u64| over(&format!("{f} would build {mib} MiB of array elements,"));
    // Events of csv_valid_base.csv: 10 rows, their names' total length.
    let (_, names, _) = sql(
        &ds,
        "SELECT count(*), sum(length(name)), count(name) FROM events",
        &["--format", "csv"],
    );
    let n: Vec<u64> = names
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(n[0], 10, "{names}");
    let concat_len = (n[1] + 1000 * n[0]).to_string();
    let op_len = (n[1] + 1000 * n[2]).to_string();
    let cases: Vec<(String, Result<String, String>)> = vec![
        ("SELECT length(repeat('x', 100000000))".into(), Err(text("repeat()", 95))),
        ("SELECT length(repeat('ab', 1000000))".into(), Ok("2000000".into())),
        ("SELECT length(lpad('', 100000000, 'ab'))".into(), Err(text("lpad()", 95))),
        ("SELECT length(lpad('x', 1000000, 'ab'))".into(), Ok("1000000".into())),
        ("SELECT length(rpad('x', 100000000))".into(), Err(text("rpad()", 95))),
        ("SELECT length(rpad('x', 1000000))".into(), Ok("1000000".into())),
        (
            "SELECT sum(length(concat(name, repeat('x', 10000000)))) FROM events".into(),
            Err(text("concat()", 95)),
        ),
        ("SELECT sum(length(concat(name, repeat('x', 1000)))) FROM events".into(), Ok(concat_len)),
        (
            "SELECT sum(length(name || repeat('x', 10000000))) FROM events".into(),
            Err(text("`||`", 95)),
        ),
        ("SELECT sum(length(name || repeat('x', 1000))) FROM events".into(), Ok(op_len)),
        (
            "SELECT length(concat_ws(repeat('-', 10000000), 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'))"
                .into(),
            Err(text("concat_ws()", 76)),
        ),
        ("SELECT length(concat_ws(repeat('-', 1000), 'a', 'b', 'c'))".into(), Ok("2003".into())),
        (
            "SELECT length(replace(repeat('x', 1000000), 'x', repeat('y', 100)))".into(),
            Err(text("replace()", 95)),
        ),
        // The cheap bound (20 M × 100) is over the limit; the occurrences (none) are counted.
        (
            "SELECT length(replace(repeat('x', 20000000), 'q', repeat('y', 100)))".into(),
            Ok("20000000".into()),
        ),
        ("SELECT length(replace(repeat('xa', 1000), 'x', 'yyy'))".into(), Ok("4000".into())),
        (
            "SELECT length(regexp_replace(repeat('x', 1000000), 'x', repeat('y', 100), 'g'))".into(),
            Err(text("regexp_replace()", 96)),
        ),
        // The cheap bound is over the limit; the pattern matches nothing.
        (
            "SELECT length(regexp_replace(repeat('x', 20000000), 'q', repeat('y', 100), 'g'))".into(),
            Ok("20000000".into()),
        ),
        (
            "SELECT length(regexp_replace(repeat('ab', 1000), '(a)', 'X\\1\\1', 'g'))".into(),
            Ok("4000".into()),
        ),
        ("SELECT length(encode(repeat('x', 40000000), 'hex'))".into(), Err(text("encode()", 76))),
        ("SELECT length(encode(repeat('x', 1000), 'hex'))".into(), Ok("2000".into())),
        (
            "SELECT length(array_to_string(range(100000), repeat(',', 1000)))".into(),
            Err(text("array_to_string()", 97)),
        ),
        // 0..99 999: 488 890 digits and 99 999 separators of 100.
        (
            "SELECT length(array_to_string(range(100000), repeat(',', 100)))".into(),
            Ok("10488790".into()),
        ),
        ("SELECT cardinality(array_repeat(1, 10000000))".into(), Err(elems("array_repeat()", 76))),
        ("SELECT cardinality(array_repeat(1, 1000000))".into(), Ok("1000000".into())),
        ("SELECT cardinality(array_resize([1], 10000000))".into(), Err(elems("array_resize()", 76))),
        ("SELECT cardinality(array_resize([1], 1000000))".into(), Ok("1000000".into())),
        ("SELECT cardinality(range(10000000))".into(), Err(elems("range()", 76))),
        ("SELECT cardinality(range(1000000))".into(), Ok("1000000".into())),
        (
            "SELECT cardinality(generate_series(1, 10000000))".into(),
            Err(elems("generate_series()", 76)),
        ),
        ("SELECT cardinality(generate_series(1, 1000000))".into(), Ok("1000000".into())),
        (
            "SELECT cardinality(range(TIMESTAMP '2025-01-01', TIMESTAMP '2025-12-01', INTERVAL '1 second'))"
                .into(),
            Err(elems("range()", 220)),
        ),
        // 334 days of hours.
        (
            "SELECT cardinality(range(TIMESTAMP '2025-01-01', TIMESTAMP '2025-12-01', INTERVAL '1 hour'))"
                .into(),
            Ok("8016".into()),
        ),
        // Aggregates hold their state in the pool: a clean error past the limit.
        (
            "SELECT length(string_agg(repeat('x', 1000), ',')) FROM generate_series(1, 200000)".into(),
            Err("needs more than the memory limit of 64 MiB".into()),
        ),
        (
            "SELECT length(string_agg(repeat('x', 10), ',')) FROM generate_series(1, 1000)".into(),
            Ok("10999".into()),
        ),
    ];
    check_queries(&ds, &["--memory-limit", "64M", "--format", "csv"], &cases);
}

/// A 1 MB pickle whose 2 100 frames share one 1 MiB name (2.2 GB of frame text in
/// one column) ingests and reads back. The frames table's row groups are cut by their decoded
/// bytes: by their encoded size alone (one dictionary entry) the 2 100 names were one row group,
/// which the reader refused ("index overflow decoding byte array").
#[test]
fn frames_sharing_one_long_string_ingest_and_read_back() {
    let data = memq_snapshot::testdata::frames_sharing_one_name(2100, 1 << 20);
    let work = tempfile::TempDir::new().unwrap();
    let input = work.path().join("long_frames.pickle");
    std::fs::write(&input, data).unwrap();
    let (ds, _) = ingest_file(work.path(), &input);
    let (code, out, err) = sql(
        &ds,
        "SELECT count(*), sum(length(name)) FROM snap_frames WHERE length(name) > 1000",
        &["--format", "csv"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().nth(1), Some("2100,2202009600"), "{out}");
}

/// memq is linked as a position-independent executable, so its code (and the
/// bundled SQLite that parses untrusted `.db` files) gets ASLR: the ELF type is ET_DYN (3),
/// not ET_EXEC (2) as with `-no-pie`.
#[cfg(target_os = "linux")]
#[test]
fn memq_is_a_position_independent_executable() {
    let mut header = [0u8; 18];
    std::fs::File::open(env!("CARGO_BIN_EXE_memq"))
        .and_then(|mut f| f.read_exact(&mut header))
        .expect("read the ELF header");
    assert_eq!(&header[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([header[16], header[17]]), 3, "e_type");
}

/// An msMemScope db of `rows` MALLOC rows whose Python stack is a generated column of `mib`
/// MiB: a few KiB on disk, `rows × mib` MiB when read.
fn expanding_db(path: &Path, rows: usize, mib: usize) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE memscope_dump (\"ID\" INTEGER, \"Event\" TEXT, \"Event Type\" TEXT, \"Name\" TEXT, \
         \"Timestamp(ns)\" INTEGER, \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, \
         \"Ptr\" TEXT, \"Attr\" TEXT, \"Call Stack(C)\" TEXT, \
         \"Call Stack(Python)\" TEXT GENERATED ALWAYS AS (printf('%.*c', {}, 'x')) VIRTUAL)",
        mib << 20
    ))
    .unwrap();
    for i in 0..rows as i64 {
        conn.execute(
            "INSERT INTO memscope_dump (\"ID\", \"Event\", \"Event Type\", \"Name\", \"Timestamp(ns)\", \
             \"Process Id\", \"Thread Id\", \"Device Id\", \"Ptr\", \"Attr\", \"Call Stack(C)\") \
             VALUES (?1, 'MALLOC', 'PTA', '', ?2, 7, 7, '0', ?3, ?4, '')",
            rusqlite::params![
                i + 1,
                1_764_900_000_000_000_000i64 + i * 1000,
                format!("0x{:x}", 0x1000_0000 + i * 0x10_0000),
                format!("{{\"size\":\"1048576\",\"total\":\"{}\",\"used\":\"{}\"}}", 64 << 20, (i + 1) << 20),
            ],
        )
        .unwrap();
    }
}

/// Under an address-space cap (`prlimit --as`) of 2 or 4 GiB, ingest and queries finish or
/// stop with a message: never an allocation abort, never a temporary folder left. The memory
/// limit follows the cap (memq_core::budget_under_cap), and a row bigger than an eighth of it
/// is a reject that keeps the start of each cell.
#[tokio::test]
async fn memory_caps_hold() {
    const GIB: u64 = 1 << 30;
    let work = tempfile::TempDir::new().expect("temp dir");
    let env = [("XDG_CACHE_HOME", work.path())];
    let huge = work.path().join("expands_to_2gb.db");
    expanding_db(&huge, 20, 100);
    let wide = work.path().join("expands_to_300mb.db");
    expanding_db(&wide, 3, 100);
    let ingest = |input: &Path, out: &Path, cap: u64| {
        run_memq_capped(
            &[
                "ingest".as_ref(),
                input.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
                "--force".as_ref(),
            ],
            &env,
            cap,
        )
    };
    let leftovers = || -> Vec<String> {
        std::fs::read_dir(work.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    };

    // 2 GiB: a 512 MiB memory limit, so a 100 MiB row is more than one record may hold.
    let out = work.path().join("huge.memq");
    let run = ingest(&huge, &out, 2 * GIB);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(manifest_rows(&out, "rejects"), 20);
    assert_eq!(manifest_rows(&out, "events"), 0);
    assert!(leftovers().is_empty(), "{:?}", leftovers());
    let engine = memq_engine::Engine::open(&out, &memq::catalog())
        .await
        .unwrap();
    let rejects = crate::common::cells(
        &engine
            .query("SELECT count(*), min(reason), max(length(raw)) FROM rejects")
            .await
            .unwrap(),
    );
    let [n, reason, raw] = &rejects[0][..] else {
        panic!("{rejects:?}")
    };
    assert_eq!(n, "20");
    assert!(
        reason.starts_with("record of 104857")
            && reason.contains("longer than the 64 MiB one record may hold")
            && reason.contains("the first 4 KiB of each cell are kept here"),
        "{reason}"
    );
    assert!(raw.parse::<u64>().unwrap() < 10_000, "{raw}");

    // 4 GiB: a 1.5 GiB limit keeps 100 MiB rows; they ingest whole.
    let out = work.path().join("wide.memq");
    let run = ingest(&wide, &out, 4 * GIB);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(manifest_rows(&out, "events"), 3);
    assert_eq!(manifest_rows(&out, "rejects"), 0);
    // … and are queried under the smaller cap.
    let q = run_memq_capped(
        &[
            "sql".as_ref(),
            out.as_os_str(),
            "-e".as_ref(),
            "SELECT count(*), max(length(stack_py)) FROM blocks".as_ref(),
        ],
        &env,
        2 * GIB,
    );
    assert_eq!(q.code, Some(0), "{}", q.stderr);
    assert!(leftovers().is_empty(), "{:?}", leftovers());
    for r in [&run, &q] {
        assert!(!r.stderr.contains("memory allocation"), "{}", r.stderr);
    }
}
