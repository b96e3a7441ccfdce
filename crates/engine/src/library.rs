//! The SQL library: every `sql/**/*.sql` file is one analysis, compiled into the binary.
//!
//! A file opens with a comment block, then the query:
//!
//! ```sql
//! -- peaks: the peak of each counter, per pool.
//! --
//! -- Any further description lines.
//! --
//! -- @param ts BIGINT              the moment to look at, ns
//! -- @param pool VARCHAR = 'HAL'   pool to decompose
//! -- @column peak_bytes            bytes: the highest value of the counter
//! SELECT ...
//! ```
//!
//! A parameter's description may open with how memq checks its argument, so that a mistyped
//! argument is a clear error rather than 0 rows ([`Check`], the checks in `crate::checks`):
//! `[moment]`, `[window start]`, `[window end]` (a readable moment of the format's run),
//! `[one of pools]` (one of the names of the format's fact `pools`), `[one of snapshots or a
//! part]` (a part of one name names it), and `per PARAM` at the end to narrow by another
//! argument (`[one of devices per snapshot]`, `[window start per pool]` for `'peak'`).
//!
//! A file without `@param` lines becomes a view named after the file; one with parameters
//! becomes a table function whose arguments are bound, in order, to the `$name` placeholders of
//! the query as typed literal values (a value can never change the statement's structure).
//! `-- @private` marks a helper the other analyses build on; `-- @stored` a view computed once
//! when the dataset is built and read from there ([`crate::stored`]).
//!
//! A view that every format answers in its own way is declared once, format-blind, in the
//! engine's own `sql/` with `-- @union` and no query: its query is the `UNION ALL` of every view
//! marked `-- @part NAME` (each format's private part, with the same `@column` lines), so a new
//! format joins it by adding a file, and the engine never names a format.

use std::collections::HashMap;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::metadata::FieldMetadata;
use datafusion::common::Column;
use datafusion::common::{plan_err, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::ast::visit_relations;
use std::ops::ControlFlow;

use memq_core::catalog::Unit;
use memq_core::format::SqlFile;

#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub data_type: DataType,
    pub sql_type: String,
    pub default: Option<String>,
    pub doc: String,
    /// How its argument is checked, when it is.
    pub check: Option<Check>,
}

/// What a checked parameter stands for: `[KIND]` or `[KIND per PARAM]` at the start of its
/// description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub kind: CheckKind,
    /// `per PARAM`: the argument of PARAM narrows the check (the names listed with that key;
    /// the peak of that pool).
    pub per: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckKind {
    /// `moment`: a moment of the format's run (its fact `range`), ns, or written readably.
    Moment,
    /// `window start`: the start of a window of the run, as a moment.
    WindowStart,
    /// `window end`: the end of a window of the run, as a moment.
    WindowEnd,
    /// `one of FACT`: one of the names of the format's fact FACT; `or a part` lets a part of
    /// exactly one name stand for it.
    OneOf { fact: String, by_part: bool },
}

impl Check {
    /// `moment`, `one of pools`, `one of devices per snapshot`.
    fn parse(text: &str) -> Result<Check, String> {
        let (kind, per) = match text.rsplit_once(" per ") {
            Some((k, p)) => (k.trim(), Some(p.trim().to_string())),
            None => (text.trim(), None),
        };
        let kind = match kind {
            "moment" => CheckKind::Moment,
            "window start" => CheckKind::WindowStart,
            "window end" => CheckKind::WindowEnd,
            other => match other.strip_prefix("one of ") {
                Some(rest) => {
                    let (fact, by_part) = match rest.strip_suffix(" or a part") {
                        Some(f) => (f, true),
                        None => (rest, false),
                    };
                    CheckKind::OneOf {
                        fact: fact.trim().to_string(),
                        by_part,
                    }
                }
                None => return Err(format!("unknown check [{text}]: [moment], [window start], [window end], [one of FACT] or [one of FACT or a part], each with an optional `per PARAM`")),
            },
        };
        Ok(Check { kind, per })
    }
}

