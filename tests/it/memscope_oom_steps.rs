//! The memscope SQL library, part B: oom_events, oom_findings, pool_expansions, fragmentation,
//! hal_segments / hal_segment_summary, trend, window_summary, steps, step_peaks.
//!
//! On the 4 real samples the figures are checked against the reference script's answers in
//! tests/golden/expected.json — except where the reference is wrong (quirks of
//! docs/formats/memscope.md §7, listed per sample under `quirks` in expected.json and in
//! docs/reference-differences.md): there memq's correct value is asserted. On the project-made
//! G3 fixture (fixtures/memscope/g3_run) the OOM, snapshot, step, expansion and HAL segment
//! figures are checked against its truth.json.
//!
//! Timestamps: memq works in ns; the reference prints the file's own unit (µs for the G1
//! samples), so golden timestamps are multiplied by `scale` (1000 for µs sources).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memq_engine::Engine;
use serde_json::Value;

use crate::common::{query_json as query, Row};

const SAMPLES: &[&str] = &[
    "v1_smoke_multiproc_a",
    "v1_smoke_multiproc_b",
    "v2_compare_baseline",
    "v2_compare_leaks",
];

// ---- helpers ------------------------------------------------------------------------------------

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn real_sample(sample: &str) -> PathBuf {
    manifest_dir()
        .join("fixtures/real/memscope/real")
        .join(format!("{sample}.csv"))
}

fn g3_fixture() -> PathBuf {
    manifest_dir().join("fixtures/memscope/g3_run")
}

fn golden() -> Value {
    let text = std::fs::read_to_string(manifest_dir().join("tests/golden/expected.json"))
        .expect("tests/golden/expected.json");
    serde_json::from_str(&text).expect("expected.json parses")
}

struct Dataset {
    engine: Engine,
}

async fn open(input: &Path) -> Dataset {
    Dataset {
        engine: crate::common::shared_engine(&[input.to_path_buf()]).await,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Null => None,
        v => Some(v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))),
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A percentage as the reference prints it: one decimal.
fn pct1(v: &Value) -> f64 {
    (num(v) * 10.0).round() / 10.0
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// 1000 for µs sources (G1), 1 for ns: golden (raw) timestamps × scale = memq ns.
fn scale(golden: &Value) -> i64 {
    match golden["ts_unit"].as_str().unwrap() {
        "us" => 1000,
        "ns" => 1,
        u => panic!("unit {u}"),
    }
}

/// The source name of a sample in the dataset (one file ingested).
fn source_of(sample: &str) -> String {
    format!("{sample}.csv")
}

/// The quirk entry of expected.json for a figure, if the reference is known to be wrong there.
fn quirk<'a>(golden: &'a Value, figure: &str) -> Option<&'a Value> {
    golden["quirks"]
        .as_array()?
        .iter()
        .find(|q| q["figure"] == figure)
}

/// Golden owner labels: the reference's "(未标注)" is memq's "(unlabelled)".
fn label(l: &str) -> String {
    if l == "(未标注)" {
        "(unlabelled)".to_string()
    } else {
        l.to_string()
    }
}

/// pid/device key as the README's per-process figures write it.
fn series_key(r: &Row) -> String {
    format!("{}/{}", r["pid"], s(&r["device"]))
}

// ---- fragmentation and pool expansions ------------------------------------------------------------

#[tokio::test]
async fn fragmentation_and_expansions_match_reference() {
    let golden = golden();
    for sample in SAMPLES {
        let g = &golden[*sample];
        let sc = scale(g);
        let ds = open(&real_sample(sample)).await;
        let src = source_of(sample);
        let frag = query(
            &ds.engine,
            "SELECT * FROM fragmentation ORDER BY pid, device, pool",
        )
        .await;
        let lows = query(
            &ds.engine,
            "SELECT pid, device, pool, u['ts'] AS ts, u['ts_raw'] AS ts_raw, u['usage_pct'] AS usage_pct, u['used'] AS used, u['total'] AS total
             FROM (SELECT pid, device, pool, unnest(lowest_usage) AS u FROM fragmentation)",
        )
        .await;
        let exps = query(
            &ds.engine,
            "SELECT * FROM pool_expansions ORDER BY pid, device, pool, ts",
        )
        .await;
        assert!(frag
            .iter()
            .all(|r| r["source"].as_str().unwrap().ends_with(&src)));
        let gf = g["fragmentation"].as_object().unwrap();
        assert_eq!(
            frag.iter()
                .map(|r| s(&r["pool"]).to_string())
                .collect::<std::collections::BTreeSet<_>>(),
            gf.keys().cloned().collect(),
            "{sample}: pools with fragmentation figures"
        );
        for (pool, want) in gf {
            let series: Vec<&Row> = frag.iter().filter(|r| r["pool"] == pool.as_str()).collect();
            let q = quirk(g, &format!("fragmentation.{pool}"));
            // Expected figures per series: the reference's when it sees one series, the correct
            // per-process/device figures where it mixed several (quirk 2/12).
            let expected: Vec<(Option<String>, &Value)> =
                match q.and_then(|q| q["correct_per_pid_device"].as_object()) {
                    Some(per) => per.iter().map(|(k, v)| (Some(k.clone()), v)).collect(),
                    None => vec![(None, want)],
                };
            assert_eq!(
                series.len(),
                expected.len(),
                "{sample} {pool}: one row per process/device series"
            );
            for (key, w) in expected {
                let r = match &key {
                    Some(k) => *series
                        .iter()
                        .find(|r| &series_key(r) == k)
                        .unwrap_or_else(|| panic!("{sample} {pool} {k}")),
                    None => series[0],
                };
                let ctx = format!("{sample} {pool} {key:?}");
                assert_eq!(int(&r["rows"]), int(&w["rows"]), "{ctx} rows");
                assert_eq!(int(&r["samples"]), int(&w["frag_samples"]), "{ctx} samples");
                assert_eq!(
                    pct1(&r["current_frag_pct"]),
                    num(&w["current"]),
                    "{ctx} current"
                );
                assert_eq!(pct1(&r["peak_frag_pct"]), num(&w["peak"]), "{ctx} peak");
                assert_eq!(pct1(&r["mean_frag_pct"]), num(&w["mean"]), "{ctx} mean");
                assert_eq!(
                    int(&r["peak_ts"]),
                    Some(int(&w["worst_ts"]).unwrap() * sc),
                    "{ctx} worst ts"
                );
                assert_eq!(
                    int(&r["peak_ts_raw"]),
                    int(&w["worst_ts"]),
                    "{ctx} worst ts (file unit)"
                );
                let n_exp = match w.get("expansion_count") {
                    Some(v) => int(v).unwrap(),
                    None => w["expansions"].as_array().unwrap().len() as i64,
                };
                assert_eq!(int(&r["expansions"]), Some(n_exp), "{ctx} expansions");
                // level: the guide's thresholds on the current value
                let cur = num(&r["current_frag_pct"]);
                let level = if cur < 0.0 {
                    "invalid"
                } else if cur < 5.0 {
                    "normal"
                } else if cur <= 15.0 {
                    "elevated"
                } else {
                    "severe"
                };
                assert_eq!(s(&r["level"]), level, "{ctx} level");
                if key.is_none() {
                    // lowest-usage moments: [ts, usage %, total, used], lowest first
                    let got: Vec<(i64, f64, i64, i64)> = lows
                        .iter()
                        .filter(|l| {
                            l["pool"] == pool.as_str()
                                && l["pid"] == r["pid"]
                                && l["device"] == r["device"]
                        })
                        .map(|l| {
                            assert_eq!(int(&l["ts"]).unwrap(), int(&l["ts_raw"]).unwrap() * sc);
                            (
                                int(&l["ts_raw"]).unwrap(),
                                pct1(&l["usage_pct"]),
                                int(&l["total"]).unwrap(),
                                int(&l["used"]).unwrap(),
                            )
                        })
                        .collect();
                    let want_low: Vec<(i64, f64, i64, i64)> = w["lowest_usage"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| {
                            (
                                int(&l[0]).unwrap(),
                                num(&l[1]),
                                int(&l[2]).unwrap(),
                                int(&l[3]).unwrap(),
                            )
                        })
                        .collect();
                    assert_eq!(got, want_low, "{ctx} lowest usage");
                    // expansion table
                    let got_exp: Vec<Vec<Value>> = exps
                        .iter()
                        .filter(|e| {
                            e["pool"] == pool.as_str()
                                && e["pid"] == r["pid"]
                                && e["device"] == r["device"]
                        })
                        .map(|e| {
                            vec![
                                Value::from(int(&e["ts_raw"]).unwrap()),
                                e["total_before"].clone(),
                                e["total_after"].clone(),
                                e["delta"].clone(),
                                Value::from(pct1(&e["usage_before_pct"])),
                                e["hal_segments"].clone(),
                                e["hal_bytes"].clone(),
                            ]
                        })
                        .collect();
                    let want_exp: Vec<Vec<Value>> = w["expansions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| {
                            vec![
                                e["ts"].clone(),
                                e["before"].clone(),
                                e["after"].clone(),
                                e["delta"].clone(),
                                Value::from(num(&e["eff_pct"])),
                                e["segs"].clone(),
                                e["seg_bytes"].clone(),
                            ]
                        })
                        .collect();
                    assert_eq!(got_exp, want_exp, "{ctx} expansions table");
                }
            }
        }
    }
}

