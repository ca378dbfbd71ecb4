//! A local HTTPS process that answers the Kubernetes list API from recorded
//! list responses (tests/fixtures/report/live/<resource>.json, as the API
//! server returns them: typed lists whose items carry no kind), with real
//! pagination (`limit`, opaque `continue` tokens, `remainingItemCount`) and
//! bearer-token authentication, plus a kubeconfig that reaches it through
//! a CA generated with rcgen.
//!
//! It also answers watches (`?watch=true`, as kube-rs watchers send after
//! their initial list): the response stays open, streaming the events the
//! test pushes with [`FakeApi::push_event`], until the client goes away.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

pub const TOKEN: &str = "test-token-7f3a";

/// How the fake API server misbehaves.
#[derive(Clone, Default)]
pub struct Behaviour {
    /// Resource plural answered with 403 Forbidden.
    pub forbid: Option<&'static str>,
    /// Read list responses from this directory instead of
    /// tests/fixtures/report/live.
    pub fixtures: Option<PathBuf>,
    /// Discovery (`/apis/GROUP...`) answers headers, then one byte every
    /// 5 s, forever.
    pub trickle_discovery: bool,
    /// Every list answers `items: []` with `continue: "again"`.
    pub endless_continue: bool,
    /// Every list answers a valid list padded to this many bytes.
    pub huge_lists: Option<usize>,
}

#[derive(Clone)]
struct AppState {
    fixtures: PathBuf,
    behaviour: Behaviour,
    requests: Arc<Mutex<Vec<String>>>,
    events: tokio::sync::broadcast::Sender<(String, String)>,
}

pub struct FakeApi {
    pub addr: SocketAddr,
    pub ca_pem: String,
    pub requests: Arc<Mutex<Vec<String>>>,
    events: tokio::sync::broadcast::Sender<(String, String)>,
    _runtime: std::thread::JoinHandle<()>,
}

impl FakeApi {
    pub fn start(behaviour: Behaviour) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let server_config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(server_config));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (events, _) = tokio::sync::broadcast::channel(64);
        let state = AppState {
            fixtures: behaviour.fixtures.clone().unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/live")
            }),
            behaviour,
            requests: Arc::clone(&requests),
            events: events.clone(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(tcp.local_addr().unwrap()).unwrap();
                let app = Router::new().fallback(answer).with_state(state);
                axum::serve(TlsListener { tcp, acceptor }, app)
                    .await
                    .unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        Self {
            addr,
            ca_pem: ca.pem(),
            requests,
            events,
            _runtime: handle,
        }
    }

    /// Writes a kubeconfig for this server into `dir`.
    pub fn kubeconfig(&self, dir: &Path, token: &str) -> PathBuf {
        kubeconfig_for(dir, &format!("https://{}", self.addr), &self.ca_pem, token)
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Sends a watch event (`ADDED`, `MODIFIED`, `DELETED`) with `object`
    /// to every open watch of `plural`.
    pub fn push_event(&self, plural: &str, kind: &str, object: &Value) {
        let line = format!("{}\n", json!({"type": kind, "object": object}));
        let _ = self.events.send((plural.to_owned(), line));
    }

    /// Open watch streams.
    pub fn watchers(&self) -> usize {
        self.events.receiver_count()
    }
}

/// A response body that streams watch events until the client hangs up.
struct WatchBody(tokio::sync::mpsc::UnboundedReceiver<Bytes>);

impl http_body::Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(http_body::Frame::data(b))))
    }
}

fn watch(state: &AppState, plural: &str) -> Response {
    let mut events = state.events.subscribe();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let plural = plural.to_owned();
    tokio::spawn(async move {
        while let Ok((p, line)) = events.recv().await {
            if p == plural && tx.send(Bytes::from(line)).is_err() {
                break;
            }
        }
    });
    (
        [("content-type", "application/json")],
        Body::new(WatchBody(rx)),
    )
        .into_response()
}

pub fn kubeconfig_for(dir: &Path, server: &str, ca_pem: &str, token: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: tester\n  user:\n    token: {token}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\ncurrent-context: fake\n",
        B64.encode(ca_pem)
    );
    std::fs::write(&path, text).unwrap();
    path
}

struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

