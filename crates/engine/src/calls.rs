//! Calls of the table functions (the parameterised analyses): readable arguments and argument
//! checks, so that a mistyped argument is a clear error rather than 0 rows.
//!
//! - A moment (`ts` of `breakdown_at`, `t0`/`t1` of `window_summary`) may be written as ns since
//!   the Unix epoch, `'+12.3s'` (from the run's start; `ms`, `us`, `ns`, `min`, `h` too), an ISO
//!   time (`'2025-12-05T02:00:12.5Z'`, UTC unless it gives an offset), `'start'`, `'end'` or
//!   `'peak'` (for a breakdown: each series at its own peak of live bytes; for a window: the
//!   moment the pool asked for, else any pool, was highest in `curve`). It must lie in the run;
//!   one that would with ×1000 (µs given for ns) says so.
//! - A pool must be one of the dataset's (a case-insensitive match is offered); a snapshot name
//!   (`snap_compare`, `state_at`) one of its snapshots; a device one of its devices.
//! - Any argument may be a scalar subquery, `(SELECT ts FROM peaks WHERE ...)`.
//!
//! Which parameter is checked how is declared here by format and parameter name ([`kind`]); the
//! facts the checks need (time range, pools, snapshots, devices) are read once per session and
//! kept in [`Facts`], a session config extension. A call whose arguments need any of this is
//! planned when it is scanned (asynchronously, where the queries can run); the others are plain
//! views, inlined into the statement's plan.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::common::{plan_err, Column, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    Expr, LogicalPlan, LogicalPlanBuilder, Subquery, TableProviderFilterPushDown, TableScan,
    TableType,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::{SessionConfig, SessionContext};
use memq_core::dataset::FactValue;
use parking_lot::Mutex;

use crate::library::{self, Analysis};
use crate::units::{format_epoch, parse_duration, parse_epoch};

/// The time range of the msMemScope events, ns: from `event_counts` (a row per source, process,
/// device and event, with its first and last time), not a scan of `events`.
const EVENTS_RANGE: &str = "SELECT min(first_ts), max(last_ts) FROM event_counts";
/// The time range of the snapshot trace entries, µs.
const TRACES_RANGE: &str = "SELECT min(time_us), max(time_us) FROM snap_traces";
/// The pools of `curve` (a row per MALLOC/FREE row, its pool the row's Event Type), from
/// `event_counts`.
const POOLS: &str = "SELECT DISTINCT event_type AS pool FROM event_counts \
     WHERE event IN ('MALLOC', 'FREE') ORDER BY pool";
const SNAPSHOTS: &str = "SELECT DISTINCT snapshot FROM snap_info ORDER BY snapshot";
/// The names a side of `run_diff` may take: a capture (memscope-format §5.9) or a dump file.
const CAPTURES: &str = "SELECT name FROM (SELECT DISTINCT capture(source) AS name FROM blocks \
     UNION SELECT DISTINCT source FROM blocks) AS n ORDER BY name";
/// (device, snapshot) of every snapshot device with segments or trace entries.
const SNAP_DEVICES: &str = "SELECT DISTINCT device, snapshot FROM (SELECT device, snapshot \
     FROM snap_segments UNION ALL SELECT device, snapshot FROM snap_traces) AS d \
     WHERE device IS NOT NULL ORDER BY device";

/// The steps of the msMemScope run: start, end (`i64::MAX` when open) and number.
const STEPS: &str =
    "SELECT start_ts, COALESCE(end_ts, 9223372036854775807), step FROM steps ORDER BY 1, 2, 3";

/// The steps of a run, to name the step a moment falls in.
#[derive(Debug, Default)]
pub struct Steps {
    spans: Vec<(i64, i64, i64)>,
}

