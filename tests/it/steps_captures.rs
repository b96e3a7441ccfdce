//! Three answers that dumps unlike the generator's could get wrong:
//! - steps marked by user spellings (`Range_start "step N"` … `Range_end "step N"`, and marks
//!   that only mention a step) are found once each, with the per-step figures at the real ends;
//! - two captures whose processes share a pid keep their own OOM records;
//! - every view shares one end state: breakdown_at at the end shows what is held.
//!
//! Each test rewrites the project's G3 fixture (fixtures/memscope/g3_run, whose truth.json
//! states the steps and per-step figures) the way another writer or another job would.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{fixture, open, query_json as query, Row};

fn g3_output_folder() -> PathBuf {
    let root = fixture("memscope/g3_run");
    std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("the G3 fixture's output folder")
}

fn truth() -> Value {
    let text = std::fs::read_to_string(fixture("memscope/g3_run/truth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Copies folder `from` to `to`, passing every dump CSV through `edit`.
fn copy_tree(from: &Path, to: &Path, edit: &dyn Fn(&str) -> String) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst, edit);
        } else if entry
            .file_name()
            .to_string_lossy()
            .starts_with("memscope_dump")
        {
            std::fs::write(&dst, edit(&std::fs::read_to_string(&src).unwrap())).unwrap();
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The dump as a user who marks steps with named ranges writes it: no SYSTEM STEP rows,
/// `Range_start "step N"` … `Range_end "step N"`, and a mark `step N optimizer.step` inside
/// every step (the spelling that used to start a second step).
fn user_step_spelling(csv: &str) -> String {
    let mut out = String::new();
    let mut step: Option<String> = None;
    for line in csv.split_inclusive('\n') {
        let fields: Vec<&str> = line.splitn(5, ',').collect();
        match fields.get(1..4) {
            Some(["SYSTEM", "STEP", n]) => {
                step = Some(n.to_string());
                continue;
            }
            Some(["MSTX", "Range_start", "\"step start\""]) => {
                let n = step.clone().expect("a STEP row before the step range");
                let named = line.replacen("\"step start\"", &format!("\"step {n}\""), 1);
                let mark = named.replacen(",Range_start,", ",Mark,", 1).replacen(
                    &format!("\"step {n}\""),
                    &format!("\"step {n} optimizer.step\""),
                    1,
                );
                out.push_str(&named);
                out.push_str(&mark);
                continue;
            }
            Some(["MSTX", "Range_end", name]) if step.is_some() => {
                let n = step.take().unwrap();
                out.push_str(&line.replacen(name, &format!("\"step {n}\""), 1));
                continue;
            }
            _ => {}
        }
        out.push_str(line);
    }
    out
}

#[tokio::test]
async fn user_spelled_steps_are_counted_once_with_figures_at_their_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    copy_tree(&g3_output_folder(), &run, &user_step_spelling);
    let (_ds, engine) = open(&[run]).await;
    let truth = truth();

    let steps = query(&engine, "SELECT * FROM steps ORDER BY device, start_ts").await;
    let mut want: Vec<(String, i64, Option<i64>)> = Vec::new();
    for p in truth["processes"].as_array().unwrap() {
        for w in p["steps"].as_array().unwrap() {
            if w["collected"] == true {
                let device = w["device"].as_str().unwrap().to_string();
                want.push((device, int(&w["step"]).unwrap(), int(&w["end_ts"])));
            }
        }
    }
    want.sort();
    let mut got: Vec<(String, i64, Option<i64>)> = steps
        .iter()
        .map(|r| {
            let device = r["device"].as_str().unwrap().to_string();
            (device, int(&r["step"]).unwrap(), int(&r["end_ts"]))
        })
        .collect();
    got.sort();
    assert_eq!(
        got, want,
        "one step per named range, numbered from the name"
    );
    assert!(steps.iter().all(|r| r["origin"] == "MSTX_RANGE"));

    let peaks: Vec<Row> = query(&engine, "SELECT * FROM step_peaks").await;
    let checked = crate::memscope_oom_steps::assert_step_peaks_match_truth(&peaks, &truth);
    assert!(checked >= 12, "{checked} step figures checked");
    // the injected PTA leak: every complete step ends higher than the one before
    let growth: Vec<i64> = peaks
        .iter()
        .filter(|r| r["pool"] == "PTA")
        .filter_map(|r| int(&r["growth_vs_prev"]))
        .collect();
    assert!(
        !growth.is_empty() && growth.iter().all(|g| *g > 0),
        "{growth:?}"
    );
}

#[tokio::test]
async fn captures_sharing_a_pid_keep_their_own_oom_records() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    copy_tree(&g3_output_folder(), &one.join("rank0"), &|s| s.to_string());
    let two = tmp.path().join("two");
    copy_tree(&g3_output_folder(), &two.join("rank0"), &|s| s.to_string());
    // a second rank of the same job: same pid (its own container), the same records
    copy_tree(&g3_output_folder(), &two.join("rank1"), &|s| s.to_string());

    let sql =
        "SELECT capture(source) AS capture, kind, nth, id, size, owner, trigger_id, free_mem \
               FROM oom_events ORDER BY capture, trigger_id, kind, nth";
    let (_a, single) = open(&[one]).await;
    let (_b, both) = open(&[two]).await;
    let alone = query(&single, sql).await;
    let joint = query(&both, sql).await;
    assert!(
        alone.iter().any(|r| r["kind"] == "top"),
        "the fixture has TOP records"
    );
    assert_eq!(
        joint.len(),
        2 * alone.len(),
        "each capture lists its own records"
    );
    for rank in ["rank0", "rank1"] {
        let mine: Vec<Row> = joint
            .iter()
            .filter(|r| r["capture"].as_str().unwrap().contains(rank))
            .map(|r| {
                let mut r = r.clone();
                r.remove("capture");
                r
            })
            .collect();
        let want: Vec<Row> = alone
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.remove("capture");
                r
            })
            .collect();
        assert_eq!(
            mine, want,
            "{rank}: the same records as when ingested alone"
        );
    }
    let verdicts = "SELECT capture(source) AS c, rule, verdict FROM oom_findings ORDER BY c, rule";
    let alone = query(&single, verdicts).await;
    let joint = query(&both, verdicts).await;
    assert_eq!(joint.len(), 2 * alone.len());
    let strip = |rows: &[Row]| -> Vec<(Value, Value)> {
        rows.iter()
            .map(|r| (r["rule"].clone(), r["verdict"].clone()))
            .collect()
    };
    assert_eq!(strip(&joint[..alone.len()]), strip(&alone));
    assert_eq!(strip(&joint[alone.len()..]), strip(&alone));
}

