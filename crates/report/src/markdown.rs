//! The report as Markdown, with small Unicode charts (sparklines and bars) for terminals and
//! agents.

use std::fmt::Write;

use super::*;

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of `vals`, resampled to at most `width` characters (max per cell).
pub fn sparkline(vals: &[f64], width: usize) -> String {
    if vals.is_empty() || width == 0 {
        return String::new();
    }
    let cells = vals.len().min(width);
    let mut pts = Vec::with_capacity(cells);
    for c in 0..cells {
        let a = c * vals.len() / cells;
        let z = ((c + 1) * vals.len() / cells).max(a + 1);
        let m = vals[a..z.min(vals.len())]
            .iter()
            .cloned()
            .fold(f64::NEG_INFINITY, f64::max);
        pts.push(m);
    }
    let mx = pts.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let mn = pts.iter().cloned().fold(f64::INFINITY, f64::min).min(0.0);
    let span = (mx - mn).max(1.0);
    pts.iter()
        .map(|v| {
            let i = (((v - mn) / span) * 7.0).round().clamp(0.0, 7.0) as usize;
            SPARK[i]
        })
        .collect()
}

/// A bar of `v` out of `max`, `width` characters wide, with eighth blocks.
pub fn bar(v: f64, max: f64, width: usize) -> String {
    if max <= 0.0 || v <= 0.0 {
        return String::new();
    }
    let eighths = ((v / max) * (width * 8) as f64).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    let rest = eighths % 8;
    if rest > 0 {
        s.push(['▏', '▎', '▍', '▌', '▋', '▊', '▉'][rest - 1]);
    }
    s
}

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn fmt_val(v: f64, unit: &str) -> String {
    if unit == "bytes" {
        fmt_bytes(v as i64)
    } else {
        format!("{v}")
    }
}

fn chart(out: &mut String, c: &Chart) {
    match c {
        Chart::Line(l) => {
            let _ = writeln!(out, "**{}**\n", l.title);
            let _ = writeln!(out, "```");
            let w = l
                .series
                .iter()
                .map(|s| s.name.chars().count())
                .max()
                .unwrap_or(0);
            for s in &l.series {
                let ys: Vec<f64> = s.points.iter().map(|p| p.1).collect();
                let mx = ys.iter().cloned().fold(0.0, f64::max);
                let _ = writeln!(
                    out,
                    "{:<w$} {} max {}",
                    s.name,
                    sparkline(&ys, 60),
                    fmt_bytes(mx as i64)
                );
            }
            if let (Some(first), Some(last)) = (
                l.series
                    .iter()
                    .filter_map(|s| s.points.first())
                    .map(|p| p.0)
                    .reduce(f64::min),
                l.series
                    .iter()
                    .filter_map(|s| s.points.last())
                    .map(|p| p.0)
                    .reduce(f64::max),
            ) {
                let unit = if l.x_unit == "s" { " s" } else { "" };
                let _ = writeln!(
                    out,
                    "{:<w$} {first:.3}{unit} … {last:.3}{unit} ({})",
                    "", l.x_label
                );
            }
            let _ = writeln!(out, "```");
            if !l.markers.is_empty() {
                let names: Vec<&str> = l.markers.iter().map(|m| m.2.as_str()).collect();
                let _ = writeln!(out, "\nMarked: {}", names.join("; "));
            }
            out.push('\n');
        }
        Chart::Bars(b) => {
            let _ = writeln!(out, "**{}**\n", b.title);
            let _ = writeln!(out, "```");
            let max = b
                .bars
                .iter()
                .map(|(_, v)| v.iter().map(|x| x.abs()).sum::<f64>())
                .fold(0.0, f64::max);
            let w = b
                .bars
                .iter()
                .map(|(l, _)| l.chars().count())
                .max()
                .unwrap_or(0)
                .min(32);
            for (label, v) in &b.bars {
                let total: f64 = v.iter().sum();
                let l: String = label.chars().take(32).collect();
                let sign = if total < 0.0 { "-" } else { "" };
                let _ = writeln!(
                    out,
                    "{l:<w$} {sign}{:<40} {}",
                    bar(total.abs(), max, 40),
                    fmt_val(total, &b.unit)
                );
            }
            let _ = writeln!(out, "```\n");
        }
        Chart::Segments(m) => {
            let _ = writeln!(out, "**{}**\n", m.title);
            let total: i64 = m.segments.iter().map(|s| s.0).sum();
            let alloc: i64 = m.segments.iter().map(|s| s.1).sum();
            let pend: i64 = m.segments.iter().map(|s| s.2).sum();
            // one character per segment (up to 120), by its allocated share
            let line: String = m
                .segments
                .iter()
                .take(120)
                .map(|s| {
                    let f = if s.0 > 0 {
                        (s.1 + s.2) as f64 / s.0 as f64
                    } else {
                        0.0
                    };
                    SPARK[(f * 7.0).round().clamp(0.0, 7.0) as usize]
                })
                .collect();
            let _ = writeln!(
                out,
                "```\n{line}\n```\none character per segment, height = share in use; {} reserved, {} allocated, {} pending free, {} free\n",
                fmt_bytes(total),
                fmt_bytes(alloc),
                fmt_bytes(pend),
                fmt_bytes(total - alloc - pend)
            );
        }
    }
}

