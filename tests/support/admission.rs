//! An AdmissionReview as the API server sends it, and the webhook's answer,
//! for the tests that ask the webhook in-process (`admission::review`)
//! alongside the other entry points.

#![allow(dead_code)] // each test target uses a part

use base64::Engine as _;
use serde_json::{Value, json};
use winadmit::decision::policy::Policy;
use winadmit::decision::workload::{CUSTOM_RESOURCES, group_of};
use winadmit::entry::admission::{self, Admission, Endpoint};

/// The REST resource of a kind: the built-in table's, or a guess for
/// other kinds (the webhook does not read it).
fn plural(kind: &str) -> String {
    CUSTOM_RESOURCES
        .iter()
        .find(|r| r.name == kind)
        .map_or_else(|| format!("{}s", kind.to_lowercase()), |r| r.plural.into())
}

/// An AdmissionReview for creating `object`. The request's `namespace` is
/// the object's (null when it has none: the webhook reads null and `""`
/// alike).
pub fn admission_review(object: &Value) -> Vec<u8> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let group = group_of(api_version);
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": plural(kind)});
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b6f3c1e-1111-4222-8333-444455556666",
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false
        }
    }))
    .unwrap()
}

/// The webhook's `response` for `object` on `endpoint`, with the JSON
/// Patch decoded from base64 (`patch`: absent when none).
pub fn webhook(policy: &Policy, endpoint: Endpoint, object: &Value) -> Value {
    let adm = Admission {
        policy: policy.clone(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    };
    let out = admission::review(&adm, endpoint, &admission_review(object)).unwrap();
    let mut review: Value = serde_json::from_slice(&out.body).unwrap();
    let mut response = review["response"].take();
    if let Some(p) = response["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        response["patch"] = serde_json::from_slice(&bytes).unwrap();
    }
    response
}

/// The decoded patch of a [`webhook`] response: its operations, none when
/// it has no patch.
pub fn patch_ops(response: &Value) -> Vec<Value> {
    response["patch"].as_array().cloned().unwrap_or_default()
}
