//! The interactive shell of `memq [INPUT...]` (docs/repl.md): rustyline with multi-line
//! statements ending in `;`, persistent history in the XDG state dir, Tab completion, meta
//! commands, parameters, and Ctrl-C that cancels the running query but keeps the session.

pub mod completer;
mod display;
pub mod input;
pub mod meta;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{CompletionType, Config, Editor};

use crate::api::{self, Dataset};
use crate::exec::{self, PrintOptions};
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
    /// Rows the table view shows at most (`\set maxrows N`, `--maxrows N`); 0 shows all.
    pub max_rows: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            format: Format::Table,
            timing: false,
            bytes: BytesDisplay::Human,
            max_rows: crate::output::DEFAULT_MAX_ROWS,
        }
    }
}

/// How the REPL is started.
#[derive(Debug, Clone, Default)]
pub struct ReplOptions {
    /// The history file; `None` keeps no history.
    pub history: Option<PathBuf>,
    /// `--maxrows N`.
    pub max_rows: Option<usize>,
    /// Stop at the first error (`--bail`/`--no-bail`); default: when stdin is not a terminal.
    pub bail: Option<bool>,
    /// Parameters set before the first statement (`memq --param NAME=VALUE INPUT`).
    pub params: Params,
}

impl ReplOptions {
    /// History in `$XDG_STATE_HOME/memq/history`.
    pub fn standard() -> ReplOptions {
        ReplOptions {
            history: Some(memq_ingest::cache::state_dir().join("history")),
            max_rows: None,
            bail: None,
            params: Params::new(),
        }
    }
}

/// The state of one REPL session.
pub struct Session {
    dataset: Dataset,
    /// Where queries run (replaced after a cancel, see [`Session::execute`]).
    queries: Option<tokio::runtime::Runtime>,
    pub settings: Settings,
    pub params: Params,
    /// Where the next result goes instead of the terminal (`\o FILE`).
    pub redirect: Option<PathBuf>,
    vocab: Arc<RwLock<Vocabulary>>,
    /// Statement text not yet ended by `;`.
    buffer: String,
    /// Set when a statement or meta command failed (for `--bail` on piped input).
    pub last_error: bool,
    /// The last statement run (`\chart` runs it again).
    last_sql: Option<String>,
}

/// What a statement's task did.
struct Ran {
    /// It returned no columns (DDL): "OK" is printed and the names are loaded again.
    ddl: bool,
    /// The `\o` file it did not use (DDL leaves it for the next result).
    redirect: Option<PathBuf>,
    stopped: bool,
}

/// How one statement ended.
enum Outcome {
    Done(Ran, Duration),
    Failed(MemqError),
    Cancelled,
}

/// stdout, written with the spinner hidden while text goes out; notes that output began.
struct Screen(ProgressBar, Arc<std::sync::atomic::AtomicBool>);

impl std::io::Write for Screen {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.store(true, std::sync::atomic::Ordering::Relaxed);
        self.0.suspend(|| {
            let mut out = std::io::stdout();
            out.write_all(buf)?;
            out.flush()
        })?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}

/// A runtime of its own for queries. The session's runtime then stays idle while a query runs,
/// so it sees Ctrl-C at once even when every query thread is deep in a long computation (a
/// DataFusion operator may run for seconds between two yields).
fn query_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("memq-query")
        // Deep expressions (a long `OR` chain) recurse in the planner: big stacks let them plan.
        .thread_stack_size(64 << 20)
        .build()
        .map_err(|e| MemqError::Query(format!("cannot start the query runtime: {e}")))
}

/// Runs a statement and prints (or writes) its result batch by batch, on the query runtime.
#[allow(clippy::too_many_arguments)]
async fn run_and_show(
    session: api::Session,
    sql: String,
    params: Params,
    print: PrintOptions,
    mut redirect: Option<PathBuf>,
    screen: ProgressBar,
    wrote: Arc<std::sync::atomic::AtomicBool>,
    stop: Arc<exec::Stop>,
) -> Result<Ran> {
    let mut statements = session.statements(&sql, &params, "")?;
    let mut ran = Ran {
        ddl: false,
        redirect: None,
        stopped: false,
    };
    while let Some(r) = statements.next().await {
        let mut r = r?;
        if !r.has_columns() {
            ran.ddl = true;
            continue;
        }
        ran.ddl = false;
        let shown = match redirect.take() {
            Some(path) => exec::write(&mut r, &path, &stop).await?,
            None => {
                let out = std::io::BufWriter::with_capacity(
                    1 << 16,
                    Screen(screen.clone(), wrote.clone()),
                );
                print.print_to(&mut r, out, &stop).await?
            }
        };
        if shown.stopped() {
            ran.stopped = true;
            break;
        }
    }
    ran.redirect = redirect;
    Ok(ran)
}