#[derive(Debug, Clone)]
pub struct Analysis {
    pub name: String,
    /// Path below `sql/`, e.g. `memscope/peaks.sql`.
    pub path: String,
    /// The one-line summary.
    pub summary: String,
    /// The whole description (summary included).
    pub doc: String,
    pub params: Vec<Param>,
    /// Every output column, in order.
    pub columns: Vec<ColumnDoc>,
    /// `@private`: a helper other analyses build on, not an answer of its own (not listed by
    /// `memq views` or `\dv`, not exported by default; still queryable).
    pub private: bool,
    /// `@stored`: a view computed once when the dataset is built and stored beside its tables
    /// (`crate::stored`); a query reads the stored rows instead of planning the view. Only a
    /// view (no `@param`) can be stored.
    pub stored: bool,
    /// `@part NAME`: one format's rows of the `@union` view NAME.
    pub part_of: Option<String>,
    /// `@union`: the view is the union of its parts (its query is composed by [`analyses`]).
    pub union: bool,
    pub body: String,
}

/// One `@column NAME TYPE [UNIT:] description` line.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDoc {
    pub name: String,
    /// The SQL type as declared (`BIGINT`, `VARCHAR`, `DOUBLE`, `BOOLEAN`, `VARCHAR[]`, ...);
    /// checked against the planned result by [`check`].
    pub sql_type: String,
    pub unit: Unit,
    pub doc: String,
}

impl Analysis {
    /// The format whose library holds it (its folder): `memscope`.
    pub fn format(&self) -> &str {
        self.path.split('/').next().unwrap_or_default()
    }

    pub fn is_table_function(&self) -> bool {
        !self.params.is_empty()
    }

    /// How to call it: `peaks` or `breakdown_at(ts [, pool])`.
    pub fn call_form(&self) -> String {
        if !self.is_table_function() {
            return self.name.clone();
        }
        let mut s = format!("{}(", self.name);
        let mut optional = 0;
        for (i, p) in self.params.iter().enumerate() {
            if p.default.is_some() {
                s.push_str(if i == 0 { "[" } else { " [, " });
                optional += 1;
            } else if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&p.name);
        }
        s.push_str(&"]".repeat(optional));
        s.push(')');
        s
    }
}

fn sql_type(name: &str) -> Option<DataType> {
    Some(match name.to_ascii_uppercase().as_str() {
        "BIGINT" | "INT" | "INTEGER" => DataType::Int64,
        "DOUBLE" | "FLOAT" => DataType::Float64,
        "VARCHAR" | "TEXT" | "STRING" => DataType::Utf8,
        "BOOLEAN" => DataType::Boolean,
        _ => return None,
    })
}

