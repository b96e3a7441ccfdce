//! (4) leaks: growing against resident memory.

use super::*;

pub(super) fn leak_section(b: &mut Builder) {
    let d = b.d;
    // the judgement is view findings' (crates/memscope/sql/leak_findings.sql)
    let mut blocks = b.push_section("leaks");
    let leaks: Vec<&Finding> = b.shown(&blocks).filter(|f| f.kind == "leak").collect();
    let leak_rows: Vec<Vec<String>> = leaks
        .iter()
        .map(|f| {
            let e = |k: &str| f.evidence.get(k).cloned().unwrap_or(Value::Null);
            let text = |v: Value| v.as_str().map(str::to_string).unwrap_or_default();
            vec![
                text(e("device")),
                text(e("pool")),
                text(e("owner")),
                ob(e("bytes").as_i64()),
                e("blocks").to_string(),
                ob(e("growth_per_step_bytes").as_i64()),
            ]
        })
        .collect();
    let growing: Vec<(String, i64)> = leaks
        .iter()
        .map(|f| (f.place.clone().unwrap_or_default(), f.bytes.unwrap_or(0)))
        .collect();
    // an owner's growth that cannot be judged (not the note on steps: the rule then judges
    // growth after the warm-up)
    let unknown = b
        .shown(&blocks)
        .any(|f| f.kind == "cannot_conclude" && f.evidence.contains_key("owner"));
    for (place, bytes) in growing {
        *b.leak_by_device.entry(place).or_default() += bytes;
    }
    b.growth_unknown |= unknown;
    if !leak_rows.is_empty() {
        blocks.push(table(
            "Growing owners",
            &[
                "device",
                "pool",
                "owner",
                "held at end",
                "blocks",
                "growth per step",
            ],
            leak_rows,
        ));
    }
    // growth per step chart per device (primary pools)
    let mut keys: Vec<Key> = d
        .step_peaks
        .iter()
        .map(|r| {
            (
                r.s("source"),
                r.i64("pid").unwrap_or(0),
                r.s("device"),
                r.s("pool"),
            )
        })
        .collect();
    keys.dedup();
    for k in keys.iter().filter(|k| k.3 != "HOST_PINNED").take(8) {
        let steps: Vec<(String, f64)> = d
            .step_peaks
            .iter()
            .filter(|r| {
                r.s("source") == k.0
                    && r.i64("pid") == Some(k.1)
                    && r.s("device") == k.2
                    && r.s("pool") == k.3
            })
            .filter_map(|r| Some((r.s("step"), r.f64("growth")?)))
            .collect();
        if steps.is_empty() {
            continue;
        }
        // one bar per step, or per group of consecutive steps when there are many
        let per_bar = steps.len().div_ceil(MAX_STEP_BARS);
        let bars: Vec<(String, Vec<f64>)> = steps
            .chunks(per_bar)
            .map(|g| {
                let label = match (g.first(), g.last()) {
                    (Some(a), Some(z)) if g.len() > 1 => format!("steps {}–{}", a.0, z.0),
                    (Some(a), _) => format!("step {}", a.0),
                    _ => String::new(),
                };
                (label, vec![g.iter().map(|s| s.1).sum()])
            })
            .collect();
        let what = if per_bar > 1 {
            format!(
                "{} complete steps, {per_bar} to a bar: sum of end − start of each",
                steps.len()
            )
        } else {
            "end − start of each complete step".to_string()
        };
        blocks.push(Block::Chart(Chart::Bars(BarChart {
            title: format!(
                "Growth per step — device {} (pid {}) {} ({what})",
                k.2, k.1, k.3
            ),
            unit: "bytes".into(),
            parts: vec!["growth".into()],
            bars,
        })));
    }
    if !d.step_peaks.is_empty() {
        blocks.push(table(
            "Steps (view step_peaks)",
            &[
                "device",
                "pool",
                "step",
                "start",
                "peak",
                "end",
                "growth",
                "vs previous step",
            ],
            d.step_peaks
                .iter()
                .map(|r| {
                    vec![
                        r.s("device"),
                        r.s("pool"),
                        r.s("step"),
                        ob(r.i64("start_used")),
                        ob(r.i64("peak_used")),
                        ob(r.i64("end_used")),
                        ob(r.i64("growth")),
                        ob(r.i64("growth_vs_prev")),
                    ]
                })
                .collect(),
        ));
    }
    if !d.trend.is_empty() {
        blocks.push(table(
            "Growth verdicts over 20 time buckets (view trend: A = live bytes, B = reservation)",
            &[
                "device",
                "pool",
                "A verdict",
                "baseline",
                "net growth",
                "B reservation grows",
            ],
            d.trend
                .iter()
                .map(|r| {
                    vec![
                        r.s("device"),
                        r.s("pool"),
                        r.s("growth_verdict"),
                        ob(r.i64("base_used")),
                        ob(r.i64("net_growth_bytes")),
                        if r.b("reservation_growth") {
                            "yes"
                        } else {
                            "no"
                        }
                        .into(),
                    ]
                })
                .collect(),
        ));
    }
    b.sections.push(Section {
        id: "leaks".into(),
        title: "4. Leaks: growing vs resident memory".into(),
        blocks,
    });
}
