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
//!   (`benches/programs/noop_server.rs`, `NOOP_SERVER` names its binary), both
//!   registrations;
//! - `winadmit`, `validate`, `mutate`: `winadmit serve` with the base
//!   install's policy, both registrations or one;
//! - `winadmit-mixed`: the base install again, with winadmit's cluster
//!   cache on and a Windows Node in the cluster;
//! - `winadmit-no-windows`: the base install with `pin-linux.winadmit.io`
//!   as `serve --manage-pin-linux` leaves it in a cluster without Windows
//!   nodes (no rules: the API server calls it for nothing);
//! - `policies`: the exported ValidatingAdmissionPolicy and
//!   MutatingAdmissionPolicy (`winadmit admission-policy`);
//! - `kyverno`, `gatekeeper`: Kyverno and OPA Gatekeeper out of cluster
//!   with equivalent policies (`benches/kyverno/`, `benches/gatekeeper/`),
//!   when `KYVERNO` and `GATEKEEPER` name their binaries.
//!
//! Pods: a Windows pod winadmit admits as it is (`pass`), one it patches
//! (`patched`: `runAsUser`, which Windows ignores), one it denies
//! (`denied`: `hostNetwork` without HostProcess), a Linux pod pinned to
//! Linux, which the registrations' matchConditions keep away from the
//! webhook, and one that selects no OS (`unpinned`: nginx), which only the
//! `pin-linux.winadmit.io` registration (failurePolicy Ignore) sends:
//! answered unchanged without Windows nodes, pinned to Linux with them.
//!
//! Run it with `benches/admission-latency.sh [ROUNDS] [CREATES]` (it builds
//! the no-op server first), or `cargo bench --bench admission_latency --
//! ROUNDS CREATES`. Nothing here is asserted about speed; the run fails
//! only when a setup answers wrongly (a denied pod admitted, a good pod
//! refused).

#[path = "../tests/support/binary.rs"]
mod binary;
#[path = "../tests/support/controlplane.rs"]
mod controlplane;
#[path = "../tests/support/e2e.rs"]
mod e2e;
#[path = "support/measure.rs"]
mod measure;
#[path = "../tests/server_support/mod.rs"]
mod server;
#[path = "support/webhooks.rs"]
mod webhooks;

use std::collections::BTreeMap;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use controlplane::ControlPlane;
use e2e::Webhook;
use measure::{apiserver_pid, connections_to, cpu_ms, machine, median, percentile, rss_mib};
use webhooks::{Process, Setup, exported_policies, only};

/// Concurrent clients in the throughput phase.
const CLIENTS: usize = 8;

const SETUPS: &[Setup] = &[
    Setup {
        name: "none",
        what: "no admission webhook or policy",
        refuses: false,
    },
    Setup {
        name: "noop",
        what: "no-op webhook, validating + mutating registrations",
        refuses: false,
    },
    Setup {
        name: "noop-one",
        what: "no-op webhook, one mutating registration",
        refuses: false,
    },
    Setup {
        name: "winadmit",
        what: "winadmit `/validate` + `/mutate` (the base install)",
        refuses: true,
    },
    Setup {
        name: "winadmit-mixed",
        what: "winadmit `/validate` + `/mutate` (the base install) with a Windows node in its cluster cache",
        refuses: true,
    },
    Setup {
        name: "winadmit-no-windows",
        what: "winadmit `/validate` + `/mutate` (the base install) as `--manage-pin-linux` leaves it in a cluster without Windows nodes",
        refuses: true,
    },
    Setup {
        name: "one-call",
        what: "winadmit `/admit`, one mutating registration (the one-call install)",
        refuses: true,
    },
    Setup {
        name: "validate",
        what: "winadmit `/validate` only",
        refuses: true,
    },
    Setup {
        name: "mutate",
        what: "winadmit `/mutate` only",
        refuses: false,
    },
    Setup {
        name: "policies",
        what: "the exported admission policies, all three",
        refuses: true,
    },
    Setup {
        name: "policy-errors",
        what: "the exported ValidatingAdmissionPolicy `winadmit-errors` alone",
        refuses: true,
    },
    Setup {
        name: "policy-warnings",
        what: "the exported ValidatingAdmissionPolicy `winadmit-warnings` alone",
        refuses: false,
    },
    Setup {
        name: "policy-mutate",
        what: "the exported MutatingAdmissionPolicy `winadmit-mutate` alone",
        refuses: false,
    },
    Setup {
        name: "kyverno",
        what: "Kyverno 1.19.1 out of cluster, benches/kyverno/policy.yaml",
        refuses: true,
    },
    Setup {
        name: "gatekeeper",
        what: "Gatekeeper 3.23.1 out of cluster, benches/gatekeeper/policy.yaml",
        refuses: true,
    },
];