async fn answer(State(state): State<AppState>, req: Request) -> Response {
    let uri = req.uri().clone();
    state.requests.lock().unwrap().push(
        uri.path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if !authorized {
        return status(401, "Unauthorized", "Unauthorized");
    }
    // /api/v1[/namespaces/NS]/PLURAL or /apis/G/V[/namespaces/NS]/PLURAL
    let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    // Discovery (/apis/G, /apis/G/V): from discovery.json, a map from path
    // to document, when the fixtures have one.
    if parts.first() == Some(&"apis")
        && (2..=3).contains(&parts.len())
        && state.behaviour.trickle_discovery
    {
        let stream = futures::stream::unfold(0u64, |n| async move {
            if n > 0 {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), n + 1))
        });
        return (
            [("content-type", "application/json")],
            axum::body::Body::from_stream(stream),
        )
            .into_response();
    }
    if parts.first() == Some(&"apis") && (2..=3).contains(&parts.len()) {
        let docs: Value = std::fs::read_to_string(state.fixtures.join("discovery.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(Value::Null);
        return match docs.get(uri.path()) {
            Some(doc) => axum::Json(doc.clone()).into_response(),
            None => status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        };
    }
    let rest = match parts.first() {
        Some(&"api") => &parts[2..],
        Some(&"apis") => &parts[3..],
        _ => {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        }
    };
    let (namespace, plural) = match rest {
        [plural] => (None, *plural),
        ["namespaces", ns, plural] => (Some(*ns), *plural),
        _ => {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        }
    };
    let group = if parts[0] == "api" { "" } else { parts[1] };
    let watching = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = if watching { "watch" } else { "list" };
    if state.behaviour.forbid == Some(plural) {
        let scope = namespace.map_or("at the cluster scope".to_owned(), |ns| {
            format!("in the namespace \"{ns}\"")
        });
        return status(
            403,
            "Forbidden",
            &format!(
                "{plural}{} is forbidden: User \"system:serviceaccount:ci:winadmit\" cannot {verb} resource \"{plural}\" in API group \"{group}\" {scope}",
                if group.is_empty() {
                    String::new()
                } else {
                    format!(".{group}")
                }
            ),
        );
    }
    if watching {
        return watch(&state, plural);
    }
    if state.behaviour.endless_continue {
        return (
            [("content-type", "application/json")],
            r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1","continue":"again"},"items":[]}"#,
        )
            .into_response();
    }
    if let Some(size) = state.behaviour.huge_lists {
        // A list whose one item carries a huge annotation, streamed in 1 MiB chunks.
        let head = r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"huge","annotations":{"pad":""#;
        let tail = r#""}}}]}"#;
        let chunks = size / (1 << 20) + 1;
        let stream = futures::stream::iter(
            std::iter::once(Bytes::from_static(head.as_bytes()))
                .chain((0..chunks).map(|_| Bytes::from(vec![b'x'; 1 << 20])))
                .chain(std::iter::once(Bytes::from_static(tail.as_bytes())))
                .map(Ok::<_, std::io::Error>),
        );
        return (
            [("content-type", "application/json")],
            axum::body::Body::from_stream(stream),
        )
            .into_response();
    }
    // A custom resource's list may be in PLURAL.GROUP.json (OpenKruise's
    // statefulsets are not the apps group's).
    let Ok(text) = std::fs::read_to_string(state.fixtures.join(format!("{plural}.{group}.json")))
        .or_else(|_| std::fs::read_to_string(state.fixtures.join(format!("{plural}.json"))))
    else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let mut list: Value = serde_json::from_str(&text).unwrap();
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    if let Some(ns) = namespace {
        items.retain(|i| i["metadata"]["namespace"] == ns);
    }
    let query: Vec<(String, String)> = uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), percent_decode(v)))
                .collect()
        })
        .unwrap_or_default();
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.clone());
    let limit = get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let start = match get("continue") {
        Some(token) => {
            let decoded: Value = serde_json::from_slice(&B64.decode(token).unwrap()).unwrap();
            decoded["start"].as_u64().unwrap() as usize
        }
        None => 0,
    };
    let end = start.saturating_add(limit).min(items.len());
    let page: Vec<Value> = items[start.min(items.len())..end].to_vec();
    list["items"] = Value::Array(page);
    if end < items.len() {
        let token =
            B64.encode(json!({"v": "meta.k8s.io/v1", "rv": 812999, "start": end}).to_string());
        list["metadata"]["continue"] = json!(token);
        list["metadata"]["remainingItemCount"] = json!(items.len() - end);
    }
    // Field order as the API server writes it: kind, apiVersion, metadata, items.
    let body = format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":{}}}",
        list["kind"], list["apiVersion"], list["metadata"], list["items"]
    );
    ([("content-type", "application/json")], body).into_response()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8(out).unwrap()
}
