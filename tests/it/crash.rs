//! Faults and concurrency: `memq ingest` killed with SIGKILL at
//! several points leaves no dataset at the target and the next run removes its temporary
//! folder and succeeds; a killed `--force` keeps the old dataset whole; a leftover `.NAME.old`
//! or stale `.NAME.tmp-PID` never blocks `--force`; shells opening the same raw input at once
//! through the cache all succeed and exactly one of them ingests; concurrent ingests into one
//! target all succeed.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::hostile::manifest_rows;

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";

/// A dump of `rows` MALLOC/FREE rows (about 190 bytes each).
fn write_dump(path: &Path, rows: u64) {
    let mut f = std::io::BufWriter::new(fs::File::create(path).unwrap());
    f.write_all(HEADER.as_bytes()).unwrap();
    for i in 0..rows {
        let ptr = 0x1000_0000_0000u64 + (i / 2) * 0x20_0000;
        let (event, attr) = if i % 2 == 0 {
            (
                "MALLOC",
                format!("{{allocation_id:{i},addr:0x{ptr:016x},size:2097152,owner:CANN@APP}}"),
            )
        } else {
            (
                "FREE",
                format!("{{allocation_id:{},addr:0x{ptr:016x},size:2097152}}", i - 1),
            )
        };
        writeln!(
            f,
            "{i},{event},HAL,N/A,{},2579302,2579302,0,0x{ptr:016x},\"{attr}\",,",
            1_764_900_000_000_000_000u64 + i * 1000
        )
        .unwrap();
    }
}

fn memq() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memq"));
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn ingest(input: &Path, out: &Path) -> Command {
    let mut c = memq();
    c.arg("ingest").arg(input).arg("-o").arg(out).arg("--force");
    c
}

fn leftovers(dir: &Path, name: &str) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with(&format!(".{name}.tmp")) || n.starts_with(&format!(".{name}.old"))
        })
        .collect()
}

fn kill_after(mut child: Child, delay: Duration) -> bool {
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    !finished
}

const ROWS: u64 = 150_000;

#[test]
fn sigkill_during_ingest_leaves_no_dataset_and_the_next_run_cleans_up() {
    let dir = tempfile::TempDir::new().unwrap();
    let input = dir.path().join("memscope_dump_big.csv");
    write_dump(&input, ROWS);
    let out = dir.path().join("big.memq");
    let mut killed = 0;
    for ms in [50u64, 300, 800, 1500] {
        let child = ingest(&input, &out).spawn().unwrap();
        if kill_after(child, Duration::from_millis(ms)) {
            killed += 1;
            assert!(
                !out.exists(),
                "a dataset appeared at the target after SIGKILL at {ms} ms"
            );
        } else {
            // It finished before the kill: then the dataset is whole.
            assert_eq!(manifest_rows(&out, "events"), ROWS);
            fs::remove_dir_all(&out).unwrap();
        }
    }
    assert!(
        killed >= 2,
        "only {killed} runs were killed mid-way; the input is too small"
    );
    let done = ingest(&input, &out).output().unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert_eq!(manifest_rows(&out, "events"), ROWS);
    assert!(
        leftovers(dir.path(), "big.memq").is_empty(),
        "{:?}",
        leftovers(dir.path(), "big.memq")
    );
    assert!(
        stderr.contains("left by a killed or failed run"),
        "{stderr}"
    );
}

