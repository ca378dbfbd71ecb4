//! The load benchmark's baseline (benches/load.sh): the same stack as
//! `winadmit serve` (the same listener, rustls config, hyper builder and
//! middleware), answering every AdmissionReview `allowed: true` after
//! reading only its `request.uid`, the least any webhook must do.
//!
//! cargo run --release --example noop_server -- 127.0.0.1:9443 /tmp/noop [worker-threads]

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::Admission;
use winadmit::entry::server::listener::{self, Drain};
use winadmit::entry::server::tls::{self, CertResolver};
use winadmit::entry::server::{self, Limits, ServerState};

#[path = "support/floor.rs"]
mod floor;

async fn allow(body: Bytes) -> Response {
    let Some(out) = floor::answer(&body) else {
        return (StatusCode::BAD_REQUEST, "not an AdmissionReview").into_response();
    };
    ([(header::CONTENT_TYPE, "application/json")], out).into_response()
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let listen: std::net::SocketAddr = args.next().unwrap_or("127.0.0.1:9443".into()).parse()?;
    let dir = std::path::PathBuf::from(args.next().unwrap_or("/tmp/winadmit-noop".into()));
    let threads: Option<usize> = args.next().map(|t| t.parse()).transpose()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = tls::self_signed(&dir, &provider)?;
    let config = tls::server_config(Arc::new(CertResolver::new(cert.key)), None, &provider)?;
    let limits = Limits::default();
    let state = ServerState::new(
        Admission {
            policy: Policy::default_policy(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        },
        limits,
    );
    let app = server::layers(
        Router::new()
            .route("/validate", post(allow))
            .route("/mutate", post(allow))
            // The one-call install's path (benches/concurrent_creates.rs
            // registers the no-op as that install).
            .route("/admit", post(allow))
            .route("/healthz", get(|| async { "ok\n" })),
        &limits,
    );
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(n) = threads {
        rt.worker_threads(n);
    }
    rt.build()?.block_on(async move {
        let tcp = tokio::net::TcpListener::bind(listen).await?;
        eprintln!("noop_server: listening on {}", tcp.local_addr()?);
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        listener::serve_tls(tcp, Arc::new(config), app, state, stop, Drain::default()).await?;
        anyhow::Ok(())
    })
}
