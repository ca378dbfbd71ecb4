//! Where pods land: winadmit, installed from its rendered manifests with
//! its default policy and reading the nodes through its cluster cache, in
//! front of a cluster that schedules (`support/scheduling.rs`: the real
//! kube-scheduler and kube-controller-manager, and KWOK's simulated
//! kubelets) with two Linux and two Windows Server 2022 nodes, untainted as
//! managed node pools are by default. The pods are the controllers' (the
//! ReplicaSet, StatefulSet, DaemonSet, Job and CronJob controllers create
//! them through the admission chain); each test asserts the node each pod
//! is bound to and its phase.
//!
//! Without the control plane and KWOK built (`tests/apiserver/build.sh`,
//! `tests/kwok/build.sh`) the tests are ignored, with those commands
//! (`build.rs`), unless `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run`
//! builds them and sets it).

use crate::controlplane;
use crate::e2e;
use crate::scheduling_kit as scheduling;
use crate::ways;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{Value, json};

use scheduling::{Node, Nodes, Os, Placed};

const IIS: &str = "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022";

/// The setup's namespaces carry `winadmit-e2e: sched`.
const SETUP: &str = "sched";

/// The scheduling cluster with winadmit (base install) registered for the
/// `sched` namespaces; its webhook, kept for the process.
fn cluster(test: &str) -> &'static scheduling::Cluster {
    let cluster = scheduling::shared(test);
    WEBHOOK.get_or_init(|| scheduling::install_winadmit(cluster.cp, "base", SETUP));
    cluster
}

static WEBHOOK: OnceLock<e2e::Webhook> = OnceLock::new();

/// Two Linux nodes and two Windows Server 2022 nodes, untainted.
fn mixed(test: &str) -> Nodes {
    cluster(test).nodes(&[
        Node::linux("linux-1"),
        Node::linux("linux-2"),
        Node::windows("win22-1"),
        Node::windows("win22-2"),
    ])
}

/// A fresh namespace of the setup, named after the test.
fn namespace(nodes: &Nodes, name: &str) -> String {
    let ns = name.replace('_', "-");
    nodes
        .cp()
        .kubectl(&["delete", "namespace", &ns, "--wait=true"]);
    nodes.cp().namespace(&ns, &[("winadmit-e2e", SETUP)]);
    ns
}

/// A workload of `kind` named `name`, whose pods are labelled `app: name`
/// and have `spec`.
fn workload(kind: &str, ns: &str, name: &str, replicas: u32, spec: Value) -> Value {
    let template = json!({"metadata": {"labels": {"app": name}}, "spec": spec});
    let selector = json!({"matchLabels": {"app": name}});
    let (api, body) = match kind {
        "Deployment" => (
            "apps/v1",
            json!({"replicas": replicas, "selector": selector, "template": template}),
        ),
        "StatefulSet" => (
            "apps/v1",
            json!({"replicas": replicas, "serviceName": name, "selector": selector, "template": template}),
        ),
        "DaemonSet" => (
            "apps/v1",
            json!({"selector": selector, "template": template}),
        ),
        "Job" => (
            "batch/v1",
            json!({"completions": replicas, "parallelism": replicas, "template": with_restart(template)}),
        ),
        "CronJob" => (
            "batch/v1",
            json!({
                "schedule": "* * * * *",
                "jobTemplate": {"spec": {"completions": replicas, "parallelism": replicas, "template": with_restart(template)}}
            }),
        ),
        _ => panic!("{kind}"),
    };
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": body})
}

fn with_restart(mut template: Value) -> Value {
    template["spec"]["restartPolicy"] = json!("Never");
    template
}

fn containers(image: &str) -> Value {
    json!([{"name": "main", "image": image}])
}

/// Creates `object` with kubectl; must succeed. The warnings kubectl printed.
fn create(nodes: &Nodes, object: &Value) -> String {
    let out = e2e::create(nodes.cp(), object, false);
    assert!(
        out.status.success(),
        "create {}: {}",
        object["metadata"]["name"],
        e2e::stderr(&out)
    );
    e2e::stderr(&out)
}

/// The set of OSes the pods landed on.
fn oses(pods: &[Placed]) -> BTreeSet<String> {
    pods.iter().map(|p| format!("{:?}", p.os)).collect()
}

fn all_on(pods: &[Placed], os: Os) -> bool {
    pods.iter().all(|p| p.os == Some(os))
}

