//! (3) the largest owners and the breakdown at the peak.

use super::*;

pub(super) fn owners_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    let mut charts = 0;
    for bd in &d.breakdowns {
        let head = format!(
            "Device {} (pid {}) {} at its peak: {} {} at {}",
            bd.device,
            bd.pid,
            bd.pool,
            fmt_bytes(bd.peak_bytes),
            bd.metric,
            b.ts(bd.peak_ts)
        );
        blocks.push(Block::Text(head.clone()));
        if bd.level1.is_empty() {
            continue;
        }
        let top = bd.level1.first();
        let mut f = finding(
            "peak_breakdown",
            Severity::Info,
            3,
            format!(
                "Device {} {} peak {}",
                bd.device,
                bd.pool,
                fmt_bytes(bd.peak_bytes)
            ),
            format!(
                "{head}; the largest owner group is {} with {}.",
                top.map(|r| r.s("owner_group")).unwrap_or_default(),
                ob(top.and_then(|r| r.i64("bytes")))
            ),
        );
        f.evidence.insert("pid".into(), json!(bd.pid));
        f.evidence.insert("device".into(), json!(bd.device));
        f.evidence.insert("pool".into(), json!(bd.pool));
        f.evidence.insert("peak_bytes".into(), json!(bd.peak_bytes));
        f.evidence.insert("peak_ts".into(), json!(bd.peak_ts));
        f.evidence.insert(
            "groups".into(),
            Value::Array(
                bd.level1
                    .iter()
                    .take(10)
                    .map(|r| json!({"owner_group": r.s("owner_group"), "bytes": r.i64("bytes"), "blocks": r.i64("blocks")}))
                    .collect(),
            ),
        );
        for r in bd.level1.iter().take(3) {
            f.evidence_text.push(format!(
                "{}: {} in {} block(s) ({:.1} % of the pool)",
                r.s("owner_group"),
                ob(r.i64("bytes")),
                r.s("blocks"),
                r.f64("share").unwrap_or(0.0)
            ));
        }
        blocks.push(b.push(f));
        if charts < 8 {
            charts += 1;
            blocks.push(Block::Chart(Chart::Bars(BarChart {
                title: format!(
                    "Breakdown at the peak — device {} (pid {}) {} (level-1 owner groups)",
                    bd.device, bd.pid, bd.pool
                ),
                unit: "bytes".into(),
                parts: vec!["live bytes".into()],
                bars: bd
                    .level1
                    .iter()
                    .take(12)
                    .map(|r| (r.s("owner_group"), vec![r.f64("bytes").unwrap_or(0.0)]))
                    .collect(),
            })));
        }
        blocks.push(table(
            "Owner tree at the peak (3 levels)",
            &["owner", "bytes", "blocks", "share"],
            bd.tree
                .iter()
                .map(|r| {
                    let depth = r.i64("depth").unwrap_or(1).max(1) as usize;
                    vec![
                        format!("{}{}", "  ".repeat(depth - 1), r.s("name")),
                        ob(r.i64("bytes")),
                        r.s("blocks"),
                        r.f64("share").map(fmt_pct).unwrap_or_default(),
                    ]
                })
                .collect(),
        ));
        blocks.push(table(
            "Largest live blocks at the peak",
            &["size", "owner", "allocated", "user frame", "fate"],
            bd.blocks
                .iter()
                .map(|r| {
                    vec![
                        ob(r.i64("size")),
                        r.s("owner"),
                        r.i64("alloc_ts").map(|t| b.ts(t)).unwrap_or_default(),
                        match r.str("user_frame") {
                            Some(f) => f.to_string(),
                            None if r.b("has_stack") => "(library frames only)".to_string(),
                            None => "(no stack)".to_string(),
                        },
                        r.s("fate"),
                    ]
                })
                .collect(),
        ));
    }
    blocks.push(table(
        "Largest owners per pool (view owner_peaks; peaks of different owners are not simultaneous)",
        &["device", "pool", "owner", "peak", "allocated in total", "blocks", "held at end"],
        d.owner_peaks
            .iter()
            .map(|r| {
                vec![
                    r.s("device"),
                    r.s("pool"),
                    r.s("owner"),
                    ob(r.i64("peak_bytes")),
                    ob(r.i64("total_bytes")),
                    r.s("blocks"),
                    ob(r.i64("end_bytes")),
                ]
            })
            .collect(),
    ));
    b.sections.push(Section {
        id: "owners".into(),
        title: "3. Largest owners and the breakdown at the peak".into(),
        blocks,
    });
}
