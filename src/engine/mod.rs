//! The query engine: one DataFusion `SessionContext` per process with the dataset's tables,
//! memq's functions and the SQL library (views and table functions) registered.

pub mod library;
pub mod udf;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::SortExpr;
use datafusion::prelude::{col, DataFrame, SessionConfig, SessionContext};

use crate::dataset::{self, Manifest};
use crate::error::{Location, MemqError, Result};
use crate::ingest::all_tables;
use crate::schema::TableDef;

/// Memory the engine may use before spilling (override with MEMQ_MEMORY_LIMIT_MB).
fn memory_limit() -> usize {
    std::env::var("MEMQ_MEMORY_LIMIT_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map(|mb| mb << 20)
        .unwrap_or(8 << 30)
}

pub struct Engine {
    pub ctx: SessionContext,
    pub dataset: PathBuf,
    pub manifest: Manifest,
}

impl Engine {
    /// Opens a dataset folder and registers everything.
    pub async fn open(dataset: &Path) -> Result<Engine> {
        if !dataset::is_dataset(dataset) {
            return Err(MemqError::input(
                dataset,
                Location::None,
                "not a memq dataset (no manifest.json)",
            ));
        }
        let manifest = Manifest::read(dataset)?;
        if manifest.schema_version != dataset::SCHEMA_VERSION {
            return Err(MemqError::input(
                dataset,
                Location::None,
                format!(
                    "dataset schema version {} (this memq reads {}); ingest the sources again",
                    manifest.schema_version,
                    dataset::SCHEMA_VERSION
                ),
            ));
        }
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(memory_limit(), 1.0)
            .build_arc()?;
        let config = SessionConfig::new()
            .with_information_schema(true)
            .with_default_catalog_and_schema("memq", "main");
        // Files can be queried by path too: `SELECT * FROM 'out.parquet'`.
        let ctx = SessionContext::new_with_config_rt(config, runtime).enable_url_table();
        for def in all_tables() {
            register_table(&ctx, dataset, &def).await?;
        }
        udf::register(&ctx);
        register_library(&ctx).await?;
        Ok(Engine {
            ctx,
            dataset: dataset.to_path_buf(),
            manifest,
        })
    }

    /// Plans one statement.
    pub async fn dataframe(&self, sql: &str) -> Result<DataFrame> {
        Ok(self.ctx.sql(sql).await?)
    }

    /// Runs one statement and collects its result.
    pub async fn query(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        Ok(self.dataframe(sql).await?.collect().await?)
    }
}

async fn register_table(ctx: &SessionContext, dataset: &Path, def: &TableDef) -> Result<()> {
    let dir = dataset.join(def.name);
    std::fs::create_dir_all(&dir).ok();
    let url = ListingTableUrl::parse(format!(
        "{}/",
        dir.canonicalize().unwrap_or(dir.clone()).display()
    ))?;
    let order: Vec<SortExpr> = def
        .sort_order
        .iter()
        .map(|c| col(*c).sort(true, false))
        .collect();
    let mut options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    if !order.is_empty() {
        options = options.with_file_sort_order(vec![order]);
    }
    let config = ListingTableConfig::new(url)
        .with_listing_options(options)
        .with_schema(def.schema());
    let table = ListingTable::try_new(config)?;
    ctx.register_table(def.name, Arc::new(table))?;
    Ok(())
}

/// Registers every analysis: views first (retrying those that use other views), then table
/// functions.
async fn register_library(ctx: &SessionContext) -> Result<()> {
    let analyses = library::analyses();
    for a in analyses.iter().filter(|a| a.is_table_function()) {
        ctx.register_udtf(
            &a.name,
            Arc::new(library::SqlTableFunction {
                analysis: a.clone(),
            }),
        );
    }
    let mut pending: Vec<&library::Analysis> =
        analyses.iter().filter(|a| !a.is_table_function()).collect();
    while !pending.is_empty() {
        let mut failed = Vec::new();
        let mut last_error = None;
        for a in &pending {
            let sql = format!("CREATE VIEW \"{}\" AS {}", a.name, a.body);
            if let Err(e) = ctx.sql(&sql).await {
                last_error = Some(format!("sql/{}: {e}", a.path));
                failed.push(*a);
            }
        }
        if failed.len() == pending.len() {
            return Err(MemqError::Query(last_error.unwrap_or_default()));
        }
        pending = failed;
    }
    Ok(())
}
