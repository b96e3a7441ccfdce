//! The docs and `--help` agree on every command's flags.
//!
//! * Every long flag that `memq CMD --help` lists (for every command `memq --help` lists, the
//!   commands of `memq cluster` too, and the shell itself) is mentioned in a doc that covers
//!   that command ([`DOCS`]).
//! * The reverse: every `--flag` that README.md shows for a command — in a `memq …` code span
//!   or code line, in a row of its Commands table, or in prose — is a flag of that command (or,
//!   for prose that names no command, of some command), so the docs cannot describe flags that
//!   do not exist. `memq …` code spans and lines of docs/repl.md, docs/report.md and
//!   docs/scale-out.md are checked the same way.
//!
//! `--help` and `--version` are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::memq;

/// The docs that describe each command (its path as typed after `memq`; "" is the shell,
/// `memq [INPUT...]`). Every flag of the command must be mentioned in one of them.
const DOCS: &[(&str, &[&str])] = &[
    ("", &["README.md", "docs/repl.md"]),
    ("ingest", &["README.md", "docs/scale-out.md"]),
    ("sql", &["README.md", "docs/repl.md", "docs/scale-out.md"]),
    ("views", &["README.md"]),
    ("functions", &["README.md"]),
    ("run", &["README.md", "docs/repl.md", "docs/scale-out.md"]),
    ("export", &["README.md", "docs/repl.md"]),
    ("report", &["README.md", "docs/report.md"]),
    ("check", &["README.md", "docs/report.md"]),
    ("serve", &["README.md", "docs/serve.md"]),
    ("to-db", &["README.md", "docs/repl.md"]),
    ("cluster", &["README.md", "docs/scale-out.md"]),
    ("cluster scheduler", &["README.md", "docs/scale-out.md"]),
    ("cluster executor", &["README.md", "docs/scale-out.md"]),
];

/// Docs whose `memq …` code spans and lines must use only flags the command has.
const CHECKED_DOCS: &[&str] = &[
    "README.md",
    "docs/repl.md",
    "docs/report.md",
    "docs/scale-out.md",
];

const SKIPPED: &[&str] = &["--help", "--version"];

fn shown(path: &str) -> String {
    if path.is_empty() {
        "memq".into()
    } else {
        format!("memq {path}")
    }
}

fn help(path: &str) -> String {
    let out = memq()
        .args(path.split_whitespace())
        .arg("--help")
        .output()
        .expect("memq runs");
    assert!(out.status.success(), "{} --help failed", shown(path));
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of the section of `help` headed `title` (e.g. "Commands:").
fn section<'a>(help: &'a str, title: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| l.trim_end() != title)
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .collect()
}