#[tokio::test]
async fn breakdown_at_the_end_shows_what_is_held_at_the_end() {
    let (_ds, engine) = open(&[fixture("memscope/g3_run")]).await;
    // every series: live bytes by breakdown_at at the last time of its file, and the blocks
    // held at the end (the rule leak_candidates and curve use)
    let series = query(
        &engine,
        "SELECT b.source, b.pid, b.device, b.pool, SUM(b.size) AS held, \
                SUM(b.size) FILTER (WHERE b.free_ts IS NULL) AS never_freed, MAX(e.last_ts) AS last_ts \
         FROM blocks b JOIN (SELECT source, MAX(ts) AS last_ts FROM events GROUP BY source) e \
              ON e.source = b.source \
         WHERE b.held_at_end AND b.alloc_ts IS NOT NULL \
         GROUP BY b.source, b.pid, b.device, b.pool ORDER BY b.source, b.pool",
    )
    .await;
    assert!(!series.is_empty());
    let mut filled_in = 0;
    for s in &series {
        let live = query(
            &engine,
            &format!(
                "SELECT COALESCE(SUM(bytes), 0) AS bytes FROM breakdown_at({}, '{}') \
                 WHERE source = '{}' AND device = '{}'",
                int(&s["last_ts"]).unwrap(),
                s["pool"].as_str().unwrap(),
                s["source"].as_str().unwrap(),
                s["device"].as_str().unwrap()
            ),
        )
        .await;
        let ctx = format!("{} {}", s["source"], s["pool"]);
        assert_eq!(int(&live[0]["bytes"]), int(&s["held"]), "{ctx}");
        if int(&s["held"]) > int(&s["never_freed"]).or(Some(0)) {
            filled_in += 1;
        }
    }
    assert!(
        filled_in > 0,
        "some series hold blocks the tool filled in with a shadow FREE at exit"
    );
    // the same totals through leak_candidates
    let leaks = query(&engine, "SELECT SUM(size) AS bytes FROM leak_candidates").await;
    let held: i64 = series.iter().filter_map(|s| int(&s["held"])).sum();
    assert_eq!(int(&leaks[0]["bytes"]), Some(held));
}

