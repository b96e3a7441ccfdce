//! (7) snapshots: true peak, timeline, segments.

use super::*;

pub(super) fn snapshot_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    blocks.push(table(
        "Allocator state at dump time (view snap_overview)",
        &[
            "snapshot",
            "device",
            "reserved",
            "allocated",
            "active",
            "free",
            "segments",
            "blocks",
            "OOMs",
        ],
        d.snap_overview
            .iter()
            .map(|r| {
                vec![
                    r.s("snapshot"),
                    r.s("device"),
                    ob(r.i64("reserved_bytes")),
                    ob(r.i64("allocated_bytes")),
                    ob(r.i64("active_bytes")),
                    ob(r.i64("free_bytes")),
                    r.s("segments"),
                    r.s("blocks"),
                    r.s("oom_count"),
                ]
            })
            .collect(),
    ));
    let segs: i64 = d
        .snap_overview
        .iter()
        .filter_map(|r| r.i64("segments"))
        .sum();
    b.metrics.segments = Some(segs);
    for r in d.snap_peak.iter() {
        let snap = r.s("snapshot");
        let dev = r.i64("device").unwrap_or(0);
        let ap = r.i64("active_peak").unwrap_or(0);
        let rp = r.i64("reserved_peak").unwrap_or(0);
        if b.metrics.peak_bytes.is_none_or(|x| ap > x) {
            b.metrics.peak_bytes = Some(ap);
            b.metrics.peak_where = Some(if r.b("trace_wrapped") {
                format!(
                    "{snap} device {dev} active, in the kept trace window only: the trace wrapped"
                )
            } else {
                format!("{snap} device {dev} active")
            });
        }
        if b.metrics.reserved_bytes.is_none_or(|x| rp > x) {
            b.metrics.reserved_bytes = Some(rp);
            b.metrics.reserved_where = Some(format!("{snap} device {dev} reserved"));
        }
        // the peak, a wrapped trace, a missing trace (snap_findings.sql)
        let place = format!("{snap} device {dev}");
        blocks.extend(b.push_rows("snapshots", |r| {
            r.s("place") == place && r.s("kind") != "long_lived"
        }));
        // what holds the peak: the allocations summed by user frame, not single blocks
        let split: Vec<Row> = d
            .snap_peak_split
            .iter()
            .filter(|x| x.s("snapshot") == snap && x.i64("device") == Some(dev))
            .collect();
        if !split.is_empty() {
            blocks.push(table(
                &format!(
                    "What holds memory at the peak — {snap} device {dev} (view snap_peak_split)"
                ),
                &[
                    "by",
                    "user frame or category",
                    "bytes",
                    "% of peak",
                    "allocations",
                ],
                split
                    .iter()
                    .map(|x| {
                        vec![
                            x.s("dimension").replace('_', " "),
                            x.s("key"),
                            ob(x.i64("bytes")),
                            format!("{:.1}", x.f64("pct_of_peak").unwrap_or(0.0)),
                            x.s("blocks"),
                        ]
                    })
                    .collect(),
            ));
        }
        // timeline
        let tl: Vec<Row> = d
            .snap_timeline
            .iter()
            .filter(|x| x.s("snapshot") == snap && x.i64("device") == Some(dev))
            .collect();
        if !tl.is_empty() {
            let mid = |x: &Row| (x.f64("seq0").unwrap_or(0.0) + x.f64("seq1").unwrap_or(0.0)) / 2.0;
            blocks.push(Block::Chart(Chart::Line(LineChart {
                title: format!("Active and reserved memory over the trace — {snap} device {dev}"),
                x_label: "trace entry".into(),
                x_unit: "entry".into(),
                series: vec![
                    Series {
                        name: "reserved".into(),
                        points: tl
                            .iter()
                            .map(|x| (mid(x), x.f64("reserved_max").unwrap_or(0.0)))
                            .collect(),
                        band: Vec::new(),
                        area: true,
                    },
                    Series {
                        name: "active".into(),
                        points: tl
                            .iter()
                            .map(|x| (mid(x), x.f64("active_max").unwrap_or(0.0)))
                            .collect(),
                        band: tl
                            .iter()
                            .map(|x| BandBucket {
                                x0: x.f64("seq0").unwrap_or(0.0),
                                // a bucket of entries seq0..=seq1 ends where the next begins
                                x1: x.f64("seq1").unwrap_or(0.0) + 1.0,
                                min: x.f64("active_min").unwrap_or(0.0),
                                max: x.f64("active_max").unwrap_or(0.0),
                            })
                            .collect(),
                        area: false,
                    },
                ],
                markers: r
                    .i64("active_peak_seq")
                    .map(|s| {
                        (
                            s.max(0) as f64,
                            ap as f64,
                            format!("active peak {} at entry {s}", fmt_bytes(ap)),
                        )
                    })
                    .into_iter()
                    .collect(),
            })));
        }
        if let Some((_, _, rows)) = d
            .snap_segments_at_peak
            .iter()
            .find(|(s, dv, _)| s == &snap && *dv == dev)
        {
            if !rows.is_empty() {
                blocks.push(Block::Chart(Chart::Segments(SegmentMap {
                    title: format!("Segment map at the active peak — {snap} device {dev} ({} segments, width ∝ size)", rows.len()),
                    segments: rows
                        .iter()
                        .map(|x| {
                            (
                                x.i64("size").unwrap_or(0),
                                x.i64("allocated_bytes").unwrap_or(0) - x.i64("pending_free_bytes").unwrap_or(0),
                                x.i64("pending_free_bytes").unwrap_or(0),
                            )
                        })
                        .collect(),
                })));
            }
        }
        let top: Vec<Row> = d
            .snap_peak_blocks
            .iter()
            .filter(|x| x.s("snapshot") == snap && x.i64("device") == Some(dev))
            .collect();
        if !top.is_empty() {
            blocks.push(table(
                &format!(
                    "The largest single allocations live at the active peak — {snap} device {dev}"
                ),
                &[
                    "#",
                    "size",
                    "% of peak",
                    "origin",
                    "user frame",
                    "call path",
                ],
                top.iter()
                    .map(|x| {
                        vec![
                            x.s("rank"),
                            ob(x.i64("size")),
                            x.f64("pct_of_peak").map(fmt_pct).unwrap_or_default(),
                            x.s("origin"),
                            x.str("user_frame").unwrap_or("(no user frame)").to_string(),
                            x.s("call_path").chars().take(160).collect(),
                        ]
                    })
                    .collect(),
            ));
        }
    }
    if !d.snap_expansions.is_empty() {
        blocks.push(table(
            "Largest segment allocations in the trace (view snap_expansions)",
            &[
                "snapshot",
                "device",
                "#",
                "entry",
                "action",
                "size",
                "reserved after",
                "user frame",
            ],
            d.snap_expansions
                .iter()
                .map(|x| {
                    vec![
                        x.s("snapshot"),
                        x.s("device"),
                        x.s("growth_rank"),
                        x.s("seq"),
                        x.s("action"),
                        ob(x.i64("size")),
                        ob(x.i64("reserved_bytes")),
                        x.s("user_frame"),
                    ]
                })
                .collect(),
        ));
    }
    if !d.snap_frag_top.is_empty() {
        blocks.push(table(
            "Most fragmented segments (free memory outside the segment's largest hole)",
            &[
                "snapshot",
                "device",
                "segment",
                "type",
                "size",
                "allocated",
                "free",
                "pieces",
                "largest hole",
                "fragmented",
                "user frame",
            ],
            d.snap_frag_top
                .iter()
                .map(|x| {
                    vec![
                        x.s("snapshot"),
                        x.s("device"),
                        x.s("segment_id"),
                        x.s("segment_type"),
                        ob(x.i64("total_size")),
                        ob(x.i64("allocated_bytes")),
                        ob(x.i64("free_bytes")),
                        x.s("free_pieces"),
                        ob(x.i64("largest_free_bytes")),
                        ob(x.i64("unusable")),
                        x.s("user_frame"),
                    ]
                })
                .collect(),
        ));
    }
    blocks.extend(b.push_rows("snapshots", |r| r.s("kind") == "long_lived"));
    if !d.snap_attr.is_empty() {
        blocks.push(table(
            "Live memory by first user frame (view snap_stack_attribution)",
            &[
                "snapshot",
                "device",
                "#",
                "user frame",
                "blocks",
                "bytes",
                "% of live",
            ],
            d.snap_attr
                .iter()
                .map(|x| {
                    vec![
                        x.s("snapshot"),
                        x.s("device"),
                        x.s("rank"),
                        x.s("user_frame"),
                        x.s("blocks"),
                        ob(x.i64("bytes")),
                        x.f64("pct_of_live").map(fmt_pct).unwrap_or_default(),
                    ]
                })
                .collect(),
        ));
    }
    if !d.snap_compare.is_empty() {
        blocks.push(compare_finding(b));
        blocks.push(table(
            "Two snapshots compared (view snap_compare: b − a)",
            &["kind", "#", "key", "a", "b", "change", "count change"],
            d.snap_compare
                .iter()
                .map(|x| {
                    vec![
                        x.s("kind"),
                        x.s("rank"),
                        x.s("key").chars().take(120).collect(),
                        ob(x.i64("a_bytes")),
                        ob(x.i64("b_bytes")),
                        ob(x.i64("diff_bytes")),
                        x.s("diff_count"),
                    ]
                })
                .collect(),
        ));
    }
    b.sections.push(Section {
        id: "snapshots".into(),
        title: "7. Snapshots: true peak, timeline, segments".into(),
        blocks,
    });
}
