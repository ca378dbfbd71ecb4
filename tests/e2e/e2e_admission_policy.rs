//! The exported admission policies against the webhook, in one real
//! kube-apiserver v1.37 (`support/controlplane.rs`).
//!
//! Two setups share the control plane:
//! - "webhook": the base install's webhook registrations (enforce,
//!   failurePolicy Fail) calling `winadmit serve` with the base overlay's
//!   policy and `--cluster-cache off`;
//! - "policy": the output of `winadmit admission-policy` at the default
//!   target, with the MutatingAdmissionPolicy, every binding scoped to the
//!   setup's namespaces.
//!
//! Every workload of the corpus and a set of hand-made Windows workloads is
//! created (server-side dry run) in a namespace of each setup, and the two
//! answers must agree: admitted or denied, the rule ids in the denial, the
//! rule ids in the warnings, and the object the API server returns. Every
//! difference fails the test, listed with what differed. The differences
//! that cannot be closed are in [`KNOWN`], each with its reason (the same
//! words as docs/admission-policy.md); nothing else is ignored.
//!
//! Without the control plane built (`tests/apiserver/build.sh`) the tests
//! are compiled as ignored (`build.rs`), unless
//! `WINADMIT_REQUIRE_APISERVER` is set (`.ci/run` sets it); without the
//! corpus, its corpus test is ignored too.

use crate::controlplane;
use crate::corpus_dir;
use crate::e2e;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::binary;
use controlplane::ControlPlane;
use e2e::Webhook;

/// The namespace of each setup.
const WEBHOOK_NS: &str = "ap-webhook";
const POLICY_NS: &str = "ap-policy";

/// The annotations the MutatingAdmissionPolicy leaves on an object, one
/// per rule whose fields it removed, so that the ValidatingAdmissionPolicy
/// can warn about the removal (a mutation cannot warn).
const REMOVED_PREFIX: &str = "winadmit.io/removed.";

/// The differences between the two setups that cannot be closed: (what,
/// why). The comparison below handles each one explicitly.
const KNOWN: &[(&str, &str)] = &[
    (
        "removal records",
        "The stored object carries the removal records (`winadmit.io/removed.RULE` annotations), where the webhook leaves none: a `MutatingAdmissionPolicy` cannot return warnings, and the record is what lets the validating policy warn about each removal.",
    ),
    (
        "pin by images",
        "The pin to Windows by images comes without a warning: a `MutatingAdmissionPolicy` cannot return warnings, so a pod that selects no OS and is pinned for an image that can only be Windows is stored with the node selector the webhook adds, without the webhook's WIN-UNPINNED-IMAGE warning that says so.",
    ),
    (
        "ephemeral container removals",
        "Removals from ephemeral containers come without a warning: through `pods/ephemeralcontainers` the API server keeps nothing of an update but the ephemeral containers, so no record reaches the validating policy. The fields removed are the webhook's.",
    ),
];

/// Each known difference is documented in docs/admission-policy.md
/// ("Differences from the webhook") in the words of [`KNOWN`].
#[test]
fn known_differences_are_documented() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/admission-policy.md"
    ))
    .unwrap();
    let section = doc
        .split("## Differences from the webhook")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/admission-policy.md has \"## Differences from the webhook\"");
    let words = section
        .replace("**", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for (what, why) in KNOWN {
        assert!(
            words.contains(why),
            "the known difference {what:?} is not documented as:\n{why}"
        );
    }
}

/// Both setups in the process's control plane.
struct Setups {
    cp: &'static ControlPlane,
    /// Kept alive for the registrations to call.
    _webhook: Webhook,
}

fn setups(test: &str) -> &'static Setups {
    static SETUPS: OnceLock<Setups> = OnceLock::new();
    let cp = controlplane::shared(test);
    SETUPS.get_or_init(|| {
        let objects = e2e::rendered("base");
        // Pinning a workload to Linux by its images
        // (mutation.pinLinuxImages) needs the cluster's Windows nodes and is
        // not exported (`winadmit admission-policy` says so): the webhook
        // compared with the policies does not pin to Linux either. Pinning
        // to Windows (pinWindowsImages) is exported, and compared.
        let no_pinning = std::env::temp_dir().join(format!(
            "winadmit-e2e-no-pinning-{}.yaml",
            std::process::id()
        ));
        std::fs::write(&no_pinning, "mutation:\n  pinLinuxImages: false\n").unwrap();
        let webhook = Webhook::start(
            &e2e::overlay_policy(&objects),
            &[
                "--cluster-cache",
                "off",
                "--policy",
                no_pinning.to_str().unwrap(),
            ],
        )
        .adopted_by(cp);
        cp.apply(&e2e::to_list(&e2e::registrations(
            &objects, "webhook", &webhook,
        )));
        cp.namespace(WEBHOOK_NS, &[("winadmit-e2e", "webhook")]);
        e2e::wait_registered(cp, &webhook, WEBHOOK_NS, 2);

        cp.apply(&e2e::to_list(&policy_objects()));
        cp.namespace(POLICY_NS, &[("winadmit-e2e", "policy")]);
        wait_policies(cp);
        Setups {
            cp,
            _webhook: webhook,
        }
    })
}

/// `winadmit admission-policy` at the default target, with the mutating
/// policy, every binding scoped to the "policy" setup.
fn policy_objects() -> Vec<Value> {
    let out = binary::winadmit(&["admission-policy"]);
    assert!(
        out.status.success(),
        "winadmit admission-policy: {}",
        e2e::stderr(&out)
    );
    let mut docs = e2e::parse_yaml(&String::from_utf8(out.stdout).unwrap());
    assert!(
        docs.iter()
            .any(|d| e2e::kind(d) == "MutatingAdmissionPolicy"),
        "the default export has the MutatingAdmissionPolicy"
    );
    // The gMSA boundary (policy winadmit-gmsa) is compared with a webhook
    // that checks gMSA in e2e_gmsa_installs; the webhook here runs without
    // --gmsa, so it is left out of this comparison.
    docs.retain(|d| d["metadata"]["name"] != "winadmit-gmsa");
    e2e::scope_bindings(&mut docs, "policy");
    docs
}

