//! Opens whatever the user names as INPUT — a dataset folder, or raw dumps, folders and pickles
//! that are ingested first — as an [`Engine`].

use std::path::{Path, PathBuf};

use datafusion::prelude::SessionContext;
use memq_core::dataset;
use memq_core::error::Result;
use memq_engine::Engine;
use memq_ingest::cache::{self, CacheState};
use memq_ingest::{ingest, IngestOptions};

/// An opened input; keeps a temporary dataset alive as long as it is in use.
pub struct Opened {
    pub engine: Engine,
    _temp: Option<tempfile::TempDir>,
    /// The engine's own session while `engine.ctx` is a cluster's ([`Opened::connect`]): kept
    /// for `\connect local`, and alive because the library's views are planned in it.
    local: Option<SessionContext>,
    /// The cluster `engine.ctx` runs on (`df://HOST:PORT`), if any.
    cluster: Option<String>,
}

/// Set to `df://HOST:PORT`: `memq sql` and `memq run` run on that cluster (`--cluster`; the
/// command line reads it).
pub const CLUSTER_ENV: &str = "MEMQ_CLUSTER";

impl Opened {
    fn new(engine: Engine, temp: Option<tempfile::TempDir>) -> Opened {
        Opened {
            engine,
            _temp: temp,
            local: None,
            cluster: None,
        }
    }

    /// Without the `cluster` feature there is no cluster to run on: a usage error.
    #[cfg(not(feature = "cluster"))]
    pub async fn connect(&mut self, url: &str) -> Result<()> {
        Err(memq_core::error::MemqError::Usage(format!(
            "cannot run on {url}: this memq was built without the `cluster` feature (Ballista); \
             build it with the default features"
        )))
    }

    /// Runs the statements of `engine.ctx` on the cluster at `url` from now on: the engine's
    /// session upgraded for Ballista ([`memq_cluster::connect`]); everything downstream is
    /// unchanged. The dataset must be at the same path on every executor (docs/scale-out.md).
    #[cfg(feature = "cluster")]
    pub async fn connect(&mut self, url: &str) -> Result<()> {
        let local = self
            .local
            .clone()
            .unwrap_or_else(|| self.engine.ctx.clone());
        let remote = memq_cluster::connect(url, local.state()).await?;
        self.engine.ctx = remote;
        self.local = Some(local);
        self.cluster = Some(url.to_string());
        Ok(())
    }

    /// Back to the engine's own session (after [`Opened::connect`]).
    pub fn disconnect(&mut self) {
        if let Some(local) = self.local.take() {
            self.engine.ctx = local;
        }
        self.cluster = None;
    }

    /// The cluster the statements run on, if any.
    pub fn cluster(&self) -> Option<&str> {
        self.cluster.as_deref()
    }
}

/// Where raw inputs are ingested before they are opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestTarget {
    /// A temporary dataset, removed when the [`Opened`] is dropped.
    Temporary,
    /// The ingest cache below this folder (normally [`cache::cache_dir`]).
    Cache(PathBuf),
}

fn warn_rejects(rejects: u64) {
    if rejects > 0 {
        eprintln!("memq: {rejects} record(s) could not be parsed; see the `rejects` table");
    }
}

/// Set (to anything but `0`) by `--no-cache`: raw inputs go to a temporary dataset.
pub const NO_CACHE_ENV: &str = "MEMQ_NO_CACHE";

/// Where raw inputs are ingested unless told otherwise: the ingest cache, or a temporary
/// dataset when `MEMQ_NO_CACHE` is set (`--no-cache`).
pub fn default_target() -> IngestTarget {
    match std::env::var(NO_CACHE_ENV) {
        Ok(v) if !v.is_empty() && v != "0" => IngestTarget::Temporary,
        _ => IngestTarget::Cache(cache::cache_dir()),
    }
}

/// Opens `inputs`: a single dataset folder directly, anything else through an ingest into
/// `target`. With the cache, a note on stderr says whether the cached dataset was reused.
pub async fn open_inputs(
    inputs: &[PathBuf],
    progress: bool,
    target: &IngestTarget,
) -> Result<Opened> {
    if let [single] = inputs {
        if dataset::is_dataset(single) {
            return Ok(Opened::new(
                Engine::open(single, &crate::catalog()).await?,
                None,
            ));
        }
    }
    let target = match target {
        // An unwritable cache folder is no reason to fail: ingest into a temporary dataset.
        IngestTarget::Cache(root) => match std::fs::create_dir_all(root.join("datasets")) {
            Ok(()) => target.clone(),
            Err(e) => {
                eprintln!(
                    "memq: cannot use the cache {} ({e}); ingesting into a temporary dataset",
                    root.display()
                );
                IngestTarget::Temporary
            }
        },
        IngestTarget::Temporary => IngestTarget::Temporary,
    };
    match &target {
        IngestTarget::Cache(root) => {
            let cached = cache::cached_dataset(root, inputs, progress, &crate::catalog()).await?;
            match cached.state {
                CacheState::Reused => {
                    eprintln!("memq: using cached dataset {}", cached.dataset.display())
                }
                CacheState::Created => {
                    eprintln!("memq: ingested into cache {}", cached.dataset.display())
                }
                CacheState::Refreshed => {
                    eprintln!(
                        "memq: sources changed; ingested again into cache {}",
                        cached.dataset.display()
                    )
                }
            }
            let engine = Engine::open(&cached.dataset, &crate::catalog()).await?;
            // Said on every use, as a fresh ingest says it.
            let rejects: u64 = engine.manifest.sources.iter().map(|s| s.rejects).sum();
            warn_rejects(rejects);
            Ok(Opened::new(engine, None))
        }
        IngestTarget::Temporary => {
            let temp = tempfile::Builder::new()
                .prefix("memq-")
                .tempdir()
                .map_err(|e| memq_core::error::MemqError::io(Path::new("temporary folder"), e))?;
            let target = temp.path().join("input.memq");
            let opts = IngestOptions {
                output: target.clone(),
                force: false,
                append: false,
                strict: false,
                progress,
            };
            let report = ingest(inputs, &opts, &crate::catalog()).await?;
            warn_rejects(report.total_rejects());
            Ok(Opened::new(
                Engine::open(&target, &crate::catalog()).await?,
                Some(temp),
            ))
        }
    }
}
