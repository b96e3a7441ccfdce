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
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::Plus | Operator::Minus => {
                let (l, r) = (of(left), of(right));
                if l == r || r == Unit::None && matches!(**right, Expr::Literal(..)) {
                    l
                } else if l == Unit::None && matches!(**left, Expr::Literal(..)) {
                    r
                } else {
                    Unit::None
                }
            }
            _ => Unit::None,
        },
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
