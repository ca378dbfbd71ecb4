//! The corpus replayed through the scheduling cluster: every workload of
//! each file labelled `pass` at the default target (the corpus's
//! `INDEX.tsv`) is created through winadmit (installed from its rendered
//! manifests, reading the nodes through its cluster cache) in front of the
//! real scheduler, controller manager and KWOK nodes: one Linux node and
//! Windows nodes of every build the corpus's images need (version 1709,
//! Windows Server 2019, 2022 and 2025), untainted. A workload in an API
//! version the server no longer serves is moved to the served one first. None may be refused,
//! and every pod the controllers make and the scheduler binds must be on a
//! node of an OS it can run: Windows for a file that targets Windows
//! (`targets_windows: yes`); else the OS the object's own node selector
//! names, or that its images' names say (a Windows base image, a Microsoft
//! Windows image or a Windows release tag: Windows; else Linux).
//!
//! What a real cluster would add and this one cannot show is printed, not
//! judged: pods left Pending (a PersistentVolumeClaim with no provisioner,
//! a node label no declared node has) and CronJobs (their schedule decides
//! when a pod appears).

use crate::corpus_dir;
use crate::e2e;
use crate::scheduling_kit as scheduling;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use scheduling::{Node, Nodes, Os};

const SETUP: &str = "corpus";

const WORKLOADS: &[&str] = &[
    "Pod",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "ReplicationController",
];

/// A file labelled `pass` at the default target, with the OS it targets.
struct Labelled {
    file: String,
    targets: String,
}

fn labelled(dir: &std::path::Path) -> Vec<Labelled> {
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).unwrap();
    let mut lines = index.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (file, targets, verdict) = (col("file"), col("targets_windows"), col("expected_verdict"));
    lines
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c[verdict] == "pass")
        .map(|c| Labelled {
            file: c[file].to_owned(),
            targets: c[targets].to_owned(),
        })
        .collect()
}

/// The OS the object names in its own pod template's node selector.
fn own_os(object: &Value) -> Option<Os> {
    let spec = match object["kind"].as_str() {
        Some("Pod") => &object["spec"],
        Some("CronJob") => &object["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &object["spec"]["template"]["spec"],
    };
    match spec["nodeSelector"]["kubernetes.io/os"].as_str() {
        Some("windows") => Some(Os::Windows),
        Some("linux") => Some(Os::Linux),
        _ => None,
    }
}

/// The OS the object's images can run on, by their names: a Windows base
/// image, a Microsoft Windows image or a tag naming a Windows release make
/// it Windows, anything else Linux.
fn image_os(object: &Value) -> Option<Os> {
    let text = object.to_string().to_lowercase();
    let windows = [
        "servercore",
        "nanoserver",
        "mcr.microsoft.com/windows",
        "microsoft/iis",
        "microsoft/windows",
        "ltsc20",
        "windows-",
    ];
    let images: Vec<&str> = text
        .split("\"image\":\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    if images.is_empty() {
        return None;
    }
    Some(
        if images.iter().any(|i| windows.iter().any(|w| i.contains(w))) {
            Os::Windows
        } else {
            Os::Linux
        },
    )
}

/// Moves a workload from an API version the server no longer serves to the
/// one it does, as `kubectl convert` would: `extensions/v1beta1` and
/// `apps/v1beta*` to `apps/v1` (with the selector those versions defaulted
/// from the template's labels), `batch/v1beta1` to `batch/v1`.
fn served(doc: &mut Value) {
    let api = doc["apiVersion"].as_str().unwrap_or_default().to_owned();
    if api == "batch/v1beta1" || api == "batch/v2alpha1" {
        doc["apiVersion"] = json!("batch/v1");
    }
    if api == "extensions/v1beta1" || api.starts_with("apps/v1beta") {
        doc["apiVersion"] = json!("apps/v1");
        if doc["spec"]["selector"].is_null() {
            let labels = doc["spec"]["template"]["metadata"]["labels"].clone();
            doc["spec"]["selector"] = json!({"matchLabels": labels});
        }
    }
}

/// Creates the file's workloads in namespace `ns`; returns what was
/// refused, and (for the landing check) the expected OS by pod-name
/// prefix.
fn replay(
    nodes: &Nodes,
    label: &Labelled,
    path: &std::path::Path,
    ns: &str,
) -> (Vec<String>, Vec<(String, Os)>) {
    let text = std::fs::read_to_string(path).unwrap();
    let limits = winadmit::input::yaml::ParseLimits::for_len(text.len());
    let docs = winadmit::input::yaml::load(&text, limits).unwrap_or_default();
    let mut refused = Vec::new();
    let mut expected = Vec::new();
    for mut doc in docs {
        let Some(kind) = doc["kind"]
            .as_str()
            .filter(|k| WORKLOADS.contains(k))
            .map(str::to_owned)
        else {
            continue;
        };
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or("unnamed")
            .to_owned();
        doc["metadata"]["namespace"] = json!(ns);
        served(&mut doc);
        let out = e2e::create(nodes.cp(), &doc, false);
        if !out.status.success() {
            let err = e2e::stderr(&out);
            let line = format!("{}: {kind}/{name}: {err}", label.file);
            if err.contains("winadmit.io\" denied") {
                refused.push(line);
            } else {
                eprintln!("refused by the API server itself, not by winadmit: {line}");
            }
            continue;
        }
        let os = match label.targets.as_str() {
            "yes" => Some(Os::Windows),
            _ => own_os(&doc).or_else(|| image_os(&doc)),
        };
        if let Some(os) = os.filter(|_| kind != "CronJob") {
            expected.push((name, os));
        }
    }
    (refused, expected)
}

/// Waits until the number of bound pods in `namespaces` has not changed
/// for 6 s (the controllers and the scheduler have settled; what is still
/// Pending then stays so), 90 s at most.
fn settle<'n>(nodes: &Nodes, namespaces: impl Iterator<Item = &'n String> + Clone) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let (mut last, mut same) = (usize::MAX, 0);
    while same < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(2));
        let bound: usize = namespaces
            .clone()
            .map(|ns| {
                nodes
                    .pods(ns, "")
                    .iter()
                    .filter(|p| p.node.is_some())
                    .count()
            })
            .sum();
        same = if bound == last { same + 1 } else { 0 };
        last = bound;
    }
}