/// Every controller's Windows pods (selected by `kubernetes.io/os:
/// windows`) are created through winadmit, placed on the Windows nodes and
/// run (a Job's and a CronJob's complete).
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn windows_pods_of_every_controller_land_on_windows_and_run() {
    let nodes = mixed("windows_pods_of_every_controller_land_on_windows_and_run");
    let ns = namespace(&nodes, "every-controller");
    let spec =
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers(IIS)});
    // The CronJob first: its controller starts a Job at the next minute.
    for (kind, n) in [
        ("CronJob", 1),
        ("Deployment", 3),
        ("StatefulSet", 2),
        ("DaemonSet", 0),
        ("Job", 2),
    ] {
        let name = kind.to_lowercase();
        create(&nodes, &workload(kind, &ns, &name, n, spec.clone()));
    }
    for (name, count, phase) in [
        ("deployment", 3, "Running"),
        ("statefulset", 2, "Running"),
        ("daemonset", 2, "Running"),
        ("job", 2, "Succeeded"),
        ("cronjob", 1, "Succeeded"),
    ] {
        let pods = nodes.wait_pods(&ns, &format!("app={name}"), count, &[phase]);
        assert!(
            all_on(&pods, Os::Windows),
            "{name}: pods on {:?}",
            oses(&pods)
        );
    }
    let daemons: BTreeSet<_> = nodes
        .pods(&ns, "app=daemonset")
        .into_iter()
        .filter_map(|p| p.node)
        .collect();
    assert_eq!(daemons, nodes.of(Os::Windows).into_iter().collect());
}

/// Waits (20 s at most) until winadmit's cluster cache has seen the
/// Windows nodes: a dry-run nginx pod in `ns` comes back pinned to Linux.
fn until_winadmit_sees_windows_nodes(nodes: &Nodes, ns: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let probe = e2e::pod(
        ns,
        "cache-probe",
        json!({"containers": containers("nginx:1.27")}),
    );
    loop {
        let out = e2e::create(nodes.cp(), &probe, true);
        let pod: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if pod["spec"]["nodeSelector"]["kubernetes.io/os"] == "linux" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "winadmit never pinned a Linux pod to Linux: {}\nwinadmit's reviews: {:#?}",
            e2e::stderr(&out),
            WEBHOOK.get().map(|w| w.reviews_of("cache-probe"))
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The stored object's pod template node selector.
fn template_selector(nodes: &Nodes, resource: &str, ns: &str, name: &str) -> Value {
    nodes.cp().get(resource, ns, name)["spec"]["template"]["spec"]["nodeSelector"].clone()
}

/// A Windows IIS Deployment with no OS selector: its image can only be
/// Windows, so the default policy pins it, and every pod runs on a Windows
/// node (without winadmit half of them land on the Linux nodes).
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn an_iis_deployment_lands_entirely_on_windows() {
    let nodes = mixed("an_iis_deployment_lands_entirely_on_windows");
    let ns = namespace(&nodes, "iis");
    let warnings = create(
        &nodes,
        &workload(
            "Deployment",
            &ns,
            "iis",
            4,
            json!({"containers": containers(IIS)}),
        ),
    );
    assert!(warnings.contains("WIN-UNPINNED-IMAGE"), "{warnings}");
    assert_eq!(
        template_selector(&nodes, "deployment", &ns, "iis"),
        json!({"kubernetes.io/os": "windows"})
    );
    let pods = nodes.wait_pods(&ns, "app=iis", 4, &["Running"]);
    assert!(all_on(&pods, Os::Windows), "pods on {:?}", oses(&pods));
}

/// A name that only looks Windows (`*servercore*` on some repository):
/// warned about, and left as written.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_name_that_only_looks_windows_is_warned_about_and_not_pinned() {
    let nodes = mixed("a_name_that_only_looks_windows_is_warned_about_and_not_pinned");
    let ns = namespace(&nodes, "looks-windows");
    let image = "contoso/servercore-tools:1.0";
    let warnings = create(
        &nodes,
        &workload(
            "Deployment",
            &ns,
            "tools",
            2,
            json!({"containers": containers(image)}),
        ),
    );
    assert!(warnings.contains("WIN-UNPINNED-IMAGE"), "{warnings}");
    assert_eq!(
        template_selector(&nodes, "deployment", &ns, "tools"),
        Value::Null
    );
    let pods = nodes.wait_pods(&ns, "app=tools", 2, &["Running"]);
    for p in &pods {
        assert_eq!(p.object["spec"]["nodeSelector"], Value::Null, "{}", p.name);
    }
}

/// nginx with no OS selector in a cluster with Windows nodes: pinned to
/// Linux, every pod on a Linux node.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn nginx_lands_entirely_on_linux() {
    let nodes = mixed("nginx_lands_entirely_on_linux");
    let ns = namespace(&nodes, "nginx");
    until_winadmit_sees_windows_nodes(&nodes, &ns);
    create(
        &nodes,
        &workload(
            "Deployment",
            &ns,
            "nginx",
            4,
            json!({"containers": containers("nginx:1.27")}),
        ),
    );
    assert_eq!(
        template_selector(&nodes, "deployment", &ns, "nginx"),
        json!({"kubernetes.io/os": "linux"})
    );
    let pods = nodes.wait_pods(&ns, "app=nginx", 4, &["Running"]);
    assert!(all_on(&pods, Os::Linux), "pods on {:?}", oses(&pods));
}

