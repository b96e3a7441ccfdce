//! Every real file a user brings, and the db and pickle edge cases (the id rules shared with the
//! CSV reader, pickles that are not snapshots, WAL-mode dbs): each real input ingests with 0
//! rejects and its tables give the figures that tests/oracle/real_inputs.py derived
//! independently (tests/oracle/real_inputs.json).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{fixture, fixture_root, int, query_json, real_fixture, rows, shared_engine};

/// The oracle's figures.
fn oracle() -> Value {
    let path = fixture_root().join("tests/oracle/real_inputs.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("oracle file")).expect("oracle json")
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn legacy_db() -> PathBuf {
    real_fixture("memscope/insight/leaks_dump_msinsight.db")
}

fn legacy_csv() -> PathBuf {
    fixture_root().join("tests/oracle/leaks_dump_msinsight.csv")
}

fn memq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memq"))
}

/// `memq ingest INPUT -o TMP/x.memq --force`: exit code and stderr.
fn ingest_cli(input: &Path) -> (i32, String) {
    let out_dir = tempfile::TempDir::new().unwrap();
    let out = memq()
        .arg("ingest")
        .arg(input)
        .arg("-o")
        .arg(out_dir.path().join("x.memq"))
        .arg("--force")
        .output()
        .expect("run memq");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// The legacy msLeaks db (camelCase leaks_dump, µs, decimal ptrs, two processes).

#[tokio::test]
async fn legacy_leaks_db_ingests_whole() {
    let o = &oracle()["leaks_dump_msinsight_db"];
    let e = shared_engine(&[legacy_db()]).await;
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    assert_eq!(int(&e, "SELECT count(*) FROM events").await, i(&o["rows"])); // 15 349
    for r in o["rows_per_event_eventType"].as_array().unwrap() {
        let sql = format!(
            "SELECT count(*) FROM events WHERE event = '{}' AND event_type = '{}'",
            r["event"].as_str().unwrap(),
            r["eventType"].as_str().unwrap()
        );
        assert_eq!(int(&e, &sql).await, i(&r["rows"]), "{sql}");
    }
    assert_eq!(
        int(&e, "SELECT count(*) FROM events WHERE attr IS NULL").await,
        i(&o["rows_with_null_attr"]) // 5 608
    );
    for p in o["per_process"].as_array().unwrap() {
        let pid = i(&p["pid"]);
        let got = &query_json(
            &e,
            &format!(
                "SELECT count(*) AS n, min(ts) AS t0, max(ts) AS t1, min(id) AS i0, max(id) AS i1 \
                 FROM events WHERE pid = {pid}"
            ),
        )
        .await[0];
        assert_eq!(i(&got["n"]), i(&p["rows"]), "pid {pid}");
        assert_eq!(i(&got["t0"]), i(&p["min_ts_ns"]), "pid {pid}");
        assert_eq!(i(&got["t1"]), i(&p["max_ts_ns"]), "pid {pid}");
        assert_eq!(i(&got["i0"]), i(&p["min_id"]), "pid {pid}");
        assert_eq!(i(&got["i1"]), i(&p["max_id"]), "pid {pid}");
    }
    // Same-pid double frees are none: 10 HAL pointers are freed twice only across processes.
    let hal_free_twice = int(
        &e,
        "SELECT count(*) FROM (SELECT pid, ptr FROM events WHERE event = 'FREE' AND event_type = 'HAL' \
         GROUP BY pid, ptr HAVING count(*) > 1)",
    )
    .await;
    assert_eq!(
        hal_free_twice,
        i(&o["hal_ptrs_freed_more_than_once_same_pid"])
    ); // 10
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM events WHERE event = 'FREE' AND event_type = 'PTA' AND size < 0"
        )
        .await,
        i(&o["pta_free_rows_negative_size"]) // 4 640
    );
}