const PODS: [&str; 5] = ["pass", "patched", "denied", "linux", "unpinned"];

fn pods(ns: &str) -> Vec<(&'static str, Value)> {
    PODS.iter()
        .map(|&kind| (kind, webhooks::pod(ns, kind, kind)))
        .collect()
}

/// Whether `setup` must refuse the pod.
fn refuses(setup: &Setup, pod: &str) -> bool {
    pod == "denied" && setup.refuses
}

/// The webhooks behind the setups.
struct Installed {
    winadmit: Webhook,
    /// winadmit reading the cluster (a Windows Node) through its cache.
    mixed: Option<Webhook>,
    noop: Process,
    kyverno: Option<Process>,
    gatekeeper: Option<Process>,
}

impl Installed {
    /// The process that answers `setup`'s reviews besides the API server.
    fn webhook_pid(&self, setup: &Setup) -> Option<u32> {
        match setup.name {
            "winadmit" | "winadmit-no-windows" | "one-call" | "validate" | "mutate" => {
                Some(self.winadmit.server.child.id())
            }
            "winadmit-mixed" => self.mixed.as_ref().map(|w| w.server.child.id()),
            "noop" | "noop-one" => Some(self.noop.child.id()),
            "kyverno" => self.kyverno.as_ref().map(|k| k.child.id()),
            "gatekeeper" => self.gatekeeper.as_ref().map(|g| g.child.id()),
            _ => None,
        }
    }

    /// CPU the API server and `setup`'s webhook have used so far (ms).
    fn cpu_ms(&self, apiserver: u32, setup: &Setup) -> f64 {
        cpu_ms(apiserver) + self.webhook_pid(setup).map_or(0.0, cpu_ms)
    }
}

