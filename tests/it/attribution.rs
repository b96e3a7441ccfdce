//! Who holds the peak (issue 15): peak_blocks and peak_split on the G3 fixture (whose
//! generator names each owner's role) and on the real samples; user_frame and categorize as
//! SQL functions, with the default rules and with rules from a table.

use std::path::PathBuf;

use crate::common::{fixture, query_json as query, shared_engine, shared_fixture};

fn int(v: &serde_json::Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[tokio::test]
async fn peak_blocks_add_up_to_the_peak_of_every_series() {
    let inputs: Vec<PathBuf> = vec![
        fixture("memscope/g3_run"),
        shared_fixture("memscope/real/v2_compare_leaks.csv"),
        shared_fixture("memscope/real/v1_smoke_multiproc_a.csv"),
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