/// Plans and runs one statement as a task on `queries`, so that Ctrl-C (SIGINT, caught while
/// the query runs; at the prompt rustyline reads it as a key) can stop it: printing stops at
/// once, and a computation still running is aborted. A spinner with the elapsed time appears
/// on stderr once the query has run for a second.
async fn run_cancellable(
    queries: &tokio::runtime::Handle,
    session: api::Session,
    sql: String,
    params: Params,
    print: PrintOptions,
    redirect: Option<PathBuf>,
) -> Outcome {
    let start = Instant::now();
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    spinner.set_style(
        ProgressStyle::with_template("{spinner} running {elapsed} (Ctrl-C cancels)")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let stop = exec::Stop::new();
    let wrote = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut task = queries.spawn(run_and_show(
        session,
        sql,
        params,
        print,
        redirect,
        spinner.clone(),
        wrote.clone(),
        stop.clone(),
    ));
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let spinner_due = tokio::time::sleep(Duration::from_secs(1));
    tokio::pin!(spinner_due);
    let mut spinning = false;
    let joined = |j: std::result::Result<Result<Ran>, tokio::task::JoinError>| match j {
        Ok(Ok(r)) => Outcome::Done(r, start.elapsed()),
        Ok(Err(e)) => Outcome::Failed(e),
        Err(e) if e.is_cancelled() => Outcome::Cancelled,
        Err(e) => Outcome::Failed(MemqError::Query(format!("the query failed: {e}"))),
    };
    let outcome = loop {
        tokio::select! {
            j = &mut task => break joined(j),
            _ = &mut ctrl_c => {
                // Printing stops at its next batch; give it a moment to end the table, then
                // abort whatever still computes.
                stop.stop();
                match tokio::time::timeout(Duration::from_millis(500), &mut task).await {
                    Ok(Ok(Ok(_))) => break Outcome::Cancelled,
                    Ok(j) => break match joined(j) {
                        Outcome::Done(..) => Outcome::Cancelled,
                        other => other,
                    },
                    Err(_) => {
                        task.abort();
                        break Outcome::Cancelled;
                    }
                }
            }
            _ = &mut spinner_due, if !spinning => {
                spinning = true;
                // Rows already streaming as text (csv, json, ...): no spinner between them.
                if print.format != Format::Table
                    && wrote.load(std::sync::atomic::Ordering::Relaxed)
                {
                    continue;
                }
                spinner.set_draw_target(ProgressDrawTarget::stderr());
                spinner.enable_steady_tick(Duration::from_millis(100));
            }
        }
    };
    spinner.finish_and_clear();
    outcome
}

impl Session {
    pub async fn new(dataset: Dataset) -> Result<Session> {
        let vocab = Vocabulary::load(&dataset.engine().ctx).await;
        Ok(Session {
            dataset,
            queries: Some(query_runtime()?),
            settings: Settings::default(),
            params: Params::new(),
            redirect: None,
            vocab: Arc::new(RwLock::new(vocab)),
            buffer: String::new(),
            last_error: false,
            last_sql: None,
        })
    }

    pub fn engine(&self) -> &Engine {
        self.dataset.engine()
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
        self.last_sql = Some(sql.to_string());
        let handle = match &self.queries {
            Some(rt) => rt.handle().clone(),
            None => match query_runtime() {
                Ok(rt) => {
                    let h = rt.handle().clone();
                    self.queries = Some(rt);
                    h
                }
                Err(e) => {
                    crate::agent::report_error("error: ", &e);
                    return;
                }
            },
        };
        let print = PrintOptions {
            format: self.settings.format,
            bytes: self.settings.bytes,
            max_rows: self.settings.max_rows,
            width: exec::terminal_width(),
        };
        let outcome = run_cancellable(
            &handle,
            self.dataset.session(),
            sql.to_string(),
            self.params.clone(),
            print,
            self.redirect.take(),
        )
        .await;
        if matches!(outcome, Outcome::Cancelled) {
            // An aborted task stops at its next yield, which a long operator may delay: leave
            // its threads to finish in the background and run the next queries on fresh ones.
            if let Some(rt) = self.queries.take() {
                rt.shutdown_background();
            }
        }
        match outcome {
            Outcome::Done(ran, elapsed) => {
                if ran.ddl {
                    println!("OK");
                    self.refresh_vocabulary().await;
                }
                self.redirect = ran.redirect;
                if ran.stopped {
                    eprintln!("Query cancelled.");
                }
                if self.settings.timing {
                    println!("Time: {:.3} ms", elapsed.as_secs_f64() * 1000.0);
                }
            }
            Outcome::Failed(e) => {
                self.last_error = true;
                crate::agent::report_error("error: ", &e)
            }
            Outcome::Cancelled => eprintln!("Query cancelled."),
        }
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
                    self.last_error = true;
                    crate::agent::report_error("error: ", &e);
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

/// Runs the statements and meta commands of a script file (`memq INPUT -f FILE`) as `\i`
/// runs them, without a prompt or banner: it stops at the first failing statement unless
/// `opts.bail` is `Some(false)` (`--no-bail`), which goes on and exits 1 at the end.
pub async fn run_file(dataset: Dataset, opts: ReplOptions, origin: &str, text: &str) -> Result<()> {
    let mut session = Session::new(dataset).await?;
    session.params = opts.params.clone();
    if let Some(n) = opts.max_rows {
        session.settings.max_rows = n;
    }
    let bail = opts.bail.unwrap_or(true);
    let mut failed = false;
    let mut statements = 0;
    let stopped = |n: usize| {
        MemqError::Query(format!(
            "{origin}: statement {n} failed (its error is above); --no-bail goes on"
        ))
    };
    for line in text.lines() {
        let (next, done) = session.feed_line(line, 0).await;
        statements += done.len();
        if bail && session.last_error {
            return Err(stopped(statements.max(1)));
        }
        failed |= session.last_error;
        if next == Next::Quit {
            return finish_script(failed);
        }
    }
    let rest = std::mem::take(&mut session.buffer);
    if !input::is_blank(&rest) {
        session.execute(rest.trim()).await;
        if bail && session.last_error {
            return Err(stopped(statements + 1));
        }
        failed |= session.last_error;
    }
    finish_script(failed)
}

fn finish_script(failed: bool) -> Result<()> {
    if failed {
        return Err(MemqError::Query(
            "a statement of the script failed (--no-bail went on to the end; its error is above)"
                .into(),
        ));
    }
    Ok(())
}

/// Runs the REPL until `\q` or Ctrl-D.
pub async fn run(dataset: Dataset, opts: ReplOptions) -> Result<()> {
    let config = Config::builder()
        .completion_type(CompletionType::List)
        .auto_add_history(false)
        .max_history_size(5000)
        .map_err(|e| MemqError::Query(format!("REPL: {e}")))?
        .build();
    let mut rl: Editor<MemqHelper, FileHistory> =
        Editor::with_config(config).map_err(|e| MemqError::Query(format!("REPL: {e}")))?;
    let mut session = Session::new(dataset).await?;
    session.params = opts.params.clone();
    if let Some(n) = opts.max_rows {
        session.settings.max_rows = n;
    }
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
    use std::io::IsTerminal;
    let interactive = std::io::stdin().is_terminal();
    let bail = opts.bail.unwrap_or(!interactive);
    let banner = banner(session.engine()).await;
    // Results only on stdout when it is not a terminal session (a script's output).
    if interactive && std::io::stdout().is_terminal() {
        println!("{}", meta::fit_text(&banner, crate::exec::terminal_width()));
    } else {
        eprintln!("{banner}");
    }
    let history = opts.history.as_ref().filter(|_| interactive);
    // A statement failed while a script went on (`--no-bail`): the exit code says so at the end.
    let mut failed = false;
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
                if let Some(h) = history {
                    if let Err(e) = rl.append_history(h) {
                        eprintln!("memq: cannot write the history {}: {e}", h.display());
                    }
                }
                if bail && session.last_error {
                    return Err(bailed());
                }
                failed |= session.last_error;
                if next == Next::Quit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C at the prompt: drop the statement being typed, keep the session.
                session.discard_input();
            }
            Err(ReadlineError::Eof) => {
                // The last statement of a script may lack its `;`.
                let rest = std::mem::take(&mut session.buffer);
                if !input::is_blank(&rest) {
                    session.execute(rest.trim()).await;
                    if bail && session.last_error {
                        return Err(bailed());
                    }
                    failed |= session.last_error;
                }
                break;
            }
            Err(e) => return Err(MemqError::Query(format!("REPL: {e}"))),
        }
    }
    finish_script(failed && !interactive)
}

