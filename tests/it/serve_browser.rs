//! `memq serve` in a real browser: headless Chromium driven through the DevTools protocol
//! (the `headless_chrome` crate) against the memq binary serving the bundled example and a real
//! snapshot. The page must load without a console error, ask nothing of any host but the
//! server, redraw on a wheel zoom with new /api/timeline answers, open the moment and the top
//! block with its stack on a click at the peak, run and refuse SQL in the console, and draw
//! something at 1400 and 800 px. Skipped when Chromium is not installed (.ci/run installs it).
//! Screenshots are also copied to /tmp/serve-shots/ for a person to look at.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::{Emulation, Input, Log, Network, Page};
use headless_chrome::{Browser, LaunchOptions, Tab};
use serde_json::Value;

use crate::common::{fixture, memq, real_fixture};

fn chromium() -> Option<PathBuf> {
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// A running `memq serve`; killed when dropped.
struct Server {
    child: Child,
    /// The URL it printed, with the token.
    url: String,
    /// `http://127.0.0.1:PORT`
    origin: String,
    stderr: Arc<Mutex<String>>,
    _cache: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(input: &Path) -> Server {
    let cache = tempfile::tempdir().unwrap();
    let mut child = memq()
        .arg("serve")
        .arg(input)
        .args(["--no-open", "--port", "0"])
        .env("XDG_CACHE_HOME", cache.path())
        .env_remove("BROWSER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start memq serve");
    let stderr = Arc::new(Mutex::new(String::new()));
    {
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        let _ = tx.send(line);
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    // the first line of stdout is the URL, once the inputs are opened (ingest in a debug build)
    let line = rx
        .recv_timeout(Duration::from_secs(600))
        .unwrap_or_default();
    let url = line.trim().to_string();
    if !url.starts_with("http://127.0.0.1:") || !url.contains("token=") {
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(200));
        panic!(
            "memq serve printed {line:?} instead of its URL; stderr:\n{}",
            stderr.lock().unwrap()
        );
    }
    let origin = url.split("/?").next().unwrap().to_string();
    Server {
        child,
        url,
        origin,
        stderr,
        _cache: cache,
    }
}

/// A plain HTTP/1.1 GET without any cookie: (status, body).
fn raw_get(origin: &str, path: &str) -> (u16, String) {
    let host = origin.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// What the page said and asked while it was driven.
#[derive(Default)]
struct Seen {
    /// Console errors and warnings, exceptions, failed loads: "kind: text (url)".
    problems: Vec<String>,
    /// Every URL the page requested.
    requests: Vec<String>,
}

struct Session {
    _browser: Browser,
    tab: Arc<Tab>,
    seen: Arc<Mutex<Seen>>,
    _profile: tempfile::TempDir,
}

fn open_browser(bin: &Path) -> Session {
    let profile = tempfile::tempdir().unwrap();
    let args: Vec<&OsStr> = [
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        "--disable-background-networking",
        "--force-device-scale-factor=1",
        "--lang=en-US",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    let browser = Browser::new(LaunchOptions {
        headless: true,
        sandbox: false,
        path: Some(bin.to_path_buf()),
        window_size: Some((1400, 900)),
        user_data_dir: Some(profile.path().to_path_buf()),
        idle_browser_timeout: Duration::from_secs(600),
        args,
        ..Default::default()
    })
    .expect("start chromium");
    let tab = browser.new_tab().expect("a tab");
    tab.set_default_timeout(Duration::from_secs(60));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sink = seen.clone();
    tab.add_event_listener(Arc::new(move |event: &Event| {
        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            Event::RuntimeConsoleAPICalled(e) => {
                let kind = format!("{:?}", e.params.Type).to_lowercase();
                if kind.contains("error") || kind.contains("warn") || kind.contains("assert") {
                    let args: Vec<String> = e
                        .params
                        .args
                        .iter()
                        .map(|a| {
                            a.value
                                .as_ref()
                                .map(|v| v.to_string())
                                .or_else(|| a.description.clone())
                                .unwrap_or_default()
                        })
                        .collect();
                    s.problems
                        .push(format!("console.{kind}: {}", args.join(" ")));
                }
            }
            Event::RuntimeExceptionThrown(e) => {
                let d = &e.params.exception_details;
                let what = d
                    .exception
                    .as_ref()
                    .and_then(|x| x.description.clone())
                    .unwrap_or_else(|| d.text.clone());
                s.problems.push(format!("exception: {what}"));
            }
            Event::LogEntryAdded(e) => {
                let en = &e.params.entry;
                let level = format!("{:?}", en.level).to_lowercase();
                if level.contains("error") || level.contains("warn") {
                    s.problems.push(format!(
                        "log {level} {:?}: {} ({})",
                        en.source,
                        en.text,
                        en.url.clone().unwrap_or_default()
                    ));
                }
            }
            Event::NetworkRequestWillBeSent(e) => {
                s.requests.push(e.params.request.url.clone());
            }
            _ => {}
        }
    }))
    .unwrap();
    tab.call_method(Network::Enable {
        max_total_buffer_size: None,
        max_resource_buffer_size: None,
        max_post_data_size: None,
        report_direct_socket_traffic: None,
        enable_durable_messages: None,
    })
    .unwrap();
    tab.call_method(Log::Enable(None)).unwrap();
    tab.enable_runtime().unwrap();
    set_size(&tab, 1400, 900);
    Session {
        _browser: browser,
        tab,
        seen,
        _profile: profile,
    }
}

fn set_size(tab: &Tab, width: u32, height: u32) {
    tab.call_method(Emulation::SetDeviceMetricsOverride {
        width,
        height,
        device_scale_factor: 1.0,
        mobile: false,
        scale: None,
        screen_width: None,
        screen_height: None,
        position_x: None,
        position_y: None,
        dont_set_visible_size: None,
        screen_orientation: None,
        viewport: None,
        display_feature: None,
        device_posture: None,
    })
    .unwrap();
}

/// The value of a JS expression, as JSON (the expression may be a promise).
fn js(tab: &Tab, expr: &str) -> Value {
    let wrapped = format!("(async () => JSON.stringify(await ({expr})))()");
    let r = tab
        .evaluate(&wrapped, true)
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    match r.value {
        Some(Value::String(s)) => serde_json::from_str(&s).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

fn wait_for(tab: &Tab, what: &str, expr: &str, secs: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(secs) {
        if js(tab, expr) == Value::Bool(true) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "timed out after {secs} s waiting for {what} ({expr}); page state: {}",
        js(tab, "({ready: document.body.dataset.ready, banner: document.getElementById('banner-text').textContent, counts: {...document.body.dataset}})")
    );
}

fn counter(tab: &Tab, name: &str) -> i64 {
    js(tab, &format!("Number(document.body.dataset.{name} || 0)"))
        .as_i64()
        .unwrap_or(0)
}

fn mouse(
    tab: &Tab,
    kind: Input::DispatchMouseEventTypeOption,
    x: f64,
    y: f64,
    delta_y: Option<f64>,
) {
    let pressed = matches!(
        kind,
        Input::DispatchMouseEventTypeOption::MousePressed
            | Input::DispatchMouseEventTypeOption::MouseReleased
    );
    tab.call_method(Input::DispatchMouseEvent {
        Type: kind,
        x,
        y,
        modifiers: None,
        timestamp: None,
        button: Some(if pressed {
            Input::MouseButton::Left
        } else {
            Input::MouseButton::None
        }),
        buttons: None,
        click_count: if pressed { Some(1) } else { None },
        force: None,
        tangential_pressure: None,
        tilt_x: None,
        tilt_y: None,
        twist: None,
        delta_x: delta_y.map(|_| 0.0),
        delta_y,
        pointer_Type: None,
    })
    .unwrap();
}

fn click(tab: &Tab, x: f64, y: f64) {
    use Input::DispatchMouseEventTypeOption as M;
    mouse(tab, M::MouseMoved, x, y, None);
    mouse(tab, M::MousePressed, x, y, None);
    mouse(tab, M::MouseReleased, x, y, None);
}

fn key(tab: &Tab, key: &str, code: &str, vk: u32, modifiers: Option<u32>, text: Option<&str>) {
    // a key that types uses keyDown (key and char events), one that does not rawKeyDown
    let down_kind = if text.is_some() {
        Input::DispatchKeyEventTypeOption::KeyDown
    } else {
        Input::DispatchKeyEventTypeOption::RawKeyDown
    };
    for kind in [down_kind, Input::DispatchKeyEventTypeOption::KeyUp] {
        let down = !matches!(kind, Input::DispatchKeyEventTypeOption::KeyUp);
        tab.call_method(Input::DispatchKeyEvent {
            Type: kind,
            modifiers,
            timestamp: None,
            text: if down { text.map(str::to_string) } else { None },
            unmodified_text: if down { text.map(str::to_string) } else { None },
            key_identifier: None,
            code: Some(code.to_string()),
            key: Some(key.to_string()),
            windows_virtual_key_code: Some(vk),
            native_virtual_key_code: Some(vk),
            auto_repeat: None,
            is_keypad: None,
            is_system_key: None,
            location: None,
            commands: None,
        })
        .unwrap();
    }
}

/// A key that types a character (page shortcuts: t, f, c, s, 0, …).
fn press(tab: &Tab, ch: char) {
    let up = ch.to_ascii_uppercase();
    let code = if ch.is_ascii_digit() {
        format!("Digit{ch}")
    } else {
        format!("Key{up}")
    };
    key(
        tab,
        &ch.to_string(),
        &code,
        up as u32,
        None,
        Some(&ch.to_string()),
    );
}

fn type_text(tab: &Tab, text: &str) {
    tab.call_method(Input::InsertText {
        text: text.to_string(),
    })
    .unwrap();
}

/// Client coordinates of the chart's pixel for a relative x, from the plot the page drew.
fn chart_point(tab: &Tab, x_rel: f64) -> (f64, f64) {
    let v = js(
        tab,
        &format!(
            "(() => {{ const c = document.getElementById('chart'), r = c.getBoundingClientRect(), d = c.dataset;
               return {{ x: r.left + Number(d.plotLeft) + ({x_rel} - Number(d.x0)) / (Number(d.x1) - Number(d.x0)) * Number(d.plotWidth),
                         y: r.top + r.height * 0.45 }}; }})()"
        ),
    );
    (v["x"].as_f64().unwrap(), v["y"].as_f64().unwrap())
}

/// A screenshot, checked to be more than one colour, kept in `dir` and /tmp/serve-shots/.
fn screenshot(tab: &Tab, dir: &Path, name: &str, width: u32, height: u32) -> PathBuf {
    set_size(tab, width, height);
    std::thread::sleep(Duration::from_millis(700)); // the page lays out and redraws
    let png = tab
        .capture_screenshot(Page::CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: not a PNG");
    // no PNG decoder here: a blank page compresses to a few KB of a handful of byte values
    let distinct = {
        let mut seen = [false; 256];
        png.iter().for_each(|b| seen[*b as usize] = true);
        seen.iter().filter(|s| **s).count()
    };
    assert!(
        png.len() > 15_000 && distinct > 200,
        "{name}: the screenshot looks blank ({} bytes, {distinct} distinct byte values)",
        png.len()
    );
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    let _ = std::fs::create_dir_all("/tmp/serve-shots");
    let _ = std::fs::write(
        Path::new("/tmp/serve-shots").join(format!("{name}.png")),
        &png,
    );
    path
}

/// The chart canvas holds more than a few colours (something is drawn on it).
fn chart_drawn(tab: &Tab) -> bool {
    js(
        tab,
        "(() => { const c = document.getElementById('chart'), o = document.createElement('canvas'); o.width = c.width; o.height = c.height;
                  const x = o.getContext('2d', {willReadFrequently: true}); x.drawImage(c, 0, 0); const d = x.getImageData(0, 0, o.width, o.height).data;
                  const s = new Set(); for (let i = 0; i < d.length; i += 4 * 7) s.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2] | (d[i + 3] << 24)); return s.size; })()",
    )
    .as_i64()
    .unwrap_or(0)
        > 8
}

