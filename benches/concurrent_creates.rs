//! What an admission setup adds to pod creates under load: real creates
//! (not dry-run) from 10, 200 and 500 concurrent clients through a real
//! kube-apiserver v1.37 with etcd, kube-scheduler, kube-controller-manager
//! and KWOK nodes (`tests/support/scheduling.rs`), so that every admitted
//! pod is bound by the scheduler to a simulated Windows or Linux node.
//!
//! Every setup is installed at once, each scoped to its own namespace
//! (`winadmit-e2e: cc-<setup>`, the namespace of the same name); a run
//! takes each number of clients in turn and, for it, every setup in an
//! order that rotates from run to run; between two batches the pods are
//! deleted. The table gives the median over runs with the spread
//! [min-max] of the runs. Setups (the admission setups of
//! `benches/admission_latency.rs`, `benches/support/webhooks.rs`):
//!
//! - `none`: no admission webhook or policy matches the namespace;
//! - `noop`, `noop-one`: the no-op webhook on winadmit's own stack
//!   (`NOOP_SERVER`), registered as winadmit's two-call install
//!   (validating + mutating) or its one-call install (one mutating);
//! - `winadmit`, `one-call`: `winadmit serve` as its base (two-call) or
//!   one-call install sets it up (`tests/support/scheduling.rs`'s
//!   `install_winadmit`: its RBAC, its policy, its cluster cache read as
//!   its ServiceAccount), one replica;
//! - `winadmit-3`, `one-call-3`: the same with three replicas behind a TCP
//!   forwarder in this process that spreads connections round-robin, as
//!   kube-proxy spreads a Service's connections (the API server refuses
//!   loopback endpoints, so a Service cannot name them);
//! - `policies`: the exported ValidatingAdmissionPolicy and
//!   MutatingAdmissionPolicy (`winadmit admission-policy`);
//! - `kyverno`: Kyverno 1.19.1 out of cluster with
//!   `benches/kyverno/policy.yaml`, when `KYVERNO` names its binary.
//!
//! The clients are a ServiceAccount, `cc-clients/load`, with a token from
//! the TokenRequest API and RBAC to create pods and Deployments: not
//! `system:masters`, so the API server's priority and fairness queues
//! their requests (FlowSchema `service-accounts`, priority level
//! `workload-low`) as it queues a CI system's or an operator's. Each
//! client creates its pods one after the other; the pods alternate
//! between a Windows pod winadmit admits as it is, one it patches and a
//! Linux pod (which the registrations' matchConditions keep away from
//! winadmit). Each create's latency counts, refused or failed ones too;
//! every answer that is not 201 is counted by its cause (the API server's
//! `Status` reason and, for webhook failures, the webhook named).
//!
//! Then a Deployment rollout as a user makes one: `kubectl apply` of a
//! Deployment of `ROLLOUT_REPLICAS` (default 1000) Windows pods and
//! `kubectl rollout status`, then `kubectl set image` and `kubectl rollout
//! status` again, as the same ServiceAccount; the ReplicaSet controller
//! creates the pods (as kube-controller-manager's own user, which is
//! `system:masters` here: priority and fairness exempts it).
//!
//! Run it with `benches/concurrent-creates.sh [RUNS] [CREATES_PER_CLIENT]`
//! (`CLIENTS=10,200,500`, `CONCURRENT_SETUPS=none,winadmit,...`,
//! `ROLLOUT_REPLICAS=0` leaves the rollout out), or `cargo bench --bench
//! concurrent_creates -- RUNS CREATES_PER_CLIENT`. Nothing is asserted
//! about speed; the run fails only when a setup answers wrongly before it
//! starts (a denied pod admitted).

#[path = "../tests/support/binary.rs"]
mod binary;
#[path = "../tests/support/controlplane.rs"]
mod controlplane;
#[path = "../tests/support/e2e.rs"]
mod e2e;
#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/support/scheduling.rs"]
mod scheduling;
#[path = "../tests/server_support/mod.rs"]
mod server;
#[path = "support/webhooks.rs"]
mod webhooks;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use controlplane::ControlPlane;
use e2e::Webhook;
use measure::{apiserver_pid, cpu_ms, machine, median, percentile, rss_mib};
use scheduling::{Node, Os};
use webhooks::{Process, Setup, exported_policies};

