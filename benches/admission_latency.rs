//! What an admission setup adds to a pod create, as a user feels it:
//! server-side dry-run creates through a real kube-apiserver v1.37 with
//! etcd (the end-to-end suite's control plane, `tests/support/`), one at a
//! time and from several clients at once.
//!
//! Every setup is installed at once, each scoped to its own namespace
//! (`winadmit-e2e: lat-<setup>`), so all share one API server in one
//! state; rounds interleave the setups (their order rotates each round) and
//! the table gives the median over rounds with the spread of the round
//! medians. Setups:
//!
//! - `none`: no admission webhook or policy matches the namespace;
//! - `noop`: the no-op webhook on winadmit's own stack
//!   (`examples/noop_server.rs`, `NOOP_SERVER` names its binary), both
//!   registrations;
//! - `winadmit`, `validate`, `mutate`: `winadmit serve` with the base
//!   install's policy, both registrations or one;
//! - `policies`: the exported ValidatingAdmissionPolicy and
//!   MutatingAdmissionPolicy (`winadmit admission-policy`).
//!
//! Pods: a Windows pod winadmit admits as it is (`pass`), one it patches
//! (`patched`: `runAsUser`, which Windows ignores), one it denies
//! (`denied`: `hostNetwork` without HostProcess), and a Linux pod, which
//! the registrations' matchConditions keep away from the webhook.
//!
//! Run it with `benches/admission-latency.sh [ROUNDS] [CREATES]` (it builds
//! the no-op server first), or `cargo bench --bench admission_latency --
//! ROUNDS CREATES`. Nothing here is asserted about speed; the run fails
//! only when a setup answers wrongly (a denied pod admitted, a good pod
//! refused).

#[path = "../tests/support/controlplane.rs"]
mod controlplane;
#[path = "../tests/support/e2e.rs"]
mod e2e;
#[path = "../tests/server_support/mod.rs"]
mod server;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use controlplane::ControlPlane;
use e2e::Webhook;

/// Concurrent clients in the throughput phase.
const CLIENTS: usize = 8;

const SETUPS: &[&str] = &["none", "noop", "winadmit", "validate", "mutate", "policies"];

