//! `lint` and `report --from-file` read their files with one manifest
//! reader: both learn the same cluster objects (here a RuntimeClass that
//! pins Windows) from every file of the input, wherever it is, before any
//! workload is judged.

use std::process::Command;

use serde_json::Value;

const POD: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: shop
spec:
  runtimeClassName: windows-2022
  hostNetwork: true
  containers:
  - name: iis
    image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
";

const CLASS_YAML: &str = "\
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: windows-2022
handler: runhcs-wcow-process
scheduling:
  nodeSelector:
    kubernetes.io/os: windows
";

/// The same class as a typed list, as `kubectl get runtimeclass -o json`
/// of an API list response gives it: items without `kind`.
const CLASS_JSON: &str = r#"{
  "apiVersion": "node.k8s.io/v1",
  "kind": "RuntimeClassList",
  "items": [
    {
      "metadata": {"name": "windows-2022"},
      "handler": "runhcs-wcow-process",
      "scheduling": {"nodeSelector": {"kubernetes.io/os": "windows"}}
    }
  ]
}"#;

fn run(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// The rules `lint` and `report` find on the pod, for files in `dir`.
fn rules(dir: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let dir = dir.to_str().unwrap();
    let rule = |f: &Value| f["rule"].as_str().unwrap().to_owned();
    let lint = run(&["lint", "--format", "json", dir]);
    let mut linted: Vec<String> = lint["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(rule)
        .collect();
    let report = run(&["report", "-q", "--format", "json", "--from-file", dir]);
    let objects = report["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 1, "{report}");
    let mut reported: Vec<String> = objects[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(rule)
        .collect();
    linted.sort();
    reported.sort();
    (linted, reported)
}

#[test]
fn a_runtime_class_in_a_later_file_pins_the_pod_for_lint_and_report_alike() {
    for (name, class) in [
        ("b-classes.yaml", CLASS_YAML),
        ("b-classes.json", CLASS_JSON),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // The pod's file comes first: the class is learnt by the first pass.
        std::fs::write(dir.path().join("a-pod.yaml"), POD).unwrap();
        std::fs::write(dir.path().join(name), class).unwrap();
        let (linted, reported) = rules(dir.path());
        assert!(
            linted.iter().any(|r| r == "WIN-HOSTNETWORK"),
            "{name}: lint did not take the pod for Windows: {linted:?}"
        );
        assert_eq!(linted, reported, "{name}: lint and report differ");
    }
}
