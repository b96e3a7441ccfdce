//! `memq report` and `memq check` (docs/report.md): the findings of the JSON report on the real
//! samples, on generated dumps with an injected leak and an OOM, and on the snapshot fixtures;
//! the HTML page in headless Chromium; the exit codes of `memq check`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{fixture, real_fixture, report_json, shared_dataset};

fn memq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memq"))
}

fn findings<'a>(r: &'a Value, kind: &str) -> Vec<&'a Value> {
    r["findings"]
        .as_array()
        .expect("findings array")
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// Every finding has the documented stable keys.
fn assert_shape(r: &Value) {
    assert_eq!(r["memq_report"], 1);
    assert!(r["verdict"]["summary"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    let actions = r["verdict"]["actions"].as_array().expect("actions");
    assert!(!actions.is_empty() && actions.len() <= 3, "{actions:?}");
    for f in r["findings"].as_array().expect("findings") {
        for k in ["kind", "severity", "section", "title", "problem"] {
            assert!(!f[k].is_null(), "finding without {k}: {f}");
        }
        assert!(f["evidence"].is_object(), "{f}");
        assert!(f["advice"].is_array(), "{f}");
        assert!(
            ["ok", "info", "warning", "error"].contains(&f["severity"].as_str().unwrap_or("")),
            "{f}"
        );
    }
}

fn generated(leak: u64, oom: bool) -> (tempfile::TempDir, PathBuf, memq_gen::Truth) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = memq_gen::GenConfig::small();
    cfg.leak_bytes = leak;
    cfg.oom = oom;
    cfg.seed = 7;
    let out = dir.path().join("run");
    let truth = memq_gen::generate(&cfg, &out).expect("generate");
    (dir, out, truth)
}

#[test]
fn generated_leak_names_the_owner_and_its_bytes() {
    let (_d, run, truth) = generated(6 * 1024 * 1024, true);
    let r = report_json(&[run], &[]);
    assert_shape(&r);
    let leaks = findings(&r, "leak");
    assert!(!leaks.is_empty(), "no leak finding: {:#}", r["findings"]);
    // the injected leak: one owner, the same on every device, and nothing else grows
    for l in &leaks {
        assert_eq!(l["evidence"]["owner"], "PTA@loss_history", "{l}");
        assert_eq!(l["evidence"]["pool"], "PTA");
        assert_eq!(l["severity"], "error");
    }
    let total: u64 = leaks
        .iter()
        .map(|l| l["evidence"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(total, truth.leak.bytes, "leak bytes vs truth.json");
    // the card and `memq check` give the device that leaks most, and name it
    let most = leaks
        .iter()
        .max_by_key(|l| {
            (
                l["evidence"]["bytes"].as_u64(),
                std::cmp::Reverse(l["evidence"]["device"].as_str().map(String::from)),
            )
        })
        .unwrap();
    assert_eq!(r["metrics"]["leak_bytes"], most["evidence"]["bytes"]);
    assert_eq!(
        r["metrics"]["leak_where"].as_str(),
        Some(format!("device {}", most["evidence"]["device"].as_str().unwrap()).as_str())
    );
    // per device, the truth's blocks
    for l in &leaks {
        let dev = l["evidence"]["device"].as_str().unwrap();
        let want: u64 = truth
            .leak
            .blocks
            .iter()
            .filter(|b| b.device == dev)
            .map(|b| b.size)
            .sum();
        assert_eq!(l["evidence"]["bytes"].as_u64(), Some(want), "device {dev}");
        // grows at every complete step
        let held: Vec<u64> = l["evidence"]["held_per_step"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["held_bytes"].as_u64().unwrap())
            .collect();
        assert!(
            held.len() >= 2 && held.windows(2).all(|w| w[1] > w[0]),
            "{held:?}"
        );
    }
    // HCCL buffers are held to the end but resident, not a leak
    let resident = findings(&r, "resident");
    assert_eq!(resident.len(), 1);
    assert!(resident[0]["evidence"]["bytes"].as_u64().unwrap() > 400 << 20);
}

#[test]
fn generated_without_leak_reports_no_growth() {
    let (_d, run, truth) = generated(0, false);
    assert_eq!(truth.leak.bytes, 0);
    let r = report_json(&[run], &[]);
    assert_shape(&r);
    assert!(findings(&r, "leak").is_empty(), "{:#}", r["findings"]);
    assert_eq!(findings(&r, "no_leak").len(), 1);
    assert_eq!(r["metrics"]["leak_bytes"], 0);
    assert!(findings(&r, "oom").is_empty());
    assert_eq!(findings(&r, "no_oom").len(), 1);
}

#[test]
fn g3_fixture_oom_trigger_and_verdict() {
    let truth: memq_gen::Truth = serde_json::from_str(
        &std::fs::read_to_string(fixture("memscope/g3_run/truth.json")).unwrap(),
    )
    .unwrap();
    let r = report_json(&[fixture("memscope/g3_run")], &[]);
    assert_shape(&r);
    let ooms = findings(&r, "oom");
    assert_eq!(ooms.len(), truth.oom.len());
    let t = &truth.oom[0];
    let o = ooms[0];
    assert_eq!(o["evidence"]["device"], t.device.as_str());
    assert_eq!(o["evidence"]["req_size"].as_u64(), Some(t.req_size));
    assert_eq!(o["evidence"]["oom_ts"].as_u64(), Some(t.ts));
    assert_eq!(o["evidence"]["func"], t.func.as_str());
    assert_eq!(o["evidence"]["free_mem"].as_u64(), Some(t.free));
    // 59.20 GiB asked with 57.20 GiB free: one huge request (rule 1 of the OOM guide)
    assert_eq!(o["evidence"]["verdict"], "single_huge_request");
    assert_eq!(o["severity"], "error");
    assert_eq!(r["metrics"]["oom_events"], 1);
    // the leak of the fixture too: 12 MiB of loss_history per device
    let leaks = findings(&r, "leak");
    assert_eq!(leaks.len(), 2, "{:#}", r["findings"]);
    assert!(leaks.iter().all(
        |l| l["evidence"]["owner"] == "PTA@loss_history" && l["evidence"]["bytes"] == 12582912
    ));
    // per device, and the card names the device (both leak 12 MiB: the first)
    assert_eq!(r["metrics"]["leak_bytes"].as_u64(), Some(12582912));
    assert_eq!(r["metrics"]["leak_where"], "device 0");
    assert_eq!(truth.leak.bytes, 2 * 12582912);
    // the peak of the breakdown: truth.breakdowns (PTA at its used peak)
    let bd = findings(&r, "peak_breakdown");
    for tb in truth.breakdowns.iter().filter(|b| b.pool == "PTA") {
        let f = bd
            .iter()
            .find(|f| {
                f["evidence"]["device"] == tb.device.as_str() && f["evidence"]["pool"] == "PTA"
            })
            .expect("PTA breakdown");
        assert_eq!(f["evidence"]["peak_bytes"].as_u64(), Some(tb.total_bytes));
        assert_eq!(f["evidence"]["peak_ts"].as_u64(), Some(tb.at_ts));
        assert_eq!(
            f["evidence"]["groups"][0]["owner_group"],
            tb.groups[0].group.as_str()
        );
        assert_eq!(
            f["evidence"]["groups"][0]["bytes"].as_u64(),
            Some(tb.groups[0].bytes)
        );
    }
    // idle PTA reservation is cached free memory, and fragmentation cannot be measured here
    assert!(!findings(&r, "cached_free").is_empty());
    assert!(findings(&r, "cannot_conclude")
        .iter()
        .any(|f| f["evidence"]["what"]
            .as_str()
            .unwrap()
            .contains("fragmented")));
    assert!(r["metrics"]["frag_pct"].is_null());
}

#[test]
fn real_memscope_samples() {
    let dir = real_fixture("memscope/real");
    for name in [
        "v2_compare_leaks.csv",
        "v1_smoke_multiproc_a.csv",
        "v2_compare_baseline.csv",
    ] {
        let r = report_json(&[dir.join(name)], &[]);
        assert_shape(&r);
        // no OOM records in these samples: said, not guessed
        assert_eq!(r["metrics"]["oom_events"], 0, "{name}");
        assert!(findings(&r, "oom").is_empty(), "{name}");
        assert!(
            findings(&r, "cannot_conclude")
                .iter()
                .any(|f| f["cannot_conclude"]["collect_with"]
                    .as_str()
                    .unwrap()
                    .contains("--analysis=oom")),
            "{name}: {:#}",
            r["findings"]
        );
        // a peak always comes from view peaks
        assert!(r["metrics"]["peak_bytes"].as_i64().unwrap() > 0, "{name}");
    }
}

#[tokio::test]
async fn real_memscope_peak_matches_the_peaks_view() {
    let input = real_fixture("memscope/real/v2_compare_leaks.csv");
    let ds = shared_dataset(std::slice::from_ref(&input)).await;
    let engine = memq_engine::Engine::open(&ds, &memq::catalog())
        .await
        .unwrap();
    let r = memq::report::report(&engine, "x", &Default::default())
        .await
        .unwrap();
    let want = crate::common::rows(
        &engine,
        "SELECT MAX(peak_bytes) FROM peaks WHERE metric IN ('used', 'live') AND pool <> 'HOST_PINNED'",
    )
    .await;
    assert_eq!(
        r.metrics.peak_bytes.map(|v| v.to_string()),
        Some(want[0][0].clone())
    );
}

/// Memory held to the end of the real samples (which have no owners and no step markers) is
/// split into growing and resident without losing a byte. Without steps, growth is what a pool
/// allocated after it first released memory and still holds: the compare pair's leaking run
/// (two 3.81 MiB PTA blocks allocated late, never freed) gets one possible leak, its baseline
/// none; the multi-process smoke sample, whose HAL memory is allocated over the run and never
/// released, gets "cannot conclude" and no figure, never "0 B".
#[tokio::test]
async fn real_memscope_samples_held_memory() {
    for name in [
        "v2_compare_leaks.csv",
        "v2_compare_baseline.csv",
        "v1_smoke_multiproc_a.csv",
    ] {
        let input = real_fixture(&format!("memscope/real/{name}"));
        let ds = shared_dataset(std::slice::from_ref(&input)).await;
        let engine = memq_engine::Engine::open(&ds, &memq::catalog())
            .await
            .unwrap();
        let r = memq::report::report(&engine, name, &Default::default())
            .await
            .unwrap();
        let bytes = |kind: &str| -> Vec<i64> {
            r.findings
                .iter()
                .filter(|f| f.kind == kind)
                .map(|f| f.evidence["bytes"].as_i64().unwrap())
                .collect()
        };
        let held = crate::common::int(
            &engine,
            "SELECT SUM(size) FROM leak_candidates WHERE NOT stock",
        )
        .await;
        let (leak, resident) = (bytes("leak"), bytes("resident"));
        assert_eq!(
            leak.iter().sum::<i64>() + resident.iter().sum::<i64>(),
            held,
            "{name}"
        );
        let leaks: Vec<_> = r.findings.iter().filter(|f| f.kind == "leak").collect();
        let unknown: Vec<_> = r
            .findings
            .iter()
            .filter(|f| {
                f.kind == "cannot_conclude" && f.section == 4 && f.evidence.contains_key("pool")
            })
            .collect();
        match name {
            "v2_compare_leaks.csv" => {
                // the PTA blocks allocated after the pool's first free and never freed
                let late = crate::common::int(
                    &engine,
                    "SELECT SUM(c.size) FROM leak_candidates c WHERE c.pool = 'PTA' AND NOT c.stock \
                     AND c.alloc_ts > (SELECT MIN(free_ts) FROM blocks WHERE pool = 'PTA' AND free_kind = 'real')",
                )
                .await;
                assert!(
                    late > 7 << 20,
                    "{name}: the two 3.81 MiB blocks and four small ones, {late}"
                );
                assert_eq!(leaks.len(), 1, "{name}");
                assert_eq!(leaks[0].evidence["pool"], "PTA");
                assert_eq!(leaks[0].evidence["late_bytes"].as_i64(), Some(late));
                assert_eq!(leaks[0].severity, memq::report::Severity::Warning);
                assert_eq!(r.metrics.leak_bytes, Some(late), "{name}");
                assert_eq!(r.metrics.leak_where.as_deref(), Some("device 0"));
                assert!(!r.findings.iter().any(|f| f.kind == "no_leak"), "{name}");
            }
            "v2_compare_baseline.csv" => {
                assert!(leaks.is_empty() && unknown.is_empty(), "{name}");
                assert_eq!(r.metrics.leak_bytes, Some(0), "{name}");
                assert!(r.findings.iter().any(|f| f.kind == "no_leak"), "{name}");
            }
            _ => {
                // pid 2523738 allocates HAL memory from 0.46 s to 10.4 s of the run and never
                // frees any: no steady state to judge growth against
                assert!(leaks.is_empty(), "{name}");
                assert!(
                    unknown
                        .iter()
                        .any(|f| f.evidence["pid"] == 2523738 && f.evidence["pool"] == "HAL"),
                    "{name}: {unknown:?}"
                );
                assert_eq!(r.metrics.leak_bytes, None, "{name}");
                assert!(!r.findings.iter().any(|f| f.kind == "no_leak"), "{name}");
                assert!(
                    !r.verdict.summary.contains("No leak"),
                    "{}",
                    r.verdict.summary
                );
            }
        }
    }
}

/// The min..max band of a memory curve is drawn once per run of contiguous non-empty buckets:
/// a gap with no event shows no band (v2_compare_leaks is sparse: HAL starts late, PTA comes in
/// bursts). The runs are counted from `curve_buckets` itself.
#[tokio::test]
async fn html_band_is_drawn_per_run_of_buckets() {
    let input = real_fixture("memscope/real/v2_compare_leaks.csv");
    let ds = shared_dataset(std::slice::from_ref(&input)).await;
    let engine = memq_engine::Engine::open(&ds, &memq::catalog())
        .await
        .unwrap();
    let runs = crate::common::int(
        &engine,
        "SELECT SUM(CASE WHEN points > 0 AND COALESCE(prev, 0) = 0 THEN 1 ELSE 0 END) FROM (\
         SELECT points, LAG(points) OVER (PARTITION BY source, pid, device, pool, metric ORDER BY bucket) AS prev \
         FROM curve_buckets(240, NULL) \
         WHERE device = '0' AND ((pool = 'HAL' AND metric = 'live') OR (pool <> 'HAL' AND metric = 'used')))",
    )
    .await;
    let filled = crate::common::int(
        &engine,
        "SELECT COUNT(*) FROM curve_buckets(240, NULL) WHERE points > 0 AND device = '0' \
         AND ((pool = 'HAL' AND metric = 'live') OR (pool <> 'HAL' AND metric = 'used'))",
    )
    .await;
    assert!(runs > 2 && runs < filled, "{runs} runs of {filled} buckets");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let o = memq()
        .arg("report")
        .arg(&input)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&html).unwrap();
    let chart = text
        .split("<svg ")
        .find(|s| s.contains("<title>Memory over time — device 0 "))
        .expect("the memory chart of device 0");
    assert_eq!(chart.matches("class=\"band\"").count() as i64, runs);
}

/// A run of many steps gets at most 30 bars of growth per step, consecutive steps summed (a
/// 10 M-event dump has 1790 steps: one bar each made a 1.9 MB page).
#[test]
fn many_steps_are_grouped_in_the_growth_chart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = memq_gen::GenConfig::small();
    cfg.steps = 64;
    cfg.stop_period = None;
    cfg.seed = 3;
    let run = dir.path().join("run");
    memq_gen::generate(&cfg, &run).expect("generate");
    let html = dir.path().join("r.html");
    let o = memq()
        .arg("report")
        .arg(&run)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&html).unwrap();
    let charts: Vec<&str> = text
        .split("<figure>")
        .filter(|f| f.contains("<figcaption>Growth per step"))
        .collect();
    assert!(!charts.is_empty());
    for c in charts {
        let steps: usize = c
            .split("<figcaption>")
            .nth(1)
            .and_then(|t| t.split(" complete steps, ").next())
            .and_then(|t| t.rsplit('(').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no step count in {}", &c[..200]));
        assert!(steps > 30, "{steps}");
        let per_bar = steps.div_ceil(30);
        assert!(c.contains(&format!("{per_bar} to a bar")));
        let bars = c.matches("<rect ").count();
        assert_eq!(bars, steps.div_ceil(per_bar), "{steps} steps");
        assert!(
            c.contains(&format!(">steps 1–{per_bar}<")),
            "first group label"
        );
    }
}

fn snap(name: &str) -> PathBuf {
    real_fixture(&format!("snapshots/real/{name}"))
}

#[test]
fn snapshot_true_peak_cuda_transformer_forward() {
    let r = report_json(&[snap("cuda_transformer_forward.pickle")], &[]);
    assert_shape(&r);
    let p = findings(&r, "snapshot_peak");
    assert_eq!(p.len(), 1);
    // docs/formats/snapshot.md §7.2
    assert_eq!(
        p[0]["evidence"]["active_peak"].as_i64(),
        Some(17_602_723_840)
    );
    assert_eq!(p[0]["evidence"]["active_peak_seq"].as_i64(), Some(8226));
    // the reference's 3.83 GB "peak" is kept beside it, never as the peak
    let refp = p[0]["evidence"]["reference_peak"].as_i64().unwrap();
    assert!(refp < 5 << 30);
    assert_eq!(r["metrics"]["peak_bytes"].as_i64(), Some(17_602_723_840));
    assert!(r["metrics"]["reserved_bytes"].as_i64().unwrap() > 16 << 30);
    assert_eq!(r["metrics"]["oom_events"], 0);
}

#[test]
fn snapshot_cached_free_is_not_fragmentation() {
    // device 1 of this torch_npu snapshot: 526 MiB of empty cached segments, 0 B allocated
    let r = report_json(&[snap("torch_npu_two_devices.pkl")], &[]);
    assert_shape(&r);
    let d1: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["section"] == 6 && f["evidence"]["device"] == 1)
        .collect();
    assert_eq!(d1.len(), 1, "{:#}", r["findings"]);
    let f = d1[0];
    assert_eq!(f["kind"], "cached_free");
    assert_eq!(f["evidence"]["free_bytes"].as_i64(), Some(526 << 20));
    assert_eq!(f["evidence"]["cached_free_bytes"].as_i64(), Some(526 << 20));
    assert_eq!(f["evidence"]["fragmented_bytes"], 0);
    assert_eq!(f["evidence"]["frag_pct"].as_f64(), Some(0.0));
    assert!(f["advice"][0].as_str().unwrap().contains("empty_cache()"));
    assert!(f["problem"].as_str().unwrap().contains("ERR"));
    // no warning anywhere rests on that device's free memory
    assert!(r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["kind"] != "fragmentation" || f["evidence"]["device"] != 1));
}

