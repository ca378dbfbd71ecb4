//! Bounded work, against the real `winadmit serve` process: one huge review
//! does not stall the server, a crowd of idle connections cannot lock new
//! clients out, and connections that say nothing are closed.
//!
//! No assertion depends on how fast this machine is: the guards below only
//! turn a hang into a failure (the fixed server answers in well under a
//! second; the old one waited for minutes).

use crate::server_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use server_support::*;
use tokio::io::AsyncReadExt;

/// Turns a hang into a failure; never a performance threshold.
const HANG: Duration = Duration::from_secs(60);

/// An AdmissionReview of a Windows pod (`spec.os.name: windows`) with `n`
/// containers, each with settings the mutating webhook removes.
fn huge_review(n: usize) -> Vec<u8> {
    let containers: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "name": format!("c{i}"),
                "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
                "securityContext": {
                    "seccompProfile": {"type": "RuntimeDefault"},
                    "capabilities": {"drop": ["ALL"]}
                }
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "huge-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "huge", "namespace": "default"},
                "spec": {"os": {"name": "windows"}, "containers": containers}
            }
        }
    }))
    .unwrap()
}

fn in_flight(metrics: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with("winadmit_admission_in_flight_requests"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// While large reviews are being evaluated, `/healthz` and `/metrics` are
/// answered: `/metrics` is seen reporting a review in flight. With one
/// I/O worker thread this was impossible when reviews ran on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_answer_while_large_reviews_run() {
    let c = certs();
    // Four reviews of 16,000 containers on one worker thread take minutes
    // in a debug build on a busy machine: the timeout is not what is tested.
    let server = start(&c, &["--worker-threads", "1", "--request-timeout", "600s"]);
    let addr = server.addr;
    let ca = c.ca.pem();
    let body = huge_review(16_000);
    assert!(body.len() < 3 * 1024 * 1024, "under the API server's limit");

    let done = Arc::new(AtomicBool::new(false));
    let mut reviews = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (ca, body, done) = (ca.clone(), body.clone(), done.clone());
        reviews.spawn(async move {
            let mut send = h2(connect(addr, client_config(&ca, &[b"h2"], None, TLS_ALL))
                .await
                .unwrap())
            .await;
            let resp = send
                .send_request(request("POST", "/mutate", body))
                .await
                .unwrap();
            let (status, text) = read(resp).await;
            done.store(true, Ordering::SeqCst);
            (status, text)
        });
    }
    let probe = async {
        let mut send = h2(connect(addr, client_config(&ca, &[b"h2"], None, TLS_ALL))
            .await
            .unwrap())
        .await;
        let mut seen_in_flight = false;
        let mut healthz_meanwhile = 0;
        // Probe until every review is answered.
        while !reviews.is_empty() {
            let (status, text) = read(
                send.send_request(request("GET", "/metrics", Vec::new()))
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, 200);
            if in_flight(&text) >= 1.0 {
                seen_in_flight = true;
                let (status, _) = read(
                    send.send_request(request("GET", "/healthz", Vec::new()))
                        .await
                        .unwrap(),
                )
                .await;
                assert_eq!(status, 200, "/healthz while a review runs");
                healthz_meanwhile += 1;
            }
            tokio::select! {
                r = reviews.join_next() => {
                    let (status, text) = r.unwrap().unwrap();
                    assert_eq!(status, 200, "{text:.300}");
                    assert!(text.contains("\"patchType\":\"JSONPatch\""), "{text:.300}");
                    // Warnings are capped, not one per container.
                    let review: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let warnings = review["response"]["warnings"].as_array().unwrap();
                    assert!(warnings.len() <= 20, "{} warnings", warnings.len());
                    assert!(warnings.last().unwrap().as_str().unwrap().contains("more"));
                }
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        (seen_in_flight, healthz_meanwhile)
    };
    let (seen, healthz) = tokio::time::timeout(HANG * 11, probe)
        .await
        .expect("the reviews or the probes hung");
    assert!(
        seen && healthz > 0,
        "/metrics never answered while a review was in flight: reviews block the I/O thread"
    );
    assert!(done.load(Ordering::SeqCst));
}

/// The denial message of a pod with thousands of findings lists the first
/// ones and says how many more there are.
#[tokio::test]
async fn denial_of_a_huge_pod_is_capped() {
    let c = certs();
    let server = start(&c, &["--request-timeout", "120s"]);
    let ca = c.ca.pem();
    let mut send = h1(connect(
        server.addr,
        client_config(&ca, &[b"http/1.1"], None, TLS_ALL),
    )
    .await
    .unwrap())
    .await;
    let resp = tokio::time::timeout(
        HANG,
        send.send_request(request("POST", "/validate", huge_review(5_000))),
    )
    .await
    .expect("validate hung")
    .unwrap();
    let (status, text) = read(resp).await;
    assert_eq!(status, 200);
    let review: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(review["response"]["allowed"], false);
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("has 10000 problems"), "{message:.300}");
    assert!(
        message.contains("and 9950 more: run `winadmit report`"),
        "{message:.3000}"
    );
    assert!(message.len() < 20_000, "{} bytes", message.len());
}

/// `--max-connections` idle clients (silent after the handshake, idle
/// HTTP/1.1 keep-alive, idle HTTP/2) do not keep a new client waiting:
/// a connection is closed for it, the established idle ones first (the one
/// idle the longest), then those that never sent a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_crowd_at_the_connection_cap_does_not_lock_out_new_clients() {
    let c = certs();
    // An idle timeout far beyond the test: only shedding can free a slot.
    let server = start(
        &c,
        &[
            "--max-connections",
            "6",
            "--idle-timeout",
            "10m",
            "--header-timeout",
            "10m",
        ],
    );
    let addr = server.addr;
    let ca = c.ca.pem();
    let mut crowd = Vec::new();
    for _ in 0..2 {
        // Handshake, then silence.
        crowd.push(
            connect(addr, client_config(&ca, &[b"http/1.1"], None, TLS_ALL))
                .await
                .unwrap(),
        );
    }
    let mut idle_clients = Vec::new();
    for alpn in [b"h2".as_slice(), b"http/1.1", b"h2", b"http/1.1"] {
        let tls = connect(addr, client_config(&ca, &[alpn], None, TLS_ALL))
            .await
            .unwrap();
        if alpn == b"h2" {
            let mut send = h2(tls).await;
            let (status, _) = read(
                send.send_request(request("GET", "/healthz", Vec::new()))
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, 200);
            idle_clients.push(Box::new(send) as Box<dyn std::any::Any + Send>);
        } else {
            let mut send = h1(tls).await;
            let (status, _) = read(
                send.send_request(request("GET", "/healthz", Vec::new()))
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, 200);
            idle_clients.push(Box::new(send));
        }
    }
    // Six idle connections hold every slot; new clients are still served.
    for round in 0..3 {
        let newcomer = async {
            let mut send = h1(
                connect(addr, client_config(&ca, &[b"http/1.1"], None, TLS_ALL))
                    .await
                    .unwrap(),
            )
            .await;
            let resp = send
                .send_request(request(
                    "POST",
                    "/validate",
                    fixture("pod-windows-create.json"),
                ))
                .await
                .unwrap();
            read(resp).await.0
        };
        let status = tokio::time::timeout(HANG, newcomer)
            .await
            .unwrap_or_else(|_| {
                panic!("round {round}: a new client waited behind idle connections")
            });
        assert_eq!(status, 200);
    }
    // The connection closed for the first newcomer was the established one
    // idle the longest (the first HTTP/2 client), not a silent one.
    let first = idle_clients
        .remove(0)
        .downcast::<H2>()
        .expect("the first idle client is HTTP/2");
    let closed = tokio::time::timeout(HANG, async {
        while !first.is_closed() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the established idle connection was not closed"
    );
    // New clients that hold their connections: the three other established
    // idle connections are closed for them, then the silent ones.
    let mut held = Vec::new();
    for _ in 0..5 {
        let tls = tokio::time::timeout(
            HANG,
            connect(addr, client_config(&ca, &[b"http/1.1"], None, TLS_ALL)),
        )
        .await
        .expect("a new client waited behind idle connections")
        .unwrap();
        held.push(tls);
    }
    // A silent connection, after the established idle ones: closed. Which
    // of the two is the server's order of their handshakes, which two
    // clients connecting one after the other do not fix on a busy machine.
    let (first_silent, second_silent) = crowd.split_at_mut(1);
    let (mut buf0, mut buf1) = ([0u8; 16], [0u8; 16]);
    let n = tokio::time::timeout(HANG, async {
        tokio::select! {
            n = first_silent[0].read(&mut buf0) => n,
            n = second_silent[0].read(&mut buf1) => n,
        }
    })
    .await
    .expect("no silent connection was closed");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    drop(idle_clients);
}

/// A connection that completes TLS and then says nothing is closed after
/// `--idle-timeout`, and so is an HTTP/2 connection with no open stream
/// that only sends PINGs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_ping_only_connections_are_closed_when_idle() {
    let c = certs();
    let server = start(&c, &["--idle-timeout", "500ms", "--header-timeout", "10m"]);
    let addr = server.addr;
    let ca = c.ca.pem();

    let mut silent = connect(
        addr,
        client_config(&ca, &[b"h2", b"http/1.1"], None, TLS_ALL),
    )
    .await
    .unwrap();
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(HANG, async {
        loop {
            match silent.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "a silent TLS connection was never closed");

    let tls = connect(addr, client_config(&ca, &[b"h2"], None, TLS_ALL))
        .await
        .unwrap();
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(Duration::from_millis(100))
        .keep_alive_while_idle(true)
        .handshake(TokioIo::new(tls))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let (status, _) = read(
        send.send_request(request("GET", "/healthz", Vec::new()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    // The client keeps PINGing; the server still ends the connection.
    let ended = tokio::time::timeout(HANG, conn).await;
    assert!(
        ended.is_ok(),
        "an HTTP/2 connection kept alive only by PINGs was never closed"
    );
    // A new connection is served as usual.
    let mut send = h2(connect(addr, client_config(&ca, &[b"h2"], None, TLS_ALL))
        .await
        .unwrap())
    .await;
    let (status, _) = read(
        send.send_request(request("GET", "/healthz", Vec::new()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
}

/// `--request-timeout` covers the review itself, not only reading the body:
/// a review still computing when it passes is answered 408 with a
/// Kubernetes `Status` (so the API server applies `failurePolicy`). The
/// body is in memory here, so only the work can take the time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_outliving_the_request_timeout_gets_408_with_a_status() {
    use axum::body::Body;
    use axum::http::{Request, header};
    use tower::ServiceExt as _;
    use winadmit::entry::admission::Admission;
    use winadmit::entry::server::{self, Limits, ServerState};

    let state = ServerState::new(
        Admission {
            policy: winadmit::decision::policy::Policy::default_policy(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        },
        Limits {
            request_timeout: Duration::from_millis(1),
            ..Limits::default()
        },
    );
    let req = Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(huge_review(16_000)))
        .unwrap();
    let resp = server::router(state).oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 408);
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(status["code"], 408);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("--request-timeout")
    );
}
