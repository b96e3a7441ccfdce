//! memq on an Apache DataFusion Ballista cluster (docs/scale-out.md): a scheduler and
//! executors with every memq function in their registries, and the client side, a
//! `SessionContext` whose statements run on the cluster.
//!
//! - [`run_scheduler`]: the scheduler, in process; its sessions decode logical plans that name
//!   memq's functions.
//! - [`run_executor`]: an executor, in process; it decodes physical plans that name them, and
//!   checks each stage before it runs it ([`stage_check`]: orders a shuffle lost are restored,
//!   a stage partitioned on other keys than an operator needs is refused).
//! - The scheduler's sessions add one physical rule ([`union_inputs`]): UNION inputs every task
//!   would read whole get a stage of their own.
//! - [`connect`]: the client: the engine's session upgraded for Ballista. Before a plan goes to
//!   the scheduler, the calls of checked table functions are inlined
//!   ([`memq_engine::calls::inline_checked_calls`]) and scans of small in-memory results
//!   (`summarize(...)`) are sent as values ([`client`]).
//!
//! The dataset must be readable at the same path by every executor (and the scheduler, which
//! lists the files): the Parquet tables travel in the plan by path.

mod client;
mod executor;
mod scheduler;
mod stage_check;
mod union_inputs;

pub use client::connect;
pub use executor::{run_executor, ExecutorOptions};
pub use scheduler::run_scheduler;

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::physical_plan::{replace_children_if_necessary, ExecutionPlan};
use memq_core::error::{MemqError, Result};

/// The scheduler's port when a `df://` URL names none (Ballista's default).
pub const DEFAULT_SCHEDULER_PORT: u16 = 50050;

/// How long connecting to the scheduler may take before it is an error.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A scheduler's address from `df://HOST[:PORT]` (also `HOST:PORT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerUrl {
    pub host: String,
    pub port: u16,
}

impl SchedulerUrl {
    pub fn parse(url: &str) -> Result<SchedulerUrl> {
        let usage = || {
            MemqError::Usage(format!(
                "{url}: not a cluster address; give the scheduler as df://HOST:PORT"
            ))
        };
        let rest = url.trim();
        let rest = match rest.split_once("://") {
            Some(("df", r)) => r,
            Some(_) => return Err(usage()),
            None => rest,
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') {
            return Err(usage());
        }
        // `[::1]:50050` or `host:50050` or `host`.
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(usage)?;
            match after.strip_prefix(':') {
                Some(p) => (h.to_string(), Some(p)),
                None if after.is_empty() => (h.to_string(), None),
                None => return Err(usage()),
            }
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (rest.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(usage());
        }
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| usage())?,
            None => DEFAULT_SCHEDULER_PORT,
        };
        Ok(SchedulerUrl { host, port })
    }

    /// `http://HOST:PORT`, the gRPC endpoint.
    pub fn http(&self) -> String {
        format!("http://{}", self.authority())
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for SchedulerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "df://{}", self.authority())
    }
}

/// gRPC (hyper) writes to its sockets with `writev`, which raises SIGPIPE when the peer has
/// closed the connection. `memq` restores SIGPIPE's default action at start so that
/// `memq … | head` ends quietly; a process that talks to the cluster must ignore it again, or
/// the first client that hangs up ends it: a scheduler died without a word when the executor's
/// connection check closed, and the executor's registration was then refused (exit 141).
/// Called by every role before its first connection ([`check_scheduler`], [`run_scheduler`]).
pub(crate) fn ignore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN is async-signal-safe and process-wide;
    // no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Connects to the scheduler's gRPC endpoint within [`CONNECT_TIMEOUT`]: an error naming the
/// URL when nothing answers there.
pub(crate) async fn check_scheduler(url: &SchedulerUrl) -> Result<()> {
    ignore_sigpipe();
    use ballista_core::extension::SessionConfigExt;
    // The endpoint exactly as Ballista's executor and client build it (same timeouts and
    // HTTP/2 windows), so that a failure here is the one they would hit, with its cause.
    let ballista = ballista_core::utils::default_config_producer().ballista_config();
    let config = ballista_core::utils::GrpcClientConfig::from(&ballista);
    let unreachable = |why: String| {
        MemqError::Query(format!(
            "cannot reach the memq cluster scheduler at {url}: {why} (is `memq cluster scheduler` running there?)"
        ))
    };
    let endpoint = ballista_core::utils::create_grpc_client_endpoint(url.http(), Some(&config))
        .map_err(|e| unreachable(error_chain(&e)))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
        Ok(Ok(_channel)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(error_chain(&e))),
        Err(_) => Err(unreachable(format!(
            "no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// An error with its sources, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// A Ballista error as memq's.
pub(crate) fn ballista_error(what: &str, e: ballista_core::error::BallistaError) -> MemqError {
    MemqError::Query(format!("{what}: {e}"))
}

/// Resolves when the process gets SIGINT (Ctrl-C) or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `node` with each child for which `wrap` returns a new plan replaced by it (the plan rules of
/// [`stage_check`] and [`union_inputs`] put an operator above some children of a node).
pub(crate) fn wrap_children(
    node: Arc<dyn ExecutionPlan>,
    mut wrap: impl FnMut(
        usize,
        &Arc<dyn ExecutionPlan>,
    ) -> datafusion::error::Result<Option<Arc<dyn ExecutionPlan>>>,
) -> datafusion::error::Result<Transformed<Arc<dyn ExecutionPlan>>> {
    let mut changed = false;
    let mut children = Vec::new();
    for (i, child) in node.children().into_iter().enumerate() {
        match wrap(i, child)? {
            Some(wrapped) => {
                changed = true;
                children.push(wrapped);
            }
            None => children.push(Arc::clone(child)),
        }
    }
    if changed {
        Ok(Transformed::yes(replace_children_if_necessary(
            node, children,
        )?))
    } else {
        Ok(Transformed::no(node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_urls_are_parsed() {
        let u = SchedulerUrl::parse("df://node1:6000").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("node1", 6000));
        assert_eq!(u.http(), "http://node1:6000");
        assert_eq!(SchedulerUrl::parse("df://node1").unwrap().port, 50050);
        assert_eq!(SchedulerUrl::parse("127.0.0.1:7").unwrap().port, 7);
        let v6 = SchedulerUrl::parse("df://[::1]:9").unwrap();
        assert_eq!(v6.to_string(), "df://[::1]:9");
        assert!(SchedulerUrl::parse("http://x:1").is_err());
        assert!(SchedulerUrl::parse("df://x:notaport").is_err());
        assert!(SchedulerUrl::parse("df://").is_err());
    }
}
