//! A cluster that schedules: kube-scheduler and kube-controller-manager
//! v1.37 (built with the control plane by `tests/apiserver/build.sh`) and
//! KWOK v0.8.0 (simulated kubelets, `tests/kwok/build.sh`) started beside
//! the API server of `controlplane.rs`. A Deployment's pods are created by
//! the ReplicaSet controller (through the admission chain, so through any
//! webhook registered), placed by the real scheduler on nodes the test
//! declares, and reported Running (Succeeded for a Job's) by KWOK. No
//! container runs: where a pod lands, and its phase, are the outcome.
//!
//! The API, for any test target (`#[path = "support/scheduling.rs"] mod
//! scheduling;` beside `controlplane.rs`):
//! - [`shared`]: the process's cluster, started on first use;
//! - [`Cluster::nodes`]: makes the declared [`Node`]s the cluster's only
//!   simulated nodes, Ready, and holds the cluster for the test (tests of
//!   one process take turns: nodes are cluster-wide);
//! - [`Node::linux`], [`Node::windows`] (Windows Server 2022),
//!   [`Node::windows_2025`], [`Node::windows_2019`], with
//!   [`Node::label`] and [`Node::taint`];
//! - [`Nodes::wait_pods`] / [`Nodes::pods`]: the pods of a namespace with
//!   their node, its OS and their phase.
//!
//! The supervisor of `tests/apiserver/run.sh` stops the scheduler, then
//! the controller manager, then KWOK, before the API server, when the test
//! process goes away.

#![allow(dead_code)] // each test target uses a part

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::controlplane::{self, ControlPlane};

/// The annotation KWOK's `--manage-nodes-with-annotation-selector` selects.
const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// The Windows Server 2022 build the Windows nodes run.
pub const WINDOWS_2022_BUILD: &str = "10.0.20348";
/// The Windows Server 2025 build ([`Node::windows_2025`]).
pub const WINDOWS_2025_BUILD: &str = "10.0.26100";
/// The Windows Server 2019 build ([`Node::windows_2019`]).
pub const WINDOWS_2019_BUILD: &str = "10.0.17763";

/// `target/controlplane/kwok`: KWOK and its stages.
fn kwok_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("controlplane/kwok")
}

/// KWOK and its stages, built by `tests/kwok/build.sh`.
///
/// # Panics
/// They are not built (the tests that get here were built with them in
/// place, or require the control plane).
fn kwok(test: &str) -> PathBuf {
    let dir = kwok_dir();
    assert!(
        dir.join("kwok").is_file() && dir.join("stages.yaml").is_file(),
        "{test}: KWOK is not built in {}: run tests/kwok/build.sh",
        dir.display()
    );
    dir
}

/// The scheduler, the controller manager and KWOK of the process's
/// control plane.
pub struct Cluster {
    pub cp: &'static ControlPlane,
    /// Tests take turns: the nodes are the whole cluster's.
    turn: Mutex<()>,
    /// The processes, kept for their logs' sake (the supervisor stops them).
    _children: Vec<Child>,
}

/// The scheduling cluster of the calling test file, started on first use
/// (a few seconds once the binaries are built) on that file's control
/// plane.
#[track_caller]
pub fn shared(test: &str) -> &'static Cluster {
    let file = std::panic::Location::caller().file();
    let cp = controlplane::shared_by(file, test);
    controlplane::once_per(file).get_or_init(|| Cluster::start(test, cp))
}

