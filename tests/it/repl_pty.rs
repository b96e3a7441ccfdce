//! The REPL (`memq INPUT`) driven through a real pseudo-terminal: multi-line statements, Tab
//! completion, meta commands, `\o` to Parquet, Ctrl-C during a long query, errors, history
//! across sessions; and the auto-ingest cache of raw inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use memq::repl::completer::{Vocabulary, KEYWORDS};
use memq_engine::Engine;
use rexpect::session::{spawn_with_options, Options, PtySession};
use tempfile::TempDir;

const PROMPT: &str = "memq> ";

/// A dataset of the 4 real samples plus private XDG state and cache folders.
struct Fixture {
    dir: TempDir,
    dataset: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = TempDir::new().unwrap();
        let dataset = dir.path().join("real.memq");
        let out = Command::new(env!("CARGO_BIN_EXE_memq"))
            .arg("ingest")
            .arg(real_fixture("memscope/real"))
            .arg("-o")
            .arg(&dataset)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Fixture { dir, dataset }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    fn command(&self, args: &[&Path]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_memq"));
        c.args(args)
            .env("XDG_STATE_HOME", self.state())
            .env("XDG_CACHE_HOME", self.cache())
            .env("TERM", "xterm")
            .env_remove("NO_COLOR");
        c
    }

    /// `memq DATASET` in a pseudo-terminal, waiting for the first prompt.
    fn spawn(&self) -> PtySession {
        self.spawn_in(self.command(&[&self.dataset]))
    }

    /// `c` in a pseudo-terminal, waiting for the first prompt.
    fn spawn_in(&self, c: Command) -> PtySession {
        let mut p = spawn_with_options(
            c,
            Options::new()
                .timeout_ms(Some(60_000))
                .strip_ansi_escape_codes(true),
        )
        .unwrap();
        p.exp_string(PROMPT).unwrap();
        p
    }
}

/// Sends `\q` and waits for the process to end.
fn quit(mut p: PtySession) {
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\q").unwrap();
    p.exp_eof().unwrap();
}

#[test]
fn multi_line_query_describe_and_timing() {
    let f = Fixture::new();
    let mut p = f.spawn();
    p.send_line("SELECT event, count(*) AS n").unwrap();
    p.exp_string("...> ").unwrap();
    p.send_line("FROM events").unwrap();
    p.exp_string("...> ").unwrap();
    p.send_line("WHERE event = 'MALLOC' GROUP BY event;")
        .unwrap();
    p.exp_regex(r"\| MALLOC +\| 626 +\|").unwrap();
    p.exp_string("1 row").unwrap();
    p.exp_string(PROMPT).unwrap();

    p.send_line("\\d events").unwrap();
    p.exp_string("Table events (909 rows)").unwrap();
    p.exp_regex(r"device_used +Int64 +yes +Attr device_used")
        .unwrap();
    p.exp_string(PROMPT).unwrap();

    p.send_line("\\timing on").unwrap();
    p.exp_string("Timing is on.").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT 1 AS one;").unwrap();
    p.exp_regex(r"Time: [0-9.]+ ms").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\timing off").unwrap();
    p.exp_string("Timing is off.").unwrap();
    p.exp_string(PROMPT).unwrap();

    // Two statements on one line, and a byte column (its unit from the catalog, through max())
    // shown human-readable; a plain number is not.
    p.send_line("SELECT CAST(1572864 AS BIGINT) AS size; SELECT max(size) AS size FROM events;")
        .unwrap();
    p.exp_regex(r"\| 1572864 +\|").unwrap();
    p.exp_string("18.00 MiB").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\bytes raw").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT max(size) AS size FROM events;")
        .unwrap();
    p.exp_string("18874368").unwrap();
    quit(p);
}