/// A node-exporter DaemonSet that tolerates every taint, with the Windows
/// nodes tainted as the Kubernetes docs advise: one pod on every Linux
/// node, none on a Windows node.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_daemonset_that_tolerates_everything_runs_on_every_linux_node_only() {
    let nodes = cluster("a_daemonset_that_tolerates_everything_runs_on_every_linux_node_only")
        .nodes(&[
            Node::linux("linux-1"),
            Node::linux("linux-2"),
            Node::linux("linux-3"),
            Node::windows("win22-1").taint("os", "windows", "NoSchedule"),
            Node::windows("win22-2"),
        ]);
    let ns = namespace(&nodes, "node-exporter");
    until_winadmit_sees_windows_nodes(&nodes, &ns);
    let spec = json!({
        "tolerations": [{"operator": "Exists"}],
        "hostNetwork": true, "hostPID": true,
        "containers": containers("quay.io/prometheus/node-exporter:v1.9.1"),
    });
    create(
        &nodes,
        &workload("DaemonSet", &ns, "node-exporter", 0, spec),
    );
    let pods = nodes.wait_pods(&ns, "app=node-exporter", 3, &["Running"]);
    let on: BTreeSet<_> = pods.iter().filter_map(|p| p.node.clone()).collect();
    assert_eq!(on, nodes.of(Os::Linux).into_iter().collect());
}

/// A Windows Deployment with `privileged` and `runAsUser`: the template is
/// patched at create, and the ReplicaSet controller's pods run clean on
/// the Windows nodes.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_patched_windows_deployment_runs_clean() {
    let nodes = mixed("a_patched_windows_deployment_runs_clean");
    let ns = namespace(&nodes, "patched");
    let spec = json!({
        "nodeSelector": {"kubernetes.io/os": "windows"},
        "containers": [{"name": "main", "image": IIS, "securityContext": {"privileged": true, "runAsUser": 1000}}],
    });
    let warnings = create(&nodes, &workload("Deployment", &ns, "patched", 2, spec));
    assert!(warnings.contains("WIN-PRIVILEGED"), "{warnings}");
    let pods = nodes.wait_pods(&ns, "app=patched", 2, &["Running"]);
    assert!(all_on(&pods, Os::Windows), "pods on {:?}", oses(&pods));
    for p in &pods {
        let sc = &p.object["spec"]["containers"][0]["securityContext"];
        assert!(
            sc.get("privileged").is_none() && sc.get("runAsUser").is_none(),
            "{}: {sc}",
            p.name
        );
    }
}

/// A Windows Deployment with `hostNetwork` is refused: no Deployment, no
/// pod.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_refused_windows_deployment_makes_no_pod() {
    let nodes = mixed("a_refused_windows_deployment_makes_no_pod");
    let ns = namespace(&nodes, "refused");
    let spec = json!({
        "nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true,
        "containers": containers(IIS),
    });
    let out = e2e::create(
        nodes.cp(),
        &workload("Deployment", &ns, "refused", 2, spec),
        false,
    );
    assert!(!out.status.success());
    let err = e2e::stderr(&out);
    assert!(
        err.contains(r#"admission webhook "validate.winadmit.io" denied"#)
            && err.contains("WIN-HOSTNETWORK"),
        "{err}"
    );
    // A Deployment made alongside runs: the controllers are working.
    create(
        &nodes,
        &workload(
            "Deployment",
            &ns,
            "alongside",
            1,
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers(IIS)}),
        ),
    );
    nodes.wait_pods(&ns, "app=alongside", 1, &["Running"]);
    assert!(nodes.pods(&ns, "app=refused").is_empty());
}

