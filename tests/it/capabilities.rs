//! `source_capabilities`: what each input can answer, for every format, against figures the
//! oracles read from the raw files (tests/oracle/traces.json, real_inputs.json,
//! memscope_26.json), and the "cannot conclude" text where a capability is absent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::common::{fixture, fixture_root, query_json, real_fixture, shared_engine};

fn oracle(file: &str) -> Value {
    let path = fixture_root().join("tests/oracle").join(file);
    serde_json::from_str(&std::fs::read_to_string(path).expect("oracle file")).expect("json")
}

/// (present, evidence_rows, when_missing) by (source's file name, capability).
type Caps = BTreeMap<(String, String), (bool, i64, Option<String>)>;

async fn capabilities(inputs: &[PathBuf]) -> Caps {
    let e = shared_engine(inputs).await;
    let rows = query_json(
        &e,
        "SELECT source, capability, present, evidence_rows, when_missing FROM source_capabilities",
    )
    .await;
    let mut caps = Caps::new();
    for r in rows {
        // the file name, or the path below the capture for dumps (several share a name)
        let source = r["source"].as_str().unwrap();
        let file = match source.find("/device_") {
            Some(i) => source[i + 1..].to_string(),
            None => source.rsplit('/').next().unwrap().to_string(),
        };
        let key = (file, r["capability"].as_str().unwrap().to_string());
        let value = (
            r["present"].as_bool().unwrap(),
            r["evidence_rows"].as_i64().unwrap(),
            r["when_missing"].as_str().map(str::to_string),
        );
        assert!(caps.insert(key.clone(), value).is_none(), "{key:?} twice");
    }
    caps
}

fn get<'a>(caps: &'a Caps, file: &str, capability: &str) -> &'a (bool, i64, Option<String>) {
    caps.get(&(file.to_string(), capability.to_string()))
        .unwrap_or_else(|| panic!("no {capability} row for {file}: {:?}", caps.keys()))
}

/// Present with the oracle's count, and nothing said missing.
fn has(caps: &Caps, file: &str, capability: &str, rows: i64) {
    let (present, evidence, missing) = get(caps, file, capability);
    assert!(*present, "{file} {capability}");
    assert_eq!(*evidence, rows, "{file} {capability}");
    assert_eq!(missing, &None, "{file} {capability}");
}

/// Absent, with what is missing and how to collect it.
fn lacks(caps: &Caps, file: &str, capability: &str, says: &str) {
    let (present, evidence, missing) = get(caps, file, capability);
    assert!(!present, "{file} {capability}");
    assert_eq!(*evidence, 0, "{file} {capability}");
    let missing = missing.as_deref().unwrap_or_default();
    assert!(missing.contains(says), "{file} {capability}: {missing}");
}

