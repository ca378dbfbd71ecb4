//! Custom resources with a pod template: the built-in kinds (Argo
//! Rollouts, OpenKruise, KEDA) and kinds a policy declares under
//! `podTemplates`, through every entry point: `lint`, `lint --fix`, `report` and
//! the webhook's `/validate` and `/mutate`. Fixtures are in
//! tests/fixtures/crd, shaped after each project's documentation.

use serde_json::{Value, json};
use winadmit::decision::engine::Context;
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::{self, Admission, Endpoint};
use winadmit::render::LintReport;
use winadmit::render::report::{Added, ObjectReport, Origin, ReportBuilder, ReportOptions};

use crate::admission as admission_review;
use admission_review::{admission_review, webhook};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/crd/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn agones() -> Policy {
    Policy::from_yaml("policy-agones.yaml", &fixture("policy-agones.yaml")).unwrap()
}

fn cx() -> Context<'static> {
    Context {
        cluster: winadmit::decision::cluster::TargetCluster::default(),
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
        runtime_classes: None,
    }
}

fn lint(file: &str, policy: &Policy) -> LintReport {
    let mut report = LintReport::default();
    winadmit::entry::lint::lint_text(file, &fixture(file), policy, &cx(), &mut report);
    report
}

fn objects(file: &str) -> Vec<Value> {
    winadmit::input::source::parse(&fixture(file))
        .unwrap()
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// The report of each object of a file, in order (no folding), and the
/// input problems.
fn report(file: &str, policy: &Policy) -> (Vec<ObjectReport>, Vec<String>) {
    let options = ReportOptions {
        mode: None,
        patched_objects: true,
        fold: false,
        namespaces: Vec::new(),
        namespace_lookup: None,
    };
    let mut b = ReportBuilder::new(policy, &cx(), options);
    let mut out = Vec::new();
    for (document, v) in objects(file).iter().enumerate() {
        if let Added::Report(r) = b.add(v, &Origin { file, document }) {
            out.push(*r);
        }
    }
    let finished = b.finish();
    out.extend(finished.objects);
    let problems = finished
        .input_errors
        .into_iter()
        .map(|p| p.message)
        .collect();
    (out, problems)
}

/// (rule, severity, field, message, line, column) of each lint finding.
fn lint_findings(r: &LintReport) -> Vec<(String, String, String, String, u64, u64)> {
    r.findings
        .iter()
        .map(|f| {
            (
                f.rule.to_owned(),
                format!("{:?}", f.severity),
                f.field.clone(),
                f.message.clone(),
                f.line,
                f.column,
            )
        })
        .collect()
}

fn report_findings(r: &ObjectReport) -> Vec<(String, String, String)> {
    r.findings
        .iter()
        .map(|f| (f.rule.to_owned(), f.field.clone(), f.message.clone()))
        .collect()
}

/// The central case: a Windows Argo Rollout with
/// `hostNetwork: true` gets the same findings, verdict and patch as the
/// equivalent Deployment (its template is at the same path), through lint,
/// lint --fix, report, /validate and /mutate.
#[test]
fn a_windows_rollout_with_host_network_is_judged_like_its_deployment_through_every_entry_point() {
    let policy = Policy::default_policy();

    // lint: same findings, at the same fields and source positions (the
    // two files are laid out line for line alike).
    let deployment = lint("deployment-windows.yaml", &policy);
    let rollout = lint("rollout-windows.yaml", &policy);
    assert!(
        rollout
            .findings
            .iter()
            .any(|f| f.rule == "WIN-HOSTNETWORK" && f.field == "spec.template.spec.hostNetwork"),
        "{rollout:#?}"
    );
    assert_eq!(lint_findings(&rollout), lint_findings(&deployment));
    assert!(rollout.findings.iter().all(|f| f.kind == "Rollout"));
    assert_eq!(rollout.summary, deployment.summary);

    // lint --fix: the same edits, at the same places.
    let (fixed_d, out_d) =
        winadmit::entry::fix::fix_text(&fixture("deployment-windows.yaml"), &policy, &cx());
    let (fixed_r, out_r) =
        winadmit::entry::fix::fix_text(&fixture("rollout-windows.yaml"), &policy, &cx());
    assert!(out_r.applied > 0, "{out_r:?}");
    assert_eq!(out_r.applied, out_d.applied);
    let body = |text: &str| -> Vec<String> {
        text.lines()
            .skip(3) // comment, apiVersion, kind
            .take_while(|l| *l != "  strategy:")
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(body(&fixed_r.unwrap()), body(&fixed_d.unwrap()));

    // report: same verdict, findings and patch.
    let (d, _) = report("deployment-windows.yaml", &policy);
    let (r, _) = report("rollout-windows.yaml", &policy);
    let (d, r) = (&d[0], &r[0]);
    assert_eq!(r.kind, "Rollout");
    assert_eq!(r.verdict, d.verdict);
    assert_eq!(r.verdict, winadmit::render::report::Verdict::Deny);
    assert!(r.targets_windows);
    assert_eq!(report_findings(r), report_findings(d));
    assert_eq!(r.patch, d.patch);
    assert!(!r.patch.is_empty());

    // The webhook: same answer from /validate (but for the kind's name in
    // the message) and the same JSON Patch from /mutate.
    let d_obj = &objects("deployment-windows.yaml")[0];
    let r_obj = &objects("rollout-windows.yaml")[0];
    let vd = webhook(&policy, Endpoint::Validate, d_obj);
    let vr = webhook(&policy, Endpoint::Validate, r_obj);
    assert_eq!(vr["allowed"], json!(false), "{vr:#}");
    assert_eq!(vr["status"]["code"], vd["status"]["code"]);
    let message = |v: &Value| v["status"]["message"].as_str().unwrap().to_owned();
    assert!(message(&vr).contains("spec.template.spec.hostNetwork"));
    assert_eq!(
        message(&vr).replace("Rollout", "Deployment"),
        message(&vd),
        "{vr:#}"
    );
    assert_eq!(vr["warnings"], vd["warnings"]);
    let md = webhook(&policy, Endpoint::Mutate, d_obj);
    let mr = webhook(&policy, Endpoint::Mutate, r_obj);
    assert!(mr["patch"].is_array(), "{mr:#}");
    assert_eq!(mr["patch"], md["patch"]);
    assert_eq!(mr["patchType"], md["patchType"]);
    assert_eq!(serde_json::to_value(&r.patch).unwrap(), mr["patch"]);
}

/// For each built-in kind's fixture: the Windows objects have findings under
/// the kind's own template path, the Linux one has none, and lint, report
/// and the webhook agree.
#[test]
fn every_built_in_kind_is_checked_at_its_own_template_path() {
    let policy = Policy::default_policy();
    let cases: [(&str, &[&str]); 7] = [
        ("rollout-linux.yaml", &[]),
        ("cloneset.yaml", &["spec.template.spec."]),
        ("advanced-statefulset.yaml", &["spec.template.spec."]),
        ("advanced-daemonset.yaml", &["spec.template.spec."]),
        ("broadcastjob.yaml", &["spec.template.spec."]),
        (
            "advancedcronjob.yaml",
            &[
                "spec.template.jobTemplate.spec.template.spec.",
                "spec.template.broadcastJobTemplate.spec.template.spec.",
            ],
        ),
        ("scaledjob.yaml", &["spec.jobTargetRef.template.spec."]),
    ];
    for (file, windows_prefixes) in cases {
        let objects = objects(file);
        let linted = lint(file, &policy);
        assert!(linted.input_errors.is_empty(), "{file}: {linted:#?}");
        assert_eq!(linted.summary.workloads, objects.len(), "{file}");
        let (reports, problems) = report(file, &policy);
        assert!(problems.is_empty(), "{file}: {problems:?}");
        assert_eq!(reports.len(), objects.len(), "{file}");
        for (i, object) in objects.iter().enumerate() {
            let name = object["metadata"]["name"].as_str().unwrap();
            let windows = name.starts_with("win-");
            let lint_fields: Vec<&str> = linted
                .findings
                .iter()
                .filter(|f| f.name == name)
                .map(|f| f.field.as_str())
                .collect();
            let r = &reports[i];
            assert_eq!(r.name, name);
            let validate = webhook(&policy, Endpoint::Validate, object);
            let mutate = webhook(&policy, Endpoint::Mutate, object);
            if windows {
                let prefix = windows_prefixes[usize::from(name == "win-sweep")];
                assert!(
                    lint_fields.contains(&format!("{prefix}hostNetwork").as_str()),
                    "{file} {name}: {lint_fields:?}"
                );
                assert!(lint_fields.iter().all(|f| f.starts_with(prefix)));
                // Findings point at their line in the file.
                assert!(linted.findings.iter().all(|f| f.line > 0));
                assert!(r.targets_windows, "{file} {name}");
                assert_eq!(r.verdict, winadmit::render::report::Verdict::Deny);
                assert_eq!(
                    report_findings(r)
                        .iter()
                        .map(|f| f.1.as_str())
                        .collect::<Vec<_>>(),
                    lint_fields
                );
                assert_eq!(
                    validate["allowed"],
                    json!(false),
                    "{file} {name}: {validate:#}"
                );
                let message = validate["status"]["message"].as_str().unwrap();
                assert!(
                    message.contains(&format!("{prefix}hostNetwork")),
                    "{message}"
                );
                // Whatever /mutate patches lies under the pod template.
                let pointer = format!("/{}", prefix.trim_end_matches(".spec.").replace('.', "/"));
                for op in mutate["patch"].as_array().into_iter().flatten() {
                    let path = op["path"].as_str().unwrap();
                    assert!(path.starts_with(&pointer), "{file} {name}: {path}");
                }
                assert_eq!(
                    serde_json::to_value(&r.patch).unwrap(),
                    mutate["patch"]
                        .clone()
                        .as_array()
                        .map_or(json!([]), |a| json!(a))
                );
            } else {
                assert!(lint_fields.is_empty(), "{file} {name}: {lint_fields:?}");
                assert!(!r.targets_windows);
                assert_eq!(r.verdict, winadmit::render::report::Verdict::Allow);
                assert!(r.findings.is_empty() && r.patch.is_empty());
                assert_eq!(
                    validate["allowed"],
                    json!(true),
                    "{file} {name}: {validate:#}"
                );
                assert!(validate["warnings"].is_null(), "{validate:#}");
                assert!(mutate["patch"].is_null(), "{mutate:#}");
            }
        }
    }
}

/// `spec.workloadRef`: the template is the referenced Deployment's, which
/// is checked on its own. Every entry point says so; none calls it an error.
#[test]
fn a_rollout_with_a_workload_ref_has_nothing_to_check_and_says_so() {
    let policy = Policy::default_policy();
    let linted = lint("rollout-workloadref.yaml", &policy);
    assert!(linted.findings.is_empty() && linted.input_errors.is_empty());
    assert_eq!(linted.notes.len(), 1, "{linted:#?}");
    assert!(
        linted.notes[0]
            .message
            .contains("spec.workloadRef takes it from Deployment/rollout-ref-deployment"),
        "{:?}",
        linted.notes
    );
    let (reports, problems) = report("rollout-workloadref.yaml", &policy);
    assert!(problems.is_empty());
    assert_eq!(reports[0].verdict, winadmit::render::report::Verdict::Allow);
    assert!(reports[0].note.as_deref().unwrap().contains("workloadRef"));
    let object = &objects("rollout-workloadref.yaml")[0];
    for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
        let r = webhook(&policy, endpoint, object);
        assert_eq!(r["allowed"], json!(true), "{r:#}");
        assert!(r["patch"].is_null());
    }
}

/// A kind the policy declares is checked like a built-in one; without the
/// policy it is left alone.
#[test]
fn a_kind_declared_in_the_policy_is_checked_at_its_path() {
    let policy = agones();
    let linted = lint("gameserver.yaml", &policy);
    assert!(linted.input_errors.is_empty(), "{linted:#?}");
    assert_eq!(linted.summary.workloads, 3);
    let fields: Vec<(&str, &str)> = linted
        .findings
        .iter()
        .map(|f| (f.kind.as_str(), f.field.as_str()))
        .collect();
    assert!(
        fields.contains(&("GameServer", "spec.template.spec.hostNetwork")),
        "{fields:?}"
    );
    assert!(fields.contains(&("Fleet", "spec.template.spec.template.spec.hostNetwork")));
    assert!(linted.findings.iter().all(|f| f.name.starts_with("win-")));

    let (reports, problems) = report("gameserver.yaml", &policy);
    assert!(problems.is_empty());
    let verdicts: Vec<_> = reports
        .iter()
        .map(|r| (r.name.as_str(), r.verdict))
        .collect();
    use winadmit::render::report::Verdict::{Allow, Deny};
    assert_eq!(
        verdicts,
        [
            ("win-simple-game-server", Deny),
            ("simple-game-server", Allow),
            ("win-fleet", Deny)
        ]
    );

    let objects = objects("gameserver.yaml");
    let v = webhook(&policy, Endpoint::Validate, &objects[0]);
    assert_eq!(v["allowed"], json!(false), "{v:#}");
    assert!(
        v["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("winadmit: GameServer win-simple-game-server"),
        "{v:#}"
    );
    let m = webhook(&policy, Endpoint::Mutate, &objects[2]);
    assert_eq!(
        m["patch"],
        json!([{"op": "remove", "path": "/spec/template/spec/template/spec/containers/0/securityContext/runAsUser"}]),
        "{m:#}"
    );
    for op in m["patch"].as_array().unwrap() {
        assert!(
            op["path"]
                .as_str()
                .unwrap()
                .starts_with("/spec/template/spec/template/"),
            "{m:#}"
        );
    }
    assert_eq!(
        webhook(&policy, Endpoint::Validate, &objects[1])["allowed"],
        json!(true)
    );

    // Not declared: not a workload.
    let default = Policy::default_policy();
    let linted = lint("gameserver.yaml", &default);
    assert_eq!(linted.summary.workloads, 0);
    assert_eq!(
        webhook(&default, Endpoint::Validate, &objects[0])["allowed"],
        json!(true)
    );
}

/// A declared path that leads nowhere is an input error naming the object,
/// the path and the policy entry, in every entry point.
#[test]
fn a_declared_path_without_a_template_is_an_input_error_naming_the_object() {
    let policy = agones();
    let expected = "GameServer broken: spec.template does not exist, but the policy's podTemplates says agones.dev GameServer keeps its pod template there";
    let linted = lint("gameserver-no-template.yaml", &policy);
    assert_eq!(linted.input_errors.len(), 1, "{linted:#?}");
    assert!(
        linted.input_errors[0].message.contains(expected),
        "{linted:#?}"
    );
    assert_eq!(linted.input_errors[0].line, Some(1));
    let (reports, problems) = report("gameserver-no-template.yaml", &policy);
    assert!(reports.is_empty());
    assert!(problems[0].contains(expected), "{problems:?}");
    let object = &objects("gameserver-no-template.yaml")[0];
    let r = webhook(&policy, Endpoint::Validate, object);
    assert_eq!(r["allowed"], json!(false));
    assert_eq!(r["status"]["code"], json!(400));
    assert!(
        r["status"]["message"].as_str().unwrap().contains(expected),
        "{r:#}"
    );
}

#[test]
fn pod_templates_in_a_policy_are_parsed_strictly() {
    let load = |entries: &str| {
        Policy::from_yaml("p.yaml", &format!("podTemplates:\n{entries}"))
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(
        load("  - {group: agones.dev, kind: GameServer, path: spec.template}"),
        None
    );
    let cases = [
        (
            "  - {group: agones.dev, kind: GameServer, path: spec.template, version: v1}",
            "unknown field `version`",
        ),
        (
            "  - {group: agones.dev, kind: GameServer}",
            "missing field `path`",
        ),
        (
            "  - {group: agones.dev/v1, kind: GameServer, path: spec.template}",
            "give the group alone (`agones.dev`)",
        ),
        (
            "  - {group: agones.dev, kind: GameServer, path: 'spec.ports[0].template'}",
            "not dotted keys",
        ),
        (
            "  - {group: agones.dev, kind: GameServer, path: ''}",
            "podTemplates[0]: path must not be empty",
        ),
        (
            "  - {group: argoproj.io, kind: Rollout, path: spec.template}",
            "argoproj.io Rollout is built in (pod template at spec.template)",
        ),
        (
            "  - {group: apps, kind: Deployment, path: spec.template}",
            "apps Deployment is built in",
        ),
        (
            "  - {group: agones.dev, kind: Fleet, path: spec.template}\n  - {group: agones.dev, kind: Fleet, path: spec.t}",
            "podTemplates[1]: agones.dev Fleet is declared twice",
        ),
    ];
    for (entries, expected) in cases {
        let err = load(entries).unwrap_or_else(|| panic!("{entries} loaded"));
        assert!(err.contains("p.yaml"), "{err}");
        assert!(err.contains(expected), "{entries}: {err}");
    }
}

/// `lint --fix` edits the template where each kind keeps it: a KEDA
/// ScaledJob's `spec.jobTargetRef.template`, an OpenKruise AdvancedCronJob's
/// broadcast-job template, and a declared Agones Fleet's nested template.
#[test]
fn lint_fix_edits_each_kind_at_its_template() {
    let text = "\
apiVersion: keda.sh/v1alpha1
kind: ScaledJob
metadata:
  name: win-worker
spec:
  jobTargetRef:
    template:
      spec:
        os:
          name: windows
        containers:
          - name: worker
            image: mcr.microsoft.com/dotnet/runtime:8.0-nanoserver-ltsc2022
            securityContext:
              windowsOptions: {runAsUserName: ContainerUser}
              capabilities:
                drop: [ALL]
        restartPolicy: Never
  triggers:
    - type: cron
      metadata: {timezone: Etc/UTC, start: 0 * * * *, end: 10 * * * *, desiredReplicas: \"1\"}
---
apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: win-sweep
spec:
  schedule: \"*/5 * * * *\"
  template:
    broadcastJobTemplate:
      spec:
        template:
          spec:
            os:
              name: windows
            containers:
              - name: sweep
                image: mcr.microsoft.com/windows/nanoserver:ltsc2022
            restartPolicy: Never
";
    let policy = Policy::default_policy();
    let (fixed, outcome) = winadmit::entry::fix::fix_text(text, &policy, &cx());
    let fixed = fixed.unwrap_or_else(|| panic!("{outcome:?}"));
    assert!(outcome.skipped.is_empty(), "{outcome:?}");
    let docs: Vec<Value> = winadmit::input::source::parse(&fixed)
        .unwrap()
        .into_iter()
        .map(|d| d.value)
        .collect();
    let job = &docs[0]["spec"]["jobTargetRef"]["template"]["spec"];
    assert_eq!(
        job["nodeSelector"]["kubernetes.io/os"], "windows",
        "{fixed}"
    );
    assert!(
        job["containers"][0]["securityContext"]["capabilities"].is_null(),
        "{fixed}"
    );
    assert_eq!(
        docs[0]["spec"]["triggers"][0]["type"], "cron",
        "the rest is untouched"
    );
    let sweep = &docs[1]["spec"]["template"]["broadcastJobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(
        sweep["nodeSelector"]["kubernetes.io/os"], "windows",
        "{fixed}"
    );
    // What was fixed is no longer reported, at the same paths.
    let mut after = LintReport::default();
    winadmit::entry::lint::lint_text("fixed.yaml", &fixed, &policy, &cx(), &mut after);
    assert!(
        after.findings.iter().all(|f| f.rule != "WIN-CAPABILITIES"),
        "{after:#?}"
    );

    // A declared kind: the Fleet's runAsUser goes, at its nested path.
    let agones = agones();
    let source = fixture("gameserver.yaml");
    let (fixed, outcome) = winadmit::entry::fix::fix_text(&source, &agones, &cx());
    let fixed = fixed.unwrap_or_else(|| panic!("{outcome:?}"));
    let docs = winadmit::input::source::parse(&fixed).unwrap();
    let container = &docs[2].value["spec"]["template"]["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["securityContext"]["runAsUser"].is_null(),
        "{fixed}"
    );
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    // The lines before the Fleet are as they were.
    let fleet_at = source.find("kind: Fleet").unwrap();
    assert_eq!(&fixed[..fleet_at], &source[..fleet_at]);
}

/// The HTTP entry points themselves (`POST /validate`, `POST /mutate` on the
/// server's router): the Rollout gets the Deployment's answer.
#[tokio::test]
async fn the_servers_routes_answer_a_rollout_like_its_deployment() {
    use tower::ServiceExt as _;
    let state = winadmit::entry::server::ServerState::new(
        Admission {
            policy: Policy::default_policy(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        },
        winadmit::entry::server::Limits::default(),
    );
    state.set_ready(true);
    let router = winadmit::entry::server::router(state);
    let call = |path: &'static str, object: Value| {
        let router = router.clone();
        async move {
            let req = axum::http::Request::post(path)
                .header("content-type", "application/json")
                .body(axum::body::Body::from(admission_review(&object)))
                .unwrap();
            let resp = router.oneshot(req).await.unwrap();
            assert_eq!(resp.status(), axum::http::StatusCode::OK);
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            let mut v: Value = serde_json::from_slice(&bytes).unwrap();
            v["response"]["uid"] = Value::Null;
            v["response"].take()
        }
    };
    let d = objects("deployment-windows.yaml").remove(0);
    let r = objects("rollout-windows.yaml").remove(0);
    for path in ["/validate", "/mutate"] {
        let from_d = call(path, d.clone()).await;
        let from_r = call(path, r.clone()).await;
        let text = |v: &Value| v.to_string().replace("Rollout", "Deployment");
        assert_eq!(text(&from_r), text(&from_d), "{path}");
        if path == "/validate" {
            assert_eq!(from_r["allowed"], json!(false));
        } else {
            assert!(from_r["patch"].is_string(), "{from_r:#}");
        }
    }
}

/// On UPDATE only what the update introduces is enforced, for custom
/// resources as for Deployments: the old object is read at the same
/// template path (built-in or declared).
#[test]
fn updates_enforce_only_what_they_introduce() {
    let update = |policy: &Policy, old: &Value, new: &Value| {
        let mut review: Value = serde_json::from_slice(&admission_review(new)).unwrap();
        review["request"]["operation"] = json!("UPDATE");
        review["request"]["oldObject"] = old.clone();
        let adm = Admission {
            policy: policy.clone(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        };
        let out = admission::review(
            &adm,
            Endpoint::Validate,
            &serde_json::to_vec(&review).unwrap(),
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out.body).unwrap();
        v["response"]["allowed"].as_bool().unwrap()
    };
    let relabel = |o: &Value| {
        let mut o = o.clone();
        o["metadata"]["labels"] = json!({"team": "games"});
        o
    };
    let cases = [
        (
            Policy::default_policy(),
            objects("rollout-windows.yaml").remove(0),
        ),
        (
            Policy::default_policy(),
            objects("scaledjob.yaml").remove(0),
        ),
        (agones(), objects("gameserver.yaml").remove(2)),
    ];
    for (policy, old) in cases {
        // A label change on an object that already had hostNetwork: allowed.
        assert!(update(&policy, &old, &relabel(&old)), "{old}");
        // The same object newly given hostNetwork: denied.
        let mut clean = old.to_string().replace("\"hostNetwork\":true,", "");
        if !clean.contains("hostNetwork") {
            clean = clean.replace(",\"hostNetwork\":true", "");
        }
        let clean: Value = serde_json::from_str(&clean).unwrap();
        assert!(!clean.to_string().contains("hostNetwork"), "{clean}");
        assert!(!update(&policy, &clean, &old), "{old}");
    }
}
