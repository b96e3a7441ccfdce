//! The snapshot reader on real PyTorch snapshots (figures from docs/formats/snapshot.md §7), on the
//! synthetic fixtures written by fixtures/snapshots/make_fixtures.py, and on hostile input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use memq_snapshot::{read_snapshot, schema};

/// A real snapshot kept in the repository (docs/formats/snapshot.md §0, files A and C).
fn real(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/real/snapshots/real")
        .join(name);
    assert!(path.exists(), "missing real snapshot {}", path.display());
    path
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/snapshots")
        .join(name)
}

/// A session with the snapshot's tables registered.
fn session(path: &Path) -> SessionContext {
    let batches = read_snapshot(path, "snap").unwrap_or_else(|e| panic!("{e}"));
    let ctx = SessionContext::new();
    for (def, batch) in batches {
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]]).expect("table");
        ctx.register_table(def.name, Arc::new(table))
            .expect("register");
    }
    ctx
}

/// Result rows as `a|b|c` text, NULL for nulls.
async fn rows(ctx: &SessionContext, sql: &str) -> Vec<String> {
    let batches = ctx.sql(sql).await.expect(sql).collect().await.expect(sql);
    let options = FormatOptions::new().with_null("NULL");
    let mut out = Vec::new();
    for batch in &batches {
        let columns: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formatter"))
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = columns.iter().map(|c| c.value(row).to_string()).collect();
            out.push(cells.join("|"));
        }
    }
    out
}

async fn one(ctx: &SessionContext, sql: &str) -> String {
    let rows = rows(ctx, sql).await;
    assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
    rows[0].clone()
}

/// Row counts of segments, blocks, traces, distinct stacks, frame rows and warnings.
async fn counts(ctx: &SessionContext) -> String {
    one(
        ctx,
        "SELECT (SELECT count(*) FROM snap_segments) a, (SELECT count(*) FROM snap_blocks) b, \
         (SELECT count(*) FROM snap_traces) c, \
         (SELECT count(DISTINCT stack_id) FROM snap_frames) d, \
         (SELECT count(*) FROM snap_frames) e, \
         (SELECT count(*) FROM snap_info WHERE section = 'warning') f",
    )
    .await
}

async fn actions(ctx: &SessionContext) -> Vec<String> {
    rows(
        ctx,
        "SELECT action, count(*) FROM snap_traces GROUP BY action ORDER BY action",
    )
    .await
}

/// The bytes and count of blocks per state.
async fn states(ctx: &SessionContext) -> Vec<String> {
    rows(
        ctx,
        "SELECT state, count(*), sum(size) FROM snap_blocks GROUP BY state ORDER BY state",
    )
    .await
}

/// Reserved, allocated (rounded), allocated (requested) and internal waste of live blocks.
async fn totals(ctx: &SessionContext) -> String {
    one(
        ctx,
        "SELECT (SELECT sum(total_size) FROM snap_segments) reserved, \
                (SELECT sum(allocated_size) FROM snap_segments) allocated, \
                sum(requested_size), sum(size - requested_size) \
         FROM snap_blocks WHERE state = 'active_allocated'",
    )
    .await
}

