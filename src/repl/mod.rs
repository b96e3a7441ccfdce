//! The interactive shell of `memq [INPUT...]` (docs/repl.md): rustyline with multi-line
//! statements ending in `;`, persistent history in the XDG state dir, Tab completion, meta
//! commands, parameters, and Ctrl-C that cancels the running query but keeps the session.

pub mod completer;
pub mod input;
pub mod meta;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use datafusion::prelude::SessionContext;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{CompletionType, Config, Editor};

use crate::exec::{self, PrintOptions, StatementResult};
use crate::open::Opened;
use crate::output::{BytesDisplay, Format};
use crate::params::Params;
use memq_core::error::{MemqError, Result};
use memq_engine::Engine;

use completer::{MemqHelper, Vocabulary};
use meta::Next;

/// Display settings changed by meta commands.
#[derive(Debug, Clone)]
pub struct Settings {
    pub format: Format,
    pub timing: bool,
    pub bytes: BytesDisplay,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            format: Format::Table,
            timing: false,
            bytes: BytesDisplay::Human,
        }
    }
}

/// How the REPL is started.
#[derive(Debug, Clone, Default)]
pub struct ReplOptions {
    /// The history file; `None` keeps no history.
    pub history: Option<PathBuf>,
}

impl ReplOptions {
    /// History in `$XDG_STATE_HOME/memq/history`.
    pub fn standard() -> ReplOptions {
        ReplOptions {
            history: Some(memq_ingest::cache::state_dir().join("history")),
        }
    }
}

/// The state of one REPL session.
pub struct Session {
    opened: Opened,
    /// Where queries run (replaced after a cancel, see [`Session::execute`]).
    queries: Option<tokio::runtime::Runtime>,
    pub settings: Settings,
    pub params: Params,
    /// Where the next result goes instead of the terminal (`\o FILE`).
    pub redirect: Option<PathBuf>,
    vocab: Arc<RwLock<Vocabulary>>,
    /// Statement text not yet ended by `;`.
    buffer: String,
}

/// How one statement ended.
enum Outcome {
    Done(StatementResult, Duration),
    Failed(MemqError),
    Cancelled,
}

/// A runtime of its own for queries. The session's runtime then stays idle while a query runs,
/// so it sees Ctrl-C at once even when every query thread is deep in a long computation (a
/// DataFusion operator may run for seconds between two yields).
fn query_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("memq-query")
        // Deep expressions recurse in the planner (issue 13, finding 2).
        .thread_stack_size(64 << 20)
        .build()
        .map_err(|e| MemqError::Query(format!("cannot start the query runtime: {e}")))
}

