//! Units of a query's result columns, from the plan. A table column carries its unit (bytes,
//! ns, ...) in its Arrow field metadata (the catalog), a view column from its `@column` line;
//! this follows them through the plan, so `SELECT max(size) AS peak FROM blocks` still knows
//! that `peak` is bytes: a unit survives aliases, casts, `min`/`max`/`sum`/`avg`/
//! `first_value`/`last_value`/`any_value`, `coalesce`/`abs`/`greatest`/`least`, and `+`/`-` of
//! operands of one unit. Anything else has no unit.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, Operator};
use memq_core::catalog::Unit;

/// `schema` (the plan's output, or a batch's) with each column's unit in its field metadata.
pub fn annotate(schema: &SchemaRef, units: &[Unit]) -> SchemaRef {
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .zip(units.iter().copied().chain(std::iter::repeat(Unit::None)))
        .map(|(f, u)| {
            if Unit::of(f) == Unit::None && u != Unit::None {
                Arc::new(u.annotate(f.as_ref().clone()))
            } else {
                f.clone()
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

fn own_units(plan: &LogicalPlan) -> Vec<Unit> {
    plan.schema().fields().iter().map(|f| Unit::of(f)).collect()
}

/// The unit of each output column of the plan.
pub fn units(plan: &LogicalPlan) -> Vec<Unit> {
    let own = own_units(plan);
    let inferred = match plan {
        LogicalPlan::Projection(p) => {
            let input = units(&p.input);
            p.expr
                .iter()
                .map(|e| expr_unit(e, &p.input, &input))
                .collect()
        }
        LogicalPlan::Aggregate(a) => {
            let input = units(&a.input);
            a.group_expr
                .iter()
                .chain(&a.aggr_expr)
                .map(|e| expr_unit(e, &a.input, &input))
                .collect()
        }
        LogicalPlan::Window(w) => {
            let mut out = units(&w.input);
            let input = out.clone();
            out.extend(w.window_expr.iter().map(|e| expr_unit(e, &w.input, &input)));
            out
        }
        LogicalPlan::Join(j) => {
            let mut out = units(&j.left);
            out.extend(units(&j.right));
            out
        }
        LogicalPlan::Union(u) => u.inputs.first().map(|i| units(i)).unwrap_or_default(),
        LogicalPlan::Filter(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::Distinct(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Repartition(_) => {
            let inputs = plan.inputs();
            inputs.first().map(|i| units(i)).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    // A unit declared on the node itself (metadata) wins over one inferred from its inputs.
    own.into_iter()
        .enumerate()
        .map(|(i, u)| {
            if u != Unit::None {
                u
            } else {
                inferred.get(i).copied().unwrap_or(Unit::None)
            }
        })
        .collect()
}

fn expr_unit(e: &Expr, input: &LogicalPlan, units: &[Unit]) -> Unit {
    let of = |e: &Expr| expr_unit(e, input, units);
    match e {
        Expr::Alias(a) => of(&a.expr),
        Expr::Column(c) => input
            .schema()
            .index_of_column(c)
            .ok()
            .and_then(|i| units.get(i).copied())
            .unwrap_or(Unit::None),
        Expr::Cast(c) => of(&c.expr),
        Expr::TryCast(c) => of(&c.expr),
        Expr::Negative(inner) => of(inner),
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Plus | Operator::Minus,
            right,
        }) => {
            let (l, r) = (of(left), of(right));
            if l == r || r == Unit::None && matches!(**right, Expr::Literal(..)) {
                l
            } else if l == Unit::None && matches!(**left, Expr::Literal(..)) {
                r
            } else {
                Unit::None
            }
        }
        Expr::AggregateFunction(f) => match f.func.name() {
            "min" | "max" | "sum" | "avg" | "first_value" | "last_value" | "any_value"
            | "median" => f.params.args.first().map(of).unwrap_or(Unit::None),
            _ => Unit::None,
        },
        Expr::WindowFunction(w) => match w.fun.name() {
            "min" | "max" | "sum" | "avg" | "first_value" | "last_value" | "lag" | "lead" => {
                w.params.args.first().map(of).unwrap_or(Unit::None)
            }
            _ => Unit::None,
        },
        Expr::ScalarFunction(f) => match f.func.name() {
            "coalesce" | "abs" | "greatest" | "least" | "nullif" => {
                f.args.first().map(of).unwrap_or(Unit::None)
            }
            _ => Unit::None,
        },
        _ => Unit::None,
    }
}

/// Days since 1970-01-01 as a civil (proleptic Gregorian) date.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A civil date as days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

const NS_PER_S: i64 = 1_000_000_000;

/// A moment in ns since the Unix epoch as ISO 8601 UTC with `digits` fraction digits (9 for
/// ns, 6 for µs): `2025-12-05T02:00:00.113413334Z`.
pub fn format_epoch(ns: i64, digits: usize) -> String {
    let secs = ns.div_euclid(NS_PER_S);
    let frac = ns.rem_euclid(NS_PER_S);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let frac = format!("{frac:09}");
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        &frac[..digits.clamp(1, 9)]
    )
}

/// A time since the run's start, in seconds with µs: `+12.345678 s`, `-0.000100 s`.
pub fn format_offset(ns: i64) -> String {
    let sign = if ns < 0 { '-' } else { '+' };
    let a = ns.unsigned_abs();
    format!(
        "{sign}{}.{:06} s",
        a / 1_000_000_000,
        a % 1_000_000_000 / 1000
    )
}

/// A duration readably: `950 ns`, `3.200 µs`, `1.234 ms`, `12.345 s`, `2 min 05 s`,
/// `3 h 02 min`.
pub fn format_duration(ns: f64) -> String {
    if !ns.is_finite() {
        return ns.to_string();
    }
    let sign = if ns < 0.0 { "-" } else { "" };
    let a = ns.abs();
    let text = if a < 1e3 {
        format!("{} ns", a.round())
    } else if a < 1e6 {
        format!("{:.3} µs", a / 1e3)
    } else if a < 1e9 {
        format!("{:.3} ms", a / 1e6)
    } else if a < 60e9 {
        format!("{:.3} s", a / 1e9)
    } else if a < 3600e9 {
        let s = (a / 1e9).round() as u64;
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        let m = (a / 60e9).round() as u64;
        format!("{} h {:02} min", m / 60, m % 60)
    };
    format!("{sign}{text}")
}

/// A duration written with a unit (`12.3s`, `150 ms`, `20us`, `5µs`, `100ns`, `2min`, `1h`) in
/// ns; `None` when it is not one.
pub fn parse_duration(text: &str) -> Option<i64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return None,
    };
    let ns = value * scale;
    (ns.is_finite() && ns.abs() < 9.2e18).then(|| ns.round() as i64)
}

/// An ISO 8601 moment (`2025-12-05T02:00:12.5Z`, `2025-12-05 02:00:12`; UTC unless it ends in
/// `+hh:mm`/`-hh:mm`) in ns since the Unix epoch.
pub fn parse_epoch(text: &str) -> Option<i64> {
    let t = text.trim();
    let (date, rest) = t.split_at(t.find(['T', ' '])?);
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut time = &rest[1..];
    let mut offset_s = 0i64;
    if let Some(z) = time.strip_suffix('Z') {
        time = z;
    } else if let Some(i) = time.rfind(['+', '-']) {
        let (hh, mm) = time[i + 1..].split_once(':')?;
        let o = hh.parse::<i64>().ok()? * 3600 + mm.parse::<i64>().ok()? * 60;
        offset_s = if &time[i..=i] == "+" { o } else { -o };
        time = &time[..i];
    }
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut hms = hms.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let mi: i64 = hms.next()?.parse().ok()?;
    let s: i64 = hms.next().unwrap_or("0").parse().ok()?;
    if hms.next().is_some() || h > 23 || mi > 59 || s > 60 || frac.len() > 9 {
        return None;
    }
    let frac_ns: i64 = if frac.is_empty() {
        0
    } else {
        if !frac.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        format!("{frac:0<9}").parse().ok()?
    };
    let secs = days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + s - offset_s;
    secs.checked_mul(NS_PER_S)?.checked_add(frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_read_and_write_as_iso() {
        let ns = 1_764_900_000_113_413_334;
        assert_eq!(format_epoch(ns, 9), "2025-12-05T02:00:00.113413334Z");
        assert_eq!(format_epoch(ns, 6), "2025-12-05T02:00:00.113413Z");
        assert_eq!(parse_epoch("2025-12-05T02:00:00.113413334Z"), Some(ns));
        assert_eq!(parse_epoch("2025-12-05 10:00:00.113413334+08:00"), Some(ns));
        assert_eq!(format_epoch(0, 9), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(format_epoch(-1, 9), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(
            parse_epoch("2024-02-29T00:00:00Z"),
            Some(1_709_164_800 * NS_PER_S)
        );
        assert_eq!(parse_epoch("peak"), None);
        assert_eq!(parse_epoch("2025-13-01T00:00:00"), None);
    }

    #[test]
    fn durations_read_and_write_with_units() {
        assert_eq!(format_offset(12_345_678_901), "+12.345678 s");
        assert_eq!(format_offset(-100_000), "-0.000100 s");
        assert_eq!(format_duration(950.0), "950 ns");
        assert_eq!(format_duration(1_234_000.0), "1.234 ms");
        assert_eq!(format_duration(-3_200.0), "-3.200 µs");
        assert_eq!(format_duration(125e9), "2 min 05 s");
        assert_eq!(parse_duration("12.3s"), Some(12_300_000_000));
        assert_eq!(parse_duration("150 ms"), Some(150_000_000));
        assert_eq!(parse_duration("20us"), Some(20_000));
        assert_eq!(parse_duration("2min"), Some(120_000_000_000));
        assert_eq!(parse_duration("12.3"), None);
        assert_eq!(parse_duration("s"), None);
    }
}
