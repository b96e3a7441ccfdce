//! The snapshot analyses read what ingest derives from the trace (crates/snapshot/src/derive.rs:
//! the running levels on snap_traces, snap_trace_levels, snap_lifetimes, snap_oom_allocs)
//! instead of windowing over every trace entry. Each analysis must answer exactly what it did
//! when it windowed: tests/oracle/sql/snapshot/*.sql are the analyses that changed, as they were
//! (the others are their own oracles), registered here as `oracle_NAME` views (each reading the
//! other oracle views), and every analysis's rows
//! are compared with its oracle's, as multisets, on every snapshot input the tests have: the real
//! pickles, the fixtures of fixtures/snapshots, the synthetic snapshots of snapshot_library.rs
//! (OOMs, pending-free blocks, expandable segments, segment frees, several devices, allocations
//! before the window).

use std::path::{Path, PathBuf};

use memq_engine::Engine;

use crate::common::{fixture_root, rows, shared_engine};

/// The analyses of crates/snapshot/sql that tests/oracle/sql/snapshot keeps as they were.
const ANALYSES: &[&str] = &[
    "snap_allocations",
    "snap_block_states",
    "snap_compare",
    "snap_expansions",
    "snap_fragmentation",
    "snap_long_lived",
    "snap_oom",
    "snap_overview",
    "snap_peak",
    "snap_peak_blocks",
    "snap_peak_split",
    "snap_segment_types",
    "snap_stack_attribution",
    "snap_stacks",
    "snap_stage_memory",
    "snap_timeline",
    "snap_top_blocks",
    "state_at",
];

/// The oracle's text of `name` with the other analyses it reads renamed to their oracles and
/// its parameters bound to `params` (name, SQL literal).
fn oracle_sql(name: &str, params: &[(&str, &str)]) -> String {
    // An analysis this derivation left as it was is its own oracle (reading the oracles of the
    // analyses it reads).
    let mut file = fixture_root().join(format!("tests/oracle/sql/snapshot/{name}.sql"));
    if !file.exists() {
        file = fixture_root().join(format!("crates/snapshot/sql/{name}.sql"));
    }
    let mut sql = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    sql = rename_analyses(&sql);
    for (param, value) in params {
        sql = sql.replace(&format!("${param}"), value);
    }
    sql
}

/// `sql` with every analysis name of [`ANALYSES`] (a whole word) prefixed by `oracle_`.
fn rename_analyses(sql: &str) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        let start = out.chars().last().is_none_or(|p| !word(p));
        let name = ANALYSES
            .iter()
            .filter(|n| rest.starts_with(**n))
            .max_by_key(|n| n.len());
        match name {
            Some(n) if start && !rest[n.len()..].starts_with(word) => {
                out.push_str("oracle_");
                out.push_str(n);
                rest = &rest[n.len()..];
            }
            _ => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// The oracle views, each once the views it reads are (a view must be planned after them).
async fn register_oracle(engine: &Engine) {
    // table functions are bound per call below
    let mut todo: Vec<&str> = ANALYSES
        .iter()
        .copied()
        .filter(|n| !["state_at", "snap_compare"].contains(n))
        .collect();
    while !todo.is_empty() {
        let mut left = Vec::new();
        let mut error = String::new();
        for name in &todo {
            let sql = format!("CREATE VIEW oracle_{name} AS {}", oracle_sql(name, &[]));
            if let Err(e) = engine.query(&sql).await {
                error = format!("oracle view {name}: {e}");
                left.push(*name);
            }
        }
        assert!(left.len() < todo.len(), "{error}");
        todo = left;
    }
}

/// Rows of `sql` as sorted text.
async fn sorted(engine: &Engine, sql: &str) -> Vec<Vec<String>> {
    let mut r = rows(engine, sql).await;
    r.sort();
    r
}

async fn same(engine: &Engine, what: &str, ours: &str, oracle: &str) -> usize {
    let (a, b) = (sorted(engine, ours).await, sorted(engine, oracle).await);
    if a != b {
        let only_a: Vec<_> = a.iter().filter(|r| !b.contains(r)).take(5).collect();
        let only_b: Vec<_> = b.iter().filter(|r| !a.contains(r)).take(5).collect();
        panic!(
            "{what}: {} rows vs the oracle's {}\nonly ours: {only_a:?}\nonly the oracle's: {only_b:?}",
            a.len(),
            b.len()
        );
    }
    a.len()
}

/// Every analysis against its oracle on the dataset of `inputs`; returns the rows compared.
async fn check(inputs: &[PathBuf]) -> usize {
    let engine = shared_engine(inputs).await;
    register_oracle(&engine).await;
    let mut compared = 0;
    for name in ANALYSES {
        if ["state_at", "snap_compare"].contains(name) {
            continue;
        }
        let what = format!("{name} on {inputs:?}");
        compared += same(
            &engine,
            &what,
            &format!("SELECT * FROM {name}"),
            &format!("SELECT * FROM oracle_{name}"),
        )
        .await;
    }
    // state_at before the first entry, at a few entries and after the last, for every
    // snapshot and device, and for one of them alone
    let snapshots = rows(
        &engine,
        "SELECT DISTINCT snapshot FROM snap_info ORDER BY 1",
    )
    .await;
    let last = rows(&engine, "SELECT COALESCE(MAX(seq), 0) FROM snap_traces").await[0][0]
        .parse::<i64>()
        .unwrap();
    for seq in [-1, 3, last / 2, last] {
        let null = [
            ("seq", seq.to_string()),
            ("snapshot", "CAST(NULL AS VARCHAR)".to_string()),
            ("device", "CAST(NULL AS BIGINT)".to_string()),
        ];
        let params: Vec<(&str, &str)> = null.iter().map(|(p, v)| (*p, v.as_str())).collect();
        compared += same(
            &engine,
            &format!("state_at({seq}) on {inputs:?}"),
            &format!("SELECT * FROM state_at({seq})"),
            &oracle_sql("state_at", &params),
        )
        .await;
    }
    // snap_compare of each snapshot with the next one (and with itself when it is alone)
    for (k, a) in snapshots.iter().enumerate() {
        let b = snapshots.get(k + 1).unwrap_or(a);
        let (a, b) = (format!("'{}'", a[0]), format!("'{}'", b[0]));
        compared += same(
            &engine,
            &format!("snap_compare({a}, {b}) on {inputs:?}"),
            &format!("SELECT * FROM snap_compare({a}, {b})"),
            &oracle_sql("snap_compare", &[("a", &a), ("b", &b)]),
        )
        .await;
    }
    compared
}

fn pickles(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "pickle" || e == "pkl")
                && !p.ends_with("not_a_pickle.pickle")
        })
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyses_answer_as_their_windowed_sql_did() {
    let root = fixture_root();
    let real = pickles(&root.join("fixtures/real/snapshots/real"));
    assert!(real.len() >= 6, "{real:?}");
    assert!(check(&real).await > 10_000);
    let fixtures = pickles(&root.join("fixtures/snapshots"));
    assert!(fixtures.len() >= 5, "{fixtures:?}");
    check(&fixtures).await;
    let dir = tempfile::TempDir::new().unwrap();
    let synthetic = crate::snapshot_library::write_synthetic(dir.path());
    check(&synthetic).await;
}
