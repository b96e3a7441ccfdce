//! (8) torch.profiler traces, and the comparison of two runs.

use super::*;

/// A torch.profiler trace's `[memory]` events: the allocator's totals per device over time and
/// the op each allocation ran in. They tell the peak and who allocated; they hold no block
/// layout (fragmentation) and no owner of what stays (growth): those are said as such.
pub(super) fn trace_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    let short = |s: &str| short_source(s);
    blocks.push(table(
        "Peaks per device (view trace_memory_peaks)",
        &[
            "trace",
            "device",
            "metric",
            "peak",
            "at",
            "op at the peak",
            "events",
        ],
        d.trace_peaks
            .iter()
            .map(|r| {
                vec![
                    short(&r.s("source")),
                    r.s("device"),
                    format!(
                        "{}{}",
                        r.s("metric"),
                        if r.b("rebuilt") {
                            " (rebuilt from Bytes)"
                        } else {
                            ""
                        }
                    ),
                    ob(r.i64("peak_bytes")),
                    r.i64("peak_ts").map(|t| b.ts(t)).unwrap_or_default(),
                    r.str("op").unwrap_or("(no op)").to_string(),
                    r.s("events"),
                ]
            })
            .collect(),
    ));
    // one chart per trace and device: allocated (line at bucket end, band min..max)
    let mut keys: Vec<(String, String)> = d
        .trace_curve
        .iter()
        .map(|r| (r.s("source"), r.s("device")))
        .collect();
    keys.dedup();
    let accelerators = d.trace_peaks.iter().any(|r| r.s("device") != "cpu");
    // the host's few bytes of a GPU run are in the table, not charted
    keys.retain(|(_, device)| !(accelerators && device == "cpu"));
    for (source, device) in &keys {
        let rows: Vec<_> = d
            .trace_curve
            .iter()
            .filter(|r| &r.s("source") == source && &r.s("device") == device)
            .collect();
        let band = rows
            .iter()
            .filter_map(|r| {
                Some(BandBucket {
                    x0: b.rel_s(r.i64("t0")?),
                    x1: b.rel_s(r.i64("t1")?),
                    min: r.i64("min_bytes")? as f64,
                    max: r.i64("max_bytes")? as f64,
                })
            })
            .collect();
        let points = rows
            .iter()
            .filter_map(|r| Some((b.rel_s(r.i64("t1")?), r.i64("end_bytes")? as f64)))
            .collect();
        let mut series = vec![Series {
            name: "allocated".into(),
            points,
            band,
            area: false,
        }];
        let reserved: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((b.rel_s(r.i64("t1")?), r.i64("reserved_max")? as f64)))
            .collect();
        if !reserved.is_empty() {
            series.push(Series {
                name: "reserved (highest per bucket)".into(),
                points: reserved,
                band: Vec::new(),
                area: false,
            });
        }
        let markers = d
            .trace_peaks
            .iter()
            .filter(|r| &r.s("source") == source && &r.s("device") == device)
            .filter_map(|r| {
                let (pb, pt) = (r.i64("peak_bytes")?, r.i64("peak_ts")?);
                Some((
                    b.rel_s(pt),
                    pb as f64,
                    format!("{} peak {} at {}", r.s("metric"), fmt_bytes(pb), b.ts(pt)),
                ))
            })
            .collect();
        blocks.push(Block::Chart(Chart::Line(LineChart {
            title: format!(
                "Memory over time — {device} of {}; line = allocated at bucket end, band = min..max per bucket",
                short(source)
            ),
            x_label: "time since the first memory event".into(),
            x_unit: "s".into(),
            series,
            markers,
        })));
    }
    if !d.trace_ops.is_empty() {
        blocks.push(table(
            "Ops that allocated most (view trace_memory_by_op)",
            &["device", "op", "runs", "allocated", "freed", "retained"],
            d.trace_ops
                .iter()
                .map(|r| {
                    vec![
                        r.s("device"),
                        r.str("op").unwrap_or("(outside any op)").to_string(),
                        r.s("runs"),
                        ob(r.i64("allocated_bytes")),
                        ob(r.i64("freed_bytes")),
                        ob(r.i64("retained_bytes")),
                    ]
                })
                .collect(),
        ));
    }
    // the headline figures: each device's allocated and reserved peaks; a finding for each
    // accelerator (the host's few bytes of a GPU run only in the table)
    for r in d.trace_peaks.iter() {
        let Some(pb) = r.i64("peak_bytes") else {
            continue;
        };
        let place = format!("{} {}", short(&r.s("source")), r.s("device"));
        match r.s("metric").as_str() {
            "allocated" if b.metrics.peak_bytes.is_none_or(|x| pb > x) => {
                b.metrics.peak_bytes = Some(pb);
                b.metrics.peak_where = Some(format!("{place} allocated"));
            }
            "reserved" if b.metrics.reserved_bytes.is_none_or(|x| pb > x) => {
                b.metrics.reserved_bytes = Some(pb);
                b.metrics.reserved_where = Some(format!("{place} reserved"));
            }
            _ => {}
        }
    }
    // the peaks, and what a trace cannot tell (trace_findings.sql)
    blocks.extend(b.push_section("traces"));
    if !d.has_memscope() && !d.has_snapshot() {
        b.growth_unknown = true;
    }
    b.sections.push(Section {
        id: "traces".into(),
        title: "8. torch.profiler traces: memory per device and op".into(),
        blocks,
    });
}

