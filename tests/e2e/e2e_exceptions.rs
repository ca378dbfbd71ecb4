//! PolicyExceptions through a real kube-apiserver v1.37, installed as the
//! kustomize base installs them (the CRD, the lifetime
//! ValidatingAdmissionPolicy, the webhook's RBAC): a pod denied without an
//! exception is admitted with one (the warning names it), the same
//! exception in a namespace the policy does not list changes nothing, an
//! exception that ends stops counting within a measured bound without a
//! restart, and the API server itself refuses an exception without a
//! reason, without an end date or beyond its lifetime, with no winadmit
//! running.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::controlplane::{self, Answer, ControlPlane};
use crate::e2e::{self, Webhook, pod};
use winadmit::decision::exceptions::{DAY, Timestamp};

const LABEL: (&str, &str) = ("winadmit-e2e", "exceptions");

/// The base's CRD, lifetime policy and RBAC applied, and the CRD served.
fn install(cp: &ControlPlane) -> Vec<Value> {
    let objects = e2e::rendered("base");
    let wanted: Vec<Value> = objects
        .iter()
        .filter(|o| {
            matches!(
                e2e::kind(o),
                "Namespace"
                    | "ServiceAccount"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "CustomResourceDefinition"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            )
        })
        .cloned()
        .collect();
    assert_eq!(wanted.len(), 7, "the base's RBAC and exception objects");
    cp.apply(&e2e::to_list(&wanted));
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/policyexceptions.winadmit.io",
    ]);
    objects
}

fn exception(ns: &str, name: &str, names: &str, expires: Timestamp) -> Value {
    json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"rules": ["WIN-HOSTNETWORK"], "match": {"namespaces": ["exc-web"], "names": [names]},
            "reason": "the legacy agent listens on the node", "ticket": "OPS-1",
            "expiresAt": expires.to_string()}})
}

fn create(cp: &ControlPlane, object: &Value) -> std::process::Output {
    cp.kubectl_stdin(&["create", "-f", "-"], &object.to_string())
}

fn now() -> Timestamp {
    winadmit::entry::exceptions::clock()
}

/// Retries `obj` until `done` holds (30 s at most); the answer and when.
fn until(
    cp: &ControlPlane,
    obj: &Value,
    what: &str,
    done: impl Fn(&Answer) -> bool,
) -> (Answer, Instant) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = cp.dry_run_create(obj);
        if done(&answer) {
            return (answer, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {answer:?} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn denied(a: &Answer) -> bool {
    !a.ok() && a.message().contains("WIN-HOSTNETWORK")
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn an_exception_admits_a_denied_pod_only_from_a_listed_namespace_and_until_it_ends() {
    let cp = controlplane::shared("an_exception_admits_a_denied_pod");
    let objects = install(cp);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = cp.service_account_kubeconfig(dir.path(), "winadmit", "winadmit");
    let webhook = Webhook::start(
        &e2e::overlay_policy(&objects),
        &[
            "--cluster-cache",
            "on",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--own-namespace",
            "winadmit",
        ],
    )
    .adopted_by(cp);
    cp.apply(&e2e::to_list(&e2e::registrations(
        &objects, LABEL.1, &webhook,
    )));
    cp.namespace("exc-web", &[LABEL]);
    e2e::wait_registered(cp, &webhook, "exc-web", 2);
    let spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true});
    let web = pod("exc-web", "web-1", spec.clone());
    until(cp, &web, "denied without an exception", denied);

    // In the pod's own namespace (not listed): nothing changes.
    let out = create(
        cp,
        &exception("exc-web", "legacy-web", "web-*", Timestamp(now().0 + DAY)),
    );
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        denied(&cp.dry_run_create(&web)),
        "an exception in exc-web counted"
    );

    // In winadmit's namespace: admitted, with the warning naming it.
    let granted = exception("winadmit", "legacy-web", "web-*", Timestamp(now().0 + DAY));
    let out = create(cp, &granted);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let created = Instant::now();
    let (answer, admitted) = until(cp, &web, "admitted with the exception", Answer::ok);
    eprintln!("exception created -> honoured: {:?}", admitted - created);
    assert!(
        answer.warnings.iter().any(|w| w
            .contains("WIN-HOSTNETWORK excepted by PolicyException winadmit/legacy-web until ")),
        "{answer:?}"
    );
    assert!(
        admitted - created < Duration::from_secs(5),
        "took {:?}",
        admitted - created
    );

    // Deleted: denied again.
    cp.kubectl_ok(&["delete", "policyexception", "-n", "winadmit", "legacy-web"]);
    let deleted = Instant::now();
    let (_, again) = until(cp, &web, "denied once deleted", denied);
    eprintln!(
        "exception deleted -> no longer honoured: {:?}",
        again - deleted
    );
    assert!(
        again - deleted < Duration::from_secs(5),
        "took {:?}",
        again - deleted
    );

    // Ending during the test: no event, no restart.
    let ends = Timestamp(now().0 + 6);
    let out = create(cp, &exception("winadmit", "ends-soon", "end-*", ends));
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let ending = pod("exc-web", "end-1", spec);
    until(cp, &ending, "admitted before the end", Answer::ok);
    let (_, at) = until(cp, &ending, "denied once ended", denied);
    let after = now().0 - ends.0;
    eprintln!(
        "exception ended -> no longer honoured within {after} s of its end date (whole seconds)"
    );
    assert!(after <= 2, "honoured {after} s past its end date");
    let _ = at;
}

