//! winadmit against every kube-apiserver from 1.34 to 1.37, each at its own
//! `--kubernetes-version`: kube-apiserver v1.34.4, v1.35.4 and v1.36.3 are
//! built from their module folders (`tests/apiserver/v1.NN/`), v1.37.2 with
//! etcd and kubectl from `tests/apiserver/` (`support/controlplane.rs`).
//! For each version, in a control plane of its own:
//!
//! 1. the oracle of generated Windows pods (`support/oracle.rs`): what the
//!    API server refuses by itself against what winadmit says at that
//!    version, and every pod winadmit admits accepted through its webhooks;
//! 2. the webhook's basic flow: a Windows pod with hostNetwork denied, a
//!    plain one admitted, one with fields Windows ignores patched (and
//!    refused by the API server without the patch), and the API server's
//!    own refusal to resize a Windows pod (`pods/resize`);
//! 3. the exported policies (`winadmit admission-policy --kubernetes-version
//!    1.NN`) installed and enforcing. The admissionregistration versions each
//!    API server serves by default are checked against [`DEFAULT_SERVED`]:
//!    where the MutatingAdmissionPolicy API of the export is not served by
//!    default (a beta API at 1.34 and 1.35), the policies are installed
//!    without it (`--no-mutating`), and the whole export in a second control
//!    plane with the feature gate and runtime-config that docs/admission-policy.md
//!    names.
//!
//! A version whose kube-apiserver is not built is ignored, with the command
//! that builds it (`build.rs`), or fails when `WINADMIT_REQUIRE_APISERVER`
//! is set (`.ci/run` builds them all first).

use crate::controlplane;
use crate::e2e;
use crate::oracle;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary;
use controlplane::ControlPlane;
use e2e::{Webhook, create, pod, stderr};

/// What each API server serves of `admissionregistration.k8s.io` with no
/// flags: (minor, [(API version, serves MutatingAdmissionPolicy)]).
const DEFAULT_SERVED: &[(u32, &[(&str, bool)])] = &[
    (34, &[("v1", false)]),
    (35, &[("v1", false)]),
    (36, &[("v1", true)]),
    (37, &[("v1", true)]),
];

/// The flags that enable the beta MutatingAdmissionPolicy API (1.34, 1.35).
const BETA_MUTATION: &[&str] = &[
    "--feature-gates=MutatingAdmissionPolicy=true",
    "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
];

/// The API versions of `admissionregistration.k8s.io` `cp` serves, each
/// with whether it serves `mutatingadmissionpolicies`.
fn served(cp: &ControlPlane) -> Vec<(String, bool)> {
    let group: Value = serde_json::from_str(&cp.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/admissionregistration.k8s.io",
    ]))
    .unwrap();
    let mut out: Vec<(String, bool)> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let version = v["version"].as_str().unwrap().to_owned();
            let list: Value = serde_json::from_str(&cp.kubectl_ok(&[
                "get",
                "--raw",
                &format!("/apis/admissionregistration.k8s.io/{version}"),
            ]))
            .unwrap();
            let mutating = list["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "mutatingadmissionpolicies");
            (version, mutating)
        })
        .collect();
    out.sort();
    out
}