/// Blocks pair per (pid, pool, ptr), §5.4: a G1 HAL FREE on Device Id N/A pairs with its
/// MALLOC's device, and IDs restarting per process never mix the two processes.
#[tokio::test]
async fn legacy_leaks_db_pairs_blocks_per_process() {
    let o = &oracle()["leaks_dump_msinsight_db"];
    let rule = &o["free_classification_by_pairing_key"]
        ["pid_pool_ptr (the pairing rule used for the peaks)"];
    let e = shared_engine(&[legacy_db()]).await;
    let kind = |k: &str| {
        format!("SELECT count(*) FROM blocks WHERE free_kind = '{k}' AND alloc_ts IS NOT NULL")
    };
    assert_eq!(int(&e, &kind("real")).await, i(&rule["paired"])); // 4 857
    assert_eq!(int(&e, &kind("none")).await, i(&rule["live_at_end"])); // 27
    assert_eq!(int(&e, &kind("replaced")).await, i(&rule["malloc_on_live"])); // 0
    assert_eq!(
        int(&e, "SELECT count(*) FROM blocks WHERE alloc_ts IS NULL").await,
        i(&rule["double_free"]) + i(&rule["free_without_malloc"]) // 0
    );
    // Live-bytes peaks per (pid, device, pool).
    for p in o["live_bytes_peaks"].as_array().unwrap() {
        let sql = format!(
            "SELECT peak_bytes, peak_ts, peak_id FROM peaks WHERE metric = 'live' AND pid = {} \
             AND device = '{}' AND pool = '{}'",
            i(&p["pid"]),
            p["device"].as_str().unwrap(),
            p["pool"].as_str().unwrap()
        );
        let got = query_json(&e, &sql).await;
        assert_eq!(got.len(), 1, "{sql}");
        assert_eq!(i(&got[0]["peak_bytes"]), i(&p["peak_live_bytes"]), "{sql}");
        assert_eq!(i(&got[0]["peak_ts"]), i(&p["peak_ts_ns"]), "{sql}");
        assert_eq!(i(&got[0]["peak_id"]), i(&p["peak_row"]["id"]), "{sql}");
    }
    // The tool's own `used` / `total` counters on PTA rows.
    for p in o["counter_peaks_used_total"].as_array().unwrap() {
        for (metric, key) in [("used", "peak_used"), ("total", "peak_total")] {
            let sql = format!(
                "SELECT peak_bytes, peak_ts FROM peaks WHERE metric = '{metric}' AND pid = {} \
                 AND device = '{}' AND pool = 'PTA'",
                i(&p["pid"]),
                p["device"].as_str().unwrap()
            );
            let got = query_json(&e, &sql).await;
            assert_eq!(i(&got[0]["peak_bytes"]), i(&p[key]), "{sql}");
            assert_eq!(
                i(&got[0]["peak_ts"]),
                i(&p[format!("{key}_ts_ns")]),
                "{sql}"
            );
        }
    }
}

/// The legacy db and the same rows written as a G1 CSV give the same events and blocks.
#[tokio::test]
async fn legacy_leaks_db_agrees_with_its_csv() {
    let db = shared_engine(&[legacy_db()]).await;
    let csv = shared_engine(&[legacy_csv()]).await;
    assert_eq!(int(&csv, "SELECT count(*) FROM rejects").await, 0);
    let events = "SELECT row_idx, id, event, event_type, name, ts, ts_raw, pid, tid, device, ptr, \
                  attr, size, total, used, owner, module_id, stack_py, stack_c \
                  FROM events ORDER BY ts, row_idx";
    let (a, b) = (rows(&db, events).await, rows(&csv, events).await);
    assert_eq!(a.len(), 15_349);
    assert_eq!(a, b);
    let blocks = "SELECT pid, device, pool, ptr, size, owner, alloc_id, alloc_ts, alloc_row, free_id, \
                  free_ts, free_row, free_kind, stock FROM blocks ORDER BY alloc_ts, alloc_row, free_row";
    let (a, b) = (rows(&db, blocks).await, rows(&csv, blocks).await);
    assert_eq!(a.len(), 4_857 + 27);
    assert_eq!(a, b);
}

