//! One dataset holding several snapshot pickles and msMemScope dumps at once.

use crate::common::*;

#[tokio::test]
async fn snapshots_and_dumps_share_one_dataset() {
    let inputs = [
        real_fixture("snapshots/real/cuda_small_cpp_frames.pickle"),
        real_fixture("snapshots/real/cuda_transformer_forward.pickle"),
        real_fixture("memscope/real/v2_compare_baseline.csv"),
    ];
    let (ing, engine) = open(&inputs).await;
    let kinds = rows(
        &engine,
        "SELECT kind, count(*) FROM sources GROUP BY kind ORDER BY kind",
    )
    .await;
    assert_eq!(
        kinds,
        vec![vec!["memscope_csv", "1"], vec!["snapshot", "2"]]
    );
    // Each snapshot is named by its source; trace and segment counts as docs/formats/snapshot.md §0 lists.
    let r = rows(
        &engine,
        "SELECT snapshot, count(*) FROM snap_traces GROUP BY snapshot ORDER BY snapshot",
    )
    .await;
    assert_eq!(
        r,
        vec![
            vec!["cuda_small_cpp_frames.pickle", "5803"],
            vec!["cuda_transformer_forward.pickle", "8227"]
        ]
    );
    let r = rows(
        &engine,
        "SELECT snapshot, count(*) FROM snap_segments GROUP BY snapshot ORDER BY snapshot",
    )
    .await;
    assert_eq!(
        r,
        vec![
            vec!["cuda_small_cpp_frames.pickle", "10"],
            vec!["cuda_transformer_forward.pickle", "405"]
        ]
    );
    assert_eq!(int(&engine, "SELECT count(*) FROM events").await, 121);
    let m = &ing.report.manifest;
    assert_eq!(m.sources.iter().filter(|s| s.kind == "snapshot").count(), 2);
    assert!(m
        .tables
        .iter()
        .any(|t| t.name == "snap_frames" && t.rows > 0));
}

#[tokio::test]
async fn a_git_error_saved_as_pickle_is_not_a_pickle() {
    let dir = tempfile::TempDir::new().unwrap();
    let p = dir.path().join("snapshot.pickle");
    std::fs::write(
        &p,
        "version https://git-lfs.github.com/spec/v1\noid sha256:0123456789abcdef\n",
    )
    .unwrap();
    let e = ingest_temp(&[p]).await.err().expect("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("snapshot.pickle") && msg.contains("not a pickle"),
        "{msg}"
    );
    assert_eq!(e.exit_code(), 2);
}