impl Steps {
    /// The step `ns` falls in, when every process and device that is in a step then is in the
    /// same one.
    pub fn step_at(&self, ns: i64) -> Option<i64> {
        let mut found = None;
        for &(lo, hi, step) in &self.spans {
            if lo <= ns && ns <= hi {
                match found {
                    None => found = Some(step),
                    Some(s) if s == step => {}
                    Some(_) => return None,
                }
            }
        }
        found
    }
}

/// Every fact query.
const QUERIES: [&str; 7] = [
    EVENTS_RANGE,
    TRACES_RANGE,
    POOLS,
    SNAPSHOTS,
    CAPTURES,
    SNAP_DEVICES,
    STEPS,
];

/// Facts of the dataset the argument checks and the table view need, each read once per
/// session (the dataset does not change under an open session), or once per dataset: `memq
/// ingest` keeps their rows in the manifest ([`Facts::compute`]) and an engine opening the
/// dataset starts from them ([`Facts::seeded`]), so a checked call runs no query of its own
/// (each is a Parquet read and a plan, ~5 ms of a 20–80 ms process).
#[derive(Debug, Default)]
pub struct Facts {
    rows: Mutex<HashMap<&'static str, Arc<Vec<Vec<ScalarValue>>>>>,
}

impl Facts {
    /// The facts of a manifest (`Manifest::facts`), for the queries that are still memq's.
    pub fn seeded(stored: &BTreeMap<String, Vec<Vec<FactValue>>>) -> Facts {
        let scalar = |v: &FactValue| match v {
            FactValue::Int(i) => ScalarValue::Int64(Some(*i)),
            FactValue::Text(s) => ScalarValue::Utf8(Some(s.clone())),
            FactValue::Null => ScalarValue::Null,
        };
        let rows = QUERIES
            .iter()
            .filter_map(|&sql| {
                let rows = stored.get(sql)?;
                let rows = rows.iter().map(|r| r.iter().map(scalar).collect());
                Some((sql, Arc::new(rows.collect())))
            })
            .collect();
        Facts {
            rows: Mutex::new(rows),
        }
    }

