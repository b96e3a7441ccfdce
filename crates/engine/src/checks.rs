//! Argument checks of the table functions (the parameterised analyses), so that a mistyped
//! argument is a clear error rather than 0 rows. What a parameter stands for is declared in its
//! `@param` line (`[moment]`, `[one of pools]`: [`crate::library::Check`]); what is true of the
//! dataset is each format's facts ([`crate::facts`]). The engine names no table and no format.
//!
//! - A moment (`[moment]`, `[window start]`, `[window end]`) may be written as ns since the
//!   Unix epoch, `'+12.3s'` (from the run's start; `ms`, `us`, `ns`, `min`, `h` too), an ISO
//!   time (`'2025-12-05T02:00:12.5Z'`, UTC unless it gives an offset), `'start'`, `'end'` or
//!   `'peak'` (for a moment: each series at its own peak, passed on as
//!   [`PEAK_OF_EACH_SERIES`]; for a window: the moment the format's fact `peak` gives, for the
//!   `per` argument when there is one). It must lie in the format's run (its fact `range`); one
//!   that would with ×1000 (µs given for ns) says so.
//! - A name (`[one of FACT]`) must be one of the fact's names (a case-insensitive match is
//!   offered); with `or a part`, a part of exactly one name stands for it; with `per PARAM`,
//!   only the names listed with PARAM's argument count.
//! - Any argument may be a scalar subquery, `(SELECT ts FROM peaks WHERE ...)`.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{plan_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::Subquery;
use datafusion::prelude::SessionContext;

use crate::facts::{scalars, Facts};
use crate::library::{default_value, Analysis, Check, CheckKind};
use crate::units::{format_epoch, parse_duration, parse_epoch};

fn is_moment(c: Option<&Check>) -> bool {
    matches!(
        c.map(|c| &c.kind),
        Some(CheckKind::Moment | CheckKind::WindowStart | CheckKind::WindowEnd)
    )
}

/// One argument as given.
#[derive(Debug, Clone)]
pub enum Arg {
    Value(ScalarValue),
    /// `(SELECT ...)`: run when the call is scanned.
    Subquery(Subquery),
}

/// True when the call must be planned at scan time: a subquery argument, a moment written as
/// text, or a value memq checks.
pub fn needs_checks(analysis: &Analysis, args: &[Arg]) -> bool {
    args.iter().zip(&analysis.params).any(|(a, p)| match a {
        Arg::Subquery(_) => true,
        Arg::Value(v) => !v.is_null() && p.check.is_some(),
    })
}

/// A value of the parameter's type that stands in for an argument only known at scan time, for
/// the call's schema (not null, as the real value must be).
pub fn stand_in(analysis: &Analysis, args: &[Arg]) -> Vec<ScalarValue> {
    args.iter()
        .zip(&analysis.params)
        .map(|(a, p)| match a {
            Arg::Value(v)
                if !(is_moment(p.check.as_ref()) && matches!(v, ScalarValue::Utf8(_))) =>
            {
                v.clone()
            }
            _ => match p.data_type {
                DataType::Utf8 => ScalarValue::Utf8(Some(String::new())),
                DataType::Boolean => ScalarValue::Boolean(Some(false)),
                ref t => ScalarValue::new_zero(t).unwrap_or(ScalarValue::Null),
            },
        })
        .collect()
}

fn err<T>(analysis: &Analysis, param: &str, msg: impl std::fmt::Display) -> DfResult<T> {
    plan_err!("{}: {param}: {msg}", analysis.name)
}

/// The value of a scalar subquery argument.
async fn subquery_value(
    ctx: &SessionContext,
    analysis: &Analysis,
    param: &str,
    s: &Subquery,
) -> DfResult<ScalarValue> {
    let batches = ctx
        .execute_logical_plan(s.subquery.as_ref().clone())
        .await?
        .collect()
        .await?;
    let rows = scalars(&batches)?;
    match rows.as_slice() {
        [row] if row.len() == 1 && !row[0].is_null() => Ok(row[0].clone()),
        [row] if row.len() == 1 => err(analysis, param, "the subquery gave NULL"),
        [row] => err(
            analysis,
            param,
            format!("the subquery gives {} columns; one is needed", row.len()),
        ),
        [] => err(analysis, param, "the subquery gave no row"),
        many => err(
            analysis,
            param,
            format!("the subquery gave {} rows; a scalar subquery must give one (add LIMIT 1 or an aggregate)", many.len()),
        ),
    }
}