// ---- HAL segments ---------------------------------------------------------------------------------

#[tokio::test]
async fn hal_segments_match_reference() {
    let golden = golden();
    for sample in SAMPLES {
        let g = &golden[*sample];
        let sc = scale(g);
        let ds = open(&real_sample(sample)).await;
        for key in ["min_1MB", "default"] {
            let w = &g["hal_segments"][key];
            let ctx = format!("{sample} {key}");
            let min = int(&w["min_size"]).unwrap();
            let sql = if key == "default" {
                "SELECT * FROM hal_segments()".to_string()
            } else {
                format!("SELECT * FROM hal_segments({min}) ORDER BY size DESC, ts")
            };
            let got = query(&ds.engine, &sql).await;
            assert_eq!(got.len() as i64, int(&w["listed"]).unwrap(), "{ctx} listed");
            assert_eq!(
                got.iter().map(|r| int(&r["size"]).unwrap()).sum::<i64>(),
                int(&w["listed_bytes"]).unwrap(),
                "{ctx} bytes"
            );
            let ge100 = got
                .iter()
                .filter(|r| int(&r["size"]).unwrap() >= 100 << 20)
                .count() as i64;
            assert_eq!(ge100, int(&w["ge_100mb"]).unwrap(), "{ctx} ≥ 100 MiB");
            // rows: [ts, size, owner, alloc_type ("UNKNOWN" = not recorded), page_type, first frame]
            let rows: Vec<Vec<Value>> = got
                .iter()
                .map(|r| {
                    assert_eq!(int(&r["ts"]).unwrap(), int(&r["ts_raw"]).unwrap() * sc);
                    vec![
                        r["ts_raw"].clone(),
                        r["size"].clone(),
                        r["owner"].clone(),
                        if r["alloc_type"].is_null() {
                            Value::from("UNKNOWN")
                        } else {
                            r["alloc_type"].clone()
                        },
                        r["page_type"].clone(),
                        r["stack_top"].clone(),
                    ]
                })
                .collect();
            let want: Vec<Vec<Value>> = w["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().clone())
                .collect();
            assert_eq!(rows, want, "{ctx} rows");
            assert!(
                got.iter().all(|r| r["expandable_segments"] == false),
                "{ctx}"
            );
        }
        // alloc/create summary over every HAL MALLOC of the file. The reference prints it only
        // when a segment passes --min-size (quirk 13); memq always has it.
        let sum = &query(
            &ds.engine,
            "SELECT sum(alloc_segments) AS alloc, sum(alloc_bytes) AS alloc_bytes, sum(create_segments) AS \"create\",
                    sum(create_bytes) AS create_bytes, sum(other_segments + stock_segments) AS other,
                    sum(other_bytes + stock_bytes) AS other_bytes, bool_or(expandable_segments) AS expandable
             FROM hal_segment_summary",
        )
        .await[0];
        let w = &g["hal_segments"]["min_1MB"];
        for k in [
            "alloc",
            "alloc_bytes",
            "create",
            "create_bytes",
            "other",
            "other_bytes",
        ] {
            assert_eq!(int(&sum[k]), int(&w[k]), "{sample} summary {k}");
        }
        assert_eq!(
            sum["expandable"], w["expandable_active"],
            "{sample} verdict"
        );
        let q = quirk(g, "hal_segments.default").expect("quirk 13 is recorded for every sample");
        let other = q["correct"]["other"].as_array().unwrap();
        assert_eq!(
            int(&sum["other"]),
            int(&other[0]),
            "{sample} quirk 13 other count"
        );
        assert_eq!(
            int(&sum["other_bytes"]),
            int(&other[1]),
            "{sample} quirk 13 other bytes"
        );
    }
}

// ---- trend ----------------------------------------------------------------------------------------

#[tokio::test]
async fn trend_matches_reference() {
    let golden = golden();
    for sample in SAMPLES {
        let g = &golden[*sample];
        let sc = scale(g);
        let ds = open(&real_sample(sample)).await;
        for (key, buckets) in [("buckets_5", 5), ("default", 20)] {
            let rows = query(
                &ds.engine,
                &format!("SELECT * FROM trend({buckets}) ORDER BY pid, device, pool, bucket"),
            )
            .await;
            let series = |pool: &str| -> BTreeMap<String, Vec<Row>> {
                let mut m: BTreeMap<String, Vec<Row>> = BTreeMap::new();
                for r in rows.iter().filter(|r| r["pool"] == pool) {
                    m.entry(series_key(r)).or_default().push(r.clone());
                }
                m
            };
            // HAL: the reference fails (HAL rows carry no `used`, quirk 6); memq uses the live
            // bytes from pairing, so the last non-empty bucket of each HAL series is what the
            // series still holds at the end = the HAL leak candidates' bytes (correct keying).
            assert_eq!(g["trend"][key]["HAL"]["fail"], true);
            let hal = series("HAL");
            assert!(!hal.is_empty(), "{sample} {key}: HAL series");
            let held: i64 = hal
                .values()
                .map(|rs| {
                    rs.iter()
                        .rfind(|r| !r["used_last"].is_null())
                        .map(|r| int(&r["used_last"]).unwrap())
                        .unwrap()
                })
                .sum();
            let leak_hal = match quirk(g, "leak_candidates.pool_HAL") {
                Some(q) => int(&q["correct"]["blocks"])
                    .map(|_| int(&q["correct"]["bytes"]).unwrap())
                    .unwrap(),
                None => int(&g["leak_candidates"]["pool_HAL"]["bytes"]).unwrap(),
            };
            assert_eq!(held, leak_hal, "{sample} {key}: HAL held at the end");
            for rs in hal.values() {
                assert_eq!(rs.len(), buckets as usize);
                assert!(
                    rs.iter().all(|r| r["used_last"] == r["total_last"]),
                    "HAL total = used"
                );
            }

            let w = &g["trend"][key]["PTA"];
            let pta = series("PTA");
            let q = quirk(g, &format!("trend.{key}.PTA.verdict"));
            if let Some(per) = q.and_then(|q| q["correct_per_pid_device"].as_object()) {
                // several processes: the reference mixes their counters (quirk 2); check each series
                assert_eq!(pta.len(), per.len(), "{sample} {key}: PTA series");
                for (k, c) in per {
                    let rs = &pta[k];
                    let lasts: Vec<i64> = rs
                        .iter()
                        .filter(|r| int(&r["bucket"]).unwrap() >= 1)
                        .filter_map(|r| int(&r["used_last"]))
                        .collect();
                    let want: Vec<i64> = c["lasts_after_bucket0"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| int(v).unwrap())
                        .collect();
                    assert_eq!(lasts, want, "{sample} {key} {k} lasts");
                    check_verdict(&rs[0], &c["verdict"], &format!("{sample} {key} {k}"));
                    let b = c["algo_b"].as_array().unwrap();
                    assert_eq!(int(&rs[0]["total_first_bytes"]), int(&b[0]));
                    assert_eq!(int(&rs[0]["total_final_bytes"]), int(&b[1]));
                    assert_eq!(rs[0]["total_non_decreasing"], true);
                }
                continue;
            }
            // one PTA series matches the reference's view (its time range is the reference's)
            let ts_min = int(&w["ts_min"]).unwrap() * sc;
            let rs = pta
                .values()
                .find(|rs| int(&rs[0]["t0"]) == Some(ts_min))
                .unwrap_or_else(|| panic!("{sample} {key}: a PTA series starting at {ts_min}"));
            let ctx = format!("{sample} {key} PTA");
            assert_eq!(rs.len(), buckets as usize, "{ctx}");
            // table: [idx, lo, hi, used_last, used_min, used_max (0 when empty), total_last];
            // bounds in the file's unit (t0_raw = floor(t0 / scale) = the reference's bound)
            for (r, t) in rs.iter().zip(w["table"].as_array().unwrap()) {
                let t = t.as_array().unwrap();
                assert_eq!(int(&r["bucket"]), int(&t[0]), "{ctx}");
                assert_eq!(int(&r["t0_raw"]), int(&t[1]), "{ctx} lo");
                assert_eq!(int(&r["t1_raw"]), int(&t[2]), "{ctx} hi");
                assert_eq!(
                    int(&r["t0"]).unwrap() / sc,
                    int(&t[1]).unwrap(),
                    "{ctx} lo (ns)"
                );
                assert_eq!(int(&r["used_last"]), int(&t[3]), "{ctx} used_last");
                assert_eq!(int(&r["used_min_bytes"]), int(&t[4]), "{ctx} used_min");
                assert_eq!(
                    int(&r["used_max_bytes"]).unwrap_or(0),
                    int(&t[5]).unwrap(),
                    "{ctx} used_max"
                );
                assert_eq!(int(&r["total_last"]), int(&t[6]), "{ctx} total_last");
            }
            assert_eq!(
                int(&rs.last().unwrap()["t1"]),
                Some(int(&w["ts_max"]).unwrap() * sc)
            );
            let lasts: Vec<i64> = rs
                .iter()
                .filter(|r| int(&r["bucket"]).unwrap() >= 1)
                .filter_map(|r| int(&r["used_last"]))
                .collect();
            let want: Vec<i64> = w["lasts_after_bucket0"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| int(v).unwrap())
                .collect();
            assert_eq!(lasts, want, "{ctx} lasts");
            let r = &rs[0];
            if w["verdict"] == "no_verdict" {
                assert_eq!(s(&r["growth_verdict"]), "no_verdict", "{ctx}");
            } else {
                assert_eq!(int(&r["base_used"]), int(&w["base"]), "{ctx} base");
                assert_eq!(int(&r["net_growth_bytes"]), int(&w["net"]), "{ctx} net");
                assert_eq!(
                    pct1(&r["net_growth_pct"]),
                    num(&w["net_pct"]),
                    "{ctx} net %"
                );
                assert_eq!(r["monotonic"], w["monotonic"], "{ctx} monotonic");
                match q {
                    // quirk 5: the baseline is not in its own denominator
                    Some(q) => check_verdict(r, &q["correct"], &ctx),
                    None => {
                        assert_eq!(s(&r["growth_verdict"]), s(&w["verdict"]), "{ctx} verdict");
                        assert_eq!(int(&r["above_base"]), int(&w["above"]), "{ctx}");
                    }
                }
            }
            match w["algo_b"].as_array() {
                Some(b) => {
                    assert_eq!(r["total_non_decreasing"], true, "{ctx} algorithm B");
                    assert_eq!(int(&r["total_first_bytes"]), int(&b[0]), "{ctx}");
                    assert_eq!(int(&r["total_final_bytes"]), int(&b[1]), "{ctx}");
                    assert_eq!(
                        r["reservation_growth"],
                        Value::from(int(&b[1]) > int(&b[0])),
                        "{ctx}"
                    );
                }
                None => assert!(
                    w["verdict"] == "no_verdict",
                    "{ctx}: B is printed whenever A has a verdict"
                ),
            }
        }
    }
}

/// memq's algorithm-A verdict against a `correct` object {verdict, above, n, monotonic, base}.
fn check_verdict(r: &Row, c: &Value, ctx: &str) {
    assert_eq!(s(&r["growth_verdict"]), s(&c["verdict"]), "{ctx} verdict");
    assert_eq!(int(&r["above_base"]), int(&c["above"]), "{ctx} above");
    assert_eq!(int(&r["compared_buckets"]), int(&c["n"]), "{ctx} compared");
    assert_eq!(r["monotonic"], c["monotonic"], "{ctx} monotonic");
    assert_eq!(int(&r["base_used"]), int(&c["base"]), "{ctx} base");
}

// ---- window ---------------------------------------------------------------------------------------

#[tokio::test]
async fn window_summary_matches_reference() {
    let golden = golden();
    for sample in SAMPLES {
        let g = &golden[*sample];
        let sc = scale(g);
        let ds = open(&real_sample(sample)).await;
        for (key, w) in g["window"].as_object().unwrap() {
            let ctx = format!("{sample} window.{key}");
            let (t0, t1) = (int(&w["start"]).unwrap() * sc, int(&w["end"]).unwrap() * sc);
            let pool = match w["pool"].as_str() {
                Some(p) => format!("'{p}'"),
                None => "NULL".to_string(),
            };
            let rows = query(
                &ds.engine,
                &format!("SELECT * FROM window_summary({t0}, {t1}, {pool})"),
            )
            .await;
            let total = |k: &str| rows.iter().map(|r| int(&r[k]).unwrap()).sum::<i64>();
            // the figures the reference gets right everywhere
            assert_eq!(
                total("alloc_count"),
                int(&w["alloc_count"]).unwrap(),
                "{ctx} allocations"
            );
            assert_eq!(
                total("alloc_bytes"),
                int(&w["alloc_bytes"]).unwrap(),
                "{ctx} allocated bytes"
            );
            assert_eq!(
                total("shadow_free_count"),
                int(&w["shadow_count"]).unwrap(),
                "{ctx}"
            );
            assert_eq!(
                total("shadow_free_bytes"),
                int(&w["shadow_bytes"]).unwrap(),
                "{ctx}"
            );
            assert_eq!(
                total("promoted_count"),
                0,
                "{ctx}: G1/G2 have no shadow rows"
            );
            // start / free / end / net: the reference's figures, or the correct ones where it
            // keyed blocks by Ptr only (quirk 2)
            let q = quirk(g, &format!("window.{key}"));
            let want = q.map(|q| &q["correct"]).unwrap_or(w);
            for (mine, theirs) in [
                ("start_bytes", "start_bytes"),
                ("start_blocks", "start_blocks"),
                ("free_count", "free_count"),
                ("free_bytes", "free_bytes"),
                ("end_bytes", "end_bytes"),
                ("end_blocks", "end_blocks"),
                ("net_bytes", "net_bytes"),
                ("net_blocks", "net_blocks"),
            ] {
                assert_eq!(total(mine), int(&want[theirs]).unwrap(), "{ctx} {mine}");
            }
            assert_eq!(
                total("replaced_count"),
                0,
                "{ctx}: no address reuse without FREE in a series"
            );
            // identity of the counts
            assert_eq!(
                total("end_bytes"),
                total("start_bytes") + total("alloc_bytes") + total("promoted_bytes")
                    - total("free_bytes")
                    - total("shadow_free_bytes")
                    - total("replaced_bytes"),
                "{ctx}: end = start + allocated - freed"
            );
            // groups: with a pool the reference labels by level-1 group, without one by the full
            // owner, which is the Event Type for these samples (no owners): sum per label
            let by = |col: &str| -> BTreeMap<String, i64> {
                let mut m = BTreeMap::new();
                for r in &rows {
                    let groups = query_groups(&r[col]);
                    for (grp, bytes) in groups {
                        let label = if w["pool"].is_null() {
                            s(&r["pool"]).to_string()
                        } else {
                            grp
                        };
                        *m.entry(label).or_insert(0) += bytes;
                    }
                }
                m
            };
            let golden_by = |k: &str| -> BTreeMap<String, i64> {
                w[k].as_array()
                    .unwrap()
                    .iter()
                    .map(|e| (label(s(&e[0])), int(&e[1]).unwrap()))
                    .collect()
            };
            assert_eq!(
                by("top_alloc_groups"),
                golden_by("alloc_by"),
                "{ctx} allocations by group"
            );
            match q.and_then(|q| q["correct_end_by_pool"].as_object()) {
                Some(per_pool) => {
                    let want: BTreeMap<String, i64> = per_pool
                        .iter()
                        .map(|(k, v)| (k.clone(), int(v).unwrap()))
                        .collect();
                    assert_eq!(by("top_end_groups"), want, "{ctx} end by pool (quirk 2)");
                }
                None => {
                    assert_eq!(
                        by("top_end_groups"),
                        golden_by("end_by"),
                        "{ctx} end by group"
                    );
                    assert_eq!(
                        by("top_start_groups"),
                        golden_by("start_by"),
                        "{ctx} start by group"
                    );
                }
            }
            // in-window used peak: per series; the reference mixes pools with `used` (PTA here)
            // and has none for HAL (quirk 6), where memq gives the peak of the paired live bytes
            let counters: Vec<&Row> = rows
                .iter()
                .filter(|r| r["pool"] != "HAL" && !r["used_peak"].is_null())
                .collect();
            match int(&w["used_peak"]) {
                Some(peak) => {
                    let best = counters
                        .iter()
                        .max_by_key(|r| int(&r["used_peak"]).unwrap())
                        .expect("a series with a peak");
                    assert_eq!(int(&best["used_peak"]), Some(peak), "{ctx} used peak");
                    assert_eq!(
                        int(&best["used_peak_ts"]),
                        Some(int(&w["used_peak_ts"]).unwrap() * sc),
                        "{ctx} used peak ts"
                    );
                    assert_eq!(
                        int(&best["used_peak_ts_raw"]),
                        int(&w["used_peak_ts"]),
                        "{ctx} used peak ts (file unit)"
                    );
                }
                None => assert!(counters.is_empty(), "{ctx}"),
            }
            for r in rows
                .iter()
                .filter(|r| r["pool"] == "HAL" && !r["used_peak"].is_null())
            {
                let peak = int(&r["used_peak"]).unwrap();
                assert!(
                    peak >= int(&r["end_bytes"]).unwrap(),
                    "{ctx}: HAL peak ≥ end"
                );
                assert!(
                    peak <= int(&r["start_bytes"]).unwrap() + int(&r["alloc_bytes"]).unwrap(),
                    "{ctx}: HAL peak ≤ start + allocated"
                );
            }
        }
    }
}

/// (group, bytes) of a top_*_groups list.
fn query_groups(v: &Value) -> Vec<(String, i64)> {
    match v {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|g| (s(&g["group"]).to_string(), int(&g["bytes"]).unwrap()))
            .collect(),
        other => panic!("groups: {other}"),
    }
}

