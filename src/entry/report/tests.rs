use serde_json::json;

use super::body::{ReportError, report_body};
use serde_json::Value;

use crate::decision::engine::Context;
use crate::decision::policy::{Mode, Policy};
use crate::render::LintReport;
use crate::render::report::*;

fn windows_pod(name: &str, extra: Value) -> Value {
    let mut spec = json!({
        "nodeSelector": {"kubernetes.io/os": "windows"},
        "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022"}]
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
        s.extend(e);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

fn run(
    policy: &Policy,
    options: ReportOptions,
    objects: &[Value],
) -> (Vec<ObjectReport>, ReportSummary) {
    let cx = Context::default();
    let mut b = ReportBuilder::new(policy, &cx, options);
    let mut out = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let origin = Origin {
            file: "t",
            document: i,
        };
        if let Added::Report(r) = b.add(o, &origin) {
            out.push(*r);
        }
    }
    let f = b.finish();
    out.extend(f.objects);
    (out, f.summary)
}

fn folding() -> ReportOptions {
    ReportOptions {
        fold: true,
        ..ReportOptions::default()
    }
}

#[test]
fn verdict_follows_mode_and_severity() {
    let policy = Policy::from_yaml("p", "rules:\n  WIN-SUBPATH: warning\n").unwrap();
    let host_net = windows_pod("a", json!({"hostNetwork": true}));
    let sub = windows_pod(
        "b",
        json!({"containers": [{"name": "c", "image": "i", "volumeMounts": [
                   {"name": "v", "mountPath": "/x", "subPath": "y"},
                   {"name": "v", "mountPath": "/z", "subPath": "w"}]}],
               "volumes": [{"name": "v", "emptyDir": {}}]}),
    );
    let cases = [
        (Mode::Enforce, Verdict::Deny, Verdict::Warn),
        (Mode::Warn, Verdict::Warn, Verdict::Warn),
        (Mode::Audit, Verdict::Allow, Verdict::Allow),
    ];
    for (mode, error_verdict, warning_verdict) in cases {
        let options = ReportOptions {
            mode: Some(mode),
            ..ReportOptions::default()
        };
        let (r, s) = run(&policy, options, &[host_net.clone(), sub.clone()]);
        assert_eq!(r[0].verdict, error_verdict, "{mode:?} error");
        assert_eq!(r[1].verdict, warning_verdict, "{mode:?} warning");
        assert_eq!(r[0].mode, mode);
        assert_eq!(s.mode, Some(mode));
    }
    // A per-rule mode wins over the previewed mode. (The pod sets no memory
    // limit: WIN-MEMORY-LIMITS is off so its warning does not colour the verdict.)
    let policy = Policy::from_yaml(
        "p",
        "rules:\n  WIN-HOSTNETWORK: {mode: audit}\n  WIN-MEMORY-LIMITS: off\n",
    )
    .unwrap();
    let options = ReportOptions {
        mode: Some(Mode::Enforce),
        ..ReportOptions::default()
    };
    let (r, _) = run(&policy, options, &[host_net]);
    assert_eq!(r[0].verdict, Verdict::Allow);
}

#[test]
fn namespace_mode_label_in_the_input_applies() {
    let policy = Policy::default_policy();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"winadmit.io/mode": "warn"}}});
    let pod = windows_pod("a", json!({"hostNetwork": true}));
    let (r, s) = run(&policy, ReportOptions::default(), &[ns, pod]);
    assert_eq!(r[0].verdict, Verdict::Warn);
    assert_eq!(s.other_objects, 1);
}

fn owned(mut v: Value, kind: &str, name: &str) -> Value {
    v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u", "controller": true}]);
    v
}

fn deployment(name: &str, kind: &str, spec: &Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "ns"},
           "spec": {"template": {"spec": spec}}})
}

/// A Deployment's ReplicaSet scaled to 0 is rollout history: folded into
/// the Deployment whatever its old template says. Scaled up, or scaled to
/// 0 with no Deployment, it is reported.
#[test]
fn a_deployments_replica_set_scaled_to_zero_is_not_reported() {
    let policy = Policy::default_policy();
    let fixed = windows_pod("x", json!({}))["spec"].clone();
    let old = windows_pod("x", json!({"hostNetwork": true}))["spec"].clone();
    let dep = deployment("web", "Deployment", &fixed);
    let replicas = |name: &str, n: u32, owner: bool| {
        let mut rs = deployment(name, "ReplicaSet", &old);
        rs["spec"]["replicas"] = json!(n);
        if owner {
            rs = owned(rs, "Deployment", "web");
        }
        rs
    };
    let (r, s) = run(
        &policy,
        folding(),
        &[
            dep,
            replicas("web-old", 0, true),
            replicas("web-rollback", 1, true),
            replicas("by-hand", 0, false),
        ],
    );
    let names: Vec<&str> = r.iter().map(|o| o.name.as_str()).collect();
    assert!(!names.contains(&"web-old"), "{names:?}");
    assert!(
        names.contains(&"web-rollback") && names.contains(&"by-hand"),
        "{names:?}"
    );
    assert_eq!((s.objects, s.folded), (4, 1));
}