/// Waits until the policies and bindings are in force in the "policy"
/// namespace (the API server loads them a moment after they are created):
/// a pod with hostNetwork is denied, and one with runAsUser is mutated.
fn wait_policies(cp: &ControlPlane) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let deny = e2e::pod(
        POLICY_NS,
        "probe-deny",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
    );
    let mutate = e2e::pod(
        POLICY_NS,
        "probe-mutate",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostPID": true,
               "securityContext": {"runAsUser": 1000}}),
    );
    loop {
        let denied = submit(cp, POLICY_NS, &deny);
        let mutated = submit(cp, POLICY_NS, &mutate);
        let in_force = !denied.admitted
            && denied.denied.contains("WIN-HOSTNETWORK")
            && mutated.warned.contains("WIN-HOSTPID")
            && mutated.object.as_ref().is_some_and(|o| {
                o["spec"]
                    .get("securityContext")
                    .is_none_or(|sc| sc.get("runAsUser").is_none())
            });
        if in_force {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the admission policies did not take effect in 30 s: {denied:?} {mutated:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// What the API server answered to a server-side dry-run create.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) admitted: bool,
    /// Rule ids in the denial of an admission plugin (webhook or policy).
    pub(crate) denied: BTreeSet<String>,
    /// Rule ids in the warnings.
    pub(crate) warned: BTreeSet<String>,
    /// The returned object, normalised ([`normalise`]).
    pub(crate) object: Option<Value>,
    /// A refusal that is not an admission denial (the API server's own
    /// validation, an unknown kind...), with the namespace blanked.
    pub(crate) other_error: Option<String>,
    /// Everything kubectl printed on stderr, for the failure report.
    pub(crate) stderr: String,
}

/// The rule ids (`WIN-[A-Z0-9-]+`) in `text`.
fn rule_ids(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("WIN-") {
        let tail = &rest[at + 4..];
        let len = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'))
            .unwrap_or(tail.len());
        let id = format!("WIN-{}", &tail[..len]);
        let id = id.trim_end_matches('-');
        if id.len() > 4 {
            out.insert(id.to_owned());
        }
        rest = &tail[len..];
    }
    out
}

/// `kubectl create --dry-run=server -o json` of `object` in `ns`.
pub(crate) fn submit(cp: &ControlPlane, ns: &str, object: &Value) -> Answer {
    let mut object = object.clone();
    object["metadata"]["namespace"] = json!(ns);
    answer(&e2e::create(cp, &object, true), ns)
}

/// What kubectl (run with `-o json`) printed, as an [`Answer`].
fn answer(out: &std::process::Output, ns: &str) -> Answer {
    let stderr = e2e::stderr(out);
    let (warnings, errors): (Vec<&str>, Vec<&str>) =
        stderr.lines().partition(|l| l.starts_with("Warning: "));
    let error_text = errors.join("\n");
    let by_admission = error_text.contains("admission webhook")
        || error_text.contains("ValidatingAdmissionPolicy")
        || error_text.contains("MutatingAdmissionPolicy");
    let object = out
        .status
        .success()
        .then(|| normalise(serde_json::from_slice(&out.stdout).unwrap()));
    Answer {
        admitted: out.status.success(),
        denied: if by_admission {
            rule_ids(&error_text)
        } else {
            BTreeSet::new()
        },
        warned: warnings.iter().flat_map(|l| rule_ids(l)).collect(),
        object,
        other_error: (!out.status.success() && !by_admission)
            .then(|| error_text.replace(ns, "<namespace>")),
        stderr,
    }
}

/// The returned object without what differs between any two creates:
/// namespace, uid, timestamps, managed fields, and the Job's uid labels.
fn normalise(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for k in [
            "namespace",
            "uid",
            "creationTimestamp",
            "managedFields",
            "resourceVersion",
        ] {
            meta.remove(k);
        }
        if meta.contains_key("generateName") {
            meta.remove("name");
        }
    }
    for labels in [
        "/metadata/labels",
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
    ] {
        if let Some(map) = object.pointer_mut(labels).and_then(Value::as_object_mut) {
            for k in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
                if let Some(v) = map.get_mut(k) {
                    *v = json!("<uid>");
                }
            }
        }
    }
    object
}

/// The removal records of the policy's answer (KNOWN "removal records"):
/// taken off its object, each checked to come with a warning of its rule.
/// Returns what is wrong with them.
fn take_removal_records(answer: &mut Answer) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(annotations) = answer
        .object
        .as_mut()
        .and_then(|o| o["metadata"].get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return problems;
    };
    let records: Vec<String> = annotations
        .keys()
        .filter(|k| k.starts_with(REMOVED_PREFIX))
        .cloned()
        .collect();
    for key in records {
        let rule = &key[REMOVED_PREFIX.len()..];
        let value = annotations.remove(&key).unwrap();
        if !answer.warned.contains(rule) {
            problems.push(format!(
                "the removal record {key}={value} comes without a {rule} warning"
            ));
        }
    }
    if annotations.is_empty() {
        answer.object.as_mut().unwrap()["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
    }
    problems
}

