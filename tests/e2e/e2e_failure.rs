//! What the real API server does when winadmit cannot answer, as the
//! manifests' comments and docs/install.md's "Failure modes" describe it:
//! `failurePolicy: Fail` (the base install) refuses Windows workloads while
//! winadmit is down, slower than `timeoutSeconds` or answering garbage;
//! `Ignore` (the audit overlay) admits them; Linux pods are never affected
//! (matchConditions). Also what it does with winadmit's certificate: it
//! checks it against the caBundle, and a certificate rotated on disk is
//! picked up without a failed request.
//!
//! winadmit is the real process, stopped (SIGSTOP) to be slow and killed
//! to be down; only "answers garbage" needs a fake server.
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::controlplane;
use crate::e2e;
use crate::server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use controlplane::ControlPlane;
use e2e::{Webhook, create, pod, stderr};

fn windows_pod(ns: &str, name: &str) -> Value {
    pod(
        ns,
        name,
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
    )
}

fn linux_pod(ns: &str, name: &str) -> Value {
    pod(
        ns,
        name,
        json!({"nodeSelector": {"kubernetes.io/os": "linux"},
               "containers": [{"name": "app", "image": "nginx:1.27"}]}),
    )
}

fn signal(webhook: &Webhook, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &webhook.server.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

/// The overlay's webhook configurations for `setup`, pointed at `webhook`,
/// applied, and in effect.
fn install(cp: &ControlPlane, overlay: &str, setup: &str) -> (Webhook, String) {
    let objects = e2e::rendered(overlay);
    let webhook = Webhook::start(&e2e::overlay_policy(&objects), &["--cluster-cache", "off"]);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, setup, &webhook,
    )));
    let ns = format!("{setup}-ns");
    cp.namespace(&ns, &[("winadmit-e2e", setup)]);
    e2e::wait_registered(cp, &webhook, &ns, 2);
    (webhook, ns)
}

fn timed_create(cp: &ControlPlane, obj: &Value) -> (Output, Duration) {
    let start = Instant::now();
    let out = create(cp, obj, true);
    (out, start.elapsed())
}

