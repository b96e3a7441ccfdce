//! The event counts, block fates and the `curve` live bytes computed at ingest (crates/memscope/src/derive/fates.rs,
//! curve.rs, counts.rs) against the SQL statement of the same rules (tests/oracle/sql/block_fates.sql,
//! curve.sql, owner_peaks.sql, event_counts.sql, pool_expansions.sql, peaks.sql: the views memq ran per query before they were computed at
//! ingest; curve_buckets.sql and trend.sql against the buckets folded from curve_tiles and
//! usage_tiles, step_usage.sql against step_usage, step_peaks.sql against step_levels (view step_peaks), hal_mallocs against the events it copies;
//! oom_events.sql, oom_findings.sql, stage_memory.sql, wasted_memory.sql and step_leaks.sql, views before their
//! rewrite in fewer layers), on
//! every kind of
//! input the tests have: the committed G3 run, generated runs with stop periods, residual reuse,
//! several processes and a db writer, the real samples and the hostile corpus.

use std::path::PathBuf;

use memq_gen::{generate, Format, GenConfig, StopPeriod};

use crate::common::{fixture, fixture_root, int, real_fixture, rows, shared_engine};

/// The oracle views, registered under their own names on `engine`'s session.
async fn register_oracle(engine: &memq_engine::Engine) {
    let dir = fixture_root().join("tests/oracle/sql");
    let read = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("tests/oracle/sql/{file}: {e}"))
    };
    let fates = read("block_fates.sql");
    let curve = read("curve.sql").replace("FROM block_fates", "FROM oracle_block_fates");
    // The oracle reads the pairing columns of `blocks` only; its own fate columns replace ours.
    let fates = fates.replace("FROM blocks b", "FROM (SELECT source, pid, device, device_index, pool, ptr, size, owner, allocation_id, alloc_id, alloc_ts, alloc_row, free_id, free_ts, free_row, free_kind, stock, stack_py FROM blocks) b");
    let owner_peaks = read("owner_peaks.sql").replace("FROM blocks\n", "FROM oracle_block_fates\n");
    let counts = read("event_counts.sql");
    // The table functions as they were before their rewrite (a GROUP BY joined back instead
    // of windows over whole series; curve_buckets folds the five metrics in one pass), with
    // the arguments the checks use.
    let args = |file: &str, from: &str, to: &str| {
        read(file)
            .replace(from, to)
            .replace("$pool", "CAST(NULL AS VARCHAR)")
    };
    // n = 7 and 240 divide 20160: folded from curve_tiles; 13 does not: read from the rows
    let curve_buckets = args("curve_buckets.sql", "$n", "7");
    let curve_buckets_240 = args("curve_buckets.sql", "$n", "240");
    let curve_buckets_13 = args("curve_buckets.sql", "$n", "13");
    let peaks = read("peaks.sql");
    let step_usage = read("step_usage.sql");
    // step_peaks as it was: its intervals from the oracle, its pools from every curve series
    let step_peaks = read("step_peaks.sql")
        .replace("FROM step_usage", "FROM oracle_step_usage")
        .replace(
            "SELECT DISTINCT source, pid, device, pool\n    FROM intervals",
            "SELECT DISTINCT source, pid, device, pool\n    FROM curve",
        );
    assert!(
        step_peaks.contains("FROM oracle_step_usage")
            && step_peaks.contains("pool\n    FROM curve"),
        "tests/oracle/sql/step_peaks.sql no longer has the CTEs the oracle replaces"
    );
    let trend = args("trend.sql", "$buckets", "7");
    let trend_13 = args("trend.sql", "$buckets", "13");
    let fragmentation = read("fragmentation.sql");
    let expansions = read("pool_expansions.sql");
    // oom_events and oom_findings as they were before their rewrite in fewer layers (5 + 5
    // windows; the planning was most of their time)
    let oom_events = read("oom_events.sql");
    let oom_findings =
        read("oom_findings.sql").replace("FROM oom_events\n", "FROM oracle_oom_events\n");
    assert!(oom_findings.contains("FROM oracle_oom_events"));
    // stage_memory as it was before its windows and joins were cut down (2 s at 1 M events)
    let stage_memory = read("stage_memory.sql");
    // wasted_memory before its accesses were windowed per process (one partition per
    // allocation made the window 300 ms at 1 M events) and its blocks read once
    let wasted_memory = read("wasted_memory.sql");
    // step_leaks before its blocks were joined to their steps once (the origins' totals were a
    // second pass over the same joins)
    let step_leaks = read("step_leaks.sql");
    for (name, sql) in [
        ("oracle_step_leaks", step_leaks),
        ("oracle_wasted_memory", wasted_memory),
        ("oracle_stage_memory", stage_memory),
        ("oracle_oom_events", oom_events),
        ("oracle_oom_findings", oom_findings),
        ("oracle_pool_expansions", expansions),
        ("oracle_event_counts", counts),
        ("oracle_curve_buckets", curve_buckets),
        ("oracle_curve_buckets_240", curve_buckets_240),
        ("oracle_curve_buckets_13", curve_buckets_13),
        ("oracle_peaks", peaks),
        (
            "oracle_hal_mallocs",
            "SELECT * FROM events WHERE event = 'MALLOC' AND event_type = 'HAL'".to_string(),
        ),
        ("oracle_step_usage", step_usage),
        ("oracle_step_peaks", step_peaks),
        ("oracle_trend", trend),
        ("oracle_trend_13", trend_13),
        ("oracle_fragmentation", fragmentation),
        ("oracle_block_fates", fates),
        ("oracle_curve", curve),
        ("oracle_owner_peaks", owner_peaks),
    ] {
        engine
            .query(&format!("CREATE VIEW {name} AS {sql}"))
            .await
            .unwrap_or_else(|e| panic!("oracle view {name}: {e}"));
    }
}

