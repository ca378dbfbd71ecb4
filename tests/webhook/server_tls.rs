//! Real sockets, real TLS, the real `winadmit` binary: HTTP/1.1 and HTTP/2
//! over rustls with rcgen certificates, certificate rotation, fail-fast
//! start-up, SIGTERM draining, the self-signed quick start, client
//! certificates and the plain-HTTP metrics listener.

use crate::server_support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use server_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

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
    assert!(
        server
            .logs_contain(r#""rules":"WIN-PRIVILEGED,WIN-RUNASUSER,WIN-HOSTNETWORK,WIN-SYSCTLS""#)
    );
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

/// `serve` without a certificate names both ways to give one:
/// `--tls-cert` with `--tls-key`, or `--self-signed`.
#[test]
fn serve_without_a_certificate_names_self_signed() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .arg("serve")
            .args(args)
            .env_remove("WINADMIT_TLS_CERT")
            .env_remove("WINADMIT_TLS_KEY")
            .env_remove("WINADMIT_SELF_SIGNED")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&[]);
    assert!(
        e.contains("<--tls-cert <FILE>|--self-signed>"),
        "serve with no flags: {e}"
    );
    let e = run(&["--tls-cert", "tls.crt"]);
    assert!(e.contains("--tls-key <FILE>"), "{e}");
    let e = run(&["--tls-key", "tls.key"]);
    assert!(e.contains("--self-signed"), "{e}");
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
    // --log-format json (as Server::start runs it): the banner is a log line.
    let printed = server
        .log_field("self-signed certificate for localhost", "try_it")
        .unwrap_or_default();
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

/// `serve --self-signed` with no other flag: it listens on loopback only
/// (its certificate names only localhost) and writes its CA into a new
/// directory under the temp dir that only its user can enter, so no other
/// user's process can replace the CA a client is told to trust.
#[test]
fn self_signed_defaults_stay_on_this_machine_and_this_user() {
    use std::io::{BufRead as _, BufReader, Read as _};
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--self-signed", "--metrics", "off"])
        .env("TMPDIR", tmp.path())
        .env("KUBECONFIG", tmp.path().join("none"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The log (stdout) says where it serves; read it on a thread, so a
    // server that never says so fails the test after 60 s.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut log = Vec::new();
    let serving = loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains("is serving") => break Some(line),
            Ok(line) => log.push(line),
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let mut banner = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut banner)
        .unwrap();
    let serving = serving.unwrap_or_else(|| panic!("not serving in 60 s: {log:#?}\n{banner}"));
    assert!(serving.contains("127.0.0.1:8443"), "{serving}");
    let dirs: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("ca.pem").is_file())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}\n{banner}");
    let name = dirs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("winadmit-") && name.len() > "winadmit-".len(),
        "{name}"
    );
    let mode = std::fs::metadata(&dirs[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dirs[0].display());
    assert!(
        banner.contains(&format!("{}/ca.pem", dirs[0].display())),
        "the CA's path is named on start: {banner}"
    );
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

/// With `--log-format json` the server describes itself in log lines: the
/// start-up line names every route of the port, the self-signed banner is a
/// JSON line with the CA's path, and each `/report` request gets a line
/// with its counts.
#[tokio::test]
async fn the_server_describes_itself_in_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let server = Server::start(&[
        "--self-signed",
        "--self-signed-dir",
        certs.to_str().unwrap(),
    ]);
    let routes = server
        .log_field("winadmit is serving", "message")
        .unwrap_or_default();
    assert!(
        routes.contains(
            "POST /validate, POST /mutate, POST /admit, POST /report, GET /healthz, GET /readyz, GET /readyz/pin-linux, GET /metrics"
        ),
        "{routes}"
    );
    let ca = server
        .log_field("self-signed certificate for localhost", "ca")
        .expect("the banner is a JSON log line");
    assert!(ca.ends_with("ca.pem"), "{ca}");

    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    let cfg = client_config(&ca_pem, &[b"http/1.1"], None, TLS_ALL);
    let mut h1 = h1(connect(server.addr, cfg).await.unwrap()).await;
    let pod = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"nodeSelector":{"kubernetes.io/os":"windows"},"hostNetwork":true,"containers":[{"name":"c","image":"mcr.microsoft.com/windows/nanoserver:ltsc2022"}]}}"#;
    let (status, _) = read(
        h1.send_request(request("POST", "/report", pod.to_vec()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(deny) = server.log_field("report request", "message") {
            assert_eq!(deny, "report request");
            let line = server
                .stdout
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains("\"report request\""))
                .cloned()
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["objects"], 1, "{line}");
            assert_eq!(v["deny"], 1, "{line}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no report log line: {}",
            server.all_logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