#[test]
fn owned_objects_fold_unless_they_differ() {
    let policy = Policy::default_policy();
    let pod = windows_pod("web-1", json!({"hostNetwork": true}));
    let spec = pod["spec"].clone();
    let dep = deployment("web", "Deployment", &spec);
    let rs = owned(
        deployment("web-7d", "ReplicaSet", &spec),
        "Deployment",
        "web",
    );
    let same = owned(pod.clone(), "ReplicaSet", "web-7d");
    let mut different = owned(pod, "ReplicaSet", "web-7d");
    different["metadata"]["name"] = json!("web-2");
    different["spec"]["hostPID"] = json!(true);
    // Owners first (as the live mode lists them) ...
    let (r, s) = run(
        &policy,
        folding(),
        &[dep.clone(), rs.clone(), same.clone(), different.clone()],
    );
    let names: Vec<&str> = r.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["web", "web-2"]);
    assert_eq!(r[1].owner.as_deref(), Some("ReplicaSet/web-7d"));
    assert_eq!((s.objects, s.reported, s.folded), (4, 2, 2));
    assert_eq!(s.namespaces[0].folded, 2);
    // ... or last (as `kubectl get pods,rs,deploy` writes them): same result.
    let (r2, s2) = run(&policy, folding(), &[different, same, rs, dep]);
    let mut names2: Vec<&str> = r2.iter().map(|o| o.name.as_str()).collect();
    names2.sort_unstable();
    assert_eq!(names2, ["web", "web-2"]);
    assert_eq!((s2.reported, s2.folded), (2, 2));
}

#[test]
fn without_folding_or_owner_every_object_is_reported() {
    let policy = Policy::default_policy();
    let pod = owned(windows_pod("web-1", json!({})), "ReplicaSet", "gone");
    let (r, s) = run(&policy, folding(), std::slice::from_ref(&pod));
    assert_eq!(r[0].owner.as_deref(), Some("ReplicaSet/gone"));
    assert_eq!(s.folded, 0);
    let (r, _) = run(&policy, ReportOptions::default(), &[pod]);
    assert_eq!(r[0].owner, None);
}

#[test]
fn patch_and_patched_object() {
    let policy = Policy::default_policy();
    let mut pod = windows_pod("a", json!({}));
    pod["spec"].as_object_mut().unwrap().remove("nodeSelector");
    pod["spec"]["os"] = json!({"name": "windows"});
    let options = ReportOptions {
        patched_objects: true,
        ..ReportOptions::default()
    };
    let (r, _) = run(&policy, options, &[pod]);
    assert!(!r[0].patch.is_empty());
    let patched = r[0].patched_object.as_ref().unwrap();
    assert_eq!(
        patched["spec"]["nodeSelector"]["kubernetes.io/os"],
        "windows"
    );
    assert_eq!(r[0].patch_reasons.len(), r[0].patch.len());
}

#[test]
fn findings_have_the_lint_json_fields_and_values() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: ns\nspec:\n  os: {name: windows}\n  hostNetwork: true\n  containers:\n  - name: c\n    image: i\n    securityContext:\n      privileged: true\n";
    let policy = Policy::default_policy();
    let cx = Context::default();
    let mut lint = LintReport::default();
    crate::entry::lint::lint_text("f.yaml", text, &policy, &cx, &mut lint);
    let mut b = ReportBuilder::new(&policy, &cx, ReportOptions::default());
    let mut reports = Vec::new();
    super::body::feed_yaml(&mut b, "f.yaml", text, &mut |r| {
        reports.push(r);
        Ok(())
    })
    .unwrap();
    assert_eq!(reports[0].findings, lint.findings);
    assert!(reports[0].findings.iter().all(|f| f.line > 0));
}

