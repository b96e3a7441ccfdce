//! The cluster's scheduler, in process, with memq's functions in every session it builds.

use std::net::SocketAddr;
use std::sync::Arc;

use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::SessionConfig;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use memq_core::error::{MemqError, Result};
use memq_core::format::Catalog;

use crate::union_inputs::ShuffleWholeUnionInputs;
use crate::{ballista_error, shutdown_signal};

/// The host to print for a bound address: the machine's name for a wildcard address.
pub(crate) fn shown_host(addr: &SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| "localhost".into())
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    }
}

/// Runs a Ballista scheduler with gRPC on `bind` (port 0: any free port) whose sessions have
/// every memq function, so that logical plans naming them decode. Says
/// `memq cluster scheduler listening on df://HOST:PORT` on stderr once listening, then runs
/// until SIGINT or SIGTERM.
pub async fn run_scheduler(bind: SocketAddr, catalog: Catalog) -> Result<()> {
    crate::ignore_sigpipe();
    let listener = tokio::net::TcpListener::bind(bind).await.map_err(|e| {
        MemqError::Query(format!(
            "memq cluster scheduler: cannot listen on {bind}: {e}"
        ))
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| MemqError::Query(format!("memq cluster scheduler: {e}")))?;
    let functions = memq_engine::functions::cluster_udfs(&catalog);
    let session_builder = Arc::new(move |config: SessionConfig| {
        let state = ballista_core::utils::default_session_builder(config)?;
        let mut state = SessionStateBuilder::new_from_existing(state)
            .with_physical_optimizer_rule(Arc::new(ShuffleWholeUnionInputs))
            .build();
        for f in &functions {
            state.register_udf(f.clone())?;
        }
        state.register_expr_planner(memq_engine::guard::planner())?;
        Ok(state)
    });
    let host = shown_host(&addr);
    let config = SchedulerConfig {
        bind_host: addr.ip().to_string(),
        bind_port: addr.port(),
        external_host: host.trim_matches(|c| c == '[' || c == ']').to_string(),
        override_session_builder: Some(session_builder),
        ..Default::default()
    };
    config
        .validate()
        .map_err(|e| ballista_error("memq cluster scheduler", e))?;
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| ballista_error("memq cluster scheduler", e))?;
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
            .await
            .map_err(|e| ballista_error("memq cluster scheduler", e))?;
    eprintln!(
        "memq cluster scheduler listening on df://{host}:{}",
        addr.port()
    );
    tokio::select! {
        r = start_grpc_service_with_listener(listener, scheduler) => {
            r.map_err(|e| ballista_error("memq cluster scheduler", e))
        }
        _ = shutdown_signal() => {
            eprintln!("memq cluster scheduler stopped");
            Ok(())
        }
    }
}