const SETUPS: &[Setup] = &[
    Setup {
        name: "none",
        what: "no admission webhook or policy",
        refuses: false,
    },
    Setup {
        name: "noop",
        what: "no-op webhook, two-call (validating + mutating)",
        refuses: false,
    },
    Setup {
        name: "noop-one",
        what: "no-op webhook, one-call (one mutating)",
        refuses: false,
    },
    Setup {
        name: "winadmit",
        what: "winadmit two-call install, 1 replica",
        refuses: true,
    },
    Setup {
        name: "one-call",
        what: "winadmit one-call install, 1 replica",
        refuses: true,
    },
    Setup {
        name: "winadmit-3",
        what: "winadmit two-call install, 3 replicas",
        refuses: true,
    },
    Setup {
        name: "one-call-3",
        what: "winadmit one-call install, 3 replicas",
        refuses: true,
    },
    Setup {
        name: "policies",
        what: "the exported admission policies",
        refuses: true,
    },
    Setup {
        name: "kyverno",
        what: "Kyverno 1.19.1, benches/kyverno/policy.yaml",
        refuses: true,
    },
];

/// The pods a client creates, in turn.
const MIX: [&str; 3] = ["pass", "patched", "linux"];

/// How long a client waits for one create (the API server's own request
/// timeout is 60 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(70);

/// The simulated nodes: two Windows Server 2022, two Linux.
fn nodes(room: u32) -> Vec<Node> {
    vec![
        Node::windows("win22-1").room(room),
        Node::windows("win22-2").room(room),
        Node::linux("linux-1").room(room),
        Node::linux("linux-2").room(room),
    ]
}

fn ns(setup: &Setup) -> String {
    format!("cc-{}", setup.name)
}

/// Connections spread round-robin over several replicas, as kube-proxy
/// spreads a Service's: one TCP connection goes to one replica, and the
/// bytes pass through untouched (TLS ends at the replica).
struct Forwarder {
    port: u16,
    /// Connections each replica was given.
    given: Arc<Vec<AtomicUsize>>,
}

impl Forwarder {
    fn start(backends: Vec<u16>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let given: Arc<Vec<AtomicUsize>> =
            Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        let counts = given.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let mut next = 0;
                loop {
                    let Ok((mut inbound, _)) = listener.accept().await else {
                        continue;
                    };
                    let i = next % backends.len();
                    next += 1;
                    counts[i].fetch_add(1, Ordering::Relaxed);
                    let port = backends[i];
                    tokio::spawn(async move {
                        let Ok(mut outbound) =
                            tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                        else {
                            return;
                        };
                        let _ = inbound.set_nodelay(true);
                        let _ = outbound.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    });
                }
            });
        });
        Self { port, given }
    }

    fn given(&self) -> Vec<usize> {
        self.given
            .iter()
            .map(|g| g.load(Ordering::Relaxed))
            .collect()
    }
}

/// The webhooks behind the setups.
#[derive(Default)]
struct Installed {
    /// The processes that answer each setup's reviews.
    replicas: BTreeMap<&'static str, Vec<u32>>,
    forwarders: BTreeMap<&'static str, Forwarder>,
    /// Kept running until the end.
    winadmit: Vec<Webhook>,
    others: Vec<Process>,
}

impl Installed {
    /// CPU `setup`'s webhook processes have used so far (ms).
    fn webhook_cpu_ms(&self, setup: &Setup) -> f64 {
        self.replicas
            .get(setup.name)
            .map_or(0.0, |pids| pids.iter().copied().map(cpu_ms).sum())
    }
}

