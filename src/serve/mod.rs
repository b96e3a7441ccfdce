//! `memq serve`: the memory explorer in the browser (docs/serve.md). A local HTTP server (axum
//! on memq's tokio runtime) over one opened [`Dataset`]: the page (embedded, no CDN) asks for
//! timelines bucketed to its pixels, the state at a moment, a block, the findings, and runs
//! read-only SQL. Safe by default: it binds 127.0.0.1, every request needs the session token
//! (in the URL once, then a cookie), the Host and Origin headers must name the server itself (no
//! DNS rebinding), and the SQL console only reads the dataset's own tables.

mod data;
mod sql;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use memq_core::error::{MemqError, Result};
use serde_json::{json, Value};

use crate::api::{Dataset, OpenOptions};

/// What `memq serve` was asked.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub inputs: Vec<PathBuf>,
    /// 0: any free port.
    pub port: u16,
    /// The address to bind: 127.0.0.1 unless the user names another.
    pub host: String,
    /// Open the page in the user's browser.
    pub open: bool,
}

/// The server's state: the dataset, the token, what the page may be addressed as.
pub struct Served {
    pub ds: Dataset,
    token: String,
    /// `Host` values the server answers to (`127.0.0.1:PORT`, `localhost:PORT`, …).
    hosts: Vec<String>,
    pub series: Vec<data::Series>,
    pub marks: Vec<Value>,
    /// The report's findings, judged once (in the background from the start: the first paint
    /// does not wait for them).
    findings: tokio::sync::OnceCell<Value>,
}

impl Served {
    async fn findings(&self) -> Result<&Value> {
        self.findings.get_or_try_init(|| data::findings(self)).await
    }
}

type Shared = Arc<Served>;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const COOKIE: &str = "memq_token";

/// Opens the inputs, binds, prints the URL as the first line of stdout, opens the browser, and
/// serves until Ctrl-C.
pub async fn run(opts: ServeOptions) -> Result<()> {
    let ds = Dataset::open(&opts.inputs, &OpenOptions::with_progress()).await?;
    let listener = tokio::net::TcpListener::bind((opts.host.as_str(), opts.port))
        .await
        .map_err(|e| {
            MemqError::Usage(format!("cannot listen on {}:{}: {e}", opts.host, opts.port))
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| MemqError::Usage(format!("cannot listen: {e}")))?;
    let served = serve_state(ds, addr).await?;
    let url = format!("http://{}/?token={}", served.hosts[0], served.token);
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{url}");
        let _ = out.flush();
    }
    eprintln!(
        "memq: serving {} on {addr} (Ctrl-C stops; over SSH: ssh -L {port}:127.0.0.1:{port} HOST, then open the URL)",
        served.ds.path().display(),
        port = addr.port()
    );
    if opts.open {
        open_browser(&url);
    }
    let served = Arc::new(served);
    let judged = served.clone();
    tokio::spawn(async move {
        let _ = judged.findings().await;
    });
    let app = router(served);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| MemqError::Query(format!("the server stopped: {e}")))
}

/// The state of a server on `addr`: a fresh token, the hosts it answers to, the series.
pub async fn serve_state(ds: Dataset, addr: SocketAddr) -> Result<Served> {
    let port = addr.port();
    let mut hosts = vec![format!("{}:{port}", host_text(addr))];
    if addr.ip().is_loopback() {
        for h in ["127.0.0.1", "localhost", "[::1]"] {
            let h = format!("{h}:{port}");
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
    }
    let (series, marks) = data::discover(&ds).await?;
    Ok(Served {
        ds,
        token: new_token()?,
        hosts,
        series,
        marks,
        findings: tokio::sync::OnceCell::new(),
    })
}

fn host_text(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }
}

/// 128 random bits from the system, as hex.
fn new_token() -> Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| MemqError::io(std::path::Path::new("/dev/urandom"), e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn open_browser(url: &str) {
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| "xdg-open".into());
    if std::process::Command::new(&opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_err()
    {
        eprintln!("memq: could not start {opener}; open the URL above yourself");
    }
}

/// Every route, behind `guard`.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/", get(index))
        .route(
            "/assets/app.js",
            get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route("/api/info", get(info))
        .route("/api/timeline", get(timeline))
        .route("/api/moment", get(moment))
        .route("/api/block", get(block))
        .route("/api/findings", get(findings))
        .route("/api/catalog", get(catalog))
        .route("/api/compare", get(compare))
        .route("/api/sql", post(sql::run))
        .route("/api/sql.csv", get(sql::download_csv))
        .route("/api/sql.parquet", get(sql::download_parquet))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn asset(text: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], text).into_response()
}