/// Parses one library file. Errors name the file and the bad line.
pub fn parse(path: &str, text: &str) -> Result<Analysis, String> {
    let name = path
        .rsplit('/')
        .next()
        .and_then(|f| f.strip_suffix(".sql"))
        .ok_or_else(|| format!("sql/{path}: not a .sql file"))?
        .to_string();
    let mut doc_lines = Vec::new();
    let mut params = Vec::new();
    let mut columns = Vec::new();
    let mut private = false;
    let mut stored = false;
    let mut part_of = None;
    let mut union = false;
    let mut body_start = text.len();
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim();
        let Some(comment) = t.strip_prefix("--") else {
            if !t.is_empty() {
                body_start = offset;
                break;
            }
            offset += line.len();
            continue;
        };
        offset += line.len();
        let comment = comment.strip_prefix(' ').unwrap_or(comment).trim_end();
        if let Some(p) = comment.strip_prefix("@param ") {
            let mut words = p.split_whitespace();
            let (Some(pname), Some(ptype)) = (words.next(), words.next()) else {
                return Err(format!(
                    "sql/{path}:{}: `@param NAME TYPE [= DEFAULT] description`",
                    n + 1
                ));
            };
            let data_type = sql_type(ptype)
                .ok_or_else(|| format!("sql/{path}:{}: unknown type {ptype}", n + 1))?;
            let rest: String = words.collect::<Vec<_>>().join(" ");
            let (default, doc) = match rest.strip_prefix("= ") {
                Some(r) => {
                    let (d, doc) = r.split_once(' ').unwrap_or((r, ""));
                    (Some(d.to_string()), doc.trim().to_string())
                }
                None => (None, rest),
            };
            let (check, doc) = match doc.strip_prefix('[').and_then(|d| d.split_once(']')) {
                Some((check, doc)) => (
                    Some(Check::parse(check).map_err(|e| format!("sql/{path}:{}: {e}", n + 1))?),
                    doc.trim().to_string(),
                ),
                None => (None, doc),
            };
            params.push(Param {
                name: pname.to_string(),
                data_type,
                sql_type: ptype.to_uppercase(),
                default,
                doc,
                check,
            });
        } else if let Some(c) = comment.strip_prefix("@column ") {
            columns.push(parse_column(c).map_err(|e| format!("sql/{path}:{}: {e}", n + 1))?);
        } else if comment.starts_with("@private") {
            private = true;
        } else if comment.starts_with("@stored") {
            stored = true;
        } else if let Some(whole) = comment.strip_prefix("@part ") {
            part_of = Some(whole.trim().to_string());
        } else if comment.starts_with("@union") {
            union = true;
        } else {
            doc_lines.push(comment.to_string());
        }
    }
    let body = text[body_start..]
        .trim()
        .trim_end_matches(';')
        .trim()
        .to_string();
    if body.is_empty() && !union {
        return Err(format!("sql/{path}: no query after the comment block"));
    }
    if union && (!body.is_empty() || !params.is_empty()) {
        return Err(format!(
            "sql/{path}: a `@union` view has no query and no `@param`: its parts (`@part {name}`) are its rows"
        ));
    }
    while doc_lines.last().is_some_and(|l| l.is_empty()) {
        doc_lines.pop();
    }
    let first = doc_lines.first().cloned().unwrap_or_default();
    let summary = first
        .strip_prefix(&format!("{name}:"))
        .map(str::trim)
        .unwrap_or(&first)
        .to_string();
    if summary.is_empty() {
        return Err(format!(
            "sql/{path}: the comment block must open with `-- {name}: what it answers`"
        ));
    }
    for p in &params {
        if let Some(per) = p.check.as_ref().and_then(|c| c.per.as_deref()) {
            if !params.iter().any(|q| q.name == per) {
                return Err(format!(
                    "sql/{path}: @param {}: `per {per}` names no parameter",
                    p.name
                ));
            }
        }
    }
    if stored && !params.is_empty() {
        return Err(format!(
            "sql/{path}: `@stored` is for views; a table function (`@param`) is computed per call"
        ));
    }
    Ok(Analysis {
        name,
        path: path.to_string(),
        summary,
        doc: doc_lines.join("\n"),
        params,
        columns,
        private,
        stored,
        part_of,
        union,
        body,
    })
}

