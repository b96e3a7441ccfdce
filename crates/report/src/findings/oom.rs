//! (5) out of memory.

use super::*;

pub(super) fn oom_label(rule: &str) -> (&'static str, &'static str) {
    match rule {
        "single_huge_request" => (
            "single huge request",
            "Find the call that asked for it (trigger stack) and make it smaller: a shape bug, an unchunked operation, a batch or sequence too large.",
        ),
        "over_large_request" => (
            "single over-large request",
            "Plenty of memory was free, yet one request exceeded it: shrink or chunk that request.",
        ),
        "top_owner" => (
            "model states / KV cache / activations too large",
            "Shard or offload the largest owner (FSDP/ZeRO for weights and optimizer state, smaller KV cache, activation checkpointing for activations).",
        ),
        "same_stack_repeated" => (
            "repeated allocation from one site",
            "A loop allocates from the same line again and again: release the tensors inside the loop or pre-allocate once.",
        ),
        "chain_of_large_allocations" => (
            "a chain of large allocations",
            "Several large allocations in a row exhausted memory: reduce the batch or free intermediates earlier.",
        ),
        "accumulation" => (
            "accumulation (leak or cache growth)",
            "Memory grew step after step until it ran out: fix the growing owner of section 4.",
        ),
        "fragmentation" => (
            "fragmentation or pool-expansion failure",
            "Enough memory was free but not in one piece: set expandable_segments:True, or max_split_size_mb where expandable segments cannot be used (section 6).",
        ),
        _ => ("undetermined", "Collect OOM records with snapshots (`--analysis=oom`) to decide."),
    }
}

pub(super) fn oom_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    let triggers: Vec<Row> = d
        .oom_events
        .iter()
        .filter(|r| r.s("kind") == "trigger")
        .collect();
    for t in &triggers {
        let tid = t.i64("trigger_id");
        let dev = t.s("device");
        let req = t.i64("req_size").unwrap_or(0);
        let free = t.i64("free_mem");
        let oom_ts = t.i64("oom_ts").unwrap_or(0);
        let rules: Vec<Row> = d
            .oom_findings
            .iter()
            .filter(|r| r.i64("trigger_id") == tid && r.s("source") == t.s("source"))
            .collect();
        let yes = rules.iter().find(|r| r.s("verdict") == "yes");
        let rule = match yes {
            Some(r) => r.s("rule"),
            None if free.is_some_and(|f| req < f) => "fragmentation".into(),
            None => "undetermined".into(),
        };
        let (label, advice) = oom_label(&rule);
        let mut f = finding(
            "oom",
            Severity::Error,
            5,
            format!("OOM on device {dev}: {label}"),
            format!(
                "At {} a {} request ({}) failed{}. Verdict: {label}{}.",
                b.ts(oom_ts),
                fmt_bytes(req),
                t.s("func"),
                free.map(|f| format!(" with {} free on the device", fmt_bytes(f))).unwrap_or_default(),
                yes.map(|r| format!(" — {}", r.s("evidence"))).unwrap_or_else(|| {
                    if rule == "fragmentation" {
                        " — no rule of the OOM guide holds and the request was smaller than the free memory".into()
                    } else {
                        String::new()
                    }
                })
            ),
        );
        b.metrics.oom_events += 1;
        f.evidence.insert("pid".into(), json!(t.i64("pid")));
        f.evidence.insert("device".into(), json!(dev));
        f.evidence.insert("oom_ts".into(), json!(oom_ts));
        f.evidence.insert("func".into(), json!(t.s("func")));
        f.evidence.insert("req_size".into(), json!(req));
        f.evidence.insert("free_mem".into(), json!(free));
        f.evidence
            .insert("total_mem".into(), json!(t.i64("total_mem")));
        f.evidence
            .insert("snapshot".into(), json!(t.str("snapshot_name")));
        f.evidence.insert("verdict".into(), json!(rule));
        f.evidence.insert("verdict_label".into(), json!(label));
        f.evidence
            .insert("stack_top".into(), json!(t.str("stack_top")));
        f.evidence.insert(
            "rules".into(),
            Value::Array(
                rules
                    .iter()
                    .map(|r| json!({"priority": r.i64("priority"), "rule": r.s("rule"), "verdict": r.s("verdict"), "evidence": r.s("evidence")}))
                    .collect(),
            ),
        );
        for r in &rules {
            f.evidence_text.push(format!(
                "{} {}: {} — {}",
                r.s("priority"),
                r.s("rule"),
                r.s("verdict"),
                r.s("evidence")
            ));
        }
        if let Some(s) = t.str("stack_top") {
            f.evidence_text.push(format!("failed call at {s}"));
        }
        f.advice.push(advice.into());
        blocks.push(b.push(f));
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
    for r in d.snap_oom.iter() {
        let verdict = r.s("verdict");
        let req = r.i64("requested_bytes").unwrap_or(0);
        let label = match verdict.as_str() {
            "fragmentation" => "fragmentation: enough cached memory, no block as large",
            "single_oversized_request" => "single huge request",
            "same_stack_repeated" => "repeated allocation from one site",
            "run_of_large_allocations" => "a chain of large allocations",
            _ => "insufficient data",
        };
        let reserved = r.i64("reserved_bytes").unwrap_or(0);
        let active = r.i64("active_bytes").unwrap_or(0);
        let mut f = finding(
            "snapshot_oom",
            Severity::Error,
            5,
            format!("OOM in {} device {}: {label}", r.s("snapshot"), r.s("device")),
            format!(
                "A request of {} failed at trace entry {} with {} reserved, {} active{}; verdict: {label}.",
                fmt_bytes(req),
                r.s("seq"),
                fmt_bytes(reserved),
                fmt_bytes(active),
                r.i64("device_free").map(|f| format!(" and {} free on the device", fmt_bytes(f))).unwrap_or_default()
            ),
        );
        b.metrics.oom_events += 1;
        for c in [
            "snapshot",
            "device",
            "seq",
            "time_us",
            "requested_bytes",
            "device_free",
            "active_bytes",
            "reserved_bytes",
            "user_frame",
            "last_allocs_bytes",
            "repeated_count",
            "verdict",
            "reference_verdict",
        ] {
            let v = match r.get(c) {
                Val::Int(i) => json!(i),
                Val::Float(x) => json!(x),
                Val::Str(s) => json!(s),
                Val::Bool(x) => json!(x),
                Val::Null => Value::Null,
            };
            f.evidence.insert(c.into(), v);
        }
        f.evidence_text.push(format!(
            "last 5 allocations before it: {} ({} from one stack)",
            ob(r.i64("last_allocs_bytes")),
            r.s("repeated_count")
        ));
        if let Some(u) = r.str("user_frame") {
            f.evidence_text.push(format!("failed request from {u}"));
        }
        if reserved - active >= req && req > 0 {
            f.evidence_text.push(format!(
                "{} was reserved but not active — more than the request: the free memory was not in one piece",
                fmt_bytes(reserved - active)
            ));
            f.advice.push(
                "Set expandable_segments:True so cached segments can grow in place (section 6)."
                    .into(),
            );
        }
        f.advice.push(match verdict.as_str() {
            "single_oversized_request" => "Shrink or chunk the failing request.".into(),
            "same_stack_repeated" => "Release tensors inside the loop that allocates them.".into(),
            "run_of_large_allocations" => "Reduce the batch or free intermediates earlier.".into(),
            _ => "Record a longer history (max_entries) to see the allocations before the OOM."
                .to_string(),
        });
        blocks.push(b.push(f));
    }
    if triggers.is_empty() && d.snap_oom.is_empty() {
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
