//! The query engine: one DataFusion `SessionContext` per process with the dataset's tables,
//! the formats' functions and SQL library (views and table functions) registered. It knows the
//! formats only through the [`Catalog`] it is given.

pub mod align;
pub mod attribution;
pub mod calls;
pub mod checks;
pub mod facts;
pub mod functions;
pub mod guard;
pub mod json;
pub mod lazy;
pub mod library;
pub mod shape;
pub mod stored;
pub mod summarize;
pub mod units;

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

use memq_core::catalog::TableDef;
use memq_core::dataset::{self, Manifest};
use memq_core::error::{Location, MemqError, Result};
use memq_core::format::{Catalog, Function};

pub struct Engine {
    pub ctx: SessionContext,
    pub dataset: PathBuf,
    pub manifest: Manifest,
    pub catalog: Catalog,
    /// The catalog's SQL library, parsed once at open.
    analyses: Vec<library::Analysis>,
}

/// Every SQL function: the engine's display functions, then each format's.
pub fn all_functions(catalog: &Catalog) -> Vec<Function> {
    let mut all = functions::functions();
    all.extend(catalog.functions());
    all
}

impl Engine {
    /// Opens a dataset folder and registers everything `catalog` declares.
    pub async fn open(dataset: &Path, catalog: &Catalog) -> Result<Engine> {
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
        // A fair pool: spilling operators (sorts, aggregates, joins) share the limit and spill
        // to disk past it; the rest fails with "Resources exhausted", an error instead of an abort.
        let pool = datafusion::execution::memory_pool::TrackConsumersPool::new(
            datafusion::execution::memory_pool::FairSpillPool::new(memq_core::memory_limit()),
            std::num::NonZeroUsize::new(5).expect("5 > 0"),
        );
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(pool))
            .build_arc()?;
        let analyses = library::analyses(&catalog.sql_files());
        // What the library that built the dataset stored with it is read only by the same
        // library (stored.rs).
        let same_library = (manifest.library.as_deref())
            .is_some_and(|library| library == stored::fingerprint(&analyses));
        let no_facts = Default::default();
        let facts = facts::Facts::new(
            catalog,
            if same_library {
                &manifest.facts
            } else {
                &no_facts
            },
        );
        let mut config = SessionConfig::new()
            .with_information_schema(true)
            .with_default_catalog_and_schema("memq", "main")
            // Facts the argument checks and the table view read once (facts.rs).
            .with_extension(Arc::new(facts));
        // The tables are stored in their declared order (curve: by series, then time): keep that
        // order through repartitioning instead of sorting again for each window or aggregate.
        config.options_mut().optimizer.prefer_existing_sort = true;
        // Files can be queried by path too: `SELECT * FROM 'out.parquet'`.
        let state = datafusion::execution::SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime)
            .with_default_features()
            .with_query_planner(Arc::new(calls::InliningPlanner))
            .build();
        let ctx = SessionContext::new_with_state(state).enable_url_table();
        let schema = Arc::new(lazy::LibrarySchema::new(&analyses));
        schema.bind(ctx.state_weak_ref());
        ctx.catalog("memq")
            .ok_or_else(|| MemqError::Query("no catalog memq".into()))?
            .register_schema("main", schema)?;
        for def in catalog.tables() {
            register_table(&ctx, dataset, &def).await?;
        }
        functions::register_all(&ctx, catalog)?;
        register_library(&ctx, &analyses)?;
        if same_library {
            stored::register(&ctx, dataset, &manifest, &analyses).await;
        }
        Ok(Engine {
            ctx,
            dataset: dataset.to_path_buf(),
            manifest,
            catalog: catalog.clone(),
            analyses,
        })
    }

    /// The canned analyses of the catalog's formats.
    pub fn analyses(&self) -> &[library::Analysis] {
        &self.analyses
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

/// The URL of a table's folder in a dataset, for a listing table of every file in it.
fn folder_url(dir: &Path) -> Result<ListingTableUrl> {
    Ok(ListingTableUrl::parse(format!(
        "{}/",
        dir.canonicalize().unwrap_or(dir.to_path_buf()).display()
    ))?)
}

async fn register_table(ctx: &SessionContext, dataset: &Path, def: &TableDef) -> Result<()> {
    let dir = dataset.join(def.name);
    std::fs::create_dir_all(&dir).ok();
    let url = folder_url(&dir)?;
    let order: Vec<SortExpr> = def
        .sort_order
        .iter()
        .map(|c| col(*c).sort(true, false))
        .collect();
    let mut options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    if dataset::by_rank(def.name) {
        // `TABLE/rank=R/…`: the column `rank`, and a filter on it reads that rank's files only.
        options = options.with_table_partition_cols(vec![(
            dataset::RANK_COLUMN.to_string(),
            datafusion::arrow::datatypes::DataType::Int64,
        )]);
    }
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

/// Registers the analyses: the table functions (planned when called); the views live in the
/// schema ([`lazy::LibrarySchema`]) and are planned when first named. The library is built
/// in, so that it has no cycle is checked by a test (`library_is_acyclic`), not at each open:
/// parsing every file for it was a third of the time `memq sql D -e 'SELECT 1'` took.
fn register_library(ctx: &SessionContext, analyses: &[library::Analysis]) -> Result<()> {
    for a in analyses.iter().filter(|a| a.is_table_function()) {
        ctx.register_udtf(
            &a.name,
            Arc::new(calls::SqlTableFunction {
                analysis: a.clone(),
            }),
        );
    }
    ctx.register_udtf("summarize", Arc::new(summarize::Summarize));
    Ok(())
}