fn same_origin(seen: &Seen, origin: &str) {
    for u in &seen.requests {
        assert!(
            u.starts_with(&format!("{origin}/")) || u.starts_with("data:"),
            "the page asked another host: {u}"
        );
    }
}

/// Loads the page, waits for the first timeline, returns /api/info and the series drawn.
fn load(p: &Session, server: &Server) -> (Value, Value) {
    p.tab.navigate_to(&server.url).unwrap();
    p.tab.wait_until_navigated().unwrap();
    wait_for(
        &p.tab,
        "the first timeline",
        "document.body.dataset.ready === '1'",
        180,
    );
    let info = js(
        &p.tab,
        "fetch('/api/info', {credentials: 'same-origin'}).then(r => r.json())",
    );
    let shown = js(&p.tab, "document.getElementById('chart').dataset.series");
    let series = info["series"]
        .as_array()
        .expect("/api/info lists series")
        .iter()
        .find(|s| s["id"] == shown)
        .cloned()
        .expect("the chart shows a series of /api/info");
    // the token left the address bar; the cookie carries the session
    let href = js(&p.tab, "location.href");
    assert!(
        !href.as_str().unwrap_or("").contains("token="),
        "token still in {href}"
    );
    assert!(chart_drawn(&p.tab), "the chart is blank");
    (info, series)
}

