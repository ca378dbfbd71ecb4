//! `winadmit certs`: the files it writes, the names the certificate is
//! valid for, and a real TLS handshake with them, as the API server would
//! make it (trusting only the caBundle, dialling `<svc>.<ns>.svc`).

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use base64::Engine as _;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

fn certs(out: &Path, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args([
            "certs",
            "--service",
            "winadmit",
            "--namespace",
            "ops",
            "--out",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

struct Material {
    ca: CertificateDer<'static>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

fn generate() -> (tempfile::TempDir, Material) {
    let dir = tempfile::tempdir().unwrap();
    let out = certs(dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    let material = Material {
        ca: CertificateDer::from_pem_slice(&read("ca.crt")).unwrap(),
        cert: CertificateDer::from_pem_slice(&read("tls.crt")).unwrap(),
        key: PrivateKeyDer::from_pem_slice(&read("tls.key")).unwrap(),
    };
    (dir, material)
}

fn roots(ca: &CertificateDer<'static>) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    Arc::new(roots)
}

fn provider() {
    // Several tests in one process: only the first install wins, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[test]
fn writes_the_files_and_prints_the_ca_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("new/certs");
    let out = certs(&out_dir, &["--days", "30"]);
    assert_eq!(out.status.code(), Some(0));
    let ca = std::fs::read(out_dir.join("ca.crt")).unwrap();
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        printed.trim_end(),
        base64::engine::general_purpose::STANDARD.encode(&ca),
        "stdout is the caBundle: base64 of ca.crt"
    );
    for name in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(out_dir.join(name).is_file(), "{name}");
    }
    assert!(
        !std::fs::read_dir(&out_dir).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("ca.key")),
        "the CA key is never written"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |n: &str| {
            std::fs::metadata(out_dir.join(n))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("tls.key"), 0o600);
        assert_eq!(mode("tls.crt"), 0o644);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("winadmit.ops.svc"), "{stderr}");

    // Existing files are kept unless --force; then replaced, key still 0600.
    let again = certs(&out_dir, &[]);
    assert_eq!(again.status.code(), Some(2));
    let hint = String::from_utf8_lossy(&again.stderr);
    assert!(hint.contains("--force"), "{hint}");
    // The hint is docs/install.md's procedure: both CAs first, never the
    // Secret and the caBundle in one step.
    let install =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/install.md")).unwrap();
    assert!(
        install.contains("### Rotating self-signed certificates")
            && install.contains("Do not replace the Secret and the caBundle\nin one step."),
        "docs/install.md changed its rotation section: keep the certs hint in step"
    );
    assert!(
        hint.contains("\"Rotating self-signed certificates\"")
            && hint.contains("trust the old and the new CA first")
            && hint.contains("never the Secret and the caBundle in one step")
            && !hint.contains("together"),
        "{hint}"
    );
    assert_eq!(std::fs::read(out_dir.join("ca.crt")).unwrap(), ca);
    let forced = certs(&out_dir, &["--force"]);
    assert_eq!(forced.status.code(), Some(0));
    assert_ne!(std::fs::read(out_dir.join("ca.crt")).unwrap(), ca);
}

#[test]
fn rejects_invalid_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["certs", "--namespace", "Ops_1", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"Ops_1\" is not a valid name"));
    assert!(!dir.path().join("tls.key").exists());
}

#[test]
fn certificate_verifies_for_every_service_name_and_no_other() {
    provider();
    let (_dir, m) = generate();
    // An ECDSA P-256 key: the namedCurve OID 1.2.840.10045.3.1.7.
    let p256 = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    assert!(m.cert.windows(p256.len()).any(|w| w == p256));

    let verifier = WebPkiServerVerifier::builder(roots(&m.ca)).build().unwrap();
    for name in winadmit::entry::certs::service_dns_names("winadmit", "ops") {
        let server_name = ServerName::try_from(name.clone()).unwrap();
        verifier
            .verify_server_cert(&m.cert, &[], &server_name, &[], UnixTime::now())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for wrong in [
        "winadmit.default.svc",
        "other.ops.svc",
        "ops.svc",
        "example.com",
    ] {
        let server_name = ServerName::try_from(wrong).unwrap();
        assert!(
            verifier
                .verify_server_cert(&m.cert, &[], &server_name, &[], UnixTime::now())
                .is_err(),
            "{wrong} must not verify"
        );
    }

    // A different run's CA does not vouch for this certificate.
    let (_other_dir, other) = generate();
    let other_verifier = WebPkiServerVerifier::builder(roots(&other.ca))
        .build()
        .unwrap();
    let name = ServerName::try_from("winadmit.ops.svc").unwrap();
    assert!(
        other_verifier
            .verify_server_cert(&m.cert, &[], &name, &[], UnixTime::now())
            .is_err()
    );
}

/// Serves one TLS connection on 127.0.0.1 with the generated certificate and
/// connects as the API server does: trusting only ca.crt, with the Service
/// name as SNI.
async fn handshake(m: &Material, sni: &'static str) -> std::io::Result<String> {
    let server_config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![m.cert.clone()], m.key.clone_key())
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(server_config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        let mut tls = acceptor.accept(tcp).await?;
        tls.write_all(b"ok").await?;
        tls.shutdown().await?;
        Ok::<_, std::io::Error>(())
    });

    let client_config = ClientConfig::builder()
        .with_root_certificates(roots(&m.ca))
        .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(client_config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let result = async {
        let mut tls = connector
            .connect(ServerName::try_from(sni).unwrap(), tcp)
            .await?;
        let mut reply = String::new();
        tls.read_to_string(&mut reply).await?;
        Ok(reply)
    }
    .await;
    // The server side fails too when the client rejects the certificate.
    let _ = server.await;
    result
}

#[tokio::test]
async fn serves_tls_to_a_client_that_trusts_the_ca_bundle() {
    provider();
    let (_dir, m) = generate();
    assert_eq!(handshake(&m, "winadmit.ops.svc").await.unwrap(), "ok");
    assert_eq!(
        handshake(&m, "winadmit.ops.svc.cluster.local")
            .await
            .unwrap(),
        "ok"
    );
    let err = handshake(&m, "winadmit.other.svc").await.unwrap_err();
    assert!(
        err.to_string().contains("certificate") || err.to_string().contains("Name"),
        "{err}"
    );
}
