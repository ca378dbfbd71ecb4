//! `winadmit report` against API servers that never finish answering:
//! one that completes TLS and then says nothing, one that sends
//! response headers and stalls, one that trickles a byte a second. Each
//! run ends with exit 2 and a message naming the server and the step.

use crate::report_support;

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use report_support::fake_api::{TOKEN, kubeconfig_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

#[derive(Clone, Copy, Debug)]
enum Silence {
    /// TLS, then nothing.
    AfterHandshake,
    /// `200 OK` headers, then nothing.
    AfterHeaders,
    /// Headers, then one byte per second, forever.
    Trickle,
}

/// Starts a silent API server; returns its URL and CA.
fn silent_api(how: Silence) -> (String, String) {
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
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    std_listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    // Read the request head.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    if !matches!(how, Silence::AfterHandshake) {
                        let _ = tls
                            .write_all(
                                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
                            )
                            .await;
                        let _ = tls.flush().await;
                    }
                    if matches!(how, Silence::Trickle) {
                        let _ = tls.write_all(b"{").await;
                        loop {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            if tls.write_all(b" ").await.is_err() || tls.flush().await.is_err() {
                                return;
                            }
                        }
                    }
                    // Hold the connection open, silent, until the client leaves.
                    let _ = tls.read(&mut buf).await;
                    std::future::pending::<()>().await;
                });
            }
        });
    });
    (format!("https://{addr}"), ca.pem())
}

#[test]
fn report_on_a_silent_api_server_fails_with_exit_2_naming_server_and_step() {
    for how in [
        Silence::AfterHandshake,
        Silence::AfterHeaders,
        Silence::Trickle,
    ] {
        let (url, ca) = silent_api(how);
        let dir = tempfile::tempdir().unwrap();
        let kc = kubeconfig_for(dir.path(), &url, &ca, TOKEN);
        let mut child = Command::new(env!("CARGO_BIN_EXE_winadmit"))
            .args(["report", "--kubeconfig", kc.to_str().unwrap()])
            .args(["--connect-timeout", "2s", "--read-timeout", "2s"])
            .args(["--api-timeout", "6s"])
            .env_remove("KUBECONFIG")
            .env("HOME", "/nonexistent")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Only a guard against a hang, far beyond the deadlines given.
        let guard = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > guard {
                let _ = child.kill();
                panic!("{how:?}: `winadmit report` still waiting after 120 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert_eq!(status.code(), Some(2), "{how:?}: {stderr}");
        assert!(stderr.contains(&url), "{how:?}: names the server: {stderr}");
        assert!(
            stderr.contains("list cronjobs.batch in all namespaces"),
            "{how:?}: names the step: {stderr}"
        );
    }
}