/// The structural invariants docs/formats/snapshot.md §1.3 verified on every real segment, plus the
/// numbering of stacks and the order of time.
async fn assert_invariants(ctx: &SessionContext) {
    let broken = "SELECT count(*) FROM snap_segments s JOIN (
            SELECT segment_id, sum(size) size,
                   sum(CASE WHEN state = 'active_allocated' THEN size ELSE 0 END) allocated,
                   sum(CASE WHEN state = 'active_allocated' THEN requested_size ELSE 0 END) requested
            FROM snap_blocks GROUP BY segment_id) b USING (segment_id)
        WHERE s.total_size <> b.size OR s.allocated_size <> b.allocated
           OR s.requested_size <> b.requested";
    assert_eq!(one(ctx, broken).await, "0");
    let misplaced = "SELECT count(*) FROM snap_blocks b JOIN snap_segments s USING (segment_id)
        WHERE b.address <> s.address + CAST(b.offset_in_segment AS BIGINT UNSIGNED)
           OR b.address_derived";
    assert_eq!(one(ctx, misplaced).await, "0");
    let numbering = "SELECT count(DISTINCT stack_id) = max(stack_id), min(stack_id),
        bool_and(depth < n) FROM (SELECT stack_id, depth,
        count(*) OVER (PARTITION BY stack_id) n FROM snap_frames)";
    assert_eq!(one(ctx, numbering).await, "true|1|true");
    let time_goes_back = "SELECT count(*) FROM (SELECT time_us - lag(time_us)
        OVER (PARTITION BY device ORDER BY seq) d FROM snap_traces) WHERE d < 0";
    assert_eq!(one(ctx, time_goes_back).await, "0");
}

/// Bytes and blocks of a stack among the blocks: the reference's "suspects" figures.
async fn stack_bytes(ctx: &SessionContext, stack_id: i64) -> String {
    let sql = format!("SELECT sum(size), count(*) FROM snap_blocks WHERE stack_id = {stack_id}");
    one(ctx, &sql).await
}

#[tokio::test]
async fn real_snapshot_a_small_cpp_frames() {
    let ctx = session(&real("cuda_small_cpp_frames.pickle"));
    assert_eq!(counts(&ctx).await, "10|54|5803|81|3817|0");
    assert_eq!(
        actions(&ctx).await,
        [
            "alloc|1935",
            "free_completed|1926",
            "free_requested|1926",
            "segment_alloc|7",
            "snapshot|9"
        ]
    );
    assert_eq!(
        states(&ctx).await,
        ["active_allocated|40|48760832", "inactive|14|85456896"]
    );
    assert_eq!(totals(&ctx).await, "134217728|48760832|48748928|11904");
    let types = "SELECT segment_type, count(*) FROM snap_segments GROUP BY 1 ORDER BY 1";
    assert_eq!(rows(&ctx, types).await, ["large|6", "small|4"]);
    // Stack ids are the reference's: its suspects #2 and #3.
    assert_eq!(stack_bytes(&ctx, 1).await, "15728640|2");
    assert_eq!(stack_bytes(&ctx, 4).await, "8519680|1");
    // Only the 9 `snapshot` entries have no frames; 9 of 40 live blocks carry a stack.
    let no_stack = "SELECT action, count(*) FROM snap_traces WHERE stack_id IS NULL GROUP BY 1";
    assert_eq!(rows(&ctx, no_stack).await, ["snapshot|9"]);
    let with_stack = "SELECT count(*) FROM snap_blocks WHERE stack_id IS NOT NULL";
    assert_eq!(one(&ctx, with_stack).await, "9");
    let largest = "SELECT size, requested_size FROM snap_blocks
        WHERE state = 'active_allocated' ORDER BY size DESC LIMIT 1";
    assert_eq!(one(&ctx, largest).await, "8519680|8519680");
    // G2: time_us on every entry, no allocator settings, C++ frames innermost first.
    let times = "SELECT count(time_us) FROM snap_traces";
    assert_eq!(one(&ctx, times).await, "5803");
    let top = "SELECT name FROM snap_frames WHERE stack_id = 1 AND depth = 0";
    assert_eq!(one(&ctx, top).await, "torch::unwind::unwind()");
    let info = "SELECT section, key, value FROM snap_info ORDER BY section, key";
    assert_eq!(
        rows(&ctx, info).await,
        [
            "meta|file_bytes|984472",
            "meta|keys|[\"segments\",\"device_traces\"]",
            "meta|protocol|4",
            "meta|top_level|dict"
        ]
    );
    assert_invariants(&ctx).await;
}