#[tokio::test]
async fn step_leaks_find_the_injected_leak_and_nothing_else_with_confidence() {
    let engine = crate::common::shared_engine(&[fixture("memscope/g3_run")]).await;
    let truth = truth();
    let leaks = query(&engine, "SELECT * FROM step_leaks").await;
    let high: Vec<&Row> = leaks.iter().filter(|r| r["confidence"] == "high").collect();
    // truth: one leaked block per step and device, all of one owner and size
    let blocks = truth["leak"]["blocks"].as_array().unwrap();
    let size = int(&blocks[0]["size"]).unwrap();
    let owner = blocks[0]["owner"].as_str().unwrap();
    let devices: std::collections::BTreeSet<&str> = blocks
        .iter()
        .map(|b| b["device"].as_str().unwrap())
        .collect();
    assert_eq!(
        high.len(),
        devices.len(),
        "one leaking origin per device: {high:?}"
    );
    for r in high {
        assert_eq!(r["owner"], owner);
        assert_eq!(r["pool"], "PTA");
        assert_eq!(r["growth_per_step"].as_f64(), Some(size as f64), "{r:?}");
        assert_eq!(r["r2"].as_f64(), Some(1.0));
        assert_eq!(r["rising_steps"].as_f64(), Some(100.0));
    }
    // everything else allocated in steps and kept is flat
    for r in leaks.iter().filter(|r| r["owner"] != owner) {
        assert_ne!(r["confidence"], "high", "{r:?}");
    }

    // device or host: the framework pool grows by the leak every step, HAL reserves stay flat
    let steps = query(
        &engine,
        "SELECT * FROM device_host_steps WHERE end_ts IS NOT NULL ORDER BY device, start_ts",
    )
    .await;
    assert!(steps.len() >= 6);
    for r in steps.iter().filter(|r| !r["framework_growth"].is_null()) {
        assert_eq!(int(&r["framework_growth"]), Some(size), "{r:?}");
        assert_eq!(int(&r["hal_growth"]), Some(0), "{r:?}");
        assert_eq!(r["host_pool"], "HOST_PINNED");
    }
}

#[tokio::test]
async fn mem_state_at_a_step_end_or_a_mark_agrees_with_the_per_step_figures() {
    let engine = crate::common::shared_engine(&[fixture("memscope/g3_run")]).await;
    let ends = query(
        &engine,
        "SELECT device, step, pool, end_used, end_ts FROM step_peaks WHERE end_ts IS NOT NULL AND pool = 'PTA'",
    )
    .await;
    assert!(ends.len() >= 6);
    for e in &ends {
        let step = int(&e["step"]).unwrap();
        let rows = query(
            &engine,
            &format!(
                "SELECT * FROM mem_state_at('step {step} end') WHERE device = '{}'",
                e["device"].as_str().unwrap()
            ),
        )
        .await;
        let of = |kind: &str, pool: &str| -> Vec<&Row> {
            rows.iter()
                .filter(|r| r["kind"] == kind && r["pool"] == pool)
                .collect()
        };
        let pool = of("pool", "PTA");
        assert_eq!(pool.len(), 1, "{rows:?}");
        let ctx = format!("device {} step {step}", e["device"]);
        assert_eq!(int(&pool[0]["at_ts"]), int(&e["end_ts"]), "{ctx}");
        assert_eq!(
            int(&pool[0]["used"]),
            int(&e["end_used"]),
            "{ctx}: the counter at the step end"
        );
        for p in ["PTA", "HAL"] {
            let live = int(&of("pool", p)[0]["bytes"]).unwrap();
            let owners: i64 = of("owner", p)
                .iter()
                .map(|r| int(&r["bytes"]).unwrap())
                .sum();
            let blocks: i64 = of("block", p)
                .iter()
                .map(|r| int(&r["bytes"]).unwrap())
                .sum();
            assert_eq!((owners, blocks), (live, live), "{ctx} {p}");
        }
    }
    let mark = query(
        &engine,
        "SELECT device, MIN(ts) AS ts FROM events WHERE event = 'MSTX' AND event_type = 'Mark' GROUP BY device",
    )
    .await;
    let name: String = query(
        &engine,
        "SELECT MIN(name) AS n FROM events WHERE event = 'MSTX' AND event_type = 'Mark'",
    )
    .await[0]["n"]
        .as_str()
        .unwrap()
        .to_string();
    let at = query(
        &engine,
        &format!(
            "SELECT device, MIN(at_ts) AS ts FROM mem_state_at('mark {name}') GROUP BY device"
        ),
    )
    .await;
    let key = |rows: &[Row]| -> Vec<(String, Option<i64>)> {
        let mut v: Vec<_> = rows
            .iter()
            .map(|r| (r["device"].as_str().unwrap().to_string(), int(&r["ts"])))
            .collect();
        v.sort();
        v
    };
    assert_eq!(key(&at), key(&mark));
    let message = engine
        .query("SELECT * FROM mem_state_at('stpe 2')")
        .await
        .err()
        .map(|e| e.to_string());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("`stpe 2` is not a time")),
        "{message:?}"
    );
}