/// The shortest prefix of `name` that Tab completes to exactly `name` (every other candidate
/// with that prefix extends `name`), if any.
fn completable_prefix(name: &str, vocab: &Vocabulary) -> Option<String> {
    let all: Vec<String> = vocab
        .relations()
        .chain(&vocab.columns)
        .chain(&vocab.functions)
        .cloned()
        .chain(KEYWORDS.iter().map(|k| k.to_string()))
        .collect();
    (3..name.len()).map(|n| &name[..n]).find_map(|prefix| {
        let lower = prefix.to_ascii_lowercase();
        let ok = all
            .iter()
            .filter(|c| c.to_ascii_lowercase().starts_with(&lower))
            .all(|c| {
                c.to_ascii_lowercase()
                    .starts_with(&name.to_ascii_lowercase())
            });
        ok.then(|| prefix.to_string())
    })
}

#[test]
fn tab_completes_view_and_column_names() {
    let f = Fixture::new();
    let vocab = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let e = Engine::open(&f.dataset, &memq::catalog()).await.unwrap();
        Vocabulary::load(&e.ctx).await
    });
    let col = completable_prefix("device_used", &vocab).expect("device_used can be completed");
    assert!(col.len() < "device_used".len());
    let mut p = f.spawn();

    // A view created in the session is offered at once.
    p.send_line("CREATE VIEW tab_probe_view AS SELECT * FROM events WHERE event = 'MALLOC';")
        .unwrap();
    p.exp_string("OK").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send(&format!("SELECT count({col}")).unwrap();
    p.send("\t").unwrap();
    p.send(") AS n_completed FROM tab_probe_v").unwrap();
    p.send("\t").unwrap();
    p.send(";\r").unwrap();
    p.flush().unwrap();
    p.exp_string("n_completed").unwrap();
    p.exp_string("1 row").unwrap();
    p.exp_string(PROMPT).unwrap();

    // A canned view of the SQL library.
    let canned = vocab
        .views
        .iter()
        .find_map(|v| completable_prefix(v, &vocab).map(|prefix| (v.clone(), prefix)));
    if let Some((view, prefix)) = canned {
        p.send(&format!("SELECT count(*) AS canned_rows FROM {prefix}"))
            .unwrap();
        p.send("\t").unwrap();
        p.send(";\r").unwrap();
        p.flush().unwrap();
        p.exp_string("canned_rows").unwrap();
        p.exp_string("1 row").unwrap();
        p.exp_string(PROMPT).unwrap();
        // And `\d` completes names too.
        p.send(&format!("\\d {prefix}")).unwrap();
        p.send("\t\r").unwrap();
        p.flush().unwrap();
        p.exp_string(&format!("View {view}")).unwrap();
        p.exp_string(PROMPT).unwrap();
    } else {
        assert!(
            vocab.views.is_empty(),
            "no canned view can be completed: {:?}",
            vocab.views
        );
    }
    // Meta commands complete too.
    p.send("\\tim").unwrap();
    p.send("\t on\r").unwrap();
    p.flush().unwrap();
    p.exp_string("Timing is on.").unwrap();
    quit(p);
}

#[test]
fn output_to_parquet_is_read_back() {
    let f = Fixture::new();
    let out = f.dir.path().join("out.parquet");
    let q =
        "SELECT event, count(*) AS n, sum(size) AS bytes FROM events GROUP BY event ORDER BY event";
    let mut p = f.spawn();
    p.send_line(&format!("\\o {}", out.display())).unwrap();
    p.exp_string("The next result goes to").unwrap();
    p.send_line(&format!("{q};")).unwrap();
    p.exp_regex(r"[0-9]+ rows written to").unwrap();
    p.exp_string(PROMPT).unwrap();
    // Only the next result: the one after goes to the terminal again.
    p.send_line("SELECT 'back on screen' AS t;").unwrap();
    p.exp_string("back on screen").unwrap();
    quit(p);

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let engine = Engine::open(&f.dataset, &memq::catalog()).await.unwrap();
        let expected = rows(&engine, q).await;
        let ctx = datafusion::prelude::SessionContext::new();
        let df = ctx
            .read_parquet(out.to_str().unwrap(), Default::default())
            .await
            .unwrap();
        let back = cells(&df.collect().await.unwrap());
        assert_eq!(back, expected);
        assert!(expected.len() > 3);
    });
}