/// What differs between the two answers (empty: they agree).
fn differences(webhook: &Answer, policy: &Answer) -> Vec<String> {
    let mut policy = policy.clone();
    let mut out = take_removal_records(&mut policy);
    // KNOWN "pin by images": the webhook's warning about its pin, where
    // both stored the pinned object (or both refused it).
    let mut webhook = webhook.clone();
    let pinned = |a: &Answer| {
        a.object.as_ref().is_some_and(|o| {
            let spec = if o["kind"] == "Pod" {
                &o["spec"]
            } else if o["kind"] == "CronJob" {
                &o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            } else {
                &o["spec"]["template"]["spec"]
            };
            spec["nodeSelector"]["kubernetes.io/os"] == "windows"
        })
    };
    if webhook.warned.contains("WIN-UNPINNED-IMAGE")
        && !policy.warned.contains("WIN-UNPINNED-IMAGE")
        && webhook.stderr.contains("add nodeSelector kubernetes.io/os")
        && webhook.object == policy.object
        && (webhook.object.is_none() || pinned(&webhook))
    {
        webhook.warned.remove("WIN-UNPINNED-IMAGE");
    }
    let webhook = &webhook;
    if webhook.admitted != policy.admitted {
        out.push(format!(
            "verdict: webhook {}, policy {}",
            if webhook.admitted { "admits" } else { "denies" },
            if policy.admitted { "admits" } else { "denies" }
        ));
    }
    let sets = |what: &str, w: &BTreeSet<String>, p: &BTreeSet<String>, out: &mut Vec<String>| {
        if w != p {
            let only_w: Vec<&String> = w.difference(p).collect();
            let only_p: Vec<&String> = p.difference(w).collect();
            out.push(format!(
                "{what}: only the webhook {only_w:?}, only the policy {only_p:?}"
            ));
        }
    };
    sets("denied rules", &webhook.denied, &policy.denied, &mut out);
    sets("warned rules", &webhook.warned, &policy.warned, &mut out);
    if webhook.other_error != policy.other_error {
        out.push(format!(
            "error: webhook {:?}, policy {:?}",
            webhook.other_error, policy.other_error
        ));
    }
    if webhook.object != policy.object {
        out.push(format!(
            "returned object:\n      webhook {}\n      policy  {}",
            diff_hint(webhook.object.as_ref(), policy.object.as_ref()).0,
            diff_hint(webhook.object.as_ref(), policy.object.as_ref()).1,
        ));
    }
    out
}

/// The first JSON pointers where two objects differ, with their values.
fn diff_hint(a: Option<&Value>, b: Option<&Value>) -> (String, String) {
    fn walk(a: &Value, b: &Value, at: &str, out: &mut Vec<(String, String, String)>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let p = format!("{at}/{k}");
                    match (x.get(k), y.get(k)) {
                        (Some(u), Some(v)) => walk(u, v, &p, out),
                        (u, v) => out.push((
                            p,
                            u.map_or("-".into(), Value::to_string),
                            v.map_or("-".into(), Value::to_string),
                        )),
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (u, v)) in x.iter().zip(y).enumerate() {
                    walk(u, v, &format!("{at}/{i}"), out);
                }
            }
            _ if a != b => out.push((at.to_owned(), a.to_string(), b.to_string())),
            _ => {}
        }
    }
    match (a, b) {
        (Some(a), Some(b)) => {
            let mut out = Vec::new();
            walk(a, b, "", &mut out);
            let mut left = String::new();
            let mut right = String::new();
            for (p, u, v) in out.iter().take(6) {
                let _ = write!(left, "{p}={u} ");
                let _ = write!(right, "{p}={v} ");
            }
            (left, right)
        }
        (a, b) => (
            a.map_or("none".into(), |_| "an object".into()),
            b.map_or("none".into(), |_| "an object".into()),
        ),
    }
}

/// The kinds either setup matches (the webhooks' rules and the policies'
/// matchConstraints).
const MATCHED_KINDS: &[&str] = &[
    "Pod",
    "ReplicationController",
    "Deployment",
    "DaemonSet",
    "StatefulSet",
    "ReplicaSet",
    "Job",
    "CronJob",
];

