//! `memq serve` over HTTP (docs/serve.md): the token, Host and Origin checks, the read-only
//! console, and the figures of the timeline, the moment and the block endpoints against the
//! canned analyses they must agree with. The page itself is tested in a browser
//! (serve_browser.rs).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use serde_json::{json, Value};

use crate::common::{fixture_root, memq};

/// A running `memq serve`, stopped when dropped.
struct Server {
    child: Child,
    port: u16,
    token: String,
    _cache: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(input: &std::path::Path) -> Server {
    serve_with(input, &[])
}

fn serve_with(input: &std::path::Path, env: &[(&str, &str)]) -> Server {
    let cache = tempfile::TempDir::new().unwrap();
    let mut child = memq()
        .args(["serve", "--no-open", "--port", "0"])
        .arg(input)
        .envs(env.iter().copied())
        .env("XDG_CACHE_HOME", cache.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("memq serve starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // http://127.0.0.1:PORT/?token=T
    let url = first.trim();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("the first line is the URL: {url:?}"));
    let (port, token) = rest.split_once("/?token=").expect("a token in the URL");
    Server {
        child,
        port: port.parse().unwrap(),
        token: token.to_string(),
        _cache: cache,
    }
}

/// One HTTP/1.1 request: (status, headers, body).
fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&str>,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    // the server sends fixed-length bodies; a chunked one would need decoding
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, head.to_string(), body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

impl Server {
    fn host(&self) -> (&'static str, String) {
        ("Host", format!("127.0.0.1:{}", self.port))
    }
    fn cookie(&self) -> (&'static str, String) {
        ("Cookie", format!("memq_token={}", self.token))
    }
    fn get(&self, path: &str) -> Value {
        let (status, _, body) =
            request(self.port, "GET", path, &[self.host(), self.cookie()], None);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }
    fn sql(&self, sql: &str) -> (u16, Value) {
        let body = json!({"sql": sql, "max_rows": 10000}).to_string();
        let (status, _, text) = request(
            self.port,
            "POST",
            "/api/sql",
            &[self.host(), self.cookie()],
            Some(&body),
        );
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

#[test]
fn token_host_and_origin_are_checked() {
    let s = serve(&fixture_root().join("fixtures/memscope/g3_run"));
    // no token, no cookie
    let (status, _, body) = request(s.port, "GET", "/api/info", &[s.host()], None);
    assert_eq!(status, 403, "{body}");
    let (status, _, _) = request(s.port, "GET", "/", &[s.host()], None);
    assert_eq!(status, 403);
    // a wrong token
    let (status, _, _) = request(
        s.port,
        "GET",
        "/api/info",
        &[s.host(), ("Cookie", "memq_token=00".into())],
        None,
    );
    assert_eq!(status, 403);
    // the URL's token becomes a cookie, and the page is reloaded without it
    let (status, head, _) = request(
        s.port,
        "GET",
        &format!("/?token={}", s.token),
        &[s.host()],
        None,
    );
    assert_eq!(status, 303, "{head}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains(&format!("set-cookie: memq_token={}", s.token)),
        "{head}"
    );
    assert!(
        head.contains("httponly") && head.contains("samesite=strict"),
        "{head}"
    );
    // the page and its assets with the cookie, with a policy that keeps requests local
    let (status, head, body) = request(s.port, "GET", "/", &[s.host(), s.cookie()], None);
    assert_eq!(status, 200);
    assert!(
        body.contains("<html") || body.contains("<!DOCTYPE"),
        "{body}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-security-policy: default-src 'self'"),
        "{head}"
    );
    // DNS rebinding: a page of another site reaching 127.0.0.1 sends its own name as Host
    let (status, _, _) = request(
        s.port,
        "GET",
        "/api/info",
        &[("Host", format!("evil.example:{}", s.port)), s.cookie()],
        None,
    );
    assert_eq!(status, 403);
    // a cross-site request
    let (status, _, _) = request(
        s.port,
        "GET",
        "/api/info",
        &[
            s.host(),
            s.cookie(),
            ("Origin", "http://evil.example".into()),
        ],
        None,
    );
    assert_eq!(status, 403);
    let (status, _, _) = request(
        s.port,
        "GET",
        "/api/info",
        &[
            s.host(),
            s.cookie(),
            ("Origin", format!("http://127.0.0.1:{}", s.port)),
        ],
        None,
    );
    assert_eq!(status, 200);
    // localhost names the same server
    let (status, _, _) = request(
        s.port,
        "GET",
        "/api/info",
        &[("Host", format!("localhost:{}", s.port)), s.cookie()],
        None,
    );
    assert_eq!(status, 200);
}

#[test]
fn the_console_only_reads_the_dataset() {
    let s = serve(&fixture_root().join("fixtures/memscope/g3_run"));
    for refused in [
        "COPY (SELECT 1) TO '/tmp/memq-serve-copy.csv'",
        "CREATE VIEW v AS SELECT 1",
        "DROP VIEW peaks",
        "SET datafusion.execution.batch_size = 1",
        "INSERT INTO events SELECT * FROM events",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM 'fixtures/memscope/g3_run/config.json'",
        "SELECT 1; DROP TABLE events",
    ] {
        let (status, v) = s.sql(refused);
        assert_eq!(status, 400, "{refused}: {v}");
        assert!(
            v["error"].as_str().unwrap_or("").contains("read-only"),
            "{refused}: {v}"
        );
    }
    assert!(!std::path::Path::new("/tmp/memq-serve-copy.csv").exists());
    // a query over a view, a table function and the information schema runs, with units
    let (status, v) = s.sql("SELECT device, pool, metric, peak_bytes FROM peaks WHERE metric = 'live' ORDER BY device, pool");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["columns"][3]["unit"], "bytes");
    assert!(v["total_rows"].as_u64().unwrap() >= 4);
    assert!(v["rows"][0][3].as_str().unwrap().ends_with("iB"), "{v}");
    let (status, v) =
        s.sql("SELECT owner, bytes FROM breakdown_at('peak', 'PTA') ORDER BY bytes DESC LIMIT 3");
    assert_eq!(status, 200, "{v}");
    let (status, v) = s.sql("SELECT count(*) AS n FROM information_schema.tables");
    assert_eq!(status, 200, "{v}");
    // a SQL error is the message memq gives, caret included
    let (status, v) = s.sql("SELECT nosuch FROM peaks");
    assert_eq!(status, 400);
    assert!(v["error"].as_str().unwrap().contains("nosuch"), "{v}");
}

#[test]
fn timeline_moment_and_block_agree_with_the_analyses() {
    let input = fixture_root().join("fixtures/memscope/g3_run");
    // the same answers whether a window is drawn from the curve's rows or from its tiles
    for rows in ["200000", "1"] {
        timeline_moment_and_block(&serve_with(&input, &[("MEMQ_SERVE_WINDOW_ROWS", rows)]));
    }
}

/// One metric of a timeline answer: (min, max, last) per bucket.
fn buckets(t: &Value, metric: &str) -> Vec<(Option<i64>, Option<i64>, Option<i64>)> {
    let m = &t["buckets"]["metrics"][metric];
    let col = |k: &str| -> Vec<Option<i64>> {
        m[k].as_array()
            .unwrap_or_else(|| panic!("{t}"))
            .iter()
            .map(Value::as_i64)
            .collect()
    };
    let (lo, hi, last) = (col("min"), col("max"), col("last"));
    (0..lo.len()).map(|i| (lo[i], hi[i], last[i])).collect()
}

#[test]
fn a_window_from_the_tiles_has_the_buckets_of_curve_buckets() {
    // every window drawn from the tiles (kept in memory once read): over the whole series at a
    // width dividing the tile count, a bucket is exactly a run of whole tiles, which is how
    // curve_buckets(n) folds them, so each bucket's min, max and last are its answer
    let input = fixture_root().join("fixtures/memscope/g3_run");
    let s = serve_with(&input, &[("MEMQ_SERVE_WINDOW_ROWS", "1")]);
    let info = s.get("/api/info");
    for x in info["series"].as_array().unwrap() {
        let (Some(id), Some(label)) = (x["id"].as_str(), x["label"].as_str()) else {
            continue;
        };
        let Some(pool) = label
            .strip_prefix("device 0 ")
            .and_then(|r| r.split(' ').next())
        else {
            continue;
        };
        for px in [288, 20] {
            let t = s.get(&format!(
                "/api/timeline?series={id}&x0=0&x1={}&px={px}",
                x["x_max_rel"]
            ));
            let (_, v) = s.sql(&format!(
                "SELECT min_bytes, max_bytes, last_bytes FROM curve_buckets({px}, '{pool}') \
                 WHERE device = '0' AND metric = 'live' AND points > 0 ORDER BY bucket"
            ));
            let want: Vec<_> = v["values"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .map(|r| (r[0].as_i64(), r[1].as_i64(), r[2].as_i64()))
                .collect();
            assert!(!want.is_empty(), "{label}");
            assert_eq!(buckets(&t, "live"), want, "{label} at {px} px");
        }
    }
}

fn timeline_moment_and_block(s: &Server) {
    let info = s.get("/api/info");
    let series = info["series"].as_array().unwrap();
    let pta = series
        .iter()
        .find(|x| x["label"].as_str().unwrap().starts_with("device 0 PTA"))
        .unwrap_or_else(|| panic!("{info}"));
    let id = pta["id"].as_str().unwrap();
    let peak = pta["peak"]["bytes"].as_i64().unwrap();
    // the peak the analyses give
    let (_, v) = s.sql("SELECT peak_bytes, peak_ts FROM peaks WHERE device = '0' AND pool = 'PTA' AND metric = 'live'");
    assert_eq!(v["values"][0][0].as_i64().unwrap(), peak);
    // the whole curve at 300 px: at most 300 buckets, the highest bucket max is the peak
    let t = s.get(&format!("/api/timeline?series={id}&px=300"));
    let max: Vec<i64> = t["buckets"]["metrics"]["live"]["max"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    assert!(!max.is_empty() && max.len() <= 300, "{}", max.len());
    assert_eq!(*max.iter().max().unwrap(), peak);
    // a zoomed window around the peak still holds it, and the value before its start
    let x = pta["peak"]["x_rel"].as_f64().unwrap();
    let z = s.get(&format!(
        "/api/timeline?series={id}&x0={}&x1={}&px=100",
        x - 1000.0,
        x + 1000.0
    ));
    let zmax = z["buckets"]["metrics"]["live"]["max"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_i64)
        .max();
    assert_eq!(zmax, Some(peak));
    assert!(z["before"]["live"].as_i64().is_some(), "{z}");
    // the moment at the peak: the live bytes there, by owner summing to them
    let m = s.get(&format!("/api/moment?series={id}&x={x}"));
    assert_eq!(m["total_bytes"].as_i64(), Some(peak), "{m}");
    let owners: i64 = m["by_owner"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(owners, peak);
    let top = &m["blocks"][0];
    assert!(top["size"].as_i64().unwrap() > 0, "{m}");
    // its block
    let b = s.get(&format!(
        "/api/block?series={id}&id={}",
        top["id"].as_str().unwrap()
    ));
    assert_eq!(b["size"], top["size"]);
    assert_eq!(b["ptr"], top["ptr"]);
    // the findings point at moments of existing series
    let f = s.get("/api/findings");
    let ids: Vec<&str> = series.iter().map(|x| x["id"].as_str().unwrap()).collect();
    let with_moment: Vec<&Value> = f["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| !x["moment"].is_null())
        .collect();
    assert!(!with_moment.is_empty(), "{f}");
    for x in with_moment {
        assert!(
            ids.contains(&x["moment"]["series"].as_str().unwrap()),
            "{x}"
        );
    }
    // an unknown series is a 404, not a crash
    let (status, _, _) = request(
        s.port,
        "GET",
        "/api/timeline?series=nope",
        &[s.host(), s.cookie()],
        None,
    );
    assert_eq!(status, 404);
}

#[test]
fn a_snapshot_has_its_timeline_and_segments() {
    let pickle =
        fixture_root().join("fixtures/real/snapshots/real/cuda_transformer_forward.pickle");
    let s = serve(&pickle);
    let info = s.get("/api/info");
    let snap = info["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["kind"] == "snapshot")
        .unwrap_or_else(|| panic!("{info}"));
    assert_eq!(snap["x"], "entry");
    let id = snap["id"].as_str().unwrap();
    // the true peak of snap_peak (17 602 723 840 B: docs/formats/snapshot.md §7.2)
    let (_, v) = s.sql("SELECT active_peak, active_peak_seq FROM snap_peak");
    let (active_peak, seq) = (
        v["values"][0][0].as_i64().unwrap(),
        v["values"][0][1].as_i64().unwrap(),
    );
    assert_eq!(active_peak, 17_602_723_840);
    assert_eq!(snap["peak"]["bytes"].as_i64(), Some(active_peak));
    let start = snap["start"].as_i64().unwrap();
    assert_eq!(snap["peak"]["x_rel"].as_f64(), Some((seq - start) as f64));
    // the stored curve is snap_timeline's, and its tiles are folded from it
    let (_, v) = s.sql(
        "SELECT (SELECT COUNT(*) FROM snap_timeline_points) AS n, \
         (SELECT COUNT(*) FROM (SELECT snapshot, device, seq, active_bytes, reserved_bytes \
           FROM snap_timeline EXCEPT SELECT * FROM snap_timeline_points)) AS d, \
         (SELECT COUNT(*) FROM snap_timeline) AS t",
    );
    let counts: Vec<i64> = (0..3)
        .map(|i| v["values"][0][i].as_i64().unwrap())
        .collect();
    assert_eq!((counts[0], counts[1]), (counts[2], 0), "{v}");
    let (_, v) = s.sql(
        "WITH t AS (SELECT snapshot, device, w.width, seq / w.width AS tile, \
           MIN(active_bytes) AS a0, MAX(active_bytes) AS a1, last_value(active_bytes ORDER BY seq) AS a2, \
           MIN(reserved_bytes) AS r0, MAX(reserved_bytes) AS r1, last_value(reserved_bytes ORDER BY seq) AS r2 \
           FROM snap_timeline CROSS JOIN (VALUES (CAST(8 AS BIGINT)), (CAST(64 AS BIGINT)), \
             (CAST(512 AS BIGINT)), (CAST(4096 AS BIGINT)), (CAST(32768 AS BIGINT)), \
             (CAST(262144 AS BIGINT))) w(width) \
           GROUP BY 1, 2, 3, 4) \
         SELECT COUNT(*) AS n FROM t FULL JOIN snap_timeline_tiles x ON x.snapshot = t.snapshot \
           AND x.device = t.device AND x.width = t.width AND x.tile = t.tile \
         WHERE x.tile IS NULL OR t.tile IS NULL OR x.active_max <> t.a1 OR x.active_min <> t.a0 \
            OR x.active_last <> t.a2 OR x.reserved_min <> t.r0 OR x.reserved_max <> t.r1 \
            OR x.reserved_last <> t.r2",
    );
    assert_eq!(v["values"][0][0].as_i64(), Some(0), "{v}");
    // the whole trace from the tiles (a few pixels) and from the entries (many): the highest
    // bucket is the peak either way
    for px in [2, 5, 500, 4000] {
        let t = s.get(&format!("/api/timeline?series={id}&px={px}"));
        let max = buckets(&t, "active").iter().filter_map(|b| b.1).max();
        assert_eq!(max, Some(active_peak), "{px} px");
    }
    // a window of entries: each bucket's entries as snap_timeline has them, the value before
    let (x0, x1) = (seq - start - 40, seq - start + 40);
    let t = s.get(&format!("/api/timeline?series={id}&x0={x0}&x1={x1}&px=80"));
    let (_, v) = s.sql(&format!(
        "SELECT active_bytes FROM snap_timeline WHERE device = 0 \
         AND seq >= {} AND seq < {} ORDER BY seq",
        start + x0 - 1,
        start + x1
    ));
    let want: Vec<Option<i64>> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_i64())
        .collect();
    assert_eq!(t["before"]["active"].as_i64(), want[0]);
    let got: Vec<Option<i64>> = buckets(&t, "active").iter().map(|b| b.1).collect();
    assert_eq!(got, want[1..]);
    let m = s.get(&format!(
        "/api/moment?series={id}&x={}",
        seq - snap["start"].as_i64().unwrap()
    ));
    // the requested bytes of the blocks live after the peak's entry are the active peak
    assert_eq!(m["total_bytes"].as_i64(), Some(active_peak));
    assert!(!m["segments"].as_array().unwrap().is_empty(), "{m}");
    assert!(!m["blocks"].as_array().unwrap().is_empty(), "{m}");
    // a block with a recorded stack (the largest ones here were put back by replay, without)
    let (status, v) = s.sql(&format!(
        "SELECT CAST(address AS BIGINT) AS a, stack_id FROM state_at({seq}, NULL, 0) \
         WHERE kind = 'block' AND stack_id IS NOT NULL ORDER BY size DESC LIMIT 1"
    ));
    assert_eq!(status, 200, "{v}");
    let block_id = format!("{}@{}@{seq}", v["values"][0][0], v["values"][0][1]);
    let b = s.get(&format!("/api/block?series={id}&id={block_id}"));
    assert!(b["size"].as_i64().unwrap() > 0, "{b}");
    assert!(!b["alloc_stack"].as_array().unwrap().is_empty(), "{b}");
}

#[test]
fn mem_state_at_a_time_agrees_with_the_same_instant_as_a_step() {
    // the moment of the explorer is a time (read with the time as a constant, pruned by the
    // blocks' and rows' statistics); a step resolves to its instant per series through a join:
    // the same instant gives the same rows either way
    let input = fixture_root().join("fixtures/memscope/g3_run");
    let s = serve(&input);
    let (_, v) = s.sql(
        "SELECT source, pid, device, CAST(end_ts AS BIGINT) FROM steps \
         WHERE step = 2 AND end_ts IS NOT NULL ORDER BY device LIMIT 1",
    );
    let r = &v["values"][0];
    let (source, pid, device, ts) = (
        r[0].as_str().unwrap(),
        r[1].as_i64().unwrap(),
        r[2].as_str().unwrap(),
        r[3].as_i64().unwrap(),
    );
    let rows = |at: &str| {
        let (status, v) = s.sql(&format!(
            "SELECT * FROM mem_state_at('{at}') WHERE source = '{source}' AND pid = {pid} \
             AND device = '{device}' ORDER BY pool, kind, owner, ptr, bytes"
        ));
        assert_eq!(status, 200, "{v}");
        v["values"].clone()
    };
    let by_time = rows(&ts.to_string());
    assert!(by_time.as_array().is_some_and(|a| a.len() > 3), "{by_time}");
    assert_eq!(by_time, rows("step 2 end"));
}
