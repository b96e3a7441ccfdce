//! torch.profiler (Kineto) Chrome traces (docs/formats/trace.md): the `[memory]` events of the
//! real trace and of its 2021-layout copy without totals, plain and gzipped, against the figures
//! of tests/oracle/traces.py, which reads the raw files with Python's json module
//! (tests/oracle/traces.json); and the JSON and gzip files memq still refuses.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{fixture_root, int, memq, open, query_json, shared_engine};

fn oracle(key: &str) -> Value {
    let path = fixture_root().join("tests/oracle/traces.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("oracle file"))
        .expect("oracle json");
    all[key].clone()
}

fn file_of(o: &Value) -> PathBuf {
    fixture_root().join(o["file"].as_str().unwrap())
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// A gzip copy of `file` in `dir`, named `name`.
fn gzip_copy(file: &Path, dir: &Path, name: &str) -> PathBuf {
    let out = std::process::Command::new("gzip")
        .arg("-c")
        .arg(file)
        .output()
        .expect("gzip runs");
    assert!(out.status.success());
    let gz = dir.join(name);
    std::fs::write(&gz, out.stdout).unwrap();
    gz
}

/// trace_memory_peaks as the oracle writes its peaks.
async fn peaks(e: &memq_engine::Engine) -> Vec<Value> {
    query_json(
        e,
        "SELECT device, metric, peak_bytes, peak_ts, peak_event, op, events \
         FROM trace_memory_peaks ORDER BY device, metric",
    )
    .await
    .into_iter()
    .map(|r| Value::Object(r.into_iter().collect()))
    .collect()
}

/// Counts, times, peaks and memory by op of one oracle entry.
async fn check(e: &memq_engine::Engine, o: &Value, what: &str) {
    assert_eq!(int(e, "SELECT count(*) FROM rejects").await, 0, "{what}");
    assert_eq!(
        int(e, "SELECT count(*) FROM trace_memory").await,
        i(&o["memory_rows"]),
        "{what}"
    );
    for (device, n) in o["rows_per_device"].as_object().unwrap() {
        let sql = format!("SELECT count(*) FROM trace_memory WHERE device = '{device}'");
        assert_eq!(int(e, &sql).await, i(n), "{what} {device}");
    }
    let q = |sql: &'static str| int(e, sql);
    assert_eq!(
        q("SELECT count(*) FROM trace_memory WHERE op IS NOT NULL").await,
        i(&o["rows_with_op"]),
        "{what}"
    );
    assert_eq!(
        q("SELECT count(*) FROM trace_memory WHERE totals_rebuilt").await,
        i(&o["rebuilt_rows"]),
        "{what}"
    );
    assert_eq!(
        q("SELECT min(ts) FROM trace_memory").await,
        i(&o["first_ts"]),
        "{what}"
    );
    assert_eq!(
        q("SELECT max(ts) FROM trace_memory").await,
        i(&o["last_ts"]),
        "{what}"
    );
    assert_eq!(
        peaks(e).await,
        o["peaks"].as_array().unwrap().clone(),
        "{what}"
    );
    let by_op: Vec<Value> = query_json(
        e,
        "SELECT device, op, allocations, allocated_bytes, frees, freed_bytes, retained_bytes \
         FROM trace_memory_by_op ORDER BY device, coalesce(op, '')",
    )
    .await
    .into_iter()
    .map(|r| Value::Object(r.into_iter().collect()))
    .collect();
    assert_eq!(by_op, o["by_op"].as_array().unwrap().clone(), "{what}");
}

/// The real trace (997 `[memory]` events, CUDA device 0 and the CPU): rows, times in ns, the
/// peaks of total allocated and total reserved with the op running then, memory by op.
#[tokio::test]
async fn real_trace_matches_the_oracle() {
    let o = oracle("real");
    let e = shared_engine(&[file_of(&o)]).await;
    check(&e, &o, "real").await;
    // The curve has one point per event.
    assert_eq!(
        int(&e, "SELECT count(*) FROM trace_memory_curve").await,
        i(&o["memory_rows"])
    );
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM sources WHERE kind = 'kineto_trace'"
        )
        .await,
        1
    );
}

/// The same trace gzipped (named `.pt.trace.json.gz`) gives the same answers.
#[tokio::test]
async fn gzipped_trace_gives_the_same_answers() {
    let o = oracle("real");
    let dir = tempfile::tempdir().unwrap();
    let gz = gzip_copy(&file_of(&o), dir.path(), "run.pt.trace.json.gz");
    let (_ingested, e) = open(&[gz]).await;
    check(&e, &o, "gzip").await;
}

/// The 2021 layout (no Total Allocated/Total Reserved): totals rebuilt per device as the running
/// sum of Bytes, equal to the oracle's; reserved stays NULL; peaks from the rebuilt totals.
#[tokio::test]
async fn totals_are_rebuilt_without_them() {
    let o = oracle("no_totals_2021");
    let e = shared_engine(&[file_of(&o)]).await;
    check(&e, &o, "no totals").await;
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM trace_memory WHERE total_reserved IS NOT NULL"
        )
        .await,
        0
    );
    let got: Vec<Value> = query_json(
        &e,
        "SELECT CAST(event AS BIGINT) AS event, total_allocated FROM trace_memory ORDER BY ts, event",
    )
    .await
    .into_iter()
    .map(|r| Value::from(vec![r["event"].clone(), r["total_allocated"].clone()]))
    .collect();
    assert_eq!(got, o["running_allocated"].as_array().unwrap().clone());
}

