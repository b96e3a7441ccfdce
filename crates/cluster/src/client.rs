//! The client side: the engine's session, upgraded for Ballista, whose statements run on the
//! cluster. Everything else (parsing, `$params`, views, printing) stays as it is locally.

use std::sync::Arc;

use async_trait::async_trait;
use ballista_core::extension::SessionStateExt;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{plan_err, DataFusionError, Result as DfResult};
use datafusion::datasource::listing::ListingTable;
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::{col, Expr, LogicalPlan, LogicalPlanBuilder, TableScan, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use memq_core::error::{MemqError, Result};

use crate::{check_scheduler, SchedulerUrl};

/// The most bytes of an in-memory result (`summarize(...)`) sent to the scheduler as values
/// inside the plan.
const MAX_VALUES_BYTES: usize = 4 << 20;

/// A session whose statements run on the cluster at `url` (`df://HOST:PORT`), from the engine's
/// session `state`: its tables, views, table functions and settings, with every memq function
/// (Ballista resets the functions to DataFusion's; memq's are registered again). Fails with an
/// error naming the URL when the scheduler does not answer within
/// [`crate::CONNECT_TIMEOUT`].
pub async fn connect(url: &str, state: SessionState) -> Result<SessionContext> {
    let url = SchedulerUrl::parse(url)?;
    check_scheduler(&url).await?;
    let functions: Vec<_> = state.scalar_functions().values().cloned().collect();
    let upgraded = state
        .upgrade_for_ballista(url.http())
        .map_err(|e| MemqError::Query(format!("{url}: {e}")))?;
    let planner = Arc::new(ClusterPlanner {
        inner: upgraded.query_planner().clone(),
    });
    let mut state = SessionStateBuilder::new_from_existing(upgraded)
        .with_query_planner(planner)
        .build();
    // Ballista's static planner: its adaptive planner (the default) gives some analyses'
    // windows input partitioned on other keys than theirs (docs/scale-out.md, "How memq makes
    // Ballista 55 give the local answers"). A session may still
    // `SET ballista.planner.adaptive.enabled = true`.
    state
        .config_mut()
        .options_mut()
        .set("ballista.planner.adaptive.enabled", "false")?;
    for f in functions {
        state.register_udf(f)?;
    }
    Ok(SessionContext::new_with_state(state))
}

/// Ballista's query planner, after the plan is made serialisable: checked table function
/// calls inlined, small in-memory scans (summarize) turned into values.
#[derive(Debug)]
struct ClusterPlanner {
    inner: Arc<dyn QueryPlanner + Send + Sync>,
}

#[async_trait]
impl QueryPlanner for ClusterPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
            return plan_err!("memq cluster: no session state");
        };
        let plan = memq_engine::calls::inline_calls_of(session, logical_plan).await?;
        let plan = values_for_memory_scans(state, plan).await?;
        self.inner.create_physical_plan(&plan, session).await
    }
}

/// Whether a scan reads something the cluster can read itself: a Parquet listing table (by
/// path), or `information_schema` (which Ballista answers where it was planned).
fn serialisable(scan: &TableScan) -> bool {
    if scan.table_name.schema() == Some("information_schema") {
        return true;
    }
    source_as_provider(&scan.source).is_ok_and(|p| p.is::<ListingTable>())
}

/// `plan` with each scan of an in-memory result the scheduler could not decode (`summarize`'s
/// summary) replaced by its rows as values, computed here (its own queries run on the
/// cluster). A scan of anything else the cluster cannot read is an error naming it.
async fn values_for_memory_scans(state: &SessionState, plan: LogicalPlan) -> DfResult<LogicalPlan> {
    let mut scans: Vec<TableScan> = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            if !serialisable(scan) && !scans.iter().any(|s| s == scan) {
                scans.push(scan.clone());
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    if scans.is_empty() {
        return Ok(plan);
    }
    let mut replaced = Vec::with_capacity(scans.len());
    for scan in scans {
        let values = values_of(state, &scan).await?;
        replaced.push((scan, values));
    }
    let plan = plan
        .transform_up_with_subqueries(|node| match node {
            LogicalPlan::TableScan(ref scan) => match replaced.iter().find(|(s, _)| s == scan) {
                Some((_, p)) => Ok(datafusion::common::tree_node::Transformed::yes(p.clone())),
                None => Ok(datafusion::common::tree_node::Transformed::no(node)),
            },
            other => Ok(datafusion::common::tree_node::Transformed::no(other)),
        })?
        .data;
    state.optimize(&plan)
}

/// The rows a scan gives, as a plan of values under the scan's name and columns.
async fn values_of(state: &SessionState, scan: &TableScan) -> DfResult<LogicalPlan> {
    let name = scan.table_name.table().to_string();
    let local_only = |why: &str| {
        let what = if name == "summarize" {
            "SUMMARIZE".to_string()
        } else {
            format!("`{}`", scan.table_name)
        };
        DataFusionError::Plan(format!(
            "{what} cannot run on the cluster ({why}); run it locally: without --cluster, or `\\connect local` in the shell"
        ))
    };
    let provider = source_as_provider(&scan.source)
        .map_err(|_| local_only("it is not a table the executors can read"))?;
    if provider.table_type() != TableType::View {
        return Err(local_only(
            "it is an in-memory table of this session; the executors read Parquet tables by path",
        ));
    }
    let exec = provider
        .scan(state, scan.projection.as_ref(), &scan.filters, scan.fetch)
        .await?;
    let batches = datafusion::physical_plan::collect(exec, state.task_ctx()).await?;
    let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    if bytes > MAX_VALUES_BYTES {
        return Err(local_only(&format!(
            "its result of {} KiB is too big to send with the plan",
            bytes >> 10
        )));
    }
    let schema = scan.projected_schema.clone();
    let mut rows: Vec<Vec<Expr>> = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            rows.push(
                b.columns()
                    .iter()
                    .map(|c| {
                        datafusion::common::ScalarValue::try_from_array(c, r)
                            .map(|v| Expr::Literal(v, None))
                    })
                    .collect::<DfResult<Vec<_>>>()?,
            );
        }
    }
    let builder = if rows.is_empty() {
        LogicalPlanBuilder::empty(false)
            .project(
                schema
                    .fields()
                    .iter()
                    .map(|f| {
                        Ok(Expr::Literal(
                            datafusion::common::ScalarValue::try_from(f.data_type())?,
                            None,
                        )
                        .alias(f.name()))
                    })
                    .collect::<DfResult<Vec<_>>>()?,
            )?
            .limit(0, Some(0))?
    } else {
        let values = LogicalPlanBuilder::values(rows)?;
        let generated: Vec<String> = values
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        values.project(
            generated
                .iter()
                .zip(schema.fields())
                .map(|(g, f)| col(g.as_str()).alias(f.name()))
                .collect::<Vec<_>>(),
        )?
    };
    builder.alias(scan.table_name.clone())?.build()
}