/// Installs every setup in `chosen`.
fn install(cp: &'static ControlPlane, chosen: &[&Setup]) -> Installed {
    let mut installed = Installed::default();
    let mut registrations = Vec::new();
    let mut policies = Vec::new();
    for setup in chosen {
        let ns = ns(setup);
        match setup.name {
            "noop" | "noop-one" => {
                let noop = Process::noop(cp);
                let url = format!("https://127.0.0.1:{}", noop.port);
                let hooks = if setup.name == "noop" {
                    e2e::registrations_at(&e2e::rendered("base"), &ns, &url, &noop.ca)
                } else {
                    e2e::registrations_at(&e2e::rendered("one-call"), &ns, &url, &noop.ca)
                };
                registrations.extend(hooks);
                installed.replicas.insert(setup.name, vec![noop.child.id()]);
                installed.others.push(noop);
            }
            "winadmit" | "one-call" => {
                let overlay = if setup.name == "winadmit" {
                    "base"
                } else {
                    "one-call"
                };
                let webhook = scheduling::install_winadmit(cp, overlay, &ns);
                installed
                    .replicas
                    .insert(setup.name, vec![webhook.server.child.id()]);
                installed.winadmit.push(webhook);
            }
            "winadmit-3" | "one-call-3" => {
                let overlay = if setup.name == "winadmit-3" {
                    "base"
                } else {
                    "one-call"
                };
                let objects = e2e::rendered(overlay);
                let replicas: Vec<Webhook> = (0..3)
                    .map(|_| scheduling::start_winadmit(cp, &objects, &ns, &[]))
                    .collect();
                let forwarder =
                    Forwarder::start(replicas.iter().map(|w| w.server.addr.port()).collect());
                let bundle: Vec<u8> = replicas.iter().flat_map(|w| w.ca_pem.clone()).collect();
                let url = format!("https://127.0.0.1:{}", forwarder.port);
                registrations.extend(e2e::registrations_at(&objects, &ns, &url, &bundle));
                installed.replicas.insert(
                    setup.name,
                    replicas.iter().map(|w| w.server.child.id()).collect(),
                );
                installed.winadmit.extend(replicas);
                installed.forwarders.insert(setup.name, forwarder);
            }
            "policies" => policies.extend(exported_policies("policies", &ns)),
            "kyverno" => {
                if let Some(kyverno) = Process::kyverno(cp, &ns) {
                    installed
                        .replicas
                        .insert(setup.name, vec![kyverno.child.id()]);
                    installed.others.push(kyverno);
                }
            }
            _ => {}
        }
    }
    for objects in [&registrations, &policies] {
        if !objects.is_empty() {
            cp.apply(&e2e::to_list(objects));
        }
    }
    for setup in chosen {
        cp.namespace(&ns(setup), &[("winadmit-e2e", &ns(setup))]);
    }
    installed
}

/// The clients' user: ServiceAccount `cc-clients/load`, allowed to create
/// pods and to roll out Deployments; a kube client with its token.
async fn client_user(cp: &ControlPlane) -> (kube::Client, std::path::PathBuf) {
    cp.namespace("cc-clients", &[]);
    cp.apply(&e2e::to_list(&[
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "load", "namespace": "cc-clients"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cc-load"},
               "rules": [
                   {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]},
                   {"apiGroups": ["apps"], "resources": ["deployments"],
                    "verbs": ["create", "get", "list", "watch", "patch", "update"]},
                   {"apiGroups": ["apps"], "resources": ["replicasets"],
                    "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "cc-load"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "cc-load"},
               "subjects": [{"kind": "ServiceAccount", "name": "load",
                             "namespace": "cc-clients"}]}),
    ]));
    let dir = tempfile::tempdir().unwrap().keep();
    let path = cp.service_account_kubeconfig(&dir, "cc-clients", "load");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    (kube::Client::try_from(config).unwrap(), path)
}

/// One create: its outcome (`201`, or the cause of the failure) and how
/// long it took.
async fn create(client: &kube::Client, pod: &Value, dry_run: bool) -> (String, Duration) {
    let ns = pod["metadata"]["namespace"].as_str().unwrap();
    let query = if dry_run { "?dryRun=All" } else { "" };
    let request = hyper::Request::post(format!("/api/v1/namespaces/{ns}/pods{query}"))
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(pod).unwrap()))
        .unwrap();
    let start = Instant::now();
    let outcome = match tokio::time::timeout(CLIENT_TIMEOUT, client.send(request)).await {
        Err(_) => "client timeout (70 s)".to_owned(),
        Ok(Err(e)) => format!("client error: {}", first_words(&e.to_string())),
        Ok(Ok(response)) => {
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect_bytes()
                .await
                .unwrap_or_default();
            if status == 201 {
                "201".to_owned()
            } else {
                cause(status, &serde_json::from_slice(&body).unwrap_or_default())
            }
        }
    };
    (outcome, start.elapsed())
}

