//! The report as JSON with stable keys (docs/report.md, "JSON").

use serde_json::{json, Value};

use super::Report;

/// Version of the JSON layout; bumped only when a key changes meaning or disappears.
pub const SCHEMA: u32 = 1;

pub fn value(r: &Report) -> Value {
    json!({
        "memq_report": SCHEMA,
        "input": r.input,
        "generated_by": r.generated,
        "verdict": {
            "severity": r.verdict.severity,
            "summary": r.verdict.summary,
            "actions": r.verdict.actions,
        },
        "metrics": r.metrics,
        "findings": r.findings.iter().map(|f| {
            let mut v = json!({
                "kind": f.kind,
                "severity": f.severity,
                "section": f.section,
                "title": f.title,
                "problem": f.problem,
                "evidence": f.evidence,
                "evidence_text": f.evidence_text,
                "advice": f.advice,
            });
            if let (Some(c), Some(o)) = (&f.cannot_conclude, v.as_object_mut()) {
                o.insert("cannot_conclude".into(), json!({"missing": c.missing, "collect_with": c.collect_with}));
            }
            v
        }).collect::<Vec<_>>(),
        "sections": r.sections.iter().map(|s| json!({"id": s.id, "title": s.title})).collect::<Vec<_>>(),
        "capabilities": r.capabilities,
        "notes": r.notes,
    })
}

pub fn render(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(&value(r)).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}
