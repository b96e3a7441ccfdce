//! The scheduler's rule for UNION inputs that every task would read whole.
//!
//! Ballista runs a stage as tasks, each given a slice of the stage's partitions: before a task
//! is sent, the scheduler narrows the stage's leaves (file groups, shuffle partitions) to that
//! slice. A leaf under a merge of partitions (`CoalescePartitionsExec`,
//! `SortPreservingMergeExec`, a join's build side) is not narrowed, since the merge needs all
//! of it. Under a `UnionExec` a task is given the partitions of some inputs and none of the
//! others'; an input whose every leaf sits under such a merge cannot be narrowed to none, so
//! each task of the stage ran it once and its rows came out as many times as there were tasks
//! (`run_diff` doubled every byte on a two-executor cluster).
//!
//! [`ShuffleWholeUnionInputs`] puts a hash repartition above each such input: Ballista cuts the
//! plan there, the input runs once as a stage of its own, and the union reads its output
//! through a shuffle reader, which is narrowed like any other leaf.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{Distribution, Partitioning, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, PartitionMode,
};
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::ExecutionPlan;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub struct ShuffleWholeUnionInputs;

impl PhysicalOptimizerRule for ShuffleWholeUnionInputs {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let partitions = config.execution.target_partitions.max(1);
        plan.transform_up(|node| {
            if !node.is::<UnionExec>() {
                return Ok(Transformed::no(node));
            }
            crate::wrap_children(node, |_, child| {
                if !read_whole(child) {
                    return Ok(None);
                }
                let keys = hash_keys(child);
                if keys.is_empty() {
                    return Ok(None);
                }
                let shuffle = RepartitionExec::try_new(
                    Arc::clone(child),
                    Partitioning::Hash(keys, partitions),
                )?;
                Ok(Some(Arc::new(shuffle) as Arc<dyn ExecutionPlan>))
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "memq_shuffle_whole_union_inputs"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether every leaf of `plan` is read whole by every task: each path from `plan` to a leaf
/// passes a merge of partitions or an input the operator needs as one partition, or ends in a
/// leaf Ballista does not narrow. (Ballista's own check of union inputs, made when it cuts the
/// stages, misses a nested-loop join whose sides it swaps afterwards: the `VALUES` side that
/// was narrowable becomes the side read whole.)
fn read_whole(plan: &Arc<dyn ExecutionPlan>) -> bool {
    if plan.is::<CoalescePartitionsExec>() || plan.is::<SortPreservingMergeExec>() {
        return true;
    }
    let children = plan.children();
    if children.is_empty() {
        // The leaves the scheduler knows how to narrow.
        return !(plan.is::<DataSourceExec>()
            || plan.is::<PlaceholderRowExec>()
            || plan.is::<EmptyExec>());
    }
    // Ballista may swap a join's sides after this rule (it chooses the build side again on each
    // stage): the side read whole then is either one.
    let swappable = plan.is::<NestedLoopJoinExec>()
        || plan.is::<CrossJoinExec>()
        || plan
            .downcast_ref::<HashJoinExec>()
            .is_some_and(|j| *j.partition_mode() == PartitionMode::CollectLeft);
    if swappable && children.iter().any(|c| read_whole(c)) {
        return true;
    }
    let required: Vec<Distribution> = plan.input_distribution_requirements().into_per_child();
    children.iter().enumerate().all(|(i, child)| {
        matches!(required.get(i), Some(Distribution::SinglePartition)) || read_whole(child)
    })
}

/// The columns to hash `plan`'s rows on: those of simple types (all rows of a value go to one
/// partition; which one does not matter here), or the first column.
fn hash_keys(plan: &Arc<dyn ExecutionPlan>) -> Vec<Arc<dyn PhysicalExpr>> {
    let schema = plan.schema();
    let simple = |t: &DataType| {
        t.is_primitive()
            || matches!(
                t,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean
            )
    };
    let mut keys: Vec<Arc<dyn PhysicalExpr>> = schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| simple(f.data_type()))
        .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>)
        .collect();
    if keys.is_empty() {
        if let Some(f) = schema.fields().first() {
            keys.push(Arc::new(Column::new(f.name(), 0)));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
    use datafusion::common::JoinType;
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_plan::displayable;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]))
    }

    fn scan(partitions: usize) -> Arc<dyn ExecutionPlan> {
        MemorySourceConfig::try_new_exec(&vec![vec![]; partitions], schema(), None).unwrap()
    }

    fn shuffled(plan: Arc<dyn ExecutionPlan>) -> Vec<bool> {
        let plan = ShuffleWholeUnionInputs
            .optimize(plan, &ConfigOptions::default())
            .unwrap();
        plan.children()
            .iter()
            .map(|c| c.is::<RepartitionExec>())
            .collect()
    }

    #[test]
    fn a_union_input_read_whole_is_shuffled_and_a_narrowable_one_is_not() {
        let whole: Arc<dyn ExecutionPlan> = Arc::new(CoalescePartitionsExec::new(scan(2)));
        let union = UnionExec::try_new(vec![whole, scan(2)]).unwrap();
        assert_eq!(shuffled(union), vec![true, false]);
    }

    #[test]
    fn a_nested_loop_join_with_one_side_read_whole_is_shuffled_whichever_side_it_is() {
        let whole = || Arc::new(CoalescePartitionsExec::new(scan(2))) as Arc<dyn ExecutionPlan>;
        let join = |left, right| -> Arc<dyn ExecutionPlan> {
            Arc::new(
                NestedLoopJoinExec::try_new(left, right, None, &JoinType::Inner, None).unwrap(),
            )
        };
        for (left, right) in [(whole(), scan(1)), (scan(1), whole())] {
            // Beside it, a join of two narrowable sides.
            let union =
                UnionExec::try_new(vec![join(left, right), join(scan(1), scan(2))]).unwrap();
            let text = displayable(union.as_ref()).indent(true).to_string();
            assert_eq!(shuffled(union), vec![true, false], "{text}");
        }
    }
}