/// `NAME TYPE [UNIT:] description`.
fn parse_column(text: &str) -> Result<ColumnDoc, String> {
    let usage = "`@column NAME TYPE [UNIT:] description`";
    let text = text.trim();
    let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let rest = rest.trim_start();
    let (sql_type, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if name.is_empty() || !is_sql_type(sql_type) {
        return Err(format!(
            "{usage}: `{sql_type}` is not a type (BIGINT, INT, UBIGINT, DOUBLE, VARCHAR, BOOLEAN, BLOB, STRUCT, or T[])"
        ));
    }
    let rest = rest.trim();
    let (unit, doc) = match rest.split_once(':') {
        Some((u, doc)) if Unit::parse(u).is_some() => {
            (Unit::parse(u).unwrap_or(Unit::None), doc.trim())
        }
        _ => (Unit::None, rest),
    };
    if doc.is_empty() {
        return Err(format!("column {name} has no description"));
    }
    Ok(ColumnDoc {
        name: name.to_string(),
        sql_type: sql_type.to_string(),
        unit,
        doc: doc.to_string(),
    })
}

impl ColumnDoc {
    /// The description with its unit, as the file writes it: `bytes: highest live bytes`.
    pub fn described(&self) -> String {
        match self.unit {
            Unit::None => self.doc.clone(),
            u => format!("{}: {}", u.name(), self.doc),
        }
    }
}

fn is_sql_type(t: &str) -> bool {
    let base = t.strip_suffix("[]").unwrap_or(t);
    matches!(
        base,
        "BIGINT" | "INT" | "UBIGINT" | "DOUBLE" | "VARCHAR" | "BOOLEAN" | "BLOB" | "STRUCT"
    )
}

/// The SQL type name memq's docs use for an Arrow type.
pub fn sql_type_name(t: &DataType) -> String {
    match t {
        DataType::Int64 => "BIGINT".into(),
        DataType::Int32 | DataType::Int16 | DataType::Int8 => "INT".into(),
        DataType::UInt64 | DataType::UInt32 | DataType::UInt16 | DataType::UInt8 => {
            "UBIGINT".into()
        }
        DataType::Float64 | DataType::Float32 => "DOUBLE".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BLOB".into(),
        DataType::List(f) | DataType::LargeList(f) => format!("{}[]", sql_type_name(f.data_type())),
        DataType::Struct(_) => "STRUCT".into(),
        DataType::Null => "NULL".into(),
        other => other.to_string(),
    }
}

/// The engine's own, format-blind library: the `@union` views the formats add parts to.
pub const COMMON_SQL: &[SqlFile] = memq_core::sql_files!(
    "common",
    "findings",
    "input_findings",
    "source_capabilities"
);

/// Every analysis of `files` (the formats' libraries, compiled into the binary) and of the
/// engine's own library, each `@union` view's query composed from its parts.
pub fn analyses(files: &[SqlFile]) -> Vec<Analysis> {
    compose(
        COMMON_SQL
            .iter()
            .chain(files)
            .map(|f| {
                parse(f.path, f.text)
                    .unwrap_or_else(|e| panic!("bad library file (a build-time bug): {e}"))
            })
            .collect(),
    )
}

/// Gives each `@union` view the query that reads its parts.
fn compose(mut all: Vec<Analysis>) -> Vec<Analysis> {
    let parts: Vec<(String, String)> = all
        .iter()
        .filter_map(|a| Some((a.part_of.clone()?, a.name.clone())))
        .collect();
    for u in all.iter_mut().filter(|a| a.union) {
        let mine: Vec<&str> = parts
            .iter()
            .filter(|(of, _)| *of == u.name)
            .map(|(_, part)| part.as_str())
            .collect();
        u.body = union_body(&u.columns, &mine);
    }
    all
}

/// `SELECT * FROM a UNION ALL SELECT * FROM b …`; with no part, no row of the declared columns.
fn union_body(columns: &[ColumnDoc], parts: &[&str]) -> String {
    if parts.is_empty() {
        let nulls: Vec<String> = columns
            .iter()
            .map(|c| format!("CAST(NULL AS {}) AS {}", c.sql_type, c.name))
            .collect();
        return format!("SELECT {} WHERE false", nulls.join(", "));
    }
    parts
        .iter()
        .map(|p| format!("SELECT * FROM {p}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// Binds arguments (and defaults) to the analysis's parameters as typed values.
pub fn bind(analysis: &Analysis, args: &[ScalarValue]) -> DfResult<HashMap<String, ScalarValue>> {
    if args.len() > analysis.params.len() {
        return plan_err!(
            "{} takes at most {} argument(s): {}",
            analysis.name,
            analysis.params.len(),
            analysis.call_form()
        );
    }
    let mut values = HashMap::new();
    for (i, p) in analysis.params.iter().enumerate() {
        let value = match args.get(i) {
            Some(v) => v.clone(),
            None => match &p.default {
                Some(d) => default_value(d, &p.data_type)?,
                None => {
                    return plan_err!(
                        "{} needs argument `{}`: {}",
                        analysis.name,
                        p.name,
                        analysis.call_form()
                    )
                }
            },
        };
        let value = if value.is_null() {
            ScalarValue::try_from(&p.data_type)?
        } else {
            value.cast_to(&p.data_type).map_err(|_| {
                DataFusionError::Plan(format!(
                    "{}: argument `{}` must be {}, got {value}",
                    analysis.name, p.name, p.sql_type
                ))
            })?
        };
        values.insert(p.name.clone(), value);
    }
    Ok(values)
}

/// A parameter's declared default (`NULL`, `'HAL'`, `20`) as a value of its type.
pub fn default_value(text: &str, data_type: &DataType) -> DfResult<ScalarValue> {
    if text.eq_ignore_ascii_case("NULL") {
        return ScalarValue::try_from(data_type);
    }
    let unquoted = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\''));
    match unquoted {
        Some(s) => Ok(ScalarValue::Utf8(Some(s.to_string()))),
        None => ScalarValue::try_from_string(text.to_string(), data_type),
    }
}

/// Plans an analysis with bound parameter values.
pub async fn plan(
    state: &SessionState,
    analysis: &Analysis,
    values: HashMap<String, ScalarValue>,
) -> DfResult<LogicalPlan> {
    let plan = state
        .create_logical_plan(&analysis.body)
        .await?
        .with_param_values(values)?;
    check(analysis, plan.schema())?;
    annotate(plan, &analysis.columns)
}

/// Checks a planned analysis against its `@column` lines: the same columns, in order, of the
/// declared types. The error names the file and the first difference.
pub fn check(analysis: &Analysis, schema: &datafusion::common::DFSchema) -> DfResult<()> {
    let planned: Vec<(String, String)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), sql_type_name(f.data_type())))
        .collect();
    let declared: Vec<(String, String)> = analysis
        .columns
        .iter()
        .map(|c| (c.name.clone(), c.sql_type.clone()))
        .collect();
    // A column that only echoes a parameter is typed NULL until the value is bound.
    let matches = planned.len() == declared.len()
        && planned
            .iter()
            .zip(&declared)
            .all(|(p, d)| p.0 == d.0 && (p.1 == d.1 || p.1 == "NULL"));
    if matches {
        return Ok(());
    }
    let first = planned
        .iter()
        .zip(&declared)
        .find(|(p, d)| p != d)
        .map(|(p, d)| {
            format!(
                "the query gives {} {}, the docs declare {} {}",
                p.0, p.1, d.0, d.1
            )
        })
        .unwrap_or_else(|| {
            format!(
                "the query gives {} columns, the docs declare {}",
                planned.len(),
                declared.len()
            )
        });
    plan_err!("@column lines do not match the query: {first}")
}

