//! gMSA through winadmit and a real kube-apiserver v1.37, RBAC on: the
//! upstream Windows gMSA webhook's test cases (kubernetes-sigs/windows-gmsa,
//! its unit tests V*, M*, U* and integration tests I*) as acceptance tests
//! with the same outcome (allowed; refused with the same meaning, the
//! upstream's words in the message; patched with the same contents), and
//! the cases where winadmit goes further (init and ephemeral containers).
//! Also gMSA in `winadmit report` against the cluster (SubjectAccessReviews,
//! as admin and as an identity that may not create them), in `POST /report`,
//! in `/readyz` and in the metrics.
//!
//! The setup: the upstream GMSACredentialSpec CRD, winadmit serving with
//! `--gmsa auto` under the install's ServiceAccount and the RBAC of
//! `components/gmsa`, registered as the `gmsa` overlay renders it; in a
//! namespace, a ServiceAccount `allowed` bound (RoleBinding) to a
//! ClusterRole with verb `use` on two credential specs, and one, `denied`,
//! with no grant.
//!
//! Not here: the random hostname cases (M3-M6, M7's hostname, I17), which
//! winadmit does not do; HTTP-level cases (H*, T*) and certificate reload
//! (I16), which other suites cover for winadmit's own server.
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are ignored, with that command (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` builds it and sets it).

use crate::controlplane;
use crate::e2e;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary;
use controlplane::{Answer, ControlPlane};
use e2e::Webhook;

/// The namespace of the cases.
const NS: &str = "gmsa-cases";

/// The upstream CRD (admission-webhook/deploy/gmsa-crd.yml): v1alpha1
/// (served, deprecated) and v1 (stored), one schema, no preserve-unknown.
pub(crate) fn crd() -> Value {
    let s = |props: Value| json!({"type": "object", "properties": props});
    let string = json!({"type": "string"});
    let schema = json!({"type": "object", "properties": {"credspec": s(json!({
        "ActiveDirectoryConfig": s(json!({
            "GroupManagedServiceAccounts": {"type": "array", "items": s(json!({"Name": string, "Scope": string}))},
            "HostAccountConfig": s(json!({"PluginGUID": string, "PluginInput": string, "PortableCcgVersion": string})),
        })),
        "CmsPlugins": {"type": "array", "items": string},
        "DomainJoinConfig": s(json!({"DnsName": string, "DnsTreeName": string, "Guid": string,
            "MachineAccountName": string, "NetBiosName": string, "Sid": string})),
    }))}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gmsacredentialspecs.windows.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/tree/master/keps/sig-windows/689-windows-gmsa"}},
        "spec": {"group": "windows.k8s.io", "scope": "Cluster",
            "names": {"kind": "GMSACredentialSpec", "plural": "gmsacredentialspecs"},
            "conversion": {"strategy": "None"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "deprecated": true, "schema": {"openAPIV3Schema": schema}},
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}},
            ]}
    })
}

/// A credential spec's contents, as `New-CredentialSpec` writes them.
pub(crate) fn credspec(account: &str) -> Value {
    json!({
        "CmsPlugins": ["ActiveDirectory"],
        "DomainJoinConfig": {"DnsName": "example.org", "DnsTreeName": "example.org",
            "Guid": "00000000-0000-0000-0000-000000000001", "MachineAccountName": account,
            "NetBiosName": "EXAMPLE", "Sid": "S-1-5-21-1-2-3"},
        "ActiveDirectoryConfig": {"GroupManagedServiceAccounts": [
            {"Name": account, "Scope": "EXAMPLE"}, {"Name": account, "Scope": "example.org"}]},
    })
}

/// Go's `json.Marshal` of `credspec(account)`: sorted keys, compact.
pub(crate) fn canonical(account: &str) -> String {
    format!(
        r#"{{"ActiveDirectoryConfig":{{"GroupManagedServiceAccounts":[{{"Name":"{account}","Scope":"EXAMPLE"}},{{"Name":"{account}","Scope":"example.org"}}]}},"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{{"DnsName":"example.org","DnsTreeName":"example.org","Guid":"00000000-0000-0000-0000-000000000001","MachineAccountName":"{account}","NetBiosName":"EXAMPLE","Sid":"S-1-5-21-1-2-3"}}}}"#
    )
}

pub(crate) fn credential_spec(version: &str, name: &str, contents: Option<Value>) -> Value {
    let mut o = json!({"apiVersion": format!("windows.k8s.io/{version}"), "kind": "GMSACredentialSpec",
        "metadata": {"name": name}});
    if let Some(c) = contents {
        o["credspec"] = c;
    }
    o
}

struct Setup {
    cp: &'static ControlPlane,
    webhook: Webhook,
}

fn setup(test: &str) -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    let cp = controlplane::shared(test);
    SETUP.get_or_init(|| {
        cp.apply(&crd().to_string());
        cp.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd/gmsacredentialspecs.windows.k8s.io",
            "--timeout=60s",
        ]);
        let objects = e2e::rendered("gmsa");
        let rbac: Vec<Value> = objects
            .iter()
            .filter(|o| {
                matches!(
                    e2e::kind(o),
                    "Namespace" | "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding"
                )
            })
            .cloned()
            .collect();
        cp.apply(&e2e::to_list(&rbac));
        cp.apply(&e2e::to_list(&[
            credential_spec("v1", "webapp1", Some(credspec("webapp1"))),
            credential_spec("v1", "webapp2", Some(credspec("webapp2"))),
            credential_spec("v1", "no-contents", None),
            credential_spec(
                "v1",
                "hostagent",
                Some(json!({"CmsPlugins": ["ActiveDirectory"], "ActiveDirectoryConfig": {
                    "HostAccountConfig": {"PluginGUID": "{859E1386-BDB4-49E8-85C7-3070B13920E1}",
                        "PluginInput": "contoso.com:gmsaccg:<password>", "PortableCcgVersion": "1"}}})),
            ),
            // What a user grants (the upstream integration templates):
            // use on named credential specs, bound in the pod's namespace.
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "gmsa-e2e-users"},
                "rules": [{"apiGroups": ["windows.k8s.io"], "resources": ["gmsacredentialspecs"],
                    "verbs": ["use"], "resourceNames": ["webapp1", "webapp2", "hostagent", "no-contents", "i-sure-dont-exist", "late"]}]}),
        ]));
        cp.namespace(NS, &[("winadmit-e2e", "gmsa")]);
        cp.apply(&e2e::to_list(&[
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "allowed", "namespace": NS}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "denied", "namespace": NS}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "allowed-uses-gmsa", "namespace": NS},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gmsa-e2e-users"},
                "subjects": [{"kind": "ServiceAccount", "name": "allowed", "namespace": NS}]}),
        ]));
        let dir = tempfile::tempdir().unwrap().keep();
        let kubeconfig = cp.service_account_kubeconfig(&dir, "winadmit", "winadmit");
        let webhook = Webhook::start(
            &e2e::overlay_policy(&objects),
            &[
                "--cluster-cache",
                "on",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--gmsa",
                "auto",
                "--own-namespace",
                "winadmit",
            ],
        )
        .adopted_by(cp);
        webhook.wait_gmsa_on();
        cp.apply(&e2e::to_list(&e2e::registrations(&objects, "gmsa", &webhook)));
        e2e::wait_registered(cp, &webhook, NS, 2);
        Setup { cp, webhook }
    })
}

/// A Windows pod of `account` in [`NS`]: `options` on the pod (when not
/// null) and on the containers given (name, options).
fn gmsa_pod(name: &str, account: &str, pod: Value, containers: &[(&str, Value)]) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(n, o)| {
            let mut c = json!({"name": n, "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"});
            if !o.is_null() {
                c["securityContext"] = json!({"windowsOptions": o});
            }
            c
        })
        .collect();
    let mut spec = json!({"serviceAccountName": account,
        "nodeSelector": {"kubernetes.io/os": "windows"}, "containers": containers});
    if !pod.is_null() {
        spec["securityContext"] = json!({"windowsOptions": pod});
    }
    e2e::pod(NS, name, spec)
}

fn name(n: &str) -> Value {
    json!({"gmsaCredentialSpecName": n})
}

fn named(n: &str, contents: &str) -> Value {
    json!({"gmsaCredentialSpecName": n, "gmsaCredentialSpec": contents})
}

/// The API server refused `answer` through winadmit's validating webhooks
/// with `rule` and a message containing `text`. Both registrations judge a
/// pod that names a credential spec; the API server calls them at once and
/// answers with the refusal that came first.
#[track_caller]
fn assert_refused(answer: &Answer, rule: &str, text: &str) {
    let m = answer.message();
    assert!(
        !answer.ok()
            && (m.contains(r#"admission webhook "validate.winadmit.io" denied"#)
                || m.contains(r#"admission webhook "gmsa.winadmit.io" denied"#))
            && m.contains(rule)
            && m.contains(text),
        "expected a refusal by {rule} saying {text:?}, got {answer:?}"
    );
}

#[track_caller]
fn assert_admitted(answer: &Answer) {
    assert!(answer.ok(), "expected the pod admitted, got {answer:?}");
}

/// The `gmsaCredentialSpec` the API server stored at `pointer` (under
/// `spec`).
fn contents_at<'a>(answer: &'a Answer, pointer: &str) -> Option<&'a str> {
    answer
        .body
        .pointer(&format!(
            "/spec{pointer}/securityContext/windowsOptions/gmsaCredentialSpec"
        ))
        .and_then(Value::as_str)
}

/// V1, V2, M1, M2: no gMSA settings, or empty ones: allowed, nothing added.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn without_gmsa_settings_nothing_happens() {
    let s = setup("without_gmsa_settings_nothing_happens");
    for (n, options) in [("v1-empty", json!({})), ("v2-none", Value::Null)] {
        let a =
            s.cp.dry_run_create(&gmsa_pod(n, "denied", options.clone(), &[("web", options)]));
        assert_admitted(&a);
        assert_eq!(contents_at(&a, ""), None);
        assert_eq!(contents_at(&a, "/containers/0"), None);
    }
}

/// V3, V4, I4, M8: a name with its contents, byte for byte or as equal
/// JSON, is allowed and left as given, at pod and container level, with
/// other containers carrying settings of their own.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn matching_contents_are_allowed_and_kept() {
    let s = setup("matching_contents_are_allowed_and_kept");
    let reordered = serde_json::to_string_pretty(&credspec("webapp1")).unwrap();
    assert_ne!(reordered, canonical("webapp1"));
    for contents in [canonical("webapp1"), reordered] {
        let exact = named("webapp1", &contents);
        let other = named("webapp2", &canonical("webapp2"));
        let a = s.cp.dry_run_create(&gmsa_pod(
            "v3",
            "allowed",
            exact.clone(),
            &[("web", exact.clone()), ("other", other)],
        ));
        assert_admitted(&a);
        assert_eq!(
            contents_at(&a, ""),
            Some(contents.as_str()),
            "not overwritten"
        );
        assert_eq!(contents_at(&a, "/containers/0"), Some(contents.as_str()));
        assert_eq!(
            contents_at(&a, "/containers/1"),
            Some(canonical("webapp2").as_str())
        );
    }
}

/// V5, V6, I9: contents that are not the named resource's are refused.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn other_contents_are_refused() {
    let s = setup("other_contents_are_refused");
    for contents in [canonical("webapp2"), "i ain't no JSON object".to_owned()] {
        let wrong = named("webapp1", &contents);
        let a = s.cp.dry_run_create(&gmsa_pod(
            "v5-pod",
            "allowed",
            wrong.clone(),
            &[("web", Value::Null)],
        ));
        assert_refused(
            &a,
            "WIN-GMSA-CONTENTS-MISMATCH",
            r#"does not match the contents of GMSA resource "webapp1""#,
        );
        let a = s.cp.dry_run_create(&gmsa_pod(
            "v5-container",
            "allowed",
            Value::Null,
            &[("web", wrong)],
        ));
        assert_refused(
            &a,
            "WIN-GMSA-CONTENTS-MISMATCH",
            "spec.containers[0].securityContext.windowsOptions.gmsaCredentialSpec",
        );
    }
}

/// V7, I7, I8: contents without a name are refused.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn contents_without_a_name_are_refused() {
    let s = setup("contents_without_a_name_are_refused");
    let nameless = json!({"gmsaCredentialSpec": canonical("webapp1")});
    for pod in [
        gmsa_pod(
            "v7-pod",
            "allowed",
            nameless.clone(),
            &[("web", Value::Null)],
        ),
        gmsa_pod(
            "v7-container",
            "allowed",
            Value::Null,
            &[("web", nameless.clone())],
        ),
    ] {
        assert_refused(
            &s.cp.dry_run_create(&pod),
            "WIN-GMSA-CONTENTS-WITHOUT-NAME",
            "has a GMSA cred spec set, but does not define the name of the corresponding resource",
        );
    }
}

/// V8, I5, H2: a service account without `use` is refused, and the message
/// says what to grant.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_service_account_without_use_is_refused() {
    let s = setup("a_service_account_without_use_is_refused");
    let a = s.cp.dry_run_create(&gmsa_pod(
        "v8",
        "denied",
        Value::Null,
        &[("web", name("webapp1"))],
    ));
    assert_refused(
        &a,
        "WIN-GMSA-NOT-AUTHORIZED",
        r#"service account "denied" is not authorized to `use` GMSA cred spec "webapp1""#,
    );
    assert!(
        a.message().contains("RoleBinding in namespace gmsa-cases"),
        "{a:?}"
    );
    // The same pod as the granted account is admitted.
    assert_admitted(&s.cp.dry_run_create(&gmsa_pod(
        "v8-ok",
        "allowed",
        Value::Null,
        &[("web", name("webapp1"))],
    )));
}

/// V9, M9, I6: a credential spec that does not exist is refused; one
/// without contents too (upstream's 417).
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_missing_credential_spec_is_refused() {
    let s = setup("a_missing_credential_spec_is_refused");
    let a = s.cp.dry_run_create(&gmsa_pod(
        "i6",
        "allowed",
        Value::Null,
        &[("web", name("i-sure-dont-exist"))],
    ));
    assert_refused(
        &a,
        "WIN-GMSA-NOT-FOUND",
        "cred spec i-sure-dont-exist does not exist",
    );
    let a = s.cp.dry_run_create(&gmsa_pod(
        "no-contents",
        "allowed",
        name("no-contents"),
        &[("web", Value::Null)],
    ));
    assert_refused(&a, "WIN-GMSA-NO-CREDSPEC", "does not have a credspec key");
}

/// M7, H1, I1, I2, I3, I12: names only are filled in with the canonical
/// JSON, each from its own resource; a container without settings is left
/// alone; HTML characters are escaped as Go's json.Marshal does.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn names_are_filled_in_with_the_resources_contents() {
    let s = setup("names_are_filled_in_with_the_resources_contents");
    let a = s.cp.dry_run_create(&gmsa_pod(
        "i3",
        "allowed",
        name("webapp2"),
        &[
            ("nginx0", name("webapp1")),
            ("nginx1", Value::Null),
            ("nginx2", name("hostagent")),
        ],
    ));
    assert_admitted(&a);
    assert_eq!(contents_at(&a, ""), Some(canonical("webapp2").as_str()));
    assert_eq!(
        contents_at(&a, "/containers/0"),
        Some(canonical("webapp1").as_str())
    );
    assert_eq!(a.body.pointer("/spec/containers/1/securityContext"), None);
    let host = contents_at(&a, "/containers/2").unwrap();
    assert!(
        host.contains(r"contoso.com:gmsaccg:\u003cpassword\u003e"),
        "{host}"
    );
    assert!(
        host.starts_with(r#"{"ActiveDirectoryConfig":{"HostAccountConfig":{"PluginGUID""#),
        "{host}"
    );
}

/// I14, I15: a credential spec created at either version is read at both.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn credential_specs_are_served_at_both_versions() {
    let s = setup("credential_specs_are_served_at_both_versions");
    s.cp.apply(&credential_spec("v1alpha1", "legacy", Some(credspec("legacy"))).to_string());
    for version in ["v1alpha1", "v1"] {
        let o: Value = serde_json::from_str(&s.cp.kubectl_ok(&[
            "get",
            &format!("gmsacredentialspecs.{version}.windows.k8s.io"),
            "legacy",
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(o["credspec"], credspec("legacy"), "{version}");
    }
    // And winadmit reads it (at v1) for a pod (the account may not use
    // it: the refusal names it, so it was found).
    let a = s.cp.dry_run_create(&gmsa_pod(
        "i14",
        "allowed",
        name("legacy"),
        &[("web", Value::Null)],
    ));
    assert_refused(&a, "WIN-GMSA-NOT-AUTHORIZED", r#"GMSA cred spec "legacy""#);
}

/// U1-U6, I10, I11, I13: a pod's gMSA settings cannot change (refused:
/// the API server's own pod immutability answers before winadmit's
/// validating webhook); any other allowed change goes through.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn gmsa_settings_of_an_existing_pod_cannot_change() {
    let s = setup("gmsa_settings_of_an_existing_pod_cannot_change");
    let pod = gmsa_pod(
        "u-pod",
        "allowed",
        named("webapp1", &canonical("webapp1")),
        &[("web", name("webapp1"))],
    );
    let out = e2e::create(s.cp, &pod, false);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let stored: Value = serde_json::from_slice(&out.stdout).unwrap();
    let replace = |pod: &Value| {
        s.cp.kubectl_stdin(&["replace", "-f", "-"], &pod.to_string())
    };
    // I13: the image changes, the gMSA settings do not.
    let mut same = stored.clone();
    same["spec"]["containers"][0]["image"] =
        json!("mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2025");
    let out = replace(&same);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let current = s.cp.get("pods", NS, "u-pod");
    // U4-U6, I10, I11: name, contents, both.
    for change in [
        json!({"gmsaCredentialSpecName": "webapp2"}),
        json!({"gmsaCredentialSpec": canonical("webapp2")}),
        json!({"gmsaCredentialSpecName": "webapp2", "gmsaCredentialSpec": canonical("webapp2")}),
    ] {
        let mut changed = current.clone();
        for (k, v) in change.as_object().unwrap() {
            changed["spec"]["securityContext"]["windowsOptions"][k] = v.clone();
        }
        let out = replace(&changed);
        assert!(!out.status.success(), "the change {change} was accepted");
    }
}

/// Further than upstream: init containers are authorized, compared and
/// filled in like containers.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn init_containers_are_checked_and_filled_in() {
    let s = setup("init_containers_are_checked_and_filled_in");
    let with_init = |n: &str, account: &str, options: Value| {
        let mut pod = gmsa_pod(n, account, Value::Null, &[("web", Value::Null)]);
        pod["spec"]["initContainers"] = json!([{"name": "init",
            "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
            "securityContext": {"windowsOptions": options}}]);
        pod
    };
    let a =
        s.cp.dry_run_create(&with_init("init-denied", "denied", name("webapp1")));
    assert_refused(
        &a,
        "WIN-GMSA-NOT-AUTHORIZED",
        "spec.initContainers[0].securityContext.windowsOptions.gmsaCredentialSpecName",
    );
    let a = s.cp.dry_run_create(&with_init(
        "init-wrong",
        "allowed",
        named("webapp1", &canonical("webapp2")),
    ));
    assert_refused(&a, "WIN-GMSA-CONTENTS-MISMATCH", "spec.initContainers[0]");
    let a =
        s.cp.dry_run_create(&with_init("init-ok", "allowed", name("webapp1")));
    assert_admitted(&a);
    assert_eq!(
        contents_at(&a, "/initContainers/0"),
        Some(canonical("webapp1").as_str())
    );
}

/// Further than upstream: an ephemeral container added to a running pod
/// (`kubectl debug`'s subresource) is authorized as on CREATE.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn ephemeral_containers_are_authorized() {
    let s = setup("ephemeral_containers_are_authorized");
    for (pod_name, account) in [("eph-denied", "denied"), ("eph-allowed", "allowed")] {
        let out = e2e::create(
            s.cp,
            &gmsa_pod(pod_name, account, Value::Null, &[("web", Value::Null)]),
            false,
        );
        assert!(out.status.success(), "{}", e2e::stderr(&out));
        let patch = json!([{"op": "add", "path": "/spec/ephemeralContainers", "value": [{
            "name": "debug", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
            "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "webapp1",
                "gmsaCredentialSpec": canonical("webapp1")}}}]}]);
        let out = s.cp.kubectl(&[
            "patch",
            "pod",
            pod_name,
            "-n",
            NS,
            "--subresource=ephemeralcontainers",
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
        let err = e2e::stderr(&out);
        if account == "denied" {
            assert!(
                !out.status.success()
                    && err.contains("WIN-GMSA-NOT-AUTHORIZED")
                    && err.contains("spec.ephemeralContainers[0]"),
                "{err}\n{}",
                s.webhook.server.all_logs()
            );
        } else {
            assert!(out.status.success(), "{err}");
        }
    }
}

/// The cluster cache watches the credential specs: one created after the
/// webhook started is used as soon as the watch brings it.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_credential_spec_created_later_is_watched() {
    let s = setup("a_credential_spec_created_later_is_watched");
    let pod = gmsa_pod("late", "allowed", name("late"), &[("web", Value::Null)]);
    assert_refused(
        &s.cp.dry_run_create(&pod),
        "WIN-GMSA-NOT-FOUND",
        "cred spec late does not exist",
    );
    s.cp.apply(&credential_spec("v1", "late", Some(credspec("late"))).to_string());
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let a = s.cp.dry_run_create(&pod);
        if a.ok() || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_admitted(&answer);
    assert_eq!(contents_at(&answer, ""), Some(canonical("late").as_str()));
}

/// An authorization winadmit cannot ask (its ServiceAccount may not create
/// LocalSubjectAccessReviews) refuses the pod, as the upstream webhook
/// does: it is the security boundary. With the cache off, the credential
/// spec is read with a get.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn an_authorization_that_cannot_be_asked_refuses_the_pod() {
    const SA: &str = "winadmit-no-lsar";
    let s = setup("an_authorization_that_cannot_be_asked_refuses_the_pod");
    let mut objects = e2e::rendered("gmsa");
    let mut rbac = Vec::new();
    for o in &mut objects {
        let rename = |o: &mut Value| o["metadata"]["name"] = json!(SA);
        match e2e::kind(o) {
            "ServiceAccount" => rename(o),
            "ClusterRole" => {
                rename(o);
                o["rules"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|r| r["resources"] != json!(["localsubjectaccessreviews"]));
            }
            "ClusterRoleBinding" => {
                rename(o);
                o["roleRef"]["name"] = json!(SA);
                o["subjects"][0]["name"] = json!(SA);
            }
            _ => continue,
        }
        rbac.push(o.clone());
    }
    s.cp.apply(&e2e::to_list(&rbac));
    let ns = "gmsa-no-lsar";
    s.cp.namespace(ns, &[("winadmit-e2e", "gmsa-no-lsar")]);
    s.cp.apply(&e2e::to_list(&[
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "allowed", "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "allowed-uses-gmsa", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gmsa-e2e-users"},
            "subjects": [{"kind": "ServiceAccount", "name": "allowed", "namespace": ns}]}),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = s.cp.service_account_kubeconfig(dir.path(), "winadmit", SA);
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "off",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--gmsa",
            "on",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    s.cp.apply(&e2e::to_list(&e2e::registrations(
        &objects,
        "gmsa-no-lsar",
        &webhook,
    )));
    e2e::wait_registered(s.cp, &webhook, ns, 2);
    let mut pod = gmsa_pod(
        "no-lsar",
        "allowed",
        name("webapp1"),
        &[("web", Value::Null)],
    );
    pod["metadata"]["namespace"] = json!(ns);
    let a = s.cp.dry_run_create(&pod);
    assert_refused(
        &a,
        "WIN-GMSA-NOT-AUTHORIZED",
        "error when checking authz access",
    );
    // The log line may trail the answer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !webhook
        .server
        .logs_contain("cannot create a localsubjectaccessreviews")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        webhook
            .server
            .logs_contain("cannot create a localsubjectaccessreviews"),
        "{}",
        webhook.server.all_logs()
    );
    // The credential spec was read with a get: /mutate filled it in.
    assert!(
        a.warnings.iter().any(|w| w.contains("WIN-GMSA-INLINE")),
        "{a:?}"
    );
    // Counted: the failed review, the get.
    let (_, m) = http(
        webhook.server.metrics_addr.expect("metrics listener"),
        "GET",
        "/metrics",
        "",
    );
    assert!(
        metric(
            &m,
            "winadmit_gmsa_local_subject_access_reviews_total{result=\"error\"}"
        ) >= 1.0,
        "{m}"
    );
    assert!(
        metric(
            &m,
            "winadmit_gmsa_credential_spec_gets_total{result=\"found\"}"
        ) >= 1.0,
        "{m}"
    );
    for config in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        s.cp.kubectl_ok(&["delete", config, "winadmit-gmsa-no-lsar"]);
    }
}

/// The namespace of the report cases: no webhook registration selects it,
/// so its Deployments are stored as given.
const REPORT_NS: &str = "gmsa-report";

/// Deployments in [`REPORT_NS`] naming credential specs: (name, service
/// account, credential spec).
const REPORTED: &[(&str, &str, &str)] = &[
    ("d-allowed", "allowed", "webapp1"),
    ("d-denied", "denied", "webapp1"),
    ("d-missing", "allowed", "i-sure-dont-exist"),
];

fn report_setup(s: &Setup) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        s.cp.namespace(REPORT_NS, &[]);
        let mut objects = vec![
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "allowed", "namespace": REPORT_NS}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "denied", "namespace": REPORT_NS}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "allowed-uses-gmsa", "namespace": REPORT_NS},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gmsa-e2e-users"},
                "subjects": [{"kind": "ServiceAccount", "name": "allowed", "namespace": REPORT_NS}]}),
        ];
        for (name, account, spec) in REPORTED {
            objects.push(deployment(name, account, spec));
        }
        s.cp.apply(&e2e::to_list(&objects));
    });
}

fn deployment(name: &str, account: &str, spec: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": REPORT_NS},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "serviceAccountName": account,
                "nodeSelector": {"kubernetes.io/os": "windows"},
                "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": spec}},
                "containers": [{"name": "web", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}]}}}})
}

/// The gMSA rules of each object of a JSON report: name -> rule ids.
fn gmsa_rules(report: &Value) -> std::collections::BTreeMap<String, Vec<String>> {
    report["objects"]
        .as_array()
        .unwrap_or_else(|| panic!("no objects: {report:#}"))
        .iter()
        .map(|o| {
            let mut rules: Vec<String> = o["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f["rule"].as_str())
                .filter(|r| r.starts_with("WIN-GMSA"))
                .map(str::to_owned)
                .collect();
            rules.sort();
            rules.dedup();
            (o["name"].as_str().unwrap().to_owned(), rules)
        })
        .collect()
}

fn live_report(kubeconfig: &std::path::Path) -> (Value, String) {
    let out = binary::winadmit(&[
        "report",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "-n",
        REPORT_NS,
        "--format",
        "json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "winadmit report: {err}"
    );
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

/// The live report reads the cluster's GMSACredentialSpecs and asks a
/// SubjectAccessReview for each pod's service account: the same verdicts
/// as the webhook's (not authorized, not found).
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_live_report_checks_credential_specs_and_who_may_use_them() {
    let s = setup("the_live_report_checks_credential_specs_and_who_may_use_them");
    report_setup(s);
    let (report, err) = live_report(&s.cp.kubeconfig);
    let rules = gmsa_rules(&report);
    let want = |r: &[&str]| r.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(rules["d-allowed"], want(&[]), "{err}");
    assert_eq!(
        rules["d-denied"],
        want(&["WIN-GMSA-NOT-AUTHORIZED"]),
        "{err}"
    );
    assert_eq!(rules["d-missing"], want(&["WIN-GMSA-NOT-FOUND"]), "{err}");
    let denied = report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "d-denied")
        .unwrap();
    let message = denied["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "WIN-GMSA-NOT-AUTHORIZED")
        .unwrap()["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains(
            r#"service account "denied" is not authorized to `use` GMSA cred spec "webapp1""#
        ),
        "{message}"
    );
}

/// An identity that may list but not create SubjectAccessReviews: the
/// authorization is reported unknown (WIN-GMSA-AUTHZ-UNKNOWN), never as a
/// refusal; credential specs are still checked.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_live_report_says_unknown_when_it_may_not_ask() {
    const SA: &str = "gmsa-reader";
    let s = setup("the_live_report_says_unknown_when_it_may_not_ask");
    report_setup(s);
    s.cp.apply(&e2e::to_list(&[
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": "winadmit"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": SA},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": SA},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SA},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": "winadmit"}]}),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = s.cp.service_account_kubeconfig(dir.path(), "winadmit", SA);
    let (report, err) = live_report(&kubeconfig);
    let rules = gmsa_rules(&report);
    let want = |r: &[&str]| r.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    for name in ["d-allowed", "d-denied"] {
        assert_eq!(
            rules[name],
            want(&["WIN-GMSA-AUTHZ-UNKNOWN"]),
            "{name}: {err}"
        );
    }
    assert_eq!(
        rules["d-missing"],
        want(&["WIN-GMSA-AUTHZ-UNKNOWN", "WIN-GMSA-NOT-FOUND"]),
        "{err}"
    );
    assert!(
        err.contains("may not create subjectaccessreviews.authorization.k8s.io"),
        "{err}"
    );
}

/// A plain HTTP request to `addr`; (status, body).
fn http(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).unwrap();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    // Chunked answers: the JSON is between the chunk sizes; enough for
    // `contains` and for the metrics' lines.
    (status, body.to_owned())
}

/// The value of the metric sample `line_start` (name and labels), 0 when
/// absent.
fn metric(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `serve --gmsa auto` with the cluster cache: `/readyz` answers 200 only
/// once gMSA is decided and the credential specs are listed, so the first
/// `/report` after it already knows them from the watch (no get); and
/// `/report` resolves gMSA as `/validate` does, LocalSubjectAccessReviews
/// counted in the metrics (made, cached, by result).
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn report_endpoint_readiness_and_metrics_follow_gmsa() {
    let s = setup("report_endpoint_readiness_and_metrics_follow_gmsa");
    let objects = e2e::rendered("gmsa");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig =
        s.cp.service_account_kubeconfig(dir.path(), "winadmit", "winadmit");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "on",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--gmsa",
            "auto",
            "--metrics-listen",
            "127.0.0.1:0",
            "--report",
            "metrics",
        ],
    );
    let addr = webhook.server.metrics_addr.expect("metrics listener");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http(addr, "GET", "/readyz", "");
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            Instant::now() < deadline,
            "never ready: {body}\n{}",
            webhook.server.all_logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pods = |specs: &[(&str, &str, &str)]| {
        let items: Vec<Value> = specs
            .iter()
            .map(|(n, account, spec)| gmsa_pod(n, account, name(spec), &[("web", Value::Null)]))
            .collect();
        json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
    };
    let (status, body) = http(
        addr,
        "POST",
        "/report",
        &pods(&[
            ("r-allowed", "allowed", "webapp1"),
            ("r-denied", "denied", "webapp1"),
            ("r-missing", "allowed", "i-sure-dont-exist"),
        ]),
    );
    assert_eq!(status, 200, "{body}");
    for (name, rule) in [
        ("r-denied", "WIN-GMSA-NOT-AUTHORIZED"),
        ("r-missing", "WIN-GMSA-NOT-FOUND"),
    ] {
        assert!(body.contains(rule), "{name}: {rule} missing from {body}");
    }
    assert!(!body.contains("WIN-GMSA-AUTHZ-UNKNOWN"), "{body}");
    let (_, m) = http(addr, "GET", "/metrics", "");
    // Ready meant listed: every credential spec came from the watch.
    for result in ["found", "not_found", "error"] {
        assert_eq!(
            metric(
                &m,
                &format!("winadmit_gmsa_credential_spec_gets_total{{result=\"{result}\"}}")
            ),
            0.0,
            "{m}"
        );
    }
    let reviews = |result: &str| {
        metric(
            &m,
            &format!("winadmit_gmsa_local_subject_access_reviews_total{{result=\"{result}\"}}"),
        )
    };
    // One per distinct (namespace, service account, name).
    assert_eq!(reviews("allowed"), 2.0, "{m}");
    assert_eq!(reviews("denied"), 1.0, "{m}");
    assert_eq!(reviews("error"), 0.0, "{m}");
    let hits = metric(
        &m,
        "winadmit_gmsa_local_subject_access_review_cache_hits_total",
    );
    // The same pods again: answers from the cache (kept 10 s; a slow
    // machine may have let some expire, so at least one of the three).
    http(
        addr,
        "POST",
        "/report",
        &pods(&[
            ("r-allowed", "allowed", "webapp1"),
            ("r-denied", "denied", "webapp1"),
            ("r-missing", "allowed", "i-sure-dont-exist"),
        ]),
    );
    let (_, m) = http(addr, "GET", "/metrics", "");
    let hits_after = metric(
        &m,
        "winadmit_gmsa_local_subject_access_review_cache_hits_total",
    );
    let made_after = metric(
        &m,
        "winadmit_gmsa_local_subject_access_reviews_total{result=\"allowed\"}",
    ) + metric(
        &m,
        "winadmit_gmsa_local_subject_access_reviews_total{result=\"denied\"}",
    );
    assert_eq!(hits_after - hits + made_after - 3.0, 3.0, "{m}");
}

/// `/readyz` waits for the credential specs' first list, not only for the
/// cluster cache's other resources: an identity that may not list
/// `gmsacredentialspecs` keeps the server unready after the rest is listed,
/// until `--cluster-cache-sync-timeout`, which it then says.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn readiness_waits_for_the_credential_specs_list() {
    const SA: &str = "winadmit-no-gmsa-list";
    let s = setup("readiness_waits_for_the_credential_specs_list");
    let objects = e2e::rendered("gmsa");
    let mut rbac = Vec::new();
    for o in &objects {
        let mut o = o.clone();
        let rename = |o: &mut Value| o["metadata"]["name"] = json!(SA);
        match e2e::kind(&o) {
            "ServiceAccount" => rename(&mut o),
            "ClusterRole" => {
                rename(&mut o);
                o["rules"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|r| r["resources"] != json!(["gmsacredentialspecs"]));
            }
            "ClusterRoleBinding" => {
                rename(&mut o);
                o["roleRef"]["name"] = json!(SA);
                o["subjects"][0]["name"] = json!(SA);
            }
            _ => continue,
        }
        rbac.push(o);
    }
    s.cp.apply(&e2e::to_list(&rbac));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = s.cp.service_account_kubeconfig(dir.path(), "winadmit", SA);
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "on",
            "--cluster-cache-sync-timeout",
            "15s",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--gmsa",
            "auto",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let addr = webhook.server.metrics_addr.expect("metrics listener");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(webhook
        .server
        .logs_contain("cluster cache: first list complete")
        && webhook.server.logs_contain("gmsa: on (--gmsa auto)"))
    {
        assert!(
            Instant::now() < deadline,
            "the cluster cache never listed: {}",
            webhook.server.all_logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The other resources are listed; the credential specs cannot be.
    let (status, body) = http(addr, "GET", "/readyz", "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("--gmsa"), "{body}");
    // Bounded: ready once the sync timeout has passed, saying why.
    loop {
        let (status, body) = http(addr, "GET", "/readyz", "");
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never ready: {body}\n{}",
            webhook.server.all_logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = Instant::now() + Duration::from_secs(10);
    while !webhook
        .server
        .logs_contain("gmsacredentialspecs.windows.k8s.io not listed within")
    {
        assert!(Instant::now() < said, "{}", webhook.server.all_logs());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Hardening IV, 1: no `winadmit.io/skip.*` annotation opens the gMSA
/// boundary: not on a CREATE, not added to a running pod before an
/// ephemeral container, not on a Deployment's pod template. The denial
/// does not offer the annotation.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn skip_annotations_never_open_the_gmsa_boundary() {
    let s = setup("skip_annotations_never_open_the_gmsa_boundary");
    let skips = json!({
        "winadmit.io/skip.WIN-GMSA-NOT-AUTHORIZED": "x",
        "winadmit.io/skip.WIN-GMSA-CONTENTS-WITHOUT-NAME": "x",
        "winadmit.io/skip.WIN-GMSA-CONTENTS-MISMATCH": "x",
        "winadmit.io/skip.WIN-GMSA-NOT-FOUND": "x",
    });
    // CREATE: an unauthorized name, inline contents without a name, and
    // another identity's contents under an authorized name.
    for (pod_name, account, options, rule) in [
        (
            "skip-authz",
            "denied",
            name("webapp1"),
            "WIN-GMSA-NOT-AUTHORIZED",
        ),
        (
            "skip-noname",
            "allowed",
            json!({"gmsaCredentialSpec": canonical("webapp2")}),
            "WIN-GMSA-CONTENTS-WITHOUT-NAME",
        ),
        (
            "skip-mismatch",
            "allowed",
            named("webapp1", &canonical("webapp2")),
            "WIN-GMSA-CONTENTS-MISMATCH",
        ),
    ] {
        let mut pod = gmsa_pod(pod_name, account, options, &[("web", Value::Null)]);
        pod["metadata"]["annotations"] = skips.clone();
        let a = s.cp.dry_run_create(&pod);
        assert_refused(&a, rule, "");
        assert!(!a.message().contains("to opt out"), "{a:?}");
    }
    // UPDATE: the annotation added to a running pod, then an ephemeral
    // container naming a credential spec its account may not use.
    let out = e2e::create(
        s.cp,
        &gmsa_pod("skip-later", "denied", Value::Null, &[("web", Value::Null)]),
        false,
    );
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    s.cp.kubectl_ok(&[
        "annotate",
        "pod",
        "skip-later",
        "-n",
        NS,
        "winadmit.io/skip.WIN-GMSA-NOT-AUTHORIZED=laundered",
    ]);
    let patch = json!([{"op": "add", "path": "/spec/ephemeralContainers", "value": [{
        "name": "debug", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
        "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "webapp1"}}}]}]);
    let out = s.cp.kubectl(&[
        "patch",
        "pod",
        "skip-later",
        "-n",
        NS,
        "--subresource=ephemeralcontainers",
        "--type=json",
        "-p",
        &patch.to_string(),
    ]);
    let err = e2e::stderr(&out);
    assert!(
        !out.status.success() && err.contains("WIN-GMSA-NOT-AUTHORIZED"),
        "{err}\n{}",
        s.webhook.server.all_logs()
    );
    // A Deployment's pod template.
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "skip-template", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "skip-template"}},
            "template": {"metadata": {"labels": {"app": "skip-template"}, "annotations": skips}, "spec": {
                "serviceAccountName": "denied",
                "nodeSelector": {"kubernetes.io/os": "windows"},
                "securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "webapp1"}},
                "containers": [{"name": "web", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}]}}}});
    assert_refused(&s.cp.dry_run_create(&d), "WIN-GMSA-NOT-AUTHORIZED", "");
    d["spec"]["template"]["spec"]["serviceAccountName"] = json!("allowed");
    assert_admitted(&s.cp.dry_run_create(&d));
}

/// Hardening IV, 2: a namespace in `audit` or `warn` mode (the
/// `winadmit.io/mode` label) still refuses an unauthorized gMSA pod, while
/// its other findings are only audited or warned about.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn audit_and_warn_modes_still_refuse_an_unauthorized_gmsa_pod() {
    let s = setup("audit_and_warn_modes_still_refuse_an_unauthorized_gmsa_pod");
    for mode in ["audit", "warn"] {
        let ns = format!("gmsa-mode-{mode}");
        s.cp.namespace(&ns, &[("winadmit-e2e", "gmsa"), ("winadmit.io/mode", mode)]);
        s.cp.apply(&e2e::to_list(&[
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "denied", "namespace": ns}}),
        ]));
        let windows = |name: &str, spec: Value| {
            let mut spec = spec;
            spec["serviceAccountName"] = json!("denied");
            spec["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
            spec["containers"] = json!([{"name": "web", "image": "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}]);
            e2e::pod(&ns, name, spec)
        };
        // The mode is in force once a hostNetwork Windows pod (an error
        // finding) is admitted there.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let a =
                s.cp.dry_run_create(&windows("hostnet", json!({"hostNetwork": true})));
            if a.ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{mode} mode never applied: {a:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let a = s.cp.dry_run_create(&windows(
            "gmsa",
            json!({"securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "webapp1"}}}),
        ));
        assert!(
            !a.ok() && a.message().contains("WIN-GMSA-NOT-AUTHORIZED"),
            "{mode}: {a:?}"
        );
    }
}

/// A PolicyException in winadmit's namespace naming a gMSA rule does not
/// open the boundary when the policy does not name the rule
/// (`exceptions.boundaryRules`): it covers the pod's other rule
/// (WIN-HOSTNETWORK, gone from the denial once the webhook has the
/// exception) while WIN-GMSA-NOT-AUTHORIZED still denies.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn a_policy_exception_does_not_open_the_gmsa_boundary() {
    let s = setup("a_policy_exception_does_not_open_the_gmsa_boundary");
    let crd: Vec<Value> = e2e::rendered("gmsa")
        .into_iter()
        .filter(|o| e2e::kind(o) == "CustomResourceDefinition")
        .collect();
    assert_eq!(crd.len(), 1, "the install's PolicyException CRD");
    s.cp.apply(&e2e::to_list(&crd));
    s.cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/policyexceptions.winadmit.io",
        "--timeout=60s",
    ]);
    let now = winadmit::entry::exceptions::clock();
    let expires =
        winadmit::decision::exceptions::Timestamp(now.0 + winadmit::decision::exceptions::DAY);
    let exception = json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": "gmsa-migration", "namespace": "winadmit"},
        "spec": {"rules": ["WIN-GMSA-NOT-AUTHORIZED", "WIN-HOSTNETWORK"], "match": {"names": ["v8x-*"]},
            "reason": "migration", "expiresAt": expires.to_string()}});
    let mut pod = gmsa_pod("v8x-1", "denied", Value::Null, &[("web", name("webapp1"))]);
    pod["spec"]["hostNetwork"] = json!(true);
    // The main webhook's denial names both rules before the exception.
    let by_validate = |a: &Answer| {
        a.message()
            .contains(r#"admission webhook "validate.winadmit.io" denied"#)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = s.cp.dry_run_create(&pod);
        if by_validate(&a) {
            assert!(a.message().contains("WIN-HOSTNETWORK"), "{a:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no denial by validate.winadmit.io: {a:?}"
        );
    }
    s.cp.apply(&exception.to_string());
    // The watch may be in its backoff from before the CRD: 60 s at most.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let a = s.cp.dry_run_create(&pod);
        assert_refused(&a, "WIN-GMSA-NOT-AUTHORIZED", "is not authorized to `use`");
        if by_validate(&a) && !a.message().contains("WIN-HOSTNETWORK") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the exception never covered WIN-HOSTNETWORK: {a:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
