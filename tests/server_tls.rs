//! Real sockets, real TLS, the real `winadmit` binary: HTTP/1.1 and HTTP/2
//! over rustls with rcgen certificates, certificate rotation, fail-fast
//! start-up, SIGTERM draining, the self-signed quick start, client
//! certificates and the plain-HTTP metrics listener.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/admission/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Self {
            issuer: CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf for localhost: (cert PEM, key PEM, cert DER).
    fn leaf(&self, cn: &str) -> (String, String, Vec<u8>) {
        let mut p = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

fn write_pair(dir: &Path, cert: &str, key: &str) -> (PathBuf, PathBuf) {
    let c = dir.join("tls.crt");
    let k = dir.join("tls.key");
    // Replace atomically, as kubelet secret volumes and cert-manager do.
    std::fs::write(dir.join("tls.crt.tmp"), cert).unwrap();
    std::fs::write(dir.join("tls.key.tmp"), key).unwrap();
    std::fs::rename(dir.join("tls.crt.tmp"), &c).unwrap();
    std::fs::rename(dir.join("tls.key.tmp"), &k).unwrap();
    (c, k)
}

/// A running `winadmit serve`, its address and its log lines.
struct Server {
    child: Child,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        for (pipe, sink) in [
            (
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
                stdout.clone(),
            ),
            (Box::new(child.stderr.take().unwrap()), stderr.clone()),
        ] {
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
        }
        let mut server = Self {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            metrics_addr: None,
            stdout,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let addr = server.log_field("winadmit is serving", "addr");
            if let Some(a) = addr {
                server.addr = a.parse().unwrap();
                server.metrics_addr = server
                    .log_field("serving plain-HTTP /metrics", "addr")
                    .map(|a| a.parse().unwrap());
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "winadmit exited with {status}: {:?}",
                    server.stderr.lock().unwrap()
                );
            }
            assert!(Instant::now() < deadline, "server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_field(&self, message: &str, field: &str) -> Option<String> {
        self.stdout.lock().unwrap().iter().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["message"]
                .as_str()?
                .starts_with(message)
                .then(|| v[field].as_str().map(str::to_owned))?
        })
    }

    fn logs_contain(&self, needle: &str) -> bool {
        self.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client_config(
    ca_pem: &str,
    alpn: &[&[u8]],
    client_cert: Option<(&str, &str)>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut cfg = match client_cert {
        None => b.with_no_client_auth(),
        Some((cert, key)) => {
            let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            b.with_client_auth_cert(certs, key).unwrap()
        }
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cfg)
}

async fn connect(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(cfg)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

fn peer_leaf(tls: &TlsStream<TcpStream>) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn request(method: &str, path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

type H1 = hyper::client::conn::http1::SendRequest<Full<Bytes>>;
type H2 = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

async fn h1(tls: TlsStream<TcpStream>) -> H1 {
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

async fn h2(tls: TlsStream<TcpStream>) -> H2 {
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    send
}

async fn read(resp: hyper::Response<hyper::body::Incoming>) -> (u16, String) {
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

struct Certs {
    _dir: tempfile::TempDir,
    ca: Ca,
    cert: PathBuf,
    key: PathBuf,
    der: Vec<u8>,
}

fn certs() -> Certs {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("test CA");
    let (c, k, der) = ca.leaf("first");
    let (cert, key) = write_pair(dir.path(), &c, &k);
    Certs {
        _dir: dir,
        ca,
        cert,
        key,
        der,
    }
}

fn tls_args(c: &Certs) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        c.cert.display().to_string(),
        "--tls-key".into(),
        c.key.display().to_string(),
    ]
}

fn start(c: &Certs, extra: &[&str]) -> Server {
    let mut args = tls_args(c);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(&refs)
}

const TLS_ALL: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

#[tokio::test]
async fn http2_and_http11_over_tls_with_keep_alive() {
    let c = certs();
    let server = start(&c, &[]);

    // HTTP/2, negotiated by ALPN.
    let tls = connect(
        server.addr,
        client_config(&c.ca.pem(), &[b"h2", b"http/1.1"], None, TLS_ALL),
    )
    .await
    .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut send = h2(tls).await;
    let (status, body) = read(
        send.send_request(request(
            "POST",
            "/validate",
            fixture("pod-windows-denied.json"),
        ))
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""allowed":false"#) && body.contains("WIN-PRIVILEGED"),
        "{body}"
    );
    // Concurrent streams on the one connection.
    let mut handles = Vec::new();
    for _ in 0..8 {
        let mut s = send.clone();
        handles.push(tokio::spawn(async move {
            read(
                s.send_request(request(
                    "POST",
                    "/mutate",
                    fixture("pod-windows-fixable.json"),
                ))
                .await
                .unwrap(),
            )
            .await
        }));
    }
    for h in handles {
        let (status, body) = h.await.unwrap();
        assert_eq!(status, 200);
        assert!(body.contains(r#""patchType":"JSONPatch""#), "{body}");
    }

    // HTTP/1.1 with keep-alive, as the API server calls webhooks; TLS 1.2 too.
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let tls = connect(
            server.addr,
            client_config(&c.ca.pem(), &[b"http/1.1"], None, versions),
        )
        .await
        .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        let mut send = h1(tls).await;
        for _ in 0..3 {
            send.ready().await.unwrap();
            let (status, body) = read(
                send.send_request(request(
                    "POST",
                    "/validate",
                    fixture("pod-windows-create.json"),
                ))
                .await
                .unwrap(),
            )
            .await;
            assert_eq!(status, 200);
            assert!(body.contains(r#""allowed":true"#), "{body}");
        }
    }
    // One log line per request, with the uid and no object contents.
    assert!(server.logs_contain(r#""uid":"b1a2c3d4-0000-4000-8000-000000000002""#));
    assert!(server.logs_contain(r#""rules":"WIN-PRIVILEGED,WIN-RUNASUSER,WIN-SUBPATH""#));
    assert!(
        !server.logs_contain("mcr.microsoft.com"),
        "object contents must not be logged"
    );
}

#[tokio::test]
async fn rotated_certificate_is_served_to_new_connections() {
    let c = certs();
    let server = start(&c, &["--tls-reload-interval", "100ms"]);
    let cfg = client_config(&c.ca.pem(), &[b"http/1.1"], None, TLS_ALL);
    let old_conn = connect(server.addr, cfg.clone()).await.unwrap();
    assert_eq!(peer_leaf(&old_conn), c.der);
    let mut old_send = h1(old_conn).await;

    let (cert2, key2, der2) = c.ca.leaf("second");
    write_pair(c.cert.parent().unwrap(), &cert2, &key2);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let tls = connect(server.addr, cfg.clone()).await.unwrap();
        if peer_leaf(&tls) == der2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(server.logs_contain("reloaded the TLS certificate"));
    // The connection made before the rotation keeps working.
    old_send.ready().await.unwrap();
    let (status, _) = read(
        old_send
            .send_request(request("GET", "/healthz", Vec::new()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);

    // A broken rotation keeps the current certificate.
    write_pair(
        c.cert.parent().unwrap(),
        &cert2,
        "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n",
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while !server.logs_contain("cannot be loaded; keeping the current one") {
        assert!(
            Instant::now() < deadline,
            "the failed reload was not logged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tls = connect(server.addr, cfg).await.unwrap();
    assert_eq!(peer_leaf(&tls), der2);
}

fn start_fails(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn start_up_fails_fast_naming_the_flag_and_file() {
    let c = certs();
    let dir = c.cert.parent().unwrap();
    let cert = c.cert.display().to_string();
    let key = c.key.display().to_string();

    let e = start_fails(&["--tls-cert", "/nonexistent/tls.crt", "--tls-key", &key]);
    assert!(
        e.contains("--tls-cert") && e.contains("/nonexistent/tls.crt"),
        "{e}"
    );

    let e = start_fails(&["--tls-cert", &cert, "--tls-key", "/nonexistent/tls.key"]);
    assert!(
        e.contains("--tls-key") && e.contains("/nonexistent/tls.key"),
        "{e}"
    );

    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let g = garbage.display().to_string();
    let e = start_fails(&["--tls-cert", &g, "--tls-key", &key]);
    assert!(
        e.contains("--tls-cert") && e.contains("no PEM certificate"),
        "{e}"
    );
    let e = start_fails(&["--tls-cert", &cert, "--tls-key", &g]);
    assert!(
        e.contains("--tls-key") && e.contains("no PEM private key"),
        "{e}"
    );

    let (_, other_key, _) = c.ca.leaf("other");
    let other = dir.join("other.key");
    std::fs::write(&other, other_key).unwrap();
    let e = start_fails(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &other.display().to_string(),
    ]);
    assert!(e.contains("does not belong to the certificate"), "{e}");

    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, "rules:\n  WIN-NOPE: off\n").unwrap();
    let p = policy.display().to_string();
    let e = start_fails(&["--tls-cert", &cert, "--tls-key", &key, "--policy", &p]);
    assert!(e.contains(&p) && e.contains("WIN-NOPE"), "{e}");

    let e = start_fails(&[]);
    assert!(e.contains("--tls-cert"), "{e}");
}

/// Sends a request's headers and half its body, raw HTTP/1.1 over TLS.
async fn half_request(addr: SocketAddr, ca: &str, body: &[u8]) -> (TlsStream<TcpStream>, usize) {
    let mut tls = connect(addr, client_config(ca, &[b"http/1.1"], None, TLS_ALL))
        .await
        .unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let half = body.len() / 2;
    tls.write_all(&body[..half]).await.unwrap();
    tls.flush().await.unwrap();
    (tls, half)
}

#[tokio::test]
async fn sigterm_turns_readiness_false_and_drains_in_flight_requests() {
    let c = certs();
    let mut server = start(&c, &["--drain-delay", "1500ms"]);
    let ca = c.ca.pem();
    let body = fixture("pod-windows-denied.json");
    let (mut in_flight, half) = half_request(server.addr, &ca, &body).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    server.sigterm();
    // During the drain delay: still accepting, but not ready.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tls = connect(
            server.addr,
            client_config(&ca, &[b"http/1.1"], None, TLS_ALL),
        )
        .await
        .unwrap();
        let mut send = h1(tls).await;
        let (status, _) = read(
            send.send_request(request("GET", "/readyz", Vec::new()))
                .await
                .unwrap(),
        )
        .await;
        if status == 503 {
            break;
        }
        assert!(Instant::now() < deadline, "readiness never turned false");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The in-flight request completes after the signal.
    in_flight.write_all(&body[half..]).await.unwrap();
    in_flight.flush().await.unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        in_flight.read_to_end(&mut response),
    )
    .await;
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains(r#""allowed":false"#), "{text}");

    let status = server.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "exit status {status}");
    assert!(server.logs_contain("drained"));
    assert!(
        connect(
            server.addr,
            client_config(&ca, &[b"http/1.1"], None, TLS_ALL)
        )
        .await
        .is_err()
    );
}

#[tokio::test]
async fn self_signed_quick_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let server = Server::start(&["--self-signed", "--self-signed-dir", &d]);
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).unwrap();
    let printed = server.stderr.lock().unwrap().join("\n");
    assert!(
        printed.contains(&format!("curl --cacert {d}/ca.pem https://localhost:")),
        "{printed}"
    );
    let tls = connect(server.addr, client_config(&ca, &[b"h2"], None, TLS_ALL))
        .await
        .unwrap();
    let mut send = h2(tls).await;
    let (status, body) = read(
        send.send_request(request("GET", "/healthz", Vec::new()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
}

#[tokio::test]
async fn client_certificates_when_a_client_ca_is_set() {
    let c = certs();
    let clients = Ca::new("clients");
    let ca_file = c.cert.parent().unwrap().join("clients.pem");
    std::fs::write(&ca_file, clients.pem()).unwrap();
    let server = start(&c, &["--client-ca", &ca_file.display().to_string()]);
    let (cert, key, _) = clients.leaf("kube-apiserver");
    let with = client_config(&c.ca.pem(), &[b"http/1.1"], Some((&cert, &key)), TLS_ALL);
    let mut send = h1(connect(server.addr, with).await.unwrap()).await;
    let (status, _) = read(
        send.send_request(request("GET", "/healthz", Vec::new()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    // Without a client certificate the handshake (TLS 1.3: the first read) fails.
    let without = client_config(&c.ca.pem(), &[b"http/1.1"], None, TLS_ALL);
    let failed = match connect(server.addr, without).await {
        Err(_) => true,
        Ok(tls) => {
            let mut send = h1(tls).await;
            send.send_request(request("GET", "/healthz", Vec::new()))
                .await
                .is_err()
        }
    };
    assert!(failed);
}

#[tokio::test]
async fn metrics_on_a_plain_http_listener() {
    let c = certs();
    let server = start(&c, &["--metrics-listen", "127.0.0.1:0"]);
    let tls = connect(
        server.addr,
        client_config(&c.ca.pem(), &[b"http/1.1"], None, TLS_ALL),
    )
    .await
    .unwrap();
    let mut send = h1(tls).await;
    read(
        send.send_request(request(
            "POST",
            "/validate",
            fixture("pod-windows-create.json"),
        ))
        .await
        .unwrap(),
    )
    .await;

    let tcp = TcpStream::connect(server.metrics_addr.unwrap())
        .await
        .unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let (status, text) = read(
        send.send_request(request("GET", "/metrics", Vec::new()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        text.contains(
            r#"winadmit_admission_requests_total{endpoint="validate",verdict="allowed"} 1"#
        ),
        "{text}"
    );
}
