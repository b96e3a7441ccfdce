//! (6) fragmentation, cached memory and pool expansions.

use super::*;

/// The allocator settings that act on fragmentation, each advice a whole sentence; with
/// expandable segments already on, the split limit is not offered (it has little left to do).
pub(super) fn settings_advice(expandable: bool) -> Vec<String> {
    let mut advice = Vec::new();
    if expandable {
        advice.push("Expandable segments are already on, so a split limit (`max_split_size_mb`) has little left to do: reduce what is live at the peak instead (the largest holders are listed with the peak).".into());
    } else {
        advice.push("Set `expandable_segments:True` (PYTORCH_CUDA_ALLOC_CONF / PYTORCH_NPU_ALLOC_CONF): segments then grow in place, so memory freed in one place serves the next large request.".into());
        advice.push("Where expandable segments cannot be used, set `max_split_size_mb:N` instead: cached blocks larger than N MB are then never split, which keeps big holes for big requests.".into());
    }
    advice.push("Set `garbage_collection_threshold:0.8` to free unused cached blocks before the limit is reached (it acts relative to the per-process memory fraction), instead of a costly flush-and-retry under pressure.".into());
    advice.push("Call `empty_cache()` to return wholly free cached segments to the device; it does not fix holes inside segments that still hold live blocks.".into());
    advice
}