#[tokio::test]
async fn host_pinned_db() {
    let o = &oracle()["memscope_host_pinned_db"];
    let e = shared_engine(&[real_fixture("memscope/insight/memscope_host_pinned.db")]).await;
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    assert_eq!(int(&e, "SELECT count(*) FROM events").await, i(&o["rows"])); // 10
    let multi_line =
        "SELECT count(*) FROM events WHERE strpos(rtrim(stack_py, chr(10)), chr(10)) > 0 \
                      OR strpos(rtrim(stack_c, chr(10)), chr(10)) > 0";
    assert_eq!(
        int(&e, multi_line).await,
        i(&o["rows_with_a_multi_line_stack"])
    ); // 7
    let got = &query_json(
        &e,
        "SELECT peak_bytes, peak_ts FROM peaks WHERE metric = 'live' AND pool = 'HOST_PINNED'",
    )
    .await[0];
    assert_eq!(i(&got["peak_bytes"]), i(&o["host_pinned_peak_live_bytes"])); // 22 683 648
    assert_eq!(i(&got["peak_ts"]), i(&o["host_pinned_peak_ts_ns"]));
}

// PyTorch snapshot pickles.

/// Every real pickle: segment and block counts, reserved and allocated bytes per device, and the
/// MemoryViz active peak (snapshot-format.md §6.2) with the entry that sets it.
#[tokio::test]
async fn real_snapshots_give_the_oracle_figures() {
    let o = oracle();
    for (file, fig) in o["snapshots"].as_object().unwrap() {
        let e = shared_engine(&[real_fixture(&format!("snapshots/real/{file}"))]).await;
        assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0, "{file}");
        assert_eq!(
            int(&e, "SELECT count(*) FROM snap_segments").await,
            i(&fig["segments"]),
            "{file}"
        );
        assert_eq!(
            int(&e, "SELECT count(*) FROM snap_blocks").await,
            i(&fig["blocks"]),
            "{file}"
        );
        for d in fig["per_device"].as_array().unwrap() {
            let dev = i(&d["device"]);
            let seg = &query_json(
                &e,
                &format!(
                    "SELECT count(*) AS n, sum(total_size) AS reserved FROM snap_segments WHERE device = {dev}"
                ),
            )
            .await[0];
            assert_eq!(i(&seg["n"]), i(&d["segments"]), "{file} device {dev}");
            assert_eq!(
                i(&seg["reserved"]),
                i(&d["reserved_bytes"]),
                "{file} device {dev}"
            );
            let allocated = int(
                &e,
                &format!(
                    "SELECT coalesce(sum(size), 0) FROM snap_blocks WHERE device = {dev} AND state = 'active_allocated'"
                ),
            )
            .await;
            assert_eq!(allocated, i(&d["allocated_bytes"]), "{file} device {dev}");
            // memq's active level counts active_pending_free blocks (the allocator's `active`,
            // which keeps pending-free memory until free_completed); MemoryViz's initial state
            // takes active_allocated blocks only (`b.state === 'active_allocated'` in
            // process_alloc_data). They differ only where pending-free blocks exist at dump
            // time: cuda_pending_free_pools.pickle, whose trace is empty.
            let pending = int(
                &e,
                &format!(
                    "SELECT coalesce(sum(requested_size), 0) FROM snap_blocks WHERE device = {dev} \
                     AND state = 'active_pending_free'"
                ),
            )
            .await;
            if d["pending_free_blocks"].as_i64().unwrap_or(0) > 0 {
                assert_eq!(d["trace_entries"].as_i64(), Some(0), "{file}");
            }
            let mv = &d["memoryviz_active"];
            let peak = query_json(
                &e,
                &format!("SELECT active_peak, active_peak_seq, trace_wrapped FROM snap_peak WHERE device = {dev}"),
            )
            .await;
            assert_eq!(
                i(&peak[0]["active_peak"]) - pending,
                i(&mv["peak"]),
                "{file} device {dev}"
            );
            // No real trace shows a sign of a wrapped ring buffer.
            assert_ne!(
                peak[0]["trace_wrapped"],
                Value::Bool(true),
                "{file} device {dev}"
            );
            if i(&mv["peak_trace_index"]) >= 0 || d["trace_entries"].as_i64().unwrap_or(0) > 0 {
                assert_eq!(
                    i(&peak[0]["active_peak_seq"]),
                    i(&mv["peak_trace_index"]),
                    "{file} device {dev}"
                );
            }
        }
    }
}

