//! `serve --registry`: the webhook asks registries for the facts of the
//! images it reviews, through `/validate` and `/mutate` of a real `winadmit
//! serve` process, against a real registry (Debian's `docker-registry` on
//! loopback, `tests/support/registry.rs`) with small synthetic images.
//!
//! - every facts rule decides through both endpoints;
//! - a registry that is stopped, hangs past the review's deadline, or
//!   answers 401, 404, 429 or a malformed manifest never denies: the review
//!   is allowed and its finding says the facts are unknown;
//! - cache hits and single flight are counted in `/metrics`;
//! - while a lookup hangs, another review, `/healthz` and `/readyz` are
//!   answered (outcomes, never timings: the hanging registry is a real one
//!   stopped with SIGSTOP, so the held review cannot finish first).
//!
//! 429 and a malformed manifest come from a fake registry: the real one
//! cannot be made to give them.
//!
//! Without `docker-registry` and `htpasswd` on PATH these tests are
//! ignored (build.rs), unless `WINADMIT_REQUIRE_REGISTRY` is set (CI).

#![cfg_attr(no_registry, allow(dead_code, unused_imports))]

use crate::admission;
use crate::registry_support;
use crate::server_support as server;

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use registry_support::{FakeRegistry, Registry, push_images};

/// A `winadmit serve --registry` process with its self-signed CA.
struct Hook {
    server: server::Server,
    ca: String,
    _dir: tempfile::TempDir,
}