/// Rows of `a` not in `b` (as multisets: each row with its count).
async fn missing(engine: &memq_engine::Engine, a: &str, b: &str, cols: &str) -> Vec<Vec<String>> {
    rows(
        engine,
        &format!(
            "SELECT {cols}, COUNT(*) AS n_rows FROM {a} GROUP BY {cols} \
             EXCEPT SELECT {cols}, COUNT(*) AS n_rows FROM {b} GROUP BY {cols} LIMIT 5"
        ),
    )
    .await
}

/// Checks `input`; returns the fates its blocks have.
async fn check(input: PathBuf) -> Vec<String> {
    let e = shared_engine(std::slice::from_ref(&input)).await;
    register_oracle(&e).await;
    let fate_cols =
        "source, pid, device, pool, ptr, alloc_row, free_row, fate, held_at_end, end_ts, end_row";
    let curve_cols = "source, pid, device, pool, ts, ts_raw, row_idx, id, event, size, used, total, process_used, device_used, live_bytes";
    let owner_cols = "source, pid, device, pool, owner, owner_group, peak_bytes, peak_ts, total_bytes, blocks, end_bytes";
    let count_cols = "source, pid, device, event, event_type, rows, first_ts, last_ts, first_ts_raw, last_ts_raw, owner_rows, shadow_rows, py_stack_rows, c_stack_rows, counter_rows, device_used_rows, size_bytes";
    let peak_cols = "source, pid, device, pool, metric, peak_bytes, peak_ts, peak_ts_raw, peak_event, peak_id, points";
    let hal_cols = "source, row_idx, pid, device, ts, ts_raw, ptr, size, owner, alloc_type, page_type, shadow, stack_py";
    let step_usage_cols =
        "source, pid, device, pool, step_k, points, max_used, max_ts, last_inside, last_value";
    let step_cols = "source, pid, device, step, origin, start_ts, end_ts, pool, points, start_used, peak_used, peak_ts, end_used, growth, growth_vs_prev";
    let bucket_cols = "source, pid, device, pool, metric, bucket, t0, t1, points, first_bytes, last_bytes, min_bytes, max_bytes, end_bytes";
    let expansion_cols = "source, pid, device, pool, n, ts, ts_raw, event, total_before, total_after, delta, used_before, used_after, usage_before_pct, hal_segments, hal_bytes";
    let oom_event_cols = "source, pid, device, trigger_id, oom_ts, kind, nth, id, ts, func, req_size, flag, ret, pool, ptr, size, alloc_ts, owner, owner_group, stack_top, snapshot_ts, snapshot_name, free_mem, total_mem, reserved_bytes, allocated_bytes, req_pct_of_free, stack_py, stack_c";
    let stage_cols = "source, pid, device, stage, range_id, depth, step, start_ts, end_ts, ended_by, duration_ns, pool, points, start_used, peak_used, peak_ts, end_used, growth, peak_rise";
    let wasted_cols = "source, pid, device, pool, ptr, size, owner, user_frame, kind, origin, alloc_ts, first_use_ts, last_use_ts, end_ts, wasted_from, wasted_to, wasted_ns, peak_ts, peak_saving";
    let step_leak_cols = "source, pid, device, pool, owner, owner_group, user_frame, blocks, first_step, last_step, step_ends, held_last, held_at_end, ROUND(growth_per_step, 3), ROUND(r2, 9), rising_steps, confidence";
    let oom_finding_cols = "source, pid, device, trigger_id, oom_ts, priority, rule, verdict, evidence, req_size, free_mem, snapshot_ts";
    let trend_cols = "source, pid, device, pool, bucket, t0, t1, points, used_last, used_min_bytes, used_max_bytes, total_last, base_used, compared_buckets, above_base, monotonic, net_growth_bytes, growth_verdict, total_first_bytes, total_final_bytes, total_non_decreasing, reservation_growth";
    // fragmentation has one row per series: compared row by row in key order (its list of
    // structs, lowest_usage, cannot be grouped by the multiset check below; the mean, a sum of
    // doubles in another order, to 6 decimals)
    let frag = |t: &str| {
        format!(
            "SELECT source, pid, device, pool, rows, samples, expansions, current_frag_pct, current_ts, \
             current_ts_raw, peak_frag_pct, peak_ts, peak_ts_raw, level, peak_level, used_last, total_last, \
             peak_total, lowest_usage, ROUND(mean_frag_pct, 6) FROM {t} ORDER BY source, pid, device, pool"
        )
    };
    assert_eq!(
        rows(&e, &frag("fragmentation")).await,
        rows(&e, &frag("oracle_fragmentation")).await,
        "{}: fragmentation against its oracle",
        input.display()
    );
    for (a, b, cols) in [
        ("curve_buckets(7)", "oracle_curve_buckets", bucket_cols),
        ("oracle_curve_buckets", "curve_buckets(7)", bucket_cols),
        (
            "curve_buckets(240)",
            "oracle_curve_buckets_240",
            bucket_cols,
        ),
        (
            "oracle_curve_buckets_240",
            "curve_buckets(240)",
            bucket_cols,
        ),
        ("curve_buckets(13)", "oracle_curve_buckets_13", bucket_cols),
        ("oracle_curve_buckets_13", "curve_buckets(13)", bucket_cols),
        ("peaks", "oracle_peaks", peak_cols),
        ("oracle_peaks", "peaks", peak_cols),
        ("hal_mallocs", "oracle_hal_mallocs", hal_cols),
        ("oracle_hal_mallocs", "hal_mallocs", hal_cols),
        ("step_usage", "oracle_step_usage", step_usage_cols),
        ("oracle_step_usage", "step_usage", step_usage_cols),
        ("step_peaks", "oracle_step_peaks", step_cols),
        ("oracle_step_peaks", "step_peaks", step_cols),
        ("trend(7)", "oracle_trend", trend_cols),
        ("oracle_trend", "trend(7)", trend_cols),
        ("trend(13)", "oracle_trend_13", trend_cols),
        ("oracle_trend_13", "trend(13)", trend_cols),
        ("pool_expansions", "oracle_pool_expansions", expansion_cols),
        ("oracle_pool_expansions", "pool_expansions", expansion_cols),
        ("event_counts", "oracle_event_counts", count_cols),
        ("oracle_event_counts", "event_counts", count_cols),
        ("blocks", "oracle_block_fates", fate_cols),
        ("oracle_block_fates", "blocks", fate_cols),
        ("curve", "oracle_curve", curve_cols),
        ("oracle_curve", "curve", curve_cols),
        ("owner_peaks", "oracle_owner_peaks", owner_cols),
        ("oracle_owner_peaks", "owner_peaks", owner_cols),
        ("oom_events", "oracle_oom_events", oom_event_cols),
        ("oracle_oom_events", "oom_events", oom_event_cols),
        ("oom_findings", "oracle_oom_findings", oom_finding_cols),
        ("oracle_oom_findings", "oom_findings", oom_finding_cols),
        ("stage_memory", "oracle_stage_memory", stage_cols),
        ("oracle_stage_memory", "stage_memory", stage_cols),
        ("wasted_memory", "oracle_wasted_memory", wasted_cols),
        ("oracle_wasted_memory", "wasted_memory", wasted_cols),
        ("step_leaks", "oracle_step_leaks", step_leak_cols),
        ("oracle_step_leaks", "step_leaks", step_leak_cols),
    ] {
        let diff = missing(&e, a, b, cols).await;
        assert!(
            diff.is_empty(),
            "{}: rows of {a} not in {b} ({cols}): {diff:?}",
            input.display()
        );
    }
    let curve_rows = int(&e, "SELECT COUNT(*) FROM curve").await;
    let memory_rows = int(
        &e,
        "SELECT COUNT(*) FROM events WHERE event IN ('MALLOC', 'FREE')",
    )
    .await;
    assert_eq!(curve_rows, memory_rows, "{}", input.display());
    rows(&e, "SELECT DISTINCT fate FROM blocks ORDER BY 1")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

fn generated(name: &str, cfg: GenConfig) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("derived-oracle")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    generate(&cfg, &dir).expect("generate");
    dir
}

