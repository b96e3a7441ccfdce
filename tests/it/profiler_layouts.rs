//! The other Ascend PyTorch Profiler layouts (docs/formats/profiler.md §2–4): npu_module_mem.csv
//! with and without its leading Device_id, static_op_mem.csv, the 5-column memory_record.csv of
//! 2023, CRLF files, and cells a spreadsheet re-saved in scientific notation. Every figure comes
//! from tests/oracle/profiler_layouts.py, which reads the raw files with Python's csv module
//! (tests/oracle/profiler_layouts.json); the fixtures' origins: fixtures/profiler/README.md.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{
    fixture, fixture_root, int, memq, query_json, real_fixture, rows, run_err, shared_engine,
};

/// The oracle's figures for one file.
fn oracle(key: &str) -> Value {
    let path = fixture_root().join("tests/oracle/profiler_layouts.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("oracle file"))
        .expect("oracle json");
    all[key].clone()
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The fixture an oracle entry was computed from.
fn file_of(o: &Value) -> PathBuf {
    fixture_root().join(o["file"].as_str().unwrap())
}

const SCIENTIFIC_REASON: &str =
    "Timestamp(us): a spreadsheet re-saved this cell in scientific notation (1.69512E+15): its digits are lost";

/// npu_module_mem.csv in its three real shapes: without Device_id (LF, the sample run of
/// fixtures/real/profiler/real), with Device_id (device 4), and the older CRLF file. Each is read
/// into prof_module_mem only, and gives the oracle's counts, times and peaks.
#[tokio::test]
async fn module_mem_with_and_without_device_id() {
    for key in [
        "npu_module_mem",
        "npu_module_mem_device_id",
        "npu_module_mem_crlf",
    ] {
        let o = oracle(key);
        let e = shared_engine(&[file_of(&o)]).await;
        assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0, "{key}");
        assert_eq!(
            int(&e, "SELECT count(*) FROM prof_module_mem").await,
            i(&o["rows"]),
            "{key}"
        );
        // Never read as memory_record.csv (whose Component and Timestamp it shares).
        assert_eq!(
            int(&e, "SELECT count(*) FROM prof_memory_record").await,
            0,
            "{key}"
        );
        assert_eq!(
            int(&e, "SELECT count(DISTINCT component) FROM prof_module_mem").await,
            i(&o["components"]),
            "{key}"
        );
        let ids: Vec<String> = rows(
            &e,
            "SELECT DISTINCT device_id FROM prof_module_mem WHERE device_id IS NOT NULL ORDER BY 1",
        )
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
        let want: Vec<String> = o["device_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids, want, "{key}");
        if want.is_empty() {
            assert_eq!(
                int(
                    &e,
                    "SELECT count(*) FROM prof_module_mem WHERE device_id IS NULL"
                )
                .await,
                i(&o["rows"]),
                "{key}"
            );
        }
        let span = &query_json(
            &e,
            "SELECT min(ts) AS lo, max(ts) AS hi, min(device) AS device, \
             count(*) FILTER (WHERE reserved < 0 OR reserved IS NULL) AS odd FROM prof_module_mem",
        )
        .await[0];
        assert_eq!(i(&span["lo"]), i(&o["min_ts_ns"]), "{key}");
        assert_eq!(i(&span["hi"]), i(&o["max_ts_ns"]), "{key}");
        assert_eq!(span["device"], o["devices"][0], "{key}");
        assert_eq!(i(&span["odd"]), i(&o["negative_reserved_rows"]), "{key}");

        // The analysis: APP's peak, the largest other component, and every peak summed.
        let app = &query_json(
            &e,
            "SELECT peak_bytes, peak_ts, peak_line, points FROM prof_module_peaks \
             WHERE component = 'APP'",
        )
        .await[0];
        let want = &o["app_peak"];
        assert_eq!(i(&app["peak_bytes"]), i(&want["peak_bytes"]), "{key}");
        assert_eq!(i(&app["peak_ts"]), i(&want["peak_ts_ns"]), "{key}");
        assert_eq!(i(&app["peak_line"]), i(&want["peak_line"]), "{key}");
        assert_eq!(i(&app["points"]), i(&want["points"]), "{key}");
        let other = &query_json(
            &e,
            "SELECT component, peak_bytes, peak_ts, peak_line FROM prof_module_peaks \
             WHERE component <> 'APP' ORDER BY peak_bytes DESC, component DESC LIMIT 1",
        )
        .await[0];
        let want = &o["largest_non_app"];
        assert_eq!(other["component"], want["component"], "{key}");
        assert_eq!(i(&other["peak_bytes"]), i(&want["peak_bytes"]), "{key}");
        assert_eq!(i(&other["peak_ts"]), i(&want["peak_ts_ns"]), "{key}");
        assert_eq!(i(&other["peak_line"]), i(&want["peak_line"]), "{key}");
        assert_eq!(
            int(&e, "SELECT sum(peak_bytes) FROM prof_module_peaks").await,
            i(&o["sum_of_peaks_bytes"]),
            "{key}"
        );
        assert_eq!(
            rows(&e, "SELECT kind, generation FROM sources").await,
            vec![vec![
                "profiler_memory_record".to_string(),
                "npu_module_mem".to_string()
            ]],
            "{key}"
        );
    }
    // The figures by hand from the raw files: the sample run's APP peak is 1452.0 MB at
    // 1736405443839379.660 µs; the device-4 file's is 10868.0 MB.
    assert_eq!(
        i(&oracle("npu_module_mem")["app_peak"]["peak_bytes"]),
        1452 << 20
    );
    assert_eq!(
        i(&oracle("npu_module_mem")["app_peak"]["peak_ts_ns"]),
        1_736_405_443_839_379_660
    );
    assert_eq!(
        i(&oracle("npu_module_mem_device_id")["app_peak"]["peak_bytes"]),
        10868 << 20
    );
}

/// A CRLF file gives exactly the rows of its LF copy: the older CRLF npu_module_mem.csv and the
/// CRLF memory_record.csv of the sample.
#[tokio::test]
async fn crlf_files_read_like_their_lf_copies() {
    let dir = tempfile::TempDir::new().unwrap();
    for (original, table, columns) in [
        (
            real_fixture("profiler/layouts/npu_module_mem_crlf.csv"),
            "prof_module_mem",
            "line, device_id, component, ts, reserved, device",
        ),
        (
            real_fixture("profiler/real/memory_record.csv"),
            "prof_memory_record",
            "line, component, ts, allocated, reserved, active, stream, device",
        ),
    ] {
        let bytes = std::fs::read(&original).unwrap();
        assert!(bytes.windows(2).any(|w| w == b"\r\n"), "{original:?}");
        let lf = dir.path().join(original.file_name().unwrap());
        let text = String::from_utf8(bytes).unwrap().replace("\r\n", "\n");
        std::fs::write(&lf, text).unwrap();
        let sql = format!("SELECT {columns} FROM {table} ORDER BY line");
        let crlf_rows = rows(&shared_engine(std::slice::from_ref(&original)).await, &sql).await;
        let lf_rows = rows(&shared_engine(&[lf]).await, &sql).await;
        assert!(!crlf_rows.is_empty());
        assert_eq!(crlf_rows, lf_rows, "{original:?}");
    }
}

/// The 5-column memory_record.csv of 2023 (no Total Active, no Stream Ptr): the same table, with
/// the oracle's counts and peaks; the columns it lacks are NULL.
#[tokio::test]
async fn memory_record_of_2023_with_five_columns() {
    let o = oracle("memory_record_5col_2023");
    let e = shared_engine(&[file_of(&o)]).await;
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_memory_record").await,
        i(&o["rows"])
    ); // 11
    for (component, n) in o["rows_per_component"].as_object().unwrap() {
        let sql =
            format!("SELECT count(*) FROM prof_memory_record WHERE component = '{component}'");
        assert_eq!(int(&e, &sql).await, i(n), "{sql}");
    }
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM prof_memory_record WHERE active IS NOT NULL OR stream IS NOT NULL"
        )
        .await,
        0
    );
    check_peaks(&e, &o).await;
    // By hand: PTA allocated peaks at 4599.86572265625 MB, line 8, 1695115378721880.0 µs.
    let pta = &query_json(
        &e,
        "SELECT peak_bytes, peak_ts, peak_line FROM prof_component_peaks \
         WHERE component = 'PTA' AND metric = 'allocated'",
    )
    .await[0];
    assert_eq!(i(&pta["peak_bytes"]), 4_823_308_800);
    assert_eq!(i(&pta["peak_ts"]), 1_695_115_378_721_880_000);
    assert_eq!(i(&pta["peak_line"]), 8);
    assert_eq!(
        rows(&e, "SELECT kind, generation, ts_unit FROM sources").await,
        vec![vec![
            "profiler_memory_record".to_string(),
            "memory_record".to_string(),
            "us".to_string()
        ]]
    );
}