/// In a folder, a trace is found by its name (`*.pt.trace.json`, gzipped or not).
#[tokio::test]
async fn traces_in_a_folder_are_found_by_name() {
    let o = oracle("real");
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(file_of(&o), run.join("host_1.1.pt.trace.json")).unwrap();
    gzip_copy(&file_of(&o), &run, "host_1.2.pt.trace.json.gz");
    let (_ingested, e) = open(&[run]).await;
    assert_eq!(
        int(&e, "SELECT count(*) FROM trace_memory").await,
        2 * i(&o["memory_rows"])
    );
}

fn ingest_cli(input: &Path) -> (i32, String) {
    let out_dir = tempfile::TempDir::new().unwrap();
    let out = memq()
        .arg("ingest")
        .arg(input)
        .arg("-o")
        .arg(out_dir.path().join("x.memq"))
        .output()
        .expect("run memq");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A JSON that is neither a trace nor an msMemScope config.json, a gzip file not named
/// `.json.gz`, and a `.json.gz` that is not a trace are refused, each said in words.
#[test]
fn other_json_and_gzip_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("metrics.json");
    std::fs::write(&other, br#"{"loss": [1.0, 0.5], "step": 2}"#).unwrap();
    let gz_other = gzip_copy(&other, dir.path(), "metrics.json.gz");
    let tar = gzip_copy(&other, dir.path(), "metrics.tar.gz");
    for (input, says) in [
        (
            &other,
            "not a torch.profiler trace (no traceEvents) and not an msMemScope config.json",
        ),
        (&tar, "a gzip-compressed file"),
        (
            &gz_other,
            "no traceEvents array: not a torch.profiler (Kineto) Chrome trace",
        ),
    ] {
        let (code, err) = ingest_cli(input);
        assert_eq!(code, 2, "{}: {err}", input.display());
        assert!(err.contains(says), "{}: {err}", input.display());
        assert!(err.contains(&input.display().to_string()), "{err}");
    }
}

/// `memq report` on a trace alone: the headline peak and reservation are the oracle's
/// cuda:0 peaks, each device's allocated peak is a finding naming its op, and what a trace
/// cannot tell (growth, fragmentation) is said as such, never as "no leak". `memq check` gates
/// on the same figure and cannot measure fragmentation.
#[test]
fn report_and_check_read_a_trace() {
    let o = oracle("real");
    let file = file_of(&o);
    let peak = |metric: &str| {
        o["peaks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metric"] == metric)
            .max_by_key(|p| i(&p["peak_bytes"]))
            .unwrap()
            .clone()
    };
    let (allocated, reserved) = (peak("allocated"), peak("reserved"));
    let r = crate::common::report_json(std::slice::from_ref(&file), &["--no-cache"]);
    let m = &r["metrics"];
    assert_eq!(i(&m["peak_bytes"]), i(&allocated["peak_bytes"]));
    assert_eq!(
        m["peak_where"],
        format!(
            "gpu_working_chrome_trace.json {} allocated",
            allocated["device"].as_str().unwrap()
        )
    );
    assert_eq!(i(&m["reserved_bytes"]), i(&reserved["peak_bytes"]));
    assert!(m["leak_bytes"].is_null(), "a trace cannot tell growth: {m}");
    assert!(m["frag_pct"].is_null());
    let findings = r["findings"].as_array().unwrap();
    let peaks: Vec<&Value> = findings
        .iter()
        .filter(|f| f["kind"] == "trace_peak")
        .collect();
    // one per accelerator: the host's 80 B stay in the table
    assert_eq!(peaks.len(), 1, "{peaks:?}");
    assert_eq!(
        i(&peaks[0]["evidence"]["peak_bytes"]),
        i(&allocated["peak_bytes"])
    );
    assert_eq!(peaks[0]["evidence"]["op"], allocated["op"]);
    let cannot: Vec<&str> = findings
        .iter()
        .filter(|f| f["kind"] == "cannot_conclude")
        .map(|f| f["title"].as_str().unwrap())
        .collect();
    assert!(cannot.iter().any(|t| t.contains("grows")), "{cannot:?}");
    assert!(
        cannot.iter().any(|t| t.contains("fragmentation")),
        "{cannot:?}"
    );
    for f in findings {
        assert!(
            f["severity"] != "error" && f["severity"] != "warning",
            "no problem is claimed: {f}"
        );
    }
    assert!(!r["verdict"]["summary"]
        .as_str()
        .unwrap()
        .contains("No leak"));

    let gate = |args: &[&str]| {
        let out = memq()
            .args(["check", "--no-cache"])
            .arg(&file)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let below = (i(&allocated["peak_bytes"]) - 1).to_string();
    let at = i(&allocated["peak_bytes"]).to_string();
    assert_eq!(gate(&["--max-peak", &at]).0, 0);
    let (code, text) = gate(&["--max-peak", &below]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(gate(&["--max-frag", "10"]).0, 2);
}