#[tokio::test]
async fn committed_and_real_inputs() {
    check(fixture("memscope/g3_run")).await;
    // The committed run has pool expansions with HAL segments (the check is not empty).
    let e = shared_engine(&[fixture("memscope/g3_run")]).await;
    assert!(
        int(
            &e,
            "SELECT COUNT(*) FROM pool_expansions WHERE hal_segments > 0"
        )
        .await
            > 0
    );
    // and OOM records copied into every device file (the oom checks are not empty either)
    assert!(
        int(
            &e,
            "SELECT COUNT(*) FROM oom_findings WHERE verdict = 'yes'"
        )
        .await
            > 0
    );
    assert!(
        int(&e, "SELECT COUNT(*) FROM oom WHERE kind = 'top'").await
            > int(&e, "SELECT COUNT(*) FROM oom_events WHERE kind = 'top'").await
    );
    // and MSTX ranges, ACCESS rows and a leak (stage_memory, wasted_memory and step_leaks are
    // checked on rows)
    assert!(int(&e, "SELECT COUNT(*) FROM stage_memory").await > 0);
    assert!(int(&e, "SELECT COUNT(*) FROM step_leaks").await > 0);
    assert!(
        int(
            &e,
            "SELECT COUNT(*) FROM wasted_memory WHERE origin = 'access'"
        )
        .await
            > 0
    );
    for f in [
        "memscope/real/v1_smoke_multiproc_a.csv",
        "memscope/real/v1_smoke_multiproc_b.csv",
        "memscope/real/v2_compare_baseline.csv",
        "memscope/real/v2_compare_leaks.csv",
        "memscope/insight/leaks_dump_msinsight.db",
        "memscope/insight/memscope_host_pinned.db",
    ] {
        check(real_fixture(f)).await;
    }
    check(fixture_root().join("tests/oracle/leaks_dump_msinsight.csv")).await;
}