impl Hook {
    fn start(extra: &[String]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let certs = dir.path().join("certs");
        let mut args = vec![
            "--self-signed".to_owned(),
            "--self-signed-dir".to_owned(),
            certs.display().to_string(),
            "--cluster-cache".to_owned(),
            "off".to_owned(),
            "--registry".to_owned(),
        ];
        args.extend(extra.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = server::Server::start(&refs);
        let ca = std::fs::read_to_string(certs.join("ca.pem")).unwrap();
        Self {
            server,
            ca,
            _dir: dir,
        }
    }

    /// One request on a new connection: (status, body).
    async fn call(&self, method: &str, path: &str, body: Vec<u8>) -> (u16, String) {
        let cfg = server::client_config(&self.ca, &[b"http/1.1"], None, server::TLS_ALL);
        let tls = server::connect(self.server.addr, cfg).await.unwrap();
        let mut send = server::h1(tls).await;
        let resp = send
            .send_request(server::request(method, path, body))
            .await
            .unwrap();
        server::read(resp).await
    }

    /// `POST /report` of `body` as `content_type`: the report.
    async fn report(&self, content_type: &'static str, body: Vec<u8>) -> Value {
        let cfg = server::client_config(&self.ca, &[b"http/1.1"], None, server::TLS_ALL);
        let tls = server::connect(self.server.addr, cfg).await.unwrap();
        let mut send = server::h1(tls).await;
        let mut req = server::request("POST", "/report", body);
        req.headers_mut()
            .insert("content-type", http::HeaderValue::from_static(content_type));
        let (status, body) = server::read(send.send_request(req).await.unwrap()).await;
        assert_eq!(status, 200, "/report: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// The `response` of an AdmissionReview creating `pod`, its patch
    /// decoded.
    async fn review(&self, endpoint: &str, pod: &Value) -> Value {
        let (status, body) = self
            .call("POST", endpoint, admission::admission_review(pod))
            .await;
        assert_eq!(status, 200, "{endpoint}: {body}");
        let mut v: Value = serde_json::from_str(&body).unwrap();
        let mut response = v["response"].take();
        if let Some(p) = response["patch"].as_str() {
            let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
            response["patch"] = serde_json::from_slice(&bytes).unwrap();
        }
        response
    }

    /// The value of `metric` with label `registry` (0 when absent).
    async fn metric(&self, metric: &str, registry: &str) -> f64 {
        let (status, text) = self.call("GET", "/metrics", Vec::new()).await;
        assert_eq!(status, 200);
        let prefix = format!("{metric}{{registry=\"{registry}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }

    async fn gauge(&self, metric: &str) -> f64 {
        let (_, text) = self.call("GET", "/metrics", Vec::new()).await;
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{metric} ")))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    }

    /// The rules of the review log line of the pod named `name` (the
    /// latest), waiting for the line (it may trail the answer).
    fn rules_of(&self, name: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = self
                .server
                .stdout
                .lock()
                .unwrap()
                .iter()
                .rev()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["message"] == "admission review" && v["name"] == name)
                .map(|v| v["rules"].as_str().unwrap_or_default().to_owned());
            if let Some(rules) = found {
                return rules;
            }
            assert!(
                Instant::now() < deadline,
                "no review log line for {name}:\n{}",
                self.server.all_logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn pod(name: &str, selector: Option<Value>, image: &str) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": image}]}
    });
    if let Some(s) = selector {
        pod["spec"]["nodeSelector"] = s;
    }
    pod
}

fn windows() -> Option<Value> {
    Some(json!({"kubernetes.io/os": "windows"}))
}

fn message(response: &Value) -> String {
    response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every facts rule through `/validate` and `/mutate`, then the same images
/// again: answered from the cache (hits counted, no new lookups).
#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn facts_rules_decide_validate_and_mutate_and_are_cached() {
    let registry = Registry::start(false);
    push_images(&registry);
    let host = registry.host.clone();
    let hook = Hook::start(&registry.flags());
    let image = |name: &str| format!("{host}/{name}");
    runtime().block_on(async {
        // A Windows pod with a Linux-only image: denied, from the facts.
        for repo in ["linuxonly:1", "armonly:1"] {
            let r = hook
                .review("/validate", &pod("lin", windows(), &image(repo)))
                .await;
            assert_eq!(r["allowed"], false, "{repo}: {r}");
            let m = message(&r);
            assert!(m.contains("WIN-LINUX-IMAGE"), "{m}");
            assert!(m.contains("no Windows variant"), "{m}");
        }
        let r = hook
            .review("/validate", &pod("lin", windows(), &image("linuxonly:1")))
            .await;
        assert!(
            message(&r).contains("has platforms linux/amd64, linux/arm64/v8"),
            "{r}"
        );
        // A multi-OS image with Windows platforms passes.
        let r = hook
            .review("/validate", &pod("multi", windows(), &image("multi:1")))
            .await;
        assert_eq!(r["allowed"], true, "{r}");
        assert!(!hook.rules_of("multi").contains("WIN-LINUX-IMAGE"));

        // An untargeted pod with a Windows-only image: denied by /validate,
        // and /mutate adds the Windows selector, named by the facts.
        let untargeted = pod("unpinned", None, &image("winonly:1"));
        let r = hook.review("/validate", &untargeted).await;
        assert_eq!(r["allowed"], false, "{r}");
        assert!(message(&r).contains("WIN-IMAGE-WINDOWS-ONLY"), "{r}");
        let r = hook.review("/mutate", &untargeted).await;
        assert_eq!(r["allowed"], true, "{r}");
        let patch = r["patch"].to_string();
        assert!(
            patch.contains("kubernetes.io/os") && patch.contains("windows"),
            "{r}"
        );
        let warned = r["warnings"].to_string();
        assert!(warned.contains("WIN-IMAGE-WINDOWS-ONLY"), "{r}");
        // A Linux-targeted pod with a Windows-only image: denied.
        let linux = pod(
            "linuxpod",
            Some(json!({"kubernetes.io/os": "linux"})),
            &image("winonly:1"),
        );
        let r = hook.review("/validate", &linux).await;
        assert_eq!(r["allowed"], false, "{r}");
        assert!(message(&r).contains("the pod targets Linux nodes"), "{r}");

        // An ltsc2019-only image bound for 10.0.20348 nodes: denied.
        let old = pod(
            "old",
            Some(json!({"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348"})),
            &image("wincfg:1"),
        );
        let r = hook.review("/validate", &old).await;
        assert_eq!(r["allowed"], false, "{r}");
        let m = message(&r);
        assert!(
            m.contains("WIN-BUILD-NODE-MISMATCH") && m.contains("10.0.17763 (ltsc2019) only"),
            "{m}"
        );

        // Each image was looked up once; asking again is a cache hit.
        let lookups = hook.metric("winadmit_registry_lookups_total", &host).await;
        assert_eq!(lookups, 5.0, "5 images, each looked up once");
        let hits = hook
            .metric("winadmit_registry_cache_hits_total", &host)
            .await;
        let r = hook
            .review("/validate", &pod("lin", windows(), &image("linuxonly:1")))
            .await;
        assert_eq!(r["allowed"], false);
        assert_eq!(
            hook.metric("winadmit_registry_cache_hits_total", &host)
                .await,
            hits + 1.0
        );
        assert_eq!(
            hook.metric("winadmit_registry_lookups_total", &host).await,
            5.0
        );
        let histogram = "winadmit_registry_lookup_duration_seconds_count";
        assert_eq!(hook.metric(histogram, &host).await, 5.0);
    });
}

/// The review of a pod whose image's facts cannot be learnt: allowed, and
/// its finding is WIN-IMAGE-FACTS-UNKNOWN; the log says why.
async fn fails_open(hook: &Hook, name: &str, image: &str, why: &str) {
    let p = pod(name, windows(), image);
    for endpoint in ["/validate", "/mutate"] {
        let r = hook.review(endpoint, &p).await;
        assert_eq!(r["allowed"], true, "{endpoint} {image}: {r}");
        let rules = hook.rules_of(name);
        assert!(
            rules.contains("WIN-IMAGE-FACTS-UNKNOWN"),
            "{endpoint} {image}: {rules}"
        );
    }
    let logs = hook.server.all_logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("facts unknown") && l.contains(image) && l.contains(why)),
        "{image}: no log line saying {why:?}:\n{logs}"
    );
}

/// 404, 401, 429, a malformed manifest and a stopped registry: the
/// reviews are allowed, the finding says unknown, and failures are counted.
#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn failed_lookups_fail_open() {
    let mut plain = Registry::start(false);
    push_images(&plain);
    let secure = Registry::start(true);
    let fake = FakeRegistry::start();
    // The secure registry's CA but not its credentials: 401.
    let mut flags = vec![
        "--insecure-registry".to_owned(),
        format!("{},{}", plain.host, fake.host),
        "--registry-ca".to_owned(),
        secure.path("ca.pem"),
    ];
    flags.extend(["--registry-negative-ttl".to_owned(), "1ms".to_owned()]);
    let hook = Hook::start(&flags);
    runtime().block_on(async {
        fails_open(
            &hook,
            "missing",
            &format!("{}/missing:1", plain.host),
            "404",
        )
        .await;
        fails_open(
            &hook,
            "private",
            &format!("{}/linuxonly:1", secure.host),
            "401",
        )
        .await;
        fails_open(&hook, "limited", &format!("{}/limited:1", fake.host), "429").await;
        fails_open(
            &hook,
            "malformed",
            &format!("{}/malformed:1", fake.host),
            "malformed manifest",
        )
        .await;
        assert!(
            hook.metric("winadmit_registry_failures_total", &fake.host)
                .await
                >= 2.0
        );
        plain.stop();
        fails_open(
            &hook,
            "stopped",
            &format!("{}/multi:1", plain.host),
            "onnection refused",
        )
        .await;
    });
}

/// A registry that hangs (a real one, stopped with SIGSTOP): a review
/// waits for it only until its deadline and is allowed with the facts
/// unknown; meanwhile other reviews, `/healthz` and `/readyz` are answered;
/// reviews of the same image share one lookup, which goes on past the
/// deadline and fills the cache.
#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn a_hanging_registry_holds_only_its_own_reviews() {
    let registry = Registry::start(false);
    push_images(&registry);
    let host = registry.host.clone();
    let image = |name: &str| format!("{host}/{name}");

    // Long deadlines: the held reviews cannot end before the registry
    // goes on, whatever the machine's speed.
    let fake = FakeRegistry::start();
    let mut flags = vec![
        "--insecure-registry".to_owned(),
        format!("{host},{}", fake.host),
    ];
    flags.extend(
        [
            "--request-timeout",
            "300s",
            "--registry-review-timeout",
            "290s",
            "--registry-timeout",
            "290",
        ]
        .map(str::to_owned),
    );
    let hook = std::sync::Arc::new(Hook::start(&flags));
    let rt = runtime();
    rt.block_on(async {
        // Cached before the registry hangs.
        let r = hook
            .review(
                "/validate",
                &pod("cached", windows(), &image("linuxonly:1")),
            )
            .await;
        assert_eq!(r["allowed"], false);
    });
    registry.pause();
    rt.block_on(async {
        // Four reviews of one uncached image, held by the registry.
        let held: Vec<_> = (0..4)
            .map(|i| {
                let hook = std::sync::Arc::clone(&hook);
                let p = pod(&format!("held{i}"), windows(), &image("armonly:1"));
                tokio::spawn(async move { hook.review("/validate", &p).await })
            })
            .collect();
        // Wait until all four are in the server (the in-flight gauge).
        let give_up = Instant::now() + Duration::from_secs(60);
        while hook.gauge("winadmit_admission_in_flight_requests").await < 4.0 {
            assert!(Instant::now() < give_up, "the held reviews did not arrive");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Meanwhile: health, readiness, and a review of a cached image.
        assert_eq!(hook.call("GET", "/healthz", Vec::new()).await.0, 200);
        assert_eq!(hook.call("GET", "/readyz", Vec::new()).await.0, 200);
        let r = hook
            .review(
                "/validate",
                &pod("cached", windows(), &image("linuxonly:1")),
            )
            .await;
        assert_eq!(r["allowed"], false, "from the cache: {r}");
        // A review of an image of another registry never waits on this one.
        let r = hook
            .review(
                "/validate",
                &pod("other", windows(), &format!("{}/limited:1", fake.host)),
            )
            .await;
        assert_eq!(r["allowed"], true, "{r}");
        assert!(
            held.iter().all(|h| !h.is_finished()),
            "a held review finished while its registry was stopped"
        );
        registry.resume();
        for h in held {
            let r = h.await.unwrap();
            assert_eq!(r["allowed"], false, "armonly has no Windows variant: {r}");
        }
        // One lookup for the four reviews; three shared it.
        assert_eq!(
            hook.metric("winadmit_registry_lookups_total", &host).await,
            2.0
        );
        assert_eq!(
            hook.metric("winadmit_registry_shared_lookups_total", &host)
                .await,
            3.0
        );
    });
}

/// A review's deadline: past `--registry-review-timeout` the review is
/// allowed with the facts unknown; the lookup goes on and the next review
/// has the facts (the same lookup: no second one).
#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn a_review_past_its_deadline_proceeds_and_the_lookup_fills_the_cache() {
    let registry = Registry::start(false);
    push_images(&registry);
    let host = registry.host.clone();
    let mut flags = registry.flags();
    flags.extend(
        [
            "--registry-review-timeout",
            "200ms",
            "--registry-timeout",
            "300",
        ]
        .map(str::to_owned),
    );
    let hook = Hook::start(&flags);
    let p = pod("late", windows(), &format!("{host}/linuxonly:1"));
    runtime().block_on(async {
        registry.pause();
        let r = hook.review("/validate", &p).await;
        assert_eq!(r["allowed"], true, "past the deadline, fail open: {r}");
        assert!(hook.rules_of("late").contains("WIN-IMAGE-FACTS-UNKNOWN"));
        assert_eq!(
            hook.metric("winadmit_registry_review_deadlines_total", &host)
                .await,
            1.0
        );
        registry.resume();
        // The lookup ends now; the next reviews get its facts.
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let r = hook.review("/validate", &p).await;
            if r["allowed"] == false {
                assert!(message(&r).contains("no Windows variant"), "{r}");
                break;
            }
            assert!(
                Instant::now() < give_up,
                "the lookup never filled the cache"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            hook.metric("winadmit_registry_lookups_total", &host).await,
            1.0
        );
    });
}

/// `--registry-review-timeout` must stay under `--request-timeout`.
#[test]
fn review_deadline_must_be_under_the_request_timeout() {
    let out = std::process::Command::new(server::BIN)
        .args([
            "serve",
            "--self-signed",
            "--cluster-cache",
            "off",
            "--registry",
            "--registry-review-timeout",
            "20s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--registry-review-timeout"), "{err}");
}

/// The server time per review (the log line's `latency_us`) of `n`
/// reviews of pods named `{prefix}{i}`, sorted.
fn latencies(hook: &Hook, prefix: &str, n: usize) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut found: Vec<u64> = hook
            .server
            .stdout
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| {
                v["message"] == "admission review"
                    && v["name"].as_str().is_some_and(|s| s.starts_with(prefix))
            })
            .filter_map(|v| v["latency_us"].as_u64())
            .collect();
        if found.len() >= n {
            found.sort_unstable();
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{prefix}: {} of {n} log lines",
            found.len()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn percentiles(name: &str, sorted: &[u64]) {
    let at = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name:<44} n={:<4} p50={:>6} us  p90={:>6} us  p99={:>6} us",
        sorted.len(),
        at(0.5),
        at(0.9),
        at(0.99)
    );
}