// ---- OOM and steps on the real samples ------------------------------------------------------------

#[tokio::test]
async fn oom_and_steps_on_real_samples() {
    let golden = golden();
    for sample in SAMPLES {
        let g = &golden[*sample];
        let ds = open(&real_sample(sample)).await;
        // no sample has OOM_DETAIL or SNAPSHOT rows: the reference prints "no OOM_DETAIL records"
        let n = query(&ds.engine, "SELECT count(*) AS n FROM oom_events").await;
        assert_eq!(int(&n[0]["n"]), int(&g["oom"]["records"]), "{sample}");
        let f = query(&ds.engine, "SELECT count(*) AS n FROM oom_findings").await;
        assert_eq!(
            int(&f[0]["n"]).unwrap(),
            6 * int(&g["oom"]["triggers"]).unwrap(),
            "{sample}: six rules per trigger"
        );
        // G1 samples open one MSTX "step start" range per process and never close it; G2 has none
        let steps = query(&ds.engine, "SELECT * FROM steps ORDER BY pid").await;
        let ranges = query(
            &ds.engine,
            "SELECT count(*) AS n FROM events WHERE event = 'MSTX' AND event_type = 'Range_start' AND trim(name) = 'step start'",
        )
        .await;
        assert_eq!(
            steps.len() as i64,
            int(&ranges[0]["n"]).unwrap(),
            "{sample}"
        );
        for st in &steps {
            assert_eq!(s(&st["origin"]), "MSTX_RANGE");
            assert_eq!(int(&st["step"]), Some(1));
            assert!(
                st["end_ts"].is_null() && st["complete"] == false,
                "{sample}: open step"
            );
        }
        // an open step runs to the end of the data: its PTA peak is the series' peak after the start
        let peaks = query(&ds.engine, "SELECT * FROM step_peaks WHERE pool = 'PTA'").await;
        assert_eq!(peaks.len(), steps.len(), "{sample}");
        for p in &peaks {
            assert!(p["end_used"].is_null() && p["growth"].is_null());
            let want = query(
                &ds.engine,
                &format!(
                    "SELECT max(used) AS m FROM usage_series WHERE pool = 'PTA' AND pid = {} AND device = '{}' AND ts >= {}",
                    p["pid"],
                    s(&p["device"]),
                    p["start_ts"]
                ),
            )
            .await;
            let start = int(&p["start_used"]).unwrap_or(0);
            assert_eq!(
                int(&p["peak_used"]).unwrap(),
                int(&want[0]["m"]).unwrap().max(start),
                "{sample}"
            );
        }
    }
}