/// The cause of a failed create, from its `Status`: the code, the reason,
/// and the webhook or policy named in the message.
fn cause(status: u16, body: &Value) -> String {
    let reason = body["reason"].as_str().unwrap_or("");
    let message = body["message"].as_str().unwrap_or("");
    let who = message
        .split_once("failed calling webhook \"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(hook, _)| format!(" webhook {hook}"))
        .or_else(|| {
            message
                .contains("denied the request")
                .then(|| " denied".to_owned())
        })
        .unwrap_or_default();
    let what = if message.contains("deadline exceeded") || message.contains("Timeout") {
        " timeout"
    } else {
        ""
    };
    format!("{status} {reason}{who}{what}")
}

fn first_words(text: &str) -> String {
    text.split_whitespace()
        .take(6)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One batch: `clients` clients, each creating `per_client` pods in `ns`.
struct Batch {
    times: Vec<Duration>,
    outcomes: BTreeMap<String, usize>,
    wall: Duration,
}

async fn batch(
    client: &kube::Client,
    ns: &str,
    tag: &str,
    clients: usize,
    per_client: usize,
) -> Batch {
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let client = client.clone();
            let ns = ns.to_owned();
            let tag = tag.to_owned();
            tokio::spawn(async move {
                let mut mine = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let kind = MIX[(c + i) % MIX.len()];
                    let pod = webhooks::pod(&ns, &format!("{tag}-{c}-{i}"), kind);
                    mine.push(create(&client, &pod, false).await);
                }
                mine
            })
        })
        .collect();
    let mut times = Vec::with_capacity(clients * per_client);
    let mut outcomes = BTreeMap::new();
    for task in tasks {
        for (outcome, took) in task.await.unwrap() {
            times.push(took);
            *outcomes.entry(outcome).or_insert(0) += 1;
        }
    }
    times.sort();
    Batch {
        times,
        outcomes,
        wall: start.elapsed(),
    }
}

/// A GET through the admin client, as JSON.
async fn get(client: &kube::Client, path: &str) -> Value {
    let request = hyper::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(request).await.unwrap_or_default()
}

/// Pods of `ns` bound to a node, on Windows and on Linux nodes, once every
/// pod is bound or 120 s have passed.
async fn bound(admin: &kube::Client, ns: &str, nodes: &[Node]) -> (usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let unbound = get(
            admin,
            &format!("/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%3D&limit=1"),
        )
        .await;
        let none_left = unbound["items"].as_array().is_some_and(Vec::is_empty);
        if none_left || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let pods = get(admin, &format!("/api/v1/namespaces/{ns}/pods")).await;
    let mut windows = 0;
    let mut linux = 0;
    for p in pods["items"].as_array().into_iter().flatten() {
        let node = p["spec"]["nodeName"].as_str().unwrap_or_default();
        match nodes.iter().find(|n| n.name == node).map(|n| n.os) {
            Some(Os::Windows) => windows += 1,
            Some(Os::Linux) => linux += 1,
            None => {}
        }
    }
    (windows, linux)
}