/// A Windows Server 2025 node pool (build 10.0.26100, containerd 2.2):
/// a Deployment of a Windows Server 2022 image is admitted and runs on it
/// (the container ABI is stable from 10.0.20348: a host runs the previous
/// LTSC's images), while one of a Windows Server 2019 image (10.0.17763,
/// before the stable ABI: exact build only) is refused and makes no pod.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_windows_server_2025_pool_runs_2022_images_and_refuses_2019_ones() {
    let nodes =
        cluster("a_windows_server_2025_pool_runs_2022_images_and_refuses_2019_ones").nodes(&[
            Node::linux("linux-1"),
            Node::windows_2025("win25-1"),
            Node::windows_2025("win25-2"),
        ]);
    let ns = namespace(&nodes, "ws2025");
    let windows = |image: &str| json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers(image)});
    let ltsc2019 = "mcr.microsoft.com/windows/servercore:ltsc2019";
    // winadmit's cluster cache knows the 2025 nodes, and only them, when
    // an ltsc2019 pod is refused naming 10.0.26100 alone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let probe = e2e::pod(&ns, "build-probe", windows(ltsc2019));
    loop {
        let err = e2e::stderr(&e2e::create(nodes.cp(), &probe, true));
        if err.contains("WIN-BUILD-NO-NODE")
            && err.contains(scheduling::WINDOWS_2025_BUILD)
            && !err.contains(scheduling::WINDOWS_2022_BUILD)
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "winadmit never judged an ltsc2019 pod against the 2025 nodes alone: {err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }

    let warnings = create(&nodes, &workload("Deployment", &ns, "iis", 3, windows(IIS)));
    assert!(!warnings.contains("WIN-BUILD"), "{warnings}");
    let pods = nodes.wait_pods(&ns, "app=iis", 3, &["Running"]);
    assert!(all_on(&pods, Os::Windows), "pods on {:?}", oses(&pods));

    let out = e2e::create(
        nodes.cp(),
        &workload("Deployment", &ns, "old", 2, windows(ltsc2019)),
        false,
    );
    let err = e2e::stderr(&out);
    assert!(
        !out.status.success() && err.contains("WIN-BUILD-NO-NODE"),
        "{err}"
    );
    assert!(nodes.pods(&ns, "app=old").is_empty());
}

/// With winadmit unreachable (its registrations pointing at a closed
/// port), Linux workloads are still created, scheduled and run: pinned
/// ones never call it, unpinned ones reach only pin-linux, which ignores
/// the failure.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn linux_workloads_are_unaffected_with_winadmit_down() {
    let nodes = mixed("linux_workloads_are_unaffected_with_winadmit_down");
    let cp = nodes.cp();
    let objects = e2e::rendered("base");
    let closed = format!("https://127.0.0.1:{}", controlplane::free_port());
    cp.apply(&e2e::to_list(&e2e::registrations_at(
        &objects,
        "down",
        &closed,
        cp.ca_pem.as_bytes(),
    )));
    let ns = "winadmit-down";
    cp.kubectl(&["delete", "namespace", ns, "--wait=true"]);
    cp.namespace(ns, &[("winadmit-e2e", "down")]);
    // The registrations are in force once a Windows pod is refused.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while e2e::create(
        cp,
        &e2e::pod(
            ns,
            "probe",
            json!({"nodeSelector": {"kubernetes.io/os": "windows"}}),
        ),
        true,
    )
    .status
    .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the down registrations never took effect"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    create(
        &nodes,
        &workload(
            "Deployment",
            ns,
            "pinned",
            2,
            json!({"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": containers("nginx:1.27")}),
        ),
    );
    create(
        &nodes,
        &workload(
            "Deployment",
            ns,
            "unpinned",
            2,
            json!({"containers": containers("nginx:1.27")}),
        ),
    );
    let pinned = nodes.wait_pods(ns, "app=pinned", 2, &["Running"]);
    assert!(all_on(&pinned, Os::Linux), "pods on {:?}", oses(&pinned));
    nodes.wait_pods(ns, "app=unpinned", 2, &["Running"]);
    cp.kubectl(&[
        "delete",
        "mutatingwebhookconfiguration,validatingwebhookconfiguration",
        "winadmit-down",
    ]);
}

