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
        let (shape, turns) = memq_engine::shape::classify(&vals);
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
    }
    // the shapes worth a word (curve_findings.sql)
    blocks.extend(b.push_section("curves"));
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