/// The cost of `--registry` per `/validate` review, as the server logs it
/// (`latency_us`: body in to answer out): a cold image (not cached: one
/// lookup at the local registry), a warm one (cached), and the same review
/// without `--registry`. Run with a release server, see docs/BENCHMARKS.md.
#[test]
#[ignore = "benchmark: WINADMIT_TEST_BIN=target/release/winadmit cargo test --test webhook -- --ignored serve_registry::bench --nocapture"]
fn bench_registry_cold_and_warm() {
    const N: usize = 300;
    let registry = Registry::start(false);
    push_images(&registry);
    let host = registry.host.clone();
    // N tags of one Linux-only index: each a cold lookup.
    {
        let (client, auth) = registry.client();
        let rt = runtime();
        rt.block_on(async {
            for i in 0..N {
                registry_support::push_index(
                    &client,
                    &auth,
                    &host,
                    "bench",
                    &format!("t{i}"),
                    &[registry_support::plat("linux", "amd64", None)],
                )
                .await;
            }
        });
    }
    let with = Hook::start(&registry.flags());
    let without = {
        let dir = tempfile::tempdir().unwrap();
        let certs = dir.path().join("certs");
        let server = server::Server::start(&[
            "--self-signed",
            "--self-signed-dir",
            certs.to_str().unwrap(),
            "--cluster-cache",
            "off",
        ]);
        let ca = std::fs::read_to_string(certs.join("ca.pem")).unwrap();
        Hook {
            server,
            ca,
            _dir: dir,
        }
    };
    let rt = runtime();
    rt.block_on(async {
        let warm_image = format!("{host}/bench:t0");
        for i in 0..N {
            let r = with
                .review(
                    "/validate",
                    &pod(
                        &format!("cold{i}"),
                        windows(),
                        &format!("{host}/bench:t{i}"),
                    ),
                )
                .await;
            assert_eq!(r["allowed"], false, "{r}");
        }
        for i in 0..N {
            let r = with
                .review(
                    "/validate",
                    &pod(&format!("warm{i}"), windows(), &warm_image),
                )
                .await;
            assert_eq!(r["allowed"], false, "{r}");
            let r = without
                .review(
                    "/validate",
                    &pod(&format!("off{i}"), windows(), &warm_image),
                )
                .await;
            assert_eq!(r["allowed"], true, "{r}");
        }
    });
    assert_eq!(
        rt.block_on(with.metric("winadmit_registry_lookups_total", &host)),
        N as f64
    );
    percentiles(
        "--registry, cold (one lookup per review)",
        &latencies(&with, "cold", N),
    );
    percentiles("--registry, warm (cached)", &latencies(&with, "warm", N));
    percentiles("without --registry", &latencies(&without, "off", N));
}

