//! Policy values are checked at load (issue 13): taints and tolerations
//! with the enums Kubernetes accepts, every error at `file:line:col`, and
//! messages in winadmit's words rather than the YAML library's.

use std::path::PathBuf;

use winadmit::policy::Policy;

fn load(text: &str) -> Result<Policy, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, text).unwrap();
    Policy::load(std::slice::from_ref(&path)).map_err(|e| {
        let message = e.to_string();
        message.replace(&path.display().to_string(), "policy.yaml")
    })
}

#[test]
fn invalid_values_are_refused_at_their_line_and_column() {
    let cases: &[(&str, &str)] = &[
        (
            "params:\n  windowsTaint:\n    key: os\n    value: windows\n    effect: Sometimes\n",
            "invalid policy policy.yaml:5:13: unknown taint effect `Sometimes`: expected NoSchedule, PreferNoSchedule or NoExecute",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Frob\n    effect: Whenever\n",
            "invalid policy policy.yaml:4:5: mutation.tolerations[0].operator: unknown operator `Frob`: expected Exists or Equal",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Equal\n    value: windows\n    effect: Whenever\n",
            "invalid policy policy.yaml:6:5: mutation.tolerations[0].effect: unknown effect `Whenever`",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    operator: Exists\n    value: windows\n",
            "invalid policy policy.yaml:5:5: mutation.tolerations[0].value: must be empty with operator Exists",
        ),
        (
            "mutation:\n  tolerations:\n  - key: os\n    tolerate: always\n",
            "invalid policy policy.yaml:4:5: mutation.tolerations[0]: unknown field `tolerate`",
        ),
        (
            "rules:\n  WIN-PRIVILEGED: error\n  WIN-NOPE: warning\n",
            "invalid policy policy.yaml:3:3: unknown rule id `WIN-NOPE`",
        ),
        (
            "mutation:\n  injectNodeSelector: true\n  injectEverything: true\n",
            "invalid policy policy.yaml:3:3: unknown key `mutation.injectEverything`",
        ),
        (
            "mutation:\n  isolation: sometimes\n",
            "invalid policy policy.yaml:2:3: mutation.isolation must be process or hyperv",
        ),
        (
            "mode: warn\n---\nmode: audit\n",
            "invalid policy policy.yaml:3:1: a policy file holds one YAML document",
        ),
        (
            "mode: warn\nmode: audit\n",
            "invalid policy policy.yaml:2:1: duplicate key `mode`: each key may appear once",
        ),
        (
            "mode: sometimes\n",
            "invalid policy policy.yaml:1:7: unknown variant `sometimes`",
        ),
        (
            "kind: Polic\n",
            "invalid policy policy.yaml:1:1: kind must be Policy, not Polic",
        ),
    ];
    for (text, want) in cases {
        let Err(err) = load(text) else {
            panic!("accepted:\n{text}")
        };
        assert!(err.starts_with(want), "{text}\n got: {err}\nwant: {want}");
        for library_words in ["from_str_multiple", "DuplicateKeyPolicy", "Options"] {
            assert!(!err.contains(library_words), "{err}");
        }
    }
}

#[test]
fn valid_taints_and_tolerations_load() {
    let p = load(
        "params:\n  windowsTaint: {key: os, value: windows, effect: NoSchedule}\nmutation:\n  tolerations:\n  - {key: os, operator: Equal, value: windows, effect: NoSchedule}\n  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}\n  - {operator: Exists}\n",
    )
    .unwrap();
    assert_eq!(p.mutation.tolerations.len(), 3);
    assert_eq!(p.params.windows_taint.unwrap().effect, "NoSchedule");
    // The shipped default policy still loads as a file.
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("policies/default.yaml");
    Policy::load(&[default]).unwrap();
}
