//! The verdict: the problems in order and what to do first.

use super::*;

pub(super) fn verdict(b: &Builder) -> Verdict {
    let mut problems: Vec<&Finding> = b
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Warning)
        .collect();
    problems.sort_by(|a, z| z.severity.cmp(&a.severity).then(a.section.cmp(&z.section)));
    let m = &b.metrics;
    let peak = m
        .peak_bytes
        .map(|p| {
            format!(
                "peak {} ({})",
                fmt_bytes(p),
                m.peak_where.clone().unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "no peak measured".into());
    let severity = problems.first().map(|f| f.severity).unwrap_or(Severity::Ok);
    let summary = if problems.is_empty() {
        format!(
            "{}; {peak}{}.",
            if b.growth_unknown {
                if b.d.has_memscope() {
                    "No out-of-memory event or fragmentation problem found; whether memory grows cannot be concluded from this input (see the leaks section)"
                } else {
                    "No out-of-memory event found; whether memory grows cannot be concluded from this input (see the traces section)"
                }
            } else {
                "No leak, out-of-memory event or fragmentation problem found"
            },
            m.cached_free_bytes
                .filter(|c| *c > 0)
                .map(|c| format!(
                    ", {} cached free on {} (not fragmentation)",
                    fmt_bytes(c),
                    m.cached_free_where.as_deref().unwrap_or("one device")
                ))
                .unwrap_or_default()
        )
    } else {
        let names: Vec<String> = problems.iter().take(4).map(|f| f.title.clone()).collect();
        format!(
            "{} problem(s): {}. {peak}{}.",
            problems.len(),
            names.join("; "),
            match (m.leak_bytes, &m.leak_where) {
                (Some(l), Some(w)) if l > 0 =>
                    format!(", {} growing without return on {w}", fmt_bytes(l)),
                _ => String::new(),
            }
        )
    };
    let mut actions = Vec::new();
    for f in &problems {
        if let Some(a) = f.advice.first() {
            if !actions.contains(a) {
                actions.push(a.clone());
            }
        }
        if actions.len() == 3 {
            break;
        }
    }
    // fill with what would make the diagnosis possible: one action per thing to collect,
    // naming everything it would let memq conclude (one device or many)
    let mut wanted: Vec<(&CannotConclude, Vec<&str>)> = Vec::new();
    // what the analyses needed (sections after the sources) before what the dump lacks in general
    let mut asking: Vec<&Finding> = b.findings.iter().collect();
    asking.sort_by_key(|f| f.section <= 1);
    for f in asking {
        let Some(c) = &f.cannot_conclude else {
            continue;
        };
        let what = f
            .evidence
            .get("what")
            .and_then(|v| v.as_str())
            .unwrap_or("more");
        match wanted
            .iter_mut()
            .find(|(w, _)| w.missing == c.missing && w.collect_with == c.collect_with)
        {
            Some((_, whats)) => whats.push(what),
            None => wanted.push((c, vec![what])),
        }
    }
    for (c, whats) in wanted {
        if actions.len() >= 3 {
            break;
        }
        let action = format!(
            "Collect {} ({}) to conclude {}.",
            c.missing,
            c.collect_with,
            whats.join("; ")
        );
        if !actions.contains(&action) {
            actions.push(action);
        }
    }
    if actions.is_empty() {
        actions.push("Nothing urgent: keep this report as the baseline and gate regressions with `memq check` in CI.".into());
    }
    Verdict {
        severity,
        summary,
        actions,
    }
}