    /// Every fact query answered over `ctx`'s dataset, for its manifest: those that fail (a
    /// table the dataset lacks) or give a value other than an integer or a text are left out
    /// (a query asks again).
    pub async fn compute(ctx: &SessionContext) -> BTreeMap<String, Vec<Vec<FactValue>>> {
        let value = |v: &ScalarValue| match v {
            v if v.is_null() => Some(FactValue::Null),
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)) => Some(FactValue::Text(s.clone())),
            v if v.data_type().is_integer() => match v.cast_to(&DataType::Int64) {
                Ok(ScalarValue::Int64(Some(i))) => Some(FactValue::Int(i)),
                _ => None,
            },
            _ => None,
        };
        let facts = Facts::default();
        let mut out = BTreeMap::new();
        for sql in QUERIES {
            let Some(rows) = facts.rows(ctx, sql).await else {
                continue;
            };
            let rows: Option<Vec<Vec<FactValue>>> =
                rows.iter().map(|r| r.iter().map(value).collect()).collect();
            if let Some(rows) = rows {
                out.insert(sql.to_string(), rows);
            }
        }
        out
    }

    /// The session's facts (a config extension; a session without one gets a fresh one each
    /// time, so nothing is kept).
    pub fn of(config: &SessionConfig) -> Arc<Facts> {
        config.get_extension::<Facts>().unwrap_or_default()
    }

    /// The rows of `sql`, read once; `None` when it fails (a table the dataset lacks).
    async fn rows(
        &self,
        ctx: &SessionContext,
        sql: &'static str,
    ) -> Option<Arc<Vec<Vec<ScalarValue>>>> {
        if let Some(r) = self.rows.lock().get(sql) {
            return Some(r.clone());
        }
        let batches = ctx.sql(sql).await.ok()?.collect().await.ok()?;
        let rows = Arc::new(scalars(&batches).ok()?);
        self.rows.lock().insert(sql, rows.clone());
        Some(rows)
    }

    /// `[min, max]` of a two-column range query, when it has values.
    async fn range(&self, ctx: &SessionContext, sql: &'static str) -> Option<(i64, i64)> {
        let rows = self.rows(ctx, sql).await?;
        match rows.first().map(Vec::as_slice) {
            Some([ScalarValue::Int64(Some(lo)), ScalarValue::Int64(Some(hi))]) => Some((*lo, *hi)),
            _ => None,
        }
    }

    /// The first column of `sql`'s rows as text.
    async fn names(&self, ctx: &SessionContext, sql: &'static str) -> Vec<String> {
        self.rows(ctx, sql)
            .await
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r.first())
                    .filter(|v| !v.is_null())
                    .map(|v| match v {
                        ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The time range of the msMemScope events, ns.
    pub async fn events_range(&self, ctx: &SessionContext) -> Option<(i64, i64)> {
        self.range(ctx, EVENTS_RANGE).await
    }

    /// The run's start in ns since the Unix epoch: the first msMemScope event, else the first
    /// snapshot trace entry.
    pub async fn run_start(&self, ctx: &SessionContext) -> Option<i64> {
        if let Some((lo, _)) = self.events_range(ctx).await {
            return Some(lo);
        }
        self.range(ctx, TRACES_RANGE)
            .await
            .map(|(lo, _)| lo.saturating_mul(1000))
    }
}

/// The steps of the dataset `ctx` queries (read once per session); `None` when it has none.
pub async fn steps(ctx: &SessionContext) -> Option<Arc<Steps>> {
    let rows = Facts::of(ctx.state().config()).rows(ctx, STEPS).await?;
    let spans: Vec<(i64, i64, i64)> = rows
        .iter()
        .filter_map(|r| match r.as_slice() {
            [ScalarValue::Int64(Some(a)), ScalarValue::Int64(Some(b)), ScalarValue::Int64(Some(s))] => {
                Some((*a, *b, *s))
            }
            _ => None,
        })
        .collect();
    (!spans.is_empty()).then(|| Arc::new(Steps { spans }))
}

/// The run's start (ns since the Unix epoch) of the dataset `ctx` queries, read once per session.
pub async fn run_start(ctx: &SessionContext) -> Option<i64> {
    Facts::of(ctx.state().config()).run_start(ctx).await
}

fn scalars(batches: &[RecordBatch]) -> DfResult<Vec<Vec<ScalarValue>>> {
    let mut rows = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            rows.push(
                b.columns()
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, r))
                    .collect::<DfResult<Vec<_>>>()?,
            );
        }
    }
    Ok(rows)
}

/// What a parameter stands for, when memq checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A moment of the msMemScope run, ns.
    Moment,
    /// The start of a window of the run, ns.
    WindowStart,
    /// The end of a window of the run, ns.
    WindowEnd,
    /// An msMemScope pool.
    Pool,
    /// A snapshot's source name.
    Snapshot,
    /// A snapshot device.
    SnapDevice,
    /// A capture or dump file of msMemScope (run_diff's sides).
    Capture,
}

/// The checked parameters, by the analysis's format (its folder) and the parameter's name.
fn kind(analysis: &Analysis, param: &str) -> Option<Kind> {
    let format = analysis.path.split('/').next().unwrap_or_default();
    Some(match (format, param) {
        ("memscope", "ts") => Kind::Moment,
        ("memscope", "t0") => Kind::WindowStart,
        ("memscope", "t1") => Kind::WindowEnd,
        ("memscope", "pool") => Kind::Pool,
        ("memscope", "a" | "b") => Kind::Capture,
        ("snapshot", "snapshot" | "a" | "b") => Kind::Snapshot,
        ("snapshot", "device") => Kind::SnapDevice,
        _ => return None,
    })
}

