//! Memory per annotation stage: `stage_memory` (MSTX ranges) and `snap_stage_memory`
//! (snapshot START/END annotations).

use std::path::{Path, PathBuf};

use crate::common::{open, real_fixture, rows, shared_engine};

const T: i64 = 1_764_900_000_000_000_000;

/// A dump written by hand whose stages the test states: two nested ranges of the same name
/// closed by name, a `step start` range closed by the tool's `Range end from id 3`, and an open
/// range at the end. PTA's `used` counter is written on every memory row.
fn staged_dump(dir: &Path) -> PathBuf {
    let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
    let mut out = String::from(header);
    let mut id = 0;
    let mut mem = |out: &mut String, event: &str, t: i64, ptr: u64, size: i64, used: i64| {
        id += 1;
        out.push_str(&format!(
            "{id},{event},PTA,N/A,{},7,7,0,0x{ptr:x},\"{{addr:0x{ptr:x},size:{size},total:1073741824,used:{used}}}\",,\n",
            T + t
        ));
    };
    let mut mstx_id = 1000;
    let mut mstx = |out: &mut String, ty: &str, name: &str, t: i64| {
        mstx_id += 1;
        out.push_str(&format!(
            "{mstx_id},MSTX,{ty},\"{name}\",{},7,7,0,N/A,,,\n",
            T + t
        ));
    };
    mem(&mut out, "MALLOC", 5, 0x100, 50, 50);
    mstx(&mut out, "Range_start", "fwd", 10); // id 1
    mem(&mut out, "MALLOC", 20, 0x200, 50, 100);
    mstx(&mut out, "Range_start", "fwd", 30); // id 2, inside id 1
    mem(&mut out, "MALLOC", 40, 0x300, 200, 300);
    mem(&mut out, "FREE", 50, 0x300, 200, 100);
    mem(&mut out, "MALLOC", 55, 0x400, 50, 150);
    mstx(&mut out, "Range_end", "fwd", 60); // closes id 2
    mem(&mut out, "MALLOC", 70, 0x500, 50, 200);
    mstx(&mut out, "Range_end", "fwd", 80); // closes id 1
    mstx(&mut out, "Range_start", "step start", 90); // id 3
    mem(&mut out, "FREE", 100, 0x500, 50, 150);
    mem(&mut out, "FREE", 105, 0x400, 50, 120);
    mstx(&mut out, "Range_end", "Range end from id 3", 110);
    mstx(&mut out, "Range_start", "tail", 120); // id 4, never closed
    mem(&mut out, "MALLOC", 130, 0x600, 280, 400);
    mem(&mut out, "FREE", 140, 0x600, 280, 120);
    let path = dir.join("memscope_dump_stages.csv");
    std::fs::write(&path, out).unwrap();
    path
}

#[tokio::test]
async fn stage_memory_pairs_ranges_by_name_and_by_id_as_they_nest() {
    let tmp = tempfile::tempdir().unwrap();
    let (_ds, engine) = open(&[staged_dump(tmp.path())]).await;
    let got = rows(
        &engine,
        &format!(
            "SELECT stage, range_id, depth, start_ts - {T}, end_ts - {T}, ended_by, points, \
             start_used, peak_used, peak_ts - {T}, end_used, growth, peak_rise \
             FROM stage_memory WHERE pool = 'PTA' ORDER BY range_id"
        ),
    )
    .await;
    let want: Vec<Vec<&str>> = vec![
        // outer fwd: 50 at the start, 300 inside the inner range, 200 at its end
        vec![
            "fwd", "1", "0", "10", "80", "name", "5", "50", "300", "40", "200", "150", "250",
        ],
        // inner fwd, closed by the first `Range_end "fwd"`
        vec![
            "fwd", "2", "1", "30", "60", "name", "3", "100", "300", "40", "150", "50", "200",
        ],
        // the tool's id pairing; the level at the start is the peak
        vec![
            "step start",
            "3",
            "0",
            "90",
            "110",
            "id",
            "2",
            "200",
            "200",
            "90",
            "120",
            "-80",
            "0",
        ],
        // open: runs to the end of the data, no end level
        vec![
            "tail", "4", "0", "120", "NULL", "NULL", "2", "120", "400", "130", "NULL", "NULL",
            "280",
        ],
    ];
    assert_eq!(got, want);
}

/// The real snapshot with 1 794 dynamo_timed annotations: every stage's levels equal a plain
/// scan of snap_timeline done here.
#[tokio::test]
async fn snap_stage_memory_agrees_with_a_scan_of_the_timeline_on_a_real_snapshot() {
    let file = "cuda_transformer_forward.pickle";
    let engine = shared_engine(&[real_fixture(&format!("snapshots/real/{file}"))]).await;
    let timeline: Vec<(i64, i64, i64)> = rows(
        &engine,
        &format!(
            "SELECT time_us, active_bytes, active_bytes - active_delta FROM snap_timeline \
             WHERE snapshot = '{file}' AND device = 0 AND time_us IS NOT NULL ORDER BY time_us, seq"
        ),
    )
    .await
    .iter()
    .map(|r| {
        (
            r[0].parse().unwrap(),
            r[1].parse().unwrap(),
            r[2].parse().unwrap(),
        )
    })
    .collect();
    assert!(timeline.len() > 1000, "{} entries", timeline.len());
    let stages = rows(
        &engine,
        &format!(
            "SELECT stage, start_us, end_us, start_active, peak_active, end_active, entries, depth \
             FROM snap_stage_memory WHERE snapshot = '{file}' ORDER BY stage_k"
        ),
    )
    .await;
    assert_eq!(stages.len(), 897, "one stage per START");
    assert!(
        stages.iter().all(|s| s[2] != "NULL"),
        "every START is closed"
    );
    assert!(stages.iter().any(|s| s[7] != "0"), "some stages nest");
    let level_before = |t: i64| {
        timeline
            .iter()
            .take_while(|e| e.0 < t)
            .last()
            .map(|e| e.1)
            .unwrap_or(timeline[0].2)
    };
    let mut rising = 0;
    for s in &stages {
        let (start, end): (i64, i64) = (s[1].parse().unwrap(), s[2].parse().unwrap());
        let inside: Vec<_> = timeline
            .iter()
            .filter(|e| e.0 >= start && e.0 <= end)
            .collect();
        let start_active = level_before(start);
        let peak = inside
            .iter()
            .map(|e| e.1)
            .max()
            .unwrap_or(start_active)
            .max(start_active);
        let end_active = inside.last().map(|e| e.1).unwrap_or(start_active);
        let want = [
            start_active.to_string(),
            peak.to_string(),
            end_active.to_string(),
            inside.len().to_string(),
        ];
        assert_eq!(&s[3..7], &want[..], "stage {} at {start}", s[0]);
        rising += (peak > start_active) as usize;
    }
    assert!(rising > 0, "no stage allocates: the check would be vacuous");
}
