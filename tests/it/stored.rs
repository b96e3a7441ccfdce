//! Views stored with the dataset (`-- @stored`, crates/engine/src/stored.rs): computed at
//! ingest, read by queries, equal to the view planned over the same tables, and planned again
//! when the library that stored them is not this one.

use std::path::{Path, PathBuf};

use memq_core::dataset::Manifest;
use memq_engine::Engine;

use crate::common::{self, ingest_temp};

const STORED: [&str; 4] = ["pairing", "leak_candidates", "oom_events", "oom_findings"];

fn g3_run() -> PathBuf {
    common::fixture("memscope/g3_run")
}

/// The plan of `SELECT * FROM view` as text.
async fn plan(engine: &Engine, view: &str) -> String {
    common::cells(
        &engine
            .query(&format!("EXPLAIN SELECT * FROM {view}"))
            .await
            .unwrap(),
    )
    .concat()
    .join("\n")
}

/// Every row of `view`, sorted, with the units of its columns.
async fn answer(engine: &Engine, view: &str) -> (Vec<Vec<String>>, Vec<String>) {
    let df = engine
        .dataframe(&format!("SELECT * FROM {view}"))
        .await
        .unwrap();
    let units = df
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{} {:?}", f.name(), memq_core::catalog::Unit::of(f)))
        .collect();
    let mut rows = common::cells(&df.collect().await.unwrap());
    rows.sort();
    (rows, units)
}

fn rewrite_manifest(dataset: &Path, change: impl FnOnce(&mut Manifest)) {
    let mut manifest = Manifest::read(dataset).unwrap();
    change(&mut manifest);
    std::fs::write(
        dataset.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

#[tokio::test]
async fn stored_views_are_read_and_equal_the_planned_views() {
    let ing = ingest_temp(&[g3_run()]).await.unwrap();
    let manifest = &ing.report.manifest;
    assert_eq!(
        manifest.stored, STORED,
        "stored in the order they read each other"
    );
    for view in STORED {
        let entry = manifest.tables.iter().find(|t| t.name == view).unwrap();
        assert_eq!(entry.files, [format!("{view}/0000.parquet")]);
        assert!(entry.rows > 0, "{view} has rows on the G3 run");
    }
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    let mut stored = Vec::new();
    for view in STORED {
        let p = plan(&engine, view).await;
        assert!(
            p.contains(&format!("{view}/0000.parquet")),
            "{view} is read: {p}"
        );
        assert!(!p.contains("WindowAggExec"), "{view} is not planned: {p}");
        stored.push(answer(&engine, view).await);
    }
    // One finding per trigger and rule.
    let triggers = common::int(
        &engine,
        "SELECT COUNT(*) FROM oom_events WHERE kind = 'trigger'",
    )
    .await;
    assert!(triggers > 0);
    assert_eq!(stored[3].0.len() as i64, 6 * triggers);

    // Stored by another library: the views are planned over the same tables, same answers.
    rewrite_manifest(&ing.dataset, |m| m.library = Some("another library".into()));
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    for (view, stored) in STORED.iter().zip(&stored) {
        let p = plan(&engine, view).await;
        assert!(
            !p.contains(&format!("{view}/0000.parquet")),
            "{view} is planned: {p}"
        );
        assert_eq!(&answer(&engine, view).await, stored, "{view}");
    }

    // This library's again, but a stored file is gone: that view is planned, the other read.
    let library = manifest.library.clone();
    rewrite_manifest(&ing.dataset, |m| m.library = library);
    std::fs::remove_file(ing.dataset.join("oom_events/0000.parquet")).unwrap();
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    assert!(!plan(&engine, "oom_events")
        .await
        .contains("oom_events/0000.parquet"));
    assert!(plan(&engine, "oom_findings")
        .await
        .contains("oom_findings/0000.parquet"));
    assert_eq!(answer(&engine, "oom_events").await, stored[2]);
}

#[tokio::test]
async fn a_dataset_without_their_inputs_stores_no_views() {
    // A snapshot-only dataset: the OOM views read no table with rows, so only the snapshot's
    // own stored views (its timeline's points and tiles) are stored.
    let pickle = common::real_fixture("snapshots/real/cuda_small_cpp_frames.pickle");
    let ing = ingest_temp(&[pickle]).await.unwrap();
    let mut stored = ing.report.manifest.stored.clone();
    stored.sort();
    assert_eq!(stored, ["snap_timeline_points", "snap_timeline_tiles"]);
    assert!(!ing.dataset.join("oom_findings").exists());
    assert!(!ing.dataset.join("oom_events").exists());
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    assert_eq!(
        common::int(&engine, "SELECT COUNT(*) FROM oom_findings").await,
        0
    );
}

#[tokio::test]
async fn the_facts_of_the_argument_checks_are_read_from_the_manifest() {
    let ing = ingest_temp(&[g3_run()]).await.unwrap();
    let facts = &ing.report.manifest.facts;
    // Every fact query answers on a memscope dataset (the snapshot ones with no rows).
    assert_eq!(facts.len(), 7, "{facts:?}");
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    // What ingest kept is what the queries answer over the finished dataset.
    assert_eq!(
        &memq_engine::facts::Facts::new(&memq::catalog(), &Default::default())
            .compute(&engine.ctx)
            .await,
        facts
    );
    let pools = common::cells(
        &engine
            .query("SELECT DISTINCT pool FROM curve ORDER BY 1")
            .await
            .unwrap(),
    )
    .concat();
    let trend = "SELECT COUNT(*) FROM trend(20, 'PTA')";
    assert!(pools.iter().any(|p| p == "PTA"), "{pools:?}");
    assert!(common::int(&engine, trend).await > 0);

    // The check reads the manifest's pools, not the tables: one made up there is the only one.
    let pools_fact = facts
        .keys()
        .find(|k| k.contains("AS pool"))
        .unwrap()
        .clone();
    rewrite_manifest(&ing.dataset, |m| {
        m.facts.insert(
            pools_fact,
            vec![vec![memq_core::dataset::FactValue::Text("XYZ".into())]],
        );
    });
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    let e = engine.query(trend).await.unwrap_err().to_string();
    assert!(e.contains("unknown pool 'PTA'") && e.contains("XYZ"), "{e}");

    // Written by another library: the facts are read from the tables again.
    rewrite_manifest(&ing.dataset, |m| m.library = Some("another library".into()));
    let engine = Engine::open(&ing.dataset, &memq::catalog()).await.unwrap();
    assert!(common::int(&engine, trend).await > 0);
}
