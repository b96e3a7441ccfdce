//! PyTorch snapshots with the newest fields (fixtures/snapshots-newest/, built from PyTorch's
//! documented structures, not captured): pinned host memory (host_segments, host_traces),
//! annotate entries, user_metadata labels, several private pools; the same snapshot as pickle
//! protocols 0, 1, 2, 4, 5 and as JSON. Every figure is checked against
//! tests/oracle/snapshots_newest.py, which reads the raw files with Python's pickle and json;
//! and what must not happen: host memory counted as device memory, a protocol or JSON giving
//! other answers, a JSON that is no snapshot ingested as one.

use std::path::PathBuf;

use serde_json::Value;

use crate::common::{
    fixture, fixture_root, int, memq, query_json, rows, run_err, run_ok, shared_engine,
};

fn oracle() -> Value {
    let path = fixture_root().join("tests/oracle/snapshots_newest.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("oracle file")).expect("json")
}

fn file(name: &str) -> PathBuf {
    fixture(&format!("snapshots-newest/{name}"))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// One row of a query as JSON values by column name.
async fn one(e: &memq_engine::Engine, sql: &str) -> serde_json::Map<String, Value> {
    let mut r = query_json(e, sql).await;
    assert_eq!(r.len(), 1, "{sql}: {r:?}");
    r.remove(0).into_iter().collect()
}

/// The device or host figures of the oracle against memq's tables and analyses.
async fn check_memory(e: &memq_engine::Engine, o: &Value, host: bool, what: &str) {
    let (seg, blk, tr) = if host {
        ("snap_host_segments", "snap_host_blocks", "snap_host_traces")
    } else {
        ("snap_segments", "snap_blocks", "snap_traces")
    };
    let count = |t: &str| format!("SELECT count(*) FROM {t}");
    assert_eq!(int(e, &count(seg)).await, i(&o["segments"]), "{what}");
    assert_eq!(int(e, &count(blk)).await, i(&o["blocks"]), "{what}");
    assert_eq!(int(e, &count(tr)).await, i(&o["trace_entries"]), "{what}");
    let sql = format!("SELECT COALESCE(sum(total_size), 0) FROM {seg}");
    assert_eq!(int(e, &sql).await, i(&o["reserved"]), "{what}");
    let live = "state IN ('active_allocated', 'active_pending_free')";
    let sql = format!("SELECT COALESCE(sum(size), 0) FROM {blk} WHERE {live}");
    assert_eq!(int(e, &sql).await, i(&o["allocated"]), "{what}");
    let sql = format!("SELECT COALESCE(sum(requested_size), 0) FROM {blk} WHERE {live}");
    assert_eq!(int(e, &sql).await, i(&o["active_requested"]), "{what}");
    // Bytes of live blocks per label (the user_metadata of the alloc entry that made them).
    let sql = format!(
        "SELECT user_metadata, sum(size) AS bytes FROM {blk} \
         WHERE {live} AND user_metadata <> '' GROUP BY user_metadata ORDER BY user_metadata"
    );
    let got: serde_json::Map<String, Value> = query_json(e, &sql)
        .await
        .into_iter()
        .map(|r| {
            (
                r["user_metadata"].as_str().unwrap().to_string(),
                r["bytes"].clone(),
            )
        })
        .collect();
    assert_eq!(Value::Object(got), o["live_bytes_per_label"], "{what}");
    // Peaks over the trace (MemoryViz's timeline), from the analyses.
    let peaks = if host {
        one(
            e,
            "SELECT active_peak, active_peak_seq, reserved_peak, reserved_peak_seq, \
                active_bytes AS active_end, live_blocks FROM snap_host_memory",
        )
        .await
    } else {
        one(
            e,
            "SELECT active_start, active_peak, active_peak_seq, active_end, reserved_peak, \
                reserved_peak_seq FROM snap_peak WHERE device = 0",
        )
        .await
    };
    for key in [
        "active_peak",
        "active_peak_seq",
        "active_end",
        "reserved_peak",
        "reserved_peak_seq",
    ] {
        // memq writes -1 for "before the first entry" where the oracle has no entry (null).
        let want = match &o[key] {
            Value::Null if !host => Value::from(-1),
            v => v.clone(),
        };
        assert_eq!(peaks[key], want, "{what}: {key}");
    }
    if !host {
        assert_eq!(peaks["active_start"], o["active_start"], "{what}");
    } else {
        assert_eq!(peaks["live_blocks"], o["live_blocks"], "{what}");
    }
}

/// Every encoding of both snapshots: the oracle's figures, device and host apart.
#[tokio::test]
async fn newest_fields_match_the_oracle_in_every_encoding() {
    let oracle = oracle();
    let all = oracle.as_object().unwrap();
    assert_eq!(all.len(), 12, "two snapshots × 6 encodings");
    for (name, o) in all {
        let e = shared_engine(&[file(name)]).await;
        let what = name.as_str();
        assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0, "{what}");
        check_memory(&e, &o["device"], false, what).await;
        // The protocol (or JSON) as snap_info tells it.
        let meta = rows(
            &e,
            "SELECT key, value FROM snap_info WHERE section = 'meta' AND key IN ('protocol', 'format')",
        )
        .await;
        let want = match &o["protocol"] {
            Value::Null => vec!["format".to_string(), "json".to_string()],
            p => vec!["protocol".to_string(), p.to_string()],
        };
        assert_eq!(meta, vec![want], "{what}");
        // Pools: reserved bytes per segment_pool_id.
        let pools: serde_json::Map<String, Value> = query_json(
            &e,
            "SELECT concat(pool_id_0, ',', pool_id_1) AS pool, sum(total_size) AS bytes \
             FROM snap_segments GROUP BY 1 ORDER BY 1",
        )
        .await
        .into_iter()
        .map(|r| (r["pool"].as_str().unwrap().to_string(), r["bytes"].clone()))
        .collect();
        assert_eq!(Value::Object(pools), o["reserved_per_pool"], "{what}");
        let private =
            "SELECT count(DISTINCT concat(pool_id_0, ',', pool_id_1)) FROM snap_segments \
                       WHERE NOT (pool_id_0 = 0 AND pool_id_1 = 0)";
        assert_eq!(int(&e, private).await, i(&o["private_pools"]), "{what}");
        // Annotations, each with the allocation it labels.
        let notes: Vec<Value> = query_json(
            &e,
            "SELECT device, seq, note, alloc_seq, label FROM snap_annotations \
             WHERE memory = 'device' ORDER BY device, seq",
        )
        .await
        .into_iter()
        .map(|r| Value::Object(r.into_iter().collect()))
        .collect();
        assert_eq!(Value::Array(notes), o["annotations"], "{what}");
        // Component categories stay with their entries (extra_json).
        for (category, n) in o["entries_per_category"].as_object().unwrap() {
            let sql = format!(
                "SELECT count(*) FROM snap_traces WHERE extra_json LIKE '%\"category\":\"{category}\"%'"
            );
            assert_eq!(int(&e, &sql).await, i(n), "{what}: {category}");
        }
        match o.get("host") {
            Some(host) => {
                check_memory(&e, host, true, what).await;
                // The flat host trace is the host's (-1), never a device's.
                let sql = "SELECT count(*) FROM snap_host_traces WHERE device <> -1";
                assert_eq!(int(&e, sql).await, 0, "{what}");
            }
            None => {
                for t in [
                    "snap_host_segments",
                    "snap_host_blocks",
                    "snap_host_traces",
                    "snap_host_memory",
                ] {
                    let sql = format!("SELECT count(*) FROM {t}");
                    assert_eq!(int(&e, &sql).await, 0, "{what}: {t}");
                }
            }
        }
        // Host memory never reaches the device tables and analyses.
        assert_eq!(
            int(&e, "SELECT count(*) FROM snap_traces WHERE device < 0").await,
            0
        );
        let reserved = "SELECT sum(reserved_bytes) FROM snap_overview";
        assert_eq!(
            int(&e, reserved).await,
            i(&o["device"]["reserved"]),
            "{what}"
        );
    }
}

/// Labels in the block-level analyses: the largest live block and the largest allocation at the
/// peak carry their alloc entry's user_metadata; a block allocated without one has none.
#[tokio::test]
async fn labels_in_block_analyses() {
    let o = &oracle()["newest_p4.pickle"]["device"]["live_bytes_per_label"];
    let e = shared_engine(&[file("newest_p4.pickle")]).await;
    let top: Vec<Value> = query_json(&e, "SELECT size, label FROM snap_top_blocks ORDER BY rank")
        .await
        .into_iter()
        .map(|r| r["label"].clone())
        .collect();
    let mut labelled: Vec<_> = top.iter().filter_map(|l| l.as_str()).collect();
    labelled.sort();
    let want: Vec<_> = o.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(labelled, want);
    assert_eq!(top.iter().filter(|l| l.is_null()).count(), 1, "{top:?}");
    let peak = rows(
        &e,
        "SELECT label FROM snap_peak_blocks ORDER BY rank LIMIT 1",
    )
    .await;
    assert_eq!(peak, vec![vec!["encoder.layers.0.attn".to_string()]]);
}

/// Protocol 0 (text opcodes), protocol 1 and JSON give protocol 4's tables, row for row
/// (snap_info apart from the meta rows that name the encoding and size).
#[tokio::test]
async fn every_encoding_gives_the_same_tables() {
    let tables = [
        "snap_segments",
        "snap_blocks",
        "snap_traces",
        "snap_frames",
        "snap_host_segments",
        "snap_host_blocks",
        "snap_host_traces",
    ];
    let dump = |e: memq_engine::Engine| async move {
        let mut out = Vec::new();
        for t in tables {
            let mut r = rows(&e, &format!("SELECT * FROM {t}")).await;
            // The snapshot column (first) names the file.
            for row in &mut r {
                row.remove(0);
            }
            r.sort();
            out.push((t, r));
        }
        let info = "SELECT section, item, key, value FROM snap_info \
                    WHERE section <> 'meta' OR key IN ('top_level', 'keys')";
        let mut info = rows(&e, info).await;
        info.sort();
        out.push(("snap_info", info));
        out
    };
    for stem in ["newest", "accelerator"] {
        let want = dump(shared_engine(&[file(&format!("{stem}_p4.pickle"))]).await).await;
        assert!(want.iter().any(|(_, r)| !r.is_empty()));
        for other in [
            "_p0.pickle",
            "_p1.pickle",
            "_p2.pickle",
            "_p5.pickle",
            ".json",
        ] {
            let name = format!("{stem}{other}");
            let got = dump(shared_engine(&[file(&name)]).await).await;
            for ((table, a), (_, b)) in want.iter().zip(&got) {
                assert_eq!(a, b, "{name}: {table}");
            }
        }
    }
}

/// Snapshots without the newest fields have nothing in the new tables and analyses.
#[tokio::test]
async fn older_snapshots_have_no_host_memory_or_notes() {
    let e = shared_engine(&[fixture("snapshots/newest_protocol5.pickle")]).await;
    assert!(int(&e, "SELECT count(*) FROM snap_traces").await > 0);
    for t in [
        "snap_host_segments",
        "snap_host_blocks",
        "snap_host_traces",
        "snap_host_memory",
        "snap_host_timeline",
        "snap_annotations",
    ] {
        let sql = format!("SELECT count(*) FROM {t}");
        assert_eq!(int(&e, &sql).await, 0, "{t}");
    }
}

/// JSON that is no snapshot is refused (exit 2) naming the file and what memq reads; a JSON
/// snapshot cut short is refused naming the file and the byte offset; a JSON snapshot and a
/// protocol 0 pickle ingest from the command line.
#[test]
fn json_inputs_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.memq");
    let ingest = |input: &PathBuf| {
        let mut cmd = memq();
        cmd.arg("ingest")
            .arg(input)
            .arg("-o")
            .arg(&out)
            .arg("--force");
        cmd
    };
    let other = file("not_a_snapshot.json");
    let (code, err) = run_err(&mut ingest(&other));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&other.display().to_string()), "{err}");
    assert!(
        err.contains("nor a PyTorch memory snapshot (no segments or device_traces key)"),
        "{err}"
    );
    assert!(err.contains("memq reads"), "{err}");
    assert!(!out.exists());
    let cut = file("truncated.json");
    let (code, err) = run_err(&mut ingest(&cut));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&cut.display().to_string()), "{err}");
    assert!(err.contains("byte offset 199"), "{err}");
    assert!(err.contains("truncated"), "{err}");
    for good in ["newest.json", "newest_p0.pickle"] {
        let (stdout, stderr) = run_ok(&mut ingest(&file(good)));
        let said = format!("{stdout}{stderr}");
        assert!(
            said.contains("snap_host_traces                7 rows"),
            "{good}: {said}"
        );
        assert!(said.contains(" 0 rejects"), "{good}: {said}");
        assert!(out.exists(), "{good}");
    }
}