#[test]
fn force_after_a_crash_keeps_the_old_dataset_and_then_replaces_it() {
    let dir = tempfile::TempDir::new().unwrap();
    let small = dir.path().join("memscope_dump_small.csv");
    write_dump(&small, 10);
    let big = dir.path().join("memscope_dump_big.csv");
    write_dump(&big, ROWS);
    let out = dir.path().join("x.memq");
    assert!(ingest(&small, &out).status().unwrap().success());
    assert_eq!(manifest_rows(&out, "events"), 10);
    // A --force killed mid-way: the old dataset is still there, whole.
    let child = ingest(&big, &out).spawn().unwrap();
    kill_after(child, Duration::from_millis(400));
    assert!(matches!(manifest_rows(&out, "events"), 10 | ROWS));
    // Leftovers of older memq versions and of dead processes.
    fs::create_dir_all(dir.path().join(".x.memq.old")).unwrap();
    fs::write(dir.path().join(".x.memq.old/manifest.json"), "stale").unwrap();
    fs::create_dir_all(dir.path().join(".x.memq.tmp-999999999/events")).unwrap();
    let done = ingest(&big, &out).output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(manifest_rows(&out, "events"), ROWS);
    assert!(
        leftovers(dir.path(), "x.memq").is_empty(),
        "{:?}",
        leftovers(dir.path(), "x.memq")
    );
}

#[test]
fn concurrent_ingests_into_one_target_all_succeed() {
    let dir = tempfile::TempDir::new().unwrap();
    let input = dir.path().join("memscope_dump_a.csv");
    write_dump(&input, 2000);
    let out = dir.path().join("same.memq");
    let children: Vec<Child> = (0..4)
        .map(|_| ingest(&input, &out).spawn().unwrap())
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(manifest_rows(&out, "events"), 2000);
    assert!(leftovers(dir.path(), "same.memq").is_empty());
}

/// Four shells on the same raw input at once (the cache path): all succeed, one ingests; after
/// the input changes, again one ingests and the others reuse its result.
#[test]
fn concurrent_shells_share_one_cache_ingest() {
    let dir = tempfile::TempDir::new().unwrap();
    let run_dir = dir.path().join("run");
    fs::create_dir_all(&run_dir).unwrap();
    let input = run_dir.join("memscope_dump_20251205020000.csv");
    write_dump(&input, 4000);
    let cache = dir.path().join("cache");
    let shells = |round: &str| -> Vec<String> {
        let children: Vec<Child> = (0..4)
            .map(|_| {
                let mut c = Command::new(env!("CARGO_BIN_EXE_memq"));
                c.arg(&run_dir)
                    .env("XDG_CACHE_HOME", &cache)
                    .env("XDG_STATE_HOME", dir.path().join("state"))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut child = c.spawn().unwrap();
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(b"SELECT count(*) AS n FROM events;\n\\q\n")
                    .unwrap();
                child
            })
            .collect();
        children
            .into_iter()
            .map(|c| {
                let o = c.wait_with_output().unwrap();
                let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
                assert!(o.status.success(), "{round}: {stderr}");
                assert!(
                    String::from_utf8_lossy(&o.stdout).contains("4000"),
                    "{round}: {stderr}"
                );
                stderr
            })
            .collect()
    };
    let first = shells("empty cache");
    let ingested = first
        .iter()
        .filter(|s| s.contains("ingested into cache"))
        .count();
    let reused = first
        .iter()
        .filter(|s| s.contains("using cached dataset"))
        .count();
    assert_eq!((ingested, reused), (1, 3), "{first:#?}");
    // The input changes: one refresh.
    std::thread::sleep(Duration::from_millis(20));
    write_dump(&input, 4000);
    let second = shells("refresh");
    let refreshed = second
        .iter()
        .filter(|s| s.contains("ingested again"))
        .count();
    let reused = second
        .iter()
        .filter(|s| s.contains("using cached dataset"))
        .count();
    assert_eq!((refreshed, reused), (1, 3), "{second:#?}");
    let datasets: Vec<PathBuf> = fs::read_dir(cache.join("memq/datasets"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "memq"))
        .collect();
    assert_eq!(datasets.len(), 1, "{datasets:?}");
    let stray: Vec<String> = fs::read_dir(cache.join("memq/datasets"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".memq"))
        .collect();
    // No temporary folder, and no lock file (`.NAME.memq.ingest`, `.NAME.memq.lock`) either.
    assert!(stray.is_empty(), "{stray:?}");
}
