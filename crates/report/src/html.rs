//! The report as one self-contained HTML page: inline CSS and inline SVG charts drawn here; no
//! script, no font, no image and no link that leaves the file.

use std::fmt::Write;

use super::*;

const W: f64 = 960.0;
/// Bar charts are narrower, so that their labels stay readable on a small screen.
const BW: f64 = 720.0;
/// Text size of the line charts and segment maps, in viewBox units: 12.7 px when a chart is
/// drawn 760 px wide (an 800 px window), 18 px at its widest (1100 px, CSS `max-width`).
const LINE_FONT: f64 = 16.0;
/// Text size of the bar charts (720 units wide: about 1:1 in an 800 px window).
const BAR_FONT: f64 = 14.0;
const PALETTE: [&str; 8] = [
    "#1f5fa8", "#c2362f", "#2a8a3e", "#d9800b", "#7b4fb0", "#8c564b", "#c2458f", "#138c99",
];

/// Escaped text in which a long word (a file name, a path) may wrap after `_`, `.` or `/`
/// rather than anywhere inside it; short words (`1.50 MiB`) never break.
fn breakable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, word) in s.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let w = esc(word);
        if word.chars().count() > 20 {
            out.push_str(
                &w.replace('_', "_<wbr>")
                    .replace('.', ".<wbr>")
                    .replace('/', "/<wbr>"),
            );
        } else {
            out.push_str(&w);
        }
    }
    out
}

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// Nice tick step for a range.
fn nice_step(range: f64, target: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

/// The binary unit to label a byte axis whose maximum is `max`.
fn byte_unit(max: f64) -> (f64, &'static str) {
    let k = 1024f64;
    if max >= k * k * k {
        (k * k * k, "GiB")
    } else if max >= k * k {
        (k * k, "MiB")
    } else if max >= k {
        (k, "KiB")
    } else {
        (1.0, "B")
    }
}

fn fmt_tick(v: f64) -> String {
    // ticks are sums of a float step: drop the accumulated error first
    let v = (v * 1e6).round() / 1e6;
    if v == v.round() {
        format!("{}", v as i64)
    } else if (v * 10.0) == (v * 10.0).round() {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn fmt_x(v: f64, unit: &str) -> String {
    if unit == "s" {
        if v.abs() >= 1.0 || v == 0.0 {
            format!("{} s", fmt_tick(v))
        } else {
            format!("{} ms", fmt_tick(v * 1000.0))
        }
    } else {
        format!("{}", v.round() as i64)
    }
}

/// Average advance of a character of the charts' sans-serif text, in em (DejaVu Sans / Arial
/// digits and lower case are 0.55–0.64 em; bold a little wider).
const CHAR_EM: f64 = 0.6;

/// The legend of a chart `width` wide whose text is `font` px (viewBox units) high, its first
/// row's baseline at `y`, wrapped to as many rows as it needs: the SVG and the baseline of its
/// last row.
fn legend(items: &[(String, String, bool)], y: f64, width: f64, font: f64) -> (String, f64) {
    let mut out = String::new();
    let mut x = 70.0;
    let mut yy = y;
    for (name, color, area) in items {
        let w = 28.0 + name.chars().count() as f64 * font * CHAR_EM;
        if x + w > width - 10.0 && x > 70.0 {
            x = 70.0;
            yy += font + 6.0;
        }
        if *area {
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="18" height="{:.1}" fill="{color}" fill-opacity="0.3" stroke="{color}"/>"#,
                yy - font * 0.72,
                font * 0.75
            );
        } else {
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="18" height="4" fill="{color}"/>"#,
                yy - font * 0.35 - 2.0
            );
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{yy:.1}" class="lg">{}</text>"#,
            x + 24.0,
            esc(name)
        );
        x += w + 14.0;
    }
    (out, yy)
}

/// The contiguous runs of a band: a bucket that starts after the previous one ends (the
/// buckets between had no event) starts a new run.
fn band_runs(band: &[BandBucket]) -> Vec<&[BandBucket]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=band.len() {
        if i == band.len() || band[i].x0 > band[i - 1].x1 {
            if i > start {
                runs.push(&band[start..i]);
            }
            start = i;
        }
    }
    runs
}