/// Deletes every pod of `ns` (one delete-collection, no grace) and waits
/// until they are gone.
async fn clear(admin: &kube::Client, ns: &str) {
    let request =
        hyper::Request::delete(format!("/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0"))
            .body(Vec::new())
            .unwrap();
    let _ = admin.request::<Value>(request).await;
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let left = get(admin, &format!("/api/v1/namespaces/{ns}/pods?limit=1")).await;
        if left["items"].as_array().is_some_and(Vec::is_empty) || Instant::now() > deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until every refusing setup refuses the denied pod (registrations
/// and policy bindings take effect after a short delay, Kyverno's policy
/// once it has read it).
async fn wait_effective(client: &kube::Client, chosen: &[&Setup]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut wrong = Vec::new();
        for setup in chosen.iter().filter(|s| s.refuses) {
            let pod = webhooks::pod(&ns(setup), "denied", "denied");
            let (outcome, _) = create(client, &pod, true).await;
            if outcome == "201" {
                wrong.push(setup.name);
            }
        }
        if wrong.is_empty() {
            // The setups that refuse nothing: their registrations were
            // applied with the others'.
            tokio::time::sleep(Duration::from_secs(2)).await;
            return;
        }
        assert!(
            Instant::now() < deadline,
            "setups still admitting the denied pod after 120 s: {wrong:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One batch's figures: p50, p95, p99 (ms), the CPU the setup's webhook
/// and the API server used per create (ms), creates a second.
type Figures = [f64; 6];

#[derive(Default)]
struct Results {
    figures: BTreeMap<(usize, &'static str), Vec<Figures>>,
    outcomes: BTreeMap<(usize, &'static str), BTreeMap<String, usize>>,
    /// Admitted, bound to Windows, bound to Linux.
    landed: BTreeMap<(usize, &'static str), [usize; 3]>,
    /// Seconds of the first rollout and of the image change, per run.
    rollouts: BTreeMap<&'static str, Vec<[f64; 2]>>,
    rollout_failures: BTreeMap<&'static str, Vec<String>>,
}

/// The setups to run: `CONCURRENT_SETUPS` (comma-separated names) or all;
/// ([`webhooks::chosen`]) Kyverno only when `KYVERNO` names its binary.
fn chosen() -> Vec<&'static Setup> {
    let names: Vec<&'static str> = SETUPS.iter().map(|s| s.name).collect();
    let chosen = webhooks::chosen("CONCURRENT_SETUPS", &names);
    SETUPS.iter().filter(|s| chosen.contains(&s.name)).collect()
}

fn clients_levels() -> Vec<usize> {
    std::env::var("CLIENTS")
        .unwrap_or_else(|_| "10,200,500".to_owned())
        .split(',')
        .map(|c| c.trim().parse().expect("CLIENTS: numbers, comma-separated"))
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("RUNS"));
    let per_client: usize = args
        .next()
        .map_or(10, |a| a.parse().expect("CREATES_PER_CLIENT"));
    let levels = clients_levels();
    let replicas: usize = std::env::var("ROLLOUT_REPLICAS")
        .map_or(1000, |r| r.parse().expect("ROLLOUT_REPLICAS: a number"));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chosen = chosen();

    let most = levels.iter().max().copied().unwrap_or(0) * per_client;
    let room = u32::try_from(most.max(replicas * 2) / 2 + 100).unwrap_or(u32::MAX);
    let cluster = scheduling::shared("concurrent_creates");
    let cp = cluster.cp;
    let nodes = cluster.nodes(&nodes(room));
    let installed = install(cp, &chosen);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let results = rt.block_on(async {
        let admin = cp.client().await;
        let (client, kubeconfig) = client_user(cp).await;
        wait_effective(&client, &chosen).await;
        let apiserver = apiserver_pid(cp.port);
        let mut results = Results::default();
        for run in 0..runs {
            for &clients in &levels {
                for k in 0..chosen.len() {
                    let setup = chosen[(k + run) % chosen.len()];
                    let ns = ns(setup);
                    let tag = format!("r{run}-c{clients}");
                    let cpu = (installed.webhook_cpu_ms(setup), cpu_ms(apiserver));
                    let b = batch(&client, &ns, &tag, clients, per_client).await;
                    #[allow(clippy::cast_precision_loss)]
                    let n = b.times.len() as f64;
                    let figures = [
                        percentile(&b.times, 0.5),
                        percentile(&b.times, 0.95),
                        percentile(&b.times, 0.99),
                        (installed.webhook_cpu_ms(setup) - cpu.0) / n,
                        (cpu_ms(apiserver) - cpu.1) / n,
                        n / b.wall.as_secs_f64(),
                    ];
                    let admitted = b.outcomes.get("201").copied().unwrap_or(0);
                    let (windows, linux) = bound(&admin, &ns, &nodes.nodes).await;
                    eprintln!(
                        "run {} clients {clients} {}: p50 {:.1} ms p99 {:.1} ms, {admitted} admitted, {windows}+{linux} bound",
                        run + 1,
                        setup.name,
                        figures[0],
                        figures[2]
                    );
                    results
                        .figures
                        .entry((clients, setup.name))
                        .or_default()
                        .push(figures);
                    let outcomes = results.outcomes.entry((clients, setup.name)).or_default();
                    for (outcome, count) in b.outcomes {
                        *outcomes.entry(outcome).or_insert(0) += count;
                    }
                    let landed = results.landed.entry((clients, setup.name)).or_default();
                    landed[0] += admitted;
                    landed[1] += windows;
                    landed[2] += linux;
                    clear(&admin, &ns).await;
                }
            }
            if replicas > 0 {
                for k in 0..chosen.len() {
                    let setup = chosen[(k + run) % chosen.len()];
                    let ns = ns(setup);
                    match rollout(cp, &kubeconfig, &ns, replicas) {
                        Ok(times) => results.rollouts.entry(setup.name).or_default().push(times),
                        Err(e) => results
                            .rollout_failures
                            .entry(setup.name)
                            .or_default()
                            .push(e),
                    }
                    // Its ReplicaSets and pods first: left to the
                    // garbage collector, they would outlive the clean-up.
                    cp.kubectl(&[
                        "delete",
                        "deployment",
                        "-n",
                        &ns,
                        "web",
                        "--cascade=foreground",
                        "--timeout=600s",
                    ]);
                    clear(&admin, &ns).await;
                }
            }
            eprintln!("run {} of {runs} done", run + 1);
        }
        results
    });
    print_tables(
        runs, per_client, replicas, &levels, &chosen, &results, &installed,
    );
}

/// The Deployment `web` of `replicas` Windows pods in `ns`, rolled out and
/// then given a new image, with kubectl as the clients' user: the seconds
/// each rollout took until `kubectl rollout status` returned.
fn rollout(
    cp: &ControlPlane,
    kubeconfig: &std::path::Path,
    ns: &str,
    replicas: usize,
) -> Result<[f64; 2], String> {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "os": {"name": "windows"},
                    "nodeSelector": {"kubernetes.io/os": "windows"},
                    "containers": [{"name": "web", "image": webhooks::IIS,
                        "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}}],
                },
            },
        },
    });
    let dir = tempfile::tempdir().unwrap();
    let file = e2e::write(dir.path(), "web.json", &deployment.to_string());
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new(cp.bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "kubectl {}: {}",
                args.join(" "),
                e2e::stderr(&out).trim()
            ))
        }
    };
    let status = [
        "rollout",
        "status",
        "-n",
        ns,
        "deployment/web",
        "--timeout=900s",
    ];
    let start = Instant::now();
    kubectl(&["apply", "-f", file.to_str().unwrap()])?;
    kubectl(&status)?;
    let first = start.elapsed().as_secs_f64();
    let start = Instant::now();
    kubectl(&[
        "set",
        "image",
        "-n",
        ns,
        "deployment/web",
        "web=mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022",
    ])?;
    kubectl(&status)?;
    Ok([first, start.elapsed().as_secs_f64()])
}

