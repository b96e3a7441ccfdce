//! Who holds the peak (docs/attribution.md): peak_blocks and peak_split on the G3 fixture (whose
//! generator names each owner's role) and on the real samples; user_frame and categorize as
//! SQL functions, with the default rules and with rules from a table.

use std::path::PathBuf;

use crate::common::{fixture, query_json as query, real_fixture, shared_engine};

fn int(v: &serde_json::Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[tokio::test]
async fn peak_blocks_add_up_to_the_peak_of_every_series() {
    let inputs: Vec<PathBuf> = vec![
        fixture("memscope/g3_run"),
        real_fixture("memscope/real/v2_compare_leaks.csv"),
        real_fixture("memscope/real/v1_smoke_multiproc_a.csv"),
    ];
    for input in inputs {
        let engine = shared_engine(std::slice::from_ref(&input)).await;
        let sums = query(
            &engine,
            "SELECT b.source, b.pid, b.device, b.pool, MAX(b.peak_bytes) AS peak, SUM(b.size) AS held, \
                    COUNT(*) AS n, MAX(p.peak_bytes) AS live_peak, MAX(b.peak_ts) AS ts, MAX(p.peak_ts) AS live_ts \
             FROM peak_blocks b JOIN peaks p ON p.source = b.source AND (p.pid IS NOT DISTINCT FROM b.pid) \
                  AND p.device = b.device AND p.pool = b.pool AND p.metric = 'live' \
             GROUP BY b.source, b.pid, b.device, b.pool",
        )
        .await;
        assert!(!sums.is_empty(), "{input:?}: HAL series with a live peak");
        for r in &sums {
            let ctx = format!("{input:?} {} {} {}", r["pid"], r["device"], r["pool"]);
            assert_eq!(
                int(&r["held"]),
                int(&r["peak"]),
                "{ctx}: blocks add up to the peak"
            );
            assert_eq!(
                int(&r["peak"]),
                int(&r["live_peak"]),
                "{ctx}: the same peak as view peaks"
            );
            assert_eq!(int(&r["ts"]), int(&r["live_ts"]), "{ctx}: at the same time");
        }
        // each dimension of peak_split adds up to the peak too
        let split = query(
            &engine,
            "SELECT source, pid, device, pool, dimension, SUM(bytes) AS bytes, MAX(peak_bytes) AS peak, \
                    SUM(static_bytes + dynamic_bytes) AS parts \
             FROM peak_split GROUP BY source, pid, device, pool, dimension",
        )
        .await;
        for r in &split {
            assert_eq!(int(&r["bytes"]), int(&r["peak"]), "{input:?} {r:?}");
            assert_eq!(int(&r["parts"]), int(&r["bytes"]), "{input:?} {r:?}");
        }
    }
}

#[tokio::test]
async fn g3_peak_names_categories_user_frames_and_static_memory() {
    let engine = shared_engine(&[fixture("memscope/g3_run")]).await;
    let rows = query(
        &engine,
        "SELECT owner, category, kind, user_frame, held_at_end, alloc_ts FROM peak_blocks WHERE pool = 'PTA'",
    )
    .await;
    let first_step = int(&query(&engine, "SELECT MIN(start_ts) AS t FROM steps").await[0]["t"]);
    let mut seen = std::collections::BTreeSet::new();
    for r in &rows {
        let owner = r["owner"].as_str().unwrap_or("");
        let want = match owner {
            "PTA@weight" => Some("weights"),
            "PTA@gradient" => Some("gradients"),
            "PTA@optimizer_state" => Some("optimizer_state"),
            "PTA@activation" => Some("activations"),
            _ => None,
        };
        if let Some(want) = want {
            assert_eq!(r["category"], want, "{r:?}");
            seen.insert(want);
        }
        // static = never released and allocated before the first step
        let is_static = r["held_at_end"] == true && int(&r["alloc_ts"]) < first_step;
        assert_eq!(r["kind"] == "static", is_static, "{r:?}");
        if let Some(f) = r["user_frame"].as_str() {
            assert!(f.starts_with("/home/user/llm/"), "user code only: {f}");
        }
    }
    assert!(
        seen.contains("weights") && seen.contains("activations"),
        "{seen:?}"
    );
    assert!(rows
        .iter()
        .any(|r| r["kind"] == "static" && r["category"] == "weights"));
}

#[tokio::test]
async fn user_frame_and_categorize_take_their_rules_from_a_query() {
    let engine = shared_engine(&[fixture("memscope/g3_run")]).await;
    let r = &query(
        &engine,
        "SELECT user_frame(s) AS d, user_frame(s, 'site-packages|/llm/model.py') AS mine, \
                categorize('PTA@loss_history', NULL) AS dflt, \
                categorize('PTA@loss_history', NULL, \
                    (SELECT string_agg(kind || ': ' || pattern || ' => ' || category, chr(10) ORDER BY prio) \
                     FROM (VALUES (1, 'owner', 'loss', 'metrics'), (2, 'frame', 'train', 'training')) AS t(prio, kind, pattern, category))) AS custom \
         FROM (SELECT '/usr/lib/python3.10/site-packages/torch/nn/linear.py(125): forward' || chr(10) || \
                      '/home/user/llm/model.py(57): forward' || chr(10) || \
                      '/home/user/llm/train.py(148): train_step' AS s)",
    )
    .await[0];
    assert_eq!(r["d"], "/home/user/llm/model.py(57): forward");
    assert_eq!(r["mine"], "/home/user/llm/train.py(148): train_step");
    assert_eq!(r["dflt"], "other");
    assert_eq!(r["custom"], "metrics");
}

/// A dump written by hand with ACCESS rows (collected with `--events=...,access`) whose truth
/// the test states: A is allocated long before its first use and idle at the peak, B is held
/// after its last use across the peak, D idles between two uses across the peak, C idles only
/// after the peak (no saving there, not listed).
fn access_dump(dir: &std::path::Path) -> PathBuf {
    const T: i64 = 1_764_900_000_000_000_000;
    let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
    let mut rows = Vec::new();
    let mut id = 0;
    let mut live = 0i64;
    let mut row =
        |event: &str, ty: &str, t: i64, ptr: u64, aid: u64, size: i64, used: Option<i64>| {
            id += 1;
            let attr = match used {
                Some(u) => format!(
                    "{{allocation_id:{aid},addr:0x{ptr:x},size:{size},total:1073741824,used:{u}}}"
                ),
                None => format!("{{allocation_id:{aid},addr:0x{ptr:x},size:{size},type:PTA}}"),
            };
            rows.push(format!(
                "{id},{event},{ty},{},{},7,7,0,0x{ptr:x},\"{attr}\",,\n",
                if event == "ACCESS" { "aten::mm" } else { "N/A" },
                T + t
            ));
        };
    let mb = 1 << 20;
    let mut alloc = |row: &mut dyn FnMut(&str, &str, i64, u64, u64, i64, Option<i64>),
                     t,
                     ptr,
                     aid,
                     size: i64,
                     free: bool| {
        live += if free { -size } else { size };
        row(
            if free { "FREE" } else { "MALLOC" },
            "PTA",
            t,
            ptr,
            aid,
            size,
            Some(live),
        );
    };
    alloc(&mut row, 50, 0x4000_0000, 4, 5 * mb, false); // D
    row("ACCESS", "WRITE", 60, 0x4000_0000, 4, 5 * mb, None);
    alloc(&mut row, 100, 0x1000_0000, 1, 100 * mb, false); // A
    alloc(&mut row, 200, 0x2000_0000, 2, 50 * mb, false); // B
    row("ACCESS", "READ", 210, 0x2000_0000, 2, 50 * mb, None);
    row("ACCESS", "WRITE", 250, 0x2000_0000, 2, 50 * mb, None); // B's last use
    alloc(&mut row, 300, 0x3000_0000, 3, 10 * mb, false); // C: the peak, 165 MiB
    row("ACCESS", "WRITE", 305, 0x3000_0000, 3, 10 * mb, None);
    alloc(&mut row, 350, 0x2000_0000, 2, 50 * mb, true); // B freed
    row("ACCESS", "READ", 500, 0x1000_0000, 1, 100 * mb, None); // A's first use
    row("ACCESS", "READ", 600, 0x1000_0000, 1, 100 * mb, None);
    alloc(&mut row, 700, 0x1000_0000, 1, 100 * mb, true); // A freed
    row("ACCESS", "READ", 800, 0x4000_0000, 4, 5 * mb, None); // D used again
    alloc(&mut row, 850, 0x4000_0000, 4, 5 * mb, true);
    row("ACCESS", "READ", 900, 0x3000_0000, 3, 10 * mb, None); // C used again
    alloc(&mut row, 950, 0x3000_0000, 3, 10 * mb, true);
    let path = dir.join("memscope_dump_access.csv");
    std::fs::write(&path, format!("{header}{}", rows.concat())).unwrap();
    path
}

#[tokio::test]
async fn wasted_memory_is_ranked_by_what_it_adds_to_the_peak() {
    const T: i64 = 1_764_900_000_000_000_000;
    let tmp = tempfile::tempdir().unwrap();
    let (_ds, engine) = crate::common::open(&[access_dump(tmp.path())]).await;
    let rows = query(
        &engine,
        "SELECT ptr, size, kind, origin, wasted_from, wasted_to, peak_ts, peak_saving FROM wasted_memory \
         ORDER BY peak_saving DESC, wasted_ns DESC",
    )
    .await;
    let mb = 1i64 << 20;
    let got: Vec<(i64, &str, i64, i64, i64)> = rows
        .iter()
        .map(|r| {
            (
                int(&r["ptr"]),
                r["kind"].as_str().unwrap(),
                int(&r["wasted_from"]) - T,
                int(&r["wasted_to"]) - T,
                int(&r["peak_saving"]),
            )
        })
        .collect();
    assert!(rows
        .iter()
        .all(|r| r["origin"] == "access" && int(&r["peak_ts"]) == T + 300));
    assert_eq!(
        got,
        vec![
            // A: allocated at 100, first used at 500 — idle at the peak (300)
            (0x1000_0000, "early_allocation", 100, 500, 100 * mb),
            // B: last used at 250, freed at 350 — held across the peak
            (0x2000_0000, "late_deallocation", 250, 350, 50 * mb),
            // D: idle from 60 to 800, across the peak
            (0x4000_0000, "temporary_idleness", 60, 800, 5 * mb),
        ]
    );
}

/// msMemScope's own compare sample (docs/attribution.md, "Run against run"): the "leaks" run is
/// the baseline with `randn` and `_to_copy` run again after each of its two steps. Aligned on
/// op order, every baseline op pairs with its twin, the four extra ops are the leaks run's
/// only, and what they allocate is the whole difference in PTA.
#[tokio::test]
async fn run_diff_on_ops_finds_the_four_ops_the_real_leaks_run_adds() {
    let inputs = [
        real_fixture("memscope/real/v2_compare_baseline.csv"),
        real_fixture("memscope/real/v2_compare_leaks.csv"),
    ];
    let engine = shared_engine(&inputs).await;
    let name = |stem: &str| {
        let engine = &engine;
        let stem = stem.to_string();
        async move {
            let rows = query(
                engine,
                &format!("SELECT DISTINCT source FROM blocks WHERE source LIKE '%{stem}%'"),
            )
            .await;
            assert_eq!(rows.len(), 1, "{stem}: {rows:?}");
            rows[0]["source"].as_str().unwrap().to_string()
        }
    };
    let (a, b) = (name("baseline").await, name("leaks").await);
    let points = query(
        &engine,
        &format!(
            "SELECT key, point, a_pos, b_pos, a_alloc, b_alloc, b_blocks, status \
             FROM run_diff('{a}', '{b}', 'op') WHERE dimension = 'point' ORDER BY point"
        ),
    )
    .await;
    assert_eq!(points.len(), 44, "40 ops of the baseline and 4 more");
    let extra: Vec<(i64, &str, i64)> = points
        .iter()
        .filter(|r| r["a_pos"].is_null())
        .map(|r| {
            assert_eq!(r["status"], "only_b", "{r:?}");
            (
                int(&r["b_pos"]),
                r["key"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("torch._ops.aten."),
                int(&r["b_alloc"]),
            )
        })
        .collect();
    assert_eq!(
        extra,
        vec![
            (21, "randn.default", 0),
            (22, "_to_copy.default", 4_000_256),
            (43, "randn.default", 0),
            (44, "_to_copy.default", 4_000_256),
        ]
    );
    for r in points.iter().filter(|r| !r["a_pos"].is_null()) {
        assert!(
            !r["b_pos"].is_null(),
            "no op of the baseline is missing: {r:?}"
        );
        assert_eq!(r["status"], "same", "{r:?}");
    }
    let pta = query(
        &engine,
        &format!(
            "SELECT alloc_change FROM run_diff('{a}', '{b}', 'op') \
             WHERE dimension = 'owner' AND key = 'PTA' AND point IS NULL"
        ),
    )
    .await;
    assert_eq!(int(&pta[0]["alloc_change"]), 2 * 4_000_256);
}