// Ascend PyTorch Profiler memory CSVs.

fn profiler_inputs() -> Vec<PathBuf> {
    ["memory_record.csv", "operator_memory.csv"]
        .iter()
        .map(|f| real_fixture(&format!("profiler/real/{f}")))
        .collect()
}

#[tokio::test]
async fn profiler_tables_and_analyses() {
    let o = &oracle()["profiler"];
    let e = shared_engine(&profiler_inputs()).await;
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    let mr = &o["memory_record"];
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_memory_record").await,
        i(&mr["rows"])
    ); // 1 003
    for (component, n) in mr["rows_per_component"].as_object().unwrap() {
        let sql =
            format!("SELECT count(*) FROM prof_memory_record WHERE component = '{component}'");
        assert_eq!(int(&e, &sql).await, i(n), "{sql}");
    }
    // Peak per component and metric, with its time and line.
    let mut peaks = 0;
    for c in mr["peaks_per_component_device"].as_array().unwrap() {
        for metric in ["allocated", "reserved", "active"] {
            let sql = format!(
                "SELECT peak_bytes, peak_ts, peak_line, points FROM prof_component_peaks \
                 WHERE component = '{}' AND device = '{}' AND metric = '{metric}'",
                c["component"].as_str().unwrap(),
                c["device"].as_str().unwrap()
            );
            let got = query_json(&e, &sql).await;
            let want = &c[metric];
            if want.is_null() {
                assert!(got.is_empty(), "{sql}");
                continue;
            }
            peaks += 1;
            assert_eq!(i(&got[0]["peak_bytes"]), i(&want["peak_bytes"]), "{sql}");
            assert_eq!(i(&got[0]["peak_ts"]), i(&want["peak_ts_ns"]), "{sql}");
            // file_row is 1-based over data rows: line = file_row + 1.
            assert_eq!(
                i(&got[0]["peak_line"]),
                i(&want["peak_file_row"]) + 1,
                "{sql}"
            );
            assert_eq!(i(&got[0]["points"]), i(&want["rows_with_value"]), "{sql}");
        }
    }
    assert_eq!(peaks, 9);
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_component_peaks").await,
        9
    );

    let om = &o["operator_memory"];
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_operator_memory").await,
        i(&om["rows"])
    ); // 184
    assert_eq!(
        int(&e, "SELECT sum(size) FROM prof_operator_memory").await,
        i(&om["total_bytes"]) // 1 495 289 344
    );
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM prof_operator_memory WHERE release_ts IS NULL"
        )
        .await,
        i(&om["never_released"]) // 24
    );
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM prof_operator_memory WHERE duration <> release_ts - alloc_ts"
        )
        .await,
        0
    );
    // Largest allocations: the two tied at 150 995 456 bytes, earliest first.
    let largest = query_json(
        &e,
        "SELECT name, size, alloc_ts, release_ts FROM prof_largest_allocations \
         WHERE size_rank = 1 ORDER BY alloc_ts, line",
    )
    .await;
    let ties = om["largest_allocation_ties"].as_array().unwrap();
    assert_eq!(largest.len(), ties.len());
    for (got, want) in largest.iter().zip(ties) {
        assert_eq!(got["name"], want["name"]);
        assert_eq!(i(&got["size"]), i(&want["bytes"]));
        assert_eq!(i(&got["alloc_ts"]), i(&want["alloc_ns"]));
        assert_eq!(got["release_ts"], want["release_ns"]);
    }
    // Longest held among released allocations, and the never-released ones.
    let longest = &query_json(
        &e,
        "SELECT name, size, alloc_ts, held FROM prof_longest_held WHERE held_rank = 1",
    )
    .await;
    let want = &om["longest_held_released"];
    assert_eq!(longest.len(), 1);
    assert_eq!(longest[0]["name"], want["name"]);
    assert_eq!(i(&longest[0]["size"]), i(&want["bytes"]));
    assert_eq!(i(&longest[0]["held"]), i(&want["held_ns"])); // 34 742 240
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM prof_longest_held WHERE held_rank IS NULL AND held_to_end > 0"
        )
        .await,
        i(&om["never_released"])
    );
    // Operators live at each component's allocated peak.
    for p in o["operators_live_at_component_peak_allocated"]
        .as_array()
        .unwrap()
    {
        let sql = format!(
            "SELECT count(*) AS n, sum(size) AS bytes, min(peak_ts) AS t, min(peak_bytes) AS peak \
             FROM prof_live_at_peak WHERE component = '{}' AND device = '{}'",
            p["component"].as_str().unwrap(),
            p["device"].as_str().unwrap()
        );
        let got = &query_json(&e, &sql).await[0];
        assert_eq!(i(&got["n"]), i(&p["live_operator_count"]), "{sql}");
        assert_eq!(i(&got["bytes"]), i(&p["live_operator_bytes"]), "{sql}");
        assert_eq!(i(&got["t"]), i(&p["peak_ts_ns"]), "{sql}");
        assert_eq!(i(&got["peak"]), i(&p["peak_allocated_bytes"]), "{sql}");
        let lines: Vec<i64> = rows(
            &e,
            &format!(
                "SELECT line FROM prof_live_at_peak WHERE component = '{}' ORDER BY alloc_ts, line",
                p["component"].as_str().unwrap()
            ),
        )
        .await
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect();
        let mut want: Vec<(i64, i64)> = p["live_operators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|op| (i(&op["alloc_ns"]), i(&op["file_row"]) + 1))
            .collect();
        want.sort();
        assert_eq!(lines, want.iter().map(|w| w.1).collect::<Vec<_>>());
    }
}

