//! The facts of a dataset that argument checks and printers read: each format declares its
//! queries ([`memq_core::format::Fact`]); a session runs each once (the dataset does not change
//! under an open session), and `memq ingest` keeps their rows in the manifest so that an engine
//! opening the dataset starts from them and a checked call runs no query of its own (each is a
//! Parquet read and a plan, ~5 ms of a 20–80 ms process).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::prelude::{SessionConfig, SessionContext};
use memq_core::dataset::FactValue;
use memq_core::format::{Catalog, Fact};
use parking_lot::Mutex;

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

/// The facts of a session's dataset: every format's fact queries and the rows read so far
/// (keyed by query, as the manifest keeps them).
#[derive(Debug, Default)]
pub struct Facts {
    /// Every format's facts, with the format's name, in the catalog's order.
    defs: Vec<(&'static str, Fact)>,
    rows: Mutex<HashMap<&'static str, Arc<Vec<Vec<ScalarValue>>>>>,
}

impl Facts {
    /// The facts of `catalog`'s formats, starting from the rows a manifest keeps
    /// (`Manifest::facts`; none when `stored` is empty).
    pub fn new(catalog: &Catalog, stored: &BTreeMap<String, Vec<Vec<FactValue>>>) -> Facts {
        let scalar = |v: &FactValue| match v {
            FactValue::Int(i) => ScalarValue::Int64(Some(*i)),
            FactValue::Text(s) => ScalarValue::Utf8(Some(s.clone())),
            FactValue::Null => ScalarValue::Null,
        };
        let defs = catalog.facts();
        let rows = defs
            .iter()
            .filter_map(|(_, fact)| {
                let rows = stored.get(fact.sql)?;
                let rows = rows.iter().map(|r| r.iter().map(scalar).collect());
                Some((fact.sql, Arc::new(rows.collect())))
            })
            .collect();
        Facts {
            defs,
            rows: Mutex::new(rows),
        }
    }

    /// Every fact query without parameters answered over `ctx`'s dataset, for its manifest:
    /// those that fail (a table the dataset lacks) or give a value other than an integer or a
    /// text are left out (a query asks again).
    pub async fn compute(&self, ctx: &SessionContext) -> BTreeMap<String, Vec<Vec<FactValue>>> {
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
        let mut out = BTreeMap::new();
        for (_, fact) in self.defs.iter().filter(|(_, f)| !f.sql.contains("$1")) {
            let Some(rows) = self.rows(ctx, fact.sql).await else {
                continue;
            };
            let rows: Option<Vec<Vec<FactValue>>> =
                rows.iter().map(|r| r.iter().map(value).collect()).collect();
            if let Some(rows) = rows {
                out.insert(fact.sql.to_string(), rows);
            }
        }
        out
    }

    /// The session's facts (a config extension; a session without one gets an empty one, which
    /// knows no fact).
    pub fn of(config: &SessionConfig) -> Arc<Facts> {
        config.get_extension::<Facts>().unwrap_or_default()
    }

    /// The fact `name` of `format`.
    pub fn def(&self, format: &str, name: &str) -> Option<&Fact> {
        self.defs
            .iter()
            .find(|(f, fact)| *f == format && fact.name == name)
            .map(|(_, fact)| fact)
    }

    /// The rows of `sql`, read once; `None` when it fails (a table the dataset lacks).
    pub async fn rows(
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

    /// `[first, last]` of the `range` fact of `format`, when it has values.
    pub async fn range(&self, ctx: &SessionContext, format: &str) -> Option<(i64, i64)> {
        let sql = self.def(format, "range")?.sql;
        let rows = self.rows(ctx, sql).await?;
        match rows.first().map(Vec::as_slice) {
            Some([lo, hi]) => match (lo.cast_to(&DataType::Int64), hi.cast_to(&DataType::Int64)) {
                (Ok(ScalarValue::Int64(Some(lo))), Ok(ScalarValue::Int64(Some(hi)))) => {
                    Some((lo, hi))
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// The run's start in ns since the Unix epoch: the first moment of the first format (in
    /// the catalog's order) whose range has values.
    pub async fn run_start(&self, ctx: &SessionContext) -> Option<i64> {
        for (format, fact) in &self.defs {
            if fact.name == "range" {
                if let Some((lo, _)) = self.range(ctx, format).await {
                    return Some(lo);
                }
            }
        }
        None
    }

    /// The steps of the first format that has any.
    async fn steps(&self, ctx: &SessionContext) -> Option<Steps> {
        for (_, fact) in self.defs.iter().filter(|(_, f)| f.name == "steps") {
            let Some(rows) = self.rows(ctx, fact.sql).await else {
                continue;
            };
            let int = |v: &ScalarValue| match v.cast_to(&DataType::Int64) {
                Ok(ScalarValue::Int64(i)) => i,
                _ => None,
            };
            let spans: Vec<(i64, i64, i64)> = rows
                .iter()
                .filter_map(|r| match r.as_slice() {
                    // An open step (no end) lasts to the end of the run.
                    [a, b, s] => Some((int(a)?, int(b).unwrap_or(i64::MAX), int(s)?)),
                    _ => None,
                })
                .collect();
            if !spans.is_empty() {
                return Some(Steps { spans });
            }
        }
        None
    }
}

/// The steps of the dataset `ctx` queries (read once per session); `None` when it has none.
pub async fn steps(ctx: &SessionContext) -> Option<Arc<Steps>> {
    Facts::of(ctx.state().config())
        .steps(ctx)
        .await
        .map(Arc::new)
}

/// The run's start (ns since the Unix epoch) of the dataset `ctx` queries, read once per session.
pub async fn run_start(ctx: &SessionContext) -> Option<i64> {
    Facts::of(ctx.state().config()).run_start(ctx).await
}

/// The rows of `batches` as scalars.
pub fn scalars(batches: &[RecordBatch]) -> DfResult<Vec<Vec<ScalarValue>>> {
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
}
