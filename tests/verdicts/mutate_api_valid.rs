//! No policy can make `/mutate` write an object the API server refuses.
//!
//! For generated policies (Windows taints, tolerations, RuntimeClass names,
//! label keys: valid and invalid values mixed), a policy either fails to
//! load or every patch `/mutate` returns, applied to the real-world corpus
//! and to generated Windows pods, leaves the pod templates valid by the API
//! server's rules for the fields a patch can write: labels, annotations,
//! `nodeSelector`, `tolerations`, `runtimeClassName`. The rules below are
//! written here from the Kubernetes sources, independently of
//! `winadmit::decision::names`:
//!
//! - `k8s.io/apimachinery/pkg/api/validate/content/kube.go` and
//!   `.../util/validation/validation.go`: `IsQualifiedName` (`IsLabelKey`),
//!   `IsLabelValue`, `IsDNS1123Subdomain`;
//! - `k8s.io/apimachinery/pkg/api/validation/objectmeta.go`:
//!   `ValidateAnnotations` (lowercased keys, 256 KiB in all);
//! - `k8s.io/kubernetes/pkg/apis/core/validation/validation.go`:
//!   `ValidateTolerations`, `validateTaintEffect`, the node selector and
//!   `runtimeClassName` checks of `ValidatePodSpec`.
//!
//! A policy the rules refuse (its tolerations or its taint's toleration)
//! must not load.

use crate::corpus_dir;

use std::sync::LazyLock;

use crate::admission::admission_review;
use proptest::prelude::*;
use regex::Regex;
use serde_json::{Value, json};
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::{self, Admission, Endpoint};

// --- The API server's rules -------------------------------------------

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

static LABEL_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{LABEL_KEY_FMT}$")).unwrap());
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^({LABEL_KEY_FMT})?$")).unwrap());
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*$")).unwrap()
});

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && DNS1123_SUBDOMAIN.is_match(s)
}

fn is_qualified_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() || !is_dns1123_subdomain(prefix) {
                return false;
            }
            *name
        }
        _ => return false,
    };
    !name.is_empty() && name.len() <= 63 && LABEL_KEY.is_match(name)
}

fn is_label_value(s: &str) -> bool {
    s.len() <= 63 && LABEL_VALUE.is_match(s)
}

fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `ValidateTolerations` for one toleration (comparison operators off, as
/// by default).
fn toleration_errors(t: &Value, at: &str, out: &mut Vec<String>) {
    let key = str_of(t, "key");
    let operator = str_of(t, "operator");
    let value = str_of(t, "value");
    let effect = str_of(t, "effect");
    if !key.is_empty() && !is_qualified_name(key) {
        out.push(format!("{at}.key: {key:?}"));
    }
    if key.is_empty() && operator != "Exists" {
        out.push(format!("{at}.operator: must be Exists when key is empty"));
    }
    if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) && effect != "NoExecute" {
        out.push(format!(
            "{at}.effect: must be NoExecute with tolerationSeconds"
        ));
    }
    match operator {
        "Equal" | "" => {
            if !is_label_value(value) {
                out.push(format!("{at}.operator: value {value:?}"));
            }
        }
        "Exists" => {
            if !value.is_empty() {
                out.push(format!("{at}.operator: value must be empty with Exists"));
            }
        }
        other => out.push(format!("{at}.operator: {other:?} not supported")),
    }
    if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        out.push(format!("{at}.effect: {effect:?}"));
    }
}

/// What the API server refuses in a pod template (`metadata` + `spec`),
/// for the fields a patch can write.
fn template_errors(template: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let meta = &template["metadata"];
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if !is_qualified_name(k) || !v.as_str().is_some_and(is_label_value) {
                out.push(format!("metadata.labels[{k}]"));
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut size = 0;
        for (k, v) in annotations {
            size += k.len() + v.as_str().map_or(0, str::len);
            if !is_qualified_name(&k.to_lowercase()) {
                out.push(format!("metadata.annotations[{k}]"));
            }
        }
        if size > 256 * 1024 {
            out.push("metadata.annotations: too long".to_owned());
        }
    }
    let spec = &template["spec"];
    if let Some(selector) = spec.get("nodeSelector").and_then(Value::as_object) {
        for (k, v) in selector {
            if !is_qualified_name(k) || !v.as_str().is_some_and(is_label_value) {
                out.push(format!("spec.nodeSelector[{k}]"));
            }
        }
    }
    for (i, t) in spec
        .get("tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        toleration_errors(t, &format!("spec.tolerations[{i}]"), &mut out);
    }
    if let Some(rc) = spec.get("runtimeClassName").and_then(Value::as_str)
        && !is_dns1123_subdomain(rc)
    {
        out.push(format!("spec.runtimeClassName: {rc:?}"));
    }
    out
}