/// Found in a profiler output folder (`*_ascend_pt/ASCEND_PROFILER_OUTPUT/`); elsewhere in a
/// folder the same names are not claimed.
#[tokio::test]
async fn profiler_output_folder_is_detected() {
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir
        .path()
        .join("run/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    for f in profiler_inputs() {
        std::fs::copy(&f, out.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(out.join("kernel_details.csv"), "Name,Type\nx,y\n").unwrap();
    let ing = crate::common::ingest_temp(&[dir.path().join("run")])
        .await
        .unwrap();
    let e = memq_engine::Engine::open(&ing.dataset, &memq::catalog())
        .await
        .unwrap();
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_memory_record").await,
        1003
    );
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_operator_memory").await,
        184
    );
    assert_eq!(
        rows(&e, "SELECT kind FROM sources ORDER BY kind").await,
        vec![
            vec!["profiler_memory_record".to_string()],
            vec!["profiler_operator_memory".to_string()]
        ]
    );
}

// The db and pickle edge cases.

/// The db reader applies the CSV reader's Process Id / Thread Id rules: the twin files give
/// the same 4 rejects (`abc`, `-5`, `1.5`, Thread Id `x`) and keep `-1` (NULL) and ` 2579302 `.
#[tokio::test]
async fn db_and_csv_readers_share_the_id_rules() {
    let mut outcomes = Vec::new();
    for f in ["csv_text_negative_pid.csv", "db_text_negative_pid.db"] {
        let e = shared_engine(&[fixture(&format!("hostile/{f}"))]).await;
        let reasons: Vec<String> = rows(&e, "SELECT reason FROM rejects ORDER BY line")
            .await
            .into_iter()
            .map(|r| r[0].clone())
            .collect();
        let pids = rows(&e, "SELECT pid FROM events ORDER BY row_idx").await;
        outcomes.push((reasons, pids));
    }
    let (csv, db) = (&outcomes[0], &outcomes[1]);
    assert_eq!(csv.0.len(), 4, "{:?}", csv.0);
    assert_eq!(csv.1.len(), 7);
    assert_eq!(csv, db);
    for (reason, value) in csv.0.iter().zip(["abc", "-5", "x", "1.5"]) {
        assert!(reason.contains(&format!("`{value}`")), "{reason}");
    }
    assert!(csv.1.iter().any(|r| r[0] == "NULL"));
    assert!(csv.1.iter().any(|r| r[0] == "2579302"));
}