/// A line chart as an inline SVG element (the report's curves; the library's result charts).
pub fn line_chart(l: &LineChart) -> String {
    let mut out = String::new();
    let items: Vec<(String, String, bool)> = l
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            (
                s.name.clone(),
                PALETTE[i % PALETTE.len()].to_string(),
                s.area,
            )
        })
        .collect();
    let (legend_svg, legend_end) = legend(&items, 22.0, W, LINE_FONT);
    let top = legend_end + 22.0;
    let (left, right, bottom) = (92.0, 24.0, 58.0);
    let h = 360.0 + top;
    let ph = h - top - bottom;
    let pw = W - left - right;
    let xs = l.series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.0)
            .chain(s.band.iter().flat_map(|b| [b.x0, b.x1]))
    });
    let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
    for x in xs {
        x0 = x0.min(x);
        x1 = x1.max(x);
    }
    for (mx, _, _) in &l.markers {
        x0 = x0.min(*mx);
        x1 = x1.max(*mx);
    }
    if !x0.is_finite() {
        return String::new();
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if l.x_unit == "s" {
        x0 = x0.min(0.0);
    }
    let mut ymax = l
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.band.iter().map(|b| b.max))
        })
        .fold(0.0, f64::max);
    for (_, my, _) in &l.markers {
        ymax = ymax.max(*my);
    }
    if ymax <= 0.0 {
        ymax = 1.0;
    }
    let (ud, un) = byte_unit(ymax);
    // whole bytes: no 0.5 B ticks
    let ystep = nice_step(ymax / ud * 1.08, 5.0).max(if un == "B" { 1.0 } else { 0.0 });
    let ytop = ((ymax / ud * 1.08) / ystep).ceil() * ystep;
    let sx = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| top + ph - (y / ud) / ytop * ph;
    let _ = write!(
        out,
        r#"<svg class="chart" viewBox="0 0 {W} {h}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(&l.title)
    );
    // grid and y axis
    let mut v = 0.0;
    while v <= ytop + 1e-9 {
        let y = top + ph - v / ytop * ph;
        let _ = write!(
            out,
            r#"<line x1="{left}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" class="grid"/>"#,
            left + pw
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" class="ax" text-anchor="end">{} {un}</text>"#,
            left - 6.0,
            y + 4.5,
            fmt_tick(v)
        );
        v += ystep;
    }
    // x axis
    let xstep = nice_step(x1 - x0, 8.0);
    let mut xv = (x0 / xstep).ceil() * xstep;
    while xv <= x1 + 1e-9 {
        let x = sx(xv);
        let _ = write!(
            out,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" class="tick"/>"#,
            top + ph,
            top + ph + 5.0
        );
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" class="ax" text-anchor="middle">{}</text>"#,
            top + ph + 20.0,
            fmt_x(xv, &l.x_unit)
        );
        xv += xstep;
    }
    let _ = write!(
        out,
        r#"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" class="axis"/>"#,
        left + pw,
        top + ph,
        top + ph
    );
    let _ = write!(
        out,
        r#"<line x1="{left}" x2="{left}" y1="{top}" y2="{:.1}" class="axis"/>"#,
        top + ph
    );
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" class="axl" text-anchor="middle">{}</text>"#,
        left + pw / 2.0,
        h - 10.0,
        esc(&l.x_label)
    );
    // series
    for (i, s) in l.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        for run in band_runs(&s.band) {
            // step-wise over each bucket's extent: max along the top, min back along the bottom
            let mut pts = String::new();
            for b in run {
                let _ = write!(
                    pts,
                    "{:.1},{:.1} {:.1},{:.1} ",
                    sx(b.x0),
                    sy(b.max),
                    sx(b.x1),
                    sy(b.max)
                );
            }
            for b in run.iter().rev() {
                let _ = write!(
                    pts,
                    "{:.1},{:.1} {:.1},{:.1} ",
                    sx(b.x1),
                    sy(b.min),
                    sx(b.x0),
                    sy(b.min)
                );
            }
            let _ = write!(
                out,
                r#"<polygon class="band" points="{}" fill="{color}" fill-opacity="0.16" stroke="none"/>"#,
                pts.trim_end()
            );
        }
        if s.points.is_empty() {
            continue;
        }
        // an event-driven curve holds its value until the next point: draw steps
        let mut pts = String::new();
        for (k, p) in s.points.iter().enumerate() {
            if k > 0 {
                let _ = write!(pts, "{:.1},{:.1} ", sx(p.0), sy(s.points[k - 1].1));
            }
            let _ = write!(pts, "{:.1},{:.1} ", sx(p.0), sy(p.1));
        }
        if s.area {
            let first = s.points.first().map(|p| sx(p.0)).unwrap_or(left);
            let last = s.points.last().map(|p| sx(p.0)).unwrap_or(left);
            let _ = write!(
                out,
                r#"<polygon points="{first:.1},{b:.1} {} {last:.1},{b:.1}" fill="{color}" fill-opacity="0.22" stroke="none"/>"#,
                pts.trim_end(),
                b = top + ph
            );
        }
        let _ = write!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round"><title>{}</title></polyline>"#,
            pts.trim_end(),
            esc(&s.name)
        );
    }
    // every marked moment drawn and named on hover; the first (the highest peak) labelled
    for (i, (mx, my, label)) in l.markers.iter().enumerate() {
        let (x, y) = (sx(*mx), sy(*my));
        let oom = label.starts_with("OOM");
        let color = if oom { "#c0392b" } else { "#222" };
        let (y1, r) = if oom { (top, 6.0) } else { (y, 5.0) };
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{y1:.1}" y2="{:.1}" stroke="{color}" stroke-dasharray="4 3"/>"##,
            top + ph
        );
        let _ = write!(
            out,
            r##"<circle cx="{x:.1}" cy="{:.1}" r="{r}" fill="#fff" stroke="{color}" stroke-width="2"><title>{}</title></circle>"##,
            if oom { top + ph } else { y },
            esc(label)
        );
        if i > 0 {
            continue;
        }
        // bold text: a little wider than the average advance
        let tw = label.chars().count() as f64 * LINE_FONT * (CHAR_EM + 0.03) + 14.0;
        let lx = if x + tw + 12.0 > W - right {
            x - tw - 10.0
        } else {
            x + 10.0
        };
        let ly = (y - 12.0).max(top + 2.0);
        let _ = write!(
            out,
            r##"<rect x="{lx:.1}" y="{:.1}" width="{tw:.1}" height="22" rx="3" fill="#fff" fill-opacity="0.92" stroke="#222"/>"##,
            ly - 15.0
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{ly:.1}" class="mk">{}</text>"#,
            lx + 6.0,
            esc(label)
        );
    }
    out.push_str(&legend_svg);
    out.push_str("</svg>");
    out
}

