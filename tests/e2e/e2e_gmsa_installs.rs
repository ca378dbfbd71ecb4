//! The gMSA boundary in every install, through a real kube-apiserver v1.37
//! (issue 51, item 1): each install is rendered as a user renders it
//! (`winadmit manifests`, `kubectl kustomize` of the overlays that combine
//! `components/gmsa` with the audit, one-call and no-match-conditions
//! components, `helm template` of the chart, `winadmit admission-policy`)
//! and installed, and in each the same cases are refused: a service account
//! without `use` on the credential spec it names, another spec's contents
//! under a name it may use, and contents without a name. Each case is tried
//! in a plain namespace and in one labelled `winadmit.io/ignore: "true"` and
//! `winadmit.io/mode: audit`, with every `winadmit.io/skip.*` annotation on
//! the pod: no label, mode or annotation a namespace's or pod's author sets
//! opens the boundary. A pod that names a credential spec its account may
//! use is admitted in each, so no install passes by refusing everything.
//!
//! The webhook installs run `winadmit serve --gmsa auto` with the install's
//! policy, registered with the install's webhook configurations (pointed at
//! it, `e2e.rs`); the policy-only install is the exported policies, with no
//! webhook.

use crate::binary;
use crate::controlplane;
use crate::e2e;
use crate::e2e_gmsa::{canonical, crd, credential_spec, credspec};

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use controlplane::{Answer, ControlPlane};
use e2e::Webhook;

/// What every install shares in the control plane: the CRD, two credential
/// specs, a ClusterRole granting `use` on `webapp1` only, and the RBAC of
/// winadmit's own ServiceAccount (the gmsa install's).
struct Cluster {
    cp: &'static ControlPlane,
    kubeconfig: std::path::PathBuf,
}

fn cluster(test: &str) -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    let cp = controlplane::shared(test);
    CLUSTER.get_or_init(|| {
        cp.apply(&crd().to_string());
        cp.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd/gmsacredentialspecs.windows.k8s.io",
            "--timeout=60s",
        ]);
        let rbac: Vec<Value> = e2e::rendered("gmsa")
            .into_iter()
            .filter(|o| {
                matches!(
                    e2e::kind(o),
                    "Namespace" | "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding"
                )
            })
            .collect();
        cp.apply(&e2e::to_list(&rbac));
        cp.apply(&e2e::to_list(&[
            credential_spec("v1", "webapp1", Some(credspec("webapp1"))),
            credential_spec("v1", "domain-admin", Some(credspec("domain-admin"))),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "gmsa-installs-users"},
                "rules": [{"apiGroups": ["windows.k8s.io"], "resources": ["gmsacredentialspecs"],
                    "verbs": ["use"], "resourceNames": ["webapp1"]}]}),
        ]));
        let dir = tempfile::tempdir().unwrap().keep();
        let kubeconfig = cp.service_account_kubeconfig(&dir, "winadmit", "winadmit");
        Cluster { cp, kubeconfig }
    })
}

/// `kubectl kustomize` (v1.37) of an overlay made of `kustomization`, in a
/// copy of `manifests/` (so that it may name `../gmsa` and the components).
fn kustomize(cp: &ControlPlane, kustomization: &str) -> Vec<Value> {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("manifests");
    copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests"),
        &root,
    );
    let overlay = root.join("overlays/combined");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).unwrap();
    let text = cp.kubectl_ok(&["kustomize", overlay.to_str().unwrap()]);
    e2e::parse_yaml(&text)
}

/// `gmsa` overlay with one more component.
fn gmsa_with(component: &str) -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../gmsa\ncomponents:\n  - ../../components/{component}\n"
    )
}

/// The namespaces of install `setup`: a plain one, one labelled with the
/// opt-out label and one in audit mode; each with a ServiceAccount
/// `allowed` (may `use` webapp1) and `denied` (no grant).
fn namespaces(cp: &ControlPlane, setup: &str) -> [String; 3] {
    let plain = format!("{setup}-plain");
    let ignored = format!("{setup}-ignored");
    let audit = format!("{setup}-audit");
    cp.namespace(&plain, &[("winadmit-e2e", setup)]);
    cp.namespace(
        &ignored,
        &[("winadmit-e2e", setup), ("winadmit.io/ignore", "true")],
    );
    cp.namespace(
        &audit,
        &[("winadmit-e2e", setup), ("winadmit.io/mode", "audit")],
    );
    for ns in [&plain, &ignored, &audit] {
        cp.apply(&e2e::to_list(&[
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "allowed", "namespace": ns}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "denied", "namespace": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "allowed-uses-gmsa", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gmsa-installs-users"},
                "subjects": [{"kind": "ServiceAccount", "name": "allowed", "namespace": ns}]}),
        ]));
    }
    [plain, ignored, audit]
}