/// prof_component_peaks equals the oracle's peaks, metric by metric (and lists no other).
async fn check_peaks(e: &memq_engine::Engine, o: &Value) {
    let want = o["peaks"].as_array().unwrap();
    assert_eq!(
        int(e, "SELECT count(*) FROM prof_component_peaks").await,
        want.len() as i64
    );
    for p in want {
        let sql = format!(
            "SELECT peak_bytes, peak_ts, peak_line, points FROM prof_component_peaks \
             WHERE component = '{}' AND metric = '{}'",
            p["component"].as_str().unwrap(),
            p["metric"].as_str().unwrap()
        );
        let got = &query_json(e, &sql).await[0];
        assert_eq!(i(&got["peak_bytes"]), i(&p["peak_bytes"]), "{sql}");
        assert_eq!(i(&got["peak_ts"]), i(&p["peak_ts_ns"]), "{sql}");
        assert_eq!(i(&got["peak_line"]), i(&p["peak_line"]), "{sql}");
        assert_eq!(i(&got["points"]), i(&p["points"]), "{sql}");
    }
}

/// static_op_mem.csv: one row per line, sizes in bytes, 4294967295 as NULL (held to the
/// graph's end), the TOTAL row of each graph kept as written and not the operators' sum.
#[tokio::test]
async fn static_op_mem_gives_the_oracle_figures() {
    let o = oracle("static_op_mem");
    let e = shared_engine(&[file_of(&o)]).await;
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_static_op_mem").await,
        i(&o["rows"])
    ); // 56
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_operator_memory").await,
        0
    );
    assert_eq!(
        rows(&e, "SELECT DISTINCT device_id FROM prof_static_op_mem").await,
        vec![vec!["host".to_string()]]
    );
    for g in o["graphs"].as_array().unwrap() {
        let id = i(&g["graph_id"]);
        let got = &query_json(
            &e,
            &format!(
                "SELECT count(*) AS n, sum(size) AS bytes, count(*) FILTER (WHERE node_end IS NULL) AS held \
                 FROM prof_static_op_mem WHERE graph_id = {id} AND op_name <> 'TOTAL'"
            ),
        )
        .await[0];
        assert_eq!(i(&got["n"]), i(&g["operators"]), "graph {id}");
        assert_eq!(i(&got["bytes"]), i(&g["operator_bytes"]), "graph {id}");
        assert_eq!(i(&got["held"]), i(&g["held_to_end"]), "graph {id}");
        let total = &query_json(
            &e,
            &format!(
                "SELECT size, line, node_end FROM prof_static_op_mem \
                 WHERE graph_id = {id} AND op_name = 'TOTAL'"
            ),
        )
        .await;
        assert_eq!(total.len(), 1, "graph {id}");
        assert_eq!(i(&total[0]["size"]), i(&g["total_bytes"]), "graph {id}");
        assert_eq!(i(&total[0]["line"]), i(&g["total_line"]), "graph {id}");
        assert_eq!(total[0]["node_end"], Value::Null, "graph {id}");
    }
    // By hand: graph 0's TOTAL is 17210.5 KB; `0.211914063` KB (cut to 11 characters) is
    // 216.9999995 bytes, read as 217 because its 9 decimals reach far below a byte.
    assert_eq!(i(&o["graphs"][0]["total_bytes"]), 17_623_552);
    for cut in o["sizes_not_whole"].as_array().unwrap() {
        let got = int(
            &e,
            &format!(
                "SELECT size FROM prof_static_op_mem WHERE line = {}",
                i(&cut["line"])
            ),
        )
        .await;
        assert_eq!(got, i(&cut["bytes"]));
        assert_eq!(got, 217);
    }
    assert_eq!(
        rows(&e, "SELECT kind, generation, ts_unit FROM sources").await,
        vec![vec![
            "profiler_operator_memory".to_string(),
            "static_op_mem".to_string(),
            "NULL".to_string()
        ]]
    );
}