/// Adds a final projection that gives each output column the unit its `@column` line declares,
/// as Arrow field metadata, so printers and writers downstream know bytes and times.
pub fn annotate(plan: LogicalPlan, columns: &[ColumnDoc]) -> DfResult<LogicalPlan> {
    if columns.iter().all(|c| c.unit == Unit::None) {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = plan
        .schema()
        .iter()
        .map(|(qualifier, field)| {
            let column = Expr::Column(Column::from((qualifier, field)));
            match columns.iter().find(|c| &c.name == field.name()) {
                Some(c) if c.unit != Unit::None => column.alias_with_metadata(
                    field.name(),
                    Some(FieldMetadata::from(c.unit.metadata())),
                ),
                _ => column,
            }
        })
        .collect();
    LogicalPlanBuilder::from(plan).project(exprs)?.build()
}

/// The other analyses an analysis's query reads (by name, from its parsed SQL).
pub fn dependencies(analysis: &Analysis, names: &[&str]) -> DfResult<Vec<String>> {
    let statements = DFParser::parse_sql(&analysis.body)?;
    let mut deps = Vec::new();
    for s in &statements {
        if let datafusion::sql::parser::Statement::Statement(s) = s {
            let _ = visit_relations(s.as_ref(), |relation| {
                if let Some(last) = relation.0.last().and_then(|p| p.as_ident()) {
                    let n = last.value.as_str();
                    if n != analysis.name && names.contains(&n) && !deps.iter().any(|d| d == n) {
                        deps.push(n.to_string());
                    }
                }
                ControlFlow::<()>::Continue(())
            });
        }
    }
    Ok(deps)
}

/// The analyses in an order where each comes after those it reads; a cycle is an error naming
/// its files.
pub fn topological(analyses: &[Analysis]) -> Result<Vec<&Analysis>, String> {
    let names: Vec<&str> = analyses.iter().map(|a| a.name.as_str()).collect();
    let mut deps = HashMap::new();
    for a in analyses {
        let d = dependencies(a, &names).map_err(|e| format!("sql/{}: {e}", a.path))?;
        deps.insert(a.name.as_str(), d);
    }
    let mut order: Vec<&Analysis> = Vec::new();
    let mut state: HashMap<&str, u8> = HashMap::new(); // 1 = visiting, 2 = done
    fn visit<'a>(
        a: &'a Analysis,
        all: &'a [Analysis],
        deps: &HashMap<&str, Vec<String>>,
        state: &mut HashMap<&'a str, u8>,
        order: &mut Vec<&'a Analysis>,
        path: &mut Vec<&'a str>,
    ) -> Result<(), String> {
        match state.get(a.name.as_str()) {
            Some(2) => return Ok(()),
            Some(_) => {
                path.push(&a.name);
                return Err(format!(
                    "the SQL library has a cycle: {}",
                    path.join(" -> ")
                ));
            }
            None => {}
        }
        state.insert(&a.name, 1);
        path.push(&a.name);
        for d in &deps[a.name.as_str()] {
            if let Some(dep) = all.iter().find(|x| &x.name == d) {
                visit(dep, all, deps, state, order, path)?;
            }
        }
        path.pop();
        state.insert(&a.name, 2);
        order.push(a);
        Ok(())
    }
    for a in analyses {
        visit(a, analyses, &deps, &mut state, &mut order, &mut Vec::new())?;
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_block_is_parsed() {
        let text = "-- breakdown_at: what was live at ts.\n--\n-- More text.\n--\n-- @param ts BIGINT the moment, ns\n-- @param pool VARCHAR = 'HAL' pool\n-- @column bytes BIGINT bytes: live bytes\n-- @private\nSELECT $ts AS t, $pool AS p;\n";
        let a = parse("memscope/breakdown_at.sql", text).unwrap();
        assert_eq!(a.name, "breakdown_at");
        assert_eq!(a.summary, "what was live at ts.");
        assert_eq!(a.params.len(), 2);
        assert_eq!(a.params[1].default.as_deref(), Some("'HAL'"));
        assert_eq!(
            a.columns,
            vec![ColumnDoc {
                name: "bytes".into(),
                sql_type: "BIGINT".into(),
                unit: Unit::Bytes,
                doc: "live bytes".into(),
            }]
        );
        assert!(a.private);
        assert!(!a.stored);
        assert!(parse("x/y.sql", "-- y: z\n-- @column c\nSELECT 1").is_err());
        // Only a view is stored with the dataset; a table function is computed per call.
        let stored = parse("x/v.sql", "-- v: z\n-- @stored\nSELECT 1 AS n").unwrap();
        assert!(stored.stored && !stored.is_table_function());
        let err = parse(
            "x/f.sql",
            "-- f: z\n-- @param n BIGINT n\n-- @stored\nSELECT $n",
        )
        .unwrap_err();
        assert!(err.contains("sql/x/f.sql: `@stored` is for views"), "{err}");
        assert_eq!(a.params[0].check, None);
        // How an argument is checked opens its description.
        let f = parse(
            "x/f.sql",
            "-- f: z\n-- @param s VARCHAR = NULL [one of snapshots or a part] a snapshot\n-- @param d BIGINT = NULL [one of devices per s] a device\nSELECT $s, $d",
        )
        .unwrap();
        let one_of = |fact: &str, by_part| CheckKind::OneOf {
            fact: fact.into(),
            by_part,
        };
        assert_eq!(f.params[0].doc, "a snapshot");
        assert_eq!(
            f.params[0].check,
            Some(Check {
                kind: one_of("snapshots", true),
                per: None
            })
        );
        assert_eq!(
            f.params[1].check,
            Some(Check {
                kind: one_of("devices", false),
                per: Some("s".into())
            })
        );
        let err = parse(
            "x/f.sql",
            "-- f: z\n-- @param d BIGINT [moment per q] d\nSELECT $d",
        )
        .unwrap_err();
        assert!(err.contains("`per q` names no parameter"), "{err}");
        let err = parse("x/f.sql", "-- f: z\n-- @param d BIGINT [when] d\nSELECT $d").unwrap_err();
        assert!(err.contains("sql/x/f.sql:2: unknown check [when]"), "{err}");
        assert_eq!(a.body, "SELECT $ts AS t, $pool AS p");
        assert_eq!(a.call_form(), "breakdown_at(ts [, pool])");
        let bound = bind(&a, &[ScalarValue::Int64(Some(5))]).unwrap();
        assert_eq!(bound["pool"], ScalarValue::Utf8(Some("HAL".into())));
        assert!(bind(&a, &[]).is_err());
    }

    fn analysis(path: &str, text: &str) -> Analysis {
        parse(path, text).unwrap()
    }

    #[test]
    fn common_sql_lists_every_file() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        memq_core::format::check_sql_dir(&dir, COMMON_SQL).unwrap();
    }

    #[test]
    fn a_union_view_is_the_union_of_its_parts() {
        let common = "-- u: every format's rows\n-- @union\n-- @column n BIGINT count: x\n";
        assert!(parse("common/u.sql", &format!("{common}SELECT 1 AS n")).is_err());
        assert!(parse("x/v.sql", "-- v: z\n-- @column n BIGINT x\n").is_err());
        let u = analysis("common/u.sql", common);
        assert!(u.union && u.body.is_empty());
        let part = |name: &str| {
            let path = format!("{name}/{name}_u.sql");
            let text = format!(
                "-- {name}_u: z\n-- @private\n-- @part u\n-- @column n BIGINT x\nSELECT 2 AS n"
            );
            (path, text)
        };
        let (pa, ta) = part("a");
        let (pb, tb) = part("b");
        let composed = compose(vec![
            analysis("common/u.sql", common),
            analysis(&pa, &ta),
            analysis(&pb, &tb),
        ]);
        let u = composed.iter().find(|a| a.name == "u").unwrap();
        assert_eq!(u.body, "SELECT * FROM a_u UNION ALL SELECT * FROM b_u");
        assert_eq!(composed[1].part_of.as_deref(), Some("u"));
        // With no part the view still has its columns, and no row.
        let alone = compose(vec![analysis("common/u.sql", common)]);
        assert_eq!(
            alone[0].body,
            "SELECT CAST(NULL AS BIGINT) AS n WHERE false"
        );
    }

    #[tokio::test]
    async fn declared_types_are_checked_against_the_plan() {
        let ctx = datafusion::prelude::SessionContext::new();
        let good = analysis(
            "x/a.sql",
            "-- a: one\n-- @column n BIGINT count: one\nSELECT 1 AS n",
        );
        let planned = plan(&ctx.state(), &good, HashMap::new()).await.unwrap();
        assert_eq!(
            Unit::of(planned.schema().field(0)),
            Unit::Count,
            "the unit travels in the field metadata"
        );
        let bad = analysis(
            "x/b.sql",
            "-- b: one\n-- @column n VARCHAR one\nSELECT 1 AS n",
        );
        let err = plan(&ctx.state(), &bad, HashMap::new())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the query gives n BIGINT, the docs declare n VARCHAR"),
            "{err}"
        );
    }

    #[test]
    fn dependencies_come_from_the_sql_and_cycles_are_named() {
        let a = analysis(
            "x/a.sql",
            "-- a: x\n-- @column n BIGINT x\nSELECT n FROM b JOIN events USING (n)",
        );
        let b = analysis("x/b.sql", "-- b: x\n-- @column n BIGINT x\nSELECT 1 AS n");
        let all = vec![a.clone(), b.clone()];
        let order: Vec<&str> = topological(&all)
            .unwrap()
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(order, ["b", "a"]);
        let c = analysis(
            "x/b.sql",
            "-- b: x\n-- @column n BIGINT x\nWITH t AS (SELECT n FROM a) SELECT n FROM t",
        );
        let err = topological(&[a, c]).unwrap_err();
        assert!(err.contains("cycle: a -> b -> a"), "{err}");
    }
}