/// A Windows pod of `account` in `ns` with `options` on the pod, carrying
/// every skip annotation of the gMSA rules.
fn pod(ns: &str, name: &str, account: &str, options: Value) -> Value {
    let mut p = e2e::pod(
        ns,
        name,
        json!({"serviceAccountName": account,
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "securityContext": {"windowsOptions": options}}),
    );
    p["metadata"]["annotations"] = json!({
        "winadmit.io/skip.WIN-GMSA-NOT-AUTHORIZED": "x",
        "winadmit.io/skip.WIN-GMSA-CONTENTS-MISMATCH": "x",
        "winadmit.io/skip.WIN-GMSA-CONTENTS-WITHOUT-NAME": "x",
        "winadmit.io/skip.WIN-GMSA-NOT-FOUND": "x",
    });
    p
}

/// The refused cases: (pod name, account, windowsOptions, the rule the
/// refusal names).
fn refused_cases() -> Vec<(&'static str, &'static str, Value, &'static str)> {
    vec![
        (
            "no-use",
            "denied",
            json!({"gmsaCredentialSpecName": "webapp1"}),
            "WIN-GMSA-NOT-AUTHORIZED",
        ),
        (
            "not-granted",
            "allowed",
            json!({"gmsaCredentialSpecName": "domain-admin"}),
            "WIN-GMSA-NOT-AUTHORIZED",
        ),
        (
            "other-contents",
            "allowed",
            json!({"gmsaCredentialSpecName": "webapp1", "gmsaCredentialSpec": canonical("domain-admin")}),
            "WIN-GMSA-CONTENTS-MISMATCH",
        ),
        (
            "contents-only",
            "allowed",
            json!({"gmsaCredentialSpec": canonical("domain-admin")}),
            "WIN-GMSA-CONTENTS-WITHOUT-NAME",
        ),
    ]
}

