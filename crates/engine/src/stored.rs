//! Views stored with the dataset (`-- @stored` in the library).
//!
//! A few views cost far more to plan than to run: `oom_findings` is about 70 operators of
//! windows, aggregates and joins over a few hundred OOM records, and DataFusion spends close to
//! a millisecond planning each operator (docs/performance.md), so every query of it paid
//! ~100 ms for a handful of rows. Such a view is marked `-- @stored`: `memq ingest` computes it
//! once, after the tables are written (in the order the views read each other), into
//! `NAME/0000.parquet` inside the dataset, and an engine opening the dataset registers that
//! file under the view's name, so a query reads its rows (Perfetto's standard library makes the
//! same split between a `VIEW` and a `TABLE`). The SQL file stays the definition: the stored
//! rows are what it answers over that dataset, and a dataset without them (an older dataset, a
//! view that failed to compute) plans the view as before.
//!
//! Stored rows are read only by the library that computed them: the manifest records its
//! [`fingerprint`] (the memq version and every analysis's SQL), and a memq whose library
//! differs plans the views instead. `memq ingest --append` computes them again over every source.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use memq_core::dataset::{Manifest, ParquetSink, TableEntry};
use memq_core::error::{MemqError, Result};

use crate::library::{self, Analysis};
use crate::Engine;

/// The file of a stored view inside its folder.
const FILE: &str = "0000.parquet";

/// The fingerprint of a library: FNV-1a of the memq version and of each analysis's path and
/// SQL, in hex. Any change of the library's text gives another.
pub fn fingerprint(analyses: &[Analysis]) -> String {
    let mut text = String::from(env!("CARGO_PKG_VERSION"));
    for a in analyses {
        for part in [&a.path, &a.body] {
            text.push('\0');
            text.push_str(part);
        }
    }
    format!("{:016x}", memq_core::fnv1a(text.as_bytes()))
}

/// Registers in `ctx` the stored views `manifest` lists (computed by this library).
pub(crate) async fn register(
    ctx: &SessionContext,
    dataset: &Path,
    manifest: &Manifest,
    analyses: &[Analysis],
) {
    for name in &manifest.stored {
        if let Some(view) = analyses.iter().find(|a| a.stored && &a.name == name) {
            // A stored file that cannot be read (removed by hand) leaves the view to be planned:
            // its answer comes from the tables all the same.
            let _ = register_one(ctx, dataset, view).await;
        }
    }
}

async fn register_one(ctx: &SessionContext, dataset: &Path, view: &Analysis) -> Result<()> {
    let url = crate::folder_url(&dataset.join(&view.name))?;
    // The file's columns with the units `store_one` kept in their metadata.
    let format = ParquetFormat::default().with_skip_metadata(false);
    let options = ListingOptions::new(Arc::new(format)).with_file_extension(".parquet");
    let schema = options.infer_schema(&ctx.state(), &url).await?;
    let config = ListingTableConfig::new(url)
        .with_listing_options(options)
        .with_schema(schema);
    ctx.register_table(&view.name, Arc::new(ListingTable::try_new(config)?))?;
    Ok(())
}

/// What storing one view gave: its table entry, or why it could not be stored.
pub type Outcome = (String, Result<TableEntry>);

/// The stored views of `analyses` worth computing over the dataset `manifest` describes, each
/// after the stored views it reads: those that read (directly or through other views) a table
/// with rows. The rest would plan a long query for no rows (the OOM views of a snapshot-only
/// dataset): they are left to be planned if ever asked. Only the stored views and the views
/// they read are parsed, not the whole library (which costs more than a small ingest).
pub fn wanted<'a>(analyses: &'a [Analysis], manifest: &Manifest) -> Result<Vec<&'a Analysis>> {
    let mut names: Vec<&str> = analyses.iter().map(|a| a.name.as_str()).collect();
    names.extend(manifest.tables.iter().map(|t| t.name.as_str()));
    let view = |name: &str| analyses.iter().find(|a| a.name == name);
    // What each stored view and each view they read names.
    let mut reads: HashMap<&str, Vec<String>> = HashMap::new();
    let mut todo: Vec<&Analysis> = analyses.iter().filter(|a| a.stored).collect();
    while let Some(a) = todo.pop() {
        if !reads.contains_key(a.name.as_str()) {
            let deps = library::dependencies(a, &names)?;
            todo.extend(deps.iter().filter_map(|d| view(d)));
            reads.insert(&a.name, deps);
        }
    }
    // Everything a view reads, through the views it reads.
    let closure = |name: &str| {
        let (mut todo, mut seen) = (
            reads.get(name).into_iter().flatten().collect::<Vec<_>>(),
            Vec::<&str>::new(),
        );
        while let Some(next) = todo.pop() {
            if !seen.contains(&next.as_str()) {
                seen.push(next);
                todo.extend(reads.get(next.as_str()).into_iter().flatten());
            }
        }
        seen
    };
    let filled = |t: &str| manifest.tables.iter().any(|e| e.name == t && e.rows > 0);
    let keep = |a: &Analysis| {
        a.stored
            && closure(&a.name)
                .iter()
                .any(|t| view(t).is_none() && filled(t))
    };
    // Each after the stored views it reads: the library's order of those views alone.
    let read: Vec<Analysis> = analyses
        .iter()
        .filter(|a| reads.contains_key(a.name.as_str()))
        .cloned()
        .collect();
    let order = library::topological(&read).map_err(MemqError::Query)?;
    Ok(order
        .into_iter()
        .filter(|a| keep(a))
        .filter_map(|a| view(&a.name))
        .collect())
}

