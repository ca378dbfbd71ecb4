//! The same object gets the same decision from every entry point.
//!
//! For each object, the core's [`decide`] is the reference; then each entry point
//! is asked in its own language and its answer compared with the whole
//! decision:
//! - `/validate` (AdmissionReview in, response out): allowed, warnings,
//!   denial, and on the patched object the verdict after the patch;
//! - `/mutate`: the patch and its warnings;
//! - `/admit`: what `/mutate` and then `/validate` on the patched object
//!   answer between them;
//! - `lint` (the object as a file): every finding;
//! - `lint --fix`, then `lint` on the fixed file: the findings of the
//!   patched object;
//! - `report` from a file (JSON): verdict, exemption, findings and patch;
//! - the live `report` through the fake API server (a real process): the
//!   verdict and patch of each object.
//!
//! Objects: generated pods (proptest) and every workload of the corpus.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;
use serde_json::{Value, json};
use winadmit::decision::decide::{self, Decision, PatchSource, Request, Verdict};
use winadmit::decision::engine::Context;
use winadmit::decision::policy::Policy;
use winadmit::decision::workload::Workload;
use winadmit::entry::admission::Endpoint;
use winadmit::entry::report::body::report_body;
use winadmit::render::LintReport;
use winadmit::render::report::ReportOptions;

use crate::admission as admission_review;
use crate::corpus_dir as corpus_location;
#[allow(dead_code)]
use crate::fake_api;
use admission_review::{patch_ops, webhook};

/// The core's decision, as the webhook would make it on CREATE.
fn core(policy: &Policy, object: &Value) -> Option<Decision> {
    let view = policy.pod_templates.read(object).ok()?;
    let workload = Workload::from_view(&view)?;
    if workload.note().is_some() {
        return None;
    }
    let request = Request {
        reach: true,
        ..Request::manifest(PatchSource::Preview(object))
    };
    Some(decide::decide(
        policy,
        &Context::default(),
        &workload,
        &request,
    ))
}

fn findings_of(d: &Decision) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = d
        .evaluation
        .findings
        .iter()
        .map(|f| {
            (
                f.rule.to_owned(),
                f.field.to_string(),
                format!("{:?}", f.severity),
            )
        })
        .collect();
    v.sort();
    v
}

fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| w.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn patch_json(d: &Decision) -> Value {
    serde_json::to_value(&d.patch.ops).unwrap()
}

fn lint_findings(policy: &Policy, text: &str) -> Vec<(String, String, String)> {
    let mut report = LintReport::default();
    winadmit::entry::lint::lint_text("o.json", text, policy, &Context::default(), &mut report);
    assert!(
        report.input_errors.is_empty(),
        "{:?}\n{text}",
        report.input_errors
    );
    let mut v: Vec<_> = report
        .findings
        .iter()
        .map(|f| {
            (
                f.rule.to_owned(),
                f.field.clone(),
                format!("{:?}", f.severity),
            )
        })
        .collect();
    v.sort();
    v
}

