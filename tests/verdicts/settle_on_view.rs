//! `/mutate` settles its patch on the view (`patch::settle_on_view`) when
//! the view models every operation, and on a parsed tree otherwise
//! (`patch::settle_from`, the reference the reports and `lint --fix` use).
//! Both must give the same patch, explanations and notes: compared here
//! over generated pods and workloads under several mutation policies, and
//! over every corpus workload.

use proptest::prelude::*;
use serde_json::{Value, json};
use winadmit::decision::decide::{self, Decision, PatchSource, Request};
use winadmit::decision::engine::Context;
use winadmit::decision::patch::{self, Mutation, MutationContext};
use winadmit::decision::policy::Policy;
use winadmit::decision::workload::Workload;

use crate::corpus_dir as corpus_location;

/// The decision with the patch settled on the view where it can be
/// (`Patch`, what `/mutate` asks for) or on the tree (`Preview`).
fn decision(policy: &Policy, object: &Value, preview: bool) -> Option<Decision> {
    let view = policy.pod_templates.read(object).ok()?;
    let workload = Workload::from_view(&view)?;
    let source = if preview {
        PatchSource::Preview(object)
    } else {
        PatchSource::Patch(object)
    };
    Some(decide::decide(
        policy,
        &Context::default(),
        &workload,
        &Request::manifest(source),
    ))
}

fn same_patch(policy: &Policy, object: &Value) -> Result<(), String> {
    let (Some(view), Some(tree)) = (
        decision(policy, object, false),
        decision(policy, object, true),
    ) else {
        return Ok(());
    };
    let show = |m: &Mutation| {
        format!(
            "{}\n{:#?}\n{:#?}",
            serde_json::to_string_pretty(&m.ops).unwrap(),
            m.explanations,
            m.notes
        )
    };
    if view.patch.ops != tree.patch.ops
        || view.patch.explanations != tree.patch.explanations
        || view.patch.notes != tree.patch.notes
    {
        return Err(format!(
            "on the view:\n{}\non the tree:\n{}",
            show(&view.patch),
            show(&tree.patch)
        ));
    }
    Ok(())
}

fn policies() -> Vec<Policy> {
    let yaml = |text: &str| Policy::from_yaml("policy.yaml", text).unwrap();
    vec![
        Policy::default_policy(),
        yaml("mutation: {setOsName: true}\n"),
        yaml("mutation: {setOsName: true}\nstance: strict\n"),
        yaml(
            "mutation: {setOsName: true, isolation: process, injectWindowsBuild: true, inferFromImages: true}\n",
        ),
        yaml("mutation: {setOsName: true, removeNoOpFields: false, emptyDirOffMemory: false}\n"),
    ]
}