pub(super) fn frag_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    // memscope pools: idle reservation is cached free memory, not fragmentation
    for r in d.fragmentation.iter() {
        let total = r.i64("total_last").unwrap_or(0);
        let used = r.i64("used_last").unwrap_or(0);
        let idle = total - used;
        if total <= 0 {
            continue;
        }
        *b.cached_by_device
            .entry(format!("device {}", r.s("device")))
            .or_default() += idle.max(0);
        let mut f = finding(
            "cached_free",
            Severity::Info,
            6,
            format!("Device {} {}: {} reserved but idle at the end", r.s("device"), r.s("pool"), fmt_bytes(idle)),
            format!(
                "The {} pool reserves {} and uses {} at the end ({:.1} % idle; highest {:.1} % at {}). Idle reservation is memory the caching allocator keeps for reuse — cached free memory, not fragmentation; `torch_npu.npu.empty_cache()` returns it.",
                r.s("pool"),
                fmt_bytes(total),
                fmt_bytes(used),
                r.f64("current_frag_pct").unwrap_or(0.0),
                r.f64("peak_frag_pct").unwrap_or(0.0),
                r.i64("peak_ts").map(|t| b.ts(t)).unwrap_or_default()
            ),
        );
        for c in [
            "pid",
            "device",
            "pool",
            "samples",
            "expansions",
            "current_frag_pct",
            "peak_frag_pct",
            "mean_frag_pct",
            "used_last",
            "total_last",
            "peak_total",
        ] {
            let v = match r.get(c) {
                Val::Int(i) => json!(i),
                Val::Float(x) => json!(x),
                Val::Str(s) => json!(s),
                _ => Value::Null,
            };
            f.evidence.insert(c.into(), v);
        }
        f.evidence.insert("idle_bytes".into(), json!(idle));
        blocks.push(b.push(f));
    }
    if !d.fragmentation.is_empty() && !d.has_snapshot() {
        let f = cannot(
            6,
            "whether the idle reservation is fragmented (free memory that cannot serve a request)",
            "the layout of free blocks per segment",
            "a memory snapshot: `torch_npu.npu.memory._record_memory_history()` then `torch_npu.npu.memory._dump_snapshot(\"snap.pickle\")`, read by `memq report snap.pickle`",
        );
        blocks.push(b.push(f));
    }
    if !d.expansions.is_empty() {
        let n: i64 = d.expansions.iter().filter_map(|r| r.i64("n")).sum();
        let mut f = finding(
            "pool_expansion",
            // Expansions are how a caching pool warms up; a count alone is no problem (the
            // fragmentation rules judge whether the cache failed to reuse its free blocks).
            Severity::Info,
            6,
            format!("The pools grew their reservation {n} time(s)"),
            "Each expansion asks the driver for a new segment; many expansions at low usage mean the cache could not reuse its free blocks.".into(),
        );
        f.evidence.insert("expansions".into(), json!(n));
        f.evidence.insert(
            "series".into(),
            Value::Array(
                d.expansions
                    .iter()
                    .map(|r| json!({"device": r.s("device"), "pool": r.s("pool"), "expansions": r.i64("n"), "grown_bytes": r.i64("grown"), "min_usage_before_pct": r.f64("min_usage_before_pct")}))
                    .collect(),
            ),
        );
        for r in d.expansions.iter() {
            f.evidence_text.push(format!(
                "device {} {}: {} expansions adding {}, first at {}",
                r.s("device"),
                r.s("pool"),
                r.s("n"),
                ob(r.i64("grown")),
                r.i64("first_ts").map(|t| b.ts(t)).unwrap_or_default()
            ));
        }
        let expandable = d.hal_summary.iter().any(|r| r.b("expandable_segments"));
        f.evidence
            .insert("expandable_segments".into(), json!(expandable));
        if n > 20 && !expandable {
            f.advice.push(settings_advice(false)[0].clone());
        }
        blocks.push(b.push(f));
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
    // snapshots: measured fragmentation
    for r in d.snap_frag.iter() {
        let snap = r.s("snapshot");
        let dev = r.i64("device").unwrap_or(0);
        let free = r.i64("free").unwrap_or(0);
        let empty = r.i64("empty_segment_free").unwrap_or(0);
        let pending = r.i64("pending_free").unwrap_or(0);
        let unusable = r.i64("unusable_free").unwrap_or(0);
        let reserved = r.i64("reserved").unwrap_or(0);
        let pct = if free > 0 {
            unusable as f64 * 100.0 / free as f64
        } else {
            0.0
        };
        *b.cached_by_device
            .entry(format!("{snap} device {dev}"))
            .or_default() += empty;
        if b.metrics.frag_pct.is_none_or(|x| pct > x) {
            b.metrics.frag_pct = Some(pct);
            b.metrics.frag_where = Some(format!("{snap} device {dev}"));
        }
        let ov = d
            .snap_overview
            .iter()
            .find(|o| o.s("snapshot") == snap && o.i64("device") == Some(dev));
        let ref_health = ov
            .map(|o| {
                format!(
                    "{} {}",
                    o.s("reference_health"),
                    o.s("reference_health_reason")
                )
            })
            .unwrap_or_default();
        let oom_here = d
            .snap_oom
            .iter()
            .any(|o| o.s("snapshot") == snap && o.i64("device") == Some(dev));
        // A problem when it cost a request (an OOM on this device) or wastes a real share of the
        // device: at least 1 GiB and a tenth of what is reserved. Less is noted, not flagged.
        let costly = unusable >= 1 << 30 && unusable as f64 >= 0.1 * reserved as f64;
        let sev = if pct >= 30.0 && (costly || oom_here && unusable > 0) {
            Severity::Warning
        } else if free == 0 {
            Severity::Ok
        } else {
            Severity::Info
        };
        let kind = if sev == Severity::Warning || (unusable > 0 && pct >= 30.0) {
            "fragmentation"
        } else {
            "cached_free"
        };
        let title = if kind == "fragmentation" {
            format!(
                "Fragmented: {} of free memory on {snap} device {dev} cannot serve a large request",
                fmt_bytes(unusable)
            )
        } else {
            format!(
                "{snap} device {dev}: {} free, of which {} fragmented",
                fmt_bytes(free),
                fmt_bytes(unusable)
            )
        };
        let mut f = finding(
            kind,
            sev,
            6,
            title,
            format!(
                "Of {} reserved, {} is free: {} in wholly free segments (cached; `empty_cache()` returns it), {} waiting for other streams, and {} outside the largest hole of its segment — {:.1} % of the free memory cannot serve a request as large as that hole.{}",
                fmt_bytes(reserved),
                fmt_bytes(free),
                fmt_bytes(empty),
                fmt_bytes(pending),
                fmt_bytes(unusable),
                pct,
                if ref_health.starts_with("ERR") || ref_health.starts_with("WARN") {
                    format!(" (snap_overview's threshold rule says {ref_health}; that counts cached free memory as fragmentation.)")
                } else {
                    String::new()
                }
            ),
        );
        f.evidence.insert("snapshot".into(), json!(snap));
        f.evidence.insert("device".into(), json!(dev));
        f.evidence.insert("reserved_bytes".into(), json!(reserved));
        f.evidence.insert("free_bytes".into(), json!(free));
        f.evidence.insert("cached_free_bytes".into(), json!(empty));
        f.evidence
            .insert("empty_segments".into(), json!(r.i64("empty_segments")));
        f.evidence
            .insert("pending_free_bytes".into(), json!(pending));
        f.evidence
            .insert("fragmented_bytes".into(), json!(unusable));
        f.evidence
            .insert("frag_pct".into(), json!((pct * 100.0).round() / 100.0));
        f.evidence
            .insert("largest_free_bytes".into(), json!(r.i64("largest_free")));
        f.evidence.insert(
            "internal_waste_bytes".into(),
            json!(r.i64("internal_waste")),
        );
        f.evidence
            .insert("overview_health".into(), json!(ref_health));
        f.evidence_text.push(format!(
            "{} segments, {} free pieces, largest free block {}",
            r.s("segments"),
            r.s("free_pieces"),
            ob(r.i64("largest_free"))
        ));
        if empty > 0 {
            f.advice.push(format!(
                "{} sits in {} wholly free cached segment(s): `torch.cuda.empty_cache()` (torch_npu: `torch.npu.empty_cache()`) hands it back to the device for other processes.",
                fmt_bytes(empty),
                r.s("empty_segments")
            ));
        }
        if kind == "fragmentation" {
            let settings: Vec<String> = d
                .snap_settings
                .iter()
                .filter(|s| s.s("snapshot") == snap)
                .map(|s| format!("{}={}", s.s("key"), s.s("value")))
                .collect();
            let expandable = d.snap_settings.iter().any(|s| {
                s.s("snapshot") == snap
                    && s.s("key") == "expandable_segments"
                    && s.s("value") == "true"
            }) || ov
                .is_some_and(|o| o.i64("expandable_segments").unwrap_or(0) > 0);
            if !settings.is_empty() {
                f.evidence_text
                    .push(format!("allocator settings: {}", settings.join(", ")));
            }
            f.advice.extend(settings_advice(expandable));
        }
        blocks.push(b.push(f));
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
