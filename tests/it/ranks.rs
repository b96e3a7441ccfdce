//! Multi-rank datasets (docs/scale-out.md): every source placed in the job by its path (rank, node,
//! device, pid in `sources`), every other table laid out by rank, `--append` of more ranks.

use std::path::{Path, PathBuf};

use crate::common::{self, memq, run_err, run_ok};

/// Copies the folder `from` to `to` (files and folders only).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A job of two nodes, each one process driving two NPUs (the committed G3 run twice): the
/// same pid on both machines, as containers give.
fn two_node_job(root: &Path) -> PathBuf {
    let job = root.join("job");
    for node in ["node0", "node1"] {
        copy_tree(
            &common::fixture("memscope/g3_run/msmemscope_2579302_20251205020000_ascend"),
            &job.join(node)
                .join("memscopeDumpResults/msmemscope_2579302_20251205020000_ascend"),
        );
    }
    job
}

fn sql(dataset: &Path, q: &str) -> String {
    let (out, _) = run_ok(
        memq()
            .args(["sql", "--format", "csv", "-e", q])
            .arg(dataset),
    );
    out
}

#[test]
fn a_job_is_placed_by_path_and_laid_out_by_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let job = two_node_job(tmp.path());
    let ds = tmp.path().join("job.memq");
    run_ok(memq().arg("ingest").arg(&job).arg("-o").arg(&ds));
    assert_eq!(
        sql(
            &ds,
            "SELECT rank, node, device, pid, COUNT(*) AS files FROM sources GROUP BY rank, node, device, pid ORDER BY rank"
        ),
        "rank,node,device,pid,files\n0,node0,0,2579302,7\n1,node1,0,2579302,7\n"
    );
    // Every table but sources is laid out by rank, and each rank holds the same rows.
    for table in ["events", "blocks", "curve", "steps"] {
        for rank in 0..2 {
            let dir = ds.join(table).join(format!("rank={rank}"));
            assert!(
                std::fs::read_dir(&dir).unwrap().count() > 0,
                "{} has files",
                dir.display()
            );
        }
    }
    assert_eq!(
        sql(&ds, "SELECT rank, COUNT(*) AS n FROM events GROUP BY rank ORDER BY rank"),
        sql(
            &ds,
            "SELECT s.rank, COUNT(*) AS n FROM events e JOIN sources s ON s.source = e.source GROUP BY s.rank ORDER BY s.rank"
        ),
        "the rank column agrees with sources"
    );
    let per_rank = sql(
        &ds,
        "SELECT rank, COUNT(*) AS n FROM blocks GROUP BY rank ORDER BY rank",
    );
    let counts: Vec<&str> = per_rank
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    assert_eq!(counts.len(), 2);
    assert_eq!(counts[0], counts[1], "two copies of one run: {per_rank}");
    // A filter on rank reads that rank's files only.
    let (plan, _) = run_ok(
        memq()
            .args([
                "sql",
                "--raw",
                "-e",
                "EXPLAIN SELECT MAX(attr) FROM events WHERE rank = 1",
            ])
            .arg(&ds),
    );
    assert!(plan.contains("rank=1/"), "{plan}");
    assert!(
        !plan.contains("rank=0/"),
        "rank 0's files are pruned: {plan}"
    );
    // The pids are equal, the ranks are not: per-rank analyses keep them apart.
    assert_eq!(sql(&ds, "SELECT COUNT(*) AS n FROM job_ranks"), "n\n2\n");
}

