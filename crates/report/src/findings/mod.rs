//! The report's sections: the findings of view `findings` placed where they belong, with the
//! tables and charts that show their evidence, the cards and the verdict (docs/report.md lists
//! the kinds).
//!
//! The judgement itself is SQL: each rule is a documented `-- @part findings` file of its
//! format's library (`leak_findings.sql`, `cached_findings.sql`, `snap_findings.sql`, …), so
//! the report, `memq check`, the shell, Python and the web explorer read one source of truth.
//! What stays here describes rather than judges: the breakdown at each peak, the comparison of
//! two snapshots, "no OOM" when no rule found one, and runs of alike findings of several
//! devices shown once.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::*;

mod curves;
mod frag;
mod leaks;
mod oom;
mod owners;
mod snapshots;
mod sources;
mod traces;
mod verdict;

use curves::*;
use frag::*;
use leaks::*;
use oom::*;
use owners::*;
use snapshots::*;
use sources::*;
use traces::*;
use verdict::*;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Ok,
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// What the data lacks for a conclusion, and how to collect it.
#[derive(Debug, Clone, Serialize)]
pub struct CannotConclude {
    pub missing: String,
    pub collect_with: String,
}

/// One finding: problem → evidence → advice.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: String,
    pub severity: Severity,
    pub section: u8,
    pub title: String,
    pub problem: String,
    pub evidence: Map<String, Value>,
    /// The evidence in words, one line each (figures, times, owners, frames).
    pub evidence_text: Vec<String>,
    pub advice: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot_conclude: Option<CannotConclude>,
    /// Where, as the cards and `memq check` name it (view findings' `place`), for the cards.
    #[serde(skip)]
    pub place: Option<String>,
    /// The finding's figure (view findings' `bytes`), for the cards.
    #[serde(skip)]
    pub bytes: Option<i64>,
}

fn finding(kind: &str, severity: Severity, section: u8, title: String, problem: String) -> Finding {
    Finding {
        kind: kind.into(),
        severity,
        section,
        title,
        problem,
        evidence: Map::new(),
        evidence_text: Vec::new(),
        advice: Vec::new(),
        cannot_conclude: None,
        place: None,
        bytes: None,
    }
}

/// The fixed number of a section (the JSON's `section`) from its id in view findings.
fn section_number(id: &str) -> u8 {
    match id {
        "sources" => 1,
        "curves" => 2,
        "owners" => 3,
        "leaks" => 4,
        "oom" => 5,
        "fragmentation" => 6,
        "snapshots" => 7,
        _ => 8,
    }
}

fn severity(s: &str) -> Severity {
    match s {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        "info" => Severity::Info,
        _ => Severity::Ok,
    }
}

/// The rows of view findings of one section, in their order.
fn section_rows<'d>(d: &'d Data, section: &'static str) -> impl Iterator<Item = Row<'d>> {
    d.findings
        .iter()
        .filter(move |r| r.str("section") == Some(section))
}

/// A row of view findings as a [`Finding`].
fn from_row(r: Row<'_>) -> Finding {
    let lines = |c: &str| -> Vec<String> {
        r.str(c)
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    };
    let mut f = finding(
        &r.s("kind"),
        severity(&r.s("severity")),
        section_number(&r.s("section")),
        r.s("title"),
        r.s("problem"),
    );
    if let Some(Value::Object(m)) = r.str("figures").and_then(|t| serde_json::from_str(t).ok()) {
        f.evidence = m;
    }
    f.place = r.str("place").map(str::to_string);
    f.bytes = r.i64("bytes");
    f.evidence_text = lines("evidence");
    f.advice = lines("advice");
    if let (Some(missing), Some(collect_with)) = (r.str("missing"), r.str("collect_with")) {
        f.cannot_conclude = Some(CannotConclude {
            missing: missing.into(),
            collect_with: collect_with.into(),
        });
    }
    f
}

fn table(caption: &str, headers: &[&str], rows: Vec<Vec<String>>) -> Block {
    Block::Table(Table {
        caption: caption.into(),
        headers: headers.iter().map(|s| s.to_string()).collect(),
        rows,
    })
}

fn ob(v: Option<i64>) -> String {
    v.map(fmt_bytes).unwrap_or_else(|| "—".into())
}

fn short_source(s: &str) -> String {
    // the device folder says more than the long dump name
    let parts: Vec<&str> = s.split('/').collect();
    if let Some(i) = parts.iter().position(|p| p.starts_with("device_")) {
        return format!("{}/{}", parts[i], parts.last().unwrap_or(&""));
    }
    parts.last().unwrap_or(&s).to_string()
}

/// A series key.
type Key = (String, i64, String, String);

