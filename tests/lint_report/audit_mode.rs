//! Audit mode never denies: an AdmissionReview whose object
//! cannot be read is allowed under `mode: audit` (and `warn`), with an
//! audit annotation saying why; under `enforce` it stays `invalid`.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::{Admission, Endpoint, review};

fn admission(policy: &str, namespace_labels: Option<(&str, &str)>) -> Admission {
    let namespaces = namespace_labels.map(|(ns, mode)| {
        let mut labels = BTreeMap::new();
        labels.insert(
            ns.to_owned(),
            BTreeMap::from([("winadmit.io/mode".to_owned(), mode.to_owned())]),
        );
        Box::new(labels) as Box<dyn winadmit::decision::cluster::ClusterLookup>
    });
    Admission {
        policy: Policy::from_yaml("test policy", policy).unwrap(),
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: namespaces,
    }
}

fn unreadable() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/admission/pod-windows-create.json"
    );
    let mut r: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    r["request"]["object"] = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": 7}});
    serde_json::to_vec(&r).unwrap()
}

fn response(adm: &Admission, endpoint: Endpoint) -> Value {
    let out = review(adm, endpoint, &unreadable()).unwrap();
    let v: Value = serde_json::from_slice(&out.body).unwrap();
    v["response"].clone()
}

#[test]
fn an_unreadable_object_is_allowed_in_audit_and_warn_mode_only() {
    for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
        let r = response(&admission("mode: audit\n", None), endpoint);
        assert_eq!(r["allowed"], true, "{r}");
        assert!(
            r["auditAnnotations"]["winadmit.io/unreadable"]
                .as_str()
                .unwrap()
                .contains("request.object"),
            "{r}"
        );

        let r = response(&admission("mode: warn\n", None), endpoint);
        assert_eq!(r["allowed"], true, "{r}");
        assert!(
            r["warnings"][0]
                .as_str()
                .unwrap()
                .contains("request.object"),
            "{r}"
        );

        // The namespace's mode label counts too.
        let ns = unreadable_namespace();
        let r = response(
            &admission("mode: enforce\n", Some((&ns, "audit"))),
            endpoint,
        );
        assert_eq!(r["allowed"], true, "{r}");

        let r = response(&admission("mode: enforce\n", None), endpoint);
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(r["status"]["reason"], "InvalidRequest", "{r}");
    }
}

fn unreadable_namespace() -> String {
    let v: Value = serde_json::from_slice(&unreadable()).unwrap();
    v["request"]["namespace"].as_str().unwrap().to_owned()
}
