//! (6) fragmentation, cached memory and pool expansions.

use super::*;

pub(super) fn frag_section(b: &mut Builder) {
    let d = b.d;
    // the judgement is view findings' (cached_findings.sql of msMemScope dumps,
    // snap_frag_findings.sql of snapshots); the cards take the device with the most
    let mut blocks = b.push_section("fragmentation");
    let figures: Vec<(String, Option<i64>, Option<f64>)> = b
        .shown(&blocks)
        .map(|f| {
            let figure = |k: &str| f.evidence.get(k);
            (
                f.place.clone().unwrap_or_default(),
                figure("cached_free_bytes").and_then(Value::as_i64),
                figure("frag_pct").and_then(Value::as_f64),
            )
        })
        .collect();
    for (place, cached, pct) in figures {
        if let Some(cached) = cached {
            *b.cached_by_device.entry(place.clone()).or_default() += cached;
        }
        if let Some(pct) = pct {
            if b.metrics.frag_pct.is_none_or(|x| pct > x) {
                b.metrics.frag_pct = Some(pct);
                b.metrics.frag_where = Some(place);
            }
        }
    }
    if !d.fragmentation.is_empty() {
        blocks.push(table(
            "Idle share of each pool's reservation (view fragmentation: (total − used) / total)",
            &[
                "device",
                "pool",
                "now",
                "highest",
                "mean",
                "used",
                "reserved",
                "expansions",
            ],
            d.fragmentation
                .iter()
                .map(|r| {
                    vec![
                        r.s("device"),
                        r.s("pool"),
                        r.f64("current_frag_pct").map(fmt_pct).unwrap_or_default(),
                        r.f64("peak_frag_pct").map(fmt_pct).unwrap_or_default(),
                        r.f64("mean_frag_pct").map(fmt_pct).unwrap_or_default(),
                        ob(r.i64("used_last")),
                        ob(r.i64("total_last")),
                        r.s("expansions"),
                    ]
                })
                .collect(),
        ));
    }
    if blocks.is_empty() {
        blocks.push(Block::Text(
            "No pool counters and no snapshot: nothing to say about fragmentation.".into(),
        ));
    }
    if !d.snap_settings.is_empty() {
        blocks.push(table(
            "Allocator settings recorded in the snapshot",
            &["snapshot", "setting", "value"],
            d.snap_settings
                .iter()
                .map(|r| vec![r.s("snapshot"), r.s("key"), r.s("value")])
                .collect(),
        ));
    }
    b.sections.push(Section {
        id: "fragmentation".into(),
        title: "6. Fragmentation, cached memory and pool expansions".into(),
        blocks,
    });
}
