//! Server time per review, body in to response out, measured in-process
//! one review at a time with microsecond resolution: p50/p99/p99.9/max for
//! each fixture, through `admission::review` (the decision and encoding)
//! and through the whole axum router (routing, content-type check, body,
//! metrics, the request log line formatted into a sink).
//!
//! cargo run --release --example review_latency [iterations] [policy.yaml]
//!
//! `REVIEW_ONLY=<fixture>:<endpoint>` (e.g. `pod-windows-create.json:mutate`)
//! runs that one row, for a profiler.
//!
//! `COLD_MB=<n>` writes an n MiB buffer before each timed review, so each
//! starts with its data (and the code in the shared caches) evicted, as in
//! a server between two requests. Each fixture then also gets a `floor`
//! row: what `benches/programs/noop_server.rs` does with the body (read the uid,
//! write `allowed: true`), under the same eviction.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use tower::ServiceExt;
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::{self, Admission, Endpoint};
use winadmit::entry::server::{self, Limits, ServerState};

#[path = "support/floor.rs"]
mod floor;

/// The allocator of the `winadmit` binary (src/main.rs), so the numbers
/// here are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FIXTURES: &[(&str, Endpoint)] = &[
    ("pod-windows-create.json", Endpoint::Validate),
    ("pod-windows-create.json", Endpoint::Mutate),
    ("pod-windows-create.json", Endpoint::Admit),
    ("pod-windows-denied.json", Endpoint::Validate),
    ("pod-windows-fixable.json", Endpoint::Mutate),
    ("pod-windows-fixable.json", Endpoint::Admit),
    ("deployment-windows-create.json", Endpoint::Validate),
    ("deployment-windows-create.json", Endpoint::Mutate),
    ("pod-linux-create.json", Endpoint::Validate),
    ("pod-windows-create-20k.json", Endpoint::Validate),
    ("pod-windows-create-20k.json", Endpoint::Mutate),
    ("pod-update-30k.json", Endpoint::Validate),
];

/// The default policy, with the file named by the second argument layered
/// over it (e.g. benches/floor-policy.yaml, whose `setOsName: true` makes
/// `/mutate` of a clean pod add `spec.os`).
fn admission() -> Admission {
    let policy = match std::env::args().nth(2) {
        Some(path) => winadmit::input::policy::load(&[path.into()]).expect("the policy file"),
        None => Policy::default_policy(),
    };
    Admission {
        policy,
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    }
}

/// Writes every cache line of `buf`, evicting what the caches held.
fn evict_caches(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    std::hint::black_box(&buf);
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn report(name: &str, ep: Endpoint, how: &str, size: usize, mut t: Vec<Duration>) {
    t.sort_unstable();
    println!(
        "| {name} | {} | {how} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
        ep.as_str(),
        size as f64 / 1024.0,
        percentile(&t, 0.5),
        percentile(&t, 0.99),
        percentile(&t, 0.999),
        t.last().unwrap().as_secs_f64() * 1e6,
    );
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .map_or(50_000, |n| n.parse().expect("iterations"));
    // Format log lines as the server does (`--log-format json`), into a sink.
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_target(false)
        .event_format(winadmit::entry::server::jsonlog::JsonLines::default())
        .with_writer(std::io::sink)
        .init();
    let adm = admission();
    let state = ServerState::new(admission(), Limits::default());
    state.set_ready(true);
    let router = server::router(state);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("| fixture | endpoint | path | KiB | p50 us | p99 us | p99.9 us | max us |");
    println!("|---|---|---|---|---|---|---|---|");
    let only = std::env::var("REVIEW_ONLY").ok();
    let cold_mb: usize = std::env::var("COLD_MB").map_or(0, |n| n.parse().expect("COLD_MB"));
    let mut evict = vec![0u8; cold_mb << 20];
    for (name, ep) in FIXTURES {
        if only
            .as_deref()
            .is_some_and(|o| o != format!("{name}:{}", ep.as_str()))
        {
            continue;
        }
        let body = std::fs::read(format!(
            "{}/tests/fixtures/admission/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        for _ in 0..iterations / 10 {
            std::hint::black_box(admission::review(&adm, *ep, &body).unwrap());
        }
        if !evict.is_empty() {
            let mut t = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                evict_caches(&mut evict);
                let start = Instant::now();
                std::hint::black_box(floor::answer(std::hint::black_box(&body)).expect("a review"));
                t.push(start.elapsed());
            }
            report(name, *ep, "floor", body.len(), t);
        }
        let mut t = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            evict_caches(&mut evict);
            let start = Instant::now();
            let out = admission::review(&adm, *ep, std::hint::black_box(&body)).unwrap();
            std::hint::black_box(&out);
            t.push(start.elapsed());
        }
        report(name, *ep, "review()", body.len(), t);

        let path = format!("/{}", ep.as_str());
        let bytes = axum::body::Bytes::from(body.clone());
        let mut t = Vec::with_capacity(iterations);
        rt.block_on(async {
            for i in 0..iterations + iterations / 10 {
                let req = Request::post(path.as_str())
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(bytes.clone()))
                    .unwrap();
                evict_caches(&mut evict);
                let start = Instant::now();
                let resp = router.clone().oneshot(req).await.unwrap();
                let out = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap();
                std::hint::black_box(&out);
                if i >= iterations / 10 {
                    t.push(start.elapsed());
                }
            }
        });
        report(name, *ep, "router", body.len(), t);
    }
}