/// An error as the page reads it: the status and `{"error": …}`.
pub fn fail(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

fn memq_fail(e: MemqError) -> Response {
    let status = match e {
        MemqError::Usage(_) => StatusCode::BAD_REQUEST,
        MemqError::Query(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    fail(status, e.to_string())
}

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

fn query_token(uri: &axum::http::Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v.to_string())
}

/// Equal in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The server's checks on every request: Host must be the server's own (a page of another
/// site that rebinds its name to 127.0.0.1 sends its own name); a cross-site Origin is refused;
/// the token comes in the URL (then set as a cookie, and the page reloaded without it) or the
/// cookie. Responses carry a Content-Security-Policy that keeps the page's requests on the
/// server, and are not cached.
async fn guard(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !s.hosts.iter().any(|h| h == host) {
        return fail(
            StatusCode::FORBIDDEN,
            format!("Host {host:?} is not this server"),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| s.hosts.iter().any(|h| h == o));
        if !ok {
            return fail(StatusCode::FORBIDDEN, "cross-origin request refused");
        }
    }
    let from_url = query_token(req.uri()).filter(|t| same(t, &s.token));
    let from_cookie = cookie_token(headers).filter(|t| same(t, &s.token));
    if from_url.is_none() && from_cookie.is_none() {
        return fail(
            StatusCode::FORBIDDEN,
            "a token is needed: open the URL memq serve printed",
        );
    }
    if from_url.is_some() && req.uri().path() == "/" {
        // The token leaves the address bar and the history: a cookie carries it from now on.
        let mut r = Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, "/")
            .body(Body::empty())
            .expect("a valid response");
        let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", s.token);
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        return r;
    }
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

async fn info(State(s): State<Shared>) -> Response {
    // the count once the findings are judged; null until then
    let findings = s
        .findings
        .get()
        .and_then(|f| f["findings"].as_array())
        .map(Vec::len);
    Json(json!({
        "input": s.ds.input(),
        "dataset": s.ds.path().display().to_string(),
        "version": env!("CARGO_PKG_VERSION"),
        "series": s.series.iter().map(data::Series::info).collect::<Vec<_>>(),
        "marks": s.marks,
        "findings": findings,
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct TimelineAsk {
    series: String,
    x0: Option<f64>,
    x1: Option<f64>,
    px: Option<usize>,
}

async fn timeline(State(s): State<Shared>, Query(q): Query<TimelineAsk>) -> Response {
    let Some(series) = s.series.iter().find(|x| x.id == q.series) else {
        return fail(StatusCode::NOT_FOUND, format!("no series {}", q.series));
    };
    let px = q.px.unwrap_or(800).clamp(1, 8192);
    let x0 = q.x0.unwrap_or(series.x_min_rel);
    let x1 = q.x1.unwrap_or(series.x_max_rel + 1.0).max(x0 + 1.0);
    match data::timeline(&s.ds, series, x0, x1, px).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => memq_fail(e),
    }
}

#[derive(serde::Deserialize)]
struct MomentAsk {
    series: String,
    x: f64,
}

async fn moment(State(s): State<Shared>, Query(q): Query<MomentAsk>) -> Response {
    let Some(series) = s.series.iter().find(|x| x.id == q.series) else {
        return fail(StatusCode::NOT_FOUND, format!("no series {}", q.series));
    };
    match data::moment(&s.ds, series, q.x, &s.marks).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => memq_fail(e),
    }
}

#[derive(serde::Deserialize)]
struct BlockAsk {
    series: String,
    id: String,
}

async fn block(State(s): State<Shared>, Query(q): Query<BlockAsk>) -> Response {
    let Some(series) = s.series.iter().find(|x| x.id == q.series) else {
        return fail(StatusCode::NOT_FOUND, format!("no series {}", q.series));
    };
    match data::block(&s.ds, series, &q.id).await {
        Ok(Some(v)) => Json(v).into_response(),
        Ok(None) => fail(StatusCode::NOT_FOUND, format!("no block {}", q.id)),
        Err(e) => memq_fail(e),
    }
}

async fn findings(State(s): State<Shared>) -> Response {
    match s.findings().await {
        Ok(v) => Json(v.clone()).into_response(),
        Err(e) => memq_fail(e),
    }
}

async fn catalog(State(s): State<Shared>) -> Response {
    Json(crate::api::catalog_json(&s.ds)).into_response()
}

#[derive(serde::Deserialize)]
struct CompareAsk {
    a: String,
    b: String,
    px: Option<usize>,
}

async fn compare(State(s): State<Shared>, Query(q): Query<CompareAsk>) -> Response {
    let find = |id: &str| s.series.iter().find(|x| x.id == id);
    let (Some(a), Some(b)) = (find(&q.a), find(&q.b)) else {
        return fail(StatusCode::NOT_FOUND, "no such series");
    };
    let px = q.px.unwrap_or(800).clamp(1, 8192);
    let whole = |x: &data::Series| (x.x_min_rel, x.x_max_rel + 1.0);
    let (a0, a1) = whole(a);
    let (b0, b1) = whole(b);
    match tokio::try_join!(
        data::timeline(&s.ds, a, a0, a1, px),
        data::timeline(&s.ds, b, b0, b1, px)
    ) {
        Ok((ta, tb)) => Json(json!({"a": ta, "b": tb, "align": "start"})).into_response(),
        Err(e) => memq_fail(e),
    }
}