/// The pod templates of a workload, by JSON Pointer.
fn templates(o: &Value) -> Vec<&Value> {
    let pointer = match o["kind"].as_str().unwrap_or_default() {
        "Pod" => "",
        "CronJob" => "/spec/jobTemplate/spec/template",
        "PodTemplate" => "/template",
        _ => "/spec/template",
    };
    o.pointer(pointer).into_iter().collect()
}

#[test]
fn the_rules_here_agree_with_the_api_servers_examples() {
    for ok in [
        "os",
        "kubernetes.io/os",
        "MyName",
        "my.name",
        "123-abc",
        "example.com/MyName",
    ] {
        assert!(is_qualified_name(ok), "{ok}");
    }
    for bad in [
        "",
        "bad key!!/x/y",
        "os/x~y",
        "no spaces allowed here",
        "/x",
        "a/b/c",
        "Example.com/x",
    ] {
        assert!(!is_qualified_name(bad), "{bad}");
    }
    assert!(is_label_value("") && is_label_value("my_value") && !is_label_value("v v"));
    let mut errs = Vec::new();
    toleration_errors(
        &json!({"key": "os", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 60}),
        "t",
        &mut errs,
    );
    assert_eq!(errs, ["t.effect: must be NoExecute with tolerationSeconds"]);
}

// --- Generated policies ---------------------------------------------------

fn keys() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => proptest::sample::select(vec!["os", "kubernetes.io/os", "example.com/windows", "node.kubernetes.io/unreachable", "A_b.C-1"]).prop_map(str::to_owned),
        3 => proptest::sample::select(vec!["bad key!!/x/y", "os/x~y", "no spaces allowed here", "/x", "x/", "a/b/c", "-x", "Example.com/x", "a\rb", "os\n", ""]).prop_map(str::to_owned),
        1 => "[a-z]{1,3}(\\.[a-z]{1,3})?/[A-Za-z0-9][-A-Za-z0-9_. ~]{0,5}",
        1 => Just("x".repeat(63)),
        1 => Just("x".repeat(64)),
    ]
}

fn values() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => proptest::sample::select(vec!["windows", "", "10.0.20348", "my_value", "V-1"]).prop_map(str::to_owned),
        3 => proptest::sample::select(vec!["v v", "-v", "v-", "a/b", "win\r", "é"]).prop_map(str::to_owned),
        1 => "[A-Za-z0-9][-A-Za-z0-9_. ]{0,4}",
        1 => Just("v".repeat(64)),
    ]
}

fn effects() -> impl Strategy<Value = String> {
    proptest::sample::select(vec!["NoSchedule", "PreferNoSchedule", "NoExecute", ""])
        .prop_map(str::to_owned)
}

fn toleration() -> impl Strategy<Value = Value> {
    (
        proptest::option::of(keys()),
        proptest::option::of(proptest::sample::select(vec![
            "Equal", "Exists", "Exists", "",
        ])),
        proptest::option::of(values()),
        proptest::option::of(effects()),
        proptest::option::weighted(0.3, 0..3600i64),
    )
        .prop_map(|(key, operator, value, effect, seconds)| {
            let mut t = serde_json::Map::new();
            if let Some(k) = key {
                t.insert("key".into(), k.into());
            }
            if let Some(o) = operator {
                t.insert("operator".into(), o.into());
            }
            if let Some(v) = value {
                t.insert("value".into(), v.into());
            }
            if let Some(e) = effect {
                t.insert("effect".into(), e.into());
            }
            if let Some(s) = seconds {
                t.insert("tolerationSeconds".into(), s.into());
            }
            Value::Object(t)
        })
}

fn policy_doc() -> impl Strategy<Value = Value> {
    (
        proptest::option::of((keys(), proptest::option::of(values()), effects())),
        proptest::collection::vec(toleration(), 0..3),
        proptest::option::of(proptest::sample::select(vec!["process", "hyperv"])),
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(
            proptest::sample::select(vec![
                "windows-2022",
                "win.example",
                "windows-2019",
                "Windows",
                "w\r",
            ]),
            0..2,
        ),
    )
        .prop_map(|(taint, tolerations, isolation, build, os_name, classes)| {
            let taint = taint.map(|(key, value, effect)| {
                let effect = if effect.is_empty() {
                    "NoSchedule".to_owned()
                } else {
                    effect
                };
                let mut t = json!({"key": key, "effect": effect});
                if let Some(v) = value {
                    t["value"] = v.into();
                }
                t
            });
            json!({
                "windowsRuntimeClasses": classes,
                "params": {"windowsTaint": taint},
                "mutation": {
                    "tolerations": tolerations,
                    "isolation": isolation,
                    "injectWindowsBuild": build,
                    "setOsName": os_name,
                },
            })
        })
}