// ---- OOM rules on a constructed dump -------------------------------------------------------------

/// A small HEAD-format dump: snapshots before, at and after an OOM, and RECENT records whose
/// innermost Python frames repeat while their whole stacks differ.
const OOM_DUMP: &str = "\
ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)
2,SNAPSHOT,SNAPSHOT,Memory Snapshot,1765000000000001000,7,7,0,N/A,\"{reserved:0,max_reserved:0,allocated:0,max_allocated:0,total:68719476736,free:8589934592,device_rate:87.500000,reserved_rate:0.000000}\",,
3,SNAPSHOT,SNAPSHOT,OOM_Snapshot,1765000000000003000,7,7,0,N/A,\"{reserved:0,max_reserved:0,allocated:0,max_allocated:0,total:68719476736,free:2147483648,device_rate:96.875000,reserved_rate:0.000000}\",,
4,OOM_DETAIL,OOM_TRIGGER,OOM_Trigger,1765000000000002000,7,7,0,N/A,\"{func:halMemAlloc,req_size:1932735283,flag:0}\",\"model.py(10): forward
train.py(1): main
\",
5,SNAPSHOT,SNAPSHOT,Memory Snapshot,1765000000000009000,7,7,0,N/A,\"{total_mem:68719476736,free_mem:60000000000,reserved:0,peak_reserved:0,allocated:0,peak_allocated:0,device_utilization:12.689000,pt_utilization:0.000000}\",,
6,OOM_DETAIL,OOM_RECENT_ALLOC,OOM_RecentAlloc,1765000000000004000,7,7,N/A,N/A,\"{pool:PTA,ptr:0x0000000000100000,size:1048576,timestamp:1765000000000000900}\",\"model.py(10): forward
train.py(1): a
\",
7,OOM_DETAIL,OOM_RECENT_ALLOC,OOM_RecentAlloc,1765000000000004001,7,7,N/A,N/A,\"{pool:PTA,ptr:0x0000000000200000,size:1048576,timestamp:1765000000000000800}\",\"model.py(10): forward
train.py(2): b
\",
8,OOM_DETAIL,OOM_RECENT_ALLOC,OOM_RecentAlloc,1765000000000004002,7,7,N/A,N/A,\"{pool:PTA,ptr:0x0000000000300000,size:1048576,timestamp:1765000000000000700}\",\"model.py(10): forward
train.py(3): c
\",
9,OOM_DETAIL,OOM_RECENT_ALLOC,OOM_RecentAlloc,1765000000000004003,7,7,N/A,N/A,\"{pool:PTA,ptr:0x0000000000400000,size:1048576,timestamp:1765000000000000600}\",NA,
10,OOM_DETAIL,OOM_RECENT_ALLOC,OOM_RecentAlloc,1765000000000004004,7,7,N/A,N/A,\"{pool:PTA,ptr:0x0000000000500000,size:1048576,timestamp:1765000000000000500}\",NA,
";