fn as_text(v: &ScalarValue) -> Option<&str> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => Some(s),
        _ => None,
    }
}

/// A value as a name: a text as it is, any other value as SQL prints it.
fn as_name(v: &ScalarValue) -> String {
    as_text(v).map_or_else(|| v.to_string(), str::to_string)
}

/// The moment `'peak'` of a breakdown: each series at its own peak of live bytes
/// (breakdown_at.sql, breakdown_tree_at.sql).
pub const PEAK_OF_EACH_SERIES: i64 = i64::MIN;

/// "the dataset has no msMemScope events": for a format without the fact's rows.
fn no_fact(facts: &Facts, analysis: &Analysis, fact: &str) -> String {
    let item = facts.def(analysis.format(), fact).map_or(fact, |f| f.item);
    format!("the dataset has no {item}")
}

/// The readable moment `text` in ns; `per` is the argument (and its parameter) the format's
/// `peak` is asked for.
async fn moment(
    ctx: &SessionContext,
    facts: &Facts,
    analysis: &Analysis,
    param: &str,
    text: &str,
    per: Option<(&str, &ScalarValue)>,
) -> DfResult<i64> {
    let t = text.trim();
    let range = facts.range(ctx, analysis.format()).await;
    let no_run = || err(analysis, param, no_fact(facts, analysis, "range"));
    if let Ok(v) = t.parse::<i64>() {
        return Ok(v);
    }
    match t.to_ascii_lowercase().as_str() {
        "start" => return range.map(|r| r.0).map_or_else(no_run, Ok),
        "end" => return range.map(|r| r.1).map_or_else(no_run, Ok),
        "peak" => {
            let Some(peak) = facts.def(analysis.format(), "peak") else {
                return err(analysis, param, "'peak' is not known for this analysis");
            };
            let key = per.map_or(ScalarValue::Utf8(None), |(_, v)| v.clone());
            let df = ctx.sql(peak.sql).await?.with_param_values(vec![key])?;
            let rows = scalars(&df.collect().await?)?;
            return match rows.first().and_then(|r| r.first()) {
                Some(ScalarValue::Int64(Some(ts))) => Ok(*ts),
                _ => err(
                    analysis,
                    param,
                    format!(
                        "no {}{} to find the peak in",
                        peak.item,
                        per.filter(|(_, v)| !v.is_null())
                            .map(|(p, v)| format!(" for {p} {}", as_name(v)))
                            .unwrap_or_default()
                    ),
                ),
            };
        }
        _ => {}
    }
    if let Some(offset) = t.strip_prefix('+').and_then(parse_duration) {
        return match range {
            Some((lo, _)) => Ok(lo.saturating_add(offset)),
            None => no_run(),
        };
    }
    if let Some(ns) = parse_epoch(t) {
        return Ok(ns);
    }
    err(
        analysis,
        param,
        format!("'{text}' is not a moment: give ns since the Unix epoch, '+12.3s' (from the run's start), an ISO time ('2025-12-05T02:00:12.5Z'), 'start', 'end' or 'peak'"),
    )
}

/// `2025-12-05T02:00:00.113413334Z (1764900000113413334)`.
fn moment_text(ns: i64) -> String {
    format!("{} ({ns})", format_epoch(ns, 9))
}

/// Why `v` (ns) is not in the run `[lo, hi]`: with the unit it looks like it was given in.
fn outside(v: i64, (lo, hi): (i64, i64)) -> String {
    let inside = |x: i64| (lo..=hi).contains(&x);
    let scaled = [(1000, "µs"), (1_000_000, "ms"), (1_000_000_000, "s")]
        .into_iter()
        .find(|(f, _)| v.checked_mul(*f).is_some_and(inside));
    match scaled {
        Some((f, unit)) => format!(
            "{v} is not in the run: it looks like {unit} since the epoch, and the run's timestamps are ns: use {} (or '+{:.6}s')",
            v * f,
            (v * f - lo) as f64 / 1e9
        ),
        None if v >= 0 && v <= hi - lo => format!(
            "{v} is not in the run: it looks like an offset from the run's start; write '+{:.6}s' or {}",
            v as f64 / 1e9,
            lo + v
        ),
        None => format!(
            "{} is not in the run, which goes from {} to {}",
            moment_text(v),
            moment_text(lo),
            moment_text(hi)
        ),
    }
}