/// The tolerations `/mutate` would add for this policy document.
fn tolerations_written(doc: &Value) -> Vec<Value> {
    let mut all: Vec<Value> = doc["mutation"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(taint) = doc["params"]["windowsTaint"].as_object() {
        let mut t = json!({"key": taint["key"], "effect": taint["effect"]});
        match taint.get("value") {
            Some(v) => {
                t["operator"] = "Equal".into();
                t["value"] = v.clone();
            }
            None => t["operator"] = "Exists".into(),
        }
        all.push(t);
    }
    all
}

// --- Objects ----------------------------------------------------------------

static CORPUS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    if cfg!(no_corpus) {
        return Vec::new();
    }
    let dir = corpus_dir::corpus_dir("mutate_api_valid");
    let mut objects = Vec::new();
    for file in corpus_dir::manifests(&dir) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(docs) = winadmit::input::source::parse(&text) else {
            continue;
        };
        for d in docs {
            if d.value.get("kind").and_then(Value::as_str).is_some()
                && !templates(&d.value).is_empty()
            {
                objects.push(d.value);
            }
        }
    }
    objects
});

fn windows_pod() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec(toleration(), 0..2),
        any::<bool>(),
        any::<bool>(),
        proptest::sample::select(vec![
            "mcr.microsoft.com/windows/servercore:ltsc2022",
            "mcr.microsoft.com/windows/nanoserver:1809",
            "example.com/app:1",
        ]),
    )
        .prop_map(|(tolerations, selector, os, image)| {
            // Tolerations the API server accepts: the pod was admitted.
            let tolerations: Vec<Value> = tolerations
                .into_iter()
                .filter(|t| {
                    let mut e = Vec::new();
                    toleration_errors(t, "t", &mut e);
                    e.is_empty()
                })
                .collect();
            let mut spec = json!({"containers": [{"name": "c", "image": image}]});
            if selector {
                spec["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
            }
            if os || !selector {
                spec["os"] = json!({"name": "windows"});
            }
            if !tolerations.is_empty() {
                spec["tolerations"] = tolerations.into();
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
        })
}

/// The object after `/mutate`'s patch (itself when there is none).
fn mutated(adm: &Admission, object: &Value) -> Value {
    use base64::Engine as _;
    let out = admission::review(adm, Endpoint::Mutate, &admission_review(object)).unwrap();
    let v: Value = serde_json::from_slice(&out.body).unwrap();
    let mut patched = object.clone();
    if let Some(p) = v["response"]["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
    }
    patched
}

/// Errors the patch brought into the object's pod templates.
fn new_errors(adm: &Admission, object: &Value) -> Vec<String> {
    let before: Vec<String> = templates(object)
        .into_iter()
        .flat_map(template_errors)
        .collect();
    let patched = mutated(adm, object);
    templates(&patched)
        .into_iter()
        .flat_map(template_errors)
        .filter(|e| !before.contains(e))
        .collect()
}

/// One generated policy and pods: the property.
fn check(doc: &Value, pods: &[Value], loaded: &mut usize) -> Result<(), TestCaseError> {
    let text = serde_json::to_string(doc).unwrap();
    let mut refused = Vec::new();
    for (i, t) in tolerations_written(doc).iter().enumerate() {
        toleration_errors(t, &format!("toleration {i}"), &mut refused);
    }
    let Ok(policy) = Policy::from_yaml("generated.yaml", &text) else {
        return Ok(());
    };
    *loaded += 1;
    prop_assert!(
        refused.is_empty(),
        "loaded a policy whose tolerations the API server refuses: {refused:?}\n{text}"
    );
    let adm = Admission {
        policy,
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    };
    for object in CORPUS.iter().chain(pods) {
        let errors = new_errors(&adm, object);
        prop_assert!(
            errors.is_empty(),
            "policy {text}\nobject {object}\nnew errors {errors:?}"
        );
    }
    Ok(())
}

#[test]
fn no_policy_that_loads_makes_mutate_write_what_the_api_server_refuses() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    });
    let loaded = std::cell::Cell::new(0);
    let strategy = (policy_doc(), proptest::collection::vec(windows_pod(), 1..4));
    if let Err(e) = runner.run(&strategy, |(doc, pods)| {
        let mut n = loaded.get();
        let r = check(&doc, &pods, &mut n);
        loaded.set(n);
        r
    }) {
        panic!("{e}");
    }
    // Not vacuous: a good share of the generated policies load.
    assert!(
        loaded.get() >= 40,
        "only {} of 256 policies loaded",
        loaded.get()
    );
}

#[test]
fn the_corpus_and_the_invalid_pools_are_exercised() {
    // The generators reach both outcomes: some policies load, some do not.
    let good = json!({"params": {"windowsTaint": {"key": "os", "value": "windows", "effect": "NoSchedule"}}});
    let bad = json!({"params": {"windowsTaint": {"key": "os/x~y", "effect": "NoSchedule"}}});
    assert!(Policy::from_yaml("g.yaml", &good.to_string()).is_ok());
    assert!(Policy::from_yaml("b.yaml", &bad.to_string()).is_err());
    if !cfg!(no_corpus) {
        assert!(CORPUS.len() > 50, "{} corpus objects", CORPUS.len());
    }
}