/// Settles `fixture`'s object on the view directly: it must not decline
/// (so the comparisons below are not between two settles on the tree) and
/// must equal the settle on the tree.
fn settles_on_the_view(fixture: &str) -> Mutation {
    let policy = &policies()[1];
    let path = format!(
        "{}/tests/fixtures/admission/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let review: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let object = &review["request"]["object"];
    let view = policy.pod_templates.read(object).unwrap();
    let w = Workload::from_view(&view).unwrap();
    let cx = Context::default();
    let eval = winadmit::decision::engine::evaluate(policy, &w, &cx);
    let mcx = MutationContext {
        create: true,
        ..MutationContext::default()
    };
    let first = patch::mutation(policy, &w, &eval, mcx);
    let keep = |_: &winadmit::decision::finding::PatchOperation| true;
    let on_view = patch::settle_on_view(policy, &cx, mcx, &w, &eval, &keep, first.clone())
        .expect("every operation of this patch is modelled on the view");
    let on_tree = patch::settle_from(policy, &cx, mcx, object, None, &keep, Some(first));
    assert_eq!(on_view, on_tree);
    on_view
}

#[test]
fn the_view_settles_spec_os() {
    let m = settles_on_the_view("pod-windows-create.json");
    let paths: Vec<&str> = m.ops.iter().map(|op| op.path().as_str()).collect();
    assert_eq!(paths, ["/spec/os"]);
}

/// A selector and three removals; `spec.os` is left out because the
/// settled pod would still carry a field the API server forbids with it.
#[test]
fn the_view_settles_removals_and_drops_spec_os() {
    let m = settles_on_the_view("pod-windows-fixable.json");
    let paths: Vec<&str> = m.ops.iter().map(|op| op.path().as_str()).collect();
    assert!(paths.contains(&"/spec/nodeSelector"), "{paths:?}");
    assert!(
        paths.contains(&"/spec/containers/0/securityContext/capabilities"),
        "{paths:?}"
    );
    assert!(!paths.contains(&"/spec/os"), "{paths:?}");
}

fn container() -> impl Strategy<Value = Value> {
    let field = prop::sample::select(vec![
        ("privileged", json!(false)),
        ("privileged", json!(true)),
        ("allowPrivilegeEscalation", json!(false)),
        ("runAsUser", json!(1000)),
        ("runAsGroup", json!(1000)),
        ("runAsNonRoot", json!(true)),
        ("readOnlyRootFilesystem", json!(false)),
        ("readOnlyRootFilesystem", json!(true)),
        ("procMount", json!("Default")),
        ("capabilities", json!({"drop": ["ALL"]})),
        ("capabilities", json!({"add": ["NET_ADMIN"]})),
        ("seccompProfile", json!({"type": "RuntimeDefault"})),
        ("seLinuxOptions", json!({"level": "s0"})),
        (
            "windowsOptions",
            json!({"runAsUserName": "ContainerAdministrator"}),
        ),
    ]);
    let image = prop::sample::select(vec![
        "mcr.microsoft.com/windows/nanoserver:ltsc2022",
        "mcr.microsoft.com/windows/servercore:ltsc2019",
        "contoso/app:1.0",
        "nginx:1.27",
    ]);
    (image, prop::collection::vec(field, 0..4)).prop_map(|(image, fields)| {
        let mut c = json!({"name": "c", "image": image});
        if !fields.is_empty() {
            let sc: serde_json::Map<String, Value> =
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            c["securityContext"] = Value::Object(sc);
        }
        c
    })
}

fn pod_spec() -> impl Strategy<Value = Value> {
    let selector = prop::sample::select(vec![
        json!(null),
        json!({}),
        json!({"kubernetes.io/os": "windows"}),
        json!({"kubernetes.io/os": "linux"}),
        json!({"beta.kubernetes.io/os": "windows"}),
        json!({"node.kubernetes.io/windows-build": "10.0.20348", "app/tier": "web"}),
    ]);
    let pod_security = prop::sample::select(vec![
        ("runAsUser", json!(1000)),
        ("runAsNonRoot", json!(true)),
        ("fsGroup", json!(2000)),
        ("seccompProfile", json!({"type": "RuntimeDefault"})),
        ("supplementalGroups", json!([1])),
        (
            "sysctls",
            json!([{"name": "net.core.somaxconn", "value": "1024"}]),
        ),
    ]);
    let tolerations = prop::sample::select(vec![
        json!(null),
        json!([]),
        json!([{"key": "os", "value": "windows", "effect": "NoSchedule"}]),
        json!([{"key": "other", "operator": "Exists"}]),
    ]);
    (
        selector,
        any::<bool>(),
        prop::collection::vec(pod_security, 0..3),
        tolerations,
        prop::collection::vec(container(), 1..3),
        prop::collection::vec(container(), 0..2),
        prop::option::of(prop::sample::select(vec!["Memory", ""])),
        prop::option::of(any::<bool>()),
    )
        .prop_map(
            |(selector, os, pod_security, tolerations, containers, init, medium, share)| {
                let name = |list: Vec<Value>, prefix: &str| -> Vec<Value> {
                    list.into_iter()
                        .enumerate()
                        .map(|(i, mut c)| {
                            c["name"] = json!(format!("{prefix}{i}"));
                            c
                        })
                        .collect()
                };
                let mut spec = json!({"containers": name(containers, "c")});
                if !init.is_empty() {
                    spec["initContainers"] = json!(name(init, "i"));
                }
                if !selector.is_null() {
                    spec["nodeSelector"] = selector;
                }
                if os {
                    spec["os"] = json!({"name": "windows"});
                }
                if !pod_security.is_empty() {
                    let sc: serde_json::Map<String, Value> = pod_security
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect();
                    spec["securityContext"] = Value::Object(sc);
                }
                if !tolerations.is_null() {
                    spec["tolerations"] = tolerations;
                }
                if let Some(m) = medium {
                    spec["volumes"] = json!([{"name": "scratch", "emptyDir": {"medium": m}}]);
                }
                if let Some(share) = share {
                    spec["shareProcessNamespace"] = json!(share);
                }
                spec
            },
        )
}

fn workload() -> impl Strategy<Value = Value> {
    let annotations = prop::sample::select(vec![
        json!(null),
        json!({}),
        json!({"app/owner": "shop"}),
        json!({"experimental.windows.kubernetes.io/isolation-type": "hyperv"}),
    ]);
    (
        prop::sample::select(vec!["Pod", "Deployment", "CronJob"]),
        annotations,
        pod_spec(),
    )
        .prop_map(|(kind, annotations, spec)| {
            let mut meta = json!({"name": "w", "namespace": "shop"});
            if !annotations.is_null() {
                meta["annotations"] = annotations;
            }
            match kind {
                "Pod" => json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}),
                "Deployment" => json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "w", "namespace": "shop"},
                    "spec": {"selector": {}, "template": {"metadata": meta, "spec": spec}}}),
                _ => json!({"apiVersion": "batch/v1", "kind": "CronJob",
                    "metadata": {"name": "w", "namespace": "shop"},
                    "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
                        "template": {"spec": spec}}}}}),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn the_view_and_the_tree_settle_the_same_patch(object in workload(), which in 0usize..5) {
        let policy = &policies()[which];
        if let Err(e) = same_patch(policy, &object) {
            prop_assert!(false, "{e}\n{object:#}");
        }
    }
}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn corpus_workloads_settle_the_same_on_the_view_and_the_tree() {
    let dir =
        corpus_location::corpus_dir("corpus_workloads_settle_the_same_on_the_view_and_the_tree");
    let mut checked = 0;
    let mut wrong = Vec::new();
    let files = corpus_location::manifests(&dir);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let Ok(docs) = winadmit::input::source::parse(&text) else {
            continue;
        };
        for doc in docs {
            for policy in &policies() {
                if decision(policy, &doc.value, false).is_none() {
                    continue;
                }
                checked += 1;
                if let Err(e) = same_patch(policy, &doc.value) {
                    wrong.push(format!("{}: {e}", file.display()));
                }
            }
        }
    }
    assert!(checked > 250, "only {checked} corpus decisions");
    assert!(
        wrong.is_empty(),
        "view and tree disagree:\n{}",
        wrong.join("\n")
    );
}