/// A pickle that is not a snapshot is refused (exit 2) naming the file and why, without
/// --strict.
#[test]
fn pickles_that_are_not_snapshots_are_refused() {
    for (file, fragment) in [
        (
            "pickle_list_of_ints.pickle",
            "not a PyTorch memory snapshot",
        ),
        (
            "pickle_dict_without_segments.pickle",
            "neither segments nor device_traces",
        ),
        (
            "pickle_segments_wrong_type.pickle",
            "segments is a str, not a list",
        ),
        (
            "pickle_segments_list_of_ints.pickle",
            "segments[0] is an int",
        ),
    ] {
        let (code, stderr) = ingest_cli(&fixture(&format!("hostile/{file}")));
        assert_eq!(code, 2, "{file}: {stderr}");
        assert!(stderr.contains(file), "{file}: {stderr}");
        assert!(stderr.contains(fragment), "{file}: {stderr}");
    }
    let (code, stderr) = ingest_cli(&fixture("hostile/pickle_valid_minimal.pickle"));
    assert_eq!(code, 0, "{stderr}");
}

/// WAL-mode dbs are read from a read-only folder (a read-only bind mount in a private mount
/// namespace when `unshare` is allowed) and nothing appears beside them; the pending db's
/// committed rows in its -wal are read too.
#[test]
fn wal_dbs_are_read_without_writing_beside_them() {
    for (db, wal, events) in [
        ("db_wal_clean.db", false, 10),
        ("db_wal_pending.db", true, 10),
    ] {
        let dir = tempfile::TempDir::new().unwrap();
        let input = dir.path().join("in");
        std::fs::create_dir(&input).unwrap();
        std::fs::copy(fixture(&format!("hostile/{db}")), input.join(db)).unwrap();
        if wal {
            let name = format!("{db}-wal");
            std::fs::copy(fixture(&format!("hostile/{name}")), input.join(&name)).unwrap();
        }
        let listing = |d: &Path| {
            let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let before = listing(&input);
        let dataset = dir.path().join("x.memq");
        let script = format!(
            "mount --bind -o ro '{0}' '{0}' && exec '{1}' ingest '{0}/{db}' -o '{2}' --force",
            input.display(),
            env!("CARGO_BIN_EXE_memq"),
            dataset.display()
        );
        let namespaced = Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .output();
        let out = match namespaced {
            Ok(out)
                if !["unshare:", "mount:"]
                    .iter()
                    .any(|m| String::from_utf8_lossy(&out.stderr).contains(m)) =>
            {
                out
            }
            // No mount namespace here: the same run in the (writable) folder.
            _ => memq()
                .args(["ingest"])
                .arg(input.join(db))
                .arg("-o")
                .arg(&dataset)
                .arg("--force")
                .output()
                .unwrap(),
        };
        assert!(
            out.status.success(),
            "{db}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            listing(&input),
            before,
            "{db}: files beside the input changed"
        );
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let e = memq_engine::Engine::open(&dataset, &memq::catalog())
                .await
                .unwrap();
            assert_eq!(int(&e, "SELECT count(*) FROM events").await, events, "{db}");
            assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0, "{db}");
        });
    }
}

