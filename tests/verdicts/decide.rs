//! One decision for every entry point: the report previews the settled
//! patch `/mutate` returns and the verdict after it; the webhook's reach
//! (excluded namespaces, the opt-out label) is policy data every entry point
//! honours.

use serde::Deserialize as _;
use serde_json::{Value, json};
use winadmit::entry::admission::{Admission, Endpoint, review};

use crate::admission as admission_review;
use admission_review::{admission_review, patch_ops, webhook};
use winadmit::decision::engine::Context;
use winadmit::decision::policy::Policy;
use winadmit::entry::report::body::report_body;
use winadmit::render::report::ReportOptions;

fn pod(namespace: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace}, "spec": spec})
}

fn mutate_patch(policy: &Policy, object: &Value) -> Vec<Value> {
    patch_ops(&webhook(policy, Endpoint::Mutate, object))
}

fn report(policy: &Policy, object: &Value) -> Value {
    let body = serde_json::to_vec(object).unwrap();
    let options = ReportOptions {
        patched_objects: true,
        ..ReportOptions::default()
    };
    let out = report_body(
        policy,
        &Context::default(),
        &options,
        "application/json",
        &body,
    )
    .unwrap();
    serde_json::to_value(&out).unwrap()["objects"][0].clone()
}

#[test]
fn the_report_previews_the_settled_patch_mutate_returns() {
    let policy = Policy::from_yaml("p.yaml", "mutation: {setOsName: true}\n").unwrap();
    let object = pod(
        "web",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"},
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "securityContext": {"allowPrivilegeEscalation": false},
                "resources": {"limits": {"memory": "1Gi"}}}]}),
    );
    let patch = mutate_patch(&policy, &object);
    assert_eq!(
        patch.len(),
        2,
        "spec.os and the field it forbids: {patch:?}"
    );
    let r = report(&policy, &object);
    let previewed: Vec<Value> = r["patch"].as_array().unwrap().clone();
    assert_eq!(previewed, patch, "the report shows what /mutate returns");
    // The previewed object is one the API server accepts: no forbidden field.
    let patched = &r["patchedObject"];
    assert_eq!(patched["spec"]["os"]["name"], "windows", "{r:#}");
    assert!(
        patched["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"].is_null(),
        "{r:#}"
    );
}

#[test]
fn the_reports_verdict_is_the_one_after_the_patch() {
    // Errors the patch removes (fields the API server forbids with
    // spec.os.name: windows, which have no effect) do not deny.
    let object = pod(
        "web",
        json!({"os": {"name": "windows"},
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "securityContext": {"privileged": false, "seccompProfile": {"type": "RuntimeDefault"}},
                "resources": {"limits": {"memory": "1Gi"}}}]}),
    );
    let policy = Policy::default_policy();
    assert_eq!(
        webhook(&policy, Endpoint::Validate, &object)["allowed"],
        false,
        "as written, the object has errors"
    );
    let r = report(&policy, &object);
    assert!(!r["patch"].as_array().unwrap().is_empty(), "{r:#}");
    assert_eq!(r["verdict"], "warn", "{r:#}");
    // /validate on the patched object allows it.
    let patched = r["patchedObject"].clone();
    assert_eq!(
        webhook(&policy, Endpoint::Validate, &patched)["allowed"],
        true
    );
}