#[tokio::test]
async fn oom_rules_use_the_snapshot_before_the_trigger_and_whole_stacks() {
    let dir = tempfile::TempDir::new().unwrap();
    let dump = dir.path().join("memscope_dump_20251206000000.csv");
    std::fs::write(&dump, OOM_DUMP).unwrap();
    let ds = open(&dump).await;
    let ev = query(
        &ds.engine,
        "SELECT * FROM oom_events WHERE kind = 'trigger'",
    )
    .await;
    assert_eq!(ev.len(), 1);
    // R: the OOM_Snapshot recorded before the trigger (ID 3), although it is timestamped after
    // the failed call; not the earlier-timestamped snapshot (8 GiB free) nor the file's last (60 GB)
    assert_eq!(int(&ev[0]["free_mem"]), Some(2147483648));
    assert_eq!(s(&ev[0]["snapshot_name"]), "OOM_Snapshot");
    let f: BTreeMap<String, String> = query(&ds.engine, "SELECT rule, verdict FROM oom_findings")
        .await
        .iter()
        .map(|r| (s(&r["rule"]).to_string(), s(&r["verdict"]).to_string()))
        .collect();
    // 1.8 GiB requested with 2 GiB free: ≥ 80 % (with the last snapshot's 60 GB it would not be)
    assert_eq!(f["single_huge_request"], "yes");
    assert_eq!(
        f["over_large_request"], "yes",
        "R > 1 GiB, every RECENT block ≤ R"
    );
    assert_eq!(f["chain_of_large_allocations"], "no");
    // three RECENT stacks share their innermost frame but differ below it, two are `NA`: the
    // reference's first-frame test fires, comparing whole stacks does not
    assert_eq!(f["same_stack_repeated"], "no");
    assert_eq!(f["top_owner"], "unknown", "no TOP records");
    assert_eq!(f["accumulation"], "unknown", "no steps");
    let recent = query(
        &ds.engine,
        "SELECT nth, alloc_ts, stack_top FROM oom_events WHERE kind = 'recent' ORDER BY nth",
    )
    .await;
    assert_eq!(recent.len(), 5);
    assert_eq!(
        int(&recent[0]["alloc_ts"]),
        Some(1765000000000000900),
        "rank 1 = newest, as written"
    );
    assert_eq!(s(&recent[0]["stack_top"]), "model.py(10): forward");
    assert!(recent[4]["stack_top"].is_null(), "NA is no stack");
}