#[tokio::test]
async fn every_format_says_what_it_can_answer() {
    let traces = oracle("traces.json");
    let snaps = &oracle("real_inputs.json")["snapshots"];
    let v26 = &oracle("memscope_26.json")["malloc_only"];
    let newest = &oracle("snapshots_newest.json")["newest_p4.pickle"];
    let real_trace = fixture_root().join(traces["real"]["file"].as_str().unwrap());
    let old_trace = fixture_root().join(traces["no_totals_2021"]["file"].as_str().unwrap());
    let inputs = vec![
        real_trace.clone(),
        old_trace.clone(),
        real_fixture("snapshots/real/cuda_list_format.pkl"),
        real_fixture("snapshots/real/cuda_three_gpus_expandable_oom.pickle"),
        fixture("snapshots/newest_protocol5.pickle"),
        fixture("snapshots-newest/newest_p4.pickle"),
        fixture("snapshots-newest/accelerator_p4.pickle"),
        fixture_root().join(v26["file"].as_str().unwrap()),
        fixture("memscope/g3_run"),
    ];
    let caps = capabilities(&inputs).await;

    // torch.profiler traces: the [memory] events, those an op encloses, the CPU's
    for (key, path) in [("real", &real_trace), ("no_totals_2021", &old_trace)] {
        let o = &traces[key];
        let file = path.file_name().unwrap().to_str().unwrap();
        has(&caps, file, "timeline", o["memory_rows"].as_i64().unwrap());
        has(&caps, file, "ops", o["rows_with_op"].as_i64().unwrap());
        has(
            &caps,
            file,
            "host_memory",
            o["rows_per_device"]["cpu"].as_i64().unwrap(),
        );
    }
    has(&caps, "gpu_working_chrome_trace.json", "reserved", 997);
    lacks(
        &caps,
        "no_totals_2021.pt.trace.json",
        "reserved",
        "no Total Reserved",
    );

    // snapshots: a trace-less one knows only its end state
    let list = &snaps["cuda_list_format.pkl"];
    has(
        &caps,
        "cuda_list_format.pkl",
        "allocator_state",
        list["segments"].as_i64().unwrap(),
    );
    lacks(
        &caps,
        "cuda_list_format.pkl",
        "timeline",
        "_record_memory_history",
    );
    lacks(
        &caps,
        "cuda_list_format.pkl",
        "full_history",
        "no trace entry",
    );
    lacks(
        &caps,
        "cuda_list_format.pkl",
        "block_lifetimes",
        "cannot be concluded",
    );
    let three = &snaps["cuda_three_gpus_expandable_oom.pickle"];
    let entries: i64 = three["trace_entries_per_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_i64().unwrap())
        .sum();
    let file = "cuda_three_gpus_expandable_oom.pickle";
    has(&caps, file, "timeline", entries);
    has(&caps, file, "full_history", entries);
    has(&caps, file, "reserved", three["segments"].as_i64().unwrap());
    assert!(get(&caps, file, "oom").0, "the snapshot records its OOM");
    // a ring buffer that wrapped: the peak before its first entry is unknown
    lacks(
        &caps,
        "newest_protocol5.pickle",
        "full_history",
        "wrapped on 1 device(s)",
    );
    assert!(get(&caps, "newest_protocol5.pickle", "timeline").0);

    // the newest fields: pinned host memory (its segments and trace entries), notes on blocks
    // (annotate entries), labels (user_metadata)
    let host = &newest["host"];
    let host_rows = host["segments"].as_i64().unwrap() + host["trace_entries"].as_i64().unwrap();
    has(&caps, "newest_p4.pickle", "host_memory", host_rows);
    let notes = newest["annotations"].as_array().unwrap().len() as i64;
    let (present, evidence, _) = get(&caps, "newest_p4.pickle", "annotations");
    assert!(
        *present && *evidence >= notes,
        "{evidence} annotations, {notes} notes"
    );
    assert!(get(&caps, "newest_p4.pickle", "labels").0);
    lacks(
        &caps,
        "accelerator_p4.pickle",
        "host_memory",
        "record_pinned_host_memory=True",
    );

    // msMemScope: a MALLOC-only stream (--events=alloc) has rows but no block lifetimes
    let file = "malloc_only.csv";
    has(
        &caps,
        file,
        "timeline",
        v26["malloc_rows"].as_i64().unwrap(),
    );
    lacks(&caps, file, "block_lifetimes", "pairing malloc_only");
    let g3: Vec<_> = caps
        .keys()
        .filter(|(f, _)| f.starts_with("device_"))
        .collect();
    assert!(!g3.is_empty());

    // one vocabulary: every capability is a known word, and a format lists only what it can carry
    let words = [
        "timeline",
        "block_lifetimes",
        "full_history",
        "stacks",
        "owners",
        "labels",
        "ops",
        "steps",
        "reserved",
        "allocator_state",
        "oom",
        "host_memory",
        "annotations",
    ];
    for (file, capability) in caps.keys() {
        assert!(words.contains(&capability.as_str()), "{file}: {capability}");
    }
    assert!(!caps.contains_key(&("no_totals_2021.pt.trace.json".into(), "full_history".into())));
}

/// The report carries the same capabilities: its JSON lists them, its section 1 shows the
/// matrix and what to collect.
#[test]
fn the_report_shows_what_each_input_can_answer() {
    let inputs = [
        real_fixture("snapshots/real/cuda_list_format.pkl"),
        fixture("memscope/v26/malloc_only.csv"),
    ];
    let r = crate::common::report_json(&inputs, &[]);
    let caps = r["capabilities"].as_array().expect("capabilities");
    let find = |file: &str, capability: &str| {
        caps.iter()
            .find(|c| {
                c["source"].as_str().unwrap().ends_with(file) && c["capability"] == capability
            })
            .unwrap_or_else(|| panic!("{file} {capability}"))
    };
    let c = find("cuda_list_format.pkl", "timeline");
    assert_eq!(c["present"], false);
    assert!(c["when_missing"]
        .as_str()
        .unwrap()
        .contains("_record_memory_history"));
    let c = find("malloc_only.csv", "block_lifetimes");
    assert_eq!(c["present"], false);
    assert!(c["when_missing"]
        .as_str()
        .unwrap()
        .contains("pairing malloc_only"));
    assert_eq!(find("malloc_only.csv", "timeline")["present"], true);
    assert!(find("cuda_list_format.pkl", "timeline")["kind"] == "snapshot");

    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("r.md");
    let o = crate::common::memq()
        .arg("report")
        .args(&inputs)
        .arg("-o")
        .arg(&md)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = std::fs::read_to_string(&md).unwrap();
    let matrix = text
        .lines()
        .find(|l| l.starts_with("| cuda_list_format.pkl | snapshot |"))
        .expect("the snapshot's row of the matrix");
    // timeline, block lifetimes, full history: no; allocator state: yes
    assert!(
        matrix.starts_with("| cuda_list_format.pkl | snapshot | no | no | no |"),
        "{matrix}"
    );
    assert!(text.contains("What the inputs cannot answer, and what to collect"));
}