#[test]
#[cfg_attr(
    any(no_control_plane, no_kwok),
    ignore = "needs kube-apiserver, kube-scheduler, kube-controller-manager and KWOK, which are not built: run tests/apiserver/build.sh and tests/kwok/build.sh"
)]
#[cfg_attr(
    no_corpus,
    ignore = "needs the corpus: ../shared/corpus or WINADMIT_CORPUS"
)]
fn corpus_workloads_are_admitted_and_land_on_an_os_they_can_run() {
    let test = "corpus_workloads_are_admitted_and_land_on_an_os_they_can_run";
    let dir = corpus_dir::corpus_dir(test);
    let cluster = scheduling::shared(test);
    let _webhook = scheduling::install_winadmit(cluster.cp, "base", SETUP);
    let nodes = cluster.nodes(&[
        Node::linux("linux-1"),
        // Windows Server, version 1709: the Kubernetes documentation's
        // examples of its release era use its images.
        Node::windows("win1709-1").label("node.kubernetes.io/windows-build", "10.0.16299"),
        Node::windows("win19-1").label("node.kubernetes.io/windows-build", "10.0.17763"),
        Node::windows("win22-1"),
        Node::windows_2025("win25-1"),
    ]);
    let mut refused = Vec::new();
    let mut expected: BTreeMap<String, Vec<(String, Os)>> = BTreeMap::new();
    for (i, label) in labelled(&dir).iter().enumerate() {
        let ns = format!("corpus-{i}");
        nodes
            .cp()
            .kubectl(&["delete", "namespace", &ns, "--wait=true"]);
        nodes.cp().namespace(&ns, &[("winadmit-e2e", SETUP)]);
        let (r, e) = replay(&nodes, label, &dir.join(&label.file), &ns);
        refused.extend(r);
        expected.insert(ns, e);
    }
    assert!(
        refused.is_empty(),
        "working workloads refused:\n{}",
        refused.join("\n")
    );
    settle(&nodes, expected.keys());
    let (mut wrong, mut pending, mut placed) = (Vec::new(), 0, 0);
    for (ns, workloads) in &expected {
        for p in nodes.pods(ns, "") {
            let Some((workload, os)) = workloads
                .iter()
                .filter(|(w, _)| p.name.starts_with(w.as_str()))
                .max_by_key(|(w, _)| w.len())
            else {
                continue;
            };
            match p.os {
                None => pending += 1,
                Some(on) if on == *os => placed += 1,
                Some(on) => wrong.push(format!(
                    "{ns}: {workload}: pod {} on {:?} ({on:?})",
                    p.name, p.node
                )),
            }
        }
    }
    eprintln!(
        "corpus through the scheduling cluster: {placed} pods on an OS they can run, {pending} not bound (volumes, node labels), {} on the wrong OS",
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "pods on a node of the wrong OS:\n{}",
        wrong.join("\n")
    );
    assert!(placed > 0, "no pod was placed: the replay did nothing");
}