// ---- G3 fixture: OOM, snapshots, steps, expansions, HAL segments -------------------------------------

/// The G3 fixture and its truth, or None when another engineer has not written it yet.
async fn g3() -> Option<(Dataset, Value)> {
    let dir = g3_fixture();
    let truth = dir.join("truth.json");
    if !truth.exists() {
        eprintln!("skipping: {} not present", truth.display());
        return None;
    }
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(truth).unwrap()).unwrap();
    Some((open(&dir).await, truth))
}

#[tokio::test]
async fn g3_oom_records_and_snapshot_match_truth() {
    let Some((ds, truth)) = g3().await else {
        return;
    };
    let ooms = truth["oom"].as_array().unwrap();
    let events = query(
        &ds.engine,
        "SELECT * FROM oom_events ORDER BY oom_ts, kind, nth",
    )
    .await;
    let triggers: Vec<&Row> = events.iter().filter(|r| r["kind"] == "trigger").collect();
    assert_eq!(triggers.len(), ooms.len(), "one trigger per OOM");
    for (o, t) in ooms.iter().zip(&triggers) {
        assert_eq!(t["pid"], o["pid"]);
        assert_eq!(t["device"], o["device"]);
        assert_eq!(int(&t["oom_ts"]), int(&o["ts"]));
        assert_eq!(s(&t["func"]), s(&o["func"]));
        assert_eq!(int(&t["req_size"]), int(&o["req_size"]));
        assert_eq!(t["flag"].as_u64(), o["flag"].as_u64());
        // the automatic OOM_Snapshot: written just before the trigger, timestamped after it
        assert_eq!(
            int(&t["snapshot_ts"]),
            int(&o["snapshot_ts"]),
            "snapshot of the trigger"
        );
        assert!(int(&t["snapshot_ts"]) > int(&t["oom_ts"]));
        assert_eq!(s(&t["snapshot_name"]), "OOM_Snapshot");
        assert_eq!(int(&t["free_mem"]), int(&o["free"]));
        assert_eq!(int(&t["total_mem"]), int(&o["total"]));
        let pct = num(&t["req_pct_of_free"]);
        let want = int(&o["req_size"]).unwrap() as f64 / int(&o["free"]).unwrap() as f64 * 100.0;
        assert!((pct - want).abs() < 1e-9);
        for kind in ["recent", "top"] {
            let got: Vec<(String, i64, i64, i64)> = events
                .iter()
                .filter(|r| r["kind"] == kind && r["trigger_id"] == t["trigger_id"])
                .map(|r| {
                    (
                        s(&r["pool"]).to_string(),
                        int(&r["ptr"]).unwrap(),
                        int(&r["size"]).unwrap(),
                        int(&r["alloc_ts"]).unwrap(),
                    )
                })
                .collect();
            let want: Vec<(String, i64, i64, i64)> = o[kind]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    (
                        s(&x["pool"]).to_string(),
                        int(&x["ptr"]).unwrap(),
                        int(&x["size"]).unwrap(),
                        int(&x["timestamp"]).unwrap(),
                    )
                })
                .collect();
            assert_eq!(
                got, want,
                "{kind} records once each, in written order (device copies removed)"
            );
            // every record takes the trigger's device and snapshot
            for r in events.iter().filter(|r| r["kind"] == kind) {
                assert_eq!(r["device"], o["device"]);
                assert_eq!(int(&r["snapshot_ts"]), int(&o["snapshot_ts"]));
            }
        }
    }
    // owners of TOP blocks recovered from their MALLOC rows: the HAL segments' owners
    let segs = truth["hal_segments"].as_array().unwrap();
    for r in events
        .iter()
        .filter(|r| r["kind"] == "top" && r["pool"] == "HAL")
    {
        let seg = segs
            .iter()
            .find(|g| int(&g["ptr"]) == int(&r["ptr"]) && int(&g["ts"]) == int(&r["alloc_ts"]))
            .expect("TOP HAL block is a known segment");
        assert_eq!(s(&r["owner"]), s(&seg["owner"]));
    }
    // leaking PTA blocks among the RECENT records carry their owner too
    let leaks = truth["leak"]["blocks"].as_array().unwrap();
    for r in events.iter().filter(|r| r["kind"] == "recent") {
        if let Some(l) = leaks.iter().find(|l| {
            int(&l["ptr"]) == int(&r["ptr"]) && int(&l["alloc_ts"]) == int(&r["alloc_ts"])
        }) {
            assert_eq!(s(&r["owner"]), s(&l["owner"]));
        }
    }
}