fn bar_chart(b: &BarChart) -> String {
    let mut out = String::new();
    let n = b.bars.len();
    if n == 0 {
        return out;
    }
    let row = 26.0;
    // a legend only when the bars are stacked in several parts
    let (legend_svg, legend_end) = if b.parts.len() > 1 {
        let items: Vec<(String, String, bool)> = b
            .parts
            .iter()
            .enumerate()
            .map(|(j, p)| (p.clone(), PALETTE[j % PALETTE.len()].to_string(), false))
            .collect();
        legend(&items, 20.0, BW, BAR_FONT)
    } else {
        (String::new(), 20.0)
    };
    let (top, bottom) = (legend_end + 14.0, 40.0);
    let label_w = 190.0;
    let value_w = 100.0;
    let h = top + bottom + row * n as f64;
    let totals: Vec<(f64, f64)> = b
        .bars
        .iter()
        .map(|(_, v)| {
            let pos: f64 = v.iter().filter(|x| **x > 0.0).sum();
            let neg: f64 = v.iter().filter(|x| **x < 0.0).sum();
            (neg, pos)
        })
        .collect();
    let vmax = totals.iter().map(|t| t.1).fold(0.0, f64::max);
    let vmin = totals.iter().map(|t| t.0).fold(0.0, f64::min);
    let span = (vmax - vmin).max(1.0);
    let pw = BW - label_w - value_w - 20.0;
    let sx = |v: f64| label_w + (v - vmin) / span * pw;
    let _ = write!(
        out,
        r#"<svg class="chart bars" viewBox="0 0 {BW} {h}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(&b.title)
    );
    // axis ticks
    let (ud, un) = if b.unit == "bytes" {
        byte_unit(vmax.max(-vmin))
    } else {
        (1.0, "")
    };
    let step = nice_step(span / ud, 6.0) * ud;
    let mut v = (vmin / step).ceil() * step;
    while v <= vmax + 1e-6 {
        let x = sx(v);
        let _ = write!(
            out,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{:.1}" class="grid"/>"#,
            h - bottom
        );
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" class="ax" text-anchor="middle">{} {un}</text>"#,
            h - bottom + 18.0,
            fmt_tick(v / ud)
        );
        v += step;
    }
    let z = sx(0.0);
    let _ = write!(
        out,
        r#"<line x1="{z:.1}" x2="{z:.1}" y1="{top}" y2="{:.1}" class="axis"/>"#,
        h - bottom
    );
    for (i, (label, vals)) in b.bars.iter().enumerate() {
        let y = top + row * i as f64 + 4.0;
        let short: String = if label.chars().count() > 26 {
            label.chars().take(25).chain(std::iter::once('…')).collect()
        } else {
            label.clone()
        };
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" class="lb" text-anchor="end"><title>{}</title>{}</text>"#,
            label_w - 8.0,
            y + 14.0,
            esc(label),
            esc(&short)
        );
        let mut pos = 0.0;
        let mut neg = 0.0;
        for (j, v) in vals.iter().enumerate() {
            let color = PALETTE[j % PALETTE.len()];
            let (a, z2) = if *v >= 0.0 {
                let a = pos;
                pos += v;
                (a, pos)
            } else {
                let a = neg;
                neg += v;
                (neg, a)
            };
            let (xa, xb) = (sx(a), sx(z2));
            let _ = write!(
                out,
                r#"<rect x="{xa:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect>"#,
                (xb - xa).max(1.0),
                row - 8.0,
                esc(label),
                esc(&if b.unit == "bytes" {
                    fmt_bytes(*v as i64)
                } else {
                    format!("{v}")
                })
            );
        }
        let total: f64 = vals.iter().sum();
        let tx = sx(pos.max(0.0)) + 6.0;
        let _ = write!(
            out,
            r#"<text x="{tx:.1}" y="{:.1}" class="vl">{}</text>"#,
            y + 14.0,
            esc(&if b.unit == "bytes" {
                fmt_bytes(total as i64)
            } else {
                format!("{total}")
            })
        );
    }
    out.push_str(&legend_svg);
    out.push_str("</svg>");
    out
}

