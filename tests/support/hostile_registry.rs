//! A hostile registry (plain HTTP on loopback, a thread per connection)
//! for what the real one cannot be made to do: answers far larger than any
//! manifest, with a `Content-Length` that lies or none at all, a config
//! blob larger than its descriptor says, error pages that quote internal
//! data, token realms that point elsewhere, and a count of every request
//! and of the bytes it managed to send.
//!
//! Repositories (the first path segment after `/v2/`):
//!
//! - `huge-<MB>`: a manifest of `<MB>` megabytes, no `Content-Length`;
//! - `declared-<MB>`: the same with an honest `Content-Length`;
//! - `lying-<MB>`: an image manifest whose config descriptor says 1,000
//!   bytes; the blob streams `<MB>` megabytes with `Content-Length: 1000`
//!   absent (read to the end of the connection);
//! - `wide-<N>`: an image index of `<N>` distinct Windows platforms;
//! - `leak-<STATUS>`: `<STATUS>` with an HTML page naming users, and a
//!   forged log line after a newline;
//! - `realm-away`: 401 with a Bearer realm on another host's plain HTTP;
//! - `realm-home`: 401 with a Bearer realm on this host, whose token
//!   (`/token`) opens the index;
//! - anything else (`fan<i>`, ...): a Windows image index.
#![allow(dead_code)] // each test target uses a part

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The forged line a leaking registry's error page carries.
pub const FORGED: &str =
    "2026-01-01T00:00:00.000000Z  INFO admission review uid=forged verdict=\"allowed\"";
/// What a leaking registry's error page says.
pub const SECRET: &str = "user list: alice,bob";

pub struct Hostile {
    /// `host:port` as images name it.
    pub host: String,
    /// Request lines (`GET /v2/...`) in order.
    pub requests: Arc<Mutex<Vec<String>>>,
    /// Connections accepted.
    pub connections: Arc<AtomicUsize>,
    /// Body bytes written to clients (those the socket accepted).
    pub sent: Arc<AtomicU64>,
}

impl Hostile {
    /// Starts the registry; a Bearer realm of `realm-away` names `away`.
    pub fn start(away: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let me = Self {
            host: host.clone(),
            requests: Arc::default(),
            connections: Arc::default(),
            sent: Arc::default(),
        };
        let (requests, connections, sent) = (
            Arc::clone(&me.requests),
            Arc::clone(&me.connections),
            Arc::clone(&me.sent),
        );
        let away = away.to_owned();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                connections.fetch_add(1, Ordering::Relaxed);
                let (requests, sent, host, away) = (
                    Arc::clone(&requests),
                    Arc::clone(&sent),
                    host.clone(),
                    away.clone(),
                );
                std::thread::spawn(move || serve(stream, &requests, &sent, &host, &away));
            }
        });
        me
    }

    /// Requests whose line contains `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }
}

/// A listener that accepts and counts connections, and then does what
/// `then` says: `close` (a TLS client sees EOF), `silent` (never answers).
pub fn spy(then: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            c.fetch_add(1, Ordering::Relaxed);
            if then == "silent" {
                held.push(stream);
            }
        }
    });
    (host, count)
}

/// A loopback port nothing listens on.
pub fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = format!("127.0.0.1:{}", l.local_addr().unwrap().port());
    drop(l);
    host
}

fn serve(
    mut stream: TcpStream,
    requests: &Mutex<Vec<String>>,
    sent: &AtomicU64,
    host: &str,
    away: &str,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        let mut authorization = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {
                    if line.to_ascii_lowercase().starts_with("authorization:") {
                        authorization = line["authorization:".len()..].trim().to_owned();
                    }
                }
            }
        }
        requests.lock().unwrap().push(first.trim().to_owned());
        let path = first.split_whitespace().nth(1).unwrap_or("/").to_owned();
        if !answer(&mut stream, &path, &authorization, sent, host, away) {
            return;
        }
    }
}