#[test]
fn ctrl_c_cancels_a_long_query_and_the_session_goes_on() {
    let f = Fixture::new();
    let mut p = f.spawn();
    // 10^11 rows: many minutes of work unless cancelled.
    p.send_line("SELECT sum(value % 7) AS s FROM generate_series(1, 100000000000);")
        .unwrap();
    // The spinner shows after a second.
    p.exp_string("Ctrl-C cancels").unwrap();
    let t = Instant::now();
    p.send_control('c').unwrap();
    p.exp_string("Query cancelled.").unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "cancel took {:?}",
        t.elapsed()
    );
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT 40 + 2 AS answer;").unwrap();
    p.exp_regex(r"\| 42 +\|").unwrap();
    p.exp_string(PROMPT).unwrap();
    // Ctrl-C at the prompt drops the statement being typed, and keeps the session too.
    p.send("SELECT 'never run'").unwrap();
    p.flush().unwrap();
    p.send_control('c').unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT 'still here' AS s;").unwrap();
    p.exp_string("still here").unwrap();
    p.exp_string(PROMPT).unwrap();
    // Ctrl-D quits.
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}

#[test]
fn an_error_prints_and_the_session_goes_on() {
    let f = Fixture::new();
    let mut p = f.spawn();
    p.send_line("SELECT no_such_column FROM events;").unwrap();
    p.exp_string("error:").unwrap();
    p.exp_string("no_such_column").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELEC broken;").unwrap();
    p.exp_string("error:").unwrap();
    p.exp_string(PROMPT).unwrap();
    // A caret under the failing token, and the nearest name for a mistyped table.
    p.send_line("SELECT * FROM blokcs;").unwrap();
    p.exp_string("table 'blokcs' not found; did you mean `blocks`?")
        .unwrap();
    p.exp_string("^^^^^^").unwrap();
    p.exp_string(PROMPT).unwrap();
    // `\o` into a missing folder is refused at once, naming the folder.
    p.send_line("\\o nodir/a.parquet").unwrap();
    p.exp_string("the folder nodir does not exist").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\nosuchcommand").unwrap();
    p.exp_string("unknown command").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT count(*) AS blocks_n FROM blocks;")
        .unwrap();
    p.exp_regex(r"\| 640 +\|").unwrap();
    quit(p);
}

#[test]
fn parameters_and_include_files() {
    let f = Fixture::new();
    let script = f.dir.path().join("script.sql");
    std::fs::write(
        &script,
        "\\set pool HAL\nSELECT count(*) AS hal_blocks\n  FROM blocks WHERE pool = $pool;\n",
    )
    .unwrap();
    let mut p = f.spawn();
    p.send_line("\\set evil 1; DROP VIEW tab_probe").unwrap();
    p.exp_string("(VARCHAR)").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("CREATE VIEW tab_probe AS SELECT 1 AS x;")
        .unwrap();
    p.exp_string("OK").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT $evil AS v, (SELECT count(*) FROM tab_probe) AS still_there;")
        .unwrap();
    p.exp_regex(r"\| 1; DROP VIEW tab_probe +\| 1 +\|").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT $unset_param;").unwrap();
    p.exp_string("$unset_param has no value").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line(&format!("\\i {}", script.display())).unwrap();
    p.exp_string("hal_blocks").unwrap();
    p.exp_string("1 row").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\set").unwrap();
    p.exp_string("pool = HAL (VARCHAR)").unwrap();
    quit(p);
}

