//! memq's integration tests, one binary by topic. Shared helpers and the datasets made from
//! the samples live in [`common`].

mod common;

mod attribution;
mod capabilities;
mod cli;
#[cfg(feature = "cluster")]
mod cluster;
mod crash;
mod cross_rank;
mod derived_oracle;
mod diagnosis;
mod faults;
mod formats;
mod gen_truth;
mod gen_truth_more;
mod help_docs;
mod hostile;
mod ingest_g3;
mod ingest_memscope;
mod ingest_mixed;
mod memscope_26;
mod memscope_memory;
mod memscope_oom_steps;
mod profiler_layouts;
mod ranks;
mod repl_pty;
mod report;
mod run_export_todb;
mod serve;
mod serve_browser;
mod slt;
mod snapshot_decoder;
mod snapshot_derived;
mod snapshot_library;
mod snapshot_newest;
mod stages;
mod steps_captures;
mod stored;
mod traces;
