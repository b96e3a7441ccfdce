//! Compares the snap_* tables of two datasets (or of folders written by
//! examples/snapshot_ingest.rs) row for row, in stored order (files in path order, `rank=R`
//! folders included), and the schemas:
//!
//!     cargo run -p memq-snapshot --example compare_tables -- DATASET_A DATASET_B
//!
//! Exit 1 on any difference.

use std::path::Path;

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The Parquet files under `dir` (a table folder, with its `rank=R` folders), in path order.
fn parquet_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            parquet_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            files.push(path);
        }
    }
}

fn table(dir: &Path, name: &str) -> Option<RecordBatch> {
    let mut files = Vec::new();
    parquet_files(&dir.join(name), &mut files);
    files.sort();
    let schema = memq_snapshot::schema::tables()
        .into_iter()
        .find(|t| t.name == name)?
        .schema();
    let mut batches = Vec::new();
    for f in files {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).ok()?)
            .ok()?
            .build()
            .ok()?;
        for b in reader {
            let b = b.ok()?;
            batches.push(RecordBatch::try_new(schema.clone(), b.columns().to_vec()).ok()?);
        }
    }
    concat_batches(&schema, &batches).ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (a, b) = (Path::new(&args[1]), Path::new(&args[2]));
    let mut same = true;
    for def in memq_snapshot::schema::tables() {
        let (ta, tb) = (table(a, def.name), table(b, def.name));
        let rows = |t: &Option<RecordBatch>| t.as_ref().map_or(0, |t| t.num_rows());
        let equal = match (&ta, &tb) {
            (Some(x), Some(y)) => x == y,
            (None, None) => true,
            (Some(x), None) | (None, Some(x)) => x.num_rows() == 0,
        };
        let mut note = String::new();
        if !equal {
            same = false;
            if let (Some(x), Some(y)) = (&ta, &tb) {
                for (i, f) in x.schema().fields().iter().enumerate() {
                    if x.num_rows() == y.num_rows() && x.column(i) != y.column(i) {
                        note.push_str(&format!(" {}", f.name()));
                    }
                }
            }
        }
        println!(
            "{:14} {:>9} {:>9} {}{}",
            def.name,
            rows(&ta),
            rows(&tb),
            if equal { "same" } else { "DIFFERENT" },
            note
        );
    }
    std::process::exit(if same { 0 } else { 1 });
}
