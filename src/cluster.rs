//! `memq cluster scheduler` and `memq cluster executor`: the two roles of a Ballista cluster
//! that runs memq's SQL (docs/scale-out.md). `memq sql --cluster` and `memq run --cluster`
//! are the client ([`crate::api::Dataset::open`] with `OpenOptions::cluster`); the shell's `\connect` switches to one.

#[cfg(feature = "cluster")]
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Subcommand;
use memq_core::error::{MemqError, Result};

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a scheduler: clients send it their plans, executors take its tasks. Says
    /// `memq cluster scheduler listening on df://HOST:PORT` and runs until Ctrl-C or SIGTERM.
    Scheduler {
        /// Address of its gRPC service (port 0: any free port, printed).
        #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:50050")]
        bind: String,
    },
    /// Start an executor that runs the scheduler's tasks (the dataset must be at the same path
    /// here as on the client). Every command's --memory-limit is its memory for tasks.
    Executor {
        /// The scheduler, df://HOST:PORT.
        #[arg(long, value_name = "df://HOST:PORT")]
        scheduler: String,
        /// Tasks run at once (default: one per CPU core).
        #[arg(long, value_name = "N", default_value_t = 0)]
        concurrency: usize,
        /// The address its services listen on.
        #[arg(long = "bind", value_name = "HOST", default_value = "0.0.0.0")]
        bind_host: String,
        /// Arrow Flight port, from which results and shuffles are fetched (0: any free port).
        #[arg(long, value_name = "P", default_value_t = 0)]
        port: u16,
        /// gRPC port the scheduler sends tasks to (0: any free port).
        #[arg(long, value_name = "P", default_value_t = 0)]
        grpc_port: u16,
        /// Folder for shuffle files (default: a temporary folder).
        #[arg(long, value_name = "DIR")]
        work_dir: Option<PathBuf>,
    },
}

/// Without the `cluster` feature the command is still known, so that it says why it cannot run
/// (instead of taking `cluster` for an input file).
#[cfg(not(feature = "cluster"))]
pub async fn run(_command: ClusterCommand, _memory_limit: Option<&str>) -> Result<()> {
    Err(MemqError::Usage(
        "memq cluster: this memq was built without the `cluster` feature (Ballista); build it with the default features".into(),
    ))
}

/// Runs a cluster role until it is stopped. `memory_limit` is the global `--memory-limit`.
#[cfg(feature = "cluster")]
pub async fn run(command: ClusterCommand, memory_limit: Option<&str>) -> Result<()> {
    match command {
        ClusterCommand::Scheduler { bind } => {
            let addr: SocketAddr = bind.parse().map_err(|_| {
                MemqError::Usage(format!(
                    "--bind {bind}: give an address and port, e.g. 0.0.0.0:50050 (port 0: any free port)"
                ))
            })?;
            memq_cluster::run_scheduler(addr, crate::catalog()).await
        }
        ClusterCommand::Executor {
            scheduler,
            concurrency,
            bind_host,
            port,
            grpc_port,
            work_dir,
        } => {
            let memory_limit = match memory_limit {
                Some(text) => Some(crate::exec::parse_memory_limit(text)? as u64),
                None => None,
            };
            let opts = memq_cluster::ExecutorOptions {
                scheduler,
                bind_host,
                port,
                grpc_port,
                concurrency,
                work_dir,
                memory_limit,
            };
            memq_cluster::run_executor(opts, crate::catalog()).await
        }
    }
}
