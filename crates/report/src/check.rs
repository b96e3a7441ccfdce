//! `memq check`: the report's headline figures against limits, for CI (docs/report.md, "check").
//! Exit 0 when every limit holds, 1 when one is exceeded, 2 on bad input (including a limit
//! the data cannot measure).

use serde::Serialize;
use serde_json::json;

use super::{fmt_bytes, fmt_pct, Report};

/// The limits of `memq check`.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub max_peak: Option<i64>,
    pub max_reserved: Option<i64>,
    pub max_leak: Option<i64>,
    pub max_frag: Option<f64>,
    pub no_oom: bool,
}

/// One measured value beside its limit.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// peak, reserved, leak, frag, oom
    pub name: String,
    /// bytes, percent or count
    pub unit: String,
    /// NULL when the data cannot measure it
    pub measured: Option<f64>,
    pub limit: f64,
    /// pass, fail or unmeasurable
    pub status: String,
    /// where the value was measured (device, pool)
    #[serde(rename = "where")]
    pub at: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub input: String,
    pub checks: Vec<Check>,
    /// pass, fail or error
    pub result: String,
    pub exit_code: i32,
}

fn one(name: &str, unit: &str, measured: Option<f64>, limit: f64, at: Option<String>) -> Check {
    let status = match measured {
        None => "unmeasurable",
        Some(v) if v > limit => "fail",
        Some(_) => "pass",
    };
    Check {
        name: name.into(),
        unit: unit.into(),
        measured,
        limit,
        status: status.into(),
        at,
    }
}

pub fn evaluate(r: &Report, l: &Limits) -> Outcome {
    let m = &r.metrics;
    let mut checks = Vec::new();
    if let Some(x) = l.max_peak {
        checks.push(one(
            "peak",
            "bytes",
            m.peak_bytes.map(|v| v as f64),
            x as f64,
            m.peak_where.clone(),
        ));
    }
    if let Some(x) = l.max_reserved {
        checks.push(one(
            "reserved",
            "bytes",
            m.reserved_bytes.map(|v| v as f64),
            x as f64,
            m.reserved_where.clone(),
        ));
    }
    if let Some(x) = l.max_leak {
        checks.push(one(
            "leak",
            "bytes",
            m.leak_bytes.map(|v| v as f64),
            x as f64,
            m.leak_where.clone(),
        ));
    }
    if let Some(x) = l.max_frag {
        checks.push(one("frag", "percent", m.frag_pct, x, m.frag_where.clone()));
    }
    if l.no_oom {
        checks.push(one("oom", "count", Some(m.oom_events as f64), 0.0, None));
    }
    let exit_code = if checks.iter().any(|c| c.status == "unmeasurable") {
        2
    } else if checks.iter().any(|c| c.status == "fail") {
        1
    } else {
        0
    };
    Outcome {
        input: r.input.clone(),
        checks,
        result: match exit_code {
            0 => "pass",
            1 => "fail",
            _ => "error",
        }
        .into(),
        exit_code,
    }
}

fn show(v: f64, unit: &str) -> String {
    match unit {
        "bytes" => fmt_bytes(v as i64),
        "percent" => fmt_pct(v),
        _ => format!("{}", v as i64),
    }
}

pub fn render_text(o: &Outcome) -> String {
    let mut s = String::new();
    if o.checks.is_empty() {
        s.push_str(
            "no limit given (use --max-peak, --max-reserved, --max-leak, --max-frag, --no-oom)\n",
        );
    }
    for c in &o.checks {
        let measured = c
            .measured
            .map(|v| show(v, &c.unit))
            .unwrap_or_else(|| "cannot be measured from this input".into());
        let op = match c.status.as_str() {
            "pass" => "<=",
            "fail" => "> ",
            _ => "  ",
        };
        s.push_str(&format!(
            "{:<5} {:<9} {:>12} {op} {:<12}{}\n",
            match c.status.as_str() {
                "pass" => "ok",
                "fail" => "FAIL",
                _ => "ERROR",
            },
            c.name,
            measured,
            show(c.limit, &c.unit),
            c.at.as_ref()
                .map(|w| format!("  ({w})"))
                .unwrap_or_default()
        ));
    }
    s.push_str(&format!("result: {}\n", o.result));
    s
}

pub fn render_json(o: &Outcome) -> String {
    let mut s = serde_json::to_string_pretty(&json!(o)).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}
