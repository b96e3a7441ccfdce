//! Times the snapshot format's ingest of one pickle, without the CLI around it (the benchmark
//! benches/snapshot_vs_reference.sh uses the `memq` binary; this isolates the format's share):
//!
//!     cargo run --release -p memq-snapshot --example snapshot_ingest -- FILE.pickle OUT_DIR
//!
//! Prints seconds and MB/s; the table files are copied to OUT_DIR/<table>/ (for
//! examples/compare_tables.rs).

use std::path::PathBuf;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use memq_core::dataset::DatasetBuilder;
use memq_core::format::{Format, Source};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (file, out) = (PathBuf::from(&args[1]), PathBuf::from(&args[2]));
    let format = memq_snapshot::Snapshot;
    let t0 = Instant::now();
    let builder = DatasetBuilder::create(&out.with_extension("build"), true, &format.tables())
        .expect("dataset");
    let sources = [Source {
        index: 0,
        path: file.clone(),
        name: file.file_name().unwrap().to_string_lossy().into_owned(),
        kind: memq_snapshot::SNAPSHOT,
    }];
    let mut future = format.ingest(&sources, &builder, Arc::new(|_| {}));
    // The future does its work synchronously: one poll completes it.
    let Poll::Ready(reports) = future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    else {
        panic!("the snapshot ingest future is not synchronous");
    };
    let reports = reports.unwrap_or_else(|e| panic!("{e}"));
    let seconds = t0.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&file).unwrap().len() as f64;
    println!(
        "{}: {} rows in {seconds:.3} s ({:.1} MB/s)",
        file.display(),
        reports.iter().map(|r| r.rows).sum::<u64>(),
        bytes / 1e6 / seconds
    );
    let _ = std::fs::remove_dir_all(&out);
    for t in builder.table_entries() {
        println!("  {} {} rows", t.name, t.rows);
        let from = builder.table_dir(&t.name).unwrap();
        let to = out.join(&t.name);
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&from).unwrap().flatten() {
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
}