/// Clicks the chart at the series' peak; waits for the moment and the top block.
fn click_peak(p: &Session, series: &Value) -> Value {
    let tab = &p.tab;
    let peak = series["peak"]["x_rel"]
        .as_f64()
        .or_else(|| series["x_max_rel"].as_f64().map(|x| x / 2.0))
        .unwrap();
    let (moments, blocks) = (
        counter(tab, "momentRequests"),
        counter(tab, "blockRequests"),
    );
    let (x, y) = chart_point(tab, peak);
    click(tab, x, y);
    wait_for(
        tab,
        "the moment",
        &format!("Number(document.body.dataset.momentRequests) > {moments} && !document.getElementById('moment').hidden"),
        120,
    );
    let id = series["id"].as_str().unwrap();
    let x_rel = js(
        tab,
        "Number(new URLSearchParams(location.hash.split('?')[1]).get('x'))",
    );
    let moment = js(
        tab,
        &format!(
            "fetch('/api/moment?series={id}&x={}').then(r => r.json())",
            x_rel
        ),
    );
    let top = moment["blocks"]
        .as_array()
        .and_then(|b| b.iter().max_by_key(|b| b["size"].as_i64().unwrap_or(0)))
        .cloned();
    if let Some(top) = top {
        wait_for(
            tab,
            "the top block's detail",
            &format!("Number(document.body.dataset.blockRequests) > {blocks} && !document.getElementById('block').hidden"),
            120,
        );
        let listed = js(tab, "document.querySelector('#blocks tbody tr').dataset.id");
        let top_size = top["size"].as_i64().unwrap();
        let listed_size = moment["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == listed)
            .and_then(|b| b["size"].as_i64());
        assert_eq!(
            listed_size,
            Some(top_size),
            "the first row is not the largest block"
        );
        let detail = js(
            tab,
            &format!("fetch('/api/block?series={id}&id=' + encodeURIComponent({listed})).then(r => r.json())"),
        );
        let shown: Vec<String> = serde_json::from_value(js(
            tab,
            "[...document.querySelectorAll('#block-alloc-stack li')].map(li => li.textContent)",
        ))
        .unwrap();
        let stack: Vec<String> = detail["alloc_stack"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if stack.is_empty() {
            assert_eq!(shown, vec!["no stack recorded".to_string()]);
        } else {
            assert_eq!(shown, stack, "the alloc stack shown is not the block's");
        }
        let facts = js(tab, "document.getElementById('block-facts').textContent");
        assert!(
            facts.as_str().unwrap().contains(&fmt_bytes(top_size)),
            "the block's size is not shown: {facts}"
        );
    }
    moment
}

/// Clicks the first listed block that has an allocation stack; checks the stack shown. False
/// when no listed block has one.
fn click_block_with_stack(p: &Session, series: &Value, moment: &Value) -> bool {
    let tab = &p.tab;
    let id = series["id"].as_str().unwrap();
    let listed: Vec<String> = serde_json::from_value(js(
        tab,
        "[...document.querySelectorAll('#blocks tbody tr')].map(tr => tr.dataset.id).filter(Boolean)",
    ))
    .unwrap_or_default();
    assert!(
        listed.len() <= moment["blocks"].as_array().map_or(0, |b| b.len()),
        "more rows than blocks"
    );
    for block in listed {
        let quoted = Value::String(block.clone());
        let detail = js(
            tab,
            &format!("fetch('/api/block?series={id}&id=' + encodeURIComponent({quoted})).then(r => r.json())"),
        );
        let stack: Vec<String> = detail["alloc_stack"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if stack.is_empty() {
            continue;
        }
        let before = counter(tab, "blockRequests");
        let at = js(
            tab,
            &format!(
                "(() => {{ const tr = [...document.querySelectorAll('#blocks tbody tr')].find(tr => tr.dataset.id === {quoted});
                   tr.scrollIntoView({{block: 'center'}}); const r = tr.getBoundingClientRect(); return {{x: r.left + r.width / 2, y: r.top + r.height / 2}}; }})()"
            ),
        );
        click(tab, at["x"].as_f64().unwrap(), at["y"].as_f64().unwrap());
        wait_for(
            tab,
            "the clicked block's detail",
            &format!("Number(document.body.dataset.blockRequests) > {before} && document.querySelector('#blocks tr.selected') && document.querySelector('#blocks tr.selected').dataset.id === {quoted}"),
            60,
        );
        let shown: Vec<String> = serde_json::from_value(js(
            tab,
            "[...document.querySelectorAll('#block-alloc-stack li')].map(li => li.textContent)",
        ))
        .unwrap();
        assert_eq!(shown, stack, "the alloc stack shown is not block {block}'s");
        return true;
    }
    false
}