/// failurePolicy Fail (the base install): while winadmit is stopped the
/// API server waits `timeoutSeconds` and refuses the Windows pod; once it
/// is gone it refuses at once. A Linux pod is admitted all along.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn fail_refuses_windows_pods_while_winadmit_is_slow_or_down() {
    let cp = controlplane::shared("fail_refuses_windows_pods_while_winadmit_is_slow_or_down");
    let (mut webhook, ns) = install(cp, "base", "fail");

    signal(&webhook, "-STOP");
    let (out, took) = timed_create(cp, &windows_pod(&ns, "slow"));
    let (linux, _) = timed_create(cp, &linux_pod(&ns, "linux-slow"));
    signal(&webhook, "-CONT");
    assert!(!out.status.success(), "admitted while winadmit was stopped");
    let err = stderr(&out);
    assert!(
        err.contains(r#"failed calling webhook "mutate.winadmit.io""#) && err.contains("deadline"),
        "{err}"
    );
    // timeoutSeconds: 5 in the manifests.
    assert!(took >= Duration::from_secs(5), "refused after {took:?}");
    assert!(linux.status.success(), "{}", stderr(&linux));

    webhook.server.child.kill().unwrap();
    webhook.server.child.wait().unwrap();
    let (out, _) = timed_create(cp, &windows_pod(&ns, "down"));
    assert!(!out.status.success(), "admitted while winadmit was down");
    let err = stderr(&out);
    assert!(
        err.contains(r#"failed calling webhook "mutate.winadmit.io""#)
            && err.contains("connection refused"),
        "{err}"
    );
    let (linux, _) = timed_create(cp, &linux_pod(&ns, "linux-down"));
    assert!(linux.status.success(), "{}", stderr(&linux));

    // The recovery docs/install.md gives: label the namespace winadmit.io/ignore=true.
    cp.kubectl_ok(&["label", "namespace", &ns, "winadmit.io/ignore=true"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (out, _) = timed_create(cp, &windows_pod(&ns, "recovered"));
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still refused after the opt-out label: {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// failurePolicy Ignore (the audit overlay): a Windows pod winadmit would
/// deny in enforce mode is admitted, unchecked and unmutated, while
/// winadmit is stopped or down.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn ignore_admits_windows_pods_while_winadmit_is_slow_or_down() {
    let cp = controlplane::shared("ignore_admits_windows_pods_while_winadmit_is_slow_or_down");
    let (mut webhook, ns) = install(cp, "audit", "ignore");

    signal(&webhook, "-STOP");
    let (out, took) = timed_create(cp, &windows_pod(&ns, "slow"));
    signal(&webhook, "-CONT");
    assert!(out.status.success(), "{}", stderr(&out));
    // Both webhooks timed out, one after the other.
    assert!(took >= Duration::from_secs(10), "admitted after {took:?}");

    webhook.server.child.kill().unwrap();
    webhook.server.child.wait().unwrap();
    let (out, _) = timed_create(cp, &windows_pod(&ns, "down"));
    assert!(out.status.success(), "{}", stderr(&out));
    let stored: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        stored["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "windows"}),
        "unmutated"
    );
}

/// A fake webhook that answers every request with 200 and a body that is
/// not an AdmissionReview, counting the requests.
struct Garbage {
    port: u16,
    requests: Arc<AtomicUsize>,
    ca_pem: Vec<u8>,
}

fn garbage_server() -> Garbage {
    let certs = server::certs();
    let chain = std::fs::read(&certs.cert).unwrap();
    let key = std::fs::read(&certs.key).unwrap();
    use rustls::pki_types::pem::PemObject;
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(&chain)
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let config = config.clone();
            let counter = counter.clone();
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = BufReader::new(rustls::StreamOwned::new(conn, tcp));
                // HTTP/1.1 keep-alive: headers, Content-Length body, answer.
                loop {
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if tls.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if tls.read_exact(&mut body).is_err() {
                        return;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    let answer = "not an AdmissionReview";
                    let _ = write!(
                        tls.get_mut(),
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = tls.get_mut().flush();
                }
            });
        }
    });
    Garbage {
        port,
        requests,
        ca_pem: certs.ca.pem().into_bytes(),
    }
}

/// A webhook that answers garbage: Fail refuses the Windows pod with the
/// decoding error, Ignore admits it.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn garbage_answers_follow_the_failure_policy() {
    let cp = controlplane::shared("garbage_answers_follow_the_failure_policy");
    let fake = garbage_server();
    for (overlay, setup, admitted) in [
        ("base", "garbage-fail", false),
        ("audit", "garbage-ignore", true),
    ] {
        let regs = e2e::registrations_at(
            &e2e::rendered(overlay),
            setup,
            &format!("https://127.0.0.1:{}", fake.port),
            &fake.ca_pem,
        );
        cp.apply(&e2e::to_list(&regs));
        let ns = format!("{setup}-ns");
        cp.namespace(&ns, &[("winadmit-e2e", setup)]);
        // Registrations take effect after a moment: until the fake is called.
        let before = fake.requests.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(30);
        let out = loop {
            let out = create(cp, &windows_pod(&ns, "garbage"), true);
            if fake.requests.load(Ordering::SeqCst) > before {
                break out;
            }
            assert!(
                Instant::now() < deadline,
                "{setup}: the fake was never called"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(out.status.success(), admitted, "{setup}: {}", stderr(&out));
        if !admitted {
            assert!(
                stderr(&out).contains(r#"failed calling webhook "mutate.winadmit.io""#),
                "{setup}: {}",
                stderr(&out)
            );
        }
        let linux = create(cp, &linux_pod(&ns, "linux"), true);
        assert!(linux.status.success(), "{setup}: {}", stderr(&linux));
    }
}

/// The API server checks winadmit's certificate against the caBundle: with
/// another CA's bundle every call fails with the x509 error docs/install.md's
/// troubleshooting names.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_ca_bundle_that_does_not_match_fails_the_call() {
    let cp = controlplane::shared("a_ca_bundle_that_does_not_match_fails_the_call");
    let objects = e2e::rendered("base");
    let webhook = Webhook::start(&e2e::overlay_policy(&objects), &["--cluster-cache", "off"]);
    let other = server::Ca::new("another CA");
    let regs = e2e::registrations_at(
        &objects,
        "wrong-ca",
        &webhook.url(""),
        other.pem().as_bytes(),
    );
    cp.apply(&e2e::to_list(&regs));
    cp.namespace("wrong-ca-ns", &[("winadmit-e2e", "wrong-ca")]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = create(cp, &windows_pod("wrong-ca-ns", "x509"), true);
        let err = stderr(&out);
        if err.contains("failed calling webhook") {
            assert!(
                err.contains("x509: certificate signed by unknown authority"),
                "{err}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the registration never took effect: {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(webhook.reviews_of("x509").is_empty());
}

/// Certificates rotated on disk while the API server keeps calling: first
/// a renewal from the same CA (what cert-manager does), then the
/// self-signed rotation docs/install.md describes (trust both CAs, switch
/// the certificate, trust only the new CA). No call fails.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn certificate_rotation_fails_no_call() {
    let cp = controlplane::shared("certificate_rotation_fails_no_call");
    let certs = server::certs();
    let objects = e2e::rendered("base");
    let webhook = Webhook::start_tls(
        &e2e::overlay_policy(&objects),
        &certs,
        &["--cluster-cache", "off", "--tls-reload-interval", "200ms"],
    );
    let setup = "rotate";
    let apply_bundle = |bundle: &[u8]| {
        cp.apply(&e2e::to_list(&e2e::registrations_at(
            &objects,
            setup,
            &webhook.url(""),
            bundle,
        )));
    };
    apply_bundle(&webhook.ca_pem);
    let ns = "rotate-ns";
    cp.namespace(ns, &[("winadmit-e2e", setup)]);
    e2e::wait_registered(cp, &webhook, ns, 2);

    let mut calls = 0;
    let mut call = |step: &str| {
        calls += 1;
        let out = create(cp, &windows_pod(ns, &format!("rotate-{calls}")), true);
        let err = stderr(&out);
        assert!(
            err.contains(r#"admission webhook "validate.winadmit.io" denied the request"#),
            "{step}: call {calls} was not answered by winadmit: {err}"
        );
    };
    // Calls until the server presents `der`, then a few more.
    let serving = |der: &[u8]| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let cfg = server::client_config(
                &String::from_utf8_lossy(&webhook.ca_pem),
                &[b"http/1.1"],
                None,
                server::TLS_ALL,
            );
            server::connect(webhook.server.addr, cfg)
                .await
                .ok()
                .map(|tls| server::peer_leaf(&tls) == der)
        })
    };
    call("before");

    // 1. Renewal from the same CA.
    let (c, k, der) = certs.ca.leaf("renewed");
    server::write_pair(certs.cert.parent().unwrap(), &c, &k);
    let deadline = Instant::now() + Duration::from_secs(20);
    while serving(&der) != Some(true) {
        call("renewal");
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was not served"
        );
    }
    for _ in 0..3 {
        call("after renewal");
    }

    // 2. A new CA: trust both, switch, trust only the new one.
    let new_ca = server::Ca::new("new CA");
    let mut both = webhook.ca_pem.clone();
    both.extend_from_slice(new_ca.pem().as_bytes());
    apply_bundle(&both);
    call("both CAs trusted");
    let (c, k, der) = new_ca.leaf("new");
    server::write_pair(certs.cert.parent().unwrap(), &c, &k);
    let deadline = Instant::now() + Duration::from_secs(20);
    while serving(&der) != Some(true) && serving(&der).is_some() {
        call("switch");
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served"
        );
    }
    call("new certificate");
    apply_bundle(new_ca.pem().as_bytes());
    for _ in 0..5 {
        call("only the new CA trusted");
    }
}