impl Cluster {
    fn start(test: &str, cp: &'static ControlPlane) -> Self {
        let kwok = kwok(test);
        let k = cp.kubeconfig.to_str().unwrap();
        let pki = cp.work.join("pki");
        let log = |name: &str| std::fs::File::create(cp.work.join(format!("{name}.log"))).unwrap();
        let spawn = |program: PathBuf, args: Vec<String>, name: &str| {
            let child = Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(log(name))
                .stderr(log(&format!("{name}.err")))
                .spawn()
                .unwrap_or_else(|e| panic!("{test}: cannot start {name}: {e}"));
            // The supervisor kills the adopted processes in this order
            // (scheduler, controller manager, KWOK), then the API server.
            cp.adopt(child.id());
            child
        };
        let scheduler = spawn(
            cp.bin.join("kube-scheduler"),
            vec![
                format!("--kubeconfig={k}"),
                format!("--authentication-kubeconfig={k}"),
                format!("--authorization-kubeconfig={k}"),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
            ],
            "kube-scheduler",
        );
        let controllers = spawn(
            cp.bin.join("kube-controller-manager"),
            vec![
                format!("--kubeconfig={k}"),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                // The API server runs without the ServiceAccount admission
                // plugin: pods need no token.
                "--controllers=*,-serviceaccount-token".into(),
                "--use-service-account-credentials=false".into(),
                // KWOK renews the nodes' leases; on a busy 2-core machine a
                // renewal can come later than the default 50 s, and the node
                // lifecycle controller would mark the nodes' pods not Ready,
                // which KWOK's stages never undo.
                "--node-monitor-grace-period=10m".into(),
                format!(
                    "--service-account-private-key-file={}",
                    pki.join("sa.key").display()
                ),
                format!("--root-ca-file={}", pki.join("ca.crt").display()),
            ],
            "kube-controller-manager",
        );
        let kwok = spawn(
            kwok.join("kwok"),
            vec![
                format!("--kubeconfig={k}"),
                "--manage-all-nodes=false".into(),
                format!("--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake"),
                "--cidr=10.244.0.0/16".into(),
                "--node-ip=10.0.0.10".into(),
                format!("--config={}", kwok.join("stages.yaml").display()),
            ],
            "kwok",
        );
        Self {
            cp,
            turn: Mutex::new(()),
            _children: vec![scheduler, controllers, kwok],
        }
    }

    /// Makes `nodes` the cluster's only simulated nodes (deleting the
    /// others, with the pods bound to them) and waits until they are
    /// Ready; the cluster is the caller's until the [`Nodes`] is dropped.
    pub fn nodes(&'static self, nodes: &[Node]) -> Nodes {
        let turn = self
            .turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let existing: Value =
            serde_json::from_str(&self.cp.kubectl_ok(&["get", "nodes", "-o", "json"])).unwrap();
        for n in existing["items"].as_array().into_iter().flatten() {
            let name = n["metadata"]["name"].as_str().unwrap_or_default();
            if !names.contains(&name) {
                self.remove_node(name);
            }
        }
        for node in nodes {
            self.register(node);
        }
        self.wait_ready(&names);
        Nodes {
            cluster: self,
            nodes: nodes.to_vec(),
            _turn: turn,
        }
    }

    /// Creates (or updates) the Node object of `node`, with its status
    /// (nodeInfo, capacity: a subresource).
    fn register(&self, node: &Node) {
        self.cp.apply(&node.object().to_string());
        self.cp
            .set_node_status(&node.name, &node.object()["status"]);
    }

    /// Deletes node `name` and the pods bound to it (pods bound to a node
    /// that is gone would count elsewhere; a drained, deleted node pool
    /// leaves none either).
    fn remove_node(&self, name: &str) {
        self.cp
            .kubectl_ok(&["delete", "node", name, "--wait=false"]);
        self.cp.kubectl(&[
            "delete",
            "pods",
            "-A",
            "--force",
            "--grace-period=0",
            "--field-selector",
            &format!("spec.nodeName={name}"),
        ]);
    }