#[tokio::test]
async fn real_snapshot_c_transformer_forward() {
    let ctx = session(&real("cuda_transformer_forward.pickle"));
    assert_eq!(counts(&ctx).await, "405|1006|8227|726|61097|0");
    assert_eq!(
        actions(&ctx).await,
        [
            "alloc|3113",
            "free_completed|2468",
            "free_requested|2468",
            "segment_alloc|178"
        ]
    );
    assert_eq!(
        states(&ctx).await,
        ["active_allocated|969|17738153984", "inactive|37|140066816"]
    );
    assert_eq!(
        totals(&ctx).await,
        "17878220800|17738153984|17602723840|135430144"
    );
    let types = "SELECT segment_type, count(*) FROM snap_segments GROUP BY 1 ORDER BY 1";
    assert_eq!(rows(&ctx, types).await, ["large|398", "small|7"]);
    assert_eq!(stack_bytes(&ctx, 402).await, "33554432|1");
    assert_eq!(stack_bytes(&ctx, 626).await, "20971520|1");
    let with_stack = "SELECT (SELECT count(*) FROM snap_blocks WHERE stack_id IS NOT NULL) b,
        (SELECT count(*) FROM snap_segments WHERE stack_id IS NOT NULL) s";
    assert_eq!(one(&ctx, with_stack).await, "645|86");
    let largest = "SELECT size, requested_size FROM snap_blocks
        WHERE state = 'active_allocated' ORDER BY size DESC LIMIT 1";
    assert_eq!(one(&ctx, largest).await, "104857600|104857600");
    // line = 2^64-1 in fake_tensor.py is stored as -1 (in the 2 stacks that hold that frame).
    let minus_one = "SELECT count(*), min(name), bool_and(filename LIKE '%fake_tensor.py')
        FROM snap_frames WHERE line = -1";
    assert_eq!(one(&ctx, minus_one).await, "2|init_gpu_context|true");
    // G3: allocator settings (8 keys) and 1 794 external annotations.
    let settings = "SELECT count(*) FROM snap_info WHERE section = 'allocator_settings'";
    assert_eq!(one(&ctx, settings).await, "8");
    let gc = "SELECT value, value_type FROM snap_info WHERE key = 'garbage_collection_threshold'";
    assert_eq!(one(&ctx, gc).await, "0.0|float");
    let annotations = "SELECT count(DISTINCT item), min(CASE WHEN item = 0 AND key = 'name'
        THEN value END) FROM snap_info WHERE section = 'external_annotations'";
    assert_eq!(
        one(&ctx, annotations).await,
        "1794|_compile.compile_inner (dynamo_timed)"
    );
    assert_invariants(&ctx).await;
}

#[test]
fn batches_follow_the_declared_schemas() {
    let batches = read_snapshot(&fixture("oom_expandable_two_devices.pickle"), "s").unwrap();
    let names: Vec<&str> = batches.iter().map(|(def, _)| def.name).collect();
    let tables = schema::tables();
    let declared: Vec<&str> = tables.iter().map(|t| t.name).collect();
    assert_eq!(names, declared);
    for ((_, batch), table) in batches.iter().zip(&tables) {
        assert_eq!(batch.schema(), table.schema(), "{}", table.name);
        assert_eq!(table.columns[0].name, "snapshot");
        assert!(table.columns.iter().all(|c| !c.doc.is_empty()));
        let snapshot = snapshot_column(batch);
        assert!(snapshot.iter().all(|s| s == "s"), "{}", table.name);
    }
}

fn snapshot_column(batch: &RecordBatch) -> Vec<String> {
    let options = FormatOptions::new();
    let column = ArrayFormatter::try_new(batch.column(0).as_ref(), &options).unwrap();
    (0..batch.num_rows())
        .map(|row| column.value(row).to_string())
        .collect()
}