#[test]
fn namespaces_outside_the_webhooks_reach_are_exempt_from_admission() {
    let broken = json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true,
        "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022"}]});
    let policy = Policy::default_policy();
    // No built-in policy names winadmit's own namespace: a tenant who
    // creates a namespace called `winadmit` is checked like any other
    // (the server learns its own namespace from `--own-namespace`).
    assert_eq!(
        webhook(
            &policy,
            Endpoint::Validate,
            &pod("winadmit", broken.clone())
        )["allowed"],
        false
    );
    {
        let ns = "kube-system";
        let object = pod(ns, broken.clone());
        // report: admission never sees it, so it is allowed and says why;
        // the findings stay for the operator to read.
        let r = report(&policy, &object);
        assert_eq!(r["verdict"], "allow", "{ns}: {r:#}");
        assert!(r["exempt"].as_str().unwrap().contains(ns), "{r:#}");
        assert!(!r["findings"].as_array().unwrap().is_empty(), "{r:#}");
        assert!(r["patch"].as_array().unwrap().is_empty(), "{r:#}");
        // The webhook, if it is called anyway, allows it.
        assert_eq!(
            webhook(&policy, Endpoint::Validate, &object)["allowed"],
            true
        );
        // lint checks the manifest: broken is broken wherever it goes.
        let view = winadmit::decision::view::ObjectView::deserialize(&object).unwrap();
        let w = winadmit::decision::workload::Workload::from_view(&view).unwrap();
        let eval = winadmit::decision::engine::evaluate(&policy, &w, &Context::default());
        assert!(eval.has_errors(), "{ns}");
    }
    // A namespace labelled with the opt-out label, known from the input.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "legacy", "labels": {"winadmit.io/ignore": "true"}}});
    let list =
        json!({"apiVersion": "v1", "kind": "List", "items": [ns, pod("legacy", broken.clone())]});
    let body = serde_json::to_vec(&list).unwrap();
    let out = report_body(
        &policy,
        &Context::default(),
        &ReportOptions::default(),
        "application/json",
        &body,
    )
    .unwrap();
    let v: Value = serde_json::to_value(&out).unwrap();
    let o = &v["objects"][0];
    assert_eq!(o["verdict"], "allow", "{o:#}");
    assert!(
        o["exempt"].as_str().unwrap().contains("winadmit.io/ignore"),
        "{o:#}"
    );
    // Elsewhere the same pod is denied.
    assert_eq!(report(&policy, &pod("shop", broken))["verdict"], "deny");
}

#[test]
fn report_reads_admission_reviews_with_the_webhooks_decoder() {
    let object = pod(
        "web",
        json!({"containers": [{"name": "c", "image": "nginx"}]}),
    );
    let mut body: Value = serde_json::from_slice(&admission_review(&object)).unwrap();
    let decode = |review: &Value| {
        report_body(
            &Policy::default_policy(),
            &Context::default(),
            &ReportOptions::default(),
            "application/json",
            &serde_json::to_vec(review).unwrap(),
        )
    };
    assert!(decode(&body).is_ok());
    // What /validate refuses, /report refuses, with the same words.
    body["apiVersion"] = json!("admission.k8s.io/v2");
    let err = decode(&body).unwrap_err().to_string();
    let adm = Admission {
        policy: Policy::default_policy(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    };
    let webhook_err = review(
        &adm,
        Endpoint::Validate,
        &serde_json::to_vec(&body).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains(&webhook_err), "{err} / {webhook_err}");
    body["apiVersion"] = json!("admission.k8s.io/v1");
    body["request"]["uid"] = json!("");
    assert!(decode(&body).is_err(), "a review without a uid");
}

#[test]
fn a_skip_annotation_never_gets_spec_os_set_on_a_pod_the_api_server_would_then_refuse() {
    // runAsUser is ignored on Windows; the pod opts out of the rule that
    // would remove it, and (oddly, but it is the user's annotation) of
    // WIN-OS-FIELDS too. With spec.os.name: windows the API server refuses
    // runAsUser, so setting spec.os would turn an admitted pod into a
    // refused one: the API server reads no winadmit annotation.
    let policy = Policy::from_yaml("p.yaml", "mutation: {setOsName: true}\n").unwrap();
    let mut object = pod(
        "web",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"},
            "securityContext": {"runAsUser": 1000},
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "resources": {"limits": {"memory": "1Gi"}}}]}),
    );
    object["metadata"]["annotations"] = json!({
        "winadmit.io/skip.WIN-RUNASUSER": "kept on purpose",
        "winadmit.io/skip.WIN-OS-FIELDS": "kept on purpose",
    });
    let patch = mutate_patch(&policy, &object);
    assert!(
        !patch.iter().any(|op| op["path"] == "/spec/os"),
        "spec.os would get the pod refused: {patch:?}"
    );
    // Without the opt-outs, runAsUser is removed and spec.os is set.
    object["metadata"]["annotations"] = json!({});
    let patch = mutate_patch(&policy, &object);
    assert!(patch.iter().any(|op| op["path"] == "/spec/os"), "{patch:?}");
    assert!(
        patch
            .iter()
            .any(|op| op["path"] == "/spec/securityContext/runAsUser" && op["op"] == "remove"),
        "{patch:?}"
    );
}
