//! The judgement: problem → evidence → advice, with a severity, from the rows of [`Data`];
//! and the layout of the report's sections (docs/report.md lists the kinds).
//!
//! Rules that go beyond a threshold (docs/formats/memscope.md §6.16, docs/formats/snapshot.md §6.2):
//! - a leak is memory held to the end that *grows* step after step (held bytes at the end of
//!   every complete step never decreasing and rising more than once: steady or periodic);
//!   memory allocated once and kept is resident;
//!   stock memory (allocated before collection) is never a leak verdict;
//! - reserved-but-free memory of a caching allocator is cached, not fragmented: whole free
//!   segments go back with `empty_cache()`. Fragmentation is free memory that cannot serve a
//!   request as large as its segment's largest hole: Σ (free − largest free block) per segment,
//!   as a share of all free memory;
//! - the snapshot peak is the true active peak (MemoryViz's method), not the reference's net
//!   segment growth.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::*;

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
    }
}

fn cannot(section: u8, what: &str, missing: &str, collect_with: &str) -> Finding {
    let mut f = finding(
        "cannot_conclude",
        Severity::Info,
        section,
        format!("Cannot conclude {what}"),
        format!("cannot conclude {what}: missing {missing} — collect with {collect_with}"),
    );
    f.evidence.insert("what".into(), json!(what));
    f.cannot_conclude = Some(CannotConclude {
        missing: missing.into(),
        collect_with: collect_with.into(),
    });
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
        f.evidence_text.iter_mut().for_each(|t| rewrite(t));
        f.advice.iter_mut().for_each(|t| rewrite(t));
    }
}

// ---------------------------------------------------------------- (1) sources

fn sources_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    if let Some((t0, t1)) = d.span {
        blocks.push(Block::Text(format!(
            "{} from {} to {} ({}).",
            if d.has_memscope() {
                "msMemScope data"
            } else {
                "Memory events of the traces"
            },
            fmt_epoch_ns(t0),
            fmt_epoch_ns(t1),
            fmt_dur_ns(t1 - t0)
        )));
    }
    if !d.sources.is_empty() {
        blocks.push(table(
            "Inputs by kind",
            &["kind", "generation", "files", "rows", "rejects", "size"],
            d.sources
                .iter()
                .map(|r| {
                    vec![
                        r.s("kind"),
                        r.s("generation"),
                        r.s("files"),
                        r.s("rows"),
                        r.s("rejects"),
                        ob(r.i64("size_bytes")),
                    ]
                })
                .collect(),
        ));
    }
    if d.has_memscope() {
        blocks.push(table(
            "What each dump holds (view capabilities)",
            &["dump", "gen", "rows", "procs", "devices", "pools"],
            d.capabilities
                .iter()
                .map(|r| {
                    vec![
                        short_source(&r.s("source")),
                        r.s("generation"),
                        r.s("rows"),
                        r.s("processes"),
                        r.s("devices"),
                        r.s("pools"),
                    ]
                })
                .collect(),
        ));
    }
    blocks.extend(capability_blocks(&d.source_caps));
    if d.has_memscope() {
        let any = |c: &str| d.capabilities.iter().any(|r| r.b(c));
        // (capability, what cannot be concluded without it, what is missing, how to collect it)
        let needs = [
            (
                "has_owners",
                "which owner (framework component) holds the memory",
                "owners on MALLOC rows",
                "`--analysis=decompose` (config.json analysisType bit 1)",
            ),
            (
                "has_py_stacks",
                "which line of user code allocated the memory",
                "Python call stacks",
                "`--call-stack python:50` (config.json enablePyStack)",
            ),
            (
                "has_alloc_free",
                "block lifetimes (leaks, live memory)",
                "alloc/free pairs (MALLOC and FREE rows)",
                "alloc and free events collected and dumped (config.json eventType / dumpEventType bits 0 and 1)",
            ),
        ];
        for (capability, question, missing, collect) in needs {
            if !any(capability) {
                blocks.push(b.push(cannot(1, question, missing, collect)));
            }
        }
        // A dump of MALLOC rows only, or FREE rows only (dumpEventType): none of its blocks
        // can be paired, so whether its memory grows is unknown, even beside paired dumps.
        let unpaired: Vec<String> = d
            .capabilities
            .iter()
            .filter(|r| matches!(r.str("pairing"), Some("malloc_only" | "free_only" | "none")))
            .map(|r| {
                format!(
                    "{} ({})",
                    short_source(&r.s("source")),
                    r.s("pairing").replace('_', " ")
                )
            })
            .collect();
        if !unpaired.is_empty() && any("has_alloc_free") {
            let mut f = cannot(
                1,
                &format!("whether memory grows in {}", unpaired.join(", ")),
                "both MALLOC and FREE rows in each dump",
                "alloc and free events dumped (config.json dumpEventType: alloc,free)",
            );
            f.evidence.insert("sources".into(), json!(unpaired));
            blocks.push(b.push(f));
        }
        if !unpaired.is_empty() {
            b.growth_unknown = true;
        }
        if !any("has_oom") && d.snap_oom.is_empty() {
            // a note on what the dump could hold, not a question this run raised
            let f = cannot(
                1,
                "why an out-of-memory error happened, should one happen",
                "OOM records (OOM_DETAIL rows)",
                "`--analysis=oom` (config.json analysisType bit 3), which also takes the OOM_Snapshot",
            );
            blocks.push(b.push(f));
        }
        if any("has_oom") && !any("has_snapshots") {
            let f = cannot(
                5,
                "how much device memory was free at the OOM",
                "SNAPSHOT records",
                "`--analysis=oom` (takes an OOM_Snapshot before the trigger)",
            );
            blocks.push(b.push(f));
        }
        if !d.step_evidence() {
            let missing = if any("has_steps") {
                "two complete steps (the dump marks steps but closes fewer than two)"
            } else {
                "step markers"
            };
            let f = cannot(
                4,
                "growth per step (leak algorithm A)",
                missing,
                "`msmemscope.step()` in the training loop, or mstx ranges named \"step start\"",
            );
            blocks.push(b.push(f));
        }
    }
    for r in d.snap_peak.iter() {
        if r.i64("entries").unwrap_or(0) == 0 {
            let mut f = cannot(
                7,
                &format!(
                    "the memory timeline and true peak of {} device {}",
                    r.s("snapshot"),
                    r.s("device")
                ),
                "trace entries (only the final allocator state was dumped)",
                "`torch.cuda.memory._record_memory_history(max_entries=100000)` (torch_npu: `torch_npu.npu.memory._record_memory_history`) before the run, then `_dump_snapshot()`",
            );
            f.evidence.insert("snapshot".into(), json!(r.s("snapshot")));
            f.evidence.insert("device".into(), json!(r.i64("device")));
            blocks.push(b.push(f));
        }
    }
    if d.rejects > 0 {
        let mut f = finding(
            "rejects",
            Severity::Warning,
            1,
            format!("{} record(s) could not be parsed", d.rejects),
            "Some input records were unreadable; figures leave them out.".into(),
        );
        f.evidence.insert("rejects".into(), json!(d.rejects));
        f.advice
            .push("Look at them: `memq sql INPUT -e \"SELECT * FROM rejects\"`.".into());
        blocks.push(b.push(f));
    }
    b.metrics.devices = {
        let mut devs: Vec<String> = d
            .peaks
            .iter()
            .filter(|r| crate::guide::counts_as_device(&r.s("pool"), &r.s("device")))
            .map(|r| format!("m{}", r.s("device")))
            .chain(
                d.snap_overview
                    .iter()
                    .map(|r| format!("s{}/{}", r.s("snapshot"), r.s("device"))),
            )
            .chain(
                d.trace_peaks
                    .iter()
                    .map(|r| format!("t{}/{}", r.s("source"), r.s("device"))),
            )
            .collect();
        devs.sort();
        devs.dedup();
        devs.len() as i64
    };
    b.sections.push(Section {
        id: "sources".into(),
        title: "1. Sources and capabilities".into(),
        blocks,
    });
}

