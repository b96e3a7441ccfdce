//! memq: a columnar SQL engine over accelerator memory dumps. This crate is the library API,
//! the command line, the shell and the report; the formats and the engine are the crates under
//! `crates/` (docs/architecture.md): memq-core (errors, catalog, dataset), memq-memscope,
//! memq-snapshot, memq-profiler and memq-trace (the formats), memq-ingest (inputs into a
//! dataset), memq-engine (the DataFusion session), memq-cluster (Ballista).
//!
//! [`api`] is the library API the command line ([`cli`]), the shell and the Python module call.
//!
//! Here: [`catalog`] (the formats this binary knows), `open` (an INPUT as an engine, behind
//! [`api::Dataset::open`]), [`exec`] (the one statement path of `memq sql`, `memq run` and the shell), [`output`]
//! (printers and writers), [`params`], [`run`], [`export`], [`repl`].

pub mod agent;
pub mod api;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod exec;
pub mod export;
pub mod guide;
mod open;
pub mod output;
pub mod params;
pub mod repl;
pub mod run;
pub mod serve;
pub mod sql_error;

use std::sync::Arc;

pub use memq_core::error;
use memq_core::format::Catalog;
/// The diagnosis: `memq report` and `memq check` (crate memq-report).
pub use memq_report as report;

/// Every format this memq reads, in detection order: snapshot pickles (recognised by
/// extension or first byte), Ascend profiler memory CSVs (by folder or header), torch.profiler
/// Chrome traces (by name in a folder; by content, or gzip named `.json.gz`, named directly),
/// then msMemScope dumps (which take any other file named directly).
pub fn catalog() -> Catalog {
    Catalog::new(vec![
        Arc::new(memq_snapshot::Snapshot),
        Arc::new(memq_profiler::Profiler),
        Arc::new(memq_trace::Trace),
        Arc::new(memq_memscope::Memscope),
    ])
}

/// Every canned analysis of every format (the library is built in: parsed once per process;
/// the shell asks for it after every statement).
pub fn analyses() -> &'static [memq_engine::library::Analysis] {
    static LIBRARY: std::sync::OnceLock<Vec<memq_engine::library::Analysis>> =
        std::sync::OnceLock::new();
    LIBRARY.get_or_init(|| memq_engine::library::analyses(&catalog().sql_files()))
}

/// Every SQL function memq adds, with its docs.
pub fn functions() -> Vec<memq_core::format::Function> {
    memq_engine::all_functions(&catalog())
}

#[cfg(test)]
mod tests {
    /// The library is built in, so it is checked here rather than at each open: every file
    /// parses, and no analysis reads itself through others (a cycle would recurse when a view
    /// is planned). The order must also put each analysis after those it reads.
    #[test]
    fn library_is_acyclic() {
        let all = super::analyses();
        let names: Vec<&str> = all.iter().map(|a| a.name.as_str()).collect();
        let order = memq_engine::library::topological(all).expect("no cycle");
        assert_eq!(order.len(), all.len());
        let place = |n: &str| order.iter().position(|a| a.name == n).unwrap();
        let mut edges = 0;
        for a in all {
            for d in memq_engine::library::dependencies(a, &names).unwrap() {
                assert!(place(&d) < place(&a.name), "{} before {}", d, a.name);
                edges += 1;
            }
        }
        // The library builds on itself (oom_findings reads step_peaks, …).
        assert!(edges > 10, "{edges} dependencies");
    }

    /// Each format's part of a `@union` view declares the union's columns, in order, so that
    /// `UNION ALL` lines them up by meaning and not only by position; every format answers
    /// `source_capabilities`.
    #[test]
    fn union_parts_match_their_view() {
        let all = super::analyses();
        let unions: Vec<_> = all.iter().filter(|a| a.union).collect();
        assert!(unions.iter().any(|u| u.name == "source_capabilities"));
        for u in unions {
            let shape = |a: &memq_engine::library::Analysis| -> Vec<(String, String)> {
                a.columns
                    .iter()
                    .map(|c| (c.name.clone(), c.sql_type.clone()))
                    .collect()
            };
            let parts: Vec<_> = all
                .iter()
                .filter(|a| a.part_of.as_deref() == Some(u.name.as_str()))
                .collect();
            for p in &parts {
                assert_eq!(shape(p), shape(u), "{} against {}", p.path, u.path);
                assert!(p.private, "{}: a part is @private", p.path);
                assert!(u.body.contains(&format!("SELECT * FROM {}", p.name)));
            }
            let families: std::collections::BTreeSet<&str> = parts
                .iter()
                .filter_map(|p| p.path.split('/').next())
                .collect();
            // what an input can answer is every format's to say; the findings are the rules
            // there are (the engine's own reads any input's table `sources`)
            let expected: &[&str] = match u.name.as_str() {
                "source_capabilities" => &["memscope", "profiler", "snapshot", "trace"],
                _ => &["common", "memscope", "snapshot", "trace"],
            };
            assert_eq!(
                families.into_iter().collect::<Vec<_>>(),
                expected,
                "the parts of {}",
                u.name
            );
        }
    }

    /// Every checked parameter names a fact its own format declares (a `[one of FACT]`,
    /// a moment's `range`, a window's `peak` when it is narrowed `per` a parameter), so that no
    /// check fails at a user's call for want of a fact.
    #[test]
    fn every_check_names_a_fact_of_its_format() {
        use memq_engine::library::CheckKind;
        let facts = super::catalog().facts();
        let has =
            |format: &str, name: &str| facts.iter().any(|(f, x)| *f == format && x.name == name);
        let mut checked = 0;
        for a in super::analyses() {
            for p in &a.params {
                let Some(c) = &p.check else { continue };
                checked += 1;
                let needs: Vec<&str> = match &c.kind {
                    CheckKind::OneOf { fact, .. } => vec![fact.as_str()],
                    CheckKind::Moment => vec!["range"],
                    CheckKind::WindowStart | CheckKind::WindowEnd => vec!["range", "peak"],
                };
                for n in needs {
                    assert!(
                        has(a.format(), n),
                        "{}: {}: no fact {n} in {}",
                        a.path,
                        p.name,
                        a.format()
                    );
                }
            }
        }
        assert!(checked >= 16, "{checked} checked parameters");
    }
}