/// A cell a spreadsheet re-saved in scientific notation keeps its row out of the table, in
/// `rejects` with the reason; the rows around it are read. The real re-saved file (every
/// timestamp `1.69512E+15`) gives no row at all, never a row at 1695120000000000000 ns.
#[tokio::test]
async fn scientific_notation_cells_go_to_rejects() {
    let o = oracle("memory_record_5col_scientific_cell");
    let e = shared_engine(&[file_of(&o)]).await;
    assert_eq!(
        int(&e, "SELECT count(*) FROM prof_memory_record").await,
        i(&o["kept"])
    ); // 10
    let rejects = query_json(&e, "SELECT line, reason, text FROM rejects ORDER BY line").await;
    let want = o["rejects"].as_array().unwrap();
    assert_eq!(rejects.len(), want.len()); // 1
    assert_eq!(i(&rejects[0]["line"]), i(&want[0]["line"])); // 4
    assert_eq!(rejects[0]["reason"], SCIENTIFIC_REASON);
    assert!(rejects[0]["text"]
        .as_str()
        .unwrap()
        .starts_with("PTA,1.69512E+15,4599.74072265625"));
    for (component, n) in o["rows_per_component"].as_object().unwrap() {
        let sql =
            format!("SELECT count(*) FROM prof_memory_record WHERE component = '{component}'");
        assert_eq!(int(&e, &sql).await, i(n), "{sql}");
    }
    assert_eq!(
        int(
            &e,
            "SELECT count(*) FROM prof_memory_record WHERE line = 4 OR ts = 1695120000000000000"
        )
        .await,
        0
    );
    // PTA's reserved peak moves from the rejected line 4 to line 6.
    check_peaks(&e, &o).await;

    let o = oracle("memory_record_spreadsheet");
    let e = shared_engine(&[file_of(&o)]).await;
    assert_eq!(int(&e, "SELECT count(*) FROM prof_memory_record").await, 0);
    let got: Vec<(i64, String)> = query_json(&e, "SELECT line, reason FROM rejects ORDER BY line")
        .await
        .iter()
        .map(|r| (i(&r["line"]), r["reason"].as_str().unwrap().to_string()))
        .collect();
    let want: Vec<(i64, String)> = o["rejects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["cell"], "1.69512E+15");
            (i(&r["line"]), SCIENTIFIC_REASON.to_string())
        })
        .collect();
    assert_eq!(got.len(), 30);
    assert_eq!(got, want);
    assert_eq!(
        rows(&e, "SELECT rows, rejects FROM sources").await,
        vec![vec!["0".to_string(), "30".to_string()]]
    );
}