#[test]
fn history_is_kept_across_sessions() {
    let f = Fixture::new();
    let mut p = f.spawn();
    p.send_line("SELECT 'history probe'").unwrap();
    p.exp_string("...> ").unwrap();
    p.send_line("  AS h;").unwrap();
    p.exp_string("history probe").unwrap();
    quit(p);
    let file = f.state().join("memq/history");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("history probe"), "{text}");

    let mut p = f.spawn();
    // Up arrow recalls `\q` first, then the statement.
    p.send("\x1b[A\x1b[A\r").unwrap();
    p.flush().unwrap();
    p.exp_regex(r"\| history probe +\|").unwrap();
    quit(p);
}

/// `memq INPUT` with stdin piped: runs and returns stderr.
fn start_piped(f: &Fixture, args: &[&Path], stdin: &str) -> String {
    use std::io::Write;
    let mut child = f
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("| 121"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

#[test]
fn raw_dumps_are_ingested_once_into_the_cache() {
    let f = Fixture::new();
    let dump = f.dir.path().join("baseline.csv");
    std::fs::copy(real_fixture("memscope/real/v2_compare_baseline.csv"), &dump).unwrap();
    let q = "SELECT count(*) AS n FROM events;\n";
    let err = start_piped(&f, &[&dump], q);
    assert!(err.contains("ingested into cache"), "{err}");
    // One dataset folder (beside it the hidden lock files of the cache, see docs/robustness.md).
    let datasets: Vec<PathBuf> = std::fs::read_dir(f.cache().join("memq/datasets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(datasets.len(), 1, "{datasets:?}");
    let manifest = datasets[0].join("manifest.json");
    let stamp = std::fs::metadata(&manifest).unwrap().modified().unwrap();

    // Unchanged: reused, not ingested again.
    let err = start_piped(&f, &[&dump], q);
    assert!(err.contains("using cached dataset"), "{err}");
    assert_eq!(
        std::fs::metadata(&manifest).unwrap().modified().unwrap(),
        stamp
    );

    // Touched: ingested again.
    let file = std::fs::File::options().write(true).open(&dump).unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .unwrap();
    drop(file);
    let err = start_piped(&f, &[&dump], q);
    assert!(err.contains("sources changed; ingested again"), "{err}");
    assert_ne!(
        std::fs::metadata(&manifest).unwrap().modified().unwrap(),
        stamp
    );
    let err = start_piped(&f, &[&dump], q);
    assert!(err.contains("using cached dataset"), "{err}");

    // --no-cache: a temporary dataset, the cache is left alone.
    let err = start_piped(&f, &[Path::new("--no-cache"), &dump], q);
    assert!(!err.contains("cache"), "{err}");
    let count = std::fs::read_dir(f.cache().join("memq/datasets"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(count, 1);
}

/// A generated dataset of about `events` dump rows on one device (memq-gen, then `memq ingest`).
pub(crate) fn generated_dataset(dir: &Path, events: u64) -> PathBuf {
    let mut cfg = memq_gen::GenConfig {
        devices: 1,
        ..Default::default()
    };
    cfg.scale_to_events(events, false);
    let run = dir.join("run");
    memq_gen::generate(&cfg, &run).expect("generate");
    let dataset = dir.join("gen.memq");
    let out = Command::new(env!("CARGO_BIN_EXE_memq"))
        .arg("ingest")
        .arg(&run)
        .arg("-o")
        .arg(&dataset)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dataset
}

/// rexpect reads the terminal's bytes as Latin-1: the text as it was written.
fn latin1_to_utf8(s: &str) -> String {
    let bytes: Vec<u8> = s.chars().map(|c| c as u32 as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The peak resident memory (VmHWM, bytes) of the running process whose command line names
/// `marker`.
fn peak_rss_of(marker: &Path) -> Option<u64> {
    let marker = marker.to_string_lossy().into_owned();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(env!("CARGO_BIN_EXE_memq")) && cmd.contains(&marker) {
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            let kb: u64 = status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            return Some(kb * 1024);
        }
    }
    None
}

/// `SELECT * FROM events` on a dataset of over 1 M events prints its first
/// screen at once with bounded memory (head and tail, "N rows, 40 shown"), fitted to the terminal; Ctrl-C
/// while rows stream stops printing and the prompt comes back.
#[test]
fn a_big_result_streams_a_bounded_table_and_ctrl_c_stops_it() {
    let dir = TempDir::new().unwrap();
    let dataset = generated_dataset(dir.path(), 1_100_000);
    let mut c = Command::new(env!("CARGO_BIN_EXE_memq"));
    c.arg(&dataset)
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("TERM", "xterm")
        .env("COLUMNS", "120");
    let mut p = spawn_with_options(
        c,
        Options::new()
            .timeout_ms(Some(60_000))
            .strip_ansi_escape_codes(true),
    )
    .unwrap();
    p.exp_string(PROMPT).unwrap();
    let t = Instant::now();
    p.send_line("SELECT * FROM events;").unwrap();
    // The first data row: its line and event (the identifiers, the source first, are left out
    // before the answer is cut).
    let (before, first) = p.exp_regex(r"\| [0-9]+ +\| (SYSTEM|MALLOC|FREE) ").unwrap();
    let first_screen = t.elapsed();
    let (rest, _) = p.exp_regex(r"[0-9]+ rows, 40 shown").unwrap();
    let table = format!("{before}{first}{rest}");
    let total = t.elapsed();
    assert!(
        first_screen < Duration::from_secs(10),
        "first screen after {first_screen:?}"
    );
    let table = latin1_to_utf8(&table);
    assert!(table.contains("| event "), "{table}");
    let table_lines: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with(['|', '+']))
        .collect();
    // border, header, border, 20 head rows, the … row, (a border when the tail's numbers are
    // wider), 20 tail rows, border
    assert!((45..=46).contains(&table_lines.len()), "{table}");
    assert!(!table.contains("0… "), "numbers are not cut: {table}");
    for l in &table_lines {
        assert!(l.chars().count() <= 120, "wider than 120: {l}");
    }
    p.exp_string("columns not shown: source, row_idx, id")
        .unwrap();
    p.exp_string(PROMPT).unwrap();
    let rss = peak_rss_of(&dataset).expect("the REPL's memory");
    assert!(rss < 300 << 20, "peak RSS {} MiB", rss >> 20);
    eprintln!(
        "1 M events: first screen {first_screen:?}, whole table {total:?}, peak RSS {} MiB",
        rss >> 20
    );

    // A result that takes long to count: the head shows, Ctrl-C stops, the prompt is back.
    p.send_line("SELECT e.id, g.value FROM events e CROSS JOIN generate_series(1, 1000) g;")
        .unwrap();
    p.exp_string("| id").unwrap();
    p.exp_string("Ctrl-C cancels").unwrap();
    let t = Instant::now();
    p.send_control('c').unwrap();
    p.exp_regex(r"stopped after [0-9]+ rows, 20 shown").unwrap();
    p.exp_string("Query cancelled.").unwrap();
    p.exp_string(PROMPT).unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        t.elapsed()
    );

    // \set maxrows: fewer rows; 0 shows all.
    p.send_line("\\set maxrows 4").unwrap();
    p.exp_string("maxrows").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT value FROM generate_series(1, 10) ORDER BY value;")
        .unwrap();
    let t4 = p.exp_string("10 rows, 4 shown").unwrap();
    assert!(
        t4.contains("| 2 ") && t4.contains("| 9 ") && !t4.contains("| 5 "),
        "{t4}"
    );
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\set maxrows 0").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT value FROM generate_series(1, 50) ORDER BY value;")
        .unwrap();
    let (all, _) = p.exp_regex(r"\n50 rows").unwrap();
    assert!(all.contains("| 25 "), "{all}");
    quit(p);
}

/// `\x` shows rows as records, one row too wide for the terminal becomes a
/// record by itself, `\chart` draws the last result, and `\set raw on` shows stored values.
#[test]
fn expanded_display_chart_and_raw_values() {
    let f = Fixture::new();
    let mut c = f.command(&[&f.dataset]);
    c.env("COLUMNS", "80");
    let mut p = spawn_with_options(
        c,
        Options::new()
            .timeout_ms(Some(60_000))
            .strip_ansi_escape_codes(true),
    )
    .unwrap();
    p.exp_string(PROMPT).unwrap();
    // One wide row (the source path alone is wider than 80 columns): a record.
    p.send_line("SELECT * FROM peaks ORDER BY peak_bytes DESC LIMIT 1;")
        .unwrap();
    p.exp_string("-[ row 1 ]").unwrap();
    p.exp_regex(r"peak_bytes +\| [0-9.]+ [KMG]iB").unwrap();
    p.exp_string("1 row").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\x").unwrap();
    p.exp_string("Expanded display is on.").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT pool, max(live_bytes) AS peak FROM curve GROUP BY pool ORDER BY pool;")
        .unwrap();
    p.exp_string("-[ row 2 ]").unwrap();
    p.exp_regex(r"pool \| ").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\chart").unwrap();
    p.exp_string("peak by pool").unwrap();
    // (rexpect reads the bars' UTF-8 as Latin-1: match the ASCII around them.)
    p.exp_regex(r"HAL [^\n]+ [0-9.]+ MiB").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\x off").unwrap();
    p.exp_string("Expanded display is off.").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\set raw on").unwrap();
    p.exp_string("Values are shown raw").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("SELECT max(size) AS size FROM events;")
        .unwrap();
    p.exp_string("18874368").unwrap();
    quit(p);
}

/// The shell's vocabulary takes the library's views from their `@column` lines (planning them
/// all cost 0.2 s before the first prompt): for every view, those are the columns its plan has.
#[test]
fn vocabulary_columns_of_views_are_those_of_their_plans() {
    let f = Fixture::new();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let e = Engine::open(&f.dataset, &memq::catalog()).await.unwrap();
        let vocab = Vocabulary::load(&e.ctx).await;
        assert!(vocab.views.len() >= 10, "views: {:?}", vocab.views);
        for view in &vocab.views {
            let planned: Vec<String> = e
                .ctx
                .table(view.as_str())
                .await
                .unwrap_or_else(|err| panic!("{view}: {err}"))
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(vocab.columns_of.get(view), Some(&planned), "view {view}");
            for c in &planned {
                assert!(vocab.columns.contains(c), "column {c} of {view}");
            }
        }
    });
}

/// Completion by position. After FROM only relations are candidates: a
/// prefix shared with columns or functions (as `pea` was with `peak_bytes`) completes to the
/// relation; in WHERE a prefix that is ambiguous among all columns completes to the one column
/// of the statement's table.
#[test]
fn tab_completion_follows_the_statement() {
    let f = Fixture::new();
    let vocab = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let e = Engine::open(&f.dataset, &memq::catalog()).await.unwrap();
        Vocabulary::load(&e.ctx).await
    });
    let lower = |s: &str| s.to_ascii_lowercase();
    // The shortest prefix (2 characters or more) of `name` that only `name` completes among
    // `here`, while `elsewhere` holds another name with that prefix.
    let context_prefix = |name: &str, here: &[String], elsewhere: &[String]| -> Option<String> {
        (2..name.len()).map(|n| &name[..n]).find_map(|p| {
            let unique = here
                .iter()
                .filter(|x| lower(x).starts_with(&lower(p)))
                .all(|x| lower(x).starts_with(&lower(name)));
            let ambiguous = elsewhere
                .iter()
                .any(|x| lower(x).starts_with(&lower(p)) && !lower(x).starts_with(&lower(name)));
            (unique && ambiguous).then(|| p.to_string())
        })
    };
    let relations: Vec<String> = vocab.relations().cloned().collect();
    let everything: Vec<String> = vocab
        .relations()
        .chain(&vocab.columns)
        .chain(&vocab.functions)
        .cloned()
        .chain(KEYWORDS.iter().map(|k| k.to_string()))
        .collect();
    let (view, from_prefix) = vocab
        .views
        .iter()
        .find_map(|v| context_prefix(v, &relations, &everything).map(|p| (v.clone(), p)))
        .expect("a view that only the FROM context completes");
    let peaks_cols = &vocab.columns_of["peaks"];
    let in_where: Vec<String> = peaks_cols
        .iter()
        .chain(&vocab.functions)
        .cloned()
        .chain(KEYWORDS.iter().map(|k| k.to_string()))
        .collect();
    let (col, prefix) = peaks_cols
        .iter()
        .find_map(|c| context_prefix(c, &in_where, &vocab.columns).map(|p| (c.clone(), p)))
        .expect("a column of peaks that only the statement's context completes");
    let mut p = f.spawn();
    p.send(&format!(
        "SELECT count(*) AS completed_from FROM {from_prefix}"
    ))
    .unwrap();
    p.send("\t").unwrap();
    p.send(";\r").unwrap();
    p.flush().unwrap();
    // The result's header (the typed line echoes the name too, but without the `|`).
    p.exp_regex(r"\| completed_from +\|").unwrap();
    p.exp_string("1 row").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send(&format!(
        "SELECT count(*) AS completed_where FROM peaks WHERE {prefix}"
    ))
    .unwrap();
    p.send("\t").unwrap();
    p.send(" IS NOT NULL;\r").unwrap();
    p.flush().unwrap();
    // Run with the column (`{prefix}` alone names no column of peaks: that would be an error).
    p.exp_regex(r"\| completed_where +\|").unwrap();
    p.exp_string("1 row").unwrap();
    assert!(col.len() > prefix.len() && view.len() > from_prefix.len());
    quit(p);
}