#[tokio::test]
async fn run_diff_names_the_one_owner_that_changed_between_two_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job");
    copy_tree(&g3_output_folder(), &job.join("run_a"), &|s| s.to_string());
    // run B: the leaking owner allocates twice as much per step
    copy_tree(&g3_output_folder(), &job.join("run_b"), &|csv| {
        csv.split_inclusive('\n')
            .map(|l| {
                if l.contains("owner:PTA@loss_history") {
                    l.replacen("size:3145728", "size:6291456", 1)
                } else {
                    l.to_string()
                }
            })
            .collect()
    });
    let (_ds, engine) = open(&[job]).await;
    let captures = query(
        &engine,
        "SELECT DISTINCT capture(source) AS c FROM blocks ORDER BY c",
    )
    .await;
    let name = |i: usize| captures[i]["c"].as_str().unwrap().to_string();
    assert_eq!(captures.len(), 2);
    let diff = query(
        &engine,
        &format!("SELECT * FROM run_diff('{}', '{}')", name(0), name(1)),
    )
    .await;
    let truth = truth();
    let leaked: i64 = truth["leak"]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| int(&b["size"]).unwrap())
        .sum();
    let changed: Vec<&Row> = diff
        .iter()
        .filter(|r| r["dimension"] == "owner" && r["status"] != "same")
        .collect();
    assert!(
        changed.iter().all(|r| r["key"] == "PTA@loss_history"),
        "{changed:?}"
    );
    let whole = changed
        .iter()
        .find(|r| r["step"].is_null())
        .expect("a whole-run row");
    assert_eq!(
        int(&whole["alloc_change"]),
        Some(leaked),
        "B allocates the leaked bytes once more"
    );
    assert_eq!(int(&whole["held_change"]), Some(leaked));
    // per step: one more leaked block's worth on each device
    let devices = 2;
    for r in changed.iter().filter(|r| !r["step"].is_null()) {
        assert_eq!(int(&r["alloc_change"]), Some(devices * 3_145_728), "{r:?}");
    }
    assert!(changed.iter().filter(|r| !r["step"].is_null()).count() >= 3);
    // an unknown side names the captures there are; two equal sides are refused by the SQL
    let err = crate::common::query_error(
        &engine,
        &format!("SELECT * FROM run_diff('nope', '{}')", name(1)),
    )
    .await;
    assert!(
        err.contains("unknown capture 'nope'") && err.contains(&name(0)),
        "{err}"
    );
    let err = crate::common::query_error(
        &engine,
        &format!("SELECT * FROM run_diff('{0}', '{0}')", name(0)),
    )
    .await;
    assert!(err.contains("must name two different captures"), "{err}");
}