/// Every entry point but the live report, on one object; `Err` names the first
/// entry point that disagrees.
fn entry_points_agree(policy: &Policy, object: &Value) -> Result<(), String> {
    let Some(d) = core(policy, object) else {
        return Ok(());
    };
    let name = format!(
        "{} {}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    );
    let fail = |entry_point: &str, detail: String| Err(format!("{name}: {entry_point}: {detail}"));

    // /validate on the object as given.
    let v = webhook(policy, Endpoint::Validate, object);
    let allowed = v["allowed"].as_bool().unwrap();
    if allowed != (d.validation != Verdict::Deny) {
        return fail("/validate allowed", format!("{v} vs {:?}", d.validation));
    }
    if d.exemption.is_none() {
        if warnings(&v) != d.warnings() {
            return fail("/validate warnings", format!("{v} vs {:?}", d.warnings()));
        }
        if d.validation == Verdict::Deny {
            let view = policy.pod_templates.read(object).unwrap();
            let w = Workload::from_view(&view).unwrap();
            if v["status"]["message"].as_str() != d.denial_message(&w).as_deref() {
                return fail("/validate denial", v.to_string());
            }
        }
    }

    // /mutate: the decision's settled patch and its warnings.
    let m = webhook(policy, Endpoint::Mutate, object);
    let returned = Value::from(patch_ops(&m));
    if returned != patch_json(&d) {
        return fail("/mutate patch", format!("{returned} vs {}", patch_json(&d)));
    }
    if d.exemption.is_none() && warnings(&m) != d.patch_warnings() {
        return fail(
            "/mutate warnings",
            format!("{m} vs {:?}", d.patch_warnings()),
        );
    }

    // /validate on the patched object: the verdict after the patch.
    if let Some(patched) = &d.patched {
        let after = webhook(policy, Endpoint::Validate, patched);
        if after["allowed"].as_bool().unwrap() != (d.verdict != Verdict::Deny) {
            return fail(
                "/validate after the patch",
                format!("{after} vs {:?}", d.verdict),
            );
        }
    } else if d.verdict != d.validation {
        return fail(
            "verdict without a patch",
            format!("{:?} vs {:?}", d.verdict, d.validation),
        );
    }

    // /admit (the one-call install): /mutate's patch, then /validate's
    // answer on the patched object, as the two webhooks give between them.
    let a = webhook(policy, Endpoint::Admit, object);
    let validated = webhook(
        policy,
        Endpoint::Validate,
        d.patched.as_ref().unwrap_or(object),
    );
    let allowed = validated["allowed"].as_bool().unwrap();
    let mut expected_warnings = warnings(&m);
    for w in warnings(&validated) {
        if !expected_warnings.contains(&w) {
            expected_warnings.push(w);
        }
    }
    let expected_patch = if allowed {
        Value::from(patch_ops(&m))
    } else {
        json!([])
    };
    if a["allowed"] != validated["allowed"]
        || a["status"]["message"] != validated["status"]["message"]
        || Value::from(patch_ops(&a)) != expected_patch
        || warnings(&a) != expected_warnings
    {
        return fail(
            "/admit",
            format!("{a} vs /mutate {m} then /validate {validated}"),
        );
    }

    // lint: every finding of the object as written.
    let text = serde_json::to_string_pretty(object).unwrap();
    let linted = lint_findings(policy, &text);
    if linted != findings_of(&d) {
        return fail("lint", format!("{linted:?} vs {:?}", findings_of(&d)));
    }

    // lint --fix, then lint: the findings of the patched object (lint
    // ignores the webhook's reach, so its patch is the one without it).
    let view = policy.pod_templates.read(object).unwrap();
    let w = Workload::from_view(&view).unwrap();
    let as_manifest = decide::decide(
        policy,
        &Context::default(),
        &w,
        &Request::manifest(PatchSource::Preview(object)),
    );
    let (fixed, outcome) = winadmit::entry::fix::fix_text(&text, policy, &Context::default());
    match (&fixed, &as_manifest.patched) {
        (None, None) => {}
        (Some(fixed), Some(patched)) => {
            let refixed = lint_findings(policy, fixed);
            let expected = core(policy, patched).map(|d| findings_of(&d));
            if Some(&refixed) != expected.as_ref() {
                return fail(
                    "lint --fix, re-linted",
                    format!("{refixed:?} vs {expected:?}"),
                );
            }
        }
        (None, Some(_)) if !outcome.skipped.is_empty() => {}
        _ => {
            return fail(
                "lint --fix",
                format!(
                    "wrote {:?}, decision patch {}",
                    fixed.is_some(),
                    patch_json(&as_manifest)
                ),
            );
        }
    }

    // report from a file.
    let options = ReportOptions {
        patched_objects: true,
        ..ReportOptions::default()
    };
    let out = report_body(
        policy,
        &Context::default(),
        &options,
        "application/json",
        &serde_json::to_vec(object).unwrap(),
    )
    .map_err(|e| format!("{name}: report: {e}"))?;
    let r = serde_json::to_value(&out).unwrap()["objects"][0].clone();
    let verdict: Verdict = serde_json::from_value(r["verdict"].clone()).unwrap();
    if verdict != d.verdict {
        return fail("report verdict", format!("{verdict:?} vs {:?}", d.verdict));
    }
    if r["patch"] != patch_json(&d) {
        return fail(
            "report patch",
            format!("{} vs {}", r["patch"], patch_json(&d)),
        );
    }
    if r["exempt"].as_str() != d.exemption.as_ref().map(decide::Exemption::reason) {
        return fail("report exemption", r["exempt"].to_string());
    }
    let reported = r["findings"].as_array().map_or(0, Vec::len);
    if reported != d.evaluation.findings.len() {
        return fail(
            "report findings",
            format!("{reported} vs {}", d.evaluation.findings.len()),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Generated pods

fn image() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "mcr.microsoft.com/windows/nanoserver:ltsc2022",
        "mcr.microsoft.com/windows/servercore:ltsc2019",
        "contoso/app:1.0-ltsc2022",
        "mcr.microsoft.com/dotnet/framework/aspnet:4.8",
        "nginx:1.27",
        "busybox",
    ])
}

fn container() -> impl Strategy<Value = Value> {
    (
        image(),
        prop::option::of(any::<bool>()),
        prop::option::of(0i64..2000),
        prop::option::of(any::<bool>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(image, privileged, run_as_user, ape, seccomp, mount)| {
            let mut sc = serde_json::Map::new();
            if let Some(p) = privileged {
                sc.insert("privileged".into(), json!(p));
            }
            if let Some(u) = run_as_user {
                sc.insert("runAsUser".into(), json!(u));
            }
            if let Some(a) = ape {
                sc.insert("allowPrivilegeEscalation".into(), json!(a));
            }
            if seccomp {
                sc.insert("seccompProfile".into(), json!({"type": "RuntimeDefault"}));
            }
            let mut c = json!({"name": "c", "image": image,
                "resources": {"limits": {"memory": "512Mi", "cpu": "500m"}}});
            if !sc.is_empty() {
                c["securityContext"] = Value::Object(sc);
            }
            if mount {
                c["volumeMounts"] =
                    json!([{"name": "data", "mountPath": "C:\\data", "subPath": "x"}]);
            }
            c
        })
}

fn pod() -> impl Strategy<Value = Value> {
    let targeting = prop::sample::select(vec![
        "none",
        "selector",
        "beta-selector",
        "os",
        "linux-selector",
        "build",
        "affinity",
    ]);
    (
        targeting,
        prop::collection::vec(container(), 1..4),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["Memory", ""])),
        prop::sample::select(vec!["web", "kube-system", "shop"]),
        any::<u16>(),
    )
        .prop_map(|(targeting, mut containers, host_network, host_pid, medium, ns, id)| {
            for (i, c) in containers.iter_mut().enumerate() {
                c["name"] = json!(format!("c{i}"));
            }
            let mut spec = json!({"containers": containers});
            match targeting {
                "selector" => spec["nodeSelector"] = json!({"kubernetes.io/os": "windows"}),
                "beta-selector" => spec["nodeSelector"] = json!({"beta.kubernetes.io/os": "windows"}),
                "os" => spec["os"] = json!({"name": "windows"}),
                "linux-selector" => spec["nodeSelector"] = json!({"kubernetes.io/os": "linux"}),
                "build" => {
                    spec["nodeSelector"] = json!({"node.kubernetes.io/windows-build": "10.0.20348"});
                }
                "affinity" => {
                    spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}]}}});
                }
                _ => {}
            }
            if host_network {
                spec["hostNetwork"] = json!(true);
            }
            if host_pid {
                spec["hostPID"] = json!(true);
            }
            let mut volume = json!({"name": "data"});
            match medium {
                Some(m) => volume["emptyDir"] = json!({"medium": m}),
                None => volume["hostPath"] = json!({"path": "C:\\data"}),
            }
            spec["volumes"] = json!([volume]);
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{id}"), "namespace": ns}, "spec": spec})
        })
}