/// An unknown legacy db schema names the columns found and needed.
#[test]
fn unknown_db_schema_lists_found_and_needed_columns() {
    let (code, stderr) = ingest_cli(&fixture("hostile/db_foreign_columns.db"));
    assert_eq!(code, 2, "{stderr}");
    for fragment in [
        "db_foreign_columns.db",
        "lacks ID, Event or Timestamp",
        "found a, b, c",
        "needed ID",
    ] {
        assert!(stderr.contains(fragment), "{fragment}: {stderr}");
    }
}

/// An Event or Event Type memq does not know is kept and counted in `stats`, never rejected; the
/// automatic `OOM_Snapshot` SNAPSHOT is read like any other.
#[tokio::test]
async fn unknown_events_are_kept_and_counted() {
    let dir = tempfile::TempDir::new().unwrap();
    let dump = dir.path().join("memscope_dump_20251205020000.csv");
    let mut text = std::fs::read_to_string(fixture("hostile/csv_valid_base.csv")).unwrap();
    text.push_str(
        "90,MEMORY_POOL_EXPAND,NEW_KIND,,1764900000000900000,2579302,2579302,0,N/A,{size:1},,\n",
    );
    text.push_str(
        "91,SNAPSHOT,SNAPSHOT,OOM_Snapshot,1764900000000900001,2579302,2579302,0,N/A,\
         \"{reserved:4096,allocated:1024,total:8192,free:2048,device_rate:75.000000,reserved_rate:25.000000}\",,\n",
    );
    std::fs::write(&dump, text).unwrap();
    let e = shared_engine(&[dump]).await;
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    assert_eq!(int(&e, "SELECT count(*) FROM events").await, 12);
    assert_eq!(
        int(&e, "SELECT sum(rows) FROM stats WHERE event = 'MEMORY_POOL_EXPAND' AND event_type = 'NEW_KIND'").await,
        1
    );
    let snap = &query_json(
        &e,
        "SELECT reserved, allocated, total_mem, free_mem FROM mem_snapshots WHERE name = 'OOM_Snapshot'",
    )
    .await[0];
    assert_eq!(
        [
            &snap["reserved"],
            &snap["allocated"],
            &snap["total_mem"],
            &snap["free_mem"]
        ]
        .map(i),
        [4096, 1024, 8192, 2048]
    );
}

/// A file memq does not read is named, never ingested as something else: a torch.profiler
/// trace is not an msMemScope config.json, a gzip file is not a dump with a bad header, any
/// other JSON says which keys a config.json has; a real config.json named alone still ingests.
#[test]
fn inputs_memq_does_not_read_are_named() {
    // (torch.profiler traces, plain or gzipped, are read: tests/it/traces.rs; its refusals of a
    // gzip or a JSON that is no trace are there too.)
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("metrics.json");
    std::fs::write(&other, br#"{"loss": [1.0, 0.5], "step": 2}"#).unwrap();
    let gz = dir.path().join("logs.tar.gz");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]).unwrap();
    for (input, says) in [
        (other.as_path(), "not an msMemScope config.json"),
        (gz.as_path(), "a gzip-compressed file"),
    ] {
        let (code, err) = ingest_cli(input);
        assert_eq!(code, 2, "{}: {err}", input.display());
        assert!(err.contains(says), "{}: {err}", input.display());
        assert!(err.contains("memq reads msMemScope dumps"), "{err}");
        assert!(err.contains(&input.display().to_string()), "{err}");
    }
    let config = dir.path().join("config.json");
    let g3 = fixture("memscope/g3_run");
    let project = std::fs::read_dir(&g3)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    std::fs::copy(project.join("config.json"), &config).unwrap();
    let (code, err) = ingest_cli(&config);
    assert_eq!(code, 0, "{err}");
}