#[tokio::test]
async fn synthetic_oom_expandable_segments_pools_and_two_devices() {
    let ctx = session(&fixture("oom_expandable_two_devices.pickle"));
    assert_eq!(counts(&ctx).await, "3|6|16|4|7|1");
    assert_eq!(
        actions(&ctx).await,
        [
            "alloc|4",
            "free_requested|2",
            "oom|1",
            "segment_alloc|3",
            "segment_free|1",
            "segment_map|3",
            "segment_unmap|1",
            "snapshot|1"
        ]
    );
    // The malformed 8th entry of device 0 is a warning and still takes its seq.
    let warning = "SELECT key, value FROM snap_info WHERE section = 'warning'";
    assert_eq!(
        one(&ctx, warning).await,
        "device_traces[0][7]|is an int, not a dict; skipped"
    );
    let per_device = "SELECT device, count(*), max(seq) FROM snap_traces GROUP BY 1 ORDER BY 1";
    assert_eq!(rows(&ctx, per_device).await, ["0|14|14", "1|2|1"]);
    let oom = "SELECT seq, addr, device_free, size, stack_id FROM snap_traces WHERE action = 'oom'";
    assert_eq!(one(&ctx, oom).await, "11|NULL|12582912|536870912|2");
    let marker = "SELECT addr, stack_id FROM snap_traces WHERE action = 'snapshot'";
    assert_eq!(one(&ctx, marker).await, "0|NULL");
    let segments = "SELECT segment_id, device, address, segment_type, stream, pool_id_0,
        pool_id_1, is_expandable, allocated_size, active_size, stack_id
        FROM snap_segments ORDER BY segment_id";
    assert_eq!(
        rows(&ctx, segments).await,
        [
            "1|0|139637976727552|large|0|0|0|true|16777216|25165824|1",
            "2|0|139706696204288|small|93826423848960|1|7|false|0|1048576|NULL",
            "3|1|138538465099776|large|0|0|0|false|20971520|20971520|4"
        ]
    );
    // Both pending-free spellings end up as active_pending_free.
    assert_eq!(
        states(&ctx).await,
        [
            "active_allocated|2|37748736",
            "active_pending_free|2|9437184",
            "inactive|2|42991616"
        ]
    );
    let blocks = "SELECT block_id, segment_id, device, offset_in_segment, stack_id
        FROM snap_blocks ORDER BY block_id";
    assert_eq!(
        rows(&ctx, blocks).await,
        [
            "1|1|0|0|1",
            "2|1|0|16777216|2",
            "3|1|0|25165824|NULL",
            "4|2|0|0|3",
            "5|2|0|1048576|NULL",
            "6|3|1|0|4"
        ]
    );
    let g4 = "SELECT count(time_us), min(compile_context), max(compile_context),
        min(user_metadata), max(user_metadata) FROM snap_traces";
    assert_eq!(one(&ctx, g4).await, "16|N/A|N/A||");
    let settings = "SELECT key, value, value_type FROM snap_info
        WHERE section = 'allocator_settings' AND key IN
        ('expandable_segments', 'garbage_collection_threshold', 'max_split_size')
        ORDER BY key";
    assert_eq!(
        rows(&ctx, settings).await,
        [
            "expandable_segments|true|bool",
            "garbage_collection_threshold|0.6|float",
            "max_split_size|-1|int"
        ]
    );
    let roundup = "SELECT value FROM snap_info WHERE key = 'roundup_power2_divisions'";
    assert!(one(&ctx, roundup).await.starts_with("{\"1\":0,\"2\":0,"));
    let annotations = "SELECT item, key, value FROM snap_info
        WHERE section = 'external_annotations' AND key IN ('stage', 'extra') ORDER BY item, key";
    assert_eq!(
        rows(&ctx, annotations).await,
        ["0|stage|START", "1|extra|kept", "1|stage|END"]
    );
    let frames = "SELECT stack_id, depth, name, filename, line FROM snap_frames
        WHERE stack_id = 2 ORDER BY depth";
    assert_eq!(
        rows(&ctx, frames).await,
        [
            "2|0|attention|model.py|120",
            "2|1|train_step|train.py|44",
            "2|2|<module>|train.py|7"
        ]
    );
}