#[tokio::test]
async fn generated_runs_with_every_shadow_rule() {
    let stop = Some(StopPeriod {
        stop_before_step: 2,
        start_before_step: 4,
    });
    let runs = [
        ("small", GenConfig::small()),
        (
            "stopped-two-processes",
            // As gen_truth's variants: leaked blocks filled in at the last stop + 1.
            GenConfig {
                devices: 3,
                processes: 2,
                steps: 7,
                layers: 5,
                leak_bytes: 3 * 1024 * 1024 + 100,
                end_stopped: true,
                stop_period: stop,
                residual_reuse: true,
                pre_start_blocks: true,
                seed: 99,
                ..GenConfig::default()
            },
        ),
        (
            "stop-period-db",
            GenConfig {
                stop_period: stop,
                residual_reuse: true,
                format: Format::Db,
                seed: 11,
                ..GenConfig::small()
            },
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (name, cfg) in runs {
        seen.extend(check(generated(name, cfg)).await);
    }
    // The runs exercise every rule (the check above would pass trivially otherwise).
    for fate in [
        "released",
        "stop_period_free",
        "residual_fill_in",
        "exit_while_stopped",
        "exit_fill_in",
    ] {
        assert!(
            seen.contains(fate),
            "no {fate} block in the generated runs: {seen:?}"
        );
    }
}

#[tokio::test]
async fn hostile_memscope_inputs() {
    let dir = fixture("hostile");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dump = name.ends_with("_base.csv") || name.ends_with("_base.db");
        let ts_rules = name.starts_with("csv_ts_") || name.starts_with("csv_numbers");
        if !(is_dump || ts_rules) {
            continue;
        }
        check(entry.path()).await;
        checked += 1;
    }
    assert!(checked >= 5, "hostile inputs checked: {checked}");
}

#[tokio::test]
async fn more_series_than_staging_files() {
    // 90 processes on one device, interleaved in time: more series than curve.rs keeps in
    // files of their own, so the rows go through the shared file and a sort.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("derived-oracle")
        .join(format!("many-series-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::from("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n");
    let mut id = 0;
    for round in 0..3u64 {
        for pid in 0..90u64 {
            for (event, shift) in [("MALLOC", 0), ("FREE", 1)] {
                id += 1;
                let ts = 1_764_900_000_000_000_000 + round * 1_000_000 + pid * 10 + shift;
                let ptr = 0x1000 + pid * 0x100 + round;
                let size = if event == "MALLOC" {
                    512 * (pid + 1)
                } else {
                    0
                };
                let keep = round == 2 && pid % 3 == 0;
                if event == "FREE" && keep {
                    continue; // never freed: live at the end
                }
                text.push_str(&format!(
                    "{id},{event},PTA,N/A,{ts},{},1,0,0x{ptr:x},\"{{size:{size},total:1048576,used:{}}}\",,\n",
                    100 + pid,
                    size
                ));
            }
        }
    }
    let dump = dir.join("memscope_dump_many.csv");
    std::fs::write(&dump, text).unwrap();
    check(dump.clone()).await;
    let e = shared_engine(&[dump]).await;
    let series = int(&e, "SELECT COUNT(DISTINCT pid) FROM curve").await;
    assert_eq!(series, 90);
    // Held at the end: the 30 blocks of round 2 with pid % 3 = 0, by the curve's last values.
    let held = int(&e, "SELECT SUM(v) FROM (SELECT pid, last_value(live_bytes ORDER BY ts, row_idx) AS v FROM curve GROUP BY pid)").await;
    let expected: i64 = (0..90).filter(|p| p % 3 == 0).map(|p| 512 * (p + 1)).sum();
    assert_eq!(held, expected);
}

#[tokio::test]
async fn addresses_reused_without_a_free() {
    // G2 and older write no FREE when an address is reused: the old block ends at the MALLOC
    // that reuses it, and that one row changes two owners' bytes.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("derived-oracle")
        .join(format!("reuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let t = 1_764_900_000_000_000_000u64;
    let dump_rows = [
        (
            1,
            "MALLOC",
            "PTA",
            t + 10,
            "0xa0",
            "{size:100,owner:PTA@model@x}",
        ),
        (
            2,
            "MALLOC",
            "PTA",
            t + 20,
            "0xa0",
            "{size:50,owner:PTA@model@y}",
        ),
        (
            3,
            "MALLOC",
            "PTA",
            t + 30,
            "0xb0",
            "{size:30,owner:PTA@model@x}",
        ),
        (
            4,
            "MALLOC",
            "PTA",
            t + 40,
            "0xb0",
            "{size:70,owner:PTA@model@x}",
        ),
        (5, "FREE", "PTA", t + 50, "0xa0", "{size:50}"),
        (6, "MALLOC", "HAL", t + 60, "0xc0", "{size:4096}"),
        (7, "MALLOC", "HAL", t + 70, "0xc0", "{size:8192}"),
    ];
    let mut text = String::from("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n");
    for (id, event, pool, ts, ptr, attr) in dump_rows {
        text.push_str(&format!(
            "{id},{event},{pool},N/A,{ts},7,7,0,{ptr},\"{attr}\",,\n"
        ));
    }
    let dump = dir.join("memscope_dump_reuse.csv");
    std::fs::write(&dump, text).unwrap();
    let fates = check(dump.clone()).await;
    assert!(fates.contains(&"replaced".to_string()), "{fates:?}");
    let e = shared_engine(&[dump]).await;
    let owners = rows(&e, "SELECT owner, peak_bytes, peak_ts, total_bytes, blocks, end_bytes FROM owner_peaks ORDER BY owner").await;
    assert_eq!(
        owners,
        vec![
            vec![
                "HAL".to_string(),
                "8192".into(),
                (t + 70).to_string(),
                "12288".into(),
                "2".into(),
                "8192".into()
            ],
            vec![
                "PTA@model@x".to_string(),
                "100".into(),
                (t + 10).to_string(),
                "200".into(),
                "3".into(),
                "70".into()
            ],
            vec![
                "PTA@model@y".to_string(),
                "50".into(),
                (t + 20).to_string(),
                "50".into(),
                "1".into(),
                "0".into()
            ],
        ]
    );
    let live = rows(&e, "SELECT pool, live_bytes FROM curve ORDER BY ts").await;
    let live: Vec<String> = live
        .into_iter()
        .map(|r| format!("{}={}", r[0], r[1]))
        .collect();
    assert_eq!(
        live,
        ["PTA=100", "PTA=50", "PTA=80", "PTA=120", "PTA=70", "HAL=4096", "HAL=8192"]
    );
}