fn spread(xs: &[f64]) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.1} [{lo:.1}-{hi:.1}]", median(xs.to_vec()))
}

fn outcomes_text(outcomes: &BTreeMap<String, usize>) -> String {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|(o, _)| o.as_str() != "201")
        .map(|(o, n)| format!("{n} {o}"))
        .collect();
    if failed.is_empty() {
        "0".to_owned()
    } else {
        failed.join("; ")
    }
}

fn print_tables(
    runs: usize,
    per_client: usize,
    replicas: usize,
    levels: &[usize],
    chosen: &[&Setup],
    results: &Results,
    installed: &Installed,
) {
    let levels_text: Vec<String> = levels.iter().map(ToString::to_string).collect();
    let levels_text = levels_text.join(",");
    println!("### Concurrent pod creates through kube-apiserver v1.37, KWOK nodes\n");
    println!(
        "{}, {}; runs: {runs}, each: {} clients x {per_client} creates per setup, setups \
         interleaved (order rotated each run), pods deleted between batches; medians over runs \
         [min-max of the runs]; errors summed over the runs. Clients: ServiceAccount \
         `cc-clients/load` (priority level `workload-low`). \
         `CLIENTS={levels_text} benches/concurrent-creates.sh {runs} {per_client}`\n",
        measure::today(),
        machine(),
        levels_text
    );
    println!(
        "| clients | setup | what | p50 ms | p95 ms | p99 ms | added p50 / p99 over none | errors and timeouts | admitted, bound (Windows + Linux) | webhook CPU ms per create | API server CPU ms per create | creates/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut broke = Vec::new();
    for &clients in levels {
        for setup in chosen {
            let Some(r) = results.figures.get(&(clients, setup.name)) else {
                continue;
            };
            let col = |i: usize| r.iter().map(|x| x[i]).collect::<Vec<_>>();
            let none = &results.figures[&(clients, "none")];
            // Added latency: per run, this setup minus none, then the median.
            let added = |i: usize| median(r.iter().zip(none).map(|(a, b)| a[i] - b[i]).collect());
            let outcomes = &results.outcomes[&(clients, setup.name)];
            let landed = results.landed[&(clients, setup.name)];
            if setup.name == "none" && outcomes.keys().any(|o| o != "201") {
                broke.push(clients);
            }
            println!(
                "| {clients} | {} | {} | {} | {} | {} | {:+.1} / {:+.1} | {} | {}, {} + {} | {:.2} | {:.2} | {:.0} |",
                setup.name,
                setup.what,
                spread(&col(0)),
                spread(&col(1)),
                spread(&col(2)),
                added(0),
                added(2),
                outcomes_text(outcomes),
                landed[0],
                landed[1],
                landed[2],
                median(col(3)),
                median(col(4)),
                median(col(5)),
            );
        }
    }
    if !broke.is_empty() {
        println!(
            "\nWith no admission at all, this machine did not hold {broke:?} clients without errors or timeouts."
        );
    }
    let mut spreads = String::new();
    for (name, forwarder) in &installed.forwarders {
        let _ = write!(spreads, " {name}: {:?};", forwarder.given());
    }
    if !spreads.is_empty() {
        println!(
            "\nConnections the API server opened to each of the three replicas (all runs):{}",
            spreads.trim_end_matches(';')
        );
    }
    let mut memory = String::new();
    for setup in chosen {
        if let Some(pids) = installed.replicas.get(setup.name) {
            let mib: Vec<String> = pids.iter().map(|p| format!("{:.0}", rss_mib(*p))).collect();
            let _ = write!(memory, " {} {} MiB;", setup.name, mib.join(" + "));
        }
    }
    println!(
        "\nResident memory of the webhooks after the run:{}",
        memory.trim_end_matches(';')
    );
    if replicas == 0 {
        return;
    }
    println!(
        "\n### A Deployment rollout: {replicas} Windows pods, then an image change\n\n\
         `kubectl apply` and `kubectl rollout status`, then `kubectl set image` and `kubectl rollout status`, \
         as the clients' user; the ReplicaSet controller creates the pods (kube-controller-manager's defaults: \
         20 requests a second, bursts of 30). Medians over runs [min-max].\n"
    );
    println!("| setup | rollout s | image change s | failures |");
    println!("|---|---|---|---|");
    for setup in chosen {
        let times = results.rollouts.get(setup.name);
        let failures = results
            .rollout_failures
            .get(setup.name)
            .map_or_else(|| "0".to_owned(), |f| f.join("; "));
        let col = |i: usize| {
            times.map_or_else(
                || "-".to_owned(),
                |t| spread(&t.iter().map(|x| x[i]).collect::<Vec<_>>()),
            )
        };
        println!("| {} | {} | {} | {failures} |", setup.name, col(0), col(1));
    }
}