fn is_moment(k: Option<Kind>) -> bool {
    matches!(k, Some(Kind::Moment | Kind::WindowStart | Kind::WindowEnd))
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
        Arg::Value(v) => !v.is_null() && kind(analysis, &p.name).is_some(),
    })
}

/// A value of the parameter's type that stands in for an argument only known at scan time, for
/// the call's schema (not null, as the real value must be).
pub fn stand_in(analysis: &Analysis, args: &[Arg]) -> Vec<ScalarValue> {
    args.iter()
        .zip(&analysis.params)
        .map(|(a, p)| match a {
            Arg::Value(v)
                if !(is_moment(kind(analysis, &p.name)) && matches!(v, ScalarValue::Utf8(_))) =>
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

/// The moment `'peak'` of a breakdown: each series at its own peak of live bytes
/// (breakdown_at.sql, breakdown_tree_at.sql).
pub const PEAK_OF_EACH_SERIES: i64 = i64::MIN;

/// The readable moment `text` in ns.
async fn moment(
    ctx: &SessionContext,
    facts: &Facts,
    analysis: &Analysis,
    param: &str,
    text: &str,
    pool: Option<&str>,
) -> DfResult<i64> {
    let t = text.trim();
    let range = facts.events_range(ctx).await;
    let no_run = || err(analysis, param, "the dataset has no msMemScope events");
    if let Ok(v) = t.parse::<i64>() {
        return Ok(v);
    }
    match t.to_ascii_lowercase().as_str() {
        "start" => return range.map(|r| r.0).map_or_else(no_run, Ok),
        "end" => return range.map(|r| r.1).map_or_else(no_run, Ok),
        "peak" => {
            let sql = "SELECT ts FROM curve WHERE ($1 IS NULL OR pool = $1) \
                       ORDER BY live_bytes DESC NULLS LAST, ts LIMIT 1";
            let df = ctx
                .sql(sql)
                .await?
                .with_param_values(vec![ScalarValue::Utf8(pool.map(str::to_string))])?;
            let rows = scalars(&df.collect().await?)?;
            return match rows.first().and_then(|r| r.first()) {
                Some(ScalarValue::Int64(Some(ts))) => Ok(*ts),
                _ => err(
                    analysis,
                    param,
                    format!(
                        "no memory curve{} to find the peak in",
                        pool.map(|p| format!(" for pool {p}")).unwrap_or_default()
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

/// `name` among `known` (`what`: "pool", "snapshot"): an error naming the case-insensitive
/// match, or the names there are.
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

fn check_name(
    analysis: &Analysis,
    param: &str,
    what: &str,
    name: &str,
    known: &[String],
) -> DfResult<()> {
    if known.iter().any(|k| k == name) {
        return Ok(());
    }
    if known.is_empty() {
        return err(analysis, param, format!("the dataset has no {what}s"));
    }
    let lower = name.to_lowercase();
    let near = known
        .iter()
        .find(|k| k.to_lowercase() == lower)
        .or_else(|| {
            known
                .iter()
                .find(|k| k.to_lowercase().contains(&lower) || lower.contains(&k.to_lowercase()))
        });
    let mut list: Vec<&str> = known.iter().take(12).map(String::as_str).collect();
    if known.len() > list.len() {
        list.push("…");
    }
    let list = list.join(", ");
    match near {
        Some(k) => err(
            analysis,
            param,
            format!("unknown {what} '{name}'; did you mean '{k}'? ({what}s here: {list})"),
        ),
        None => err(
            analysis,
            param,
            format!("unknown {what} '{name}' ({what}s here: {list})"),
        ),
    }
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
    // The pool the call asks for ('peak' is that pool's).
    let pool = analysis
        .params
        .iter()
        .position(|p| kind(analysis, &p.name) == Some(Kind::Pool))
        .and_then(|i| match values.get(i) {
            Some(v) => as_text(v).map(str::to_string),
            None => analysis.params[i]
                .default
                .as_deref()
                .and_then(|d| d.strip_prefix('\'')?.strip_suffix('\''))
                .map(str::to_string),
        });
    let mut window = (None, None);
    for (i, p) in analysis.params.iter().enumerate().take(values.len()) {
        let Some(k) = kind(analysis, &p.name) else {
            continue;
        };
        if values[i].is_null() {
            continue;
        }
        match k {
            // 'peak' as the moment of a breakdown is each series' own peak (the analysis joins
            // `peaks`), passed on as the one value no moment has.
            Kind::Moment
                if as_text(&values[i]).is_some_and(|t| t.trim().eq_ignore_ascii_case("peak")) =>
            {
                values[i] = ScalarValue::Int64(Some(PEAK_OF_EACH_SERIES));
            }
            Kind::Moment | Kind::WindowStart | Kind::WindowEnd => {
                let ns = match as_text(&values[i]) {
                    Some(text) => {
                        moment(ctx, &facts, analysis, &p.name, text, pool.as_deref()).await?
                    }
                    None => match values[i].cast_to(&DataType::Int64)? {
                        ScalarValue::Int64(Some(v)) => v,
                        _ => continue,
                    },
                };
                values[i] = ScalarValue::Int64(Some(ns));
                match k {
                    Kind::Moment => {
                        let Some(range) = facts.events_range(ctx).await else {
                            return err(analysis, &p.name, "the dataset has no msMemScope events");
                        };
                        if !(range.0..=range.1).contains(&ns) {
                            return err(analysis, &p.name, outside(ns, range));
                        }
                    }
                    Kind::WindowStart => window.0 = Some((p.name.clone(), ns)),
                    _ => window.1 = Some((p.name.clone(), ns)),
                }
            }
            Kind::Pool => {
                if let Some(name) = as_text(&values[i]) {
                    let pools = facts.names(ctx, POOLS).await;
                    check_name(analysis, &p.name, "pool", name, &pools)?;
                }
            }
            Kind::Snapshot => {
                if let Some(name) = as_text(&values[i]).map(str::to_string) {
                    let names = facts.names(ctx, SNAPSHOTS).await;
                    match unique_part(&name, &names) {
                        // A part of one snapshot's name alone names it (`'forward'` for
                        // `cuda_transformer_forward.pickle`).
                        Some(full) => values[i] = ScalarValue::Utf8(Some(full.clone())),
                        None => check_name(analysis, &p.name, "snapshot", &name, &names)?,
                    }
                }
            }
            Kind::Capture => {
                if let Some(name) = as_text(&values[i]) {
                    let names = facts.names(ctx, CAPTURES).await;
                    check_name(analysis, &p.name, "capture", name, &names)?;
                }
            }
            Kind::SnapDevice => {
                // The devices of the snapshot asked for, else of any snapshot.
                let snapshot = analysis
                    .params
                    .iter()
                    .position(|p| kind(analysis, &p.name) == Some(Kind::Snapshot))
                    .and_then(|k| values.get(k))
                    .and_then(as_text)
                    .map(str::to_string);
                let rows = facts.rows(ctx, SNAP_DEVICES).await.unwrap_or_default();
                let mut devices: Vec<String> = rows
                    .iter()
                    .filter(|r| match (&snapshot, r.get(1).and_then(as_text)) {
                        (Some(want), Some(have)) => want == have,
                        _ => true,
                    })
                    .filter_map(|r| r.first().map(|d| d.to_string()))
                    .collect();
                devices.dedup();
                let given = values[i].to_string();
                if !devices.contains(&given) {
                    let list = if devices.is_empty() {
                        "none".to_string()
                    } else {
                        devices.join(", ")
                    };
                    let of = snapshot.map(|s| format!(" of {s}")).unwrap_or_default();
                    return err(
                        analysis,
                        &p.name,
                        format!("unknown device {given} (devices{of}: {list})"),
                    );
                }
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
        let Some(range) = facts.events_range(ctx).await else {
            return err(analysis, n0, "the dataset has no msMemScope events");
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

/// A call of a table function planned when scanned, after its arguments are resolved and
/// checked ([`resolve`]).
#[derive(Debug)]
pub struct CheckedCall {
    pub analysis: Analysis,
    pub args: Vec<Arg>,
    /// The [`stand_in`] values and the call's plan with them, which gives the call's schema. A
    /// stand-in is the argument itself when that is a plain value (a pool's name, a moment in
    /// ns), so once the checks pass this plan is usually the call's own.
    pub stand_in: Vec<ScalarValue>,
    pub plan: LogicalPlan,
}

impl CheckedCall {
    /// The call's plan: its arguments resolved and checked in `ctx`, the analysis planned with
    /// them (unless they are the stand-in values, whose plan is kept).
    async fn resolved_plan(&self, ctx: &SessionContext) -> DfResult<LogicalPlan> {
        let values = resolve(ctx, &self.analysis, &self.args).await?;
        if values == self.stand_in {
            return Ok(self.plan.clone());
        }
        let bound = library::bind(&self.analysis, &values)?;
        let plan = library::plan(&ctx.state(), &self.analysis, bound).await?;
        if plan.schema().fields().len() != self.plan.schema().fields().len() {
            return Err(DataFusionError::Internal(format!(
                "{}: the call's columns changed with its arguments",
                self.analysis.name
            )));
        }
        Ok(plan)
    }
}

#[async_trait]
impl TableProvider for CheckedCall {
    fn schema(&self) -> SchemaRef {
        self.plan.schema().inner().clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Applied on the view's plan when scanned, as a view does.
        Ok(vec![TableProviderFilterPushDown::Exact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(state) = state.as_any().downcast_ref::<SessionState>() else {
            return plan_err!("{}: no session state", self.analysis.name);
        };
        let ctx = SessionContext::new_with_state(state.clone());
        let plan = self.resolved_plan(&ctx).await?;
        ViewTable::new(plan, None)
            .scan(state, projection, filters, limit)
            .await
    }
}

/// How deep calls of checked table functions may nest in one statement (a call whose plan
/// calls another, ...) before [`inline_checked_calls`] gives up.
const MAX_NESTING: usize = 16;

/// The [`CheckedCall`] a scan reads, if it reads one.
fn checked_call(scan: &TableScan) -> Option<Arc<dyn TableProvider>> {
    let provider = source_as_provider(&scan.source).ok()?;
    provider.is::<CheckedCall>().then_some(provider)
}

/// The scans of checked calls in `plan`, subqueries included.
fn checked_scans(plan: &LogicalPlan) -> DfResult<Vec<TableScan>> {
    let mut scans = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            if checked_call(scan).is_some() {
                scans.push(scan.clone());
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(scans)
}

/// The plan a scan of a checked call stands for: its arguments resolved and checked in `ctx`,
/// the analysis planned with them, under the scan's name, with the scan's filters, projection
/// and fetch applied (as a view's scan is inlined).
async fn inline_scan(ctx: &SessionContext, scan: &TableScan) -> DfResult<LogicalPlan> {
    let provider =
        checked_call(scan).ok_or_else(|| DataFusionError::Internal("not a checked call".into()))?;
    let call = provider
        .downcast_ref::<CheckedCall>()
        .ok_or_else(|| DataFusionError::Internal("not a checked call".into()))?;
    let plan = call.resolved_plan(ctx).await?;
    let mut b = LogicalPlanBuilder::from(plan).alias(scan.table_name.clone())?;
    if let Some(filter) = conjunction(scan.filters.clone()) {
        b = b.filter(filter)?;
    }
    if let Some(projection) = &scan.projection {
        let schema = b.schema().clone();
        let columns: Vec<Expr> = projection
            .iter()
            .map(|&i| Expr::Column(Column::from(schema.qualified_field(i))))
            .collect();
        b = b.project(columns)?;
    }
    if let Some(n) = scan.fetch {
        b = b.limit(0, Some(n))?;
    }
    b.build()
}

/// The engine's query planner: calls of checked table functions are planned into the
/// optimized statement ([`inline_checked_calls`]) before DataFusion's physical planner runs, so
/// that the statement is planned once as a whole. Scanned as views, each call's plan was
/// optimized and physically planned on its own, then again within the statement
/// (`trend(20, 'PTA')` at 1 M events: 0.18–0.21 s, inlined 0.14–0.16 s). A cluster session
/// puts its own planner in this one's place, which inlines the same way.
#[derive(Debug)]
pub struct InliningPlanner;

#[async_trait]
impl QueryPlanner for InliningPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let plan = inline_calls_of(session, logical_plan).await?;
        DefaultPhysicalPlanner::default()
            .create_physical_plan(&plan, session)
            .await
    }
}

/// [`inline_checked_calls`] for a query planner: `plan` as it is when it calls nothing.
pub async fn inline_calls_of(session: &dyn Session, plan: &LogicalPlan) -> DfResult<LogicalPlan> {
    let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
        return plan_err!("memq: no session state");
    };
    if checked_scans(plan)?.is_empty() {
        return Ok(plan.clone());
    }
    let ctx = SessionContext::new_with_state(state.clone());
    inline_checked_calls(&ctx, plan.clone()).await
}

/// `plan` with every scan of a [`CheckedCall`] (subqueries included) replaced by the plan it
/// stands for ([`inline_scan`]): for every session (its query planner, [`InliningPlanner`]),
/// and needed where plans are serialised: a cluster's client sends the plan to the scheduler,
/// and datafusion-proto cannot encode a scan of a provider it does not know. Used on an
/// optimized plan (from a query planner): when anything was inlined the result is optimized
/// again, and calls the inlined plans make are inlined in turn.
pub async fn inline_checked_calls(
    ctx: &SessionContext,
    plan: LogicalPlan,
) -> DfResult<LogicalPlan> {
    let mut plan = plan;
    for _ in 0..MAX_NESTING {
        let scans = checked_scans(&plan)?;
        if scans.is_empty() {
            return Ok(plan);
        }
        let mut inlined: Vec<(TableScan, LogicalPlan)> = Vec::with_capacity(scans.len());
        for scan in scans {
            if inlined
                .iter()
                .any(|(s, _)| s == &scan && Arc::ptr_eq(&s.source, &scan.source))
            {
                continue;
            }
            let p = inline_scan(ctx, &scan).await?;
            inlined.push((scan, p));
        }
        let replaced = plan
            .transform_up_with_subqueries(|node| match node {
                LogicalPlan::TableScan(ref scan) if checked_call(scan).is_some() => {
                    match inlined
                        .iter()
                        .find(|(s, _)| s == scan && Arc::ptr_eq(&s.source, &scan.source))
                    {
                        Some((_, p)) => Ok(Transformed::yes(p.clone())),
                        None => Ok(Transformed::no(node)),
                    }
                }
                other => Ok(Transformed::no(other)),
            })?
            .data;
        plan = ctx.state().optimize(&replaced)?;
    }
    plan_err!("table function calls nest more than {MAX_NESTING} deep")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_names_its_step_when_the_devices_agree() {
        let steps = Steps {
            spans: vec![(10, 20, 1), (12, 25, 1), (30, i64::MAX, 2), (24, 40, 7)],
        };
        assert_eq!(steps.step_at(15), Some(1));
        assert_eq!(steps.step_at(27), Some(7));
        assert_eq!(steps.step_at(35), None, "steps 2 and 7 disagree");
        assert_eq!(steps.step_at(50), Some(2), "an open step");
        assert_eq!(steps.step_at(5), None);
    }

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