/// The banner says what the dataset holds and where to start; `\dv`
/// groups the analyses by source, the ones of this dataset's source first, and marks those
/// without data here.
#[test]
fn banner_and_dv_guide_a_newcomer() {
    let f = Fixture::new();
    let counts = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let e = Engine::open(&f.dataset, &memq::catalog()).await.unwrap();
        rows(
            &e,
            // Devices as the banner and the report count them (guide::counts_as_device).
            "SELECT count(*), \
             (SELECT count(DISTINCT device) FROM peaks WHERE pool <> 'HOST_PINNED' AND device <> 'N/A'), \
             count(DISTINCT pid) FROM events",
        )
        .await
    });
    let [events, devices, processes] = &counts[0][..] else {
        panic!("{counts:?}")
    };
    let c = f.command(&[&f.dataset]);
    let mut p = spawn_with_options(
        c,
        Options::new()
            .timeout_ms(Some(60_000))
            .strip_ansi_escape_codes(true),
    )
    .unwrap();
    p.exp_string(&format!(
        "It holds msMemScope: {events} events of {devices} devices and {processes} processes."
    ))
    .unwrap();
    let listed = memq::analyses().iter().filter(|a| !a.private).count();
    // (The line may be broken between words to fit the terminal.)
    p.exp_regex(&format!(
        r"Start with peaks, owner_peaks and leak_summary \(SELECT \* FROM peaks;\); \\dv lists\s+the {listed} analyses by source\."
    ))
    .unwrap();
    p.exp_string("The diagnosis: `memq report ").unwrap();
    p.exp_string(PROMPT).unwrap();
    p.send_line("\\dv").unwrap();
    p.exp_string("memscope (msMemScope dumps):").unwrap();
    p.exp_regex(r"\n  peaks +the peak of each memory counter")
        .unwrap();
    p.exp_string("snapshot (PyTorch memory snapshots; none in this dataset):")
        .unwrap();
    p.exp_regex(r"\n  snap_overview +no data +the allocator state")
        .unwrap();
    let marked = memq::analyses()
        .iter()
        .filter(|a| !a.private && !a.path.starts_with("memscope/") && !a.union)
        .count();
    p.exp_string(&format!("{marked} analyses marked `no data`"))
        .unwrap();
    quit(p);
}