/// Submits every object to both setups (a few at a time) and fails with
/// every difference. Returns the number compared.
fn compare_all(s: &Setups, label: &str, objects: &[(String, Value)]) -> usize {
    let threads = 3;
    let results: Vec<(String, Answer, Answer)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    objects
                        .iter()
                        .skip(t)
                        .step_by(threads)
                        .map(|(name, o)| {
                            (
                                name.clone(),
                                submit(s.cp, WEBHOOK_NS, o),
                                submit(s.cp, POLICY_NS, o),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut report = String::new();
    let mut differing = 0;
    let (mut denied, mut warned, mut removed) = (0, 0, 0);
    for (name, w, p) in &results {
        denied += usize::from(!w.denied.is_empty());
        warned += usize::from(!w.warned.is_empty());
        let records = p
            .object
            .as_ref()
            .and_then(|o| o["metadata"]["annotations"].as_object());
        removed +=
            usize::from(records.is_some_and(|a| a.keys().any(|k| k.starts_with(REMOVED_PREFIX))));
        let diffs = differences(w, p);
        if diffs.is_empty() {
            continue;
        }
        differing += 1;
        let _ = writeln!(report, "- {name}:");
        for d in &diffs {
            let _ = writeln!(report, "    {d}");
        }
        let _ = writeln!(
            report,
            "    webhook stderr: {}\n    policy stderr: {}",
            w.stderr.trim().replace('\n', "\n      "),
            p.stderr.trim().replace('\n', "\n      ")
        );
    }
    eprintln!(
        "{label}: {} objects compared, {differing} differ; the webhook denied {denied}, warned on {warned}; the policies removed fields from {removed}",
        results.len()
    );
    assert!(
        differing == 0,
        "{label}: the admission policies and the webhook differ on {differing} of {} objects (known differences handled: {:?}):\n{report}",
        results.len(),
        KNOWN.iter().map(|(what, _)| what).collect::<Vec<_>>()
    );
    assert!(
        denied > 0 && warned > 0 && removed > 0,
        "{label}: the comparison must cover denials, warnings and removals"
    );
    results.len()
}

/// Every workload document of every corpus file.
#[test]
#[cfg_attr(
    all(no_corpus, not(no_control_plane)),
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn corpus_policies_agree_with_the_webhook() {
    let test = "corpus_policies_agree_with_the_webhook";
    let dir = corpus_dir::corpus_dir(test);
    let s = setups(test);
    compare_all(s, "corpus", &corpus_objects(&dir));
}

/// Every workload document (of the kinds either setup matches) of every
/// corpus file in `dir`, named `file#N`.
pub(crate) fn corpus_objects(dir: &Path) -> Vec<(String, Value)> {
    let mut objects = Vec::new();
    for path in corpus_dir::manifests(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(docs) = winadmit::input::yaml::load(
            &text,
            winadmit::input::yaml::ParseLimits::for_len(text.len()),
        ) else {
            continue;
        };
        for (i, doc) in docs.into_iter().enumerate() {
            if MATCHED_KINDS.contains(&e2e::kind(&doc)) {
                objects.push((format!("{file}#{}", i + 1), doc));
            }
        }
    }
    assert!(objects.len() > 80, "corpus workloads: {}", objects.len());
    objects
}

/// A Deployment of an image that can only be Windows
/// (`mcr.microsoft.com/dotnet/framework/aspnet`) with no node selector: the
/// webhook and the exported policies pin it to Windows alike
/// (`mutation.pinWindowsImages`), and store the same object.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn windows_only_images_are_pinned_by_both() {
    let s = setups("windows_only_images_are_pinned_by_both");
    for image in [
        "mcr.microsoft.com/dotnet/framework/aspnet:4.8",
        "mcr.microsoft.com/windows/servercore/iis",
        "example.com/app:1.0-windowsservercore-ltsc2022",
    ] {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "aspnet"},
            "spec": {"selector": {"matchLabels": {"app": "aspnet"}},
                "template": {"metadata": {"labels": {"app": "aspnet"}},
                    "spec": {"containers": [{"name": "web", "image": image,
                        "securityContext": {"privileged": false}}]}}}});
        let w = submit(s.cp, WEBHOOK_NS, &d);
        let p = submit(s.cp, POLICY_NS, &d);
        for (who, a) in [("webhook", &w), ("policies", &p)] {
            let selector = a
                .object
                .as_ref()
                .map(|o| o["spec"]["template"]["spec"]["nodeSelector"].clone());
            assert_eq!(
                selector,
                Some(json!({"kubernetes.io/os": "windows"})),
                "{image}: {who}: {a:?}"
            );
        }
        let diffs = differences(&w, &p);
        assert!(diffs.is_empty(), "{image}: {diffs:#?}");
    }
    // An image that only looks Windows stays unpinned by both.
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "looks"},
        "spec": {"selector": {"matchLabels": {"app": "looks"}},
            "template": {"metadata": {"labels": {"app": "looks"}},
                "spec": {"containers": [{"name": "web", "image": "example.com/servercore-tools:1"}]}}}});
    let (w, p) = (submit(s.cp, WEBHOOK_NS, &d), submit(s.cp, POLICY_NS, &d));
    assert!(differences(&w, &p).is_empty(), "{w:?}\n{p:?}");
}

// ---- hand-made workloads ------------------------------------------------

const SERVERCORE: &str = "mcr.microsoft.com/windows/servercore:ltsc2022";
const NANOSERVER: &str = "mcr.microsoft.com/windows/nanoserver:ltsc2022";

/// A pod template (`{metadata, spec}`): a Windows pod (node selector) with
/// an init container and two containers, an emptyDir `v` to mount.
fn windows_template() -> Value {
    json!({
        "metadata": {},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "initContainers": [{"name": "init", "image": NANOSERVER}],
            "containers": [
                {"name": "a", "image": SERVERCORE},
                {"name": "b", "image": SERVERCORE}
            ],
            "volumes": [{"name": "v", "emptyDir": {}}]
        }
    })
}