fn matrix(minor: u32) {
    let test = format!("version_matrix 1.{minor}");
    // The test runs when the API server is built, or when it is required.
    let dir = controlplane::apiserver_of(minor).unwrap_or_else(|why| panic!("{test}: {why}"));
    let bin = controlplane::binaries(&test);
    let version = format!("1.{minor}");
    let started = Instant::now();
    let cp = ControlPlane::start_with(&bin, &dir.join("kube-apiserver"), &[]);
    let server: Value = serde_json::from_str(&cp.kubectl_ok(&["version", "-o", "json"])).unwrap();
    let git = server["serverVersion"]["gitVersion"].as_str().unwrap_or("");
    assert!(
        git.starts_with(&format!("v{version}.")),
        "{test}: the API server is {git}"
    );
    let served = served(&cp);
    eprintln!("{test}: {git} serves admissionregistration.k8s.io {served:?} by default");
    let expected: Vec<(String, bool)> = DEFAULT_SERVED
        .iter()
        .find(|(m, _)| *m == minor)
        .unwrap()
        .1
        .iter()
        .map(|(v, m)| ((*v).to_owned(), *m))
        .collect();
    assert_eq!(served, expected, "{test}: admissionregistration.k8s.io");

    let (failures, sent) = oracle::disagreements(&cp, Some(&version));
    eprintln!(
        "{test}: oracle: {sent} generated pods, {} disagreements ({:.0?})",
        failures.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{test}: {} of {sent} generated pods disagree with kube-apiserver {git}:\n{}",
        failures.len(),
        failures.join("\n")
    );
    webhook_flow(&cp, &version);
    let export_mutating = export(&version, false)
        .iter()
        .find(|d| e2e::kind(d) == "MutatingAdmissionPolicy")
        .map(|d| d["apiVersion"].as_str().unwrap().to_owned());
    let mutating_served = export_mutating.as_ref().is_some_and(|api| {
        served
            .iter()
            .any(|(v, m)| *m && format!("admissionregistration.k8s.io/{v}") == *api)
    });
    policies(&cp, &version, mutating_served);
    eprintln!(
        "{test}: policies in force (MutatingAdmissionPolicy {export_mutating:?}, served by default: {mutating_served})"
    );
    drop(cp);
    if !mutating_served && export_mutating.is_some() {
        let gated = ControlPlane::start_with(&bin, &dir.join("kube-apiserver"), BETA_MUTATION);
        policies(&gated, &version, true);
        eprintln!(
            "{test}: policies with the MutatingAdmissionPolicy in force with {BETA_MUTATION:?}"
        );
    }
    eprintln!("{test}: done in {:.0?}", started.elapsed());
}

/// The webhook's basic flow at `version`: setup `flow`.
fn webhook_flow(cp: &ControlPlane, version: &str) {
    let objects = e2e::rendered("base");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &["--cluster-cache", "off", "--kubernetes-version", version],
    );
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, "flow", &webhook,
    )));
    cp.namespace("flow", &[("winadmit-e2e", "flow")]);
    e2e::wait_registered(cp, &webhook, "flow", 2);

    let windows = json!({"nodeSelector": {"kubernetes.io/os": "windows"}});
    let mut host_network = windows.clone();
    host_network["hostNetwork"] = json!(true);
    let out = create(cp, &pod("flow", "host-network", host_network), false);
    let err = stderr(&out);
    assert!(
        !out.status.success()
            && err.contains(r#"admission webhook "validate.winadmit.io" denied the request"#)
            && err.contains("WIN-HOSTNETWORK"),
        "{version}: a Windows pod with hostNetwork was not denied by winadmit: {err}"
    );
    let out = create(cp, &pod("flow", "plain", windows), false);
    assert!(
        out.status.success(),
        "{version}: a plain Windows pod was refused: {}",
        stderr(&out)
    );
    let ignored = pod(
        "flow",
        "ignored-fields",
        json!({"os": {"name": "windows"}, "containers": [{
            "name": "web",
            "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
            "securityContext": {"privileged": false, "allowPrivilegeEscalation": false}
        }]}),
    );
    let out = create(cp, &ignored, false);
    assert!(
        out.status.success(),
        "{version}: the pod with fields Windows ignores was refused: {}",
        stderr(&out)
    );
    let stored = cp.get("pod", "flow", "ignored-fields");
    let container = &stored["spec"]["containers"][0];
    assert!(
        container
            .get("securityContext")
            .is_none_or(|c| c.as_object().is_some_and(serde_json::Map::is_empty)),
        "{version}: the ignored fields were not removed: {container:#}"
    );
    assert_eq!(
        stored["spec"]["nodeSelector"],
        json!({"kubernetes.io/os": "windows"}),
        "{version}: the Windows node selector was not added"
    );
    // In-place resize: the API server refuses it for a Windows pod by itself
    // (winadmit has nothing to add).
    let out = cp.kubectl(&[
        "patch",
        "pod",
        "ignored-fields",
        "-n",
        "flow",
        "--subresource",
        "resize",
        "-p",
        r#"{"spec":{"containers":[{"name":"web","resources":{"limits":{"cpu":"1"}}}]}}"#,
    ]);
    assert!(
        !out.status.success() && stderr(&out).contains("windows pods cannot be resized"),
        "{version}: resizing a Windows pod: {}",
        stderr(&out)
    );
    // As written, the API server refuses it: the patch is what admits it.
    cp.namespace("flow-unwatched", &[]);
    let mut bypass = ignored;
    bypass["metadata"]["namespace"] = json!("flow-unwatched");
    let out = create(cp, &bypass, true);
    assert!(
        stderr(&out).contains("cannot be set for a windows pod"),
        "{version}: the API server accepted the unpatched pod: {}",
        stderr(&out)
    );
}