/// The commands a help text lists (clap's own `help` left out).
fn commands(help: &str) -> Vec<String> {
    section(help, "Commands:")
        .into_iter()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every `--flag` token in `text`: `--` after a start or a character that cannot be part of a
/// flag, then a lower-case letter, then letters, digits and dashes.
fn flags_in(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_lowercase()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'));
        if starts {
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'-') {
                j += 1;
            }
            out.push(text[i..j].trim_end_matches('-').to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The long flags of a command's `--help`: the option lines of its Options section (indented
/// at most 6 spaces; the long help indents descriptions by 10) and its `[alias: …]` notes.
fn help_flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for line in section(help, "Options:") {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t.starts_with('-') && indent <= 6 {
            // The definition ends where the compact layout's description begins.
            let def = t.split("  ").next().unwrap_or(t);
            flags.extend(flags_in(def));
        }
        if let Some(at) = t.find("[alias") {
            let note = &t[at..];
            flags.extend(flags_in(&note[..note.find(']').unwrap_or(note.len())]));
        }
    }
    flags.retain(|f| !SKIPPED.contains(&f.as_str()));
    flags
}

/// Every command path (`""`, `sql`, `cluster executor`, …) with its long flags.
fn all_commands() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![String::new()];
    while let Some(path) = todo.pop() {
        let text = help(&path);
        // The shell's flags are the top level's; its command list names the subcommands.
        for sub in commands(&text) {
            todo.push(format!("{path} {sub}").trim().to_string());
        }
        out.insert(path, help_flags(&text));
    }
    out
}

fn read_doc(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Whether `doc` mentions `flag` as a whole flag (`--raw` is not mentioned by `--raw-bytes`).
fn mentions(doc: &str, flag: &str) -> bool {
    flags_in(doc).iter().any(|f| f == flag)
}

/// Where a piece of code comes from in a doc: a code span of a table row, of prose, or a line of
/// a fenced code block.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Row(usize),
    Prose,
    Block,
}

/// A piece of code of a doc: an inline code span or a line of a code block, with its line.
struct Code {
    text: String,
    line: usize,
    place: Place,
}

/// The code of a Markdown doc. Inline spans may cross lines within a paragraph, never a table
/// row or a blank line.
fn code_of(doc: &str) -> Vec<Code> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut para: Vec<(usize, &str)> = Vec::new();
    let flush = |para: &mut Vec<(usize, &str)>, out: &mut Vec<Code>, place: Place| {
        if para.is_empty() {
            return;
        }
        let first = para[0].0;
        let text: String = para.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
        let mut offset = 0;
        for (k, span) in text.split('`').enumerate() {
            if k % 2 == 1 {
                out.push(Code {
                    text: span.replace('\n', " ").replace("\\|", "|"),
                    line: first + text[..offset].matches('\n').count(),
                    place,
                });
            }
            offset += span.len() + 1;
        }
        para.clear();
    };
    for (n, line) in doc.lines().enumerate() {
        let n = n + 1;
        if line.trim_start().starts_with("```") {
            flush(&mut para, &mut out, Place::Prose);
            in_block = !in_block;
            continue;
        }
        if in_block {
            out.push(Code {
                text: line.to_string(),
                line: n,
                place: Place::Block,
            });
        } else if line.trim_start().starts_with('|') {
            flush(&mut para, &mut out, Place::Prose);
            para.push((n, line));
            flush(&mut para, &mut out, Place::Row(n));
        } else if line.trim().is_empty() {
            flush(&mut para, &mut out, Place::Prose);
        } else {
            para.push((n, line));
        }
    }
    flush(&mut para, &mut out, Place::Prose);
    out
}

/// What a piece of code is.
enum Kind {
    /// `memq …` (also after `$ `, `VAR=x `, a pipe, or `cargo run --bin memq --`): the command
    /// path and the flags written after it.
    Memq(String, Vec<String>),
    /// Flags alone (`--param name=value`, `[--force]`).
    Bare(Vec<String>),
    /// A command name alone (`sql`).
    Name(String),
    /// Anything else (another program, a path, SQL): its flags are not memq's.
    Other,
}

fn kind(code: &str, commands: &BTreeMap<String, BTreeSet<String>>) -> Kind {
    // A shell comment is prose.
    let code = match code.find(" #") {
        Some(at) => &code[..at],
        None => code,
    };
    let mut t = code.trim().trim_start_matches("$ ").trim();
    if let Some(at) = t.find("| memq ") {
        t = &t[at + 2..];
    }
    if let Some(rest) = t.strip_prefix("cargo run --bin memq --") {
        t = rest.trim_start();
        return memq_kind(t, commands);
    }
    // Environment assignments before the program (`AI_AGENT=1 memq …`).
    while let Some((word, rest)) = t.split_once(' ') {
        if word.contains('=') && word.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
            t = rest.trim_start();
        } else {
            break;
        }
    }
    if t == "memq" || t.starts_with("memq ") {
        return memq_kind(&t[4..], commands);
    }
    let t = t.trim_start_matches('[');
    if t.starts_with('-') {
        return Kind::Bare(flags_in(t));
    }
    if commands.contains_key(t) && !t.is_empty() {
        return Kind::Name(t.to_string());
    }
    Kind::Other
}

