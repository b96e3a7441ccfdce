//! Calls of the table functions (the parameterised analyses). A call whose arguments are plain
//! values nobody checks is a view of the analysis planned with them; one whose arguments must
//! be checked or computed first ([`checks`]: a moment written as text, a pool's name, a scalar
//! subquery) is planned when it is scanned, asynchronously, where the checks' queries can run
//! ([`CheckedCall`]). The engine's query planner inlines those calls into the statement's plan
//! ([`InliningPlanner`]), so a statement is planned once as a whole.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::view::ViewTable;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::common::{plan_err, Column, DataFusionError, Result as DfResult, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    Expr, LogicalPlan, LogicalPlanBuilder, TableProviderFilterPushDown, TableScan, TableType,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_planner::{DefaultPhysicalPlanner, PhysicalPlanner};
use datafusion::prelude::SessionContext;

use crate::checks::{self, Arg};
use crate::library::{self, Analysis};

/// A parameterised analysis as a DataFusion table function.
#[derive(Debug)]
pub struct SqlTableFunction {
    pub analysis: Analysis,
}

fn literal(e: &Expr) -> Option<ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v.clone()),
        Expr::Negative(inner) => match literal(inner)? {
            ScalarValue::Int64(Some(v)) => Some(ScalarValue::Int64(Some(-v))),
            ScalarValue::Float64(Some(v)) => Some(ScalarValue::Float64(Some(-v))),
            _ => None,
        },
        Expr::Cast(c) => literal(&c.expr)?.cast_to(c.field.data_type()).ok(),
        _ => None,
    }
}

impl TableFunctionImpl for SqlTableFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let mut given = Vec::new();
        for (i, e) in args.exprs().iter().enumerate() {
            given.push(match (literal(e), e) {
                (Some(v), _) => Arg::Value(v),
                (None, Expr::ScalarSubquery(s)) => Arg::Subquery(s.clone()),
                (None, _) => {
                    return plan_err!(
                        "{}: argument {} must be a constant or a scalar subquery `(SELECT ...)` (got {e})",
                        self.analysis.name,
                        i + 1
                    )
                }
            });
        }
        let Some(state) = args.session().as_any().downcast_ref::<SessionState>() else {
            return plan_err!("{}: no session state", self.analysis.name);
        };
        // Planning only resolves tables registered in memory, so it completes without I/O.
        let plan_with = |values: &[ScalarValue]| -> DfResult<LogicalPlan> {
            let bound = library::bind(&self.analysis, values)?;
            futures::executor::block_on(library::plan(state, &self.analysis, bound))
        };
        if given.len() > self.analysis.params.len() || !checks::needs_checks(&self.analysis, &given)
        {
            let values: Vec<ScalarValue> = given
                .into_iter()
                .map(|a| match a {
                    Arg::Value(v) => v,
                    Arg::Subquery(_) => ScalarValue::Null,
                })
                .collect();
            return Ok(Arc::new(ViewTable::new(plan_with(&values)?, None)));
        }
        // Checked, and planned with the real values, when scanned.
        let stand_in = checks::stand_in(&self.analysis, &given);
        let plan = plan_with(&stand_in)?;
        Ok(Arc::new(CheckedCall {
            analysis: self.analysis.clone(),
            args: given,
            stand_in,
            plan,
        }))
    }
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
        let values = checks::resolve(ctx, &self.analysis, &self.args).await?;
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