struct Builder<'a> {
    d: &'a Data,
    findings: Vec<Finding>,
    sections: Vec<Section>,
    metrics: Metrics,
    start: Option<i64>,
    /// Growing bytes and cached free bytes per device ("device D" or "SNAPSHOT device D"):
    /// the cards and `memq check` give the device with the most, and say which.
    leak_by_device: std::collections::BTreeMap<String, i64>,
    cached_by_device: std::collections::BTreeMap<String, i64>,
    /// Some held memory could not be judged (a cannot-conclude finding says which).
    growth_unknown: bool,
}

/// The largest value of a per-device map and its device.
fn worst(by_device: &std::collections::BTreeMap<String, i64>) -> (Option<i64>, Option<String>) {
    match by_device
        .iter()
        .max_by_key(|(k, v)| (**v, std::cmp::Reverse((*k).clone())))
    {
        Some((k, v)) => (Some(*v), Some(k.clone())),
        None => (None, None),
    }
}

impl Builder<'_> {
    fn push(&mut self, f: Finding) -> Block {
        self.findings.push(f);
        Block::Finding(self.findings.len() - 1)
    }
    /// The rows of view findings of one section, in their order.
    /// Pushes the findings of one section (view findings) and gives their blocks.
    fn push_section(&mut self, section: &'static str) -> Vec<Block> {
        self.push_rows(section, |_| true)
    }
    /// The findings `blocks` show.
    fn shown<'s>(&'s self, blocks: &'s [Block]) -> impl Iterator<Item = &'s Finding> {
        blocks.iter().filter_map(|b| match b {
            Block::Finding(i) => self.findings.get(*i),
            _ => None,
        })
    }
    /// Pushes the findings of one section that `keep` selects, in their order.
    fn push_rows(&mut self, section: &'static str, keep: impl Fn(Row<'_>) -> bool) -> Vec<Block> {
        let found: Vec<Finding> = section_rows(self.d, section)
            .filter(|r| keep(*r))
            .map(from_row)
            .collect();
        found.into_iter().map(|f| self.push(f)).collect()
    }
    fn ts(&self, ts: i64) -> String {
        fmt_ts(ts, self.start)
    }
    fn rel_s(&self, ts: i64) -> f64 {
        (ts - self.start.unwrap_or(ts)) as f64 / 1e9
    }
}

/// Builds the report from the gathered rows.
pub fn build(d: &Data, input: &str) -> Report {
    let mut b = Builder {
        d,
        findings: Vec::new(),
        sections: Vec::new(),
        metrics: Metrics::default(),
        start: d.run_start(),
        leak_by_device: Default::default(),
        cached_by_device: Default::default(),
        growth_unknown: false,
    };
    sources_section(&mut b);
    if d.has_memscope() {
        curve_section(&mut b);
        owners_section(&mut b);
        leak_section(&mut b);
    }
    oom_section(&mut b);
    frag_section(&mut b);
    if d.has_snapshot() {
        snapshot_section(&mut b);
    }
    if d.has_trace() {
        trace_section(&mut b);
    }
    if d.has_memscope() {
        // growth is measurable on msMemScope events: 0 B with no growing owner, unless some
        // held memory could not be judged (then only a leak found is a figure)
        let (bytes, at) = worst(&b.leak_by_device);
        b.metrics.leak_bytes = match bytes {
            Some(v) => Some(v),
            None if b.growth_unknown => None,
            None => Some(0),
        };
        b.metrics.leak_where = at;
    }
    (b.metrics.cached_free_bytes, b.metrics.cached_free_where) = worst(&b.cached_by_device);
    renumber(&mut b.sections, &mut b.findings);
    fold_alike(&mut b.sections, &b.findings);
    let verdict = verdict(&b);
    let mut notes = d.notes.clone();
    notes.dedup();
    Report {
        input: input.to_string(),
        generated: format!("memq {}", env!("CARGO_PKG_VERSION")),
        metrics: b.metrics,
        verdict,
        findings: b.findings,
        sections: b.sections,
        capabilities: d
            .source_caps
            .iter()
            .map(|r| Capability {
                source: r.s("source"),
                kind: r.s("kind"),
                capability: r.s("capability"),
                present: r.b("present"),
                when_missing: r.str("when_missing").map(str::to_string),
            })
            .collect(),
        notes,
    }
}

