//! Ingest of the project-made G3 output folder (fixtures/memscope/g3_run, written by memq-gen
//! with its ground truth): every typed column and every companion table checked.

use crate::common::*;

fn truth() -> serde_json::Value {
    let p = fixture("memscope/g3_run/truth.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[tokio::test]
async fn g3_folder_tree_is_ingested_whole() {
    let t = truth();
    let (ing, engine) = open(&[fixture("memscope/g3_run")]).await;
    assert_eq!(ing.report.total_rejects(), 0);
    // Rows per dump file and per (event, event_type) equal the generator's counts.
    for f in t["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        if !path.contains("memscope_dump") {
            continue;
        }
        let src = format!("g3_run/{path}");
        let n = int(
            &engine,
            &format!("SELECT count(*) FROM events WHERE source = '{src}'"),
        )
        .await;
        assert_eq!(n, f["rows"].as_i64().unwrap(), "{src}");
        for (event, types) in f["counts"].as_object().unwrap() {
            for (et, n) in types.as_object().unwrap() {
                let got = int(&engine, &format!("SELECT count(*) FROM events WHERE source = '{src}' AND event = '{event}' AND event_type = '{et}'")).await;
                assert_eq!(got, n.as_i64().unwrap(), "{src} {event}/{et}");
            }
        }
    }
    assert_eq!(
        int(&engine, "SELECT count(*) FROM events").await,
        t["rows_written"].as_i64().unwrap()
    );
    let r = rows(
        &engine,
        "SELECT DISTINCT generation, ts_unit FROM sources WHERE kind = 'memscope_csv'",
    )
    .await;
    assert_eq!(r, vec![vec!["G3", "ns"]]);
    // Companion files.
    assert_eq!(int(&engine, "SELECT count(*) FROM python_trace").await, 24);
    assert_eq!(int(&engine, "SELECT count(*) FROM step_compare").await, 22);
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM config WHERE key = 'analysisType'"
        )
        .await
            == 1
    );
}

