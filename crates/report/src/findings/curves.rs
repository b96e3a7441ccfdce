//! (2) memory curves and their shape.

use super::*;

/// One non-empty bucket of a curve (ns since the Unix epoch, bytes).
pub(super) struct Bucket {
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
pub(super) struct Curve {
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

pub(super) fn curves(d: &Data) -> Vec<Curve> {
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
pub(super) fn primary_metric(pool: &str) -> &'static str {
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

pub(super) fn shape_words(shape: &str) -> (&'static str, &'static str, Severity) {
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

pub(super) fn curve_section(b: &mut Builder) {
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
pub(super) const MAX_STEP_BARS: usize = 30;