#[tokio::test]
async fn g3_oom_findings_follow_the_guide() {
    let Some((ds, truth)) = g3().await else {
        return;
    };
    let findings = query(
        &ds.engine,
        "SELECT * FROM oom_findings ORDER BY trigger_id, priority",
    )
    .await;
    let stacks = query(
        &ds.engine,
        "SELECT count(*) AS n FROM oom_events WHERE kind = 'recent' AND nth <= 5
           AND (NULLIF(trim(stack_py), '') IS NOT NULL OR NULLIF(trim(stack_c), '') IS NOT NULL)",
    )
    .await;
    for o in truth["oom"].as_array().unwrap() {
        let rules: BTreeMap<String, &Row> = findings
            .iter()
            .filter(|f| int(&f["oom_ts"]) == int(&o["ts"]))
            .map(|f| (s(&f["rule"]).to_string(), f))
            .collect();
        assert_eq!(rules.len(), 6, "six rules per trigger");
        let (req, free) = (
            int(&o["req_size"]).unwrap() as f64,
            int(&o["free"]).unwrap(),
        );
        for f in rules.values() {
            assert_eq!(
                int(&f["free_mem"]),
                Some(free),
                "R = free memory of the snapshot before the OOM"
            );
            assert_eq!(int(&f["snapshot_ts"]), int(&o["snapshot_ts"]));
        }
        let yes = |b: bool| if b { "yes" } else { "no" };
        assert_eq!(
            s(&rules["single_huge_request"]["verdict"]),
            yes(req >= 0.8 * free as f64)
        );
        let recent: Vec<i64> = o["recent"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| int(&r["size"]).unwrap())
            .collect();
        assert_eq!(
            s(&rules["over_large_request"]["verdict"]),
            yes(free > 1 << 30 && recent.iter().all(|&b| b <= free))
        );
        let first5: i64 = recent.iter().take(5).sum();
        assert_eq!(
            s(&rules["chain_of_large_allocations"]["verdict"]),
            yes(first5 > 3 * free)
        );
        if int(&stacks[0]["n"]).unwrap() < 3 {
            assert_eq!(
                s(&rules["same_stack_repeated"]["verdict"]),
                "unknown",
                "RECENT records without stacks"
            );
        }
        // TOP blocks are HAL segments (CANN@...) here: no model-state / KV / activation owner
        assert_eq!(s(&rules["top_owner"]["verdict"]), "no");
        // the run leaks a little every step (leak_bytes) and the RECENT blocks span steps 4 and 5
        assert!(int(&truth["config"]["leak_bytes"]).unwrap() > 0);
        assert_eq!(s(&rules["accumulation"]["verdict"]), "yes");
    }
}

#[tokio::test]
async fn g3_steps_and_step_peaks_match_truth() {
    let Some((ds, truth)) = g3().await else {
        return;
    };
    let steps = query(&ds.engine, "SELECT * FROM steps ORDER BY device, start_ts").await;
    let mut want: Vec<(String, i64, i64, Option<i64>)> = Vec::new();
    for p in truth["processes"].as_array().unwrap() {
        for w in p["steps"].as_array().unwrap() {
            // steps run while collection was stopped leave no rows
            if w["collected"] == true {
                want.push((
                    s(&w["device"]).to_string(),
                    int(&w["step"]).unwrap(),
                    int(&w["start_ts"]).unwrap(),
                    int(&w["end_ts"]),
                ));
            }
        }
    }
    want.sort_by(|a, b| (&a.0, a.2).cmp(&(&b.0, b.2)));
    let got: Vec<(String, i64, i64, Option<i64>)> = steps
        .iter()
        .map(|r| {
            (
                s(&r["device"]).to_string(),
                int(&r["step"]).unwrap(),
                int(&r["start_ts"]).unwrap(),
                int(&r["end_ts"]),
            )
        })
        .collect();
    assert_eq!(got, want, "steps");
    assert!(steps.iter().all(|r| r["origin"] == "SYSTEM_STEP"));
    assert!(steps
        .iter()
        .all(|r| r["complete"] == !r["end_ts"].is_null()));

    let peaks = query(&ds.engine, "SELECT * FROM step_peaks").await;
    let checked = assert_step_peaks_match_truth(&peaks, &truth);
    assert!(checked >= 12, "PTA and HAL of both devices, 3–4 steps each");
    // the leak: PTA ends every complete step higher than the previous one
    for r in peaks
        .iter()
        .filter(|r| r["pool"] == "PTA" && !r["growth_vs_prev"].is_null())
    {
        assert!(int(&r["growth_vs_prev"]).unwrap() > 0);
    }
}

