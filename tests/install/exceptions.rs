//! The PolicyException install: the chart's CRD file and the kustomize
//! base's are one, the schema makes reason and end date required and
//! non-empty, and the lifetime admission policy matches every served
//! version on CREATE and UPDATE with the lifetime the base's policy states.

use std::path::Path;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn docs(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_crd_requires_a_reason_and_an_end_date() {
    let chart = docs("charts/winadmit/crds/winadmit.io_policyexceptions.yaml");
    let base = docs("manifests/base/exceptions.yaml");
    let crd = of_kind(&base, "CustomResourceDefinition");
    assert_eq!(&chart[0], crd, "the chart's CRD and the base's differ");
    let versions = crd["spec"]["versions"].as_array().unwrap();
    for v in versions {
        let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let required: Vec<&str> = spec["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        for field in ["rules", "reason", "expiresAt"] {
            assert!(
                required.contains(&field),
                "{field} is not required: {required:?}"
            );
        }
        for field in ["reason", "expiresAt"] {
            assert_eq!(spec["properties"][field]["minLength"], 1, "{field}");
        }
        assert_eq!(spec["properties"]["expiresAt"]["format"], "date-time");
    }
    assert_eq!(crd["spec"]["names"]["kind"], "PolicyException");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
}

#[test]
fn the_lifetime_policy_matches_every_version_with_the_policys_lifetime() {
    let base = docs("manifests/base/exceptions.yaml");
    let vap = of_kind(&base, "ValidatingAdmissionPolicy");
    let m = &vap["spec"]["matchConstraints"];
    assert_eq!(m["matchPolicy"], "Equivalent");
    let rule = &m["resourceRules"][0];
    assert_eq!(rule["apiGroups"][0], "winadmit.io");
    assert_eq!(rule["apiVersions"][0], "*");
    assert_eq!(rule["resources"][0], "policyexceptions");
    assert_eq!(rule["operations"], serde_json::json!(["CREATE", "UPDATE"]));
    assert_eq!(vap["spec"]["failurePolicy"], "Fail");
    let binding = of_kind(&base, "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], vap["metadata"]["name"]);
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    // The lifetime in the admission policy is the server policy's.
    let policy_cm = docs("manifests/base/policy.yaml");
    let text = policy_cm[0]["data"]["policy.yaml"].as_str().unwrap();
    let policy: Value = serde_saphyr::from_str(text).unwrap();
    let days = policy["exceptions"]["maxLifetimeDays"].as_u64().unwrap();
    let expr = vap["spec"]["variables"][0]["expression"].as_str().unwrap();
    assert_eq!(expr, format!("duration('{}h')", days * 24));
    let validation = vap["spec"]["validations"][0]["expression"]
        .as_str()
        .unwrap();
    assert!(
        validation.contains("object.metadata.creationTimestamp"),
        "{validation}"
    );
    assert!(validation.contains("variables.longest"), "{validation}");
}

#[test]
fn the_webhook_may_list_and_watch_exceptions() {
    let rbac = docs("manifests/base/rbac.yaml");
    let role = of_kind(&rbac, "ClusterRole");
    let rules = role["rules"].as_array().unwrap();
    assert!(
        rules.iter().any(|r| r["apiGroups"][0] == "winadmit.io"
            && r["resources"][0] == "policyexceptions"
            && r["verbs"] == serde_json::json!(["get", "list", "watch"])),
        "{rules:#?}"
    );
}