/// Retries `pod` (a server-side dry run) until the API server refuses it
/// naming `rule` (the registrations and policies take effect a moment after
/// they are created), 30 s at most.
fn wait_refused(cp: &ControlPlane, what: &str, pod: &Value, rule: &str) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = cp.dry_run_create(pod);
        if !a.ok() && a.message().contains(rule) {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {} was not refused with {rule} in 30 s: {a:?}",
            pod["metadata"]["name"]
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every case of install `what` (whose objects are in force for `setup`'s
/// namespaces): each refused in both namespaces, by one of `refusers` (a
/// webhook's or policy's name as the API server's message gives it); the
/// authorized name admitted. `ready` runs first, with the labelled
/// namespace's name.
fn check_install(
    cp: &ControlPlane,
    what: &str,
    setup: &str,
    refusers: &[&str],
    ready: &dyn Fn(&str),
) {
    let [plain, ignored, audit] = namespaces(cp, setup);
    ready(&ignored);
    for ns in [&plain, &ignored, &audit] {
        for (name, account, options, rule) in refused_cases() {
            let p = pod(ns, name, account, options);
            let a = wait_refused(cp, what, &p, rule);
            let m = a.message();
            assert!(
                refusers.iter().any(|r| m.contains(r)),
                "{what} {ns}/{name}: refused by none of {refusers:?}: {m}"
            );
            assert!(!m.contains("to opt out"), "{what} {ns}/{name}: {m}");
            // The message names the field (a policy's messageExpression
            // worked, rather than its static message).
            assert!(
                m.contains("spec.securityContext.windowsOptions.gmsaCredentialSpec"),
                "{what} {ns}/{name}: {m}"
            );
        }
        let ok = pod(
            ns,
            "may-use",
            "allowed",
            json!({"gmsaCredentialSpecName": "webapp1"}),
        );
        let a = cp.dry_run_create(&ok);
        assert!(a.ok(), "{what} {ns}: the authorized pod was refused: {a:?}");
    }
}

/// `winadmit serve --gmsa auto` with `policy` (YAML), ready once gMSA is on
/// and the credential specs are listed.
fn start_webhook(c: &Cluster, policy: &str) -> Webhook {
    let webhook = Webhook::start(
        policy,
        &[
            "--cluster-cache",
            "on",
            "--kubeconfig",
            c.kubeconfig.to_str().unwrap(),
            "--gmsa",
            "auto",
        ],
    )
    .adopted_by(c.cp);
    webhook.wait_gmsa_on();
    webhook
}

/// A webhook install: its webhook configurations registered for `setup`,
/// pointed at a server running its policy; then every case.
fn check_webhook_install(c: &Cluster, what: &str, setup: &str, objects: &[Value]) {
    let configs: Vec<&str> = objects
        .iter()
        .filter(|o| e2e::kind(o).ends_with("WebhookConfiguration"))
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert!(
        configs.contains(&"winadmit-gmsa"),
        "{what}: no winadmit-gmsa registration among {configs:?}"
    );
    let webhook = start_webhook(c, &e2e::overlay_policy(objects));
    c.cp.apply(&e2e::to_list(&e2e::registrations(objects, setup, &webhook)));
    // In the namespace with the opt-out label only the gMSA registration
    // is called, and it judges nothing but the gMSA rules: a pod with
    // hostNetwork (an error elsewhere) and an authorized name is admitted
    // once the server knows the label (it learns namespaces' labels from
    // its watch, a moment after the namespace is made, and judges the pod
    // whole until then). The cases run after that, against a server that
    // knows the label.
    let label_known = |ns: &str| {
        let mut host_network = pod(
            ns,
            "host-network",
            "allowed",
            json!({"gmsaCredentialSpecName": "webapp1"}),
        );
        host_network["spec"]["hostNetwork"] = json!(true);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let a = c.cp.dry_run_create(&host_network);
            if a.ok() {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {a:?}");
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    check_install(
        c.cp,
        what,
        setup,
        &[
            r#"admission webhook "gmsa.winadmit.io" denied"#,
            r#"admission webhook "validate.winadmit.io" denied"#,
            r#"admission webhook "admit.winadmit.io" denied"#,
        ],
        &label_known,
    );
    drop(webhook);
}

/// The gmsa overlay as `winadmit manifests` prints it, and the same with
/// the install moved to another namespace (`--namespace`).
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_gmsa_install_holds_in_every_namespace() {
    let c = cluster("the_gmsa_install_holds_in_every_namespace");
    check_webhook_install(
        c,
        "winadmit manifests --overlay gmsa",
        "gi-gmsa",
        &e2e::rendered("gmsa"),
    );
    let out = binary::winadmit(&["manifests", "--overlay", "gmsa", "--namespace", "win-ops"]);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let moved = e2e::parse_yaml(&String::from_utf8(out.stdout).unwrap());
    check_webhook_install(
        c,
        "winadmit manifests --overlay gmsa --namespace win-ops",
        "gi-moved",
        &moved,
    );
}

/// `components/gmsa` with the audit component (mode audit, failurePolicy
/// Ignore for the other registrations), the one-call component (no
/// validating registration but winadmit-gmsa) and the no-match-conditions
/// component (every pod sent), as `kubectl kustomize` renders them.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn gmsa_combined_with_audit_one_call_and_no_match_conditions_holds() {
    let c = cluster("gmsa_combined_with_audit_one_call_and_no_match_conditions_holds");
    for (component, setup) in [
        ("audit", "gi-audit"),
        ("one-call", "gi-one-call"),
        ("no-match-conditions", "gi-no-mc"),
    ] {
        let objects = kustomize(c.cp, &gmsa_with(component));
        let gmsa = objects
            .iter()
            .find(|o| o["metadata"]["name"] == "winadmit-gmsa")
            .unwrap();
        assert_eq!(gmsa["webhooks"][0]["failurePolicy"], "Fail", "{component}");
        if component == "audit" {
            assert!(e2e::overlay_policy(&objects).contains("mode: audit"));
        }
        check_webhook_install(c, &format!("gmsa + {component}"), setup, &objects);
    }
}

/// The chart with `gmsa.mode=auto` and its defaults (mode audit, so
/// failurePolicy Ignore for the other registrations).
#[test]
#[cfg_attr(
    any(no_control_plane, no_helm),
    ignore = "needs kube-apiserver and helm, which are not built: run tests/apiserver/build.sh and tests/helm/build.sh"
)]
fn the_chart_holds_the_gmsa_boundary() {
    let c = cluster("the_chart_holds_the_gmsa_boundary");
    let helm = crate::helm_support::helm("the_chart_holds_the_gmsa_boundary");
    let chart = crate::helm_support::chart();
    let text = helm.ok(&[
        "template",
        "winadmit",
        chart.to_str().unwrap(),
        "--namespace",
        "winadmit",
        "--set",
        "gmsa.mode=auto",
    ]);
    let objects = e2e::parse_yaml(&text);
    assert!(e2e::overlay_policy(&objects).contains("mode: audit"));
    check_webhook_install(
        c,
        "helm template --set gmsa.mode=auto",
        "gi-chart",
        &objects,
    );
}

/// The policy-only install (`manifests/overlays/admission-policy`, no
/// webhook): policy winadmit-gmsa asks the API server's authorizer for the
/// pod's service account and refuses contents it cannot compare.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_policy_only_install_holds_the_gmsa_boundary() {
    let c = cluster("the_policy_only_install_holds_the_gmsa_boundary");
    let setup = "gi-policy";
    let mut docs = e2e::rendered("admission-policy");
    let binding = docs
        .iter()
        .find(|d| {
            e2e::kind(d) == "ValidatingAdmissionPolicyBinding"
                && d["metadata"]["name"] == "winadmit-gmsa"
        })
        .expect("the policy-only install binds winadmit-gmsa");
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    let selector = binding["spec"]["matchResources"]["namespaceSelector"].to_string();
    assert!(!selector.contains("winadmit.io/"), "{selector}");
    e2e::scope_bindings(&mut docs, setup);
    c.cp.apply(&e2e::to_list(&docs));
    check_install(
        c.cp,
        "manifests/overlays/admission-policy",
        setup,
        &["ValidatingAdmissionPolicy 'winadmit-gmsa'"],
        &|_| {},
    );
    // A Deployment's template is checked as its pods are.
    let ns = format!("{setup}-ignored");
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "template", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "t"}},
            "template": {"metadata": {"labels": {"app": "t"}}, "spec": {
                "serviceAccountName": "denied",
                "nodeSelector": {"kubernetes.io/os": "windows"},
                "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "webapp1"}},
                "containers": [{"name": "web", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}]}}}});
    let a = c.cp.dry_run_create(&d);
    assert!(
        !a.ok()
            && a.message().contains("WIN-GMSA-NOT-AUTHORIZED")
            && a.message().contains(
                "spec.template.spec.securityContext.windowsOptions.gmsaCredentialSpecName"
            ),
        "{a:?}"
    );
    // An ephemeral container added to a running pod is checked; the pod's
    // own settings are not asked again.
    let running = pod(
        &ns,
        "running",
        "allowed",
        json!({"gmsaCredentialSpecName": "webapp1"}),
    );
    let out = e2e::create(c.cp, &running, false);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let patch = json!([{"op": "add", "path": "/spec/ephemeralContainers", "value": [{
        "name": "debug", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
        "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "domain-admin"}}}]}]);
    let add_ephemeral = |patch: &Value| {
        c.cp.kubectl(&[
            "patch",
            "pod",
            "running",
            "-n",
            &ns,
            "--subresource=ephemeralcontainers",
            "--type=json",
            "-p",
            &patch.to_string(),
        ])
    };
    let out = add_ephemeral(&patch);
    let err = e2e::stderr(&out);
    assert!(
        !out.status.success()
            && err.contains("WIN-GMSA-NOT-AUTHORIZED")
            && err.contains("spec.ephemeralContainers[0]"),
        "{err}"
    );
    let mut patch = patch;
    patch[0]["value"][0]["securityContext"]["windowsOptions"]["gmsaCredentialSpecName"] =
        json!("webapp1");
    let out = add_ephemeral(&patch);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
}