/// The capability words of view source_capabilities, in the order the matrix shows them.
const CAPABILITIES: &[&str] = &[
    "timeline",
    "block_lifetimes",
    "full_history",
    "stacks",
    "owners",
    "labels",
    "ops",
    "steps",
    "reserved",
    "allocator_state",
    "oom",
    "host_memory",
    "annotations",
];

/// What every input can answer (a matrix: yes, no, or blank where its format cannot carry the
/// fact) and, for what is absent, what cannot be concluded and how to collect it.
fn capability_blocks(caps: &Rows) -> Vec<Block> {
    use std::collections::BTreeMap;
    if caps.is_empty() {
        return Vec::new();
    }
    let shown: Vec<&str> = CAPABILITIES
        .iter()
        .copied()
        .filter(|c| caps.iter().any(|r| r.s("capability") == *c))
        .collect();
    let mut by_source: BTreeMap<String, (String, BTreeMap<String, bool>)> = BTreeMap::new();
    // (capability, what is missing) -> the inputs that lack it
    let mut missing: BTreeMap<(usize, String), Vec<String>> = BTreeMap::new();
    for r in caps.iter() {
        let source = r.s("source");
        let capability = r.s("capability");
        let entry = by_source
            .entry(source.clone())
            .or_insert_with(|| (r.s("kind"), BTreeMap::new()));
        entry.1.insert(capability.clone(), r.b("present"));
        if !r.b("present") {
            let order = shown.iter().position(|c| *c == capability).unwrap_or(usize::MAX);
            missing
                .entry((order, r.s("when_missing")))
                .or_default()
                .push(short_source(&source));
        }
    }
    let mut headers = vec!["input", "kind"];
    headers.extend(shown.iter().map(|c| *c));
    let header_words: Vec<String> = headers.iter().map(|h| h.replace('_', " ")).collect();
    let header_refs: Vec<&str> = header_words.iter().map(String::as_str).collect();
    let rows = by_source
        .iter()
        .map(|(source, (kind, has))| {
            let mut row = vec![short_source(source), kind.clone()];
            row.extend(shown.iter().map(|c| match has.get(*c) {
                Some(true) => "yes".to_string(),
                Some(false) => "no".to_string(),
                None => String::new(),
            }));
            row
        })
        .collect();
    let mut blocks = vec![table(
        "What each input can answer (view source_capabilities; blank: the format cannot carry it)",
        &header_refs,
        rows,
    )];
    if !missing.is_empty() {
        blocks.push(table(
            "What the inputs cannot answer, and what to collect",
            &["missing", "inputs", "what cannot be concluded, and how to collect it"],
            missing
                .into_iter()
                .map(|((order, text), inputs)| {
                    let what = shown.get(order).map(|c| c.replace('_', " ")).unwrap_or_default();
                    let inputs = if inputs.len() > 3 {
                        format!("{} inputs", inputs.len())
                    } else {
                        inputs.join(", ")
                    };
                    vec![what, inputs, text]
                })
                .collect(),
        ));
    }
    blocks
}