/// Plans and runs one statement as a task on `queries`, so that Ctrl-C (SIGINT, caught while
/// the query runs; at the prompt rustyline reads it as a key) can abort it. A spinner with the
/// elapsed time appears on stderr once the query has run for a second.
async fn run_cancellable(
    queries: &tokio::runtime::Handle,
    ctx: SessionContext,
    sql: String,
    params: Params,
) -> Outcome {
    let start = Instant::now();
    let mut task = queries.spawn(async move {
        let mut results = exec::run(&ctx, &sql, &params, "").await?;
        results
            .pop()
            .ok_or_else(|| MemqError::Query("no statement".into()))
    });
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let spinner_due = tokio::time::sleep(Duration::from_secs(1));
    tokio::pin!(spinner_due);
    let mut spinner: Option<ProgressBar> = None;
    let outcome = loop {
        tokio::select! {
            joined = &mut task => {
                break match joined {
                    Ok(Ok(r)) => Outcome::Done(r, start.elapsed()),
                    Ok(Err(e)) => Outcome::Failed(e),
                    Err(e) if e.is_cancelled() => Outcome::Cancelled,
                    Err(e) => Outcome::Failed(MemqError::Query(format!("the query failed: {e}"))),
                };
            }
            _ = &mut ctrl_c => {
                task.abort();
                break Outcome::Cancelled;
            }
            _ = &mut spinner_due, if spinner.is_none() => {
                let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                pb.set_style(
                    ProgressStyle::with_template("{spinner} running {elapsed} (Ctrl-C cancels)")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                pb.enable_steady_tick(Duration::from_millis(100));
                spinner = Some(pb);
            }
        }
    };
    if let Some(pb) = spinner {
        pb.finish_and_clear();
    }
    outcome
}

impl Session {
    pub async fn new(opened: Opened) -> Result<Session> {
        let vocab = Vocabulary::load(&opened.engine.ctx).await;
        Ok(Session {
            opened,
            queries: Some(query_runtime()?),
            settings: Settings::default(),
            params: Params::new(),
            redirect: None,
            vocab: Arc::new(RwLock::new(vocab)),
            buffer: String::new(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.opened.engine
    }

    /// True while a statement is being continued on further lines.
    pub fn continuing(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Forgets a partly typed statement (Ctrl-C at the prompt).
    pub fn discard_input(&mut self) {
        self.buffer.clear();
    }

    async fn refresh_vocabulary(&self) {
        let v = Vocabulary::load(&self.engine().ctx).await;
        if let Ok(mut w) = self.vocab.write() {
            *w = v;
        }
    }

    /// Runs one complete statement and prints (or writes) its result; errors are printed and the
    /// session goes on.
    pub async fn execute(&mut self, sql: &str) {
        let handle = match &self.queries {
            Some(rt) => rt.handle().clone(),
            None => match query_runtime() {
                Ok(rt) => {
                    let h = rt.handle().clone();
                    self.queries = Some(rt);
                    h
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return;
                }
            },
        };
        let outcome = run_cancellable(
            &handle,
            self.engine().ctx.clone(),
            sql.to_string(),
            self.params.clone(),
        )
        .await;
        if matches!(outcome, Outcome::Cancelled) {
            // The aborted task stops at its next yield, which a long operator may delay: leave
            // its threads to finish in the background and run the next queries on fresh ones.
            if let Some(rt) = self.queries.take() {
                rt.shutdown_background();
            }
        }
        match outcome {
            Outcome::Done(result, elapsed) => {
                if let Err(e) = self.show(&result) {
                    eprintln!("error: {e}");
                }
                if !result.has_columns() {
                    self.refresh_vocabulary().await;
                }
                if self.settings.timing {
                    println!("Time: {:.3} ms", elapsed.as_secs_f64() * 1000.0);
                }
            }
            Outcome::Failed(e) => eprintln!("error: {e}"),
            Outcome::Cancelled => eprintln!("Query cancelled."),
        }
    }

    fn show(&mut self, result: &StatementResult) -> Result<()> {
        if !result.has_columns() {
            println!("OK");
            return Ok(());
        }
        if let Some(path) = self.redirect.take() {
            exec::write(result, &path)?;
            return Ok(());
        }
        PrintOptions {
            format: self.settings.format,
            bytes: self.settings.bytes,
        }
        .print(result)
    }

    /// Handles one input line: a meta command (when no statement is pending), or more statement
    /// text, running every statement it completes. Returns the statements and meta commands it
    /// ran, for the history.
    pub async fn feed_line(&mut self, line: &str, depth: usize) -> (Next, Vec<String>) {
        let mut done = Vec::new();
        if self.buffer.is_empty() && line.trim_start().starts_with('\\') {
            done.push(line.trim().to_string());
            return match self.meta(line, depth).await {
                Ok(next) => (next, done),
                Err(e) => {
                    eprintln!("error: {e}");
                    (Next::Continue, done)
                }
            };
        }
        self.buffer.push_str(line);
        self.buffer.push('\n');
        for stmt in input::take_statements(&mut self.buffer) {
            self.execute(&stmt).await;
            done.push(format!("{stmt};"));
        }
        (Next::Continue, done)
    }

    /// Runs a script (`\i FILE`): its lines as if typed.
    pub async fn run_script(&mut self, text: &str, depth: usize) -> Result<Next> {
        let saved = std::mem::take(&mut self.buffer);
        let mut next = Next::Continue;
        for line in text.lines() {
            let (n, _) = self.feed_line(line, depth).await;
            if n == Next::Quit {
                next = Next::Quit;
                break;
            }
        }
        let rest = std::mem::replace(&mut self.buffer, saved);
        if !input::is_blank(&rest) {
            // A last statement without `;` still runs.
            self.execute(rest.trim()).await;
        }
        Ok(next)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(rt) = self.queries.take() {
            rt.shutdown_background();
        }
    }
}

/// Runs the REPL until `\q` or Ctrl-D.
pub async fn run(opened: Opened, opts: ReplOptions) -> Result<()> {
    let config = Config::builder()
        .completion_type(CompletionType::List)
        .auto_add_history(false)
        .max_history_size(5000)
        .map_err(|e| MemqError::Query(format!("REPL: {e}")))?
        .build();
    let mut rl: Editor<MemqHelper, FileHistory> =
        Editor::with_config(config).map_err(|e| MemqError::Query(format!("REPL: {e}")))?;
    let mut session = Session::new(opened).await?;
    rl.set_helper(Some(MemqHelper::new(session.vocab.clone())));
    if let Some(h) = &opts.history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if h.exists() {
            if let Err(e) = rl.load_history(h) {
                eprintln!("memq: cannot read the history {}: {e}", h.display());
            }
        }
    }
    let m = &session.engine().manifest;
    println!(
        "memq {} on {} ({} source{}). \\? for help, \\q to quit.",
        env!("CARGO_PKG_VERSION"),
        session.engine().dataset.display(),
        m.sources.len(),
        if m.sources.len() == 1 { "" } else { "s" }
    );
    loop {
        let prompt = if session.continuing() {
            "   ...> "
        } else {
            "memq> "
        };
        match rl.readline(prompt) {
            Ok(line) => {
                let (next, done) = session.feed_line(&line, 0).await;
                for entry in done {
                    let _ = rl.add_history_entry(entry);
                }
                if let Some(h) = &opts.history {
                    if let Err(e) = rl.append_history(h) {
                        eprintln!("memq: cannot write the history {}: {e}", h.display());
                    }
                }
                if next == Next::Quit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C at the prompt: drop the statement being typed, keep the session.
                session.discard_input();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(MemqError::Query(format!("REPL: {e}"))),
        }
    }
    Ok(())
}
