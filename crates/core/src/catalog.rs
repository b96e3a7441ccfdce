//! The catalog: every table a dataset can hold, declared exactly once with a type, a unit and a
//! doc per column and the order its files are sorted by. Formats declare their tables here
//! ([`crate::format::Format::tables`]); ingest builds batches against these schemas, the engine
//! registers them with their sort order, the printer reads each column's unit from the Arrow
//! field metadata, and `\d` prints the docs.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;

/// The Arrow field metadata key that carries a column's [`Unit`].
pub const UNIT_KEY: &str = "memq.unit";

/// What a numeric column measures; drives display (bytes humanized, times readable) and is
/// carried in the field metadata under [`UNIT_KEY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Plain value (text, ids, flags).
    None,
    /// A size or an amount of memory, bytes.
    Bytes,
    /// A moment, ns since the Unix epoch.
    TimeNs,
    /// A moment, µs since the Unix epoch (snapshot trace times, as written).
    TimeUs,
    /// A length of time, ns.
    DurationNs,
    /// A number of things (rows, events, blocks).
    Count,
    /// A percentage, 0–100.
    Percent,
    /// A device address (shown as `0x0000fffdc0000000`, as dumps and stacks print it).
    Pointer,
}

impl Unit {
    pub const ALL: [Unit; 8] = [
        Unit::None,
        Unit::Bytes,
        Unit::TimeNs,
        Unit::TimeUs,
        Unit::DurationNs,
        Unit::Count,
        Unit::Percent,
        Unit::Pointer,
    ];

    /// The name used in metadata and in the SQL library's `@column` lines.
    pub fn name(self) -> &'static str {
        match self {
            Unit::None => "-",
            Unit::Bytes => "bytes",
            Unit::TimeNs => "ns",
            Unit::TimeUs => "us",
            Unit::DurationNs => "duration_ns",
            Unit::Count => "count",
            Unit::Percent => "percent",
            Unit::Pointer => "pointer",
        }
    }

    pub fn parse(name: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.name() == name)
    }

    /// The unit a field declares in its metadata ([`Unit::None`] when it declares none).
    pub fn of(field: &Field) -> Unit {
        field
            .metadata()
            .get(UNIT_KEY)
            .and_then(|u| Unit::parse(u))
            .unwrap_or(Unit::None)
    }

    /// `field` with this unit in its metadata (unchanged for [`Unit::None`]).
    pub fn annotate(self, field: Field) -> Field {
        if self == Unit::None {
            return field;
        }
        let mut metadata = field.metadata().clone();
        metadata.insert(UNIT_KEY.to_string(), self.name().to_string());
        field.with_metadata(metadata)
    }

    /// The metadata map of a field with this unit (empty for [`Unit::None`]).
    pub fn metadata(self) -> HashMap<String, String> {
        match self {
            Unit::None => HashMap::new(),
            u => HashMap::from([(UNIT_KEY.to_string(), u.name().to_string())]),
        }
    }
}

/// One column: name, Arrow type, nullability, unit and what it holds.
#[derive(Debug, Clone)]
pub struct ColumnDef {
    pub name: &'static str,
    pub data_type: DataType,
    pub nullable: bool,
    pub unit: Unit,
    pub doc: &'static str,
}

impl ColumnDef {
    /// This column measuring `unit`.
    pub fn unit(mut self, unit: Unit) -> ColumnDef {
        self.unit = unit;
        self
    }

    /// Bytes (shorthand for `.unit(Unit::Bytes)`).
    pub fn bytes(self) -> ColumnDef {
        self.unit(Unit::Bytes)
    }

    /// An address (shorthand for `.unit(Unit::Pointer)`).
    pub fn pointer(self) -> ColumnDef {
        self.unit(Unit::Pointer)
    }

    /// A moment in ns since the Unix epoch.
    pub fn time_ns(self) -> ColumnDef {
        self.unit(Unit::TimeNs)
    }

    pub fn field(&self) -> Field {
        self.unit
            .annotate(Field::new(self.name, self.data_type.clone(), self.nullable))
    }
}

/// One table of the dataset.
#[derive(Debug, Clone)]
pub struct TableDef {
    pub name: &'static str,
    pub doc: &'static str,
    pub columns: Vec<ColumnDef>,
    /// The order each Parquet file of the table is sorted by (ascending, nulls last): the
    /// whole key, ties included, so that a re-ingest writes identical files.
    pub sort_order: &'static [&'static str],
}

impl TableDef {
    pub fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(ColumnDef::field)
                .collect::<Vec<_>>(),
        ))
    }

    /// The position of column `name` in the schema.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// A batch of this table from columns given by name, in any order. A missing, unknown or
    /// repeated column, or one of the wrong type or length, is an error naming it.
    pub fn batch(&self, columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch, ArrowError> {
        let mut slots: Vec<Option<ArrayRef>> = vec![None; self.columns.len()];
        for (name, array) in columns {
            let i = self.index_of(name).ok_or_else(|| {
                ArrowError::SchemaError(format!("table {} has no column {name}", self.name))
            })?;
            if slots[i].replace(array).is_some() {
                return Err(ArrowError::SchemaError(format!(
                    "column {name} of table {} given twice",
                    self.name
                )));
            }
        }
        let arrays = slots
            .into_iter()
            .zip(&self.columns)
            .map(|(a, c)| {
                a.ok_or_else(|| {
                    ArrowError::SchemaError(format!(
                        "column {} of table {} not given",
                        c.name, self.name
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(self.schema(), arrays)
    }
}

/// Shorthand for declaring a nullable column.
pub fn col(name: &'static str, data_type: DataType, doc: &'static str) -> ColumnDef {
    ColumnDef {
        name,
        data_type,
        nullable: true,
        unit: Unit::None,
        doc,
    }
}

/// Shorthand for declaring a non-null column.
pub fn req(name: &'static str, data_type: DataType, doc: &'static str) -> ColumnDef {
    ColumnDef {
        nullable: false,
        ..col(name, data_type, doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_travel_in_field_metadata() {
        let def = TableDef {
            name: "t",
            doc: "",
            columns: vec![
                col("size", DataType::Int64, "").bytes(),
                req("name", DataType::Utf8, ""),
            ],
            sort_order: &[],
        };
        let schema = def.schema();
        assert_eq!(Unit::of(schema.field(0)), Unit::Bytes);
        assert_eq!(Unit::of(schema.field(1)), Unit::None);
        for u in Unit::ALL {
            assert_eq!(Unit::parse(u.name()), Some(u));
        }
    }
}