// ---------------------------------------------------------------- (2) curves

/// One non-empty bucket of a curve (ns since the Unix epoch, bytes).
struct Bucket {
    t0: i64,
    t1: i64,
    min: i64,
    max: i64,
    /// The value in force at the end of the bucket.
    end: i64,
}

impl Bucket {
    fn mid(&self) -> i64 {
        self.t0 / 2 + self.t1 / 2
    }
}

/// One bucketed series of a metric.
struct Curve {
    key: Key,
    metric: String,
    /// The non-empty buckets, in time order (empty buckets, with no event, are left out).
    pts: Vec<Bucket>,
}

impl Curve {
    /// Its row of view `peaks`: the series' peak and when it happened.
    fn peak<'a>(&self, d: &'a Data) -> Option<Row<'a>> {
        d.peaks.iter().find(|r| {
            r.s("source") == self.key.0
                && r.i64("pid") == Some(self.key.1)
                && r.s("device") == self.key.2
                && r.s("pool") == self.key.3
                && r.s("metric") == self.metric
        })
    }
}

fn curves(d: &Data) -> Vec<Curve> {
    let mut out: Vec<Curve> = Vec::new();
    for r in d.curve.iter() {
        let key = (
            r.s("source"),
            r.i64("pid").unwrap_or(0),
            r.s("device"),
            r.s("pool"),
        );
        let metric = r.s("metric");
        let same = out
            .last()
            .is_some_and(|c| c.key == key && c.metric == metric);
        if !same {
            out.push(Curve {
                key: key.clone(),
                metric: metric.clone(),
                pts: Vec::new(),
            });
        }
        if r.i64("points").unwrap_or(0) == 0 {
            continue;
        }
        let (Some(t0), Some(t1)) = (r.i64("t0"), r.i64("t1")) else {
            continue;
        };
        let (Some(mn), Some(mx), Some(end)) =
            (r.i64("min_bytes"), r.i64("max_bytes"), r.i64("end_bytes"))
        else {
            continue;
        };
        if let Some(c) = out.last_mut() {
            c.pts.push(Bucket {
                t0,
                t1,
                min: mn,
                max: mx,
                end,
            });
        }
    }
    out
}

/// The primary metric of a pool: `used` for framework pools, `live` for HAL.
fn primary_metric(pool: &str) -> &'static str {
    if pool == "HAL" {
        "live"
    } else {
        "used"
    }
}

/// The shape of a curve (docs/formats/memscope.md §6.16) and its turning points
/// (index into pts).
pub fn classify(vals: &[i64]) -> (&'static str, Vec<usize>) {
    if vals.len() < 3 {
        return ("too_short", Vec::new());
    }
    let mx = *vals.iter().max().unwrap_or(&0);
    let mn = *vals.iter().min().unwrap_or(&0);
    let range = (mx - mn) as f64;
    if mx <= 0 || range <= 0.05 * mx as f64 {
        return ("plateau", Vec::new());
    }
    let thr = 0.1 * range;
    // significant moves: zig-zag of the series with a threshold
    let mut turns = Vec::new();
    let mut dir = 0i8;
    let mut ext_i = 0usize;
    for i in 1..vals.len() {
        let v = vals[i] as f64;
        let e = vals[ext_i] as f64;
        match dir {
            0 => {
                if v - e > thr {
                    dir = 1;
                    ext_i = i;
                } else if e - v > thr {
                    dir = -1;
                    ext_i = i;
                }
            }
            1 => {
                if v >= e {
                    ext_i = i;
                } else if e - v > thr {
                    turns.push(ext_i);
                    dir = -1;
                    ext_i = i;
                }
            }
            _ => {
                if v <= e {
                    ext_i = i;
                } else if v - e > thr {
                    turns.push(ext_i);
                    dir = 1;
                    ext_i = i;
                }
            }
        }
    }
    let first = vals[0] as f64;
    let last = *vals.last().unwrap_or(&0) as f64;
    let peak_i = vals.iter().position(|v| *v == mx).unwrap_or(0);
    let ups = vals.windows(2).filter(|w| w[1] > w[0]).count();
    let downs_sig = vals
        .windows(2)
        .filter(|w| (w[0] - w[1]) as f64 > thr)
        .count();
    let n = vals.len() - 1;
    if turns.len() >= 4 {
        // repeated sharp drops then climbs
        return ("sawtooth", turns);
    }
    if downs_sig == 0 && last - first > 0.5 * range {
        // never comes back down
        let shape = if ups * 4 <= n { "staircase" } else { "rising" };
        return (shape, turns);
    }
    if peak_i > 0 && peak_i < vals.len() - 1 && (mx as f64 - last) > 0.5 * range {
        return ("spike_then_drop", turns);
    }
    if last - first > 0.5 * range {
        return ("rising_with_dips", turns);
    }
    ("mixed", turns)
}