#[test]
fn snapshot_oom_three_gpus() {
    let r = report_json(&[snap("cuda_three_gpus_expandable_oom.pickle")], &[]);
    assert_shape(&r);
    let o = findings(&r, "snapshot_oom");
    assert_eq!(o.len(), 1);
    assert_eq!(o[0]["evidence"]["device"], 1);
    assert_eq!(o[0]["evidence"]["seq"], 421);
    assert_eq!(o[0]["evidence"]["verdict"], "run_of_large_allocations");
    assert_eq!(r["metrics"]["oom_events"], 1);
    assert_eq!(r["verdict"]["severity"], "error");
    // --device filters
    let r0 = report_json(
        &[snap("cuda_three_gpus_expandable_oom.pickle")],
        &["--device", "0"],
    );
    assert!(findings(&r0, "snapshot_oom").is_empty());
    assert_eq!(findings(&r0, "snapshot_peak").len(), 1);
}

#[tokio::test]
async fn two_snapshots_are_compared() {
    let (a, b) = (
        snap("cuda_transformer_forward.pickle"),
        snap("cuda_small_cpp_frames.pickle"),
    );
    // the figures, from the snapshot tables and snap_peak of the same two pickles
    let ds = shared_dataset(&[a.clone(), b.clone()]).await;
    let engine = memq_engine::Engine::open(&ds, &memq::catalog())
        .await
        .unwrap();
    let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_string();
    for (first, second) in [(&a, &b), (&b, &a)] {
        let (na, nb) = (name(first), name(second));
        let r = report_json(&[first.clone(), second.clone()], &[]);
        assert_shape(&r);
        let c = findings(&r, "snapshot_compare");
        assert_eq!(c.len(), 1, "{:#}", r["findings"]);
        assert_eq!(c[0]["section"], 7);
        let ev = &c[0]["evidence"];
        // b is the snapshot given second
        assert_eq!(ev["snapshot_a"], na.as_str());
        assert_eq!(ev["snapshot_b"], nb.as_str());
        for (key, sql) in [
            ("reserved", "SELECT SUM(total_size) FROM snap_segments WHERE snapshot = "),
            (
                "allocated",
                "SELECT SUM(size) FROM snap_blocks WHERE state = 'active_allocated' AND snapshot = ",
            ),
            ("active_peak", "SELECT SUM(active_peak) FROM snap_peak WHERE snapshot = "),
        ] {
            let va = crate::common::int(&engine, &format!("{sql}'{na}'")).await;
            let vb = crate::common::int(&engine, &format!("{sql}'{nb}'")).await;
            assert!(va > 0 && vb > 0 && va != vb, "{key}: {va} {vb}");
            let t = &ev["totals"][key];
            assert_eq!(t["a_bytes"].as_i64(), Some(va), "{key}");
            assert_eq!(t["b_bytes"].as_i64(), Some(vb), "{key}");
            assert_eq!(t["diff_bytes"].as_i64(), Some(vb - va), "{key}");
        }
        let segs = |s: &str| format!("SELECT COUNT(*) FROM snap_segments WHERE snapshot = '{s}'");
        assert_eq!(
            ev["totals"]["reserved"]["a_count"].as_i64(),
            Some(crate::common::int(&engine, &segs(&na)).await)
        );
        assert_eq!(
            ev["totals"]["reserved"]["b_count"].as_i64(),
            Some(crate::common::int(&engine, &segs(&nb)).await)
        );
        // the largest change of segment sizes: bytes of segments of one (type, size), b − a
        let largest = crate::common::int(
            &engine,
            &format!(
                "SELECT d FROM (SELECT segment_type, total_size, \
                 SUM(CASE WHEN snapshot = '{nb}' THEN total_size ELSE -total_size END) AS d \
                 FROM snap_segments WHERE snapshot IN ('{na}', '{nb}') GROUP BY segment_type, total_size) \
                 ORDER BY abs(d) DESC LIMIT 1"
            ),
        )
        .await;
        let seg1 = ev["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == "segment_size" && x["rank"] == 1)
            .expect("segment_size rank 1");
        assert_eq!(seg1["diff_bytes"].as_i64(), Some(largest));
        assert!(c[0]["problem"].as_str().unwrap().contains(&na));
    }
    // one snapshot: nothing to compare
    let r = report_json(&[a], &[]);
    assert!(findings(&r, "snapshot_compare").is_empty());
}

#[test]
fn every_snapshot_fixture_reports() {
    for name in [
        "cuda_list_format.pkl",
        "cuda_pending_free_pools.pickle",
        "cuda_small_cpp_frames.pickle",
    ] {
        let r = report_json(&[snap(name)], &[]);
        assert_shape(&r);
        assert!(!findings(&r, "snapshot_peak").is_empty(), "{name}");
    }
}

#[test]
fn markdown_to_stdout_and_md_file() {
    let o = memq()
        .args(["report"])
        .arg(fixture("memscope/g3_run"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.starts_with("# memq report"));
    assert!(md.contains("## Verdict"));
    assert!(md.contains("PTA@loss_history"));
    assert!(md.chars().any(|c| ('▁'..='█').contains(&c)), "no sparkline");
    let bad = memq()
        .args(["report"])
        .arg(fixture("memscope/g3_run"))
        .args(["-o", "/tmp/x.pdf"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

// ------------------------------------------------------------------ memq check

fn check(inputs: &[PathBuf], args: &[&str]) -> (i32, String) {
    let o = memq()
        .arg("check")
        .args(inputs)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn check_exit_codes_both_ways() {
    let ctf = vec![snap("cuda_transformer_forward.pickle")];
    // 16.39 GiB active peak, 16.65 GiB reserved
    let (code, out) = check(
        &ctf,
        &["--max-peak", "17GiB", "--max-reserved", "17GiB", "--no-oom"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("16.39 GiB") && out.contains("17.00 GiB"),
        "{out}"
    );
    assert!(out.contains("result: pass"));
    let (code, out) = check(&ctf, &["--max-peak", "16GiB"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL") && out.contains("result: fail"),
        "{out}"
    );
    let (code, out) = check(&ctf, &["--max-frag", "50", "--format", "json"]);
    assert_eq!(code, 0, "{out}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["result"], "pass");
    assert_eq!(j["checks"][0]["name"], "frag");
    assert_eq!(j["checks"][0]["unit"], "percent");
    assert!(j["checks"][0]["measured"].as_f64().unwrap() < 50.0);

    let g3 = vec![fixture("memscope/g3_run")];
    let (code, out) = check(&g3, &["--no-oom"]);
    assert_eq!(code, 1, "{out}");
    // the leak is judged per device: each of the two NPUs leaks 12 MiB, so a 20 MiB limit
    // holds and a 10 MiB one fails on the device named
    let (code, out) = check(&g3, &["--max-leak", "20MiB", "--format", "json"]);
    assert_eq!(code, 0, "{out}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["checks"][0]["measured"].as_f64(), Some(12582912.0));
    assert_eq!(j["checks"][0]["limit"].as_f64(), Some(20.0 * 1048576.0));
    assert_eq!(j["checks"][0]["status"], "pass");
    assert_eq!(j["checks"][0]["where"], "device 0");
    let (code, out) = check(&g3, &["--max-leak", "10MiB"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(device 0)"), "{out}");
    // bad input: 2
    let (code, _) = check(&[PathBuf::from("/nonexistent/dump.csv")], &["--no-oom"]);
    assert_eq!(code, 2);
    let (code, _) = check(&g3, &["--max-peak", "lots"]);
    assert_eq!(code, 2);
    // a limit this input cannot measure (fragmentation needs a snapshot): 2
    let (code, _) = check(&g3, &["--max-frag", "10"]);
    assert_eq!(code, 2);
}

// ------------------------------------------------------------------ HTML in Chromium

fn chromium() -> Option<PathBuf> {
    for c in [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ] {
        if Path::new(c).exists() {
            return Some(PathBuf::from(c));
        }
    }
    None
}

fn headless(bin: &Path, args: &[String], url: &str) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=3000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium")
}

/// The share of pixels that differ from the most common colour of a PNG screenshot.
fn non_background_share(png: &[u8]) -> f64 {
    // PNG has no decoder in std; compare byte diversity of the compressed IDAT as a proxy, and
    // the file size: a blank page compresses to a few KB.
    let distinct = {
        let mut seen = [false; 256];
        png.iter().for_each(|b| seen[*b as usize] = true);
        seen.iter().filter(|s| **s).count()
    };
    (png.len() as f64 / 1024.0).min(1000.0) * distinct as f64 / 256.0
}

/// The http(s) URLs the page asked for, from Chromium's net log (the browser's own
/// background traffic to its vendor's hosts left out).
fn page_requests(bin: &Path, url: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("net.json");
    let o = headless(
        bin,
        &[
            "--dump-dom".into(),
            format!("--log-net-log={}", log.display()),
        ],
        url,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let mut urls: Vec<String> = text
        .split("\"url\":\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|u| u.starts_with("http"))
        .filter(|u| {
            ![
                "google.com/",
                "googleapis.com/",
                "gvt1.com/",
                "gstatic.com/",
            ]
            .iter()
            .any(|h| u.contains(h))
        })
        .map(|u| u.to_string())
        .collect();
    urls.sort();
    urls.dedup();
    urls
}

#[test]
fn html_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIP html_in_headless_chromium: chromium is not installed (apt-get install -y chromium; .ci/run installs it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // the net log sees a request the page makes (negative control)
    let probe = dir.path().join("probe.html");
    std::fs::write(
        &probe,
        "<html><body><img src=\"http://127.0.0.1:9/probe.png\"></body></html>",
    )
    .unwrap();
    let seen = page_requests(&bin, &format!("file://{}", probe.display()));
    assert!(
        seen.iter().any(|u| u.contains("probe.png")),
        "net log misses requests: {seen:?}"
    );
    for (name, inputs) in [
        ("g3", vec![fixture("memscope/g3_run")]),
        ("ctf", vec![snap("cuda_transformer_forward.pickle")]),
        (
            "both",
            vec![
                fixture("memscope/g3_run"),
                snap("torch_npu_two_devices.pkl"),
            ],
        ),
    ] {
        let html = dir.path().join(format!("{name}.html"));
        let o = memq()
            .arg("report")
            .args(&inputs)
            .arg("-o")
            .arg(&html)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&html).unwrap();
        // self-contained: no script, no external reference of any kind
        assert!(!text.contains("<script"), "{name}: a script");
        for attr in [
            "src=",
            "href=\"http",
            "href='http",
            "url(",
            "@import",
            "http://",
            "https://",
        ] {
            assert!(!text.contains(attr), "{name}: {attr} in the page");
        }
        assert!(text.contains("<svg"), "{name}: no chart");
        assert!(text.len() < 2 << 20, "{name}: {} bytes", text.len());
        let url = format!("file://{}", html.display());
        // the DOM after load, with every request sent to a dead proxy (a request would log
        // a net::ERR_ to the console)
        let dom = headless(&bin, &["--dump-dom".into()], &url);
        assert!(
            dom.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&dom.stderr)
        );
        let dom_text = String::from_utf8_lossy(&dom.stdout);
        assert!(
            dom_text.contains("Memory diagnosis"),
            "{name}: page did not load"
        );
        let err = String::from_utf8_lossy(&dom.stderr);
        for line in err.lines() {
            let l = line.to_ascii_lowercase();
            assert!(
                !(l.contains("console") && (l.contains("error") || l.contains("uncaught"))),
                "{name}: console error: {line}"
            );
            assert!(!l.contains("net::err_"), "{name}: network request: {line}");
        }
        let requests = page_requests(&bin, &url);
        assert!(
            requests.is_empty(),
            "{name}: the page made requests: {requests:?}"
        );
        for width in [1400, 800] {
            let shot = dir.path().join(format!("{name}-{width}.png"));
            let o = headless(
                &bin,
                &[
                    format!("--screenshot={}", shot.display()),
                    format!("--window-size={width},2400"),
                ],
                &url,
            );
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let png = std::fs::read(&shot).expect("screenshot written");
            assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
            assert!(
                png.len() > 30_000,
                "{name}@{width}: screenshot looks blank ({} bytes)",
                png.len()
            );
            assert!(
                non_background_share(&png) > 20.0,
                "{name}@{width}: blank screenshot"
            );
            if let Ok(keep) = std::env::var("MEMQ_REPORT_SHOTS") {
                let _ = std::fs::create_dir_all(&keep);
                let _ = std::fs::copy(&shot, Path::new(&keep).join(shot.file_name().unwrap()));
                let _ = std::fs::copy(&html, Path::new(&keep).join(html.file_name().unwrap()));
            }
        }
    }
}