/// (object, rule, message) of every finding of a report.
fn report_findings(report: &Value) -> Vec<(String, String, String)> {
    let mut list = Vec::new();
    for o in report["objects"].as_array().unwrap() {
        for f in o["findings"].as_array().unwrap() {
            list.push((
                o["name"].as_str().unwrap().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            ));
        }
    }
    list.sort();
    list
}

/// `POST /report` looks the images of its body up through the same cache
/// as `/validate` (JSON, YAML and AdmissionReview bodies): the verdicts
/// come from the facts, a review after it is a cache hit, and a registry
/// that hangs leaves the report's facts unknown at the review deadline.
#[test]
#[cfg_attr(
    no_registry,
    ignore = "needs docker-registry and htpasswd on PATH (Debian packages docker-registry, apache2-utils); CI sets WINADMIT_REQUIRE_REGISTRY"
)]
fn report_endpoint_uses_the_registry_cache() {
    let registry = Registry::start(false);
    push_images(&registry);
    let host = registry.host.clone();
    let mut flags = registry.flags();
    // Long enough for a loaded machine's first lookups; the hanging
    // registry below costs it once.
    flags.extend(
        [
            "--request-timeout",
            "30s",
            "--registry-review-timeout",
            "8s",
            "--registry-timeout",
            "20",
        ]
        .map(str::to_owned),
    );
    let hook = Hook::start(&flags);
    let image = |name: &str| format!("{host}/{name}");
    runtime().block_on(async {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            pod("lin", windows(), &image("linuxonly:1")),
            pod("unpinned", None, &image("winonly:1")),
        ]});
        let report = hook
            .report("application/json", list.to_string().into_bytes())
            .await;
        let found = report_findings(&report);
        let linux = found
            .iter()
            .find(|f| f.0 == "lin" && f.1 == "WIN-LINUX-IMAGE")
            .unwrap_or_else(|| panic!("{found:?}"));
        assert!(
            linux.2.contains("has platforms linux/amd64, linux/arm64/v8: no Windows variant"),
            "{linux:?}"
        );
        assert!(
            found
                .iter()
                .any(|f| f.0 == "unpinned" && f.1 == "WIN-IMAGE-WINDOWS-ONLY"),
            "{found:?}"
        );
        // The untargeted pod is patched with the Windows selector: warn.
        assert_eq!(report["summary"]["verdicts"]["deny"], 1, "{report}");
        assert_eq!(report["summary"]["verdicts"]["warn"], 1, "{report}");
        assert_eq!(
            hook.metric("winadmit_registry_lookups_total", &host).await,
            2.0
        );

        // /validate of the same pod: from the cache the report filled.
        let hits = hook
            .metric("winadmit_registry_cache_hits_total", &host)
            .await;
        let r = hook
            .review("/validate", &pod("lin", windows(), &image("linuxonly:1")))
            .await;
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(
            hook.metric("winadmit_registry_cache_hits_total", &host)
                .await,
            hits + 1.0
        );

        // YAML and an AdmissionReview body: the same verdict, from the
        // cache (no new lookup).
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lin\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: c\n    image: {}\n",
            image("linuxonly:1")
        );
        let review = admission::admission_review(&pod("lin", windows(), &image("linuxonly:1")));
        for (content_type, body) in [
            ("application/yaml", yaml.into_bytes()),
            ("application/json", review),
        ] {
            let report = hook.report(content_type, body).await;
            let found = report_findings(&report);
            assert!(
                found.iter().any(|f| f.0 == "lin" && f.1 == "WIN-LINUX-IMAGE"),
                "{content_type}: {found:?}"
            );
        }
        assert_eq!(
            hook.metric("winadmit_registry_lookups_total", &host).await,
            2.0
        );

        // A registry that hangs: the report is answered at the review
        // deadline, the image judged by its name, its facts unknown.
        registry.pause();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            pod("later", windows(), &image("linuxonly:9")),
        ]});
        let report = hook
            .report("application/json", list.to_string().into_bytes())
            .await;
        registry.resume();
        let found = report_findings(&report);
        let unknown = found
            .iter()
            .find(|f| f.0 == "later" && f.1 == "WIN-IMAGE-FACTS-UNKNOWN")
            .unwrap_or_else(|| panic!("{found:?}"));
        // The words of every unreachable registry (the log says it was the
        // review's deadline): a caller cannot tell silence from a closed port.
        assert!(
            unknown
                .2
                .contains("unreachable: no connection, TLS session or answer in time"),
            "{unknown:?}"
        );
        assert_eq!(report["summary"]["verdicts"]["deny"], 0, "{report}");
    });
}