fn shape_words(shape: &str) -> (&'static str, &'static str, Severity) {
    match shape {
        "rising" => (
            "rises and does not come back down within the data",
            "whether that is a leak is decided in the leaks section, on what is held at the end of each step (or, without steps, after the warm-up), not on the curve's ends",
            Severity::Info,
        ),
        "staircase" => (
            "climbs in steps and does not come back down within the data",
            "whether that is a leak is decided in the leaks section, on what is held at the end of each step (or, without steps, after the warm-up), not on the curve's ends",
            Severity::Info,
        ),
        "rising_with_dips" => (
            "rises overall, with dips",
            "growth under normal alloc/free cycles: check the level at the end of each step (section 4)",
            Severity::Info,
        ),
        "plateau" => ("stays flat", "normal: a steady working set", Severity::Ok),
        "sawtooth" => (
            "saw-tooth: repeated climbs and drops",
            "normal alloc/free cycles; watch the amplitude (a drop to near zero with slowdowns is an internal empty_cache under pressure)",
            Severity::Ok,
        ),
        "spike_then_drop" => (
            "peaks, then falls back",
            "a transient peak: the breakdown at the peak (section 3) says what it was",
            Severity::Info,
        ),
        "too_short" => ("has too few points to judge", "—", Severity::Info),
        _ => ("moves up and down without a clear pattern", "no shape rule applies", Severity::Info),
    }
}

fn curve_section(b: &mut Builder) {
    let d = b.d;
    let cs = curves(d);
    let mut blocks = Vec::new();
    // one chart per process and device: the primary metric of every pool
    let mut devices: Vec<(i64, String)> = cs.iter().map(|c| (c.key.1, c.key.2.clone())).collect();
    devices.sort();
    devices.dedup();
    for (pid, dev) in &devices {
        let mut series = Vec::new();
        let mut markers: Vec<(f64, f64, String)> = Vec::new();
        for c in cs.iter().filter(|c| c.key.1 == *pid && &c.key.2 == dev) {
            // a series that stays at 0 B (e.g. HAL rows of device N/A) draws nothing
            if c.metric != primary_metric(&c.key.3) || c.pts.iter().all(|p| p.max <= 0) {
                continue;
            }
            series.push(Series {
                name: format!("{} {}", c.key.3, c.metric),
                points: c
                    .pts
                    .iter()
                    .map(|p| (b.rel_s(p.mid()), p.end as f64))
                    .collect(),
                band: c
                    .pts
                    .iter()
                    .map(|p| BandBucket {
                        x0: b.rel_s(p.t0),
                        x1: b.rel_s(p.t1),
                        min: p.min as f64,
                        max: p.max as f64,
                    })
                    .collect(),
                area: false,
            });
            if let Some(p) = c.peak(d) {
                let (Some(pb), Some(pt)) = (p.i64("peak_bytes"), p.i64("peak_ts")) else {
                    continue;
                };
                if c.key.3 != "HOST_PINNED" {
                    markers.push((
                        b.rel_s(pt),
                        pb as f64,
                        format!(
                            "{} peak {} at +{}",
                            c.key.3,
                            fmt_bytes(pb),
                            fmt_dur_ns(pt - b.start.unwrap_or(pt))
                        ),
                    ));
                }
            }
        }
        if series.is_empty() {
            continue;
        }
        // the highest peak first (labelled), then the others and the OOM moments
        markers.sort_by(|a, z| z.1.total_cmp(&a.1));
        let mut ooms: Vec<i64> = d
            .oom_events
            .iter()
            .filter(|r| r.i64("pid") == Some(*pid) && &r.s("device") == dev)
            .filter_map(|r| r.i64("oom_ts"))
            .collect();
        ooms.dedup();
        for t in ooms {
            markers.push((
                b.rel_s(t),
                0.0,
                format!("OOM at +{}", fmt_dur_ns(t - b.start.unwrap_or(t))),
            ));
        }
        blocks.push(Block::Chart(Chart::Line(LineChart {
            title: format!("Memory over time — device {dev} (pid {pid}); line = value at bucket end, band = min..max per bucket"),
            x_label: "time since start of the data".into(),
            x_unit: "s".into(),
            series,
            markers,
        })));
    }
    // shape per series; "highest" is the series' peak (view peaks), which a short spike
    // inside one bucket keeps, not the highest bucket end
    let mut rows = Vec::new();
    for c in cs.iter().filter(|c| c.metric == primary_metric(&c.key.3)) {
        let vals: Vec<i64> = c.pts.iter().map(|p| p.end).collect();
        let highest = c
            .peak(d)
            .and_then(|r| r.i64("peak_bytes"))
            .or_else(|| c.pts.iter().map(|p| p.max).max());
        let (shape, turns) = classify(&vals);
        let (words, meaning, sev) = shape_words(shape);
        let turning: Vec<String> = turns
            .iter()
            .take(5)
            .filter_map(|i| c.pts.get(*i))
            .map(|p| {
                format!(
                    "{} at +{}",
                    fmt_bytes(p.end),
                    fmt_dur_ns(p.mid() - b.start.unwrap_or(p.mid()))
                )
            })
            .collect();
        rows.push(vec![
            c.key.2.clone(),
            c.key.3.clone(),
            c.metric.clone(),
            shape.to_string(),
            ob(vals.first().copied()),
            ob(highest),
            ob(vals.last().copied()),
            if turning.is_empty() {
                "—".into()
            } else {
                turning.join("; ")
            },
        ]);
        if c.key.3 == "HOST_PINNED" {
            continue;
        }
        let mut f = finding(
            "curve_shape",
            sev,
            2,
            format!(
                "Device {} {}: {}",
                c.key.2,
                c.key.3,
                shape.replace('_', " ")
            ),
            format!("The {} {} curve {words}: {meaning}.", c.key.3, c.metric),
        );
        f.evidence.insert("pid".into(), json!(c.key.1));
        f.evidence.insert("device".into(), json!(c.key.2));
        f.evidence.insert("pool".into(), json!(c.key.3));
        f.evidence.insert("metric".into(), json!(c.metric));
        f.evidence.insert("shape".into(), json!(shape));
        f.evidence.insert("first_bytes".into(), json!(vals.first()));
        f.evidence.insert("max_bytes".into(), json!(highest));
        f.evidence.insert("last_bytes".into(), json!(vals.last()));
        f.evidence.insert("buckets".into(), json!(vals.len()));
        f.evidence.insert("turning_points".into(), json!(turning));
        f.evidence_text.push(format!(
            "{} buckets: first {}, highest {}, last {}",
            vals.len(),
            ob(vals.first().copied()),
            ob(highest),
            ob(vals.last().copied())
        ));
        if !turning.is_empty() {
            f.evidence_text
                .push(format!("turning points: {}", turning.join("; ")));
        }
        // only the non-trivial shapes become findings; the rest stay in the table
        if sev >= Severity::Info && shape != "too_short" {
            blocks.push(b.push(f));
        }
    }
    blocks.push(table(
        "Curve shape per pool (§6.16 of docs/formats/memscope.md)",
        &[
            "device",
            "pool",
            "metric",
            "shape",
            "first",
            "highest",
            "last",
            "turning points",
        ],
        rows,
    ));
    // reserved vs allocated per framework pool
    for (pid, dev) in &devices {
        let mut series = Vec::new();
        for c in cs.iter().filter(|c| {
            c.key.1 == *pid && &c.key.2 == dev && c.key.3 != "HAL" && c.key.3 != "HOST_PINNED"
        }) {
            if c.metric == "total" || c.metric == "used" {
                let name = if c.metric == "total" {
                    "reserved (total)"
                } else {
                    "allocated (used)"
                };
                series.push(Series {
                    name: format!("{} {name}", c.key.3),
                    points: c
                        .pts
                        .iter()
                        .map(|p| (b.rel_s(p.mid()), p.end as f64))
                        .collect(),
                    band: Vec::new(),
                    area: c.metric == "total",
                });
            }
        }
        if series.len() >= 2 {
            series.sort_by_key(|s| !s.area);
            blocks.push(Block::Chart(Chart::Line(LineChart {
                title: format!("Reserved vs allocated — device {dev} (pid {pid}); the gap is cached free memory"),
                x_label: "time since start of the data".into(),
                x_unit: "s".into(),
                series,
                markers: Vec::new(),
            })));
        }
    }
    // peaks
    let mut prow = Vec::new();
    for r in d.peaks.iter() {
        prow.push(vec![
            r.s("device"),
            r.s("pool"),
            r.s("metric"),
            ob(r.i64("peak_bytes")),
            r.i64("peak_ts").map(|t| b.ts(t)).unwrap_or_default(),
        ]);
        let pool = r.s("pool");
        let m = r.s("metric");
        if pool != "HOST_PINNED" && (m == "used" || m == "live") {
            if let Some(pb) = r.i64("peak_bytes") {
                if b.metrics.peak_bytes.is_none_or(|x| pb > x) {
                    b.metrics.peak_bytes = Some(pb);
                    b.metrics.peak_where = Some(format!("device {} {pool} {m}", r.s("device")));
                }
            }
        }
        if pool != "HOST_PINNED" && m == "total" {
            if let Some(pb) = r.i64("peak_bytes") {
                if b.metrics.reserved_bytes.is_none_or(|x| pb > x) {
                    b.metrics.reserved_bytes = Some(pb);
                    b.metrics.reserved_where =
                        Some(format!("device {} {pool} total", r.s("device")));
                }
            }
        }
    }
    blocks.push(table(
        "Peaks of every counter (view peaks; HAL live = memq's pairing)",
        &["device", "pool", "metric", "peak", "when"],
        prow,
    ));
    b.sections.push(Section {
        id: "curves".into(),
        title: "2. Memory curves and their shape".into(),
        blocks,
    });
}

