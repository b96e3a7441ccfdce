//! (5) out of memory.

use super::*;

pub(super) fn oom_section(b: &mut Builder) {
    let d = b.d;
    // what the dumps lack to judge an OOM (capability_findings.sql)
    let mut blocks = b.push_rows("oom", |r| r.str("kind") == Some("cannot_conclude"));
    let triggers: Vec<Row> = d
        .oom_events
        .iter()
        .filter(|r| r.s("kind") == "trigger")
        .collect();
    // the verdicts of view findings (oom_trigger_findings.sql), each placed with its trigger
    let mut verdicts: Vec<Option<Finding>> = section_rows(d, "oom")
        .filter(|r| r.str("kind") == Some("oom"))
        .map(|r| Some(from_row(r)))
        .collect();
    for t in &triggers {
        let tid = t.i64("trigger_id");
        let dev = t.s("device");
        let source = t.s("source");
        let of_trigger = |f: &Finding| {
            f.evidence.get("trigger_id").and_then(Value::as_i64) == tid
                && f.evidence.get("source").and_then(Value::as_str) == Some(source.as_str())
        };
        if let Some(f) = verdicts
            .iter_mut()
            .find(|f| f.as_ref().is_some_and(of_trigger))
            .and_then(Option::take)
        {
            blocks.push(b.push(f));
        }
        for kind in ["top", "recent"] {
            let rows: Vec<Vec<String>> = d
                .oom_events
                .iter()
                .filter(|r| r.s("kind") == kind && r.i64("trigger_id") == tid)
                .take(10)
                .map(|r| {
                    vec![
                        r.s("nth"),
                        r.s("pool"),
                        ob(r.i64("size")),
                        r.s("owner"),
                        r.i64("alloc_ts").map(|x| b.ts(x)).unwrap_or_default(),
                        r.s("stack_top"),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                blocks.push(table(
                    &format!(
                        "{} allocations listed with the OOM on device {dev}",
                        if kind == "top" {
                            "Largest live (TOP)"
                        } else {
                            "Most recent (RECENT)"
                        }
                    ),
                    &["#", "pool", "size", "owner", "allocated", "frame"],
                    rows,
                ));
            }
        }
    }
    // the OOM entries of snapshots' traces (snap_oom_findings.sql)
    blocks.extend(b.push_rows("oom", |r| r.str("kind") == Some("snapshot_oom")));
    b.metrics.oom_events = section_rows(d, "oom")
        .filter(|r| matches!(r.str("kind"), Some("oom" | "snapshot_oom")))
        .count() as i64;
    if b.metrics.oom_events == 0 {
        let f = finding(
            "no_oom",
            Severity::Ok,
            5,
            "No out-of-memory event".into(),
            "The data records no OOM.".into(),
        );
        blocks.push(b.push(f));
    }
    b.sections.push(Section {
        id: "oom".into(),
        title: "5. Out of memory".into(),
        blocks,
    });
}
