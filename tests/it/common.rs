//! Helpers shared by the integration tests: ingest into a temporary dataset, run SQL, read
//! results as text cells.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int32Type, Int64Type, UInt32Type, UInt64Type,
};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use memq_engine::Engine;
use memq_ingest::{IngestOptions, IngestReport};
use serde_json::Value;
use tempfile::TempDir;

/// `fixtures/real/<rel>`: the real sample inputs kept in the repository (their origins and
/// licenses: fixtures/real/README.md).
pub fn real_fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/real")
        .join(rel)
}

/// The `memq` binary under test.
/// The memq binary, as a user's shell runs it (agent detection off: tests that want agent mode
/// set it themselves).
pub fn memq() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_memq"));
    for v in memq::agent::AGENT_ENV {
        c.env_remove(v);
    }
    c
}

/// Runs `cmd`, which must succeed; returns (stdout, stderr).
pub fn run_ok(cmd: &mut std::process::Command) -> (String, String) {
    let out = cmd.output().expect("memq runs");
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {so}\nstderr: {se}",
        out.status.code()
    );
    (so, se)
}

/// Runs `cmd`, which must fail; returns (exit code, stderr).
pub fn run_err(cmd: &mut std::process::Command) -> (i32, String) {
    let out = cmd.output().expect("memq runs");
    assert!(
        !out.status.success(),
        "expected a failure; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The repository's root folder.
pub fn fixture_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `fixtures/<rel>` of this project.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// An ingested dataset living in a temporary folder.
pub struct Ingested {
    pub dir: TempDir,
    pub dataset: PathBuf,
    pub report: IngestReport,
}

pub async fn ingest_temp(inputs: &[PathBuf]) -> memq::error::Result<Ingested> {
    let dir = TempDir::new().expect("temp dir");
    let dataset = dir.path().join("t.memq");
    let opts = IngestOptions {
        output: dataset.clone(),
        force: false,
        append: false,
        strict: false,
        progress: false,
    };
    let report = memq_ingest::ingest(inputs, &opts, &memq::catalog()).await?;
    Ok(Ingested {
        dir,
        dataset,
        report,
    })
}

/// The dataset made from `inputs`, ingested once per test run and shared by every test that
/// asks for the same inputs (read-only: tests must not change it).
pub async fn shared_dataset(inputs: &[PathBuf]) -> PathBuf {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Cell = Arc<tokio::sync::OnceCell<PathBuf>>;
    static CELLS: OnceLock<Mutex<BTreeMap<Vec<PathBuf>, Cell>>> = OnceLock::new();
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        // One folder per test process; those of processes that have ended are removed.
        let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shared-datasets");
        for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        // A folder named by our pid may be left by an earlier process that had the same pid
        // (pids wrap): its datasets are not ours.
        let root = parent.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("shared dataset folder");
        root
    });
    let (cell, n) = {
        let mut cells = CELLS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let n = cells.len();
        (cells.entry(inputs.to_vec()).or_default().clone(), n)
    };
    cell.get_or_init(|| async {
        let dataset = root.join(format!("d{n}.memq"));
        let opts = IngestOptions {
            output: dataset.clone(),
            force: true,
            append: false,
            strict: false,
            progress: false,
        };
        memq_ingest::ingest(inputs, &opts, &memq::catalog())
            .await
            .unwrap_or_else(|e| panic!("ingest {inputs:?}: {e}"));
        dataset
    })
    .await
    .clone()
}

/// An engine on the shared dataset of `inputs` (see [`shared_dataset`]).
pub async fn shared_engine(inputs: &[PathBuf]) -> Engine {
    let dataset = shared_dataset(inputs).await;
    Engine::open(&dataset, &memq::catalog())
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", dataset.display()))
}

/// Ingests and opens; panics on error (for tests of good inputs).
pub async fn open(inputs: &[PathBuf]) -> (Ingested, Engine) {
    let ing = ingest_temp(inputs).await.expect("ingest");
    let engine = Engine::open(&ing.dataset, &memq::catalog())
        .await
        .expect("open");
    (ing, engine)
}

/// Every row of a result as text cells (NULL as "NULL").
pub fn cells(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            rows.push(fmts.iter().map(|f| f.value(r).to_string()).collect());
        }
    }
    rows
}

pub async fn rows(engine: &Engine, sql: &str) -> Vec<Vec<String>> {
    cells(
        &engine
            .query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}")),
    )
}

/// A single integer result.
/// The error text of a query that must fail; empty when it succeeds.
pub async fn query_error(engine: &Engine, sql: &str) -> String {
    engine
        .query(sql)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

pub async fn int(engine: &Engine, sql: &str) -> i64 {
    let r = rows(engine, sql).await;
    r[0][0]
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: not an integer: {:?}", r))
}

/// The reference figures recorded in tests/golden/expected.json.
pub fn golden() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("golden file")).expect("golden json")
}

/// One result row: column name → JSON value (integers stay exact, lists and structs nest).
pub type Row = BTreeMap<String, Value>;

pub fn json_cell(a: &dyn Array, i: usize) -> Value {
    if a.is_null(i) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Int64 => Value::from(a.as_primitive::<Int64Type>().value(i)),
        DataType::Int32 => Value::from(a.as_primitive::<Int32Type>().value(i)),
        DataType::UInt64 => Value::from(a.as_primitive::<UInt64Type>().value(i)),
        DataType::UInt32 => Value::from(a.as_primitive::<UInt32Type>().value(i)),
        DataType::Float64 => Value::from(a.as_primitive::<Float64Type>().value(i)),
        DataType::Boolean => Value::from(a.as_boolean().value(i)),
        DataType::Utf8 => Value::from(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Value::from(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Value::from(a.as_string_view().value(i)),
        DataType::List(_) => {
            let items = a.as_list::<i32>().value(i);
            Value::Array(
                (0..items.len())
                    .map(|k| json_cell(items.as_ref(), k))
                    .collect(),
            )
        }
        DataType::Struct(fields) => {
            let st = a.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(st.columns())
                    .map(|(f, c)| (f.name().clone(), json_cell(c.as_ref(), i)))
                    .collect(),
            )
        }
        DataType::Dictionary(_, _) => {
            let s = datafusion::arrow::compute::cast(&a.slice(i, 1), &DataType::Utf8).unwrap();
            Value::from(s.as_string::<i32>().value(0))
        }
        other => panic!("test helper: unsupported type {other}"),
    }
}

/// Every row of a query as name → JSON value.
pub async fn query_json(engine: &Engine, sql: &str) -> Vec<Row> {
    let batches = engine
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}\n{e}"));
    let mut out = Vec::new();
    for b in &batches {
        for i in 0..b.num_rows() {
            let mut row = Row::new();
            for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                row.insert(f.name().clone(), json_cell(c.as_ref(), i));
            }
            out.push(row);
        }
    }
    out
}

/// `memq report INPUT -o <tmp>/r.json`, parsed.
pub fn report_json(inputs: &[std::path::PathBuf], extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.json");
    let o = memq()
        .arg("report")
        .args(inputs)
        .arg("-o")
        .arg(&out)
        .args(extra)
        .output()
        .expect("run memq");
    assert!(
        o.status.success(),
        "memq report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&out).expect("report written");
    serde_json::from_str(&text).expect("valid JSON")
}