fn segment_map(m: &SegmentMap) -> String {
    let mut out = String::new();
    let total: i64 = m.segments.iter().map(|s| s.0.max(0)).sum();
    if total <= 0 {
        return out;
    }
    let (left, line_w, row_h, gap) = (10.0, W - 20.0, 30.0, 6.0);
    let target_rows = 6.0;
    let scale = line_w * target_rows / total as f64;
    // flow layout
    let mut rects = Vec::new();
    let (mut x, mut row) = (0.0, 0usize);
    for s in &m.segments {
        let w = (s.0 as f64 * scale).clamp(3.0, line_w);
        if x + w > line_w + 0.5 {
            x = 0.0;
            row += 1;
        }
        rects.push((x, row, w, *s));
        x += w + 1.0;
    }
    let alloc: i64 = m.segments.iter().map(|s| s.1).sum();
    let pend: i64 = m.segments.iter().map(|s| s.2).sum();
    let items = vec![
        (
            format!("allocated {}", fmt_bytes(alloc)),
            PALETTE[0].to_string(),
            true,
        ),
        (
            format!("pending free {}", fmt_bytes(pend)),
            PALETTE[3].to_string(),
            true,
        ),
        (
            format!("free {}", fmt_bytes(total - alloc - pend)),
            "#b8bec6".to_string(),
            true,
        ),
        (
            format!(
                "reserved {} in {} segments",
                fmt_bytes(total),
                m.segments.len()
            ),
            "#ffffff".to_string(),
            true,
        ),
    ];
    let (legend_svg, legend_end) = legend(&items, 20.0, W, LINE_FONT);
    let top = legend_end + 14.0;
    let h = top + (row + 1) as f64 * (row_h + gap) + 20.0;
    let _ = write!(
        out,
        r#"<svg class="chart" viewBox="0 0 {W} {h:.0}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = esc(&m.title)
    );
    for (x, row, w, (size, alloc, pend)) in rects {
        let y = top + row as f64 * (row_h + gap);
        let fa = if size > 0 {
            alloc.max(0) as f64 / size as f64
        } else {
            0.0
        };
        let fp = if size > 0 {
            pend.max(0) as f64 / size as f64
        } else {
            0.0
        };
        let x = left + x;
        let _ = write!(
            out,
            r##"<g><title>segment {}: {} allocated, {} pending free, {} free</title><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{row_h}" fill="#e4e7eb" stroke="#7a828c" stroke-width="0.6"/>"##,
            esc(&fmt_bytes(size)),
            esc(&fmt_bytes(alloc)),
            esc(&fmt_bytes(pend)),
            esc(&fmt_bytes(size - alloc - pend))
        );
        if fa > 0.0 {
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{row_h}" fill="{}"/>"#,
                (w * fa).max(0.5),
                PALETTE[0]
            );
        }
        if fp > 0.0 {
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{row_h}" fill="{}"/>"#,
                x + w * fa,
                (w * fp).max(0.5),
                PALETTE[3]
            );
        }
        out.push_str("</g>");
    }
    out.push_str(&legend_svg);
    out.push_str("</svg>");
    out
}

