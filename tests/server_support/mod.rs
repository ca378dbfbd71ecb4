//! Helpers for the real-process server tests (`tests/webhook/server_tls.rs`,
//! `tests/hardening/server_hardening.rs`): rcgen certificates, a running
//! `winadmit serve` with its logs, and rustls + hyper clients.
#![allow(dead_code)]

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
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

/// The binary the server tests run: `WINADMIT_TEST_BIN` (e.g. a release
/// build, to measure it) or this crate's own.
pub fn bin() -> String {
    std::env::var("WINADMIT_TEST_BIN").unwrap_or_else(|_| BIN.to_owned())
}

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/admission/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

pub struct Ca {
    pub issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(name: &str) -> Self {
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

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf for localhost: (cert PEM, key PEM, cert DER).
    pub fn leaf(&self, cn: &str) -> (String, String, Vec<u8>) {
        let mut p = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

pub fn write_pair(dir: &Path, cert: &str, key: &str) -> (PathBuf, PathBuf) {
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
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub report_addr: Option<SocketAddr>,
    pub stdout: Arc<Mutex<Vec<String>>>,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn start(args: &[&str]) -> Self {
        Self::start_on("127.0.0.1:0", args)
    }

    /// `winadmit serve --listen <listen>`: for a server that must come back
    /// on a known address.
    pub fn start_on(listen: &str, args: &[&str]) -> Self {
        let mut child = Command::new(bin())
            .arg("serve")
            .args(["--listen", listen, "--log-format", "json"])
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
                    let mut sink = sink.lock().unwrap();
                    // Load tests log a line per request: keep the first
                    // ones, and every other line.
                    if sink.len() < 20_000 || !line.contains("admission review") {
                        sink.push(line);
                    }
                }
            });
        }
        let mut server = Self {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            metrics_addr: None,
            report_addr: None,
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
                server.report_addr = server
                    .log_field("serving POST /report", "addr")
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

    pub fn log_field(&self, message: &str, field: &str) -> Option<String> {
        self.stdout.lock().unwrap().iter().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["message"]
                .as_str()?
                .starts_with(message)
                .then(|| v[field].as_str().map(str::to_owned))?
        })
    }

    pub fn logs_contain(&self, needle: &str) -> bool {
        self.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    pub fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
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

impl Server {
    /// Every log line so far, stdout and stderr.
    pub fn all_logs(&self) -> String {
        let mut all = self.stdout.lock().unwrap().join("\n");
        all.push('\n');
        all.push_str(&self.stderr.lock().unwrap().join("\n"));
        all
    }

    /// Resident memory of the server process, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// The process has not exited.
    pub fn child_alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Open file descriptors of the server process.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn client_config(
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

pub async fn connect(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(cfg)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

pub fn peer_leaf(tls: &TlsStream<TcpStream>) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

pub fn request(method: &str, path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

pub type H1 = hyper::client::conn::http1::SendRequest<Full<Bytes>>;
pub type H2 = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

pub async fn h1(tls: TlsStream<TcpStream>) -> H1 {
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

pub async fn h2(tls: TlsStream<TcpStream>) -> H2 {
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    send
}

pub async fn read(resp: hyper::Response<hyper::body::Incoming>) -> (u16, String) {
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub struct Certs {
    pub _dir: tempfile::TempDir,
    pub ca: Ca,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub der: Vec<u8>,
}

pub fn certs() -> Certs {
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

pub fn tls_args(c: &Certs) -> Vec<String> {
    vec![
        "--tls-cert".into(),
        c.cert.display().to_string(),
        "--tls-key".into(),
        c.key.display().to_string(),
    ]
}

pub fn start(c: &Certs, extra: &[&str]) -> Server {
    let mut args = tls_args(c);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(&refs)
}

pub const TLS_ALL: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];