    /// Waits (60 s at most) until the nodes `names` are Ready (KWOK's).
    fn wait_ready(&self, names: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = names.iter().all(|n| {
                let out = self.cp.kubectl(&[
                    "get",
                    "node",
                    n,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ]);
                String::from_utf8_lossy(&out.stdout).trim() == "True"
            });
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nodes {names:?} not Ready in 60 s; KWOK's log:\n{}",
                self.log_tail("kwok.err")
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last lines of a component's log (`kube-scheduler.err`,
    /// `kube-controller-manager.err`, `kwok.err`), for failure messages.
    pub fn log_tail(&self, name: &str) -> String {
        let log = std::fs::read_to_string(self.cp.work.join(format!("{name}.log")))
            .or_else(|_| std::fs::read_to_string(self.cp.work.join(name)))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// The OS of a declared node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Windows,
}

/// A node a test declares: what a kubelet would register.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub os: Os,
    labels: serde_json::Map<String, Value>,
    taints: Vec<Value>,
    node_info: Value,
    /// Pods it holds, with a core and 1 GiB of memory each ([`Node::room`]).
    room: Option<u32>,
}

impl Node {
    /// A Linux node (Debian 13, containerd 2.2, kubelet v1.37.2).
    pub fn linux(name: &str) -> Self {
        Self::new(
            name,
            Os::Linux,
            json!({"osImage": "Debian GNU/Linux 13 (trixie)", "kernelVersion": "6.12.48+deb13-amd64"}),
        )
    }

    /// A Windows Server 2022 node (build 10.0.20348, containerd 2.2,
    /// kubelet v1.37.2), labelled with its build, untainted.
    pub fn windows(name: &str) -> Self {
        Self::new(
            name,
            Os::Windows,
            json!({"osImage": "Windows Server 2022 Datacenter", "kernelVersion": format!("{WINDOWS_2022_BUILD}.2762")}),
        )
        .label("node.kubernetes.io/windows-build", WINDOWS_2022_BUILD)
    }

    /// A Windows Server 2025 node (build 10.0.26100, containerd 2.2,
    /// kubelet v1.37.2), labelled with its build, untainted.
    pub fn windows_2025(name: &str) -> Self {
        Self::new(
            name,
            Os::Windows,
            json!({"osImage": "Windows Server 2025 Datacenter", "kernelVersion": format!("{WINDOWS_2025_BUILD}.4061")}),
        )
        .label("node.kubernetes.io/windows-build", WINDOWS_2025_BUILD)
    }

    /// A Windows Server 2019 node (build 10.0.17763, containerd 2.2,
    /// kubelet v1.37.2), labelled with its build, untainted.
    pub fn windows_2019(name: &str) -> Self {
        Self::new(
            name,
            Os::Windows,
            json!({"osImage": "Windows Server 2019 Datacenter", "kernelVersion": format!("{WINDOWS_2019_BUILD}.7009")}),
        )
        .label("node.kubernetes.io/windows-build", WINDOWS_2019_BUILD)
    }

    fn new(name: &str, os: Os, info: Value) -> Self {
        let os_name = match os {
            Os::Linux => "linux",
            Os::Windows => "windows",
        };
        let mut node_info = json!({
            "architecture": "amd64", "operatingSystem": os_name,
            "kubeletVersion": "v1.37.2", "containerRuntimeVersion": "containerd://2.2.1",
            "bootID": "", "machineID": "", "systemUUID": "", "kubeProxyVersion": ""
        });
        for (k, v) in info.as_object().unwrap() {
            node_info[k] = v.clone();
        }
        Self {
            name: name.to_owned(),
            os,
            labels: serde_json::Map::new(),
            taints: Vec::new(),
            node_info,
            room: None,
        }
        .label("kubernetes.io/os", os_name)
        .label("kubernetes.io/arch", "amd64")
        .label("kubernetes.io/hostname", name)
    }

