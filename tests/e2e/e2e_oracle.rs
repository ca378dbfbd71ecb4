//! The real API server as the oracle of winadmit's admission claims, on
//! generated Windows pods (each setting winadmit has a rule for, alone and
//! in pairs, under `spec.os.name: windows` and under the Windows node
//! selector):
//!
//! - a pod the API server refuses by itself (no webhook) never gets only
//!   warnings from winadmit: `lint` reports an error for it;
//! - WIN-OS-FIELDS names exactly the fields the API server's Windows
//!   validation refuses (`cannot be set for a windows pod`);
//! - every pod winadmit admits, as written or patched by `/mutate`, is
//!   accepted by the API server through the installed webhooks.
//!
//! And on Linux pods with `windowsOptions`: the API server refuses them
//! exactly where `spec.os.name` is `linux` (WIN-WINDOWSOPTIONS-LINUX) and
//! admits them where node selection alone targets Linux
//! (WIN-WINDOWSOPTIONS-LINUX-IGNORED, a warning).
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::controlplane;
use crate::oracle;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use oracle::report;

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_api_server_agrees_with_winadmit_on_generated_windows_pods() {
    let test = "the_api_server_agrees_with_winadmit_on_generated_windows_pods";
    let cp = controlplane::shared(test);
    let (failures, sent) = oracle::disagreements(cp, None);
    assert!(
        failures.is_empty(),
        "{} of {} generated pods disagree with the API server:\n{}",
        failures.len(),
        sent,
        failures.join("\n")
    );
}

/// `windowsOptions` on Linux pods: the API server refuses it exactly where
/// `spec.os.name` is `linux` (WIN-WINDOWSOPTIONS-LINUX, an error, names the
/// refused fields) and admits it where only node selection or affinity
/// targets Linux (WIN-WINDOWSOPTIONS-LINUX-IGNORED, a warning, and no error).
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_api_server_refuses_windows_options_only_with_os_name_linux() {
    let test = "the_api_server_refuses_windows_options_only_with_os_name_linux";
    let cp = controlplane::shared(test);
    let ns = "oracle-linux";
    cp.namespace(ns, &[]);
    let options = json!({"windowsOptions": {"runAsUserName": "ContainerUser"}});
    let pod = |name: &str, target: Value| {
        let mut spec = target;
        spec["securityContext"] = options.clone();
        spec["containers"] =
            json!([{"name": "web", "image": "nginx:1.27", "securityContext": options}]);
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})
    };
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}});
    let pods = vec![
        (
            pod("os-name", json!({"os": {"name": "linux"}})),
            "spec.os.name: linux".to_owned(),
        ),
        (
            pod(
                "os-name-and-selector",
                json!({"os": {"name": "linux"}, "nodeSelector": {"kubernetes.io/os": "linux"}}),
            ),
            "spec.os.name: linux and a Linux node selector".to_owned(),
        ),
        (
            pod(
                "selector",
                json!({"nodeSelector": {"kubernetes.io/os": "linux"}}),
            ),
            "a Linux node selector".to_owned(),
        ),
        (
            pod("affinity", json!({"affinity": affinity})),
            "Linux node affinity".to_owned(),
        ),
    ];
    let said = report(&pods, None);
    let answers = cp.dry_run_create_all(&pods.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
    let mut failures = Vec::new();
    for ((pod, what), answer) in pods.iter().zip(&answers) {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let found = &said[name].findings;
        let of = |rule: &str| -> BTreeSet<(String, String)> {
            found
                .iter()
                .filter(|(r, _, _)| r == rule)
                .map(|(_, sev, field)| (sev.clone(), field.clone()))
                .collect()
        };
        let refused: BTreeSet<(String, String)> = answer
            .cause_fields("windows options cannot be set for a linux pod")
            .into_iter()
            .map(|f| ("error".to_owned(), f))
            .collect();
        let errors = of("WIN-WINDOWSOPTIONS-LINUX");
        let warnings = of("WIN-WINDOWSOPTIONS-LINUX-IGNORED");
        if errors != refused {
            failures.push(format!(
                "{what}: the API server refuses {refused:?}, WIN-WINDOWSOPTIONS-LINUX reports {errors:?}"
            ));
        }
        if answer.ok() {
            let all_errors: Vec<_> = found.iter().filter(|(_, s, _)| s == "error").collect();
            if !all_errors.is_empty() || warnings.len() != 2 {
                failures.push(format!(
                    "{what}: admitted by the API server; expected two WIN-WINDOWSOPTIONS-LINUX-IGNORED warnings and no error, winadmit reports {found:?}"
                ));
            }
        } else if refused.is_empty() {
            failures.push(format!(
                "{what}: refused for another reason: {}",
                answer.message()
            ));
        } else if !warnings.is_empty() {
            failures.push(format!(
                "{what}: refused, yet winadmit also calls it ignored: {warnings:?}"
            ));
        }
    }
    assert!(
        answers.iter().any(controlplane::Answer::ok) && answers.iter().any(|a| !a.ok()),
        "the cases must include an admitted and a refused pod"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