fn pods(ns: &str) -> Vec<(&'static str, Value)> {
    let windows = json!({"kubernetes.io/os": "windows"});
    let iis = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022";
    let container = json!({"name": "web", "image": iis,
        "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}});
    vec![
        (
            "pass",
            e2e::pod(
                ns,
                "pass",
                json!({"os": {"name": "windows"},
                       "nodeSelector": {"kubernetes.io/os": "windows",
                                        "node.kubernetes.io/windows-build": "10.0.20348"},
                       "containers": [container]}),
            ),
        ),
        (
            "patched",
            e2e::pod(
                ns,
                "patched",
                json!({"nodeSelector": windows, "securityContext": {"runAsUser": 1000},
                       "containers": [container]}),
            ),
        ),
        (
            "denied",
            e2e::pod(
                ns,
                "denied",
                json!({"nodeSelector": windows, "hostNetwork": true, "containers": [container]}),
            ),
        ),
        (
            "linux",
            e2e::pod(
                ns,
                "linux",
                json!({"nodeSelector": {"kubernetes.io/os": "linux"},
                       "containers": [{"name": "web", "image": "nginx:1.27"}]}),
            ),
        ),
    ]
}

/// Whether a setup must refuse the pod.
fn refuses(setup: &str, pod: &str) -> bool {
    pod == "denied" && matches!(setup, "winadmit" | "validate" | "policies")
}

/// The no-op webhook as a process, with its own certificate.
struct Noop {
    child: Child,
    port: u16,
    ca: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl Noop {
    fn start(cp: &ControlPlane) -> Self {
        let program = std::env::var("NOOP_SERVER").unwrap_or_else(|_| {
            panic!(
                "NOOP_SERVER names the no-op server's binary: run benches/admission-latency.sh, or cargo build --release --example noop_server first"
            )
        });
        let dir = tempfile::tempdir().unwrap();
        let port = controlplane::free_port();
        let child = Command::new(&program)
            .arg(format!("127.0.0.1:{port}"))
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        cp.adopt(child.id());
        let ca_path = dir.path().join("ca.pem");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ca_path.is_file() || std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the no-op server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            ca: std::fs::read(&ca_path).unwrap(),
            child,
            port,
            _dir: dir,
        }
    }
}

/// Resident memory of a process, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Installs every setup; returns the processes behind the webhooks.
fn install(cp: &ControlPlane) -> (Webhook, Noop) {
    let objects = e2e::rendered("base");
    let webhook =
        Webhook::start(&e2e::overlay_policy(&objects), &["--cluster-cache", "off"]).adopted_by(cp);
    let noop = Noop::start(cp);
    let mut registrations = Vec::new();
    registrations.extend(e2e::registrations(&objects, "lat-winadmit", &webhook));
    registrations.extend(
        e2e::registrations(&objects, "lat-validate", &webhook)
            .into_iter()
            .filter(|o| e2e::kind(o).starts_with("Validating")),
    );
    registrations.extend(
        e2e::registrations(&objects, "lat-mutate", &webhook)
            .into_iter()
            .filter(|o| e2e::kind(o).starts_with("Mutating")),
    );
    registrations.extend(e2e::registrations_at(
        &objects,
        "lat-noop",
        &format!("https://127.0.0.1:{}", noop.port),
        &noop.ca,
    ));
    cp.apply(&e2e::to_list(&registrations));

    let out = e2e::winadmit(&["admission-policy"]);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let mut policies = e2e::parse_yaml(&String::from_utf8(out.stdout).unwrap());
    for p in &mut policies {
        if e2e::kind(p).ends_with("Binding") {
            let selector = &mut p["spec"]["matchResources"]["namespaceSelector"];
            e2e::scope(selector, "lat-policies");
        }
    }
    cp.apply(&e2e::to_list(&policies));
    for setup in SETUPS {
        cp.namespace(&ns(setup), &[("winadmit-e2e", &format!("lat-{setup}"))]);
    }
    (webhook, noop)
}

fn ns(setup: &str) -> String {
    format!("lat-{setup}")
}

/// One server-side dry-run create: its status code and how long it took.
async fn create(client: &kube::Client, pod: &Value) -> (u16, Duration) {
    let ns = pod["metadata"]["namespace"].as_str().unwrap();
    let request = hyper::Request::post(format!("/api/v1/namespaces/{ns}/pods?dryRun=All"))
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(pod).unwrap()))
        .unwrap();
    let start = Instant::now();
    let status = match client.send(request).await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = http_body_util::BodyExt::collect(response.into_body()).await;
            status
        }
        Err(_) => 0,
    };
    (status, start.elapsed())
}

/// Waits until every setup answers as it must (registrations and policy
/// bindings take effect after a short delay).
async fn wait_effective(client: &kube::Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut wrong = Vec::new();
        for setup in SETUPS {
            for (name, pod) in pods(&ns(setup)) {
                let (status, _) = create(client, &pod).await;
                let want_refused = refuses(setup, name);
                if (status == 201) == want_refused || !matches!(status, 201 | 403 | 422) {
                    wrong.push(format!("{setup}/{name}: {status}"));
                }
            }
        }
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "setups not effective after 60 s: {wrong:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    if xs.is_empty() {
        return f64::NAN;
    }
    let mid = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        f64::midpoint(xs[mid - 1], xs[mid])
    }
}