/// `winadmit admission-policy --kubernetes-version version`, every binding
/// scoped to the `policy` setup.
fn export(version: &str, no_mutating: bool) -> Vec<Value> {
    let mut args = vec!["admission-policy", "--kubernetes-version", version];
    if no_mutating {
        args.push("--no-mutating");
    }
    let out = binary::winadmit(&args);
    assert!(out.status.success(), "winadmit {args:?}: {}", stderr(&out));
    let mut docs = e2e::parse_yaml(&String::from_utf8(out.stdout).unwrap());
    e2e::scope_bindings(&mut docs, "policy");
    docs
}

/// Installs the export at `version` (with its MutatingAdmissionPolicy when
/// `mutating`) and waits (30 s at most) until it is in force: a Windows pod
/// with hostNetwork denied, hostPID warned about, and, with the mutating
/// policy, runAsUser removed.
fn policies(cp: &ControlPlane, version: &str, mutating: bool) {
    let docs = export(version, !mutating);
    let kinds: BTreeMap<&str, usize> = docs.iter().fold(BTreeMap::new(), |mut m, d| {
        *m.entry(e2e::kind(d)).or_default() += 1;
        m
    });
    cp.apply(&e2e::to_list(&docs));
    cp.namespace("policy", &[("winadmit-e2e", "policy")]);
    let windows = json!({"nodeSelector": {"kubernetes.io/os": "windows"}});
    let mut deny = windows.clone();
    deny["hostNetwork"] = json!(true);
    let deny = pod("policy", "probe-deny", deny);
    let mut warn = windows;
    warn["hostPID"] = json!(true);
    warn["securityContext"] = json!({"runAsUser": 1000});
    let warn = pod("policy", "probe-warn", warn);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let denied = cp.dry_run_create(&deny);
        let warned = cp.dry_run_create(&warn);
        let in_force = !denied.ok()
            && denied.message().contains("WIN-HOSTNETWORK")
            && warned.ok()
            && warned.warnings.iter().any(|w| w.contains("WIN-HOSTPID"))
            && (!mutating
                || warned.body["spec"]
                    .get("securityContext")
                    .is_none_or(|sc| sc.get("runAsUser").is_none()));
        if in_force {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{version}: the exported policies {kinds:?} did not take effect in 30 s: {denied:?} {warned:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

macro_rules! versions {
    ($($name:ident: $minor:expr, $absent:ident, $reason:literal),* $(,)?) => {$(
        #[test]
        #[cfg_attr($absent, ignore = $reason)]
        #[cfg_attr(
            all(no_control_plane, not($absent)),
            ignore = "needs etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
        )]
        fn $name() {
            matrix($minor);
        }
    )*};
}

versions! {
    kube_apiserver_1_34: 34, no_apiserver_1_34,
        "needs kube-apiserver v1.34, which is not built: run tests/apiserver/v1.34/build.sh",
    kube_apiserver_1_35: 35, no_apiserver_1_35,
        "needs kube-apiserver v1.35, which is not built: run tests/apiserver/v1.35/build.sh",
    kube_apiserver_1_36: 36, no_apiserver_1_36,
        "needs kube-apiserver v1.36, which is not built: run tests/apiserver/v1.36/build.sh",
    kube_apiserver_1_37: 37, no_control_plane,
        "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh",
}

/// The matrix names each version of `controlplane::MATRIX`, and each
/// version but the newest has its module folder.
#[test]
fn every_version_has_its_module() {
    let expected: Vec<u32> = DEFAULT_SERVED.iter().map(|(m, _)| *m).collect();
    assert_eq!(controlplane::MATRIX, expected.as_slice());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/apiserver");
    for minor in controlplane::MATRIX.iter().filter(|m| **m != 37) {
        let go_mod = std::fs::read_to_string(root.join(format!("v1.{minor}/go.mod"))).unwrap();
        assert!(
            go_mod.contains(&format!("k8s.io/kubernetes v1.{minor}.")),
            "tests/apiserver/v1.{minor}/go.mod does not require k8s.io/kubernetes v1.{minor}"
        );
    }
}