/// `memq DATASET` in a pseudo-terminal of `cols` columns, at its first prompt.
fn spawn_at_width(f: &Fixture, cols: usize) -> PtySession {
    let mut c = f.command(&[&f.dataset]);
    c.env("COLUMNS", cols.to_string());
    f.spawn_in(c)
}

/// The screen of one statement: what it printed up to the next prompt.
fn screen_of(p: &mut PtySession, sql: &str) -> String {
    p.send_line(sql).unwrap();
    let (out, _) = p.exp_regex(r"\n[^\n]*memq> ").unwrap();
    latin1_to_utf8(&out).replace('\r', "")
}

/// A result wider than the terminal keeps its answer: at 80 and 160 columns `peaks` shows the
/// peak bytes and times (the identifiers go first, named in the footer), short names are never
/// cut, a column with one value on every row is said once above the table, no line is wider
/// than the terminal; `\x` wraps a long value instead of cutting it; `\chart`'s axis labels
/// all fit its axis.
#[test]
fn narrow_terminals_show_the_answer() {
    let f = Fixture::new();
    for cols in [80usize, 160] {
        let mut p = spawn_at_width(&f, cols);
        let out = screen_of(&mut p, "SELECT * FROM peaks;");
        let lines: Vec<&str> = out.lines().skip(1).collect();
        for l in &lines {
            assert!(l.chars().count() <= cols, "{cols}: {l}\n{out}");
        }
        let header = lines.iter().find(|l| l.contains("| device")).expect(&out);
        for answer in ["peak_bytes", "peak_ts", "pool", "metric"] {
            assert!(header.contains(answer), "{cols}: {answer} shown\n{out}");
        }
        assert!(out.contains("| 42.69 MiB "), "{cols}: {out}");
        assert!(
            out.contains("not shown: ") && out.contains("peak_ts_raw"),
            "{cols}: {out}"
        );
        assert!(
            !out.contains("| tot…") && !out.contains("| MAL…"),
            "{cols}: {out}"
        );
        if cols == 160 {
            assert!(
                header.contains("source"),
                "room for the source at 160:\n{out}"
            );
        }
        // One pid and one pool on every row: said once, above the table.
        let out = screen_of(
            &mut p,
            "SELECT * FROM peaks WHERE source LIKE '%leaks%' AND pool='PTA';",
        );
        let first = out.lines().nth(1).unwrap_or_default();
        if cols == 80 {
            assert!(first.starts_with("every row: source "), "{out}");
            assert!(first.contains("pool PTA"), "{out}");
        }
        assert!(out.contains("| 19.82 MiB"), "{out}");
        p.send_line("\\q").unwrap();
        p.exp_eof().unwrap();
    }
    let mut p = spawn_at_width(&f, 80);
    p.send_line("\\x").unwrap();
    p.exp_string("Expanded display is on.").unwrap();
    p.exp_string(PROMPT).unwrap();
    let out = screen_of(
        &mut p,
        "SELECT 'start' || repeat('x', 150) || 'end' AS evidence, 1 AS n;",
    );
    assert!(out.contains("evidence | startxxx"), "{out}");
    assert!(
        out.contains("         | xxx") && out.contains("xxxend"),
        "wrapped whole:\n{out}"
    );
    assert!(!out.contains('…'), "{out}");
    p.send_line("\\x off").unwrap();
    p.exp_string(PROMPT).unwrap();
    screen_of(
        &mut p,
        "SELECT ts, used FROM curve WHERE source LIKE '%leaks%' AND pool='PTA';",
    );
    let chart = screen_of(&mut p, "\\chart");
    let axis: Vec<usize> = chart
        .lines()
        .filter_map(|l| l.find(['┤', '└']).map(|b| l[..b].chars().count()))
        .collect();
    assert!(
        axis.len() > 3 && axis.iter().all(|&a| a == axis[0]),
        "{axis:?}\n{chart}"
    );
    p.send_line("\\q").unwrap();
    p.exp_eof().unwrap();
}