#[test]
fn report_body_reads_json_yaml_and_admission_reviews() {
    let policy = Policy::default_policy();
    let cx = Context::default();
    let o = ReportOptions::default();
    let pod = windows_pod("a", json!({"hostNetwork": true}));
    let one = serde_json::to_vec(&pod).unwrap();
    let r = report_body(&policy, &cx, &o, "application/json; charset=utf-8", &one).unwrap();
    assert_eq!(r.objects.len(), 1);
    assert_eq!(r.objects[0].verdict, Verdict::Deny);
    let list = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "List", "items": [pod.clone(), pod.clone()]}),
    )
    .unwrap();
    assert_eq!(
        report_body(&policy, &cx, &o, "application/json", &list)
            .unwrap()
            .objects
            .len(),
        2
    );
    let array = serde_json::to_vec(&json!([pod.clone(), pod.clone(), pod.clone()])).unwrap();
    assert_eq!(
        report_body(&policy, &cx, &o, "application/json", &array)
            .unwrap()
            .objects
            .len(),
        3
    );
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: n}\nspec:\n  os: {name: windows}\n  hostNetwork: true\n  containers: [{name: c, image: i}]\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
    let r = report_body(&policy, &cx, &o, "application/yaml", yaml.as_bytes()).unwrap();
    assert_eq!(r.objects.len(), 1);
    assert_eq!(r.objects[0].findings[0].line, 6);
    assert_eq!(r.summary.other_objects, 1);

    let mut obj = pod;
    obj["metadata"].as_object_mut().unwrap().remove("namespace");
    let review = |user: &str| {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "team-a", "operation": "CREATE", "userInfo": {"username": user},
                "object": obj}
        }))
        .unwrap()
    };
    let r = report_body(&policy, &cx, &o, "application/json", &review("alice")).unwrap();
    assert_eq!(r.objects[0].namespace.as_deref(), Some("team-a"));
    assert_eq!(r.objects[0].verdict, Verdict::Deny);
    let exempting = Policy::from_yaml("p", "exemptions:\n  users: [ci-bot]\n").unwrap();
    let r = report_body(&exempting, &cx, &o, "application/json", &review("ci-bot")).unwrap();
    assert_eq!(r.objects[0].verdict, Verdict::Allow);
    assert!(r.objects[0].exempt.is_some() && r.objects[0].findings.is_empty());
}

#[test]
fn report_body_bad_input_is_a_clear_error() {
    let policy = Policy::default_policy();
    let cx = Context::default();
    let o = ReportOptions::default();
    let err = |ct: &str, body: &[u8]| report_body(&policy, &cx, &o, ct, body).unwrap_err();
    assert!(matches!(
        err("text/plain", b"{}"),
        ReportError::UnsupportedMediaType(_)
    ));
    assert!(matches!(
        err("", b"{}"),
        ReportError::UnsupportedMediaType(_)
    ));
    assert!(matches!(err("application/json", b"  "), ReportError::Empty));
    let e = err("application/json", b"{\"kind\": \"Pod\",\n \"x\": }");
    assert!(e.to_string().contains("line 2"), "{e}");
    let e = err("application/yaml", b"a: [\n");
    assert!(matches!(e, ReportError::Yaml(_)), "{e}");
    let e = err(
        "application/json",
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    );
    assert!(matches!(e, ReportError::AdmissionReview(_)), "{e}");
    // An object with a wrongly typed field is an input error in the report, not a failure.
    let r = report_body(
        &policy,
        &cx,
        &o,
        "application/json",
        br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":"nope"}}"#,
    )
    .unwrap();
    assert_eq!(r.summary.input_errors, 1);
    assert!(
        r.input_errors[0]
            .message
            .contains("not a valid Kubernetes object")
    );
}

proptest::proptest! {
    #[test]
    fn report_body_never_panics(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256), yaml in proptest::prelude::any::<bool>()) {
        let policy = Policy::default_policy();
        let ct = if yaml { "application/yaml" } else { "application/json" };
        let _ = report_body(&policy, &Context::default(), &ReportOptions::default(), ct, &body);
    }
}

/// A complete list of credential specs with none in it: a pod naming one
/// is reported (the live report of a cluster with the CRD and no object).
#[test]
fn an_empty_list_of_credential_specs_is_complete() {
    let policy = Policy::default_policy();
    let pod = windows_pod(
        "a",
        json!({"securityContext": {"windowsOptions": {"gmsaCredentialSpecName": "webapp1"}}}),
    );
    let rules = |listed: bool| {
        let cx = Context::default();
        let mut b = ReportBuilder::new(&policy, &cx, ReportOptions::default());
        if listed {
            b.credential_specs_listed();
        }
        let origin = Origin {
            file: "t",
            document: 0,
        };
        let mut out: Vec<String> = Vec::new();
        if let Added::Report(r) = b.add(&pod, &origin) {
            out.extend(r.findings.iter().map(|f| f.rule.to_string()));
        }
        for r in b.finish().objects {
            out.extend(r.findings.iter().map(|f| f.rule.to_string()));
        }
        out
    };
    assert!(rules(true).contains(&"WIN-GMSA-NOT-FOUND".to_owned()));
    assert!(!rules(false).iter().any(|r| r.starts_with("WIN-GMSA")));
}