/// Installs every setup in `chosen`.
fn install(cp: &ControlPlane, chosen: &[&Setup]) -> Installed {
    let objects = e2e::rendered("base");
    let winadmit =
        Webhook::start(&e2e::overlay_policy(&objects), &["--cluster-cache", "off"]).adopted_by(cp);
    // A cluster with Windows nodes, as winadmit's cache sees it: one
    // Windows Node object (nothing schedules in the benchmark).
    let mixed = chosen.iter().any(|s| s.name == "winadmit-mixed").then(|| {
        cp.apply(
            &json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "bench-win22-1", "labels": {"kubernetes.io/os": "windows"}}})
            .to_string(),
        );
        Webhook::start(
            &e2e::overlay_policy(&objects),
            &["--cluster-cache", "on", "--kubeconfig", cp.kubeconfig.to_str().unwrap()],
        )
        .adopted_by(cp)
    });
    let noop = Process::noop(cp);
    let noop_url = format!("https://127.0.0.1:{}", noop.port);
    let mutating = "MutatingWebhookConfiguration";
    let validating = "ValidatingWebhookConfiguration";
    let mut registrations = Vec::new();
    let mut policies = Vec::new();
    let mut kyverno = None;
    let mut gatekeeper = None;
    for setup in chosen {
        let ns = ns(setup);
        match setup.name {
            "winadmit" => registrations.extend(e2e::registrations(&objects, &ns, &winadmit)),
            "winadmit-no-windows" => {
                let mut hooks = e2e::registrations(&objects, &ns, &winadmit);
                for c in &mut hooks {
                    let pin_linux = c["webhooks"]
                        .as_array_mut()
                        .into_iter()
                        .flatten()
                        .filter(|h| h["name"] == "pin-linux.winadmit.io");
                    for h in pin_linux {
                        h["rules"] = json!([]);
                    }
                }
                registrations.extend(hooks);
            }
            "winadmit-mixed" => {
                let mixed = mixed.as_ref().unwrap();
                registrations.extend(e2e::registrations(&objects, &ns, mixed));
            }
            "validate" => registrations.extend(only(
                e2e::registrations(&objects, &ns, &winadmit),
                validating,
            )),
            "mutate" => {
                registrations.extend(only(e2e::registrations(&objects, &ns, &winadmit), mutating));
            }
            "one-call" => {
                let mut hooks = only(e2e::registrations(&objects, &ns, &winadmit), mutating);
                for hook in hooks[0]["webhooks"].as_array_mut().unwrap() {
                    let url = hook["clientConfig"]["url"]
                        .as_str()
                        .unwrap()
                        .replace("/mutate", "/admit");
                    hook["clientConfig"]["url"] = json!(url);
                }
                registrations.extend(hooks);
            }
            "noop" => {
                registrations.extend(e2e::registrations_at(&objects, &ns, &noop_url, &noop.ca));
            }
            "noop-one" => registrations.extend(only(
                e2e::registrations_at(&objects, &ns, &noop_url, &noop.ca),
                mutating,
            )),
            "policies" | "policy-errors" | "policy-warnings" | "policy-mutate" => {
                policies.extend(exported_policies(setup.name, &ns));
            }
            "kyverno" => kyverno = Process::kyverno(cp, &ns),
            "gatekeeper" => {
                if let Some((process, hooks)) = Process::gatekeeper(cp, &ns) {
                    registrations.extend(hooks);
                    gatekeeper = Some(process);
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
    Installed {
        winadmit,
        mixed,
        noop,
        kyverno,
        gatekeeper,
    }
}

fn ns(setup: &Setup) -> String {
    format!("lat-{}", setup.name)
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
async fn wait_effective(client: &kube::Client, chosen: &[&Setup]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut wrong = Vec::new();
        for setup in chosen {
            for (name, pod) in pods(&ns(setup)) {
                let (status, _) = create(client, &pod).await;
                let want_refused = refuses(setup, name);
                if (status == 201) == want_refused || !matches!(status, 201 | 400 | 403 | 422) {
                    wrong.push(format!("{}/{name}: {status}", setup.name));
                }
            }
        }
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "setups not effective after 120 s: {wrong:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// p50, p90, p99 of one round (milliseconds), and the CPU the API server
/// and the setup's webhook used per create (milliseconds).
type Round = [f64; 4];

/// The setups to run: `LATENCY_SETUPS` (comma-separated names) or all;
/// ([`webhooks::chosen`]) Kyverno only when `KYVERNO` names its binary.
fn chosen() -> Vec<&'static Setup> {
    let names: Vec<&'static str> = SETUPS.iter().map(|s| s.name).collect();
    let chosen = webhooks::chosen("LATENCY_SETUPS", &names);
    SETUPS.iter().filter(|s| chosen.contains(&s.name)).collect()
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let creates: usize = args.next().map_or(200, |a| a.parse().expect("CREATES"));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chosen = chosen();

    let cp = controlplane::shared("admission_latency");
    let installed = install(cp, &chosen);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = cp.client().await;
        wait_effective(&client, &chosen).await;
        let apiserver = apiserver_pid(cp.port);

        // Sequential latency, rounds interleaved.
        let mut by: BTreeMap<(&str, &str), Vec<Round>> = BTreeMap::new();
        for round in 0..rounds {
            for k in 0..chosen.len() {
                let setup = chosen[(k + round) % chosen.len()];
                for (name, pod) in pods(&ns(setup)) {
                    let mut times = Vec::with_capacity(creates);
                    let cpu = installed.cpu_ms(apiserver, setup);
                    for _ in 0..creates {
                        let (status, took) = create(&client, &pod).await;
                        assert_eq!(
                            status == 201,
                            !refuses(setup, name),
                            "{}/{name}: HTTP {status}",
                            setup.name
                        );
                        times.push(took);
                    }
                    #[allow(clippy::cast_precision_loss)]
                    let cpu = (installed.cpu_ms(apiserver, setup) - cpu) / creates as f64;
                    times.sort();
                    by.entry((setup.name, name)).or_default().push([
                        percentile(&times, 0.5),
                        percentile(&times, 0.9),
                        percentile(&times, 0.99),
                        cpu,
                    ]);
                }
            }
            eprintln!("round {} of {rounds} done", round + 1);
        }

        // Throughput with several clients: the patched pod, which every
        // setup admits.
        let mut throughput = BTreeMap::new();
        for setup in &chosen {
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
            throughput.insert(setup.name, per_second);
        }
        print_table(rounds, creates, &chosen, &by, &throughput, &installed);
    });
}

fn print_table(
    rounds: usize,
    creates: usize,
    chosen: &[&Setup],
    by: &BTreeMap<(&str, &str), Vec<Round>>,
    throughput: &BTreeMap<&str, f64>,
    installed: &Installed,
) {
    let date = measure::today();
    println!("### Pod creates through kube-apiserver v1.37 (server-side dry run)\n");
    println!(
        "{date}, {}; {rounds} rounds x {creates} sequential creates per setup and pod, \
         setups interleaved; medians over rounds, [min-max of the round medians]. \
         `benches/admission-latency.sh {rounds} {creates}`\n",
        machine()
    );
    println!(
        "| setup | what | pod | p50 ms | p90 ms | p99 ms | added p50 / p99 over none | CPU ms per create | added CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for setup in chosen {
        for pod in PODS {
            let Some(r) = by.get(&(setup.name, pod)) else {
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
            let outcome = if refuses(setup, pod) {
                " (refused)"
            } else {
                ""
            };
            println!(
                "| {} | {} | {pod}{outcome} | {} | {} | {} | {:+.2} / {:+.2} | {:.2} | {:+.2} |",
                setup.name,
                setup.what,
                spread(0),
                spread(1),
                spread(2),
                added(0),
                added(2),
                col(3),
                added(3)
            );
        }
    }
    println!(
        "\nThroughput, {CLIENTS} clients x {creates} creates of the patched pod (creates/s):\n"
    );
    println!("| setup | creates/s |");
    println!("|---|---|");
    for setup in chosen {
        if let Some(per_second) = throughput.get(setup.name) {
            println!("| {} | {per_second:.0} |", setup.name);
        }
    }
    let mut memory = format!(
        "\nResident memory after the run: winadmit {:.1} MiB, no-op webhook {:.1} MiB",
        rss_mib(installed.winadmit.server.child.id()),
        rss_mib(installed.noop.child.id())
    );
    if let Some(k) = &installed.kyverno {
        memory.push_str(&format!(", Kyverno {:.1} MiB", rss_mib(k.child.id())));
    }
    if let Some(g) = &installed.gatekeeper {
        memory.push_str(&format!(", Gatekeeper {:.1} MiB", rss_mib(g.child.id())));
    }
    println!("{memory}.");
    println!(
        "\nConnections the API server holds open to winadmit after the run: {}.",
        connections_to(installed.winadmit.server.addr.port())
    );
}