/// Answers one request; `false` when the connection is to be closed.
fn answer(
    stream: &mut TcpStream,
    path: &str,
    authorization: &str,
    sent: &AtomicU64,
    host: &str,
    away: &str,
) -> bool {
    let repo = path
        .strip_prefix("/v2/")
        .and_then(|p| p.split('/').next())
        .unwrap_or_default();
    let number = |prefix: &str| {
        repo.strip_prefix(prefix)
            .and_then(|n| n.parse::<u64>().ok())
    };
    if path.starts_with("/token") {
        return reply(
            stream,
            "200 OK",
            "application/json",
            "",
            r#"{"token":"good"}"#,
        );
    }
    if let Some(mb) = number("huge-") {
        return stream_bytes(stream, mb << 20, None, sent);
    }
    if let Some(mb) = number("declared-") {
        return stream_bytes(stream, mb << 20, Some(mb << 20), sent);
    }
    if let Some(mb) = number("lying-") {
        if path.contains("/blobs/") {
            return stream_bytes(stream, mb << 20, None, sent);
        }
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": format!("sha256:{}", "a".repeat(64)),
                "size": 1000
            },
            "layers": []
        });
        return reply(
            stream,
            "200 OK",
            "application/vnd.oci.image.manifest.v1+json",
            "",
            &manifest.to_string(),
        );
    }
    if let Some(status) = number("leak-") {
        let reason = if status == 404 {
            "Not Found"
        } else {
            "Internal Server Error"
        };
        let body = format!("<html><body>internal error\n{FORGED}\n{SECRET}\n</body></html>");
        return reply(
            stream,
            &format!("{status} {reason}"),
            "text/html",
            "",
            &body,
        );
    }
    if repo == "realm-away" {
        let challenge =
            format!("www-authenticate: Bearer realm=\"http://{away}/steal\",service=\"x\"\r\n");
        return reply(
            stream,
            "401 Unauthorized",
            "application/json",
            &challenge,
            "{}",
        );
    }
    if repo == "realm-home" && authorization != "Bearer good" {
        let challenge =
            format!("www-authenticate: Bearer realm=\"http://{host}/token\",service=\"x\"\r\n");
        return reply(
            stream,
            "401 Unauthorized",
            "application/json",
            &challenge,
            "{}",
        );
    }
    let n = number("wide-").unwrap_or(1);
    let manifests: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": format!("sha256:{:064x}", i),
                "size": 500,
                "platform": {
                    "os": "windows", "architecture": "amd64",
                    "os.version": format!("10.0.{}.{}", 17763 + i % 3, i),
                    "os.features": ["win32k", "x".repeat(64)]
                }
            })
        })
        .collect();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": manifests
    });
    reply(
        stream,
        "200 OK",
        "application/vnd.oci.image.index.v1+json",
        "",
        &index.to_string(),
    )
}

fn reply(stream: &mut TcpStream, status: &str, media: &str, extra: &str, body: &str) -> bool {
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {media}\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .is_ok()
}

/// `total` bytes of a JSON document that never closes, as fast as the
/// client reads, with `length` as `Content-Length` (none: to the end of
/// the connection, which is then closed).
fn stream_bytes(stream: &mut TcpStream, total: u64, length: Option<u64>, sent: &AtomicU64) -> bool {
    let head = match length {
        Some(n) => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.index.v1+json\r\ncontent-length: {n}\r\n\r\n"
        ),
        None => "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.index.v1+json\r\nconnection: close\r\n\r\n".to_owned(),
    };
    if stream.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let mut chunk = vec![b' '; 64 << 10];
    chunk[0] = b'[';
    let mut left = total;
    while left > 0 {
        let n = usize::try_from(left.min(chunk.len() as u64)).unwrap();
        if stream.write_all(&chunk[..n]).is_err() {
            return false;
        }
        sent.fetch_add(n as u64, Ordering::Relaxed);
        chunk[0] = b' ';
        left -= n as u64;
    }
    length.is_some()
}