    /// Adds (or replaces) a label.
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.into());
        self
    }

    /// Adds a taint (`effect`: NoSchedule, PreferNoSchedule, NoExecute).
    #[must_use]
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints
            .push(json!({"key": key, "value": value, "effect": effect}));
        self
    }

    /// Room for `pods` pods of one core and 1 GiB each (the default: 32
    /// cores, 256 GiB and 110 pods, a kubelet's default).
    #[must_use]
    pub fn room(mut self, pods: u32) -> Self {
        self.room = Some(pods);
        self
    }

    /// The Node object.
    pub fn object(&self) -> Value {
        let resources = self.room.map_or_else(
            || json!({"cpu": "32", "memory": "256Gi", "pods": "110"}),
            |n| json!({"cpu": n.to_string(), "memory": format!("{n}Gi"), "pods": n.to_string()}),
        );
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {KWOK_ANNOTATION: "fake"},
                "labels": self.labels,
            },
            "spec": {"taints": self.taints},
            "status": {
                "allocatable": resources, "capacity": resources,
                "nodeInfo": self.node_info,
            },
        })
    }
}

/// A pod as the scheduler and KWOK left it.
#[derive(Debug, Clone)]
pub struct Placed {
    pub name: String,
    /// `spec.nodeName`, once bound.
    pub node: Option<String>,
    /// The OS of that node, when it is a declared one.
    pub os: Option<Os>,
    /// `status.phase`.
    pub phase: String,
    /// The pod as stored (for its node selector, tolerations...).
    pub object: Value,
}

impl Placed {
    pub fn running(&self) -> bool {
        self.phase == "Running"
    }
}

/// The cluster with the declared nodes, held by one test.
pub struct Nodes {
    pub cluster: &'static Cluster,
    pub nodes: Vec<Node>,
    _turn: MutexGuard<'static, ()>,
}

impl Nodes {
    pub fn cp(&self) -> &'static ControlPlane {
        self.cluster.cp
    }

    /// Adds `new` to the cluster while its workloads run, and waits until
    /// they are Ready.
    pub fn join(&mut self, new: &[Node]) {
        for node in new {
            self.cluster.register(node);
        }
        let names: Vec<&str> = new.iter().map(|n| n.name.as_str()).collect();
        self.cluster.wait_ready(&names);
        self.nodes.extend(new.iter().cloned());
    }

    /// Deletes the nodes `names` and the pods bound to them.
    pub fn remove(&mut self, names: &[String]) {
        for name in names {
            self.cluster.remove_node(name);
        }
        self.nodes.retain(|n| !names.contains(&n.name));
    }

    /// The names of the declared nodes of `os`.
    pub fn of(&self, os: Os) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.os == os)
            .map(|n| n.name.clone())
            .collect()
    }

    /// The pods of `ns` (with `selector`, a label selector, when not empty).
    pub fn pods(&self, ns: &str, selector: &str) -> Vec<Placed> {
        let mut args = vec!["get", "pods", "-n", ns, "-o", "json"];
        if !selector.is_empty() {
            args.extend(["-l", selector]);
        }
        let list: Value = serde_json::from_str(&self.cp().kubectl_ok(&args)).unwrap();
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let node = p["spec"]["nodeName"].as_str().map(str::to_owned);
                let os = node
                    .as_deref()
                    .and_then(|n| self.nodes.iter().find(|d| d.name == n))
                    .map(|d| d.os);
                Placed {
                    name: p["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    node,
                    os,
                    phase: p["status"]["phase"].as_str().unwrap_or_default().to_owned(),
                    object: p.clone(),
                }
            })
            .collect()
    }

    /// Waits (60 s at most) until `ns` has `count` pods (matching
    /// `selector`), each bound and in one of `phases` (e.g. `["Running"]`,
    /// `["Succeeded"]`); panics with what it saw and the components' logs.
    pub fn wait_pods(
        &self,
        ns: &str,
        selector: &str,
        count: usize,
        phases: &[&str],
    ) -> Vec<Placed> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pods = self.pods(ns, selector);
            let settled = pods
                .iter()
                .filter(|p| p.node.is_some() && phases.contains(&p.phase.as_str()))
                .count();
            if pods.len() == count && settled == count {
                return pods;
            }
            if Instant::now() >= deadline {
                let seen: Vec<_> = pods.iter().map(|p| (&p.name, &p.node, &p.phase)).collect();
                panic!(
                    "{ns}: expected {count} pods ({selector}) bound and {phases:?}, saw {seen:?}\nevents:\n{}\nscheduler:\n{}\ncontroller manager:\n{}",
                    String::from_utf8_lossy(
                        &self.cp().kubectl(&["get", "events", "-n", ns]).stdout
                    ),
                    self.cluster.log_tail("kube-scheduler.err"),
                    self.cluster.log_tail("kube-controller-manager.err"),
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// winadmit in front of the cluster as a user installs it: the RBAC and
/// policy of `winadmit manifests --overlay <overlay>`, `winadmit serve`
/// reading the cluster through its cache with the install's
/// ServiceAccount, and the overlay's webhook configurations, named after
/// `setup` and scoped to namespaces labelled `winadmit-e2e: <setup>` (make
/// them with [`ControlPlane::namespace`]). Needs `mod e2e` and `mod server`
/// beside this module.
pub fn install_winadmit(
    cp: &'static ControlPlane,
    overlay: &str,
    setup: &str,
) -> super::e2e::Webhook {
    install_winadmit_with(cp, overlay, setup, &[])
}

/// [`install_winadmit`] with `extra` arguments to `winadmit serve`.
pub fn install_winadmit_with(
    cp: &'static ControlPlane,
    overlay: &str,
    setup: &str,
    extra: &[&str],
) -> super::e2e::Webhook {
    use super::e2e;
    let objects = e2e::rendered(overlay);
    let webhook = start_winadmit(cp, &objects, setup, extra);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, setup, &webhook,
    )));
    let probe = format!("{setup}-probe");
    cp.namespace(&probe, &[("winadmit-e2e", setup)]);
    // A Windows pod calls winadmit twice, or once through the one-call install.
    let calls = if overlay == "one-call" { 1 } else { 2 };
    e2e::wait_registered(cp, &webhook, &probe, calls);
    webhook
}