/// `rest` is what follows `memq`: a command path if its first words name one, then arguments.
fn memq_kind(rest: &str, commands: &BTreeMap<String, BTreeSet<String>>) -> Kind {
    let words: Vec<&str> = rest.split_whitespace().collect();
    let mut path = String::new();
    for w in &words {
        let longer = format!("{path} {w}").trim().to_string();
        if commands.contains_key(&longer) {
            path = longer;
        } else {
            break;
        }
    }
    Kind::Memq(path, flags_in(rest))
}

#[test]
fn every_flag_of_every_command_is_documented() {
    let commands = all_commands();
    assert!(commands.contains_key("sql") && commands["sql"].contains("--format"));
    let docs: BTreeMap<&str, String> = DOCS
        .iter()
        .flat_map(|(_, d)| d.iter().copied())
        .map(|d| (d, read_doc(d)))
        .collect();
    let mut problems = Vec::new();
    for (path, flags) in &commands {
        let Some((_, covering)) = DOCS.iter().find(|(p, _)| p == path) else {
            problems.push(format!(
                "`{}`: no doc is assigned to this command; add it to DOCS in tests/it/help_docs.rs",
                shown(path)
            ));
            continue;
        };
        let missing: Vec<&str> = flags
            .iter()
            .filter(|f| !covering.iter().any(|d| mentions(&docs[d], f)))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "`{}`: {} not mentioned in {}",
                shown(path),
                missing.join(", "),
                covering.join(" or ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "flags in `--help` that the docs do not mention:\n  {}",
        problems.join("\n  ")
    );
}

/// The flags `doc` shows that its commands do not have, by doc and command. In README.md
/// (`readme`) bare flag spans count too: in a Commands table row for the row's commands, in
/// prose for any command.
fn doc_problems(
    doc_name: &str,
    doc: &str,
    readme: bool,
    commands: &BTreeMap<String, BTreeSet<String>>,
) -> BTreeMap<String, Vec<String>> {
    let any_command: BTreeSet<&String> = commands.values().flatten().collect();
    let code = code_of(doc);
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // The commands of each table row that opens with a `memq …` span: its `memq …` spans and
    // bare command names (`--cluster` on `sql` and `run`). A row that opens with anything else
    // (cargo, benches) is about another program.
    let mut rows: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    let mut foreign: BTreeSet<usize> = BTreeSet::new();
    for c in &code {
        let Place::Row(r) = c.place else { continue };
        let k = kind(&c.text, commands);
        if !rows.contains_key(&r) && !foreign.contains(&r) && !matches!(k, Kind::Memq(..)) {
            foreign.insert(r);
        }
        if foreign.contains(&r) {
            continue;
        }
        if let Kind::Memq(p, _) | Kind::Name(p) = k {
            rows.entry(r).or_default().insert(p);
        }
    }
    for c in &code {
        let (owners, flags): (Vec<String>, Vec<String>) = match kind(&c.text, commands) {
            Kind::Memq(path, flags) => (vec![path], flags),
            Kind::Bare(flags) if readme => match c.place {
                Place::Row(r) => match rows.get(&r) {
                    Some(owners) => (owners.iter().cloned().collect(), flags),
                    None => continue,
                },
                // Prose that names no command: some command must have the flag.
                _ => {
                    for f in flags {
                        if !SKIPPED.contains(&f.as_str()) && !any_command.contains(&f) {
                            problems
                                .entry(format!("{doc_name} (prose, no command named)"))
                                .or_default()
                                .push(format!("{f} (line {}: `{}`)", c.line, c.text.trim()));
                        }
                    }
                    continue;
                }
            },
            _ => continue,
        };
        for f in flags {
            if SKIPPED.contains(&f.as_str()) || owners.iter().any(|o| commands[o].contains(&f)) {
                continue;
            }
            let who = owners.iter().map(|o| shown(o)).collect::<Vec<_>>();
            problems
                .entry(format!("{doc_name}: `{}`", who.join("` / `")))
                .or_default()
                .push(format!("{f} (line {}: `{}`)", c.line, c.text.trim()));
        }
    }
    problems
}

#[test]
fn every_flag_the_docs_show_exists() {
    let commands = all_commands();
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for doc_name in CHECKED_DOCS {
        let doc = read_doc(doc_name);
        problems.extend(doc_problems(
            doc_name,
            &doc,
            *doc_name == "README.md",
            &commands,
        ));
    }
    let listed: Vec<String> = problems
        .iter()
        .map(|(k, v)| format!("{k}:\n    {}", v.join("\n    ")))
        .collect();
    assert!(
        problems.is_empty(),
        "flags the docs show that the command's `--help` does not have:\n  {}",
        listed.join("\n  ")
    );
}

#[test]
fn the_flag_scanner_reads_help_and_docs_as_meant() {
    assert_eq!(
        flags_in("[--raw-bytes] --max-peak SIZE, -- a comment, x--y, `--param name=v`"),
        ["--raw-bytes", "--max-peak", "--param"]
    );
    let help = "Usage: x\n\nOptions:\n  -o, --output <OUTPUT>\n          Write it (`--nope` here)\n\n          [alias: --out]\n      --raw          Raw values; see --also-not\n  -h, --help\n";
    assert_eq!(
        help_flags(help).into_iter().collect::<Vec<_>>(),
        ["--out", "--output", "--raw"]
    );
    assert!(mentions("use `--raw-bytes`", "--raw-bytes"));
    assert!(!mentions("use `--raw-bytes`", "--raw"));

    // The reverse check finds a flag a command does not have wherever the doc shows it.
    let commands: BTreeMap<String, BTreeSet<String>> = [
        ("", vec!["--no-cache", "--param"]),
        ("sql", vec!["--no-cache", "--format", "--cluster"]),
        ("run", vec!["--no-cache", "--cluster"]),
        ("cluster", vec!["--no-cache"]),
        ("cluster executor", vec!["--no-cache", "--scheduler"]),
    ]
    .into_iter()
    .map(|(c, f)| (c.to_string(), f.into_iter().map(String::from).collect()))
    .collect();
    let doc = "| command | does |\n|---|---|\n\
        | `memq sql INPUT [--format F \\| --fmt F]` | `--format`, `--bogus` |\n\
        | `memq cluster executor --scheduler URL --nodes N`; `--cluster`, `--everywhere` on `sql` and `run` | x |\n\
        | `cargo install --locked` | `--cluster`, `--anything` |\n\
        \n\
        Prose: `--no-cache` and `--nowhere`, `memq --param x=1 --missing\nD`.\n\
        \n\
        ```sh\n$ AI_AGENT=1 memq sql d -e 'SELECT 1' --wrong   # a comment --not-a-flag\n\
        printf x | memq --bad D\ncargo run --bin memq -- run D --cluster x --nope\n```\n";
    let found = doc_problems("t.md", doc, true, &commands);
    let flat: Vec<String> = found
        .iter()
        .flat_map(|(k, v)| {
            v.iter()
                .map(move |f| format!("{k}: {}", f.split(' ').next().unwrap()))
        })
        .collect();
    assert_eq!(
        flat,
        [
            "t.md (prose, no command named): --nowhere",
            "t.md: `memq cluster executor`: --nodes",
            "t.md: `memq cluster executor` / `memq run` / `memq sql`: --everywhere",
            "t.md: `memq run`: --nope",
            "t.md: `memq sql`: --fmt",
            "t.md: `memq sql`: --bogus",
            "t.md: `memq sql`: --wrong",
            "t.md: `memq`: --missing",
            "t.md: `memq`: --bad",
        ],
        "{found:#?}"
    );
}