/// Shows another series with the picker; waits for its first timeline.
fn pick_series(tab: &Tab, id: &str) {
    let before = counter(tab, "timelineRequests");
    js(
        tab,
        &format!("(() => {{ const s = document.getElementById('series'); s.value = {}; s.dispatchEvent(new Event('change')); }})()", Value::String(id.into())),
    );
    wait_for(
        tab,
        "the other series",
        &format!("Number(document.body.dataset.timelineRequests) > {before} && document.getElementById('chart').dataset.series === {}", Value::String(id.into())),
        60,
    );
}

/// The page's byte format: 2 decimals in KiB/MiB/GiB…
fn fmt_bytes(n: i64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n.unsigned_abs() as f64;
    if v < 1024.0 {
        return format!("{n} B");
    }
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{}{v:.2} {}", if n < 0 { "-" } else { "" }, units[i])
}

#[test]
fn serve_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIP serve_in_headless_chromium: chromium is not installed (apt-get install -y chromium; .ci/run installs it)");
        return;
    };
    let shots = tempfile::tempdir().unwrap();
    let server = serve(&fixture("memscope/g3_run"));

    // without the token or its cookie: refused
    assert_eq!(
        raw_get(&server.origin, "/api/info").0,
        403,
        "/api/info without a cookie"
    );
    assert_eq!(raw_get(&server.origin, "/").0, 403, "/ without the token");
    assert_eq!(
        raw_get(&server.origin, "/assets/app.js").0,
        403,
        "an asset without the token"
    );

    let p = open_browser(&bin);
    let tab = &p.tab;
    let (info, series) = load(&p, &server);
    assert!(!info["series"].as_array().unwrap().is_empty());

    // a wheel zoom asks for new buckets and redraws
    let before = counter(tab, "timelineRequests");
    let range = js(tab, "document.getElementById('range').textContent");
    let (cx, cy) = chart_point(tab, series["x_max_rel"].as_f64().unwrap() * 0.4);
    mouse(
        tab,
        Input::DispatchMouseEventTypeOption::MouseMoved,
        cx,
        cy,
        None,
    );
    mouse(
        tab,
        Input::DispatchMouseEventTypeOption::MouseWheel,
        cx,
        cy,
        Some(-400.0),
    );
    wait_for(
        tab,
        "a redraw after the zoom",
        &format!("Number(document.body.dataset.timelineRequests) > {before}"),
        60,
    );
    assert_ne!(
        js(tab, "document.getElementById('range').textContent"),
        range,
        "the view did not change"
    );
    assert!(chart_drawn(tab), "the zoomed chart is blank");
    // `0`: the whole run again
    let before = counter(tab, "timelineRequests");
    press(tab, '0');
    wait_for(
        tab,
        "the whole run",
        &format!("Number(document.body.dataset.timelineRequests) > {before}"),
        60,
    );

    // a click at the peak: the moment, the largest live block first, its stack
    let moment = click_peak(&p, &series);
    assert!(moment["total_bytes"].as_i64().is_some(), "{moment}");
    screenshot(tab, shots.path(), "g3-timeline-1400", 1400, 900);
    set_size(tab, 1400, 900);
    // the PyTorch pool of a device: its blocks carry Python stacks (python_trace)
    let pta = info["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"].as_str().is_some_and(|l| l.contains("PTA")))
        .cloned()
        .expect("a PTA series in g3_run");
    pick_series(tab, pta["id"].as_str().unwrap());
    let moment = click_peak(&p, &pta);
    assert!(
        click_block_with_stack(&p, &pta, &moment),
        "no block listed at the PTA peak has an allocation stack"
    );
    screenshot(tab, shots.path(), "g3-pta-block-1400", 1400, 900);
    screenshot(tab, shots.path(), "g3-timeline-800", 800, 1400);
    set_size(tab, 1400, 900);

    // findings: cards; "show" goes back to the timeline
    press(tab, 'f');
    wait_for(
        tab,
        "the findings",
        "document.querySelectorAll('#finding-list .card').length > 0 || /No findings/.test(document.getElementById('finding-list').textContent)",
        120,
    );
    screenshot(tab, shots.path(), "g3-findings-1400", 1400, 900);
    set_size(tab, 1400, 900);

    // the SQL console: completion, a query with rows, a refused statement
    press(tab, 's');
    wait_for(tab, "the SQL tab", "!document.getElementById('sql-view').hidden && document.activeElement === document.getElementById('sql')", 30);
    wait_for(
        tab,
        "the catalog",
        "document.querySelectorAll('#catalog-list details').length > 0",
        60,
    );
    // Tab after FROM: relations only; the common prefix, then a list (peaks, peak_blocks, …)
    type_text(tab, "SELECT device, pool, peak_bytes FROM pea");
    key(tab, "Tab", "Tab", 9, None, None);
    wait_for(
        tab,
        "the completion list",
        "/FROM peak/.test(document.getElementById('sql').value) && !document.getElementById('sql-complete').hidden",
        10,
    );
    type_text(tab, "s");
    key(tab, "Tab", "Tab", 9, None, None);
    wait_for(
        tab,
        "the completion",
        "/FROM peaks$/.test(document.getElementById('sql').value) && document.getElementById('sql-complete').hidden",
        10,
    );
    let runs = counter(tab, "sqlRequests");
    key(tab, "Enter", "Enter", 13, Some(2), None); // Ctrl-Enter
    wait_for(
        tab,
        "the SQL result",
        &format!("Number(document.body.dataset.sqlRequests) > {runs}"),
        120,
    );
    let result = js(
        tab,
        "({rows: document.querySelectorAll('#sql-result tbody tr').length, head: document.querySelector('#sql-result thead') ? document.querySelector('#sql-result thead').textContent : '', error: document.getElementById('sql-error').hidden ? null : document.getElementById('sql-error').textContent})",
    );
    assert_eq!(result["error"], Value::Null, "{result}");
    assert!(result["rows"].as_i64().unwrap() > 0, "no rows: {result}");
    assert!(
        result["head"].as_str().unwrap().contains("peak_bytes"),
        "{result}"
    );
    assert!(
        js(
            tab,
            "document.getElementById('sql-csv').getAttribute('href')"
        )
        .as_str()
        .is_some_and(|h| h.starts_with("/api/sql.csv?sql=")),
        "no CSV link"
    );
    screenshot(tab, shots.path(), "g3-sql-1400", 1400, 900);
    set_size(tab, 1400, 900);

    let target = shots.path().join("x.csv");
    let copy = format!("COPY (SELECT 1) TO '{}'", target.display());
    js(
        tab,
        &format!("(() => {{ const t = document.getElementById('sql'); t.value = {}; t.dispatchEvent(new Event('input')); }})()", Value::String(copy)),
    );
    let runs = counter(tab, "sqlRequests");
    js(tab, "document.getElementById('sql-run').click()");
    wait_for(
        tab,
        "the refusal",
        &format!("Number(document.body.dataset.sqlRequests) > {runs}"),
        60,
    );
    let refusal = js(
        tab,
        "document.getElementById('sql-error').hidden ? null : document.getElementById('sql-error').textContent",
    );
    assert!(
        refusal.as_str().is_some_and(|t| !t.trim().is_empty()),
        "COPY was not refused on the page: {refusal}"
    );
    assert!(!target.exists(), "COPY wrote {}", target.display());
    screenshot(tab, shots.path(), "g3-sql-error-800", 800, 900);

    // everything the page asked went to the server; nothing went wrong on the page
    let resources = js(
        tab,
        "performance.getEntriesByType('resource').map(e => e.name)",
    );
    let seen = p.seen.lock().unwrap_or_else(|e| e.into_inner());
    same_origin(&seen, &server.origin);
    for u in resources.as_array().unwrap() {
        let u = u.as_str().unwrap();
        assert!(
            u.starts_with(&format!("{}/", server.origin)) || u.starts_with("data:"),
            "resource from elsewhere: {u}"
        );
    }
    assert!(
        seen.requests.iter().any(|u| u.contains("/api/timeline?")),
        "no timeline request seen: {:?}",
        seen.requests
    );
    // the refused statement's 400 is the one failed load expected
    let problems: Vec<&String> = seen
        .problems
        .iter()
        .filter(|m| !(m.contains("status of 400") && m.contains("/api/sql")))
        .collect();
    assert!(
        problems.is_empty(),
        "the page reported problems: {problems:#?}\nserver stderr:\n{}",
        server.stderr.lock().unwrap()
    );
}