#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn the_api_server_refuses_exceptions_without_reason_end_date_or_beyond_the_lifetime() {
    // No winadmit runs here: the CRD's schema and the admission policy
    // are the API server's own.
    let cp = controlplane::shared("the_api_server_refuses_exceptions");
    install(cp);
    let good = exception(
        "winadmit",
        "checked",
        "unrelated-*",
        Timestamp(now().0 + DAY),
    );
    let mut no_reason = good.clone();
    no_reason["metadata"]["name"] = json!("no-reason");
    no_reason["spec"].as_object_mut().unwrap().remove("reason");
    let mut empty_reason = good.clone();
    empty_reason["metadata"]["name"] = json!("empty-reason");
    empty_reason["spec"]["reason"] = json!("");
    let mut no_end = good.clone();
    no_end["metadata"]["name"] = json!("no-end");
    no_end["spec"].as_object_mut().unwrap().remove("expiresAt");
    for (what, o, says) in [
        ("no reason", &no_reason, "spec.reason: Required value"),
        ("empty reason", &empty_reason, "spec.reason"),
        ("no end date", &no_end, "spec.expiresAt: Required value"),
    ] {
        let out = create(cp, o);
        assert!(!out.status.success(), "{what}: created");
        let err = e2e::stderr(&out);
        assert!(err.contains(says), "{what}: {err}");
    }
    // Beyond creation plus 90 days: the admission policy refuses it, on
    // CREATE (retried while the policy becomes effective) and on UPDATE.
    let mut long = good.clone();
    long["metadata"]["name"] = json!("too-long");
    long["spec"]["expiresAt"] = json!(Timestamp(now().0 + 91 * DAY).to_string());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = create(cp, &long);
        if !out.status.success() {
            let err = e2e::stderr(&out);
            assert!(err.contains("winadmit-exception-lifetime"), "{err}");
            assert!(
                err.contains("plus the longest lifetime of an exception (90 days)"),
                "{err}"
            );
            break;
        }
        cp.kubectl_ok(&["delete", "policyexception", "-n", "winadmit", "too-long"]);
        assert!(
            Instant::now() < deadline,
            "the lifetime policy never took effect"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = create(cp, &good);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let patch =
        json!({"spec": {"expiresAt": Timestamp(now().0 + 91 * DAY).to_string()}}).to_string();
    let out = cp.kubectl(&[
        "patch",
        "policyexception",
        "-n",
        "winadmit",
        "checked",
        "--type=merge",
        "-p",
        &patch,
    ]);
    assert!(
        !out.status.success(),
        "an UPDATE moved the end date past the lifetime"
    );
    assert!(
        e2e::stderr(&out).contains("winadmit-exception-lifetime"),
        "{}",
        e2e::stderr(&out)
    );
}
