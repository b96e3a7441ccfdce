//! The diagnosis judged on labelled inputs (tests/diagnosis/scenarios.json): for each scenario
//! the report must give exactly the expected problem-level findings (warning or error) — no
//! miss, no false alarm, no two findings that contradict each other — and `memq check` must
//! measure the leak, the peak and the cached memory with the same figure and the same "where"
//! as the report. The test prints the scorecard per rule (benches/scorecard.sh shows it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{fixture, memq, real_fixture, run_ok};

fn corpus() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diagnosis/scenarios.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("scenarios.json"))
        .expect("scenarios.json is JSON");
    all["scenarios"].as_array().expect("scenarios").clone()
}

/// `base` with the keys of `overlay` replaced.
fn overlaid<T: serde::Serialize + serde::de::DeserializeOwned>(base: T, overlay: &Value) -> T {
    let mut v = serde_json::to_value(base).expect("config as JSON");
    let fields = overlay.as_object().expect("an object of fields");
    for (k, x) in fields.iter().filter(|(k, _)| *k != "ranks") {
        v[k] = x.clone();
    }
    let config: T = serde_json::from_value(v).expect("a valid config");
    // a misspelt field would be dropped silently: every one must survive the round trip
    let back = serde_json::to_value(&config).expect("config as JSON");
    for (k, x) in fields.iter().filter(|(k, x)| *k != "ranks" && !x.is_null()) {
        assert_eq!(back.get(k), Some(x), "config field {k} not taken");
    }
    config
}

/// The scenario's input, made in `dir` when it is generated.
fn input(s: &Value, dir: &Path) -> PathBuf {
    if let Some(g) = s.get("gen") {
        let cfg = overlaid(memq_gen::GenConfig::small(), g);
        let out = dir.join("run");
        memq_gen::generate(&cfg, &out).expect("generate");
        out
    } else if let Some(j) = s.get("job") {
        let ranks = j["ranks"].as_u64().expect("job.ranks") as u32;
        let cfg = overlaid(memq_gen::JobConfig::new(1, ranks), j);
        let out = dir.join("job");
        memq_gen::generate_job(&cfg, &out).expect("generate a job");
        out
    } else if let Some(r) = s["real"].as_str() {
        real_fixture(r)
    } else {
        fixture(s["fixture"].as_str().expect("gen, job, real or fixture"))
    }
}

/// The device a finding names (its evidence's device, as text).
fn device(f: &Value) -> Option<String> {
    match &f["evidence"]["device"] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[derive(Default)]
struct Score {
    hits: usize,
    false_alarms: usize,
    misses: usize,
}

struct Judged {
    /// Per rule (finding kind).
    score: BTreeMap<String, Score>,
    /// What went wrong, in words.
    wrong: Vec<String>,
    contradictions: usize,
}

fn judge(name: &str, expect: &[Value], report: &Value, judged: &mut Judged) {
    let findings = report["findings"].as_array().expect("findings");
    let problems: Vec<&Value> = findings
        .iter()
        .filter(|f| f["severity"] == "warning" || f["severity"] == "error")
        .collect();
    let mut used = vec![false; problems.len()];
    for e in expect {
        let kind = e["kind"].as_str().expect("kind");
        let at = e["where"].as_str();
        // an expected cause, where the scenario names one, must be the finding's verdict
        let verdict = e["verdict"].as_str();
        let hit = problems.iter().enumerate().position(|(i, f)| {
            !used[i]
                && f["kind"] == kind
                && (at.is_none() || device(f).as_deref() == at)
                && verdict.is_none_or(|v| f["evidence"]["verdict"] == v)
        });
        let score = judged.score.entry(kind.to_string()).or_default();
        match hit {
            Some(i) => {
                used[i] = true;
                score.hits += 1;
            }
            None => {
                score.misses += 1;
                judged
                    .wrong
                    .push(format!("{name}: missed {kind} on {at:?}"));
            }
        }
    }
    for (f, _) in problems.iter().zip(&used).filter(|(_, u)| !**u) {
        let kind = f["kind"].as_str().unwrap_or("?").to_string();
        judged
            .wrong
            .push(format!("{name}: false alarm {kind}: {}", f["title"]));
        judged.score.entry(kind).or_default().false_alarms += 1;
    }
    // One rule decides each question: a leak and "no growing memory" never stand together.
    let has = |k: &str| findings.iter().any(|f| f["kind"] == k);
    if has("leak") && has("no_leak") {
        judged.contradictions += 1;
        judged
            .wrong
            .push(format!("{name}: leak and no_leak both reported"));
    }
}

/// `memq check` measures what the report's cards show: same figure, same where.
fn check_agrees(name: &str, inputs: &Path, report: &Value, judged: &mut Judged) {
    // exit 2 when a figure cannot be measured (a snapshot's leak): the JSON says which
    let out = memq()
        .args(["check", "--no-cache"])
        .arg(inputs)
        .args(["--max-peak", "1T", "--max-leak", "1T", "--format", "json"])
        .output()
        .expect("memq check runs");
    let check: Value = serde_json::from_slice(&out.stdout).expect("check JSON");
    let unmeasured = check["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["status"] == "unmeasurable");
    if out.status.code() != Some(if unmeasured { 2 } else { 0 }) {
        judged
            .wrong
            .push(format!("{name}: check exited {:?}", out.status.code()));
    }
    let m = &report["metrics"];
    for c in check["checks"].as_array().expect("checks") {
        let (figure, at) = match c["name"].as_str() {
            Some("peak") => ("peak_bytes", "peak_where"),
            Some("leak") => ("leak_bytes", "leak_where"),
            _ => continue,
        };
        let same_value = c["measured"].as_f64() == m[figure].as_f64()
            || (c["measured"].is_null() && m[figure].is_null());
        if !same_value || c["where"] != m[at] {
            judged.wrong.push(format!(
                "{name}: check says {} {} at {}, the report {} at {}",
                c["name"], c["measured"], c["where"], m[figure], m[at]
            ));
        }
    }
}

#[test]
fn every_labelled_scenario_gets_exactly_its_findings() {
    let mut judged = Judged {
        score: BTreeMap::new(),
        wrong: Vec::new(),
        contradictions: 0,
    };
    let scenarios = corpus();
    assert!(
        scenarios.len() >= 12,
        "the corpus holds {} scenarios",
        scenarios.len()
    );
    for s in &scenarios {
        let name = s["name"].as_str().expect("name");
        let dir = tempfile::tempdir().expect("tempdir");
        let inputs = input(s, dir.path());
        let out = dir.path().join("r.json");
        run_ok(
            memq()
                .args(["report", "--no-cache"])
                .arg(&inputs)
                .arg("-o")
                .arg(&out),
        );
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&out).expect("report")).expect("JSON");
        judge(
            name,
            s["expect"].as_array().expect("expect"),
            &report,
            &mut judged,
        );
        check_agrees(name, &inputs, &report, &mut judged);
    }
    println!("scorecard over {} scenarios:", scenarios.len());
    println!(
        "{:<22} {:>5} {:>12} {:>7}",
        "rule", "hits", "false alarms", "misses"
    );
    for (rule, s) in &judged.score {
        println!(
            "{rule:<22} {:>5} {:>12} {:>7}",
            s.hits, s.false_alarms, s.misses
        );
    }
    println!("contradictions: {}", judged.contradictions);
    assert!(judged.wrong.is_empty(), "{}", judged.wrong.join("\n"));
}