/// The banner: the dataset, what it holds, the analyses to start with.
async fn banner(engine: &Engine) -> String {
    let m = &engine.manifest;
    let mut out = format!(
        "memq {} on {} ({} source{}). \\? for help, \\q to quit.",
        env!("CARGO_PKG_VERSION"),
        engine.dataset.display(),
        m.sources.len(),
        if m.sources.len() == 1 { "" } else { "s" }
    );
    let holds = crate::guide::holdings(engine).await;
    if holds.is_empty() {
        out.push_str("\nThe dataset holds no rows.");
        return out;
    }
    out.push_str(&format!("\nIt holds {}.", holds.join("; ")));
    let analyses = engine.analyses();
    let starters = crate::guide::starters(m, analyses);
    if let Some(first) = starters.first() {
        let names = match starters.split_last() {
            Some((last, init)) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
            _ => first.clone(),
        };
        let listed = analyses.iter().filter(|a| !a.private).count();
        out.push_str(&format!(
            "\nStart with {names} (SELECT * FROM {first};); \\dv lists the {listed} analyses by source."
        ));
    }
    // The report reads msMemScope dumps and snapshots.
    if ["memscope", "snapshot"]
        .iter()
        .any(|f| crate::guide::has_format_data(m, f))
    {
        out.push_str(&format!(
            "\nThe diagnosis: `memq report {} -o report.html` (or .md, .json).",
            engine.dataset.display()
        ));
    }
    out
}

/// The error that ends a script at its first failing statement. In agent mode that statement's
/// JSON line is the only one: the error is empty, which `agent::report_error` does not print.
fn bailed() -> MemqError {
    if crate::agent::active() {
        return MemqError::Query(String::new());
    }
    MemqError::Query(
        "stopped at the first error (the input is not a terminal; --no-bail goes on)".into(),
    )
}
