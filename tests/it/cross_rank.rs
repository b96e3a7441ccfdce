//! The cross-rank analyses against the generator's truth for a job with a known peak rank, a
//! known skewed step and a leak on one rank (memq-gen job mode, crates/gen/src/job.rs).

use std::path::PathBuf;

use memq_gen::{generate_job, JobConfig, JobTruth};
use tokio::sync::OnceCell;

use crate::common;

/// The job (2 nodes × 4 ranks, generated once per test run) and its dataset.
async fn job() -> &'static (JobTruth, PathBuf) {
    static JOB: OnceCell<(JobTruth, PathBuf)> = OnceCell::const_new();
    JOB.get_or_init(|| async {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cross-rank-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut cfg = JobConfig::new(2, 4);
        cfg.rank.layers = 2;
        let truth = generate_job(&cfg, &root.join("job")).expect("job generated");
        let dataset = common::shared_dataset(&[root.join("job")]).await;
        (truth, dataset)
    })
    .await
}

async fn rows(sql: &str) -> Vec<Vec<String>> {
    let (_, ds) = job().await;
    let engine = memq_engine::Engine::open(ds, &memq::catalog())
        .await
        .unwrap();
    common::rows(&engine, sql).await
}

#[tokio::test]
async fn ranks_are_numbered_by_node_and_npu_though_pids_repeat() {
    let (t, _) = job().await;
    let got = rows("SELECT rank, node, device, pid FROM job_ranks ORDER BY rank").await;
    let want: Vec<Vec<String>> = t
        .ranks
        .iter()
        .map(|r| {
            vec![
                r.rank.to_string(),
                r.node.clone(),
                r.device.clone(),
                r.pid.to_string(),
            ]
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        t.ranks[0].pid, t.ranks[4].pid,
        "the generator repeats pids across nodes"
    );
}

#[tokio::test]
async fn rank_peaks_name_the_peak_rank_and_its_step() {
    let (t, _) = job().await;
    let got = rows(
        "SELECT rank, peak_bytes, peak_ts, step, order_in_job FROM rank_peaks WHERE pool = 'PTA' ORDER BY rank",
    )
    .await;
    assert_eq!(got.len(), t.ranks.len());
    for (row, r) in got.iter().zip(&t.ranks) {
        assert_eq!(row[1], r.pta_peak_used.to_string(), "rank {}", r.rank);
        assert_eq!(row[2], r.pta_peak_ts.to_string(), "rank {}", r.rank);
        assert_eq!(
            row[3],
            r.pta_peak_step
                .map(|s| s.to_string())
                .unwrap_or("NULL".into()),
            "rank {}",
            r.rank
        );
    }
    let first: Vec<&Vec<String>> = got.iter().filter(|r| r[4] == "1").collect();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0][0], t.peak_rank.to_string());
}

#[tokio::test]
async fn the_heat_table_holds_every_rank_step_peak() {
    let (t, _) = job().await;
    let got = rows("SELECT rank, step, peak_used, end_used FROM rank_step_heat WHERE pool = 'PTA' ORDER BY rank, step").await;
    let mut want = Vec::new();
    for r in &t.ranks {
        for s in &r.steps {
            want.push(vec![
                r.rank.to_string(),
                s.step.to_string(),
                s.peak_used.map(|v| v.to_string()).unwrap_or("NULL".into()),
                s.end_used.map(|v| v.to_string()).unwrap_or("NULL".into()),
            ]);
        }
    }
    assert_eq!(got, want);
}

#[tokio::test]
async fn step_skew_finds_the_skewed_step_and_its_rank() {
    let (t, _) = job().await;
    let got = rows("SELECT step, skew, max_rank, outlier_ranks FROM step_skew WHERE pool = 'PTA' ORDER BY step").await;
    assert_eq!(got.len(), t.steps.len());
    for (row, s) in got.iter().zip(&t.steps) {
        assert_eq!(row[0], s.step.to_string());
        let skew: f64 = row[1].parse().unwrap();
        assert!((skew - s.ratio).abs() < 1e-9, "{row:?} vs {}", s.ratio);
        assert_eq!(row[2], s.max_rank.to_string(), "step {}", s.step);
        // The peak rank holds more activations in every step (an outlier each time); the
        // skew rank joins it in the skew step only.
        let want = if s.step == t.skew.step {
            let mut v = [t.skew.rank, t.peak_rank];
            v.sort_unstable();
            format!("{}, {}", v[0], v[1])
        } else {
            t.peak_rank.to_string()
        };
        assert_eq!(row[3], want, "step {}", s.step);
    }
    assert_eq!(got[(t.skew.step - 1) as usize][2], t.skew.rank.to_string());
    let worst =
        rows("SELECT step FROM step_skew WHERE pool = 'PTA' ORDER BY skew DESC LIMIT 1").await;
    assert_eq!(worst[0][0], t.skew.step.to_string());
}

#[tokio::test]
async fn job_peak_adds_the_ranks_up_by_step() {
    let (t, _) = job().await;
    let got = rows(
        "SELECT step, bytes, ranks, max_rank, max_rank_peak, sum_rank_peaks FROM job_peak WHERE pool = 'PTA' AND alignment = 'step'",
    )
    .await;
    let peak = &t.ranks[t.peak_rank as usize];
    assert_eq!(
        got,
        vec![vec![
            t.job_peak_by_step.step.to_string(),
            t.job_peak_by_step.bytes.to_string(),
            t.ranks.len().to_string(),
            t.peak_rank.to_string(),
            peak.pta_peak_used.to_string(),
            t.ranks
                .iter()
                .map(|r| r.pta_peak_used)
                .sum::<u64>()
                .to_string(),
        ]]
    );
    // By the clock the job never needs more than every rank at its own peak at once.
    let clock = rows(
        "SELECT bytes, sum_rank_peaks FROM job_peak WHERE pool = 'PTA' AND alignment = 'clock'",
    )
    .await;
    let (c, s): (u64, u64) = (clock[0][0].parse().unwrap(), clock[0][1].parse().unwrap());
    assert!(c <= s && c >= peak.pta_peak_used, "{clock:?}");
}

#[tokio::test]
async fn rank_leaks_name_the_one_leaking_rank() {
    let (t, _) = job().await;
    let got = rows(
        "SELECT owner, ranks_with, ranks_total, some_ranks_only, ranks, max_rank FROM rank_leaks WHERE pool = 'PTA'",
    )
    .await;
    assert_eq!(
        got,
        vec![vec![
            "PTA@loss_history".to_string(),
            "1".into(),
            t.ranks.len().to_string(),
            "true".into(),
            t.leak_rank.to_string(),
            t.leak_rank.to_string(),
        ]]
    );
}
