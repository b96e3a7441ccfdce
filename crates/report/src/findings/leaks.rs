//! (4) leaks: growing against resident memory.

use super::*;

/// The least memory allocated after the warm-up and held to the end that a run without steps
/// reports as possible growth: 1 MiB, or 5 % of the pool's peak when that is more (a few
/// KiB of late buffers kept at exit are noise next to a peak of tens of MiB).
pub(super) fn late_floor(d: &Data, pid: Option<i64>, dev: &str, pool: &str) -> i64 {
    let peak = d
        .peaks
        .iter()
        .filter(|p| {
            p.i64("pid") == pid
                && p.s("device") == dev
                && p.s("pool") == pool
                && p.s("metric") == primary_metric(pool)
        })
        .filter_map(|p| p.i64("peak_bytes"))
        .max()
        .unwrap_or(0);
    (1 << 20).max(peak / 20)
}

/// The highest reservation (`total`) of the framework pools of a process and device, summed.
pub(super) fn framework_reserved(d: &Data, pid: Option<i64>, dev: &str) -> i64 {
    d.fragmentation
        .iter()
        .filter(|r| r.i64("pid") == pid && r.s("device") == dev)
        .filter_map(|r| r.i64("peak_total"))
        .sum()
}

pub(super) fn leak_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    let has_steps = d.step_evidence();
    // Devices with a framework pool: the HAL segments that pool reserves (owner CANN@APP,
    // docs/formats/memscope.md §6) nest the bytes its own owners report, so they are left out of
    // the totals there and never judged as a leak of their own; other HAL owners (HCCL buffers,
    // runtime, GE) count.
    let framework_dev: Vec<String> = d
        .leak_owners
        .iter()
        .filter(|r| r.s("pool") != "HAL" && r.s("pool") != "HOST_PINNED")
        .map(|r| r.s("device"))
        .collect();
    let several_pids = d
        .leak_owners
        .iter()
        .filter_map(|r| r.i64("pid"))
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    let span = d.span.map(|(a, z)| (z - a).max(1)).unwrap_or(1);
    let mut resident = Vec::new();
    let mut stock_total = 0i64;
    let mut leak_rows = Vec::new();
    for r in d.leak_owners.iter() {
        stock_total += r.i64("stock_bytes").unwrap_or(0);
        let bytes = r.i64("bytes").unwrap_or(0);
        if bytes <= 0 {
            continue;
        }
        let (pid, dev, pool, owner) = (r.i64("pid"), r.s("device"), r.s("pool"), r.s("owner"));
        let held: Vec<(i64, i64)> = d
            .leak_steps
            .iter()
            .filter(|s| {
                s.i64("pid") == pid
                    && s.s("device") == dev
                    && s.s("pool") == pool
                    && s.s("owner") == owner
            })
            .filter_map(|s| Some((s.i64("step")?, s.i64("held")?)))
            .collect();
        // What it holds never goes down from step to step, goes up more than once (or, with
        // two steps, goes up) and still goes up in the second half of the run: a steady leak
        // rises every step, a periodic one every n-th step, while state built over the first
        // steps (lazy optimizer state, caches warming up) stops rising.
        let rising: Vec<usize> = held
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[1].1 > w[0].1)
            .map(|(i, _)| i)
            .collect();
        let rises = rising.len();
        let intervals = held.len().saturating_sub(1);
        let by_steps = held.len() >= 2
            && held.windows(2).all(|w| w[1].1 >= w[0].1)
            && (rises >= 2 || (intervals == 1 && rises == 1))
            && rising
                .last()
                .is_some_and(|k| 2 * k >= intervals.saturating_sub(1));
        let first = r.i64("first_alloc_ts").unwrap_or(0);
        let last = r.i64("last_alloc_ts").unwrap_or(0);
        // Without steps, growth is what was allocated once the pool recycled memory (after its
        // first free: the warm-up is over) and is still held at the end, when it is large
        // enough to matter next to the pool's peak; memory kept from the warm-up is resident.
        // HAL blocks without an owner include the segments the framework pools of the same
        // process and device reserve (their cache, which grows as they warm up): only what is
        // held beyond the pools' highest reservation can be growth of another HAL user.
        let late = r.i64("late_bytes").unwrap_or(0);
        let late = if pool == "HAL" && owner == "HAL" {
            (late - framework_reserved(d, pid, &dev)).max(0)
        } else {
            late
        };
        let floor = late_floor(d, pid, &dev, &pool);
        let by_time = !has_steps && late >= floor;
        let nested = pool == "HAL" && owner.starts_with("CANN@APP") && framework_dev.contains(&dev);
        if nested || !(by_steps || by_time) {
            // A pool that never released anything in the data has no steady state to measure
            // growth against: memory it kept allocating over most of the run may be a leak or
            // a loading phase, and the data cannot tell which.
            let spread = (last - first) as f64 > 0.5 * span as f64;
            if !has_steps
                && !nested
                && r.i64("first_free_ts").is_none()
                && r.i64("blocks").unwrap_or(0) >= 3
                && spread
                && bytes >= floor
            {
                let mut f = cannot(
                    4,
                    &format!(
                        "whether {} on device {dev} grows ({} held, allocated from {} to {}, never released)",
                        if owner == pool { format!("{pool} memory") } else { owner.clone() },
                        fmt_bytes(bytes),
                        b.ts(first),
                        b.ts(last)
                    ),
                    "step markers, or a trace long enough for the pool to release memory",
                    "`msmemscope.step()` in the training loop, or mstx ranges named \"step start\"",
                );
                f.evidence.insert("pid".into(), json!(pid));
                f.evidence.insert("device".into(), json!(dev));
                f.evidence.insert("pool".into(), json!(pool));
                f.evidence.insert("owner".into(), json!(owner));
                f.evidence.insert("bytes".into(), json!(bytes));
                blocks.push(b.push(f));
                b.growth_unknown = true;
            }
            let counted = if nested { 0 } else { bytes };
            resident.push((
                dev,
                pool,
                owner,
                bytes,
                r.i64("blocks").unwrap_or(0),
                first,
                counted,
            ));
            continue;
        }
        // (nested reservations never reach here) a device number alone is ambiguous when
        // several processes share it
        let at = match pid {
            Some(p) if several_pids => format!("device {dev} pid {p}"),
            _ => format!("device {dev}"),
        };
        *b.leak_by_device.entry(at).or_default() += if by_steps { bytes } else { late };
        let per_step = if held.len() >= 2 {
            (held[held.len() - 1].1 - held[0].1) / (held.len() as i64 - 1)
        } else {
            0
        };
        // blocks without an owner carry the pool's name: say so rather than repeat the pool
        let who = if owner == pool {
            format!("{pool} memory without an owner")
        } else {
            owner.clone()
        };
        let mut f = finding(
            "leak",
            if by_steps {
                Severity::Error
            } else {
                Severity::Warning
            },
            4,
            if by_steps {
                format!(
                    "Leak on device {dev} ({pool}): {who} holds {} and grows",
                    fmt_bytes(bytes)
                )
            } else {
                format!(
                    "Possible leak on device {dev} ({pool}): {who} still holds {} allocated after the warm-up",
                    fmt_bytes(late)
                )
            },
            if by_steps {
                format!(
                    "{who} keeps {} in {} block(s) that are never released; what it holds at the end of each complete step never goes down and rose in {rises} of the {} step-to-step intervals (by {} per step on average).",
                    fmt_bytes(bytes),
                    r.s("blocks"),
                    held.len() - 1,
                    fmt_bytes(per_step)
                )
            } else {
                format!(
                    "{who} keeps {} in {} block(s) never released; {} of it was allocated after the pool first released memory ({}: its warm-up was over), the last at {}. Without step markers memq cannot tell a leak from a cache that fills once and stays.",
                    fmt_bytes(bytes),
                    r.s("blocks"),
                    fmt_bytes(late),
                    r.i64("first_free_ts").map(|t| b.ts(t)).unwrap_or_default(),
                    b.ts(last)
                )
            },
        );
        f.evidence.insert("pid".into(), json!(pid));
        f.evidence.insert("device".into(), json!(dev));
        f.evidence.insert("pool".into(), json!(pool));
        f.evidence.insert("owner".into(), json!(owner));
        f.evidence
            .insert("owner_group".into(), json!(r.s("owner_group")));
        f.evidence.insert("bytes".into(), json!(bytes));
        f.evidence.insert("late_bytes".into(), json!(late));
        f.evidence.insert("blocks".into(), json!(r.i64("blocks")));
        f.evidence
            .insert("stack_top".into(), json!(r.str("stack_top")));
        f.evidence.insert("first_alloc_ts".into(), json!(first));
        f.evidence.insert("last_alloc_ts".into(), json!(last));
        f.evidence.insert(
            "held_per_step".into(),
            Value::Array(
                held.iter()
                    .map(|(s, h)| json!({"step": s, "held_bytes": h}))
                    .collect(),
            ),
        );
        f.evidence
            .insert("growth_per_step_bytes".into(), json!(per_step));
        if held.is_empty() {
            f.evidence_text.push(format!(
                "held at the end: {} in {} block(s), {} of it allocated after the pool's first free at {}",
                fmt_bytes(bytes),
                r.s("blocks"),
                fmt_bytes(late),
                r.i64("first_free_ts").map(|t| b.ts(t)).unwrap_or_default()
            ));
        } else {
            f.evidence_text.push(format!(
                "held at the end of each complete step: {}",
                held.iter()
                    .map(|(s, h)| format!("step {s}: {}", fmt_bytes(*h)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        f.evidence_text.push(format!(
            "first allocated {}, last {}",
            b.ts(first),
            b.ts(last)
        ));
        match r.str("stack_top") {
            Some(s) if !s.is_empty() => f.evidence_text.push(format!("allocated at {s}")),
            _ => f.evidence_text.push("no call stack on these blocks".into()),
        }
        f.advice.push(if by_steps {
            format!("Find where {who} keeps a reference each step (a list that grows, a tensor kept with its graph: store `loss.item()`, not `loss`).")
        } else {
            format!("Find what keeps the late blocks of {who} alive (a list that grows, a tensor kept with its graph, a cache without a bound); the call stacks of these blocks name the line.")
        });
        if !by_steps {
            f.advice.push(
                "Mark the steps (`msmemscope.step()` in the training loop) so that memq can check whether what is held grows step after step.".into(),
            );
        }
        if r.str("stack_top").is_none() {
            f.advice.push(
                "Collect Python stacks (`--call-stack python:50`) to see the allocating line."
                    .into(),
            );
        }
        leak_rows.push(vec![
            dev.clone(),
            pool.clone(),
            owner.clone(),
            fmt_bytes(bytes),
            r.s("blocks"),
            fmt_bytes(per_step),
        ]);
        blocks.push(b.push(f));
    }
    if leak_rows.is_empty() && !b.growth_unknown {
        let mut f = finding(
            "no_leak",
            Severity::Ok,
            4,
            "No growing memory".into(),
            if has_steps {
                "No owner's held memory grows from step to step; what stays to the end was allocated once (resident).".into()
            } else {
                "No owner holds memory allocated all across the run; what stays to the end was allocated once.".into()
            },
        );
        f.evidence
            .insert("resident_owners".into(), json!(resident.len()));
        blocks.push(b.push(f));
    }
    if !resident.is_empty() {
        let total: i64 = resident.iter().map(|r| r.6).sum();
        let mut f = finding(
            "resident",
            Severity::Info,
            4,
            format!("Resident memory held to the end: {}", fmt_bytes(total)),
            "Memory allocated once and kept until the end (weights, optimizer state, communication buffers): it sets the floor of the curve but does not grow, so it is not a leak by itself.".into(),
        );
        f.evidence.insert("bytes".into(), json!(total));
        f.evidence.insert("owners".into(), json!(resident.len()));
        let mut top = resident.clone();
        top.sort_by_key(|r| std::cmp::Reverse(r.3));
        f.evidence.insert(
            "largest".into(),
            Value::Array(
                top.iter()
                    .take(5)
                    .map(|r| json!({"device": r.0, "pool": r.1, "owner": r.2, "bytes": r.3, "blocks": r.4}))
                    .collect(),
            ),
        );
        for r in top.iter().take(3) {
            f.evidence_text.push(format!(
                "device {} {} {}: {} in {} block(s)",
                r.0,
                r.1,
                r.2,
                fmt_bytes(r.3),
                r.4
            ));
        }
        blocks.push(b.push(f));
    }
    if stock_total > 0 {
        blocks.push(Block::Text(format!(
            "Stock memory (allocated before collection started, {}) is excluded from leak verdicts.",
            fmt_bytes(stock_total)
        )));
    }
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