#[tokio::test]
async fn synthetic_text_frames_protocol_2() {
    let ctx = session(&fixture("string_frames_protocol2.pickle"));
    assert_eq!(counts(&ctx).await, "1|2|2|2|4|0");
    let frames = "SELECT stack_id, depth, name, filename, line, extra_json FROM snap_frames
        ORDER BY stack_id, depth";
    assert_eq!(
        rows(&ctx, frames).await,
        [
            "1|0|train_step|train.py|42|NULL",
            "1|1|torch::unwind::unwind()|NULL|NULL|NULL",
            "1|2|c10::cuda::malloc(int)|C:\\src\\alloc.cpp|7|NULL",
            "2|0|forward|fake_tensor.py|-1|{\"fx_node_op\":\"call_function\",\"fx_node_name\":\"mm\"}"
        ]
    );
    // G1: no time_us, no G4 keys.
    let g1 = "SELECT count(time_us), count(compile_context), count(*) FROM snap_traces";
    assert_eq!(one(&ctx, g1).await, "0|0|2");
    let protocol = "SELECT value FROM snap_info WHERE key = 'protocol'";
    assert_eq!(one(&ctx, protocol).await, "2");
}

#[tokio::test]
async fn synthetic_newest_format_protocol_5() {
    let ctx = session(&fixture("newest_protocol5.pickle"));
    assert_eq!(counts(&ctx).await, "1|1|1|2|3|1");
    let trace = "SELECT pool_id_0, pool_id_1, user_metadata, stack_id, forward_stack_id
        FROM snap_traces";
    assert_eq!(one(&ctx, trace).await, "2|3|{\"step\":3}|1|2");
    let forward = "SELECT depth, name, filename, line FROM snap_frames WHERE stack_id = 2
        ORDER BY depth";
    assert_eq!(
        rows(&ctx, forward).await,
        ["0|forward|model.py|12", "1|<module>|train.py|3"]
    );
    let extras = "SELECT value, value_type FROM snap_info WHERE key = 'extras'";
    assert_eq!(
        one(&ctx, extras).await,
        "{\"set\":[1,2,3],\"frozenset\":[5],\"bytes\":\"00ff\",\"bytearray\":\"6162\",\
         \"none\":null,\"true\":true,\"big\":1180591620717411303424,\
         \"negative_big\":-1180591620717411303424,\"float\":1.5,\"tuple\":[1,\"a\",null],\
         \"empty_tuple\":[],\"int_keys\":{\"1\":\"x\"},\
         \"surrogate\":\"bad\u{fffd}\u{fffd}\u{fffd}end\"}|dict"
    );
    let warning = "SELECT key, value LIKE '1 strings are not valid UTF-8%' FROM snap_info
        WHERE section = 'warning'";
    assert_eq!(one(&ctx, warning).await, "pickle|true");
    let protocol = "SELECT value FROM snap_info WHERE key = 'protocol'";
    assert_eq!(one(&ctx, protocol).await, "5");
}

#[tokio::test]
async fn synthetic_legacy_segment_list_protocol_3() {
    let ctx = session(&fixture("segment_list_legacy.pickle"));
    assert_eq!(counts(&ctx).await, "1|2|0|1|1|0");
    let blocks = "SELECT address, address_derived, offset_in_segment, size, requested_size,
        state, stack_id FROM snap_blocks ORDER BY block_id";
    assert_eq!(
        rows(&ctx, blocks).await,
        [
            "134140418588672|true|0|3145728|3145628|active_allocated|1",
            "134140421734400|true|3145728|1048576|NULL|inactive|NULL"
        ]
    );
    let segment = "SELECT requested_size, pool_id_0, is_expandable FROM snap_segments";
    assert_eq!(one(&ctx, segment).await, "NULL|NULL|NULL");
    let frame = "SELECT name, filename, line FROM snap_frames";
    assert_eq!(one(&ctx, frame).await, "old|old.py|1");
    let meta = "SELECT key, value FROM snap_info WHERE key IN ('top_level', 'protocol')
        ORDER BY key";
    assert_eq!(rows(&ctx, meta).await, ["protocol|3", "top_level|list"]);
}

