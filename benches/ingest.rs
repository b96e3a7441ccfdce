//! Ingest benchmark: generates an msMemScope output folder of about N rows with memq-gen, then
//! times `ingest` on it and reports rows/s and MiB/s. Peak RSS is best read from outside:
//!
//!   cargo bench --bench ingest -- 1000000
//!   /usr/bin/time -v target/release/memq ingest DIR -o X.memq      (Maximum resident set size)

use std::time::Instant;

use memq_gen::{generate, GenConfig};
use memq_ingest::{ingest, IngestOptions};

fn main() {
    let rows: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::TempDir::new().expect("temp dir");
    let input = dir.path().join("dump");
    let mut cfg = GenConfig::default();
    cfg.scale_to_events(rows, false);
    let t = Instant::now();
    let truth = generate(&cfg, &input).expect("generate");
    println!(
        "generated {} rows in {:.2}s",
        truth.rows_written,
        t.elapsed().as_secs_f64()
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let opts = IngestOptions {
        output: dir.path().join("bench.memq"),
        force: true,
        append: false,
        strict: false,
        progress: false,
    };
    let report = runtime
        .block_on(ingest(&[input], &opts, &memq::catalog()))
        .expect("ingest");
    let secs = report.elapsed.as_secs_f64();
    println!("{}", report.summary());
    println!(
        "ingest: {:.0} rows/s, {:.1} MiB/s",
        truth.rows_written as f64 / secs,
        report.input_bytes as f64 / (1024.0 * 1024.0) / secs
    );
}