/// Bars of a growth-per-step chart at most: more steps are grouped, consecutive ones together.
const MAX_STEP_BARS: usize = 30;

// ---------------------------------------------------------------- (3) owners and peak

fn owners_section(b: &mut Builder) {
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

// ---------------------------------------------------------------- (4) leaks

/// The least memory allocated after the warm-up and held to the end that a run without steps
/// reports as possible growth: 1 MiB, or 5 % of the pool's peak when that is more (a few
/// KiB of late buffers kept at exit are noise next to a peak of tens of MiB).
fn late_floor(d: &Data, pid: Option<i64>, dev: &str, pool: &str) -> i64 {
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
fn framework_reserved(d: &Data, pid: Option<i64>, dev: &str) -> i64 {
    d.fragmentation
        .iter()
        .filter(|r| r.i64("pid") == pid && r.s("device") == dev)
        .filter_map(|r| r.i64("peak_total"))
        .sum()
}

fn leak_section(b: &mut Builder) {
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
        top.sort_by(|a, z| z.3.cmp(&a.3));
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

// ---------------------------------------------------------------- (5) OOM

fn oom_label(rule: &str) -> (&'static str, &'static str) {
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

fn oom_section(b: &mut Builder) {
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

// ---------------------------------------------------------------- (6) fragmentation

/// The allocator settings that act on fragmentation, each advice a whole sentence; with
/// expandable segments already on, the split limit is not offered (it has little left to do).
fn settings_advice(expandable: bool) -> Vec<String> {
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

fn frag_section(b: &mut Builder) {
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

// ---------------------------------------------------------------- (7) snapshots

fn snapshot_section(b: &mut Builder) {
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
        // A ring buffer that wrapped kept only the last entries: the level before them is
        // unknown, so the highest level seen is the peak of the window, not of the run.
        let wrapped = r.b("trace_wrapped");
        let peak_words = if wrapped {
            "peak in the kept trace window"
        } else {
            "true peak"
        };
        let mut f = finding(
            "snapshot_peak",
            Severity::Info,
            7,
            format!("{snap} device {dev}: {peak_words} {} active, {} reserved", fmt_bytes(ap), fmt_bytes(rp)),
            format!(
                "Active memory (live tensors, requested bytes, including those allocated before the trace window) peaks at {} at trace entry {}; reserved memory peaks at {} at entry {}.{}",
                fmt_bytes(ap),
                r.i64("active_peak_seq").map(|s| s.to_string()).unwrap_or_else(|| "— (no trace)".into()),
                fmt_bytes(rp),
                r.i64("reserved_peak_seq").map(|s| s.to_string()).unwrap_or_else(|| "—".into()),
                r.i64("reference_peak")
                    .map(|p| format!(" (The reference's \"peak reserved\" of {} is the net segment growth since the window started, not a memory level.)", fmt_bytes(p)))
                    .unwrap_or_default()
            ),
        );
        for c in [
            "snapshot",
            "device",
            "entries",
            "active_start",
            "active_peak",
            "active_peak_seq",
            "active_peak_time_us",
            "active_end",
            "reserved_start",
            "reserved_peak",
            "reserved_peak_seq",
            "reserved_end",
            "reference_peak",
        ] {
            let v = match r.get(c) {
                Val::Int(i) => json!(i),
                Val::Str(s) => json!(s),
                Val::Float(x) => json!(x),
                _ => Value::Null,
            };
            f.evidence.insert(c.into(), v);
        }
        // what holds the peak: the allocations summed by user frame, not single blocks
        let split: Vec<Row> = d
            .snap_peak_split
            .iter()
            .filter(|x| x.s("snapshot") == snap && x.i64("device") == Some(dev))
            .collect();
        for x in split
            .iter()
            .filter(|x| x.s("dimension") == "user_frame")
            .take(3)
        {
            f.evidence_text.push(format!(
                "{} ({:.1} % of the peak, {} allocation(s)) from {}",
                ob(x.i64("bytes")),
                x.f64("pct_of_peak").unwrap_or(0.0),
                x.s("blocks"),
                x.s("key")
            ));
        }
        blocks.push(b.push(f));
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
        if wrapped {
            let entries = r.i64("entries").unwrap_or(0);
            let kept = if entries == 1 {
                "entry".to_string()
            } else {
                format!("{entries} entries")
            };
            let mut w = finding(
                "trace_wrapped",
                Severity::Warning,
                7,
                format!("{snap} device {dev}: the trace wrapped; the peak before its last {kept} is unknown"),
                format!(
                    "The allocator's trace is a ring buffer and it kept only its last {kept} (it frees addresses it never saw allocated). Within them active memory peaks at {}, but anything higher before the window is lost: the run's true peak cannot be concluded from this snapshot.",
                    fmt_bytes(ap)
                ),
            );
            w.evidence.insert("snapshot".into(), json!(snap));
            w.evidence.insert("device".into(), json!(dev));
            w.evidence.insert("entries".into(), json!(entries));
            w.evidence.insert("window_active_peak".into(), json!(ap));
            w.evidence_text.push(format!(
                "snap_peak.trace_wrapped is true; {entries} entries kept; highest active level in them {}",
                fmt_bytes(ap)
            ));
            w.advice.push(format!(
                "Record again with a ring buffer larger than the run: `torch.cuda.memory._record_memory_history(max_entries=N)` with N well above {entries}, or dump the snapshot earlier (right after the step that peaks)."
            ));
            blocks.push(b.push(w));
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
    for r in d.snap_long_lived.iter() {
        let snap = r.s("snapshot");
        let dev = r.i64("device");
        let mut f = finding(
            "long_lived",
            Severity::Info,
            7,
            format!("{snap} device {}: {} in {} long-lived block(s)", r.s("device"), ob(r.i64("bytes")), r.s("blocks")),
            "Blocks still live at the end that were allocated before the trace window or in its first 20 %: model state, caches or leaks — the frames say which.".into(),
        );
        f.evidence.insert("snapshot".into(), json!(snap));
        f.evidence.insert("device".into(), json!(dev));
        f.evidence.insert("blocks".into(), json!(r.i64("blocks")));
        f.evidence.insert("bytes".into(), json!(r.i64("bytes")));
        f.evidence.insert(
            "before_window_bytes".into(),
            json!(r.i64("before_window_bytes")),
        );
        for x in d
            .snap_long_lived_top
            .iter()
            .filter(|x| x.s("snapshot") == snap && x.i64("device") == dev)
        {
            f.evidence_text.push(format!(
                "{} in {} block(s) from {}",
                ob(x.i64("bytes")),
                x.s("blocks"),
                x.str("user_frame").unwrap_or("(no stack)")
            ));
        }
        blocks.push(b.push(f));
    }
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

// ---------------------------------------------------------------- (8) torch.profiler traces

/// A torch.profiler trace's `[memory]` events: the allocator's totals per device over time and
/// the op each allocation ran in. They tell the peak and who allocated; they hold no block
/// layout (fragmentation) and no owner of what stays (growth): those are said as such.
fn trace_section(b: &mut Builder) {
    let d = b.d;
    let mut blocks = Vec::new();
    let short = |s: &str| short_source(s);
    blocks.push(table(
        "Peaks per device (view trace_memory_peaks)",
        &[
            "trace",
            "device",
            "metric",
            "peak",
            "at",
            "op at the peak",
            "events",
        ],
        d.trace_peaks
            .iter()
            .map(|r| {
                vec![
                    short(&r.s("source")),
                    r.s("device"),
                    format!(
                        "{}{}",
                        r.s("metric"),
                        if r.b("rebuilt") {
                            " (rebuilt from Bytes)"
                        } else {
                            ""
                        }
                    ),
                    ob(r.i64("peak_bytes")),
                    r.i64("peak_ts").map(|t| b.ts(t)).unwrap_or_default(),
                    r.str("op").unwrap_or("(no op)").to_string(),
                    r.s("events"),
                ]
            })
            .collect(),
    ));
    // one chart per trace and device: allocated (line at bucket end, band min..max)
    let mut keys: Vec<(String, String)> = d
        .trace_curve
        .iter()
        .map(|r| (r.s("source"), r.s("device")))
        .collect();
    keys.dedup();
    let accelerators = d.trace_peaks.iter().any(|r| r.s("device") != "cpu");
    // the host's few bytes of a GPU run are in the table, not charted
    keys.retain(|(_, device)| !(accelerators && device == "cpu"));
    for (source, device) in &keys {
        let rows: Vec<_> = d
            .trace_curve
            .iter()
            .filter(|r| &r.s("source") == source && &r.s("device") == device)
            .collect();
        let band = rows
            .iter()
            .filter_map(|r| {
                Some(BandBucket {
                    x0: b.rel_s(r.i64("t0")?),
                    x1: b.rel_s(r.i64("t1")?),
                    min: r.i64("min_bytes")? as f64,
                    max: r.i64("max_bytes")? as f64,
                })
            })
            .collect();
        let points = rows
            .iter()
            .filter_map(|r| Some((b.rel_s(r.i64("t1")?), r.i64("end_bytes")? as f64)))
            .collect();
        let mut series = vec![Series {
            name: "allocated".into(),
            points,
            band,
            area: false,
        }];
        let reserved: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| Some((b.rel_s(r.i64("t1")?), r.i64("reserved_max")? as f64)))
            .collect();
        if !reserved.is_empty() {
            series.push(Series {
                name: "reserved (highest per bucket)".into(),
                points: reserved,
                band: Vec::new(),
                area: false,
            });
        }
        let markers = d
            .trace_peaks
            .iter()
            .filter(|r| &r.s("source") == source && &r.s("device") == device)
            .filter_map(|r| {
                let (pb, pt) = (r.i64("peak_bytes")?, r.i64("peak_ts")?);
                Some((
                    b.rel_s(pt),
                    pb as f64,
                    format!("{} peak {} at {}", r.s("metric"), fmt_bytes(pb), b.ts(pt)),
                ))
            })
            .collect();
        blocks.push(Block::Chart(Chart::Line(LineChart {
            title: format!(
                "Memory over time — {device} of {}; line = allocated at bucket end, band = min..max per bucket",
                short(source)
            ),
            x_label: "time since the first memory event".into(),
            x_unit: "s".into(),
            series,
            markers,
        })));
    }
    if !d.trace_ops.is_empty() {
        blocks.push(table(
            "Ops that allocated most (view trace_memory_by_op)",
            &["device", "op", "runs", "allocated", "freed", "retained"],
            d.trace_ops
                .iter()
                .map(|r| {
                    vec![
                        r.s("device"),
                        r.str("op").unwrap_or("(outside any op)").to_string(),
                        r.s("runs"),
                        ob(r.i64("allocated_bytes")),
                        ob(r.i64("freed_bytes")),
                        ob(r.i64("retained_bytes")),
                    ]
                })
                .collect(),
        ));
    }
    // the headline figures: each device's allocated and reserved peaks; a finding for each
    // accelerator (the host's few bytes of a GPU run only in the table)
    for r in d.trace_peaks.iter() {
        let Some(pb) = r.i64("peak_bytes") else {
            continue;
        };
        let place = format!("{} {}", short(&r.s("source")), r.s("device"));
        match r.s("metric").as_str() {
            "allocated" => {
                if b.metrics.peak_bytes.is_none_or(|x| pb > x) {
                    b.metrics.peak_bytes = Some(pb);
                    b.metrics.peak_where = Some(format!("{place} allocated"));
                }
                if accelerators && r.s("device") == "cpu" {
                    continue;
                }
                let op = r.str("op");
                let mut f = finding(
                    "trace_peak",
                    Severity::Info,
                    8,
                    format!("{} peak {} allocated", r.s("device"), fmt_bytes(pb)),
                    format!(
                        "The allocator's total allocated on {} peaked at {} at {}{}.",
                        r.s("device"),
                        fmt_bytes(pb),
                        r.i64("peak_ts").map(|t| b.ts(t)).unwrap_or_default(),
                        op.map(|o| format!(", inside {o}")).unwrap_or_default()
                    ),
                );
                f.evidence.insert("device".into(), json!(r.s("device")));
                f.evidence.insert("peak_bytes".into(), json!(pb));
                f.evidence.insert("peak_ts".into(), json!(r.i64("peak_ts")));
                f.evidence.insert("op".into(), json!(op));
                f.evidence_text.push(format!(
                    "trace_memory_peaks: {} {} allocated peak {} ({} events{})",
                    short(&r.s("source")),
                    r.s("device"),
                    fmt_bytes(pb),
                    r.s("events"),
                    if r.b("rebuilt") {
                        "; totals rebuilt from Bytes"
                    } else {
                        ""
                    }
                ));
                let block = b.push(f);
                blocks.push(block);
            }
            "reserved" => {
                if b.metrics.reserved_bytes.is_none_or(|x| pb > x) {
                    b.metrics.reserved_bytes = Some(pb);
                    b.metrics.reserved_where = Some(format!("{place} reserved"));
                }
            }
            _ => {}
        }
    }
    if !d.has_memscope() && !d.has_snapshot() {
        // what a trace cannot tell, and what would
        b.growth_unknown = true;
        for f in [
            cannot(
                8,
                "whether memory grows without return",
                "the owners and lifetimes of live blocks",
                "an msMemScope dump or torch.cuda.memory._dump_snapshot() with _record_memory_history()",
            ),
            cannot(
                8,
                "fragmentation",
                "the allocator's segment layout",
                "torch.cuda.memory._dump_snapshot() (a memory snapshot)",
            ),
        ] {
            let block = b.push(f);
            blocks.push(block);
        }
    }
    b.sections.push(Section {
        id: "traces".into(),
        title: "8. torch.profiler traces: memory per device and op".into(),
        blocks,
    });
}

/// The comparison of the first two snapshots given (view snap_compare: b − a).
fn compare_finding(b: &mut Builder) -> Block {
    let d = b.d;
    let (sa, sb) = (d.snapshots[0].clone(), d.snapshots[1].clone());
    let row_json = |x: &Row| {
        let mut m = Map::new();
        for c in [
            "a_count",
            "b_count",
            "diff_count",
            "a_bytes",
            "b_bytes",
            "diff_bytes",
        ] {
            m.insert(c.into(), json!(x.i64(c)));
        }
        m
    };
    let mut totals = Map::new();
    for x in d.snap_compare.iter().filter(|x| x.s("kind") == "total") {
        totals.insert(x.s("key"), Value::Object(row_json(&x)));
    }
    let changes: Vec<Value> = d
        .snap_compare
        .iter()
        .filter(|x| x.s("kind") != "total")
        .map(|x| {
            let mut m = row_json(&x);
            m.insert("kind".into(), json!(x.s("kind")));
            m.insert("rank".into(), json!(x.i64("rank")));
            m.insert("key".into(), json!(x.s("key")));
            Value::Object(m)
        })
        .collect();
    let total = |k: &str| {
        d.snap_compare
            .iter()
            .find(|x| x.s("kind") == "total" && x.s("key") == k)
    };
    let change = |k: &str| -> Option<String> {
        let x = total(k)?;
        Some(format!(
            "{k} {} → {} ({}{})",
            ob(x.i64("a_bytes")),
            ob(x.i64("b_bytes")),
            if x.i64("diff_bytes").unwrap_or(0) > 0 {
                "+"
            } else {
                ""
            },
            ob(x.i64("diff_bytes"))
        ))
    };
    let summary: Vec<String> = ["reserved", "allocated", "active_peak"]
        .iter()
        .filter_map(|k| change(k))
        .collect();
    let mut f = finding(
        "snapshot_compare",
        Severity::Info,
        7,
        format!("{sb} compared with {sa}"),
        format!(
            "From {sa} (a) to {sb} (b): {}.{}",
            summary.join(", "),
            if d.snapshots.len() > 2 {
                format!(
                    " ({} snapshots given: only the first two are compared; `memq sql` runs snap_compare on any pair.)",
                    d.snapshots.len()
                )
            } else {
                String::new()
            }
        ),
    );
    f.evidence.insert("snapshot_a".into(), json!(sa));
    f.evidence.insert("snapshot_b".into(), json!(sb));
    f.evidence.insert("totals".into(), Value::Object(totals));
    f.evidence.insert("changes".into(), json!(changes));
    for k in ["free", "pending_free", "reserved_peak"] {
        if let Some(t) = change(k) {
            f.evidence_text.push(t);
        }
    }
    for kind in ["stack", "user_frame", "segment_size"] {
        if let Some(x) = d
            .snap_compare
            .iter()
            .find(|x| x.s("kind") == kind && x.i64("rank") == Some(1))
        {
            f.evidence_text.push(format!(
                "largest change by {}: {} {} → {} ({} blocks → {})",
                kind.replace('_', " "),
                x.s("key").chars().take(160).collect::<String>(),
                ob(x.i64("a_bytes")),
                ob(x.i64("b_bytes")),
                x.s("a_count"),
                x.s("b_count")
            ));
        }
    }
    if let Some(x) = d
        .snap_compare
        .iter()
        .find(|x| x.s("kind") == "stack" && x.i64("diff_bytes").unwrap_or(0) > 0)
    {
        f.advice.push(format!(
            "The live memory that grew most comes from {}: check whether it is kept on purpose (caches, optimizer state) before the next run.",
            x.s("key").chars().take(160).collect::<String>()
        ));
    }
    b.push(f)
}

// ---------------------------------------------------------------- (8) verdict

fn verdict(b: &Builder) -> Verdict {
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