/// The one name of `known` that contains `part` (case-insensitive) when it is not a name itself.
fn unique_part<'a>(part: &str, known: &'a [String]) -> Option<&'a String> {
    if part.is_empty() || known.iter().any(|k| k == part) {
        return None;
    }
    let lower = part.to_lowercase();
    let mut hits = known.iter().filter(|k| k.to_lowercase().contains(&lower));
    match (hits.next(), hits.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// `value` among `known` (`what`: "pool"; `of`: " of a.pickle" when the list is narrowed): an
/// error naming the case-insensitive match, or the names there are.
fn check_name(
    analysis: &Analysis,
    param: &str,
    what: &str,
    value: &ScalarValue,
    known: &[String],
    of: &str,
) -> DfResult<()> {
    let name = as_name(value);
    if known.contains(&name) {
        return Ok(());
    }
    if known.is_empty() && of.is_empty() {
        return err(analysis, param, format!("the dataset has no {what}s"));
    }
    let shown = match as_text(value) {
        Some(t) => format!("'{t}'"),
        None => name.clone(),
    };
    let lower = name.to_lowercase();
    let near = known
        .iter()
        .find(|k| k.to_lowercase() == lower)
        .or_else(|| {
            known
                .iter()
                .find(|k| k.to_lowercase().contains(&lower) || lower.contains(&k.to_lowercase()))
        })
        .filter(|_| as_text(value).is_some());
    let mut list: Vec<&str> = known.iter().take(12).map(String::as_str).collect();
    if known.len() > list.len() {
        list.push("…");
    }
    let list = match list.is_empty() {
        true => "none".to_string(),
        false => list.join(", "),
    };
    let hint = near
        .map(|k| format!("; did you mean '{k}'?"))
        .unwrap_or_default();
    err(
        analysis,
        param,
        format!("unknown {what} {shown}{hint} ({what}s{of}: {list})"),
    )
}

/// The names of a `[one of FACT]` check, those listed with `key` only when it is given.
async fn names(
    ctx: &SessionContext,
    facts: &Facts,
    sql: &'static str,
    key: Option<&str>,
) -> Vec<String> {
    let rows = facts.rows(ctx, sql).await.unwrap_or_default();
    let mut names: Vec<String> = rows
        .iter()
        .filter(|r| match (key, r.get(1)) {
            (Some(want), Some(have)) => as_name(have) == want,
            _ => true,
        })
        .filter_map(|r| r.first())
        .filter(|v| !v.is_null())
        .map(as_name)
        .collect();
    names.dedup();
    names
}

/// The arguments' values for the call: subqueries run, readable moments turned into ns, and
/// every checked value checked.
pub async fn resolve(
    ctx: &SessionContext,
    analysis: &Analysis,
    args: &[Arg],
) -> DfResult<Vec<ScalarValue>> {
    let facts = Facts::of(ctx.state().config());
    let mut values = Vec::with_capacity(args.len());
    for (a, p) in args.iter().zip(&analysis.params) {
        values.push(match a {
            Arg::Value(v) => v.clone(),
            Arg::Subquery(s) => subquery_value(ctx, analysis, &p.name, s).await?,
        });
    }
    // The argument of parameter `name`, else its default (NULL when it has none).
    let value_of = |values: &[ScalarValue], name: &str| -> ScalarValue {
        let Some(i) = analysis.params.iter().position(|p| p.name == name) else {
            return ScalarValue::Null;
        };
        match values.get(i) {
            Some(v) => v.clone(),
            None => analysis.params[i]
                .default
                .as_deref()
                .and_then(|d| default_value(d, &analysis.params[i].data_type).ok())
                .unwrap_or(ScalarValue::Null),
        }
    };
    let mut window = (None, None);
    for i in 0..values.len().min(analysis.params.len()) {
        let p = &analysis.params[i];
        let Some(check) = &p.check else {
            continue;
        };
        if values[i].is_null() {
            continue;
        }
        let per = check
            .per
            .as_deref()
            .map(|name| (name, value_of(&values, name)));
        match &check.kind {
            // 'peak' as the moment of a breakdown is each series' own peak (the analysis joins
            // `peaks`), passed on as the one value no moment has.
            CheckKind::Moment
                if as_text(&values[i]).is_some_and(|t| t.trim().eq_ignore_ascii_case("peak")) =>
            {
                values[i] = ScalarValue::Int64(Some(PEAK_OF_EACH_SERIES));
            }
            kind @ (CheckKind::Moment | CheckKind::WindowStart | CheckKind::WindowEnd) => {
                let ns = match as_text(&values[i]) {
                    Some(text) => {
                        let per = per.as_ref().map(|(n, v)| (*n, v));
                        moment(ctx, &facts, analysis, &p.name, text, per).await?
                    }
                    None => match values[i].cast_to(&DataType::Int64)? {
                        ScalarValue::Int64(Some(v)) => v,
                        _ => continue,
                    },
                };
                values[i] = ScalarValue::Int64(Some(ns));
                match kind {
                    CheckKind::Moment => {
                        let Some(range) = facts.range(ctx, analysis.format()).await else {
                            return err(analysis, &p.name, no_fact(&facts, analysis, "range"));
                        };
                        if !(range.0..=range.1).contains(&ns) {
                            return err(analysis, &p.name, outside(ns, range));
                        }
                    }
                    CheckKind::WindowStart => window.0 = Some((p.name.clone(), ns)),
                    _ => window.1 = Some((p.name.clone(), ns)),
                }
            }
            CheckKind::OneOf { fact, by_part } => {
                let Some(def) = facts.def(analysis.format(), fact) else {
                    return err(
                        analysis,
                        &p.name,
                        format!("no fact `{fact}` to check it by"),
                    );
                };
                let key = per
                    .as_ref()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(_, v)| as_name(v));
                let known = names(ctx, &facts, def.sql, key.as_deref()).await;
                if *by_part {
                    if let Some(full) = as_text(&values[i]).and_then(|t| unique_part(t, &known)) {
                        // A part of one name alone names it (`'forward'` for
                        // `cuda_transformer_forward.pickle`).
                        values[i] = ScalarValue::Utf8(Some(full.clone()));
                        continue;
                    }
                }
                let of = key.map(|k| format!(" of {k}")).unwrap_or_default();
                check_name(analysis, &p.name, def.item, &values[i], &known, &of)?;
            }
        }
    }
    if let (Some((n0, t0)), Some((n1, t1))) = (&window.0, &window.1) {
        if t0 > t1 {
            return err(
                analysis,
                n1,
                format!("the window ends ({t1}) before it starts ({n0} = {t0})"),
            );
        }
        let Some(range) = facts.range(ctx, analysis.format()).await else {
            return err(analysis, n0, no_fact(&facts, analysis, "range"));
        };
        if *t1 < range.0 {
            return err(analysis, n1, outside(*t1, range));
        }
        if *t0 > range.1 {
            return err(analysis, n0, outside(*t0, range));
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_the_run_says_which_unit_it_looks_like() {
        let run = (1_764_900_000_000_000_000, 1_764_900_060_000_000_000);
        let m = outside(1_764_900_012_345_678, run);
        assert!(
            m.contains("looks like µs") && m.contains("1764900012345678000"),
            "{m}"
        );
        let m = outside(1_764_900_012, run);
        assert!(m.contains("looks like s since the epoch"), "{m}");
        let m = outside(12_000_000_000, run);
        assert!(
            m.contains("offset from the run's start") && m.contains("'+12.000000s'"),
            "{m}"
        );
        let m = outside(1_000_000_000_000_000_000, run);
        assert!(
            m.contains("2001-09-09T01:46:40") && m.contains("which goes from 2025-12-05T02:00:00"),
            "{m}"
        );
    }
}