#[test]
fn append_adds_ranks_without_rewriting_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let job = two_node_job(tmp.path());
    let whole = tmp.path().join("whole.memq");
    run_ok(memq().arg("ingest").arg(&job).arg("-o").arg(&whole));
    let ds = tmp.path().join("ds.memq");
    run_ok(
        memq()
            .arg("ingest")
            .arg(job.join("node0"))
            .arg("-o")
            .arg(&ds),
    );
    let file = std::fs::read_dir(ds.join("events/rank=0"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let before = inode(&file);
    let (_, err) = run_ok(
        memq()
            .arg("ingest")
            .arg("--append")
            .arg(job.join("node1"))
            .arg("-o")
            .arg(&ds),
    );
    assert!(err.contains("14 sources"), "{err}");
    assert_eq!(
        inode(&file),
        before,
        "rank 0's files are the same files (hard links)"
    );
    let q = "SELECT rank, node, COUNT(*) AS files, SUM(rows) AS rows FROM sources GROUP BY rank, node ORDER BY rank";
    assert_eq!(sql(&ds, q), sql(&whole, q));
    for q in [
        "SELECT rank, COUNT(*) AS n, SUM(size) AS b FROM blocks GROUP BY rank ORDER BY rank",
        "SELECT rank, pool, peak_bytes FROM rank_peaks ORDER BY rank, pool",
        // the stored views are computed again over every source, not kept from the first ingest
        // (sources are named from the inputs' common folder: `job/` only in the whole ingest)
        "SELECT regexp_replace(source, '^job/', '') AS s, kind, COUNT(*) AS n FROM oom_events GROUP BY s, kind ORDER BY s, kind",
        "SELECT regexp_replace(source, '^job/', '') AS s, trigger_id, priority, verdict FROM oom_findings ORDER BY s, trigger_id, priority",
    ] {
        assert_eq!(sql(&ds, q), sql(&whole, q), "{q}");
    }
    let findings = |dataset: &Path| {
        let m = memq_core::dataset::Manifest::read(dataset).unwrap();
        assert_eq!(
            m.stored,
            ["pairing", "leak_candidates", "oom_events", "oom_findings"]
        );
        m.tables
            .into_iter()
            .find(|t| t.name == "oom_findings")
            .unwrap()
            .rows
    };
    assert!(findings(&ds) > 0);
    assert_eq!(findings(&ds), findings(&whole));
    // The facts the argument checks read (time range, pools, steps) are those of every source.
    let facts = |dataset: &Path| {
        let m = memq_core::dataset::Manifest::read(dataset).unwrap();
        let of_events = |q: &String| q.contains("FROM event_counts") || q.contains("FROM steps");
        m.facts
            .into_iter()
            .filter(|(q, _)| of_events(q))
            .collect::<Vec<_>>()
    };
    assert_eq!(facts(&ds).len(), 3);
    assert_eq!(facts(&ds), facts(&whole));
    // Appending the same folders again adds nothing; a changed source is refused.
    run_ok(
        memq()
            .arg("ingest")
            .arg("--append")
            .arg(&job)
            .arg("-o")
            .arg(&ds),
    );
    assert_eq!(sql(&ds, "SELECT COUNT(*) AS n FROM sources"), "n\n14\n");
    let csv =
        std::fs::read_dir(job.join(
            "node1/memscopeDumpResults/msmemscope_2579302_20251205020000_ascend/device_0/dump",
        ))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "csv"))
        .unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&csv)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"\n"))
        .unwrap();
    let (code, err) = run_err(
        memq()
            .arg("ingest")
            .arg("--append")
            .arg(&job)
            .arg("-o")
            .arg(&ds),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("changed since it was ingested"), "{err}");
    assert_eq!(
        sql(&ds, "SELECT COUNT(*) AS n FROM sources"),
        "n\n14\n",
        "the dataset is unchanged"
    );
}

#[test]
fn ranks_written_in_the_path_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    for r in [3, 12] {
        copy_tree(
            &common::fixture("memscope/g3_run/msmemscope_2579302_20251205020000_ascend/device_0"),
            &run.join(format!("rank_{r}")).join("device_0"),
        );
    }
    let ds = tmp.path().join("r.memq");
    run_ok(memq().arg("ingest").arg(&run).arg("-o").arg(&ds));
    assert_eq!(
        sql(
            &ds,
            "SELECT DISTINCT rank, node, device FROM sources ORDER BY rank"
        ),
        "rank,node,device\n3,run,0\n12,run,0\n"
    );
    assert!(ds.join("events/rank=12").is_dir());
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().ino()
}