#[tokio::test]
async fn g3_typed_columns() {
    let t = truth();
    let (_ing, engine) = open(&[fixture("memscope/g3_run")]).await;
    // Shadow rows: promoted stock MALLOCs, and FREE fill-ins / stop-period frees.
    let s = &t["shadow"];
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE event = 'MALLOC' AND shadow"
        )
        .await,
        s["promoted_mallocs"].as_i64().unwrap()
    );
    let shadow_frees = s["stop_period_frees"].as_i64().unwrap()
        + s["exit_fill_ins"].as_i64().unwrap()
        + s["residual_fill_ins"].as_i64().unwrap();
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE event = 'FREE' AND shadow"
        )
        .await,
        shadow_frees
    );
    assert_eq!(
        int(&engine, "SELECT count(*) FROM blocks WHERE stock").await,
        s["promoted_mallocs"].as_i64().unwrap()
    );
    // Shadow rows carry no counters or owner.
    assert_eq!(int(&engine, "SELECT count(*) FROM events WHERE shadow AND (used IS NOT NULL OR total IS NOT NULL OR owner IS NOT NULL)").await, 0);
    // Every G3 MALLOC has a FREE (real or shadow): no block is left open.
    assert_eq!(
        int(
            &engine,
            "SELECT count(*) FROM blocks WHERE free_kind = 'none'"
        )
        .await,
        0
    );
    // HOST_PINNED rows: device cpu, used = VmRSS, pinned attr.
    assert!(int(&engine, "SELECT count(*) FROM events WHERE event_type = 'HOST_PINNED' AND device = 'cpu' AND device_index IS NULL AND attr_int(attr, 'used') = used AND attr(attr, 'pinned') = 'true'").await > 0);
    // HAL MALLOC types.
    assert_eq!(int(&engine, "SELECT count(*) FROM events WHERE event = 'MALLOC' AND event_type = 'HAL' AND (alloc_type IS NULL OR page_type IS NULL)").await, 0);
    // Comma-containing values stay whole.
    let r = rows(
        &engine,
        "SELECT attr(attr, 'shape') FROM events WHERE attr LIKE '%torch.Size%' ORDER BY ts LIMIT 1",
    )
    .await;
    assert!(
        r[0][0].starts_with("torch.Size([") && r[0][0].contains(", "),
        "{r:?}"
    );
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE inefficient = 'early_allocation,late_deallocation'"
        )
        .await
            > 0
    );
    // Multi-level owners and multi-line stacks.
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE owner = 'PTA@fsdp2@all_gather_output@ops'"
        )
        .await
            > 0
    );
    assert!(
        int(
            &engine,
            "SELECT count(*) FROM events WHERE stack_py LIKE '%\n%' AND stack_c LIKE '%\n%'"
        )
        .await
            > 0
    );
    // SNAPSHOT rows in both spellings map to one set of columns.
    let r = rows(&engine, "SELECT spelling, count(*) FROM mem_snapshots WHERE free_mem IS NOT NULL AND total_mem IS NOT NULL AND peak_reserved IS NOT NULL AND device_utilization IS NOT NULL GROUP BY spelling ORDER BY spelling").await;
    assert_eq!(r.len(), 2, "{r:?}");
    // OOM_DETAIL typed: the trigger and its snapshot.
    let o = &t["oom"][0];
    let r = rows(
        &engine,
        "SELECT func, req_size, flag, device FROM oom WHERE kind = 'trigger'",
    )
    .await;
    assert_eq!(
        r,
        vec![vec![
            o["func"].as_str().unwrap().to_string(),
            o["req_size"].to_string(),
            o["flag"].to_string(),
            o["device"].as_str().unwrap().to_string()
        ]]
    );
    let free = int(
        &engine,
        &format!(
            "SELECT free_mem FROM mem_snapshots WHERE name = 'OOM_Snapshot' AND ts = {}",
            o["snapshot_ts"]
        ),
    )
    .await;
    assert_eq!(free, o["free"].as_i64().unwrap());
    // Top rows: pool, ptr, size and the allocation time as written, ranked as the tool wrote them.
    let top = &o["top"][0];
    let r = rows(&engine, "SELECT pool, ptr, size, alloc_ts FROM oom WHERE kind = 'top' AND nth = 1 AND source LIKE '%device_0%'").await;
    assert_eq!(
        r,
        vec![vec![
            top["pool"].as_str().unwrap().to_string(),
            top["ptr"].to_string(),
            top["size"].to_string(),
            top["timestamp"].to_string()
        ]]
    );
    // Leak blocks: held to the end, closed only by an exit fill-in.
    for b in t["leak"]["blocks"].as_array().unwrap() {
        let q = format!(
            "SELECT free_kind FROM blocks WHERE ptr = {} AND pool = '{}' AND alloc_ts = {}",
            b["ptr"],
            b["pool"].as_str().unwrap(),
            b["alloc_ts"]
        );
        assert_eq!(rows(&engine, &q).await, vec![vec!["shadow"]], "{q}");
    }
}

#[tokio::test]
async fn block_fates_agree_with_the_generators_shadow_counts() {
    let t = truth();
    let s = &t["shadow"];
    let (_ing, engine) = open(&[fixture("memscope/g3_run")]).await;
    let fate = |f: &'static str| format!("SELECT count(*) FROM blocks WHERE fate = '{f}'");
    assert_eq!(
        int(&engine, &fate("stop_period_free")).await,
        s["stop_period_frees"].as_i64().unwrap()
    );
    assert_eq!(
        int(&engine, &fate("exit_fill_in")).await,
        s["exit_fill_ins"].as_i64().unwrap()
    );
    assert_eq!(
        int(&engine, &fate("residual_fill_in")).await,
        s["residual_fill_ins"].as_i64().unwrap()
    );
    // Every injected leak block is a leak candidate, held at the end by an exit fill-in.
    let mut bytes = 0;
    for b in t["leak"]["blocks"].as_array().unwrap() {
        let q = format!(
            "SELECT reason, size FROM leak_candidates WHERE ptr = {} AND pool = '{}' AND alloc_ts = {}",
            b["ptr"], b["pool"].as_str().unwrap(), b["alloc_ts"]
        );
        let r = rows(&engine, &q).await;
        assert_eq!(r.len(), 1, "{q}");
        assert_eq!(r[0][0], "shadow_fill");
        bytes += r[0][1].parse::<i64>().unwrap();
    }
    assert_eq!(bytes, t["leak"]["bytes"].as_i64().unwrap());
}
