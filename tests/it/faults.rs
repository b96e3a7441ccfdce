//! A full disk at every stage of an ingest, for every input format: the ingest stops within
//! seconds, exits 2 naming the file it could not write and "No space left on device", and leaves
//! nothing behind (no dataset, no temporary folder, no lock file).
//!
//! Two ways to fill the disk: `MEMQ_TEST_FULL_DISK=TEXT` (memq_core::dataset::create_file) hands
//! the files whose path contains TEXT a handle on `/dev/full`, so each stage can be made the one
//! that fails; and a real tmpfs of several sizes, mounted in a private mount namespace
//! (`unshare -m`), where the disk fills wherever it fills, the parallel parse included.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::real_fixture;

/// Runs `cmd`, killing it after `limit`: (exit code, stderr), or None if it had to be killed.
fn run_bounded(mut cmd: Command, limit: Duration) -> Option<(i32, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return Some((status.code().unwrap_or(-1), err));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A generated msMemScope run (CSV or db), in `dir/run`.
fn generated(dir: &Path, format: memq_gen::Format, events: u64) -> std::path::PathBuf {
    let mut cfg = memq_gen::GenConfig::small();
    cfg.format = format;
    cfg.devices = 1;
    if events > 0 {
        cfg.scale_to_events(events, false);
    }
    let run = dir.join("run");
    memq_gen::generate(&cfg, &run).expect("generate");
    run
}

/// `memq ingest INPUTS -o out/ds` with the files matching `stage` on a full disk.
fn ingest_onto_full(inputs: &[&Path], out: &Path, stage: &str) -> Option<(i32, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memq"));
    cmd.arg("ingest")
        .args(inputs)
        .arg("-o")
        .arg(out.join("ds"))
        .env("MEMQ_TEST_FULL_DISK", stage);
    run_bounded(cmd, Duration::from_secs(120))
}

fn assert_stopped_cleanly(what: &str, got: Option<(i32, String)>, names: &str, out: &Path) {
    let (code, err) = got.unwrap_or_else(|| panic!("{what}: the ingest hung (killed after 120 s)"));
    assert_eq!(code, 2, "{what}: {err}");
    assert!(err.contains("No space left on device"), "{what}: {err}");
    assert!(
        err.contains(names),
        "{what}: the error names the file ({names}): {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{what}: one error: {err}");
    assert!(
        listing(out).is_empty(),
        "{what}: left behind {:?}",
        listing(out)
    );
}

/// Each stage of a CSV dump's ingest, and of a db dump's, meets the full disk in turn.
#[test]
fn a_full_disk_at_any_stage_of_a_memscope_ingest_stops_it_cleanly() {
    let dir = tempfile::TempDir::new().unwrap();
    let csv = generated(&dir.path().join("csv"), memq_gen::Format::Csv, 0);
    let db = generated(&dir.path().join("db"), memq_gen::Format::Db, 0);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    // staging runs, the merged events, the curve's staging, derived tables, companions, a
    // stored view, the manifest.
    let stages = [
        ("csv", &csv, ".runs.", ".runs."),
        // The device dump is source 2 (after config.json and the compare CSV).
        ("csv", &csv, "events-2.parquet", "events-2.parquet"),
        ("csv", &csv, "curve-", "curve-"),
        ("csv", &csv, "/blocks/", "blocks"),
        ("csv", &csv, "/step_levels/", "step_levels"),
        ("csv", &csv, "/python_trace/", "python_trace"),
        ("csv", &csv, "/config/", "config"),
        ("csv", &csv, "/leak_candidates/", "leak_candidates"),
        ("csv", &csv, "manifest.json", "manifest.json"),
        ("db", &db, "_staging/events", "events"),
        ("db", &db, "/blocks/", "blocks"),
        ("db", &db, "manifest.json", "manifest.json"),
    ];
    for (format, input, stage, names) in stages {
        let got = ingest_onto_full(&[input.as_path()], &out, stage);
        assert_stopped_cleanly(&format!("{format} dump, {stage}"), got, names, &out);
    }
}

/// Snapshot pickles and Ascend profiler CSVs: their tables and the manifest.
#[test]
fn a_full_disk_stops_snapshot_and_profiler_ingests_cleanly() {
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let snapshot = real_fixture("snapshots/real/cuda_transformer_forward.pickle");
    for stage in [
        "/snap_blocks/",
        "/snap_traces/",
        "/snap_frames/",
        "manifest.json",
    ] {
        let got = ingest_onto_full(&[&snapshot], &out, stage);
        let names = stage.trim_matches('/');
        assert_stopped_cleanly(&format!("snapshot, {stage}"), got, names, &out);
    }
    let record = real_fixture("profiler/real/memory_record.csv");
    let operator = real_fixture("profiler/real/operator_memory.csv");
    for stage in [
        "/prof_memory_record/",
        "/prof_operator_memory/",
        "/sources/",
    ] {
        let got = ingest_onto_full(&[&record, &operator], &out, stage);
        let names = stage.trim_matches('/');
        assert_stopped_cleanly(&format!("profiler CSVs, {stage}"), got, names, &out);
    }
}

/// A real tmpfs too small for the ingest, at sizes from almost nothing to enough: a dump big
/// enough for the parallel parse (several pieces on every core). Every run ends within the time
/// limit, either with the dataset or with exit 2 and "No space left on device", and a failed run
/// leaves the file system empty.
#[test]
fn ingest_onto_a_small_tmpfs_ends_cleanly_at_every_size() {
    let probe = Command::new("unshare")
        .args(["-m", "true"])
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        // The /dev/full tests above cover every stage; this one needs mount namespaces.
        eprintln!("SKIPPED: `unshare -m` is not permitted here");
        return;
    }
    let dir = tempfile::TempDir::new().unwrap();
    // About 40 MB: three pieces of 16 MiB, so the parallel parse is the path taken.
    let run = generated(dir.path(), memq_gen::Format::Csv, 250_000);
    let mount = dir.path().join("mnt");
    std::fs::create_dir_all(&mount).unwrap();
    let memq = env!("CARGO_BIN_EXE_memq");
    let mut failed = 0;
    let mut succeeded = 0;
    for kib in [64, 1024, 8 << 10, 24 << 10, 48 << 10, 80 << 10, 200 << 10] {
        let script = format!(
            "mount -t tmpfs -o size={kib}k tmpfs '{m}' && '{memq}' ingest '{run}' -o '{m}/ds'; \
             code=$?; ls -A '{m}' | grep -v '^ds$' | sed 's/^/LEFT: /' >&2; exit $code",
            m = mount.display(),
            run = run.display(),
        );
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "sh", "-c", &script]);
        let (code, err) = run_bounded(cmd, Duration::from_secs(120))
            .unwrap_or_else(|| panic!("{kib} KiB: the ingest hung (killed after 120 s)"));
        assert!(
            !err.contains("LEFT: "),
            "{kib} KiB left files behind: {err}"
        );
        match code {
            0 => succeeded += 1,
            2 => {
                assert!(err.contains("No space left on device"), "{kib} KiB: {err}");
                assert!(
                    err.contains(&format!("{}/.ds.tmp-", mount.display())),
                    "{err}"
                );
                failed += 1;
            }
            _ => panic!("{kib} KiB: exit {code}: {err}"),
        }
    }
    assert!(failed >= 3, "the small sizes must fail ({failed} did)");
    assert!(succeeded >= 1, "the largest size must succeed");
}
