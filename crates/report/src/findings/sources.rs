//! (1) sources and capabilities: what the inputs hold and can answer.

use super::*;

pub(super) fn sources_section(b: &mut Builder) {
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
    // what the inputs cannot answer (capability_findings.sql), unparsable records
    // (input_findings.sql)
    blocks.extend(b.push_section("sources"));
    // A dump of MALLOC rows only, or FREE rows only (dumpEventType): none of its blocks can be
    // paired, so whether its memory grows is unknown, even beside paired dumps.
    if d.capabilities
        .iter()
        .any(|r| matches!(r.str("pairing"), Some("malloc_only" | "free_only" | "none")))
    {
        b.growth_unknown = true;
    }
    b.metrics.devices = {
        let mut devs: Vec<String> = d
            .peaks
            .iter()
            .filter(|r| crate::counts_as_device(&r.s("pool"), &r.s("device")))
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
pub(super) const CAPABILITIES: &[&str] = &[
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
pub(super) fn capability_blocks(caps: &Rows) -> Vec<Block> {
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
            let order = shown
                .iter()
                .position(|c| *c == capability)
                .unwrap_or(usize::MAX);
            missing
                .entry((order, r.s("when_missing")))
                .or_default()
                .push(short_source(&source));
        }
    }
    let mut headers = vec!["input", "kind"];
    headers.extend(shown.iter().copied());
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
            &[
                "missing",
                "inputs",
                "what cannot be concluded, and how to collect it",
            ],
            missing
                .into_iter()
                .map(|((order, text), inputs)| {
                    let what = shown
                        .get(order)
                        .map(|c| c.replace('_', " "))
                        .unwrap_or_default();
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