fn finding(out: &mut String, f: &Finding) {
    let icon = match f.severity {
        Severity::Error => "🔴 error",
        Severity::Warning => "🟠 warning",
        Severity::Info => "🔵 info",
        Severity::Ok => "🟢 ok",
    };
    let _ = writeln!(out, "- **[{icon}] {}** — {}", f.title, f.problem);
    for e in &f.evidence_text {
        let _ = writeln!(out, "  - evidence: {e}");
    }
    for a in &f.advice {
        let _ = writeln!(out, "  - advice: {a}");
    }
}

fn table(out: &mut String, t: &Table) {
    if t.rows.is_empty() {
        return;
    }
    if !t.caption.is_empty() {
        let _ = writeln!(out, "*{}*\n", t.caption);
    }
    let _ = writeln!(
        out,
        "| {} |",
        t.headers
            .iter()
            .map(|h| esc(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|{}|",
        t.headers
            .iter()
            .map(|_| "---")
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in t.rows.iter().take(40) {
        let _ = writeln!(
            out,
            "| {} |",
            r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    if t.rows.len() > 40 {
        let _ = writeln!(out, "\n({} more rows)", t.rows.len() - 40);
    }
    out.push('\n');
}

pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# memq report — {}\n", r.input);
    let _ = writeln!(out, "## Verdict ({})\n", r.verdict.severity.as_str());
    let _ = writeln!(out, "{}\n", r.verdict.summary);
    let _ = writeln!(out, "Do first:\n");
    for (i, a) in r.verdict.actions.iter().enumerate() {
        let _ = writeln!(out, "{}. {a}", i + 1);
    }
    out.push('\n');
    let m = &r.metrics;
    let _ = writeln!(
        out,
        "Peak {} · reserved {} · growing {} · fragmentation {} · cached free {} · OOM events {} · devices {}\n",
        with_where(m.peak_bytes.map(fmt_bytes), &m.peak_where, "—"),
        with_where(m.reserved_bytes.map(fmt_bytes), &m.reserved_where, "—"),
        with_where(m.leak_bytes.map(fmt_bytes), &m.leak_where, "cannot tell"),
        with_where(m.frag_pct.map(fmt_pct), &m.frag_where, "not measurable"),
        with_where(m.cached_free_bytes.map(fmt_bytes), &m.cached_free_where, "—"),
        m.oom_events,
        m.devices
    );
    for s in &r.sections {
        let _ = writeln!(out, "## {}\n", s.title);
        let mut in_list = false;
        for blk in &s.blocks {
            match blk {
                Block::Finding(i) => {
                    if let Some(f) = r.findings.get(*i) {
                        finding(&mut out, f);
                        in_list = true;
                    }
                    continue;
                }
                _ => {
                    if in_list {
                        out.push('\n');
                        in_list = false;
                    }
                }
            }
            match blk {
                Block::Text(t) => {
                    let _ = writeln!(out, "{t}\n");
                }
                Block::Table(t) => table(&mut out, t),
                Block::Chart(c) => chart(&mut out, c),
                Block::Finding(_) => {}
            }
        }
        if in_list {
            out.push('\n');
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out, "## Notes\n");
        for n in &r.notes {
            let _ = writeln!(out, "- analysis failed: {}", esc(n));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "---\n{}", r.generated);
    out
}

/// A card's figure with where it was measured: `12.00 MiB (device 1)`.
fn with_where(value: Option<String>, at: &Option<String>, none: &str) -> String {
    match (value, at) {
        (Some(v), Some(w)) => format!("{v} ({w})"),
        (Some(v), None) => v,
        (None, _) => none.to_string(),
    }
}