/// The comparison of the first two snapshots given (view snap_compare: b − a).
pub(super) fn compare_finding(b: &mut Builder) -> Block {
    let d = b.d;
    let (sa, sb) = (d.snapshots[0].clone(), d.snapshots[1].clone());
    let row_json = |x: &Row| {
        let mut m = Map::new();
        for c in [
            "a_count",
            "b_count",
            "diff_count",
            "a_bytes",
            "b_bytes",
            "diff_bytes",
        ] {
            m.insert(c.into(), json!(x.i64(c)));
        }
        m
    };
    let mut totals = Map::new();
    for x in d.snap_compare.iter().filter(|x| x.s("kind") == "total") {
        totals.insert(x.s("key"), Value::Object(row_json(&x)));
    }
    let changes: Vec<Value> = d
        .snap_compare
        .iter()
        .filter(|x| x.s("kind") != "total")
        .map(|x| {
            let mut m = row_json(&x);
            m.insert("kind".into(), json!(x.s("kind")));
            m.insert("rank".into(), json!(x.i64("rank")));
            m.insert("key".into(), json!(x.s("key")));
            Value::Object(m)
        })
        .collect();
    let total = |k: &str| {
        d.snap_compare
            .iter()
            .find(|x| x.s("kind") == "total" && x.s("key") == k)
    };
    let change = |k: &str| -> Option<String> {
        let x = total(k)?;
        Some(format!(
            "{k} {} → {} ({}{})",
            ob(x.i64("a_bytes")),
            ob(x.i64("b_bytes")),
            if x.i64("diff_bytes").unwrap_or(0) > 0 {
                "+"
            } else {
                ""
            },
            ob(x.i64("diff_bytes"))
        ))
    };
    let summary: Vec<String> = ["reserved", "allocated", "active_peak"]
        .iter()
        .filter_map(|k| change(k))
        .collect();
    let mut f = finding(
        "snapshot_compare",
        Severity::Info,
        7,
        format!("{sb} compared with {sa}"),
        format!(
            "From {sa} (a) to {sb} (b): {}.{}",
            summary.join(", "),
            if d.snapshots.len() > 2 {
                format!(
                    " ({} snapshots given: only the first two are compared; `memq sql` runs snap_compare on any pair.)",
                    d.snapshots.len()
                )
            } else {
                String::new()
            }
        ),
    );
    f.evidence.insert("snapshot_a".into(), json!(sa));
    f.evidence.insert("snapshot_b".into(), json!(sb));
    f.evidence.insert("totals".into(), Value::Object(totals));
    f.evidence.insert("changes".into(), json!(changes));
    for k in ["free", "pending_free", "reserved_peak"] {
        if let Some(t) = change(k) {
            f.evidence_text.push(t);
        }
    }
    for kind in ["stack", "user_frame", "segment_size"] {
        if let Some(x) = d
            .snap_compare
            .iter()
            .find(|x| x.s("kind") == kind && x.i64("rank") == Some(1))
        {
            f.evidence_text.push(format!(
                "largest change by {}: {} {} → {} ({} blocks → {})",
                kind.replace('_', " "),
                x.s("key").chars().take(160).collect::<String>(),
                ob(x.i64("a_bytes")),
                ob(x.i64("b_bytes")),
                x.s("a_count"),
                x.s("b_count")
            ));
        }
    }
    if let Some(x) = d
        .snap_compare
        .iter()
        .find(|x| x.s("kind") == "stack" && x.i64("diff_bytes").unwrap_or(0) > 0)
    {
        f.advice.push(format!(
            "The live memory that grew most comes from {}: check whether it is kept on purpose (caches, optimizer state) before the next run.",
            x.s("key").chars().take(160).collect::<String>()
        ));
    }
    b.push(f)
}
