//! The cluster cache's deadlines against a silent API server: one that
//! accepts TCP connections and never sends a byte. With short configured
//! deadlines the cache gives up (counted in `cluster_cache_errors`) soon
//! after they pass, with the defaults it is still waiting, and the webhook
//! answers reviews all along. In-process, driven with `oneshot`; the
//! end-to-end cases against a fake API server are in tests/webhook/serve_cluster.rs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode, Uri, header};
use serde_json::{Value, json};
use tower::ServiceExt;
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::Admission;
use winadmit::entry::server::watch_cache::{self, Deadlines, WatchCache};
use winadmit::entry::server::{self, Limits, ServerState};

/// Accepts connections and holds them open without reading or writing.
async fn silent_api_server() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    addr
}

/// A webhook state whose cluster cache watches `api` with `deadlines`.
fn watching(api: std::net::SocketAddr, deadlines: Deadlines) -> Arc<ServerState> {
    let cache = Arc::new(WatchCache::for_policy(&Policy::default_policy()));
    let state = ServerState::new(
        Admission {
            policy: Policy::default_policy(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: Some(Box::new(Arc::clone(&cache))),
        },
        Limits::default(),
    );
    state.set_ready(true);
    // As `serve` does: kube's client uses the process default provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = kube::Config::new(format!("http://{api}").parse::<Uri>().unwrap());
    deadlines.apply_to(&mut config);
    let client = kube::Client::try_from(config).unwrap();
    watch_cache::spawn(client, cache, state.metrics.cluster(), deadlines);
    state
}

/// The failed namespace lists the cache has counted.
fn failed_lists(state: &ServerState) -> u64 {
    state
        .metrics
        .render()
        .lines()
        .find(|l| {
            l.starts_with("winadmit_cluster_cache_errors_total{")
                && l.contains("resource=\"namespaces\"")
                && l.contains("verb=\"list\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// A Windows pod with hostNetwork (WIN-HOSTNETWORK): denied under enforce.
fn review() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "8f1d2c3b-0000-4000-8000-00000000dead",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "web",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "windows"},
                    "hostNetwork": true,
                    "containers": [{"name": "app", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}]
                }
            }
        }
    }))
    .unwrap()
}

async fn validate(state: &Arc<ServerState>) -> Value {
    let request = Request::builder()
        .method("POST")
        .uri("/validate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(review()))
        .unwrap();
    let response = server::router(Arc::clone(state))
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Each configured deadline (the client's read deadline, the cache's
/// per-page list deadline) makes the cache give up on a silent API server
/// once it passes; the same server with the default deadlines (90 s and
/// 60 s) is still being waited on. Meanwhile /validate answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_api_server_is_given_up_after_the_configured_deadline() {
    const SHORT: Duration = Duration::from_millis(400);
    let api = silent_api_server().await;
    for (what, deadlines) in [
        (
            "read",
            Deadlines {
                read: SHORT,
                ..Deadlines::default()
            },
        ),
        (
            "list_page",
            Deadlines {
                list_page: SHORT,
                ..Deadlines::default()
            },
        ),
    ] {
        let started = Instant::now();
        let short = watching(api, deadlines);
        let default = watching(api, Deadlines::default());
        // Answers while the first list hangs.
        let answer = validate(&short).await;
        assert_eq!(answer["response"]["allowed"], false, "{what}: {answer}");
        while failed_lists(&short) == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{what}: the cache did not give up within 10 s of a {SHORT:?} deadline"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let gave_up = started.elapsed();
        assert!(
            gave_up >= SHORT,
            "{what}: gave up after {gave_up:?}, before the deadline"
        );
        assert_eq!(
            failed_lists(&default),
            0,
            "{what}: with the default deadlines the cache still waits"
        );
        assert!(
            !short.metrics.render().contains("cluster_cache_synced{"),
            "{what}"
        );
        // And still answers once the cache has given up (and retries).
        let answer = validate(&short).await;
        assert_eq!(answer["response"]["allowed"], false, "{what}: {answer}");
    }
}

#[test]
fn the_default_deadlines_are_the_documented_constants() {
    let d = Deadlines::default();
    assert_eq!(d.connect, watch_cache::CONNECT_TIMEOUT);
    assert_eq!(d.read, watch_cache::READ_TIMEOUT);
    assert_eq!(d.watch_seconds, watch_cache::WATCH_SECONDS);
    assert_eq!(d.list_page, watch_cache::LIST_PAGE);
    // Only a stalled server hits the read deadline: a healthy watch ends
    // server-side first.
    assert!(d.read > Duration::from_secs(u64::from(d.watch_seconds)));
    let mut config = kube::Config::new(Uri::from_static("https://127.0.0.1:6443"));
    d.apply_to(&mut config);
    assert_eq!(config.connect_timeout, Some(d.connect));
    assert_eq!(config.read_timeout, Some(d.read));
    assert_eq!(config.write_timeout, Some(d.read));
}