#[tokio::test]
async fn g3_expansions_fragmentation_and_trend_match_truth() {
    let Some((ds, truth)) = g3().await else {
        return;
    };
    let exps = query(
        &ds.engine,
        "SELECT * FROM pool_expansions ORDER BY device, pool, ts",
    )
    .await;
    let frag = query(&ds.engine, "SELECT * FROM fragmentation").await;
    for pool in truth["pools"].as_array().unwrap() {
        let (dev, name) = (&pool["device"], &pool["pool"]);
        let got: Vec<(i64, i64, i64)> = exps
            .iter()
            .filter(|e| &e["device"] == dev && &e["pool"] == name)
            .map(|e| {
                (
                    int(&e["ts"]).unwrap(),
                    int(&e["total_before"]).unwrap(),
                    int(&e["total_after"]).unwrap(),
                )
            })
            .collect();
        let want: Vec<(i64, i64, i64)> = pool["expansions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    int(&e["ts"]).unwrap(),
                    int(&e["total_before"]).unwrap(),
                    int(&e["total_after"]).unwrap(),
                )
            })
            .collect();
        assert_eq!(got, want, "{dev} {name} expansions");
        // every expansion comes with HAL segments of the same device adding up to the growth
        for e in exps
            .iter()
            .filter(|e| &e["device"] == dev && &e["pool"] == name)
        {
            assert_eq!(
                int(&e["hal_bytes"]),
                int(&e["delta"]),
                "{dev} {name} segment bytes at {}",
                e["ts"]
            );
        }
        if !pool["peak_total"].is_null() {
            let f = frag
                .iter()
                .find(|f| &f["device"] == dev && &f["pool"] == name)
                .expect("fragmentation row");
            assert_eq!(int(&f["rows"]), int(&pool["rows"]), "{dev} {name} rows");
            assert_eq!(int(&f["expansions"]), Some(want.len() as i64));
            assert_eq!(int(&f["peak_total"]), int(&pool["peak_total"]));
            assert_eq!(int(&f["total_last"]), int(&pool["final_total"]));
            assert_eq!(int(&f["used_last"]), int(&pool["final_used"]));
        }
        // trend: the last non-empty bucket holds the final level (HAL: paired, exit fill-ins
        // are memory still held at exit)
        let tr = query(
            &ds.engine,
            &format!(
                "SELECT * FROM trend(20, '{}') WHERE device = '{}' ORDER BY bucket",
                s(name),
                s(dev)
            ),
        )
        .await;
        let last = tr
            .iter()
            .rfind(|r| !r["used_last"].is_null())
            .expect("trend buckets");
        assert_eq!(
            int(&last["used_last"]),
            int(&pool["final_used"]),
            "{dev} {name} final level"
        );
        let peak = tr.iter().filter_map(|r| int(&r["used_max_bytes"])).max();
        assert_eq!(peak, int(&pool["peak_used"]), "{dev} {name} peak");
    }
}

#[tokio::test]
async fn g3_hal_segments_match_truth() {
    let Some((ds, truth)) = g3().await else {
        return;
    };
    let got = query(
        &ds.engine,
        "SELECT * FROM hal_segments(0) ORDER BY device, ts, ptr",
    )
    .await;
    let mut want: Vec<Vec<Value>> = truth["hal_segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let owner = if g["owner"] == "" {
                Value::Null
            } else {
                g["owner"].clone()
            };
            vec![
                g["device"].clone(),
                g["ts"].clone(),
                g["ptr"].clone(),
                g["size"].clone(),
                owner,
                g["alloc_type"].clone(),
                g["page_type"].clone(),
                g["shadow"].clone(),
            ]
        })
        .collect();
    want.sort_by_key(|v| {
        (
            v[0].as_str().unwrap().to_string(),
            v[1].as_i64().unwrap(),
            v[2].as_i64().unwrap(),
        )
    });
    let rows: Vec<Vec<Value>> = got
        .iter()
        .map(|r| {
            vec![
                r["device"].clone(),
                r["ts"].clone(),
                r["ptr"].clone(),
                r["size"].clone(),
                r["owner"].clone(),
                r["alloc_type"].clone(),
                r["page_type"].clone(),
                r["stock"].clone(),
            ]
        })
        .collect();
    assert_eq!(rows, want, "every HAL MALLOC");
    // expandable segments: promoted shadow MALLOCs are written as `create` by the tool whatever
    // the real call was (quirk 13) and must not count
    let segs = truth["hal_segments"].as_array().unwrap();
    let real_create = segs
        .iter()
        .any(|g| g["alloc_type"] == "create" && g["shadow"] == false);
    let promoted_create = segs
        .iter()
        .filter(|g| g["alloc_type"] == "create" && g["shadow"] == true)
        .count() as i64;
    assert!(
        promoted_create > 0,
        "the fixture has promoted stock segments"
    );
    let sum = query(&ds.engine, "SELECT sum(stock_segments) AS stock, bool_or(expandable_segments) AS expandable FROM hal_segment_summary").await;
    assert_eq!(int(&sum[0]["stock"]), Some(promoted_create));
    assert_eq!(sum[0]["expandable"], Value::from(real_create));
    assert!(got.iter().all(|r| r["expandable_segments"] == real_create));
}

/// Every per-step peak and end level that truth.json states is in `peaks` (view step_peaks)
/// with the same value, and growth = end - start; returns how many were checked.
pub(crate) fn assert_step_peaks_match_truth(peaks: &[Row], truth: &Value) -> usize {
    let mut checked = 0;
    for pool in truth["pools"].as_array().unwrap() {
        for st in pool["steps"].as_array().unwrap() {
            let Some(peak) = int(&st["peak_used"]) else {
                continue;
            };
            let r = peaks
                .iter()
                .find(|r| {
                    r["device"] == pool["device"]
                        && r["pool"] == pool["pool"]
                        && r["step"] == st["step"]
                })
                .unwrap_or_else(|| {
                    panic!(
                        "step_peaks {} {} step {}",
                        pool["device"], pool["pool"], st["step"]
                    )
                });
            let ctx = format!("{} {} step {}", pool["device"], pool["pool"], st["step"]);
            assert_eq!(int(&r["peak_used"]), Some(peak), "{ctx} peak");
            assert_eq!(int(&r["end_used"]), int(&st["end_used"]), "{ctx} end");
            if let (Some(e), Some(b)) = (int(&r["end_used"]), int(&r["start_used"])) {
                assert_eq!(int(&r["growth"]), Some(e - b), "{ctx} growth");
            }
            checked += 1;
        }
    }
    checked
}