fn merge(target: &mut Value, add: &Value) {
    match (target.as_object_mut(), add.as_object()) {
        (Some(t), Some(a)) => {
            for (k, v) in a {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        _ => *target = add.clone(),
    }
}

/// One hand-made case: a name and how it changes [`windows_template`].
struct Case {
    name: &'static str,
    edit: Box<dyn Fn(&mut Value) + Sync>,
}

fn case(name: &'static str, edit: impl Fn(&mut Value) + Sync + 'static) -> Case {
    Case {
        name,
        edit: Box::new(edit),
    }
}

/// Merges `add` into the pod spec.
fn spec(name: &'static str, add: Value) -> Case {
    case(name, move |t| merge(&mut t["spec"], &add))
}

/// Merges `add` into the pod's securityContext.
fn pod_sc(name: &'static str, add: Value) -> Case {
    case(name, move |t| {
        merge(&mut t["spec"]["securityContext"], &add);
    })
}

/// Merges `add` into the securityContext of container `a`.
fn sc(name: &'static str, add: Value) -> Case {
    case(name, move |t| {
        merge(&mut t["spec"]["containers"][0]["securityContext"], &add);
    })
}

/// Merges `add` into container `b`.
fn container(name: &'static str, add: Value) -> Case {
    case(name, move |t| merge(&mut t["spec"]["containers"][1], &add))
}

/// Merges `add` into the pod template's annotations.
fn annotations(name: &'static str, add: Value) -> Case {
    case(name, move |t| {
        merge(&mut t["metadata"]["annotations"], &add);
    })
}

#[allow(clippy::too_many_lines)] // one line per case
fn cases() -> Vec<Case> {
    vec![
        case("plain", |_| {}),
        // Pod-level settings.
        spec("hostnetwork", json!({"hostNetwork": true})),
        spec("hostpid", json!({"hostPID": true})),
        spec("hostipc", json!({"hostIPC": true})),
        spec("share-pid-ns", json!({"shareProcessNamespace": true})),
        spec(
            "share-pid-ns-false",
            json!({"shareProcessNamespace": false}),
        ),
        spec(
            "pod-resources",
            json!({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}),
        ),
        spec(
            "dns-hostnet",
            json!({"dnsPolicy": "ClusterFirstWithHostNet"}),
        ),
        spec(
            "dns-searches",
            json!({"dnsConfig": {"searches": ["a.svc", "b.svc"]}}),
        ),
        spec("os-windows", json!({"os": {"name": "windows"}})),
        // Pod security context.
        pod_sc("pod-runas", json!({"runAsUser": 1000, "runAsGroup": 1000})),
        pod_sc(
            "pod-fsgroup",
            json!({"fsGroup": 1, "fsGroupChangePolicy": "Always"}),
        ),
        pod_sc(
            "pod-supplemental",
            json!({"supplementalGroups": [1], "supplementalGroupsPolicy": "Merge"}),
        ),
        pod_sc(
            "pod-sysctls",
            json!({"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}),
        ),
        pod_sc("pod-selinux", json!({"seLinuxOptions": {"level": "s0"}})),
        pod_sc(
            "pod-seccomp-unconfined",
            json!({"seccompProfile": {"type": "Unconfined"}}),
        ),
        pod_sc(
            "pod-seccomp-default",
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        ),
        pod_sc(
            "pod-apparmor",
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
        ),
        pod_sc("pod-nonroot", json!({"runAsNonRoot": true})),
        pod_sc(
            "pod-nonroot-admin",
            json!({"runAsNonRoot": true, "windowsOptions": {"runAsUserName": "ContainerAdministrator"}}),
        ),
        // Container security context.
        sc("privileged", json!({"privileged": true})),
        sc("privileged-false", json!({"privileged": false})),
        sc("runas", json!({"runAsUser": 0, "runAsGroup": 0})),
        sc(
            "capabilities-add",
            json!({"capabilities": {"add": ["NET_ADMIN"]}}),
        ),
        sc(
            "capabilities-drop",
            json!({"capabilities": {"drop": ["ALL"]}}),
        ),
        sc("escalation", json!({"allowPrivilegeEscalation": true})),
        sc(
            "escalation-false",
            json!({"allowPrivilegeEscalation": false}),
        ),
        sc("procmount-default", json!({"procMount": "Default"})),
        sc("readonly-rootfs", json!({"readOnlyRootFilesystem": true})),
        sc(
            "readonly-rootfs-false",
            json!({"readOnlyRootFilesystem": false}),
        ),
        sc(
            "seccomp-localhost",
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
        ),
        sc("selinux", json!({"seLinuxOptions": {"user": "u"}})),
        sc(
            "apparmor",
            json!({"appArmorProfile": {"type": "Unconfined"}}),
        ),
        sc(
            "nonroot-admin",
            json!({"runAsNonRoot": true, "windowsOptions": {"runAsUserName": "ContainerAdministrator"}}),
        ),
        sc(
            "many-removals",
            json!({"privileged": true, "runAsUser": 1, "runAsGroup": 1,
                   "capabilities": {"add": ["SYS_TIME"]}, "seLinuxOptions": {"type": "t"},
                   "allowPrivilegeEscalation": true, "procMount": "Default"}),
        ),
        // Containers, volumes and mounts.
        container(
            "hugepages",
            json!({"resources": {"limits": {"hugepages-2Mi": "1Gi", "memory": "1Gi"}, "requests": {"memory": "1Gi"}}}),
        ),
        container(
            "subpath-one",
            json!({"volumeMounts": [{"name": "v", "mountPath": "C:\\a", "subPath": "a"}]}),
        ),
        container(
            "subpath-two",
            json!({"volumeMounts": [{"name": "v", "mountPath": "C:\\a", "subPath": "a"}, {"name": "v", "mountPath": "C:\\b", "subPathExpr": "$(X)"}]}),
        ),
        container(
            "mount-propagation",
            json!({"volumeMounts": [{"name": "v", "mountPath": "C:\\a", "mountPropagation": "HostToContainer"}]}),
        ),
        case("volume-devices", |t| {
            merge(
                &mut t["spec"],
                &json!({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "blk", "persistentVolumeClaim": {"claimName": "c"}}]}),
            );
            t["spec"]["containers"][1]["volumeDevices"] =
                json!([{"name": "blk", "devicePath": "/dev/xvda"}]);
        }),
        spec(
            "emptydir-memory",
            json!({"volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]}),
        ),
        spec(
            "nfs",
            json!({"volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}]}),
        ),
        spec(
            "hostpath-linux",
            json!({"volumes": [
                {"name": "v", "hostPath": {"path": "/proc"}},
                {"name": "d", "hostPath": {"path": "/var/run/docker.sock", "type": "Socket"}}
            ]}),
        ),
        // HostProcess.
        case("hostprocess", |t| {
            merge(
                &mut t["spec"],
                &json!({"hostNetwork": true, "securityContext": {"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\SYSTEM"}}}),
            );
        }),
        case("hostprocess-no-hostnetwork", |t| {
            merge(
                &mut t["spec"],
                &json!({"securityContext": {"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\SYSTEM"}}}),
            );
        }),
        case("hostprocess-mixed", |t| {
            merge(&mut t["spec"], &json!({"hostNetwork": true}));
            t["spec"]["containers"][0]["securityContext"] = json!({"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\SYSTEM"}});
        }),
        case("hostprocess-nonroot-dns", |t| {
            merge(
                &mut t["spec"],
                &json!({"hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet",
                        "securityContext": {"runAsNonRoot": true, "windowsOptions": {"hostProcess": true}}}),
            );
        }),
        // Annotations.
        annotations(
            "apparmor-annotation",
            json!({"container.apparmor.security.beta.kubernetes.io/a": "runtime/default"}),
        ),
        annotations(
            "hyperv",
            json!({"experimental.windows.kubernetes.io/isolation-type": "hyperv"}),
        ),
        case("skips", |t| {
            merge(
                &mut t["metadata"]["annotations"],
                &json!({"winadmit.io/skip.WIN-HOSTNETWORK": "the CNI needs it", "winadmit.io/skip.WIN-PRIVILEGED": " ",
                        "winadmit.io/skip.WIN-RUNASUSER": "tested"}),
            );
            merge(&mut t["spec"], &json!({"hostNetwork": true}));
            t["spec"]["containers"][0]["securityContext"] =
                json!({"privileged": true, "runAsUser": 5});
        }),
        // Targeting.
        spec(
            "conflict-linux-selector",
            json!({"nodeSelector": {"beta.kubernetes.io/os": "linux"}}),
        ),
        spec(
            "conflict-linux-affinity",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}}),
        ),
        case("targets-by-affinity", |t| {
            t["spec"].as_object_mut().unwrap().remove("nodeSelector");
            merge(
                &mut t["spec"],
                &json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}]}}},
                        "securityContext": {"runAsUser": 7}}),
            );
        }),
        case("targets-by-os-sku", |t| {
            t["spec"]["nodeSelector"] = json!({"kubernetes.azure.com/os-sku": "Windows2022"});
            t["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
        }),
        case("unpinned-image", |t| {
            t["spec"].as_object_mut().unwrap().remove("nodeSelector");
        }),
        case("unpinned-image-privileged", |t| {
            t["spec"].as_object_mut().unwrap().remove("nodeSelector");
            t["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
        }),
        case("linux-pod-windows-image", |t| {
            t["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
        }),
        case("linux-pod-windows-options", |t| {
            t["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
            t["spec"]["containers"] = json!([{"name": "a", "image": "nginx:1.27",
                "securityContext": {"windowsOptions": {"runAsUserName": "ContainerUser"}}}]);
            t["spec"].as_object_mut().unwrap().remove("initContainers");
        }),
        case("linux-os-windows-options", |t| {
            t["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
            t["spec"]["os"] = json!({"name": "linux"});
            t["spec"]["containers"] = json!([{"name": "a", "image": "nginx:1.27",
                "securityContext": {"windowsOptions": {"runAsUserName": "ContainerUser"}}}]);
            t["spec"].as_object_mut().unwrap().remove("initContainers");
        }),
        case("linux-pod-windows-hostpath", |t| {
            t["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
            t["spec"]["containers"] = json!([{"name": "a", "image": "nginx:1.27"}]);
            t["spec"].as_object_mut().unwrap().remove("initContainers");
            t["spec"]["volumes"] = json!([{"name": "v", "hostPath": {"path": "C:\\k"}}]);
        }),
        // Windows builds.
        case("build-mixed", |t| {
            t["spec"]["containers"][1]["image"] =
                json!("mcr.microsoft.com/windows/servercore:ltsc2019");
        }),
        case("build-mixed-tags", |t| {
            t["spec"]["initContainers"][0]["image"] =
                json!("example.com/tools:1.2-nanoserver-1809");
            t["spec"]["containers"][1]["image"] =
                json!("mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2022");
        }),
        case("build-node-mismatch", |t| {
            t["spec"]["nodeSelector"]["node.kubernetes.io/windows-build"] = json!("10.0.17763");
        }),
        case("build-unpinned-mixed", |t| {
            t["spec"].as_object_mut().unwrap().remove("nodeSelector");
            t["spec"]["containers"][1]["image"] =
                json!("mcr.microsoft.com/windows/servercore:ltsc2019");
        }),
        // Several error rules at once: the denial names each one.
        case("many-errors", |t| {
            merge(
                &mut t["spec"],
                &json!({"hostNetwork": true,
                        "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
                        "volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}]}),
            );
            t["spec"]["containers"][1]["volumeMounts"] = json!([{"name": "v", "mountPath": "C:\\a", "subPath": "a"}, {"name": "v", "mountPath": "C:\\b", "subPath": "b"}]);
            t["spec"]["containers"][0]["securityContext"] =
                json!({"privileged": true, "runAsUser": 3});
        }),
    ]
}

/// `template` (`{metadata, spec}`) as a workload of `kind` named `name`.
fn workload(kind: &str, name: &str, template: &Value) -> Value {
    let mut template = template.clone();
    merge(&mut template["metadata"], &json!({"labels": {"app": name}}));
    let selector = json!({"matchLabels": {"app": name}});
    let (api, spec) = match kind {
        "Pod" => {
            let mut meta = template["metadata"].clone();
            meta["name"] = json!(name);
            return json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]});
        }
        "Deployment" | "ReplicaSet" | "DaemonSet" => (
            "apps/v1",
            json!({"selector": selector, "template": template}),
        ),
        "StatefulSet" => (
            "apps/v1",
            json!({"selector": selector, "serviceName": name, "template": template}),
        ),
        "ReplicationController" => (
            "v1",
            json!({"selector": {"app": name}, "template": template}),
        ),
        "Job" => {
            template["spec"]["restartPolicy"] = json!("Never");
            ("batch/v1", json!({"template": template}))
        }
        "CronJob" => {
            template["spec"]["restartPolicy"] = json!("OnFailure");
            (
                "batch/v1",
                json!({"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}),
            )
        }
        other => panic!("no template for {other}"),
    };
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// Every hand-made case as a Pod, a Deployment, a ReplicaSet, a Job and a
/// CronJob, and a few as the other kinds.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn generated_workloads_policies_agree_with_the_webhook() {
    let s = setups("generated_workloads_policies_agree_with_the_webhook");
    compare_all(s, "generated", &generated_objects());
}

/// Every hand-made case as a Pod, a Deployment, a ReplicaSet, a Job and a
/// CronJob, and a few as the other kinds.
pub(crate) fn generated_objects() -> Vec<(String, Value)> {
    let mut objects = Vec::new();
    for (i, c) in cases().iter().enumerate() {
        let mut template = windows_template();
        (c.edit)(&mut template);
        let mut kinds = vec!["Pod", "Deployment", "ReplicaSet", "Job", "CronJob"];
        kinds.push(["DaemonSet", "StatefulSet", "ReplicationController"][i % 3]);
        for kind in kinds {
            let name = format!("{}-{}", c.name, kind.to_ascii_lowercase());
            objects.push((
                format!("{kind} {}", c.name),
                workload(kind, &name, &template),
            ));
        }
    }
    objects
}

/// The CEL cost of a large workload stays within the API server's budget
/// (1,000,000 per expression, 10,000,000 per policy binding): a pod
/// template with `n` containers, each with removable fields, several
/// subPath mounts and an image of one of two Windows builds, is judged by
/// the policies without a cost error, denied for the same error rules as
/// by the webhook (whose denial lists at most 50 findings: its rule ids
/// are a subset), and, without the errors, mutated as the webhook does.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn large_workloads_stay_within_the_cel_budget() {
    let s = setups("large_workloads_stay_within_the_cel_budget");
    let n = 150;
    let container = |i: usize, errors: bool| {
        let mut c = json!({
            "name": format!("c{i}"),
            "image": if errors && i % 2 == 1 { "mcr.microsoft.com/windows/servercore:ltsc2019" } else { SERVERCORE },
            "securityContext": {"privileged": true, "runAsUser": 1, "runAsGroup": 1,
                                "capabilities": {"add": ["NET_ADMIN"]}, "seLinuxOptions": {"type": "t"}},
            "volumeMounts": (0..6).map(|m| json!({"name": "v", "mountPath": format!("C:\\m{m}"), "subPath": format!("s{m}")})).collect::<Vec<_>>(),
        });
        if errors {
            c["resources"] = json!({"limits": {"hugepages-2Mi": "1Gi", "memory": "1Gi"}, "requests": {"memory": "1Gi"}});
        }
        c
    };
    for errors in [true, false] {
        let mut t = windows_template();
        t["spec"]["containers"] = (0..n).map(|i| container(i, errors)).collect();
        t["spec"]["initContainers"] = (0..10).map(|i| container(n + i, errors)).collect();
        t["spec"]["volumes"] = json!([{"name": "v", "emptyDir": {"medium": "Memory"}}]);
        for kind in ["Pod", "Deployment"] {
            let o = workload(
                kind,
                &format!("large-{errors}-{}", kind.to_ascii_lowercase()),
                &t,
            );
            let (w, p) = (submit(s.cp, WEBHOOK_NS, &o), submit(s.cp, POLICY_NS, &o));
            let what =
                format!("{kind} with {n} containers and 10 init containers, errors {errors}");
            for sign in [
                "cost",
                "budget",
                "failed messageExpression",
                "failed expression",
                "nternal error",
            ] {
                assert!(
                    !p.stderr.contains(sign),
                    "{what}: the policies failed ({sign}):\n{}",
                    p.stderr
                );
            }
            assert_eq!(
                w.admitted, p.admitted,
                "{what}: webhook {}\npolicy {}",
                w.stderr, p.stderr
            );
            if errors {
                assert_eq!(
                    p.denied,
                    BTreeSet::from(["WIN-BUILD-MIXED".to_owned(), "WIN-HUGEPAGES".to_owned()]),
                    "{what}: {}",
                    p.stderr
                );
                assert!(
                    w.denied.is_subset(&p.denied),
                    "{what}: webhook {:?}, policy {:?}",
                    w.denied,
                    p.denied
                );
            } else {
                let mut p = p;
                assert!(take_removal_records(&mut p).is_empty(), "{what}");
                assert_eq!(w.object, p.object, "{what}: the mutated objects differ");
                for rule in [
                    "WIN-PRIVILEGED",
                    "WIN-RUNASUSER",
                    "WIN-RUNASGROUP",
                    "WIN-CAPABILITIES",
                    "WIN-SELINUX",
                    "WIN-EMPTYDIR-MEMORY",
                    "WIN-SUBPATH",
                ] {
                    assert!(
                        p.warned.contains(rule),
                        "{what}: no {rule} warning:\n{}",
                        p.stderr
                    );
                }
            }
        }
    }
}

/// Updates count only what they introduce, as the webhook counts them: a
/// Deployment, a ReplicaSet and a Pod admitted while their namespace opted
/// out keep their problems, and a label change on each is admitted by
/// both setups; an update that adds a problem is denied by both for that
/// problem alone; an ephemeral container is mutated alike (KNOWN
/// "ephemeral container removals": without the warning).
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn updates_count_only_what_they_introduce() {
    let s = setups("updates_count_only_what_they_introduce");
    let cp = s.cp;
    let mut template = windows_template();
    template["spec"]["hostNetwork"] = json!(true);
    let setups = [("webhook", "upd-webhook"), ("policy", "upd-policy")];
    for (setup, ns) in setups {
        cp.namespace(
            ns,
            &[("winadmit-e2e", setup), ("winadmit.io/ignore", "true")],
        );
        for kind in ["Deployment", "ReplicaSet", "Pod"] {
            let mut o = workload(kind, "old", &template);
            o["metadata"]["namespace"] = json!(ns);
            let out = e2e::create(cp, &o, false);
            assert!(out.status.success(), "{ns}: {}", e2e::stderr(&out));
        }
        cp.kubectl_ok(&["label", "namespace", ns, "winadmit.io/ignore-"]);
    }
    // The opt-out is gone once a new pod with the same problem is denied.
    let deadline = Instant::now() + Duration::from_secs(30);
    let probe = workload("Pod", "probe", &template);
    for (_, ns) in setups {
        while submit(cp, ns, &probe).admitted {
            assert!(
                Instant::now() < deadline,
                "{ns}: the namespace label change did not take effect in 30 s"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let both = |args: &[&str]| -> (Answer, Answer) {
        let run = |ns: &str| {
            let mut a = vec!["-n", ns, "-o", "json"];
            a.extend(args);
            answer(&cp.kubectl(&a), ns)
        };
        (run(setups[0].1), run(setups[1].1))
    };
    let mut report = String::new();
    for resource in ["deployment", "replicaset", "pod"] {
        let (w, p) = both(&["label", resource, "old", "team=web"]);
        assert!(
            w.admitted,
            "the webhook refused a label change: {}",
            w.stderr
        );
        for d in differences(&w, &p) {
            let _ = writeln!(report, "- label {resource}: {d}\n    {}", p.stderr);
        }
    }
    let sysctls = r#"[{"op":"add","path":"/spec/template/spec/securityContext","value":{"sysctls":[{"name":"kernel.shm_rmid_forced","value":"1"}]}}]"#;
    let (w, p) = both(&["patch", "deployment", "old", "--type=json", "-p", sysctls]);
    assert_eq!(
        w.denied,
        BTreeSet::from(["WIN-SYSCTLS".to_owned()]),
        "the webhook: {}",
        w.stderr
    );
    for d in differences(&w, &p) {
        let _ = writeln!(report, "- add sysctls: {d}\n    {}", p.stderr);
    }
    let debug = r#"{"spec":{"ephemeralContainers":[{"name":"debug","image":"mcr.microsoft.com/windows/nanoserver:ltsc2022","securityContext":{"runAsUser":1}}]}}"#;
    let (w, mut p) = both(&[
        "patch",
        "pod",
        "old",
        "--subresource=ephemeralcontainers",
        "--type=strategic",
        "-p",
        debug,
    ]);
    // KNOWN "ephemeral container removals".
    assert!(
        w.admitted && w.warned.contains("WIN-RUNASUSER"),
        "the webhook: {}",
        w.stderr
    );
    p.warned.insert("WIN-RUNASUSER".to_owned());
    for d in differences(&w, &p) {
        let _ = writeln!(report, "- ephemeral container: {d}\n    {}", p.stderr);
    }
    assert!(
        report.is_empty(),
        "updates: the admission policies and the webhook differ:\n{report}"
    );
}

/// The documented installs (docs/admission-policy.md), on an API server of
/// their own, one after the other over the same objects: a client-side
/// `winadmit admission-policy | kubectl apply -f -` (the objects fit its
/// last-applied-configuration annotation), then
/// `... | kubectl apply --server-side --force-conflicts -f -` over it (the
/// command for exports too large for client-side apply: it takes over
/// the fields the client-side apply owns), then
/// `kubectl apply --server-side --force-conflicts -k
/// manifests/overlays/admission-policy`. After each, a Windows pod with
/// hostNetwork is refused.
#[test]
#[cfg_attr(
    no_control_plane,
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn documented_installs_work_over_each_other() {
    let cp = ControlPlane::start(&controlplane::binaries(
        "documented_installs_work_over_each_other",
    ));
    let out = binary::winadmit(&["admission-policy"]);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let export = String::from_utf8(out.stdout).unwrap();
    let ns = "install-check";
    cp.namespace(ns, &[]);
    let windows_host_network = e2e::pod(
        ns,
        "probe",
        json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "hostNetwork": true}),
    );

    let client_side = apply(&cp, &["apply", "-f", "-"], Some(&export));
    assert!(
        client_side.status.success(),
        "winadmit admission-policy | kubectl apply -f -: {}",
        String::from_utf8_lossy(&client_side.stderr)
    );
    wait_refused(&cp, &windows_host_network);

    let server_side = apply(
        &cp,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&export),
    );
    assert!(
        server_side.status.success(),
        "winadmit admission-policy | kubectl apply --server-side --force-conflicts -f -: {}",
        String::from_utf8_lossy(&server_side.stderr)
    );
    wait_refused(&cp, &windows_host_network);

    let overlay = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/overlays/admission-policy");
    let kustomize = apply(
        &cp,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            overlay.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        kustomize.status.success(),
        "kubectl apply --server-side --force-conflicts -k manifests/overlays/admission-policy: {}",
        String::from_utf8_lossy(&kustomize.stderr)
    );
    wait_refused(&cp, &windows_host_network);
}

/// `kubectl ARGS` (with `input` on stdin), asked again (three times at
/// most) while the API server answers Timeout: it type-checks each policy's
/// CEL when it stores it, which on a loaded machine can pass its request
/// timeout. Every apply here is idempotent.
fn apply(cp: &ControlPlane, args: &[&str], input: Option<&str>) -> std::process::Output {
    let mut last = None;
    for _ in 0..3 {
        let out = match input {
            Some(text) => cp.kubectl_stdin(args, text),
            None => cp.kubectl(args),
        };
        let timed_out = String::from_utf8_lossy(&out.stderr).contains("Timeout");
        if out.status.success() || !timed_out {
            return out;
        }
        last = Some(out);
    }
    last.expect("three answers")
}

/// Waits (30 s at most) until the API server refuses `pod` with WIN-HOSTNETWORK.
fn wait_refused(cp: &ControlPlane, pod: &Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = cp.dry_run_create(pod);
        if !answer.ok() && answer.message().contains("WIN-HOSTNETWORK") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the installed policies did not refuse the pod in 30 s: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