fn chart(c: &Chart) -> String {
    let (title, svg) = match c {
        Chart::Line(l) => (&l.title, line_chart(l)),
        Chart::Bars(b) => (&b.title, bar_chart(b)),
        Chart::Segments(m) => (&m.title, segment_map(m)),
    };
    if svg.is_empty() {
        return String::new();
    }
    format!(
        "<figure><figcaption>{}</figcaption>{svg}</figure>\n",
        esc(title)
    )
}

fn finding(f: &Finding) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<div class="finding {sev}"><div class="fh"><span class="badge {sev}">{sev}</span> <b>{}</b></div><p class="problem">{}</p>"#,
        esc(&f.title),
        esc(&f.problem),
        sev = f.severity.as_str()
    );
    if !f.evidence_text.is_empty() {
        o.push_str("<div class=\"ev\"><span class=\"lbl\">Evidence</span><ul>");
        for e in &f.evidence_text {
            let _ = write!(o, "<li>{}</li>", esc(e));
        }
        o.push_str("</ul></div>");
    }
    if let Some(c) = &f.cannot_conclude {
        let _ = write!(
            o,
            r#"<p class="cc">Cannot conclude: missing {} — collect with {}</p>"#,
            esc(&c.missing),
            esc(&c.collect_with)
        );
    }
    if !f.advice.is_empty() {
        o.push_str("<div class=\"adv\"><span class=\"lbl\">Advice</span><ul>");
        for a in &f.advice {
            let _ = write!(o, "<li>{}</li>", esc(a));
        }
        o.push_str("</ul></div>");
    }
    o.push_str("</div>\n");
    o
}

