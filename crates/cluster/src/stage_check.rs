//! The executor's check of each stage before it runs: the orderings and partitionings its
//! operators rely on must hold in the plan the executor decoded.
//!
//! The scheduler plans the whole query in one process, then cuts it into stages at its
//! repartitions; each stage's input from another stage is a shuffle reader, which delivers the
//! upstream stage's partitions but keeps no row order. Two kinds of operators lose what they
//! need on the way:
//! - an operator that requires sorted input and got it, in the scheduler's plan, from an
//!   order-preserving repartition (a sort-merge join, a merge of sorted partitions): the
//!   shuffle reader that replaces the repartition does not keep the order;
//! - a window partitioned by a column DataFusion knows to be constant (an equality filter such
//!   as `pool = 'PTA'`): the sort under the window leaves that column out, and the stage that
//!   decodes the window, with the filter in an earlier stage, no longer knows it is constant
//!   ("All partition by columns should have an ordering").
//!
//! [`check_stage`] sorts again where an order is missing (a sort within each partition: the
//! rows of a partition are the same, only their order is restored) and refuses a stage whose
//! input partitioning cannot give an operator the rows it needs together: a wrong answer is
//! worse than an error.

use std::sync::Arc;

use datafusion::common::tree_node::TreeNode;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_expr::{
    LexOrdering, OrderingRequirements, PartitioningSatisfaction, PhysicalSortExpr,
};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::windows::{
    get_ordered_partition_by_indices, BoundedWindowAggExec, WindowAggExec, WindowExpr,
};
use datafusion::physical_plan::{
    displayable, ExecutionPlan, ExecutionPlanProperties, InputOrderMode,
};

/// `plan` with a sort put back wherever an operator needs an order its input does not have;
/// an error when an operator's input is not partitioned as it requires.
pub fn check_stage(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        check_distribution(node.as_ref())?;
        let wanted = wanted_orderings(node.as_ref())?;
        crate::wrap_children(node, |i, child| match wanted.get(i) {
            Some(Some(ordering)) if !satisfied(child, ordering)? => Ok(Some(Arc::new(
                SortExec::new(ordering.clone(), Arc::clone(child)).with_preserve_partitioning(true),
            )
                as Arc<dyn ExecutionPlan>)),
            _ => Ok(None),
        })
    })
    .map(|t| t.data)
}

/// The order each child of `node` must have: for a window that runs on sorted partitions but
/// whose input is not ordered on every PARTITION BY key, those keys then its ORDER BY keys;
/// otherwise the node's hard ordering requirements.
fn wanted_orderings(node: &dyn ExecutionPlan) -> Result<Vec<Option<LexOrdering>>> {
    let window = if let Some(w) = node.downcast_ref::<WindowAggExec>() {
        window_ordering(w.window_expr(), w.input())?
    } else if let Some(w) = node.downcast_ref::<BoundedWindowAggExec>() {
        match w.input_order_mode {
            InputOrderMode::Sorted => window_ordering(w.window_expr(), w.input())?,
            _ => None,
        }
    } else {
        None
    };
    if window.is_some() {
        return Ok(vec![window]);
    }
    Ok(node
        .required_input_ordering()
        .into_iter()
        .map(|r| match r {
            Some(OrderingRequirements::Hard(mut alternatives)) if !alternatives.is_empty() => {
                Some(LexOrdering::from(alternatives.swap_remove(0)))
            }
            _ => None,
        })
        .collect())
}

/// For a window whose input is not ordered on all its PARTITION BY keys: those keys, then its
/// ORDER BY keys. `None` when the input's order already serves the window.
fn window_ordering(
    exprs: &[Arc<dyn WindowExpr>],
    input: &Arc<dyn ExecutionPlan>,
) -> Result<Option<LexOrdering>> {
    let Some(w) = exprs.first() else {
        return Ok(None);
    };
    let keys = w.partition_by();
    if get_ordered_partition_by_indices(keys, input)?.len() == keys.len() {
        return Ok(None);
    }
    let mut sort: Vec<PhysicalSortExpr> = keys
        .iter()
        .map(|e| PhysicalSortExpr::new_default(Arc::clone(e)))
        .collect();
    sort.extend(w.order_by().iter().cloned());
    Ok(LexOrdering::new(sort))
}

/// Whether `plan`'s output already has `ordering` (within each partition).
fn satisfied(plan: &Arc<dyn ExecutionPlan>, ordering: &LexOrdering) -> Result<bool> {
    plan.equivalence_properties()
        .ordering_satisfy(ordering.iter().cloned())
}

/// An error when a child of `node` is not partitioned as `node` requires (rows that must meet
/// would be in different tasks).
fn check_distribution(node: &dyn ExecutionPlan) -> Result<()> {
    for (child, required) in node
        .children()
        .into_iter()
        .zip(node.input_distribution_requirements().into_per_child())
    {
        let given = child.output_partitioning();
        let fit = given.satisfaction(&required, child.equivalence_properties(), true);
        if fit == PartitioningSatisfaction::NotSatisfied {
            return Err(DataFusionError::Execution(format!(
                "memq cluster: a stage's {} needs its input distributed as {required}, but the \
                 input is partitioned as {given}; refusing to run it (its rows would be wrong). \
                 The stage:\n{}",
                node.name(),
                displayable(node).indent(true)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::execution::TaskContext;
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
    use datafusion::physical_plan::repartition::RepartitionExec;
    use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
    use datafusion::physical_plan::{collect, Partitioning};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]))
    }

    /// Two partitions of unsorted values, as a shuffle reader delivers them.
    fn unsorted() -> Arc<dyn ExecutionPlan> {
        let batch = |v: Vec<i64>| {
            RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(v))]).unwrap()
        };
        MemorySourceConfig::try_new_exec(
            &[vec![batch(vec![5, 1, 3])], vec![batch(vec![4, 2, 6])]],
            schema(),
            None,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_merge_of_sorted_partitions_gets_its_inputs_sorted_again() {
        let ordering = LexOrdering::new(vec![PhysicalSortExpr::new_default(
            col("a", &schema()).unwrap(),
        )])
        .unwrap();
        let merge: Arc<dyn ExecutionPlan> =
            Arc::new(SortPreservingMergeExec::new(ordering, unsorted()));
        let checked = check_stage(merge).unwrap();
        assert!(displayable(checked.as_ref())
            .indent(true)
            .to_string()
            .contains("SortExec: expr=[a@0 ASC], preserve_partitioning=[true]"));
        let rows = collect(checked, Arc::new(TaskContext::default()))
            .await
            .unwrap();
        let values: Vec<i64> = rows
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(values, vec![1, 2, 3, 4, 5, 6]);
    }

    fn final_grouping(input: Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
        let group = PhysicalGroupBy::new_single(vec![(col("a", &schema()).unwrap(), "a".into())]);
        Arc::new(
            AggregateExec::try_new(
                AggregateMode::FinalPartitioned,
                group,
                vec![],
                vec![],
                input,
                schema(),
            )
            .unwrap(),
        )
    }

    #[test]
    fn a_grouping_whose_input_is_not_partitioned_by_its_keys_is_refused() {
        let err = check_stage(final_grouping(unsorted()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("refusing to run it"), "{err}");
        assert!(err.contains("AggregateExec"), "{err}");
        let hashed: Arc<dyn ExecutionPlan> = Arc::new(
            RepartitionExec::try_new(
                unsorted(),
                Partitioning::Hash(vec![col("a", &schema()).unwrap()], 2),
            )
            .unwrap(),
        );
        assert!(check_stage(final_grouping(hashed)).is_ok());
    }
}
