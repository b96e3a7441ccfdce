//! msMemScope 26.x as its code writes it (fixtures/memscope/v26/, built from the tool's source:
//! see that folder's README): one-sided MALLOC-only / FREE-only streams (`--events=alloc` /
//! `--events=free`, since the July 2026 change of csrc/analysis/dump.cpp Dump::ShouldDumpEvent),
//! CLEAN_UP (RESIDUAL_BLOCK, PROC_EXIT) and the shadow FREEs they leave, START_TRACE/STOP_TRACE
//! with device free/total, shadow FREEs re-stamped to the last stop + 1 ns, SNAPSHOT in the
//! writer's and in the documented spelling, inefficient_type, OOM_DETAIL rows without
//! step/kernel/client.
//!
//! Every figure comes from tests/oracle/memscope_26.py, which reads the raw files with Python's
//! csv module and pairs blocks by the tool's allocation_id (tests/oracle/memscope_26.json; the
//! first test re-runs it). Beside the figures, the tests pin the absence of wrong findings: a
//! dump that cannot pair claims no leak, no live peak and no holder of a peak.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use crate::common::{fixture, fixture_root, int, query_json, shared_engine, Row};

fn oracle_all() -> Value {
    let path = fixture_root().join("tests/oracle/memscope_26.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("tests/oracle/memscope_26.json"))
        .expect("oracle json")
}

fn oracle(key: &str) -> Value {
    let o = oracle_all()[key].clone();
    assert!(o.is_object(), "no oracle entry {key}");
    o
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn s(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_string()
}

/// What to ingest for an oracle entry: a loose dump as it is, a dump inside a project folder
/// with that folder (its config.json counts).
fn input_of(o: &Value) -> PathBuf {
    let rel = s(&o["file"]);
    let path = fixture_root().join(&rel);
    match rel.find("_ascend/") {
        Some(p) => fixture_root().join(&rel[..p + "_ascend".len()]),
        None => path,
    }
}

/// The engine on an entry's input and the dump's source name in it.
async fn open(key: &str) -> (memq_engine::Engine, Value, String) {
    let o = oracle(key);
    let e = shared_engine(&[input_of(&o)]).await;
    let file = s(&o["file"]);
    let sources: Vec<String> = query_json(
        &e,
        "SELECT source FROM sources WHERE kind = 'memscope_csv' ORDER BY source",
    )
    .await
    .into_iter()
    .map(|r| s(&r["source"]))
    .collect();
    assert_eq!(sources.len(), 1, "{key}: {sources:?}");
    assert!(
        file.ends_with(&sources[0]),
        "{key}: source {} is not {file}",
        sources[0]
    );
    let src = sources[0].clone();
    (e, o, src)
}

fn q(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

async fn set(e: &memq_engine::Engine, sql: &str) -> BTreeSet<String> {
    query_json(e, sql)
        .await
        .into_iter()
        .map(|r| serde_json::to_string(&r).unwrap())
        .collect()
}

fn row_set(rows: impl IntoIterator<Item = Row>) -> BTreeSet<String> {
    rows.into_iter()
        .map(|r| serde_json::to_string(&r).unwrap())
        .collect()
}

fn obj(pairs: &[(&str, Value)]) -> Row {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

const KEYS: [&str; 9] = [
    "malloc_only",
    "free_only",
    "clean_up",
    "trace_window",
    "snapshot_keys",
    "inefficient",
    "oom",
    "alloc_only_run",
    "paired_by_config_run",
];

/// The committed oracle figures are what the oracle computes from the fixtures now.
#[test]
fn oracle_figures_are_current() {
    let out = std::process::Command::new("python3")
        .arg(fixture_root().join("tests/oracle/memscope_26.py"))
        .arg("--stdout")
        .output()
        .expect("python3 tests/oracle/memscope_26.py (python3 is needed for the oracle)");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let now: Value = serde_json::from_slice(&out.stdout).expect("oracle output is JSON");
    assert_eq!(
        now,
        oracle_all(),
        "re-run python3 tests/oracle/memscope_26.py"
    );
}

/// Every row is read, none is rejected, and each (Event, Event Type) has the oracle's count:
/// CLEAN_UP rows, START/STOP_TRACE with Attr, writer-spelled SNAPSHOTs, OOM rows without
/// step/kernel/client and comma lists in inefficient_type included.
#[tokio::test]
async fn every_row_is_read_as_written() {
    for key in KEYS {
        let (e, o, src) = open(key).await;
        assert_eq!(
            int(&e, "SELECT count(*) FROM rejects").await,
            0,
            "{key}: rejects"
        );
        assert_eq!(
            int(
                &e,
                &format!("SELECT count(*) FROM events WHERE source = {}", q(&src))
            )
            .await,
            i(&o["rows"]),
            "{key}"
        );
        let got: BTreeSet<(String, i64)> = query_json(
            &e,
            &format!(
                "SELECT event || '/' || event_type AS k, SUM(rows) AS n FROM event_counts \
                 WHERE source = {} GROUP BY 1",
                q(&src)
            ),
        )
        .await
        .into_iter()
        .map(|r| (s(&r["k"]), i(&r["n"])))
        .collect();
        let want: BTreeSet<(String, i64)> = o["rows_by_event"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), i(v)))
            .collect();
        assert_eq!(got, want, "{key}");
    }
}

/// capabilities says per dump whether its MALLOC and FREE rows pair, from the rows and from
/// the capture's config.json (dumpEventType), as the oracle does.
#[tokio::test]
async fn capabilities_say_whether_a_stream_pairs() {
    for key in KEYS {
        let (e, o, src) = open(key).await;
        let r = query_json(
            &e,
            &format!(
                "SELECT malloc_rows, free_rows, pairing, has_alloc_free, dump_event_type, \
                 unmatched_frees, clean_up_rows FROM capabilities WHERE source = {}",
                q(&src)
            ),
        )
        .await;
        assert_eq!(r.len(), 1, "{key}");
        let r = &r[0];
        assert_eq!(r["malloc_rows"], o["malloc_rows"], "{key}");
        assert_eq!(r["free_rows"], o["free_rows"], "{key}");
        assert_eq!(r["pairing"], o["pairing"], "{key}");
        assert_eq!(
            r["has_alloc_free"],
            Value::from(o["pairing"] == "paired"),
            "{key}"
        );
        assert_eq!(r["dump_event_type"], o["dump_event_type"], "{key}");
        assert_eq!(r["unmatched_frees"], o["frees_without_malloc"], "{key}");
        assert_eq!(r["clean_up_rows"], o["clean_up_rows"], "{key}");
    }
    // the inputs cover each answer
    let answers: BTreeSet<String> = KEYS.iter().map(|k| s(&oracle(k)["pairing"])).collect();
    for a in ["paired", "malloc_only", "free_only", "none"] {
        assert!(answers.contains(a), "no {a} input: {answers:?}");
    }
}

/// A dump whose MALLOC and FREE rows cannot pair claims nothing about leaks or live memory:
/// no leak candidate (before: every MALLOC-only block was one, 4 blocks and 25.5 MiB in
/// malloc_only.csv), no periodic leak, no holder of a peak, nothing live at any moment or in a
/// window, no HAL series (trend, rank peaks); its live peaks (before: HAL 20 MiB, PTA 5.5 MiB,
/// the running sum of allocations) and owner peaks say can_pair = false. Its counters (used,
/// total: written by the tool) keep their peaks.
#[tokio::test]
async fn unpaired_streams_claim_no_leak_and_no_live_peak() {
    let mut checked = 0;
    for key in KEYS {
        let (e, o, src) = open(key).await;
        if o["pairing"] == "paired" || o["pairing"] == "none" {
            continue;
        }
        let n = |view: &str| format!("SELECT count(*) FROM {view} WHERE source = {}", q(&src));
        for view in [
            "leak_candidates",
            "leak_summary",
            "step_leaks",
            "peak_blocks",
            "peak_split",
            "breakdown_at('end', NULL)",
            "breakdown_tree_at('end', NULL)",
            "breakdown_at('peak', NULL)",
        ] {
            assert_eq!(int(&e, &n(view)).await, 0, "{key}: {view}");
        }
        assert_eq!(int(&e, "SELECT count(*) FROM rank_leaks").await, 0, "{key}");
        assert_eq!(
            int(
                &e,
                &format!(
                    "SELECT count(*) FROM usage_series WHERE source = {} AND pool = 'HAL'",
                    q(&src)
                )
            )
            .await,
            0,
            "{key}: HAL series from pairing"
        );
        assert_eq!(
            int(
                &e,
                &format!(
                    "SELECT count(*) FROM window_summary('start', 'end') WHERE source = {}",
                    q(&src)
                )
            )
            .await,
            0,
            "{key}: window_summary"
        );
        // mem_state_at: the pool counters only, live bytes NULL, no owner or block row
        let at = o["blocks"][0]["alloc_ts"]
            .as_i64()
            .unwrap_or(1_785_300_000_001_000_000);
        let state = query_json(
            &e,
            &format!(
                "SELECT kind, bytes FROM mem_state_at('{at}') WHERE source = {}",
                q(&src)
            ),
        )
        .await;
        assert!(!state.is_empty(), "{key}: mem_state_at");
        for r in &state {
            assert_eq!(r["kind"], "pool", "{key}: {state:?}");
            assert!(r["bytes"].is_null(), "{key}: {state:?}");
        }
        // every peak row of the dump says it cannot pair; the live ones are no verdict
        let peaks = query_json(
            &e,
            &format!(
                "SELECT metric, can_pair FROM peaks WHERE source = {}",
                q(&src)
            ),
        )
        .await;
        assert!(
            peaks.iter().any(|r| r["metric"] == "live"),
            "{key}: {peaks:?}"
        );
        assert!(
            peaks.iter().all(|r| r["can_pair"] == false),
            "{key}: {peaks:?}"
        );
        assert_eq!(
            int(
                &e,
                &format!(
                    "SELECT count(*) FROM owner_peaks WHERE source = {} AND can_pair",
                    q(&src)
                )
            )
            .await,
            0,
            "{key}: owner_peaks"
        );
        // The trend of a framework pool reads the tool's counters; none of HAL (pairing).
        assert_eq!(
            int(
                &e,
                &format!(
                    "SELECT count(*) FROM trend(20) WHERE source = {} AND pool = 'HAL'",
                    q(&src)
                )
            )
            .await,
            0,
            "{key}"
        );
        checked += 1;
    }
    assert!(checked >= 3, "unpaired inputs checked: {checked}");
}

/// Counter peaks (used, total on pool rows: what the tool wrote) are the oracle's on every
/// input, paired or not.
#[tokio::test]
async fn counter_peaks_match_the_oracle() {
    for key in KEYS {
        let (e, o, src) = open(key).await;
        let got = set(
            &e,
            &format!(
                "SELECT pid, device, pool, metric, peak_bytes FROM peaks \
                 WHERE source = {} AND metric IN ('used', 'total')",
                q(&src)
            ),
        )
        .await;
        let want = row_set(o["counter_peaks"].as_array().unwrap().iter().map(|c| {
            obj(&[
                ("pid", c["pid"].clone()),
                ("device", c["device"].clone()),
                ("pool", c["pool"].clone()),
                ("metric", c["metric"].clone()),
                ("peak_bytes", c["peak_bytes"].clone()),
            ])
        }));
        assert_eq!(got, want, "{key}");
    }
}

/// On paired dumps: the leak candidates, the live peaks and every block's fate are the
/// oracle's, which pairs by allocation_id. clean_up.csv is the case memq got wrong before: the
/// RESIDUAL_BLOCK fill-in FREE (stamped when the tool handles the MALLOC that reuses the
/// address, 1.2 µs after it) ended the new block, which was then listed as a leak
/// (512 KiB, shadow_fill) while its real FREE became a FREE without MALLOC; the PTA live peak
/// read 4.5 MiB instead of 4 MiB.
#[tokio::test]
async fn paired_dumps_match_the_oracle() {
    for key in KEYS {
        let (e, o, src) = open(key).await;
        if o["pairing"] != "paired" {
            continue;
        }
        let got = set(
            &e,
            &format!(
                "SELECT pool, address AS ptr, size, reason, stock FROM leak_candidates WHERE source = {}",
                q(&src)
            ),
        )
        .await;
        let want = row_set(o["leak_candidates"].as_array().unwrap().iter().map(|c| {
            obj(&[
                ("pool", c["pool"].clone()),
                ("ptr", c["ptr"].clone()),
                ("size", c["size"].clone()),
                ("reason", c["reason"].clone()),
                ("stock", c["stock"].clone()),
            ])
        }));
        assert_eq!(got, want, "{key}: leak candidates");

        let got = set(
            &e,
            &format!(
                "SELECT pid, device, pool, peak_bytes, peak_ts FROM peaks \
                 WHERE source = {} AND metric = 'live'",
                q(&src)
            ),
        )
        .await;
        let want = row_set(o["live_peaks"].as_array().unwrap().iter().map(|c| {
            obj(&[
                ("pid", c["pid"].clone()),
                ("device", c["device"].clone()),
                ("pool", c["pool"].clone()),
                ("peak_bytes", c["peak_bytes"].clone()),
                ("peak_ts", c["peak_ts"].clone()),
            ])
        }));
        assert_eq!(got, want, "{key}: live peaks");

        // Fates of the blocks with a MALLOC. The oracle's residual_fill_in (a block whose
        // address a later MALLOC reused, ended there) is memq's replaced when the tool's
        // fill-in FREE comes after that MALLOC in time (memq pairs by address as it streams).
        let got = set(
            &e,
            &format!(
                "SELECT pool, allocation_id, size, \
                 CASE WHEN fate = 'replaced' THEN 'residual_fill_in' ELSE fate END AS fate, \
                 held_at_end, end_ts FROM blocks WHERE source = {} AND alloc_ts IS NOT NULL",
                q(&src)
            ),
        )
        .await;
        let want = row_set(o["blocks"].as_array().unwrap().iter().map(|b| {
            let fate = match b["fate"].as_str().unwrap() {
                "replaced" => "residual_fill_in",
                f => f,
            };
            obj(&[
                ("pool", b["pool"].clone()),
                ("allocation_id", b["allocation_id"].clone()),
                ("size", b["size"].clone()),
                ("fate", Value::from(fate)),
                ("held_at_end", b["held_at_end"].clone()),
                ("end_ts", b["end_ts"].clone()),
            ])
        }));
        assert_eq!(got, want, "{key}: block fates");
    }
}

/// The RESIDUAL_BLOCK fill-in ends only the block it was written for: no block of clean_up.csv
/// ends with another block's FREE, nothing is a FREE without MALLOC, and the fill-in row changes
/// no live bytes. The CLEAN_UP rows themselves (no address: the writer prints Ptr only for
/// MALLOC, FREE and ACCESS) are events, never memory rows.
#[tokio::test]
async fn clean_up_rows_and_residual_fill_ins() {
    let (e, o, src) = open("clean_up").await;
    assert_eq!(i(&o["clean_up_rows"]), 3);
    let r = query_json(
        &e,
        &format!(
            "SELECT event_type, ptr, device, size FROM events WHERE source = {} AND event = 'CLEAN_UP' \
             ORDER BY ts",
            q(&src)
        ),
    )
    .await;
    let kinds: Vec<String> = r.iter().map(|r| s(&r["event_type"])).collect();
    assert_eq!(kinds, ["RESIDUAL_BLOCK", "PROC_EXIT", "PROC_EXIT"]);
    assert!(r.iter().all(|r| r["ptr"].is_null() && r["size"].is_null()));
    assert_eq!(
        int(
            &e,
            &format!(
                "SELECT count(*) FROM blocks b JOIN events f ON f.source = b.source AND f.row_idx = b.free_row \
                 WHERE b.source = {} AND f.allocation_id <> b.allocation_id",
                q(&src)
            )
        )
        .await,
        0
    );
    assert_eq!(
        int(
            &e,
            &format!(
                "SELECT count(*) FROM blocks WHERE source = {} AND alloc_ts IS NULL",
                q(&src)
            )
        )
        .await,
        0
    );
    // the fill-in FREE (allocation_id 3, shadow, after the MALLOC of allocation_id 4) changes
    // nothing on the curve
    let fill = query_json(
        &e,
        &format!(
            "SELECT c.live_bytes, c.owner FROM curve c JOIN events f ON f.source = c.source AND f.row_idx = c.row_idx \
             WHERE c.source = {} AND f.event = 'FREE' AND f.allocation_id = 3",
            q(&src)
        ),
    )
    .await;
    assert_eq!(fill.len(), 1);
    assert_eq!(i(&fill[0]["live_bytes"]), 524_288, "{fill:?}");
}

/// START_TRACE rows carry the device's free and total bytes (Attr free, total; csrc/analysis/dump.cpp
/// Dump::DumpSystemEvent): read into events.total and Attr, and used as the collection windows
/// that judge shadow FREEs — a FREE re-stamped to the last STOP_TRACE + 1 ns is held
/// (shadow_after_stop), one re-stamped to the next start() is a release.
#[tokio::test]
async fn trace_markers_and_restamped_shadow_frees() {
    let (e, o, src) = open("trace_window").await;
    let got = set(
        &e,
        &format!(
            "SELECT event_type, ts, attr_int(attr, 'free') AS free, total FROM events \
             WHERE source = {} AND event = 'SYSTEM'",
            q(&src)
        ),
    )
    .await;
    let want = row_set(o["trace_markers"].as_array().unwrap().iter().map(|m| {
        obj(&[
            ("event_type", m["event_type"].clone()),
            ("ts", m["ts"].clone()),
            ("free", m["free"].clone()),
            ("total", m["total"].clone()),
        ])
    }));
    assert_eq!(got, want);
    let r = query_json(
        &e,
        &format!(
            "SELECT start_trace_rows, stop_trace_rows, has_stop_periods FROM capabilities WHERE source = {}",
            q(&src)
        ),
    )
    .await;
    assert_eq!(r[0]["start_trace_rows"], Value::from(2));
    assert_eq!(r[0]["has_stop_periods"], Value::from(true));
    // every shadow FREE stamped last stop + 1 ns is judged exit_while_stopped
    let last_stop = o["trace_markers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["event_type"] == "STOP_TRACE")
        .map(|m| i(&m["ts"]))
        .max()
        .unwrap();
    let fates: BTreeSet<String> = query_json(
        &e,
        &format!(
            "SELECT DISTINCT fate FROM blocks WHERE source = {} AND free_ts = {}",
            q(&src),
            last_stop + 1
        ),
    )
    .await
    .into_iter()
    .map(|r| s(&r["fate"]))
    .collect();
    assert_eq!(fates, BTreeSet::from(["exit_while_stopped".to_string()]));
    // the stock block (promoted shadow MALLOC) is listed as stock, not as a leak
    assert_eq!(
        int(
            &e,
            &format!(
                "SELECT SUM(stock_blocks) FROM leak_summary WHERE source = {}",
                q(&src)
            )
        )
        .await,
        1
    );
}

/// SNAPSHOT rows in the writer's keys (reserved, max_reserved, allocated, max_allocated, total,
/// free, device_rate, reserved_rate) and in the documented ones give the same columns.
#[tokio::test]
async fn snapshots_in_both_spellings() {
    let (e, o, src) = open("snapshot_keys").await;
    let got = query_json(
        &e,
        &format!(
            "SELECT name, total_mem, free_mem, reserved, peak_reserved, allocated, peak_allocated, \
             device_utilization, pt_utilization, spelling FROM mem_snapshots WHERE source = {} ORDER BY ts, row_idx",
            q(&src)
        ),
    )
    .await;
    let want = o["snapshots"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        for k in [
            "name",
            "total_mem",
            "free_mem",
            "reserved",
            "peak_reserved",
            "allocated",
            "peak_allocated",
            "spelling",
        ] {
            assert_eq!(g[k], w[k], "{k}");
        }
        for k in ["device_utilization", "pt_utilization"] {
            let want: f64 = s(&w[k]).parse().unwrap();
            assert_eq!(g[k].as_f64(), Some(want), "{k}");
        }
    }
    assert!(want.iter().any(|w| w["spelling"] == "writer"));
    assert!(want.iter().any(|w| w["spelling"] == "doc"));
}

/// inefficient_type lists (commas inside the value) stay whole, and wasted_memory lists each
/// kind the tool named.
#[tokio::test]
async fn inefficient_type_lists() {
    let (e, o, src) = open("inefficient").await;
    let got = set(
        &e,
        &format!(
            "SELECT allocation_id, event_type AS pool, string_to_array(inefficient, ',') AS kinds \
             FROM events WHERE source = {} AND event = 'MALLOC' AND inefficient IS NOT NULL",
            q(&src)
        ),
    )
    .await;
    let want = row_set(o["inefficient"].as_array().unwrap().iter().map(|x| {
        obj(&[
            ("allocation_id", x["allocation_id"].clone()),
            ("pool", x["pool"].clone()),
            ("kinds", x["kinds"].clone()),
        ])
    }));
    assert_eq!(got, want);
    let kinds: usize = o["inefficient"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kinds"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        int(
            &e,
            &format!(
                "SELECT count(*) FROM wasted_memory WHERE source = {} AND origin = 'tool'",
                q(&src)
            )
        )
        .await,
        kinds as i64
    );
}

/// OOM_DETAIL rows as the current writer makes them (trigger func, req_size, flag; records
/// pool, ptr, size, timestamp; no ret/step/kernel/client) are read whole; the OOM_Snapshot's
/// free memory quantifies the request.
#[tokio::test]
async fn oom_rows_without_step_kernel_client() {
    let (e, o, src) = open("oom").await;
    let want = o["oom"].as_array().unwrap();
    assert!(want.iter().all(|x| x["has_step_kernel_client"] == false));
    let got = set(
        &e,
        &format!(
            "SELECT kind, device, func, req_size, CAST(flag AS VARCHAR) AS flag, pool, hex(ptr) AS ptr, size, alloc_ts \
             FROM oom WHERE source = {} AND step IS NULL AND kernel IS NULL AND client IS NULL AND ret IS NULL",
            q(&src)
        ),
    )
    .await;
    let want_rows = row_set(want.iter().map(|x| {
        obj(&[
            ("kind", x["kind"].clone()),
            ("device", x["device"].clone()),
            ("func", x["func"].clone()),
            ("req_size", x["req_size"].clone()),
            ("flag", x["flag"].clone()),
            ("pool", x["pool"].clone()),
            ("ptr", x["ptr"].clone()),
            ("size", x["size"].clone()),
            ("alloc_ts", x["alloc_ts"].clone()),
        ])
    }));
    assert_eq!(got, want_rows);
    let snap_free = o["snapshots"][0]["free_mem"].clone();
    let r = query_json(
        &e,
        &format!(
            "SELECT free_mem, req_size FROM oom_events WHERE source = {} AND kind = 'trigger'",
            q(&src)
        ),
    )
    .await;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["free_mem"], snap_free);
    assert_eq!(
        int(
            &e,
            &format!(
                "SELECT count(*) FROM oom_findings WHERE source = {} AND rule = 'single_huge_request' AND verdict = 'yes'",
                q(&src)
            )
        )
        .await,
        1
    );
}

/// The loose MALLOC-only dump and the same rows in a project folder whose config.json says
/// `--events=alloc,launch` (dumpEventType 5) agree; the same rows under a config.json that says
/// alloc and free were both dumped (7) are paired, and their blocks never freed are leaks.
#[tokio::test]
async fn config_json_decides_when_rows_cannot() {
    let loose = oracle("malloc_only");
    let run = oracle("alloc_only_run");
    assert_eq!(loose["pairing"], run["pairing"]);
    assert_eq!(run["dump_event_type"], Value::from(5));
    let by_config = oracle("paired_by_config_run");
    assert_eq!(by_config["pairing"], "paired");
    let (e, _, src) = open("paired_by_config_run").await;
    assert_eq!(
        int(
            &e,
            &format!(
                "SELECT count(*) FROM leak_candidates WHERE source = {}",
                q(&src)
            )
        )
        .await,
        by_config["leak_candidates"].as_array().unwrap().len() as i64
    );
    // the folder layout is the tool's: config.json of the project folder
    assert!(fixture("memscope/v26/alloc_only_run")
        .join("msmemscope_51234_20260729044000_ascend/config.json")
        .exists());
}

/// The report and the gate on a dump of MALLOC rows only: growth cannot be told (the leak card
/// and `memq check --max-leak` say so, exit 2), the headline peak is a counter the tool wrote,
/// not a live peak pairing cannot give, and no finding claims a leak or "no leak".
#[test]
fn report_and_check_on_a_malloc_only_dump() {
    let dump = fixture_root().join("fixtures/memscope/v26/malloc_only.csv");
    let r = crate::common::report_json(std::slice::from_ref(&dump), &["--no-cache"]);
    assert!(r["metrics"]["leak_bytes"].is_null(), "{}", r["metrics"]);
    let peak_where = r["metrics"]["peak_where"].as_str().unwrap();
    assert!(!peak_where.contains("live"), "{peak_where}");
    let verdict = r["verdict"]["summary"].as_str().unwrap();
    assert!(!verdict.contains("No leak"), "{verdict}");
    for f in r["findings"].as_array().unwrap() {
        assert!(f["kind"] != "leak" && f["kind"] != "no_leak", "{f}");
    }
    let gate = crate::common::memq()
        .args(["check", "--no-cache"])
        .arg(&dump)
        .args(["--max-leak", "1M"])
        .output()
        .unwrap();
    assert_eq!(
        gate.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&gate.stdout)
    );
}
