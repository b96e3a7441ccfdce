//! Table definitions: every table of a dataset is declared exactly once, with a doc string per
//! column. Ingest builds batches against these schemas, the engine registers them, and `\d`
//! prints the docs.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// One column: name, Arrow type, nullability and what it holds.
#[derive(Debug)]
pub struct ColumnDef {
    pub name: &'static str,
    pub data_type: DataType,
    pub nullable: bool,
    pub doc: &'static str,
}

/// One table of the dataset.
#[derive(Debug)]
pub struct TableDef {
    pub name: &'static str,
    pub doc: &'static str,
    pub columns: Vec<ColumnDef>,
    /// The order each Parquet file of the table is sorted by (ascending, nulls last).
    pub sort_order: &'static [&'static str],
}

impl TableDef {
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| Field::new(c.name, c.data_type.clone(), c.nullable))
                .collect::<Vec<_>>(),
        ))
    }
}

/// Shorthand for declaring a nullable column.
pub fn col(name: &'static str, data_type: DataType, doc: &'static str) -> ColumnDef {
    ColumnDef {
        name,
        data_type,
        nullable: true,
        doc,
    }
}

/// Shorthand for declaring a non-null column.
pub fn req(name: &'static str, data_type: DataType, doc: &'static str) -> ColumnDef {
    ColumnDef {
        name,
        data_type,
        nullable: false,
        doc,
    }
}