/// p50, p90, p99 of one round (milliseconds).
type Round = [f64; 3];

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let creates: usize = args.next().map_or(200, |a| a.parse().expect("CREATES"));
    let _ = rustls::crypto::ring::default_provider().install_default();

    let cp = controlplane::shared("admission_latency");
    let (webhook, noop) = install(cp);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = cp.client().await;
        wait_effective(&client).await;

        // Sequential latency, rounds interleaved.
        let mut by: BTreeMap<(&str, &str), Vec<Round>> = BTreeMap::new();
        for round in 0..rounds {
            for k in 0..SETUPS.len() {
                let setup = SETUPS[(k + round) % SETUPS.len()];
                for (name, pod) in pods(&ns(setup)) {
                    let mut times = Vec::with_capacity(creates);
                    for _ in 0..creates {
                        let (status, took) = create(&client, &pod).await;
                        assert_eq!(
                            status == 201,
                            !refuses(setup, name),
                            "{setup}/{name}: HTTP {status}"
                        );
                        times.push(took);
                    }
                    times.sort();
                    by.entry((setup, name)).or_default().push([
                        percentile(&times, 0.5),
                        percentile(&times, 0.9),
                        percentile(&times, 0.99),
                    ]);
                }
            }
            eprintln!("round {} of {rounds} done", round + 1);
        }

        // Throughput with several clients: the patched pod, which every
        // webhook setup must answer.
        let mut throughput = BTreeMap::new();
        for setup in SETUPS {
            let pod = pods(&ns(setup)).remove(1).1;
            let start = Instant::now();
            let tasks: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    let client = client.clone();
                    let pod = pod.clone();
                    tokio::spawn(async move {
                        for _ in 0..creates {
                            let (status, _) = create(&client, &pod).await;
                            assert_eq!(status, 201);
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            #[allow(clippy::cast_precision_loss)]
            let per_second = (CLIENTS * creates) as f64 / start.elapsed().as_secs_f64();
            throughput.insert(*setup, per_second);
        }
        print_table(rounds, creates, &by, &throughput, &webhook, &noop);
    });
}

fn print_table(
    rounds: usize,
    creates: usize,
    by: &BTreeMap<(&str, &str), Vec<Round>>,
    throughput: &BTreeMap<&str, f64>,
    webhook: &Webhook,
    noop: &Noop,
) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    println!("# Pod create latency through kube-apiserver v1.37 (server-side dry run)\n");
    println!(
        "{cores} cores ({cpu}); {rounds} rounds x {creates} sequential creates per setup and pod; \
         medians over rounds, [min-max of the round medians]; `cargo bench --bench admission_latency -- {rounds} {creates}`\n"
    );
    println!("| setup | pod | p50 ms | p90 ms | p99 ms | added p50 / p99 over none |");
    println!("|---|---|---|---|---|---|");
    for setup in SETUPS {
        for pod in ["pass", "patched", "denied", "linux"] {
            let Some(r) = by.get(&(*setup, pod)) else {
                continue;
            };
            let col = |i: usize| median(r.iter().map(|x| x[i]).collect());
            let spread = |i: usize| {
                let xs: Vec<f64> = r.iter().map(|x| x[i]).collect();
                let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{:.2} [{lo:.2}-{hi:.2}]", col(i))
            };
            // Added latency: per round, this setup minus none, then the median.
            let added = |i: usize| {
                let none = &by[&("none", pod)];
                median(r.iter().zip(none).map(|(a, b)| a[i] - b[i]).collect())
            };
            println!(
                "| {setup} | {pod} | {} | {} | {} | {:+.2} / {:+.2} |",
                spread(0),
                spread(1),
                spread(2),
                added(0),
                added(2)
            );
        }
    }
    println!(
        "\nThroughput, {CLIENTS} clients x {creates} creates of the patched pod (creates/s):\n"
    );
    println!("| setup | creates/s |");
    println!("|---|---|");
    for (setup, per_second) in throughput {
        println!("| {setup} | {per_second:.0} |");
    }
    println!(
        "\nResident memory after the run: winadmit {:.1} MiB, no-op webhook {:.1} MiB.",
        rss_mib(webhook.server.child.id()),
        rss_mib(noop.child.id())
    );
}