/// A finding's words and figures with its own device (and process) left out: what two
/// devices' findings share when they say the same thing with the same figures. Moments are
/// left out too (ranks in step are microseconds apart), and so the evidence lines that carry
/// them: the figures of `evidence` are compared instead.
fn without_place(f: &Finding) -> Option<String> {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let device = text(f.evidence.get("device"))?;
    let figures: Map<String, Value> = f
        .evidence
        .iter()
        .filter(|(k, _)| {
            !(k.ends_with("_ts")
                || k.ends_with("time_us")
                || matches!(
                    k.as_str(),
                    "device" | "pid" | "source" | "trigger_id" | "turning_points"
                ))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut words = format!(
        "{}|{}|{}|{}|{}|{}",
        f.kind,
        f.severity.as_str(),
        f.title,
        f.problem,
        f.advice.join("\n"),
        Value::Object(figures)
    );
    if let Some(pid) = text(f.evidence.get("pid")) {
        words = words.replace(&format!("pid {pid}"), "pid *");
    }
    for (from, to) in [
        ("device ", "device *"),
        ("Device ", "Device *"),
        ("device_", "device_*"),
    ] {
        words = words.replace(&format!("{from}{device}"), to);
    }
    Some(words)
}

/// Folds a run of findings that say the same thing, with the same figures, of different
/// devices (eight ranks of one job, each leaking 12 MiB): the first is shown, then one line
/// gives the others' titles. The JSON keeps every finding with its own device.
fn fold_alike(sections: &mut [Section], findings: &[Finding]) {
    for s in sections.iter_mut() {
        let mut out: Vec<Block> = Vec::new();
        let mut run: Vec<usize> = Vec::new();
        let flush = |run: &mut Vec<usize>, out: &mut Vec<Block>| {
            let Some(&first) = run.first() else {
                return;
            };
            out.push(Block::Finding(first));
            if run.len() > 1 {
                let titles: Vec<&str> = run[1..]
                    .iter()
                    .map(|i| findings[*i].title.as_str())
                    .collect();
                out.push(Block::Text(format!(
                    "The same, with the same figures: {} (each device's evidence and moments are in the JSON).",
                    titles.join("; ")
                )));
            }
            run.clear();
        };
        for block in std::mem::take(&mut s.blocks) {
            match block {
                Block::Finding(i) => {
                    let alike = run.first().is_some_and(|&r| {
                        let (a, b) = (without_place(&findings[r]), without_place(&findings[i]));
                        a.is_some() && a == b
                    });
                    if !alike {
                        flush(&mut run, &mut out);
                    }
                    run.push(i);
                }
                other => {
                    flush(&mut run, &mut out);
                    out.push(other);
                }
            }
        }
        flush(&mut run, &mut out);
        s.blocks = out;
    }
}

/// Numbers the sections present in reading order (a snapshot's page has no sections 2–4) and
/// makes every "section N" of the findings' text follow. A finding's `section` stays the
/// section's fixed number (the JSON's stable key; `sections` maps it to the shown title).
fn renumber(sections: &mut [Section], findings: &mut [Finding]) {
    let mut map = Vec::new();
    for (i, s) in sections.iter_mut().enumerate() {
        let new = i as u8 + 1;
        if let Some((old, rest)) = s.title.split_once(". ") {
            if let Ok(old) = old.parse::<u8>() {
                map.push((old, new));
                s.title = format!("{new}. {rest}");
            }
        }
    }
    // in two passes through a marker, so that 4 → 2 is not then taken for 2 → 1
    let rewrite = |text: &mut String| {
        for (old, new) in &map {
            *text = text.replace(&format!("section {old}"), &format!("section \u{0}{new}"));
        }
        *text = text.replace('\u{0}', "");
    };
    for f in findings.iter_mut() {
        rewrite(&mut f.title);
        rewrite(&mut f.problem);
        f.evidence_text.iter_mut().for_each(&rewrite);
        f.advice.iter_mut().for_each(&rewrite);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(device: &str, bytes: &str) -> Finding {
        let mut f = finding(
            "leak",
            Severity::Error,
            4,
            format!("Leak on device {device} (PTA): PTA@x holds {bytes} and grows"),
            format!("PTA@x keeps {bytes} in 6 block(s)."),
        );
        f.evidence.insert("device".into(), json!(device));
        f.evidence_text.push(format!(
            "held at the end of each complete step on device {device}"
        ));
        f
    }

    #[test]
    fn alike_findings_of_several_devices_are_shown_once() {
        let findings = vec![
            leak("0", "12.00 MiB"),
            leak("1", "12.00 MiB"),
            leak("2", "12.00 MiB"),
            leak("3", "24.00 MiB"),
        ];
        let mut sections = vec![Section {
            id: "leaks".into(),
            title: "4. Leaks".into(),
            blocks: (0..4).map(Block::Finding).collect(),
        }];
        fold_alike(&mut sections, &findings);
        let shown: Vec<String> = sections[0]
            .blocks
            .iter()
            .map(|b| match b {
                Block::Finding(i) => format!("finding {i}"),
                Block::Text(t) => t.clone(),
                _ => String::new(),
            })
            .collect();
        // device 3 holds other figures: its own finding, never folded
        assert_eq!(
            shown,
            [
                "finding 0",
                "The same, with the same figures: Leak on device 1 (PTA): PTA@x holds 12.00 MiB and grows; Leak on device 2 (PTA): PTA@x holds 12.00 MiB and grows (each device's evidence and moments are in the JSON).",
                "finding 3",
            ]
        );
    }
}