#[tokio::test]
async fn synthetic_torch_npu_workspace_entries() {
    let ctx = session(&fixture("torch_npu_workspace.pickle"));
    assert_eq!(counts(&ctx).await, "2|2|3|1|1|0");
    let traces = "SELECT seq, action, addr, time_us FROM snap_traces ORDER BY seq";
    assert_eq!(
        rows(&ctx, traces).await,
        [
            "0|workspace_snapshot|20620137988096|NULL",
            "1|segment_alloc|20615843020800|NULL",
            "2|alloc|20615843020800|NULL"
        ]
    );
    let workspace = "SELECT address, total_size, stack_id FROM snap_segments WHERE segment_id = 2";
    assert_eq!(one(&ctx, workspace).await, "20620137988096|4194304|NULL");
}

#[test]
fn not_a_pickle_is_reported_with_its_first_bytes() {
    let path = fixture("not_a_pickle.pickle");
    let err = read_snapshot(&path, "h").expect_err("a git error message is no pickle");
    assert_eq!(err.exit_code(), 2);
    assert_eq!(
        err.to_string(),
        format!(
            "{}: byte offset 0: not a pickle (starts with text 'fatal: Not a valid object \
             name 4f1c2a9be0d3c6a7f …')",
            path.display()
        )
    );
}

fn is_pickle(path: &Path) -> bool {
    use memq_core::format::{read_head, Candidate, Format};
    let head = read_head(path, 64).unwrap_or_default();
    let file = Candidate {
        path,
        head: &head,
        in_folder: false,
    };
    memq_snapshot::Snapshot.detect(&file).is_some()
}

#[test]
fn is_pickle_by_extension_or_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    let magic = dir.path().join("dump.bin");
    std::fs::write(&magic, b"\x80\x04N.").unwrap();
    let text = dir.path().join("dump.csv");
    std::fs::write(&text, b"ID,Event\n").unwrap();
    assert!(is_pickle(&magic));
    assert!(!is_pickle(&text));
    assert!(is_pickle(&fixture("not_a_pickle.pickle")));
    assert!(is_pickle(Path::new("missing/snapshot.PKL")));
    assert!(is_pickle(Path::new("x.pk")));
    assert!(!is_pickle(&dir.path().join("missing.bin")));
}

/// Writes `data` to a file and returns the error reading it as a snapshot.
fn error_for(data: &[u8]) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), data).unwrap();
    match read_snapshot(file.path(), "hostile") {
        Ok(batches) => panic!("accepted {} tables from hostile input", batches.len()),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        }
    }
}

/// A protocol 4 pickle: `body` followed by STOP.
fn pickle(body: &[u8]) -> Vec<u8> {
    [b"\x80\x04".as_slice(), body, b"."].concat()
}

#[test]
fn hostile_code_running_opcodes_are_refused_by_name() {
    let cases: [(&[u8], &str, u64); 8] = [
        (b"cos\nsystem\n", "0x63 GLOBAL", 2),
        (b"\x8c\x02os\x8c\x06system\x93", "0x93 STACK_GLOBAL", 14),
        (b"N)R", "0x52 REDUCE", 4),
        (b"}}b", "0x62 BUILD", 4),
        (b"(ios\nsystem\n", "0x69 INST", 3),
        (b"N)\x81", "0x81 NEWOBJ", 4),
        (b"\x82\x01", "0x82 EXT1", 2),
        (b"N\x97", "0x97 NEXT_BUFFER", 3),
    ];
    for (body, opcode, offset) in cases {
        let message = error_for(&pickle(body));
        assert!(
            message.ends_with(&format!(
                ": byte offset {offset}: opcode {opcode} is not allowed in a data-only \
                 snapshot (it imports, calls or fetches objects)"
            )),
            "{message}"
        );
    }
}

