//! An AdmissionReview is read as the API server writes it: an object where
//! Kubernetes has an object. A JSON array there (the whole
//! `request.object`, a pod spec, a custom resource's pod template) is
//! refused with its field path instead of being read item by item as the
//! fields in order, and a field of the envelope with the wrong type
//! (`dryRun: "yes"`) is named, not blamed on the object.

use serde_json::{Value, json};
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::{self, Admission, Endpoint};

fn adm() -> Admission {
    Admission {
        policy: Policy::default_policy(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    }
}

fn review(request: Value) -> Value {
    let mut req = json!({
        "uid": "u1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ns",
        "operation": "CREATE",
        "userInfo": {"username": "u"},
    });
    for (k, v) in request.as_object().unwrap() {
        req[k] = v.clone();
    }
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": req,
    }))
    .unwrap();
    let out = admission::review(&adm(), Endpoint::Validate, &body).unwrap();
    serde_json::from_slice(&out.body).unwrap()
}

fn message(v: &Value) -> String {
    v["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A pod spec Windows nodes cannot run (`hostNetwork` without HostProcess).
fn bad_spec() -> Value {
    json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true,
           "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/servercore:ltsc2022"}]})
}

#[test]
fn the_bad_pod_as_an_object_is_denied() {
    let v = review(
        json!({"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": bad_spec()}}),
    );
    assert_eq!(v["response"]["allowed"], false, "{v}");
    assert!(message(&v).contains("WIN-HOSTNETWORK"), "{v}");
}

#[test]
fn an_array_where_an_object_is_required_is_refused_with_its_path() {
    let cases = [
        (
            json!({"object": ["v1", "Pod", {"name": "p"}, bad_spec()]}),
            "request.object cannot be read: invalid type: sequence, expected an object",
        ),
        (
            json!({"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                              "spec": [{"kubernetes.io/os": "windows"}]}}),
            "request.object cannot be read: request.object.spec: invalid type: sequence, expected an object",
        ),
        (
            json!({"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                              "spec": {"containers": [["c", "mcr.microsoft.com/windows/servercore:ltsc2022"]]}}}),
            "request.object.spec.containers[0]: invalid type: sequence, expected an object",
        ),
        (
            json!({
                "kind": {"group": "argoproj.io", "version": "v1alpha1", "kind": "Rollout"},
                "object": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "r"},
                           "spec": {"template": [{"name": "p"}, bad_spec()]}}
            }),
            "request.object.spec.template: invalid type: sequence, expected an object",
        ),
    ];
    for (request, want) in cases {
        let v = review(request.clone());
        assert_eq!(v["response"]["allowed"], false, "{request}: {v}");
        assert!(
            message(&v).contains(want),
            "{request}\n got: {}\nwant: {want}",
            message(&v)
        );
    }
}

#[test]
fn a_dry_run_of_the_wrong_type_is_named() {
    let v = review(json!({
        "dryRun": "yes",
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": bad_spec()}
    }));
    assert_eq!(v["response"]["allowed"], false, "{v}");
    let m = message(&v);
    assert!(
        m.contains(
            "request.dryRun cannot be read: invalid type: string \"yes\", expected a boolean"
        ),
        "{m}"
    );
    assert!(!m.contains("request.object"), "{m}");
}