#[test]
fn serve_snapshot_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIP serve_snapshot_in_headless_chromium: chromium is not installed");
        return;
    };
    let shots = tempfile::tempdir().unwrap();
    let server = serve(&real_fixture(
        "snapshots/real/cuda_transformer_forward.pickle",
    ));
    let p = open_browser(&bin);
    let tab = &p.tab;
    let (_info, series) = load(&p, &server);
    assert_eq!(
        series["x"], "entry",
        "a snapshot is drawn over its trace entries"
    );
    let moment = click_peak(&p, &series);
    if moment["segments"].as_array().is_some_and(|s| !s.is_empty()) {
        wait_for(
            tab,
            "the segment map",
            "!document.getElementById('segments-section').hidden && document.querySelectorAll('#segments .seg').length > 0",
            30,
        );
        let n = js(tab, "document.querySelectorAll('#segments .seg').length");
        assert_eq!(
            n.as_u64(),
            Some(moment["segments"].as_array().unwrap().len() as u64)
        );
    } else {
        panic!("a snapshot's moment has no segments: {moment}");
    }
    screenshot(tab, shots.path(), "snapshot-timeline-1400", 1400, 900);
    screenshot(tab, shots.path(), "snapshot-timeline-800", 800, 1400);
    let seen = p.seen.lock().unwrap_or_else(|e| e.into_inner());
    same_origin(&seen, &server.origin);
    assert!(
        seen.problems.is_empty(),
        "the page reported problems: {:#?}\nserver stderr:\n{}",
        seen.problems,
        server.stderr.lock().unwrap()
    );
}