#[test]
fn hostile_structures_are_errors_not_crashes() {
    // 100 000 nested lists, built with EMPTY_LIST/APPEND and with MARK/LIST.
    let deep = [vec![b']'; 100_000], vec![b'a'; 99_999]].concat();
    assert!(error_for(&pickle(&deep)).contains("deeper than 100 levels"));
    let marks = [vec![b'('; 100_000], vec![b'l'; 100_000]].concat();
    assert!(error_for(&pickle(&marks)).contains("more than 64 nested MARKs"));
    // A length field claiming 2^60 bytes.
    let claim = [b"\x8d".as_slice(), &(1u64 << 60).to_le_bytes(), b"abc"].concat();
    let message = error_for(&pickle(&claim));
    assert!(
        message.contains("byte offset 2: opcode 0x8d BINUNICODE8 claims 1152921504606846976 bytes"),
        "{message}"
    );
    // Memo get before put, a self-referencing list.
    assert!(error_for(&pickle(b"h\x00")).contains("memo index 0 before anything was stored"));
    assert!(error_for(&pickle(b"]\x94h\x00a")).contains("(cyclic pickle)"));
    // Stack underflow, truncation, an unknown opcode, STOP missing.
    assert!(error_for(&pickle(b"a")).contains("stack underflow"));
    assert!(error_for(b"\x80\x04\x8c\x10abc").contains("truncated"));
    assert!(error_for(&pickle(b"\xfa")).contains("byte 0xfa is not a pickle opcode"));
    assert!(error_for(b"\x80\x04N").contains("ends without a STOP"));
    // Not a snapshot: the root is an int.
    assert!(error_for(&pickle(b"K\x01")).contains("holds an int, not a snapshot"));
}

#[test]
fn hostile_sharing_cannot_multiply_rows_or_text() {
    // {"segments": [s, s]}: one segment dict reached twice would repeat its rows.
    let twice = pickle(b"}(\x8c\x08segments](}\x94\x8c\x06deviceK\x00sh\x00eu");
    let message = error_for(&twice);
    assert!(
        message.contains("segments[1] is an object already read at another place"),
        "{message}"
    );
    // "Billion laughs": l0 = [1], l(i+1) = [l(i), l(i)], 40 levels under an unknown key.
    let mut body = b"}(\x8c\x08segments]\x8c\x06extras]K\x01a\x940".to_vec();
    for level in 0u32..40 {
        body.extend(b"](j");
        body.extend(level.to_le_bytes());
        body.push(b'j');
        body.extend(level.to_le_bytes());
        body.extend(b"e\x940");
    }
    body.push(b'j');
    body.extend(40u32.to_le_bytes());
    body.push(b'u');
    assert!(error_for(&pickle(&body)).contains("expand far beyond the file's size"));
}

#[test]
fn truncated_real_snapshots_fail_cleanly() {
    for name in [
        "cuda_small_cpp_frames.pickle",
        "cuda_transformer_forward.pickle",
    ] {
        let data = std::fs::read(real(name)).unwrap();
        for sixteenth in 1..16 {
            let cut = data.len() * sixteenth / 16;
            let message = error_for(&data[..cut]);
            assert!(
                message.contains("truncated"),
                "{name} cut at {cut}: {message}"
            );
        }
    }
}

#[test]
fn random_bytes_fail_cleanly() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..60 {
        let len = (next() % 300) as usize;
        let noise: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Half raw noise, half noise behind a valid header.
        let data = if round % 2 == 0 {
            noise
        } else {
            pickle(&noise)
        };
        // Random data may by chance be a valid pickle; it must never panic.
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &data).unwrap();
        if let Err(e) = read_snapshot(file.path(), "noise") {
            assert!(e.to_string().contains(": "), "{e}");
        }
    }
}
