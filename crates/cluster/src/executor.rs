//! A cluster executor, in process, with memq's functions in its function registry.

use std::path::PathBuf;
use std::sync::Arc;

use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::JobId;
use ballista_executor::execution_engine::{
    DefaultExecutionEngine, ExecutionEngine, QueryStageExecutor,
};
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use memq_core::error::{MemqError, Result};
use memq_core::format::Catalog;

use crate::{ballista_error, check_scheduler, SchedulerUrl};

/// How an executor runs (`memq cluster executor`).
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler, `df://HOST:PORT`.
    pub scheduler: String,
    /// The address the executor's services listen on.
    pub bind_host: String,
    /// The Arrow Flight port results and shuffles are fetched from (0: any free port).
    pub port: u16,
    /// The gRPC port the scheduler pushes tasks to (0: any free port).
    pub grpc_port: u16,
    /// Tasks run at once (0: one per CPU core).
    pub concurrency: usize,
    /// Where shuffle files are written (default: a temporary folder).
    pub work_dir: Option<PathBuf>,
    /// The memory of the executor's tasks, bytes (shared by its concurrent tasks; they spill
    /// past it). Default: Ballista's share of the machine's memory.
    pub memory_limit: Option<u64>,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            scheduler: format!("df://localhost:{}", crate::DEFAULT_SCHEDULER_PORT),
            bind_host: "0.0.0.0".into(),
            port: 0,
            grpc_port: 0,
            concurrency: 0,
            work_dir: None,
            memory_limit: None,
        }
    }
}

/// `port`, or a free port of `host` for 0 (the executor tells the scheduler its ports before
/// it binds them, so "any port" is chosen here).
fn port_or_free(host: &str, port: u16, what: &str) -> Result<u16> {
    if port != 0 {
        return Ok(port);
    }
    let listener = std::net::TcpListener::bind((host, 0)).map_err(|e| {
        MemqError::Query(format!(
            "memq cluster executor: no free {what} port on {host}: {e}"
        ))
    })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| MemqError::Query(format!("memq cluster executor: {e}")))
}

/// The function registry of an executor: DataFusion's functions (nested ones included) and
/// every memq function.
fn registry(catalog: &Catalog) -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    for f in datafusion::functions_nested::all_default_nested_functions() {
        registry.scalar_functions.insert(f.name().to_string(), f);
    }
    for f in memq_engine::functions::cluster_udfs(catalog) {
        registry.scalar_functions.insert(f.name().to_string(), f);
    }
    registry
}

/// Ballista's execution engine, each stage checked first ([`crate::stage_check::check_stage`]).
/// (Ballista's pool of shuffle clients is private to its crate: each fetch connects anew.)
struct MemqEngine(DefaultExecutionEngine);

impl ExecutionEngine for MemqEngine {
    fn create_query_stage_exec(
        &self,
        job_id: JobId,
        stage_id: usize,
        task_id: usize,
        global_output_partition_ids: Vec<usize>,
        plan: Arc<dyn ExecutionPlan>,
        work_dir: &str,
        config: &SessionConfig,
    ) -> datafusion::error::Result<Arc<dyn QueryStageExecutor>> {
        let plan = crate::stage_check::check_stage(plan)?;
        self.0.create_query_stage_exec(
            job_id,
            stage_id,
            task_id,
            global_output_partition_ids,
            plan,
            work_dir,
            config,
        )
    }
}

/// Runs a Ballista executor that registers with the scheduler `opts.scheduler` and runs its
/// tasks, with every memq function in its registry (physical plans naming them decode). Says
/// `memq cluster executor ID connected to df://HOST:PORT` on stderr, then runs until SIGINT or
/// SIGTERM (it tells the scheduler it stops and lets its running tasks end).
pub async fn run_executor(opts: ExecutorOptions, catalog: Catalog) -> Result<()> {
    let url = SchedulerUrl::parse(&opts.scheduler)?;
    check_scheduler(&url).await?;
    let port = port_or_free(&opts.bind_host, opts.port, "Flight")?;
    let mut grpc_port = port_or_free(&opts.bind_host, opts.grpc_port, "gRPC")?;
    if grpc_port == port {
        grpc_port = port_or_free(&opts.bind_host, 0, "gRPC")?;
    }
    let config = ExecutorProcessConfig {
        bind_host: opts.bind_host.clone(),
        port,
        grpc_port,
        scheduler_host: url.host.clone(),
        scheduler_port: url.port,
        vcores: opts.concurrency,
        work_dir: opts.work_dir.as_ref().map(|d| d.display().to_string()),
        memory_pool_size: opts.memory_limit,
        print_thread_info: false,
        override_function_registry: Some(Arc::new(registry(&catalog))),
        override_execution_engine: Some(Arc::new(MemqEngine(DefaultExecutionEngine::new()))),
        ..Default::default()
    };
    if let Some(dir) = &opts.work_dir {
        std::fs::create_dir_all(dir).map_err(|e| MemqError::io(dir, e))?;
    }
    let id = config.executor_id.clone();
    eprintln!(
        "memq cluster executor {id} connected to {url} (Flight port {port}, gRPC port {grpc_port})"
    );
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| ballista_error(&format!("memq cluster executor {id}"), e))?;
    eprintln!("memq cluster executor {id} stopped");
    Ok(())
}