fn policies() -> Vec<Policy> {
    vec![
        Policy::default_policy(),
        Policy::from_yaml(
            "set-os.yaml",
            "mutation: {setOsName: true}\nstance: strict\n",
        )
        .unwrap(),
        Policy::from_yaml("audit.yaml", "mode: warn\n").unwrap(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn generated_pods_get_one_decision_from_every_entry_point(pod in pod(), which in 0usize..3) {
        let policy = &policies()[which];
        if let Err(e) = entry_points_agree(policy, &pod) {
            prop_assert!(false, "{e}\n{pod:#}");
        }
    }
}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn corpus_workloads_get_one_decision_from_every_entry_point() {
    let dir =
        corpus_location::corpus_dir("corpus_workloads_get_one_decision_from_every_entry_point");
    let mut checked = 0;
    let mut wrong = Vec::new();
    let policy = Policy::default_policy();
    let files = corpus_location::manifests(&dir);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let Ok(docs) = winadmit::input::source::parse(&text) else {
            continue;
        };
        for doc in docs {
            if core(&policy, &doc.value).is_none() {
                continue;
            }
            checked += 1;
            if let Err(e) = entry_points_agree(&policy, &doc.value) {
                wrong.push(format!("{}: {e}", file.display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} corpus workloads");
    assert!(
        wrong.is_empty(),
        "entry points disagree:\n{}",
        wrong.join("\n")
    );
}

// ---------------------------------------------------------------------
// The live report

/// Writes typed list responses for the fake API server: `pods` as the
/// PodList, every other resource empty.
fn write_fixtures(dir: &Path, pods: &[Value]) {
    let empty = |kind: &str, api: &str| json!({"kind": kind, "apiVersion": api, "metadata": {}, "items": []});
    let lists = [
        ("cronjobs", empty("CronJobList", "batch/v1")),
        ("daemonsets", empty("DaemonSetList", "apps/v1")),
        ("deployments", empty("DeploymentList", "apps/v1")),
        ("jobs", empty("JobList", "batch/v1")),
        ("namespaces", empty("NamespaceList", "v1")),
        ("nodes", empty("NodeList", "v1")),
        ("replicasets", empty("ReplicaSetList", "apps/v1")),
        (
            "replicationcontrollers",
            empty("ReplicationControllerList", "v1"),
        ),
        (
            "runtimeclasses",
            empty("RuntimeClassList", "node.k8s.io/v1"),
        ),
        ("statefulsets", empty("StatefulSetList", "apps/v1")),
    ];
    for (plural, list) in lists {
        std::fs::write(dir.join(format!("{plural}.json")), list.to_string()).unwrap();
    }
    // Typed lists: the items carry no kind.
    let items: Vec<Value> = pods
        .iter()
        .map(|p| {
            let mut p = p.clone();
            let o = p.as_object_mut().unwrap();
            o.remove("kind");
            o.remove("apiVersion");
            p
        })
        .collect();
    let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items});
    std::fs::write(dir.join("pods.json"), list.to_string()).unwrap();
}

#[test]
fn the_live_report_decides_as_the_core_does() {
    use proptest::strategy::ValueTree as _;
    use proptest::test_runner::{Config, TestRunner};
    // 48 generated pods with distinct names (a deterministic runner).
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let mut pods: BTreeMap<String, Value> = BTreeMap::new();
    while pods.len() < 48 {
        let p = pod().new_tree(&mut runner).unwrap().current();
        let key = format!(
            "{}/{}",
            p["metadata"]["namespace"].as_str().unwrap(),
            p["metadata"]["name"].as_str().unwrap()
        );
        pods.insert(key, p);
    }
    let dir = tempfile::tempdir().unwrap();
    let fixtures = dir.path().join("api");
    std::fs::create_dir(&fixtures).unwrap();
    let pods: Vec<Value> = pods.into_values().collect();
    write_fixtures(&fixtures, &pods);
    let api = fake_api::FakeApi::start(fake_api::Behaviour {
        fixtures: Some(fixtures),
        ..fake_api::Behaviour::default()
    });
    let kc = api.kubeconfig(dir.path(), fake_api::TOKEN);
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args([
            "report",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--format",
            "json",
        ])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let objects = report["objects"].as_array().unwrap();
    let policy = Policy::default_policy();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for pod in &pods {
        let d = core(&policy, pod).unwrap();
        let (ns, name) = (&pod["metadata"]["namespace"], &pod["metadata"]["name"]);
        let Some(r) = objects
            .iter()
            .find(|o| &o["namespace"] == ns && &o["name"] == name)
        else {
            // A clean Linux pod may be left out of a report; a decision with
            // anything to say may not.
            if !d.evaluation.findings.is_empty() || d.verdict != Verdict::Allow {
                wrong.push(format!("{ns}/{name}: missing from the live report"));
            }
            continue;
        };
        seen += 1;
        let verdict: Verdict = serde_json::from_value(r["verdict"].clone()).unwrap();
        if verdict != d.verdict || r["patch"] != patch_json(&d) {
            wrong.push(format!(
                "{ns}/{name}: live {verdict:?} {} vs core {:?} {}",
                r["patch"],
                d.verdict,
                patch_json(&d)
            ));
        }
    }
    assert!(seen >= 24, "only {seen} of the pods were reported");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