/// `memq ingest FILE`: exit code and stderr (a failure expected).
fn refused(input: &Path) -> (i32, String) {
    let out = tempfile::TempDir::new().unwrap();
    let dataset = out.path().join("x.memq");
    let got = run_err(
        memq()
            .arg("ingest")
            .arg(input)
            .arg("-o")
            .arg(&dataset)
            .arg("--force"),
    );
    assert!(!dataset.join("manifest.json").exists());
    got
}

/// A CSV whose header is none of the four layouts is refused naming what it lacks, never read
/// as another file: not by its header, not by its name in an output folder.
#[test]
fn unknown_profiler_headers_are_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    for (name, text, says) in [
        (
            "module_like.csv",
            "Component,Timestamp(us),Total Used(MB),Device\nAPP,1.0,2.0,NPU:0\n",
            "lacks Total Allocated for memory_record.csv, or lacks Total Reserved for npu_module_mem.csv",
        ),
        (
            "static_like.csv",
            "Device_id,Op Name,Model Name,Graph ID,Node Start,Size(KB)\nhost,x,0,0,1,2\n",
            "lacks Node Index Start for static_op_mem.csv",
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let (code, err) = refused(&file);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("not a profiler memory CSV memq reads"),
            "{err}"
        );
        assert!(err.contains(says), "{err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
    // In an output folder the name is taken, and the header still decides.
    let out = dir
        .path()
        .join("run/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("npu_module_mem.csv"),
        "Name,Type,Duration(us)\nx,y,1\n",
    )
    .unwrap();
    let (code, err) = refused(&dir.path().join("run"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("npu_module_mem.csv:1"), "{err}");
    assert!(
        err.contains("not a profiler memory CSV memq reads"),
        "{err}"
    );
}

/// A real output folder with the four files: each goes to its table.
#[tokio::test]
async fn output_folder_reads_the_four_files() {
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir
        .path()
        .join("run/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT");
    std::fs::create_dir_all(&out).unwrap();
    for f in [
        real_fixture("profiler/real/memory_record.csv"),
        real_fixture("profiler/real/operator_memory.csv"),
        fixture("profiler/npu_module_mem.csv"),
        fixture("profiler/static_op_mem.csv"),
    ] {
        std::fs::copy(&f, out.join(f.file_name().unwrap())).unwrap();
    }
    let e = shared_engine(&[dir.path().join("run")]).await;
    for (table, n) in [
        ("prof_memory_record", 1003),
        ("prof_operator_memory", 184),
        ("prof_module_mem", i(&oracle("npu_module_mem")["rows"])),
        ("prof_static_op_mem", i(&oracle("static_op_mem")["rows"])),
    ] {
        assert_eq!(
            int(&e, &format!("SELECT count(*) FROM {table}")).await,
            n,
            "{table}"
        );
    }
    assert_eq!(int(&e, "SELECT count(*) FROM rejects").await, 0);
    assert_eq!(
        rows(
            &e,
            "SELECT kind, generation FROM sources ORDER BY generation"
        )
        .await,
        [
            ("profiler_memory_record", "memory_record"),
            ("profiler_memory_record", "npu_module_mem"),
            ("profiler_operator_memory", "operator_memory"),
            ("profiler_operator_memory", "static_op_mem"),
        ]
        .iter()
        .map(|(k, g)| vec![k.to_string(), g.to_string()])
        .collect::<Vec<_>>()
    );
}