fn table(t: &Table) -> String {
    if t.rows.is_empty() {
        return String::new();
    }
    let mut o = String::from("<div class=\"tw\"><table>");
    if !t.caption.is_empty() {
        let _ = write!(o, "<caption>{}</caption>", esc(&t.caption));
    }
    o.push_str("<thead><tr>");
    for h in &t.headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>");
    for r in t.rows.iter().take(60) {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{}</td>", breakable(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
    if t.rows.len() > 60 {
        let _ = write!(
            o,
            "<p class=\"more\">{} more rows (see the JSON or `memq sql`)</p>",
            t.rows.len() - 60
        );
    }
    o.push_str("</div>\n");
    o
}

const CSS: &str = r#"
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;color:#1d2329;background:#f3f5f7}
main{max-width:1360px;margin:0 auto;padding:16px 20px 40px}
header h1{font-size:24px;margin:8px 0 4px}
.sub{color:#5b6670;font-size:13px;word-break:break-all}
nav{display:flex;flex-wrap:wrap;gap:6px 14px;margin:10px 0 14px;font-size:14px}
nav a{color:#1f5fa8;text-decoration:none}
.verdict{border-radius:8px;padding:14px 18px;margin:12px 0;background:#fff;border-left:8px solid #2a8a3e}
.verdict.warning{border-left-color:#d9800b}.verdict.error{border-left-color:#c2362f}
.verdict h2{margin:0 0 6px;font-size:19px}
.verdict ol{margin:6px 0 0 0;padding-left:22px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;margin:12px 0}
.card{background:#fff;border-radius:8px;padding:10px 12px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
.card .k{font-size:12px;color:#5b6670;text-transform:uppercase;letter-spacing:.03em}
.card .v{font-size:21px;font-weight:650;margin-top:2px}
.card .w{font-size:12px;color:#5b6670;word-break:normal;overflow-wrap:break-word}
section{background:#fff;border-radius:8px;padding:6px 18px 14px;margin:14px 0;box-shadow:0 1px 2px rgba(0,0,0,.08)}
section h2{font-size:19px;border-bottom:1px solid #e1e5e9;padding-bottom:6px}
figure{margin:14px 0;break-inside:avoid;page-break-inside:avoid}
figcaption{font-weight:600;font-size:14px;margin-bottom:4px}
svg.chart{width:100%;max-width:1100px;height:auto;display:block;background:#fff}
svg.bars{max-width:900px}
svg .grid{stroke:#e3e7eb;stroke-width:1}
svg .axis{stroke:#4a525a;stroke-width:1.2}
svg .tick{stroke:#4a525a}
svg text{fill:#1d2329;font-family:"DejaVu Sans",Arial,sans-serif;font-size:16px}
svg.bars text{font-size:14px}
svg .axl{fill:#4a525a}
svg .vl{fill:#333}
svg .mk{font-weight:600}
.finding{border-left:5px solid #8894a0;background:#f8f9fa;border-radius:4px;padding:8px 12px;margin:10px 0;break-inside:avoid}
.finding.error{border-left-color:#c2362f;background:#fdf3f2}
.finding.warning{border-left-color:#d9800b;background:#fdf7ee}
.finding.info{border-left-color:#1f5fa8;background:#f2f6fb}
.finding.ok{border-left-color:#2a8a3e;background:#f1f8f2}
.finding p{margin:4px 0}
.finding ul{margin:2px 0 4px;padding-left:20px}
.lbl{font-size:12px;font-weight:700;text-transform:uppercase;color:#5b6670}
.badge{display:inline-block;font-size:11px;font-weight:700;text-transform:uppercase;padding:1px 7px;border-radius:10px;color:#fff;background:#8894a0}
.badge.error{background:#c2362f}.badge.warning{background:#b86a05}.badge.info{background:#1f5fa8}.badge.ok{background:#2a8a3e}
.cc{font-style:italic;color:#5b3c00}
.tw{overflow-x:auto;margin:10px 0}
table{border-collapse:collapse;font-size:13px;min-width:50%}
caption{text-align:left;font-weight:600;padding:4px 0;font-size:14px}
th,td{border-bottom:1px solid #e1e5e9;padding:4px 8px;text-align:left;vertical-align:top;white-space:pre-wrap;word-break:normal;overflow-wrap:break-word;max-width:520px}
th{background:#eef1f4;font-weight:600;white-space:nowrap;word-break:normal}
.more,.notes{font-size:13px;color:#5b6670}
footer{font-size:12px;color:#5b6670;margin-top:20px}
@media (max-width:900px){main{padding:10px}body{font-size:14px}.card .v{font-size:18px}section{padding:4px 10px 10px}}
@media print{body{background:#fff}nav{display:none}section,.verdict,.card{box-shadow:none;border:1px solid #ccc}main{max-width:none;padding:0}.tw{overflow:visible}th,td{max-width:none}}
"#;

pub fn render(r: &Report) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>memq report — {}</title><style>{CSS}</style></head><body><main>\n",
        esc(&r.input)
    );
    let _ = writeln!(
        o,
        "<header><h1>Memory diagnosis</h1><div class=\"sub\">{} · {}</div></header>",
        esc(&r.input),
        esc(&r.generated)
    );
    o.push_str("<nav><a href=\"#verdict\">Verdict</a>");
    for s in &r.sections {
        let _ = write!(o, "<a href=\"#{}\">{}</a>", esc(&s.id), esc(&s.title));
    }
    o.push_str("</nav>\n");
    let _ = write!(
        o,
        "<div id=\"verdict\" class=\"verdict {}\"><h2>Verdict</h2><p>{}</p><b>Do first:</b><ol>",
        r.verdict.severity.as_str(),
        esc(&r.verdict.summary)
    );
    for a in &r.verdict.actions {
        let _ = write!(o, "<li>{}</li>", esc(a));
    }
    o.push_str("</ol></div>\n<div class=\"cards\">");
    let m = &r.metrics;
    let card = |o: &mut String, k: &str, v: String, w: Option<&String>| {
        let _ = write!(
            o,
            "<div class=\"card\"><div class=\"k\">{}</div><div class=\"v\">{}</div><div class=\"w\">{}</div></div>",
            esc(k),
            esc(&v),
            breakable(w.map(|s| s.as_str()).unwrap_or(""))
        );
    };
    card(
        &mut o,
        "Peak",
        m.peak_bytes.map(fmt_bytes).unwrap_or("—".into()),
        m.peak_where.as_ref(),
    );
    card(
        &mut o,
        "Reserved peak",
        m.reserved_bytes.map(fmt_bytes).unwrap_or("—".into()),
        m.reserved_where.as_ref(),
    );
    card(
        &mut o,
        "Growing (leak)",
        m.leak_bytes
            .map(fmt_bytes)
            .unwrap_or_else(|| "cannot tell".into()),
        Some(&match (&m.leak_bytes, &m.leak_where) {
            (None, _) => "the input cannot tell".to_string(),
            (Some(_), Some(w)) => w.clone(),
            (Some(_), None) => "no device grows".to_string(),
        }),
    );
    card(
        &mut o,
        "Fragmentation",
        m.frag_pct.map(fmt_pct).unwrap_or("n/a".into()),
        Some(
            &m.frag_where
                .clone()
                .unwrap_or_else(|| "needs a snapshot".into()),
        ),
    );
    card(
        &mut o,
        "Cached free",
        m.cached_free_bytes.map(fmt_bytes).unwrap_or("—".into()),
        Some(&match &m.cached_free_where {
            Some(w) => format!("{w}; empty_cache() returns it"),
            None => "empty_cache() returns it".to_string(),
        }),
    );
    card(&mut o, "OOM events", m.oom_events.to_string(), None);
    if let Some(s) = m.segments {
        card(&mut o, "Segments", s.to_string(), None);
    }
    card(&mut o, "Devices", m.devices.to_string(), None);
    o.push_str("</div>\n");
    for s in &r.sections {
        let _ = writeln!(
            o,
            "<section id=\"{}\"><h2>{}</h2>",
            esc(&s.id),
            esc(&s.title)
        );
        for b in &s.blocks {
            match b {
                Block::Text(t) => {
                    let _ = writeln!(o, "<p>{}</p>", esc(t));
                }
                Block::Finding(i) => {
                    if let Some(f) = r.findings.get(*i) {
                        o.push_str(&finding(f));
                    }
                }
                Block::Table(t) => o.push_str(&table(t)),
                Block::Chart(c) => o.push_str(&chart(c)),
            }
        }
        o.push_str("</section>\n");
    }
    if !r.notes.is_empty() {
        o.push_str("<section id=\"notes\"><h2>Notes</h2><ul class=\"notes\">");
        for n in &r.notes {
            let _ = write!(o, "<li>analysis failed: {}</li>", esc(n));
        }
        o.push_str("</ul></section>");
    }
    let _ = writeln!(
        o,
        "<footer>Made by {} from the canned analyses (`memq views`); every figure can be re-run with `memq sql`.</footer></main></body></html>",
        esc(&r.generated)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(x0: f64, x1: f64, min: f64, max: f64) -> BandBucket {
        BandBucket { x0, x1, min, max }
    }

    #[test]
    fn a_gap_between_buckets_splits_the_band() {
        // buckets [0,1) [1,2), nothing in [2,5), then [5,6): two runs
        let band = vec![
            bucket(0.0, 1.0, 10.0, 20.0),
            bucket(1.0, 2.0, 15.0, 30.0),
            bucket(5.0, 6.0, 5.0, 8.0),
        ];
        let runs = band_runs(&band);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0], &band[..2]);
        assert_eq!(runs[1], &band[2..]);
        assert!(band_runs(&[]).is_empty());
        let chart = LineChart {
            title: "t".into(),
            x_label: "x".into(),
            x_unit: "s".into(),
            series: vec![Series {
                name: "s".into(),
                points: vec![(0.5, 20.0), (1.5, 30.0), (5.5, 8.0)],
                band,
                area: false,
            }],
            markers: Vec::new(),
        };
        let svg = line_chart(&chart);
        let polys: Vec<&str> = svg
            .split("<polygon class=\"band\" points=\"")
            .skip(1)
            .map(|p| p.split('"').next().unwrap())
            .collect();
        assert_eq!(polys.len(), 2, "{svg}");
        // step-wise: 2 points per bucket on top and 2 back along the bottom
        assert_eq!(polys[0].split(' ').count(), 8);
        assert_eq!(polys[1].split(' ').count(), 4);
        // no band point of the first run lies in the gap (x in (2, 5) s)
        let xs = |p: &str| -> Vec<f64> {
            p.split(' ')
                .map(|xy| xy.split(',').next().unwrap().parse().unwrap())
                .collect()
        };
        let (gap_from, gap_to) = (
            xs(polys[0]).into_iter().fold(0.0, f64::max),
            xs(polys[1]).into_iter().fold(f64::MAX, f64::min),
        );
        assert!(gap_to - gap_from > 100.0, "{gap_from} .. {gap_to}");
    }
}