/// A pool node of `tests/support/ways.rs`: its pool's labels, and the
/// Windows ones tainted.
fn pool_node(node: Node, pool: &str) -> Node {
    let mut node = ways::pool_labels(pool)
        .into_iter()
        .fold(node, |n, (k, v)| n.label(k, v));
    if pool == "win22" {
        node = node.taint("os", "windows", "NoSchedule");
    }
    node
}

/// Waits (20 s at most) until winadmit's cluster cache knows every node: a
/// dry-run pod bound by name to a Windows node comes back with the Windows
/// node selector.
fn until_winadmit_knows_every_node(nodes: &Nodes, ns: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let probe = e2e::pod(
        ns,
        "nodes-probe",
        json!({"nodeName": "win22-1", "containers": containers("registry.example/app:1")}),
    );
    loop {
        let out = e2e::create(nodes.cp(), &probe, true);
        let pod: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if pod["spec"]["nodeSelector"]["kubernetes.io/os"] == "windows" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "winadmit never took a pod bound to a Windows node for a Windows pod: {}",
            e2e::stderr(&out)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Every way a pod reaches a Windows node (`tests/support/ways.rs`), with
/// an image whose name says nothing of its OS. The seven that admit only
/// Windows nodes: with `hostNetwork` refused (WIN-HOSTNETWORK) and no pod;
/// without it, admitted with the Windows node selector and the taint's
/// toleration, every pod running on a Windows node. The ones that admit
/// both kinds (preferred affinity only, a toleration of the Windows taint
/// or of every taint, no selector, a label every node has), with nginx:
/// pinned to Linux, every pod on a Linux node; a DaemonSet with no
/// selector has one pod on each Linux node and none on a Windows node.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn every_way_onto_a_windows_node_is_judged() {
    let nodes = cluster("every_way_onto_a_windows_node_is_judged").nodes(&[
        pool_node(Node::linux("linux-1"), "sys"),
        pool_node(Node::linux("linux-2"), "sys"),
        pool_node(Node::windows("win22-1"), "win22"),
        pool_node(Node::windows("win22-2"), "win22"),
    ]);
    let ns = namespace(&nodes, "every-way");
    until_winadmit_knows_every_node(&nodes, &ns);
    let app = |fragment: &Value, image: &str, host_network: bool| {
        let mut spec = fragment.clone();
        spec["containers"] = containers(image);
        if host_network {
            spec["hostNetwork"] = json!(true);
        }
        spec
    };
    let only = ways::windows_only_ways();
    for (i, (way, fragment)) in only.iter().enumerate() {
        let refused = workload(
            "Deployment",
            &ns,
            &format!("refused-{i}"),
            1,
            app(fragment, "registry.example/app:1", true),
        );
        let out = e2e::create(nodes.cp(), &refused, false);
        let err = e2e::stderr(&out);
        assert!(
            !out.status.success() && err.contains("WIN-HOSTNETWORK"),
            "{way}: {err}"
        );
        let admitted = workload(
            "Deployment",
            &ns,
            &format!("windows-{i}"),
            2,
            app(fragment, "registry.example/app:1", false),
        );
        create(&nodes, &admitted);
    }
    let both = ways::both_sides_ways();
    for (i, (_, fragment)) in both.iter().enumerate() {
        create(
            &nodes,
            &workload(
                "Deployment",
                &ns,
                &format!("both-{i}"),
                2,
                app(fragment, "nginx:1.27", true),
            ),
        );
    }
    create(
        &nodes,
        &workload(
            "DaemonSet",
            &ns,
            "daemon",
            0,
            app(&json!({}), "nginx:1.27", false),
        ),
    );
    for (i, (way, _)) in only.iter().enumerate() {
        let pods = nodes.wait_pods(&ns, &format!("app=windows-{i}"), 2, &["Running"]);
        assert!(
            all_on(&pods, Os::Windows),
            "{way}: pods on {:?}",
            oses(&pods)
        );
        assert!(
            nodes.pods(&ns, &format!("app=refused-{i}")).is_empty(),
            "{way}"
        );
    }
    for (i, (way, _)) in both.iter().enumerate() {
        let pods = nodes.wait_pods(&ns, &format!("app=both-{i}"), 2, &["Running"]);
        assert!(all_on(&pods, Os::Linux), "{way}: pods on {:?}", oses(&pods));
    }
    let daemons = nodes.wait_pods(&ns, "app=daemon", 2, &["Running"]);
    let on: BTreeSet<_> = daemons.iter().filter_map(|p| p.node.clone()).collect();
    assert_eq!(on, nodes.of(Os::Linux).into_iter().collect());
}

/// The learnt Windows taint is the Windows nodes' taint, nothing else: one
/// Windows node of three also carries `dedicated=teama:NoSchedule`,
/// another `example.com/quarantine=true:NoExecute`. Pods that name each
/// node by its hostname get the toleration for `os=windows:NoSchedule`
/// (every Windows node carries it, no Linux node does) and no toleration
/// for the other two: the pod naming the plain node runs there, the ones
/// naming the dedicated and the quarantined node are never scheduled.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_pod_that_names_a_dedicated_or_quarantined_node_gains_no_toleration() {
    let os = |n: Node| n.taint("os", "windows", "NoSchedule");
    let nodes = cluster("a_pod_that_names_a_dedicated_or_quarantined_node_gains_no_toleration")
        .nodes(&[
            Node::linux("linux-1"),
            os(Node::windows("win22-1")),
            os(Node::windows("win22-2")).taint("dedicated", "teama", "NoSchedule"),
            os(Node::windows("win22-3")).taint("example.com/quarantine", "true", "NoExecute"),
        ]);
    let ns = namespace(&nodes, "fenced-nodes");
    until_winadmit_knows_every_node(&nodes, &ns);
    for node in ["win22-1", "win22-2", "win22-3"] {
        let spec = json!({"nodeSelector": {"kubernetes.io/hostname": node},
                          "containers": containers("registry.example/app:1")});
        create(&nodes, &workload("Deployment", &ns, node, 1, spec));
    }
    let running = nodes.wait_pods(&ns, "app=win22-1", 1, &["Running"]);
    assert_eq!(running[0].node.as_deref(), Some("win22-1"));
    for node in ["win22-1", "win22-2", "win22-3"] {
        let pods = nodes.pods(&ns, &format!("app={node}"));
        assert_eq!(pods.len(), 1, "{node}");
        let keys: Vec<&str> = pods[0].object["spec"]["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["key"].as_str())
            .collect();
        assert!(keys.contains(&"os"), "{node}: {keys:?}");
        assert!(
            !keys.contains(&"dedicated") && !keys.contains(&"example.com/quarantine"),
            "{node}: {keys:?}"
        );
        if node != "win22-1" {
            assert_eq!(pods[0].node, None, "{node}: scheduled onto a fenced node");
        }
    }
}

/// A DaemonSet created where winadmit does not act (a namespace outside its
/// registrations, as before an install): nginx with no OS selector has a
/// pod on every node. The live report names the pods running on the
/// Windows nodes (their image has no Windows variant: WIN-LINUX-IMAGE),
/// each with the node it runs on, and says the DaemonSet should select
/// Linux (WIN-LINUX-UNPINNED); the pods on Linux nodes are folded into it.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn the_live_report_names_pods_running_on_a_node_of_the_wrong_os() {
    let nodes = mixed("the_live_report_names_pods_running_on_a_node_of_the_wrong_os");
    let ns = "before-winadmit";
    nodes
        .cp()
        .kubectl(&["delete", "namespace", ns, "--wait=true"]);
    nodes.cp().namespace(ns, &[]);
    let spec = json!({"containers": containers("nginx:1.27")});
    create(&nodes, &workload("DaemonSet", ns, "agent", 0, spec));
    let pods = nodes.wait_pods(ns, "app=agent", 4, &["Running"]);
    assert_eq!(oses(&pods).len(), 2, "pods on {:?}", oses(&pods));
    let out = std::process::Command::new(crate::binary::BIN)
        .args(["report", "--kubeconfig"])
        .arg(&nodes.cp().kubeconfig)
        .args(["-n", ns, "--format", "json", "--quiet"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", e2e::stderr(&out)));
    let objects = report["objects"].as_array().unwrap();
    let rules_of = |o: &Value| -> Vec<String> {
        o["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap().to_owned())
            .collect()
    };
    for win in nodes.of(Os::Windows) {
        let pod = pods
            .iter()
            .find(|p| p.node.as_deref() == Some(&win))
            .unwrap();
        let o = objects
            .iter()
            .find(|o| o["name"] == pod.name.as_str())
            .unwrap_or_else(|| panic!("pod {} on {win} not in the report: {report:#}", pod.name));
        assert!(rules_of(o).contains(&"WIN-LINUX-IMAGE".to_owned()), "{o:#}");
        assert!(o["targetReason"].to_string().contains(&win), "{o:#}");
    }
    for linux in nodes.of(Os::Linux) {
        let pod = pods
            .iter()
            .find(|p| p.node.as_deref() == Some(&linux))
            .unwrap();
        assert!(
            !objects.iter().any(|o| o["name"] == pod.name.as_str()),
            "{linux}: {report:#}"
        );
    }
    let ds = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    assert!(
        rules_of(ds).contains(&"WIN-LINUX-UNPINNED".to_owned()),
        "{ds:#}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", e2e::stderr(&out));
}

/// `pin-linux.winadmit.io` in the configuration as the API server stores
/// it, and its index among the webhooks.
fn pin_linux_webhook(cp: &controlplane::ControlPlane, configuration: &str) -> (usize, Value) {
    let c: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "mutatingwebhookconfiguration",
        configuration,
        "-o",
        "json",
    ]))
    .unwrap();
    c["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .enumerate()
        .find(|(_, h)| h["name"] == "pin-linux.winadmit.io")
        .unwrap()
}

/// The pin-linux registration's rules (`[]` while winadmit has it off).
fn pin_linux_rules(cp: &controlplane::ControlPlane, configuration: &str) -> Value {
    // The API server leaves an empty list out.
    pin_linux_webhook(cp, configuration)
        .1
        .get("rules")
        .cloned()
        .unwrap_or_else(|| json!([]))
}

/// Waits (30 s at most) until the pin-linux registration is on or off.
fn until_pin_linux(nodes: &Nodes, configuration: &str, on: bool, webhook: &e2e::Webhook) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pin_linux_rules(nodes.cp(), configuration)
        .as_array()
        .is_some_and(Vec::is_empty)
        == on
    {
        assert!(
            std::time::Instant::now() < deadline,
            "pin-linux.winadmit.io never turned {}; winadmit's log:\n{}",
            if on { "on" } else { "off" },
            webhook.server.all_logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// `serve --manage-pin-linux`: in a cluster with no Windows nodes the
/// pin-linux registration matches nothing, so a Linux pod that selects no
/// OS never reaches winadmit, while a pod that names a node that does not
/// exist yet still does (both webhooks judge it, without the node's OS).
/// Once a Windows node joins, the registration is back with the rules
/// winadmit renders, within 2 s of the node's creation (driven by the
/// node watch, not a poll), and pins nginx to Linux; rules emptied by
/// another writer are put back.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn a_cluster_without_windows_nodes_sends_no_pod_to_pin_linux() {
    let test = "a_cluster_without_windows_nodes_sends_no_pod_to_pin_linux";
    let setup = "pinlinux";
    let configuration = format!("winadmit-{setup}");
    let cluster = scheduling::shared(test);
    let mut nodes = cluster.nodes(&[Node::linux("linux-1")]);
    let webhook = scheduling::install_winadmit_with(
        cluster.cp,
        "base",
        setup,
        &["--manage-pin-linux", &configuration],
    );
    let rules = e2e::rendered("base")
        .iter()
        .filter(|o| o["kind"] == "MutatingWebhookConfiguration")
        .flat_map(|o| o["webhooks"].as_array().unwrap().clone())
        .find(|h| h["name"] == "pin-linux.winadmit.io")
        .unwrap()["rules"]
        .clone();
    until_pin_linux(&nodes, &configuration, false, &webhook);
    let ns = "pin-linux-off";
    cluster
        .cp
        .kubectl(&["delete", "namespace", ns, "--wait=true"]);
    cluster.cp.namespace(ns, &[("winadmit-e2e", setup)]);
    let nginx = json!({"containers": containers("nginx:1.27")});
    create(&nodes, &workload("Deployment", ns, "unseen", 1, nginx));
    nodes.wait_pods(ns, "app=unseen", 1, &["Running"]);
    assert!(
        webhook.reviews_of("unseen").is_empty(),
        "{:#?}",
        webhook.reviews_of("unseen")
    );
    // Bound by name to a node that does not exist yet: judged, and
    // admitted on what holds on every OS.
    let bound = e2e::pod(
        ns,
        "bound-later",
        json!({"nodeName": "win22-7", "containers": containers("registry.example/app:1")}),
    );
    create(&nodes, &bound);
    webhook.wait_review("bound-later", |r| r["endpoint"] == "mutate");
    webhook.wait_review("bound-later", |r| r["endpoint"] == "validate");

    // A Windows node joins: the registration is back within 2 s.
    let switched = std::sync::Arc::new(std::sync::Mutex::new(None));
    let start = std::time::Instant::now();
    let poller = {
        let switched = std::sync::Arc::clone(&switched);
        let cp = nodes.cp();
        let configuration = configuration.clone();
        std::thread::spawn(move || {
            let deadline = start + std::time::Duration::from_secs(30);
            while std::time::Instant::now() < deadline {
                if !pin_linux_rules(cp, &configuration)
                    .as_array()
                    .is_none_or(Vec::is_empty)
                {
                    *switched.lock().unwrap() = Some(start.elapsed());
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        })
    };
    nodes.join(&[Node::windows("win22-1")]);
    poller.join().unwrap();
    let took = switched.lock().unwrap().unwrap_or_else(|| {
        panic!(
            "pin-linux.winadmit.io never turned on; winadmit's log:\n{}",
            webhook.server.all_logs()
        )
    });
    eprintln!("pin-linux.winadmit.io on {took:?} after the Windows node's creation began");
    assert!(
        took < std::time::Duration::from_secs(2),
        "pin-linux.winadmit.io on {took:?} after the Windows node was created"
    );
    assert_eq!(pin_linux_rules(nodes.cp(), &configuration), rules);

    // Another writer empties the rules: they are put back.
    let (index, _) = pin_linux_webhook(nodes.cp(), &configuration);
    nodes.cp().kubectl_ok(&[
        "patch",
        "mutatingwebhookconfiguration",
        &configuration,
        "--type=json",
        "-p",
        &json!([{"op": "replace", "path": format!("/webhooks/{index}/rules"), "value": []}])
            .to_string(),
    ]);
    until_pin_linux(&nodes, &configuration, true, &webhook);
    assert_eq!(pin_linux_rules(nodes.cp(), &configuration), rules);

    let ns = "pin-linux-on";
    nodes
        .cp()
        .kubectl(&["delete", "namespace", ns, "--wait=true"]);
    nodes.cp().namespace(ns, &[("winadmit-e2e", setup)]);
    let nginx = json!({"containers": containers("nginx:1.27")});
    create(&nodes, &workload("Deployment", ns, "pinned", 1, nginx));
    assert_eq!(
        template_selector(&nodes, "deployment", ns, "pinned"),
        json!({"kubernetes.io/os": "linux"})
    );
}

/// The one-call install (one mutating registration calling `/admit`):
/// a pod bound to a Windows node by name, with `hostNetwork`, is refused
/// by `pin-linux.winadmit.io`, which calls `/admit` there; without
/// `hostNetwork` it is pinned to Windows and runs there.
#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
fn the_one_call_install_judges_a_pod_bound_to_a_windows_node() {
    let test = "the_one_call_install_judges_a_pod_bound_to_a_windows_node";
    let setup = "onecall";
    let cluster = scheduling::shared(test);
    let _webhook = scheduling::install_winadmit(cluster.cp, "one-call", setup);
    let nodes = cluster.nodes(&[Node::linux("linux-1"), Node::windows("win22-1")]);
    let ns = "one-call-placement";
    nodes
        .cp()
        .kubectl(&["delete", "namespace", ns, "--wait=true"]);
    nodes.cp().namespace(ns, &[("winadmit-e2e", setup)]);
    let bound = |host_network: bool| {
        let mut spec =
            json!({"nodeName": "win22-1", "containers": containers("registry.example/app:1")});
        if host_network {
            spec["hostNetwork"] = json!(true);
        }
        spec
    };
    // The cache knows both nodes once a bound pod comes back pinned.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = e2e::create(nodes.cp(), &e2e::pod(ns, "probe", bound(false)), true);
        let pod: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if pod["spec"]["nodeSelector"]["kubernetes.io/os"] == "windows" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            e2e::stderr(&out)
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = e2e::create(
        nodes.cp(),
        &workload("Deployment", ns, "refused", 1, bound(true)),
        false,
    );
    let err = e2e::stderr(&out);
    assert!(
        !out.status.success() && err.contains("WIN-HOSTNETWORK"),
        "{err}"
    );
    create(
        &nodes,
        &workload("Deployment", ns, "admitted", 1, bound(false)),
    );
    let pods = nodes.wait_pods(ns, "app=admitted", 1, &["Running"]);
    assert!(all_on(&pods, Os::Windows), "pods on {:?}", oses(&pods));
    assert!(nodes.pods(ns, "app=refused").is_empty());
}