/// The part of [`install_winadmit_with`] before the registrations: the
/// RBAC of the rendered install `objects` applied, and `winadmit serve`
/// started with the install's policy, reading the cluster through its
/// cache as the install's ServiceAccount, with `extra` arguments. Each
/// call starts one more replica.
pub fn start_winadmit(
    cp: &'static ControlPlane,
    objects: &[Value],
    setup: &str,
    extra: &[&str],
) -> super::e2e::Webhook {
    use super::e2e;
    let rbac: Vec<Value> = objects
        .iter()
        .filter(|o| {
            matches!(
                e2e::kind(o),
                "Namespace"
                    | "ServiceAccount"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "Role"
                    | "RoleBinding"
            )
        })
        .cloned()
        .collect();
    cp.apply(&e2e::to_list(&rbac));
    // The install's ClusterRole names winadmit's own configuration; every
    // setup shares it, so each gets a role of its own for its
    // configuration (`winadmit-<setup>`).
    let own = format!("winadmit-{setup}");
    cp.apply(
        &e2e::to_list(&[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": own},
                "rules": [{"apiGroups": ["admissionregistration.k8s.io"],
                    "resources": ["mutatingwebhookconfigurations"],
                    "resourceNames": [own], "verbs": ["get", "update"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": own},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": own},
                "subjects": [{"kind": "ServiceAccount", "name": "winadmit", "namespace": "winadmit"}]}),
        ]),
    );
    let dir = tempfile::tempdir().unwrap().keep();
    let kubeconfig = cp.service_account_kubeconfig(&dir, "winadmit", "winadmit");
    let mut args = vec![
        "--cluster-cache",
        "on",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    args.extend(extra);
    e2e::Webhook::start(&e2e::overlay_policy(objects), &args).adopted_by(cp)
}