/// Computes `views` (from [`wanted`]) over the engine's dataset (a dataset being built) and
/// writes each into `NAME/0000.parquet` there. Each is registered as it is written, so the
/// views after it read its rows. A view that fails is left out (its queries plan it instead)
/// and reported in the outcomes.
pub async fn store(engine: &Engine, views: &[&Analysis]) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for a in views {
        outcomes.push((a.name.clone(), store_one(engine, a).await));
    }
    outcomes
}

async fn store_one(engine: &Engine, view: &Analysis) -> Result<TableEntry> {
    let name = view.name.as_str();
    let dir = engine.dataset.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| MemqError::io(&dir, e))?;
    let (file, partial) = (dir.join(FILE), dir.join(format!("{FILE}.partial")));
    let written = async {
        let df = engine.ctx.table(name).await?;
        // The columns as the plan gives them (a string may be a view there and not in the
        // logical schema), with the units of the view's columns in their metadata.
        let logical = df.schema().as_arrow().clone();
        let mut stream = df.execute_stream().await?;
        let fields: Vec<Field> = (stream.schema().fields().iter().zip(logical.fields()))
            .map(|(f, l)| f.as_ref().clone().with_metadata(l.metadata().clone()))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut sink = ParquetSink::create(&partial, schema.clone())?;
        while let Some(batch) = stream.next().await {
            sink.write(&RecordBatch::try_new(
                schema.clone(),
                batch?.columns().to_vec(),
            )?)?;
        }
        let rows = sink.close()?;
        std::fs::rename(&partial, &file).map_err(|e| MemqError::io(&file, e))?;
        Ok::<u64, MemqError>(rows)
    }
    .await;
    let rows = match written {
        Ok(rows) => rows,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    register_one(&engine.ctx, &engine.dataset, view).await?;
    Ok(TableEntry {
        name: name.to_string(),
        rows,
        files: vec![format!("{name}/{FILE}")],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(tables: &[(&str, u64)]) -> Manifest {
        Manifest {
            schema_version: 1,
            memq_version: "x".into(),
            created_unix: 0,
            sources: Vec::new(),
            tables: tables
                .iter()
                .map(|(name, rows)| TableEntry {
                    name: name.to_string(),
                    rows: *rows,
                    files: Vec::new(),
                })
                .collect(),
            options: Default::default(),
            stored: Vec::new(),
            library: None,
            facts: Default::default(),
        }
    }

    #[test]
    fn stored_views_come_after_those_they_read_and_need_rows() {
        let parse = |path: &str, text: &str| library::parse(path, text).unwrap();
        let all = vec![
            parse(
                "x/findings.sql",
                "-- findings: f\n-- @stored\nSELECT * FROM events_v JOIN steps USING (k)",
            ),
            parse(
                "x/events_v.sql",
                "-- events_v: e\n-- @stored\nSELECT * FROM helper",
            ),
            parse("x/helper.sql", "-- helper: h\nSELECT * FROM oom"),
            parse("x/other.sql", "-- other: o\nSELECT * FROM oom"),
        ];
        let names = |m: &Manifest| -> Vec<String> {
            wanted(&all, m)
                .unwrap()
                .iter()
                .map(|a| a.name.clone())
                .collect()
        };
        assert_eq!(
            names(&manifest(&[("oom", 3), ("steps", 0)])),
            ["events_v", "findings"]
        );
        // rows only in a table that one of them reads: that one alone
        assert_eq!(names(&manifest(&[("oom", 0), ("steps", 2)])), ["findings"]);
        assert!(names(&manifest(&[("oom", 0), ("steps", 0)])).is_empty());
        // any change of the library's SQL gives another fingerprint
        let mut changed = all.clone();
        changed[2].body.push(' ');
        assert_ne!(fingerprint(&all), fingerprint(&changed));
        assert_eq!(fingerprint(&all), fingerprint(&all.clone()));
    }
}
