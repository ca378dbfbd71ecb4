//! PolicyExceptions give one decision at every entry point: the core's
//! decision, `/validate` and `/report` on the server (its cluster view
//! holding the exceptions), `lint` and `report --from-file` with
//! `--exceptions DIR` (the binary), and the audit's results, on the same
//! pod with an exception granted in winadmit's namespace, the same
//! exception in the pod's own namespace (not listed: ignored), an ended
//! one, and none.

use std::sync::Arc;

use serde_json::{Value, json};
use tower::ServiceExt as _;
use winadmit::decision::cluster::ClusterLookup;
use winadmit::decision::decide::{self, PatchSource, Request, Verdict};
use winadmit::decision::engine::Context;
use winadmit::decision::exceptions::{DAY, ExceptionSet, Timestamp};
use winadmit::decision::policy::Policy;
use winadmit::decision::workload::Workload;
use winadmit::entry::admission::Admission;

use crate::admission::admission_review;
use crate::binary::winadmit;

/// The server's cluster view, holding only exceptions.
struct Exceptions(Arc<ExceptionSet>);

impl ClusterLookup for Exceptions {
    fn label(&self, _: &str, _: &str) -> Option<String> {
        None
    }
    fn exceptions(&self, _now: Timestamp) -> Option<Arc<ExceptionSet>> {
        Some(Arc::clone(&self.0))
    }
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "web"},
        "spec": {"hostNetwork": true, "nodeSelector": {"kubernetes.io/os": "windows"},
            "containers": [{"name": "app", "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
                "resources": {"limits": {"memory": "1Gi"}}}]}})
}

fn exception(namespace: &str, created: Timestamp, expires: Timestamp) -> Value {
    json!({"apiVersion": "winadmit.io/v1alpha1", "kind": "PolicyException",
        "metadata": {"name": "legacy-web", "namespace": namespace, "creationTimestamp": created.to_string()},
        "spec": {"rules": ["WIN-HOSTNETWORK"], "match": {"names": ["web-*"]},
            "reason": "the legacy agent listens on the node", "ticket": "OPS-1",
            "expiresAt": expires.to_string()}})
}

/// What each entry point says: allowed, and the rules it names as excepted.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    allowed: bool,
    excepted: Vec<String>,
}

async fn server_says(policy: &Policy, set: &Arc<ExceptionSet>, pod: &Value) -> (Said, Said) {
    let state = winadmit::entry::server::ServerState::new(
        Admission {
            policy: policy.clone(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: Some(Box::new(Exceptions(Arc::clone(set)))),
        },
        winadmit::entry::server::Limits::default(),
    );
    state.set_ready(true);
    let all = winadmit::entry::server::Endpoints {
        metrics: false,
        report: true,
    };
    let router = winadmit::entry::server::router_with(state, all);
    let post = |path: &'static str, ct: &'static str, body: Vec<u8>| {
        let router = router.clone();
        async move {
            let req = axum::http::Request::post(path)
                .header("content-type", ct)
                .body(axum::body::Body::from(body))
                .unwrap();
            let resp = router.oneshot(req).await.unwrap();
            assert_eq!(resp.status(), axum::http::StatusCode::OK, "{path}");
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        }
    };
    let v = post("/validate", "application/json", admission_review(pod)).await;
    let warnings: Vec<String> = v["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains(" excepted by PolicyException winadmit/legacy-web until "))
        .map(|w| w.split(' ').next().unwrap().to_owned())
        .collect();
    let validate = Said {
        allowed: v["response"]["allowed"].as_bool().unwrap(),
        excepted: warnings,
    };
    let r = post(
        "/report",
        "application/json",
        serde_json::to_vec(pod).unwrap(),
    )
    .await;
    (validate, report_says(&r["objects"][0]))
}

/// What a report's object (JSON) says.
fn report_says(o: &Value) -> Said {
    Said {
        allowed: o["verdict"] != "deny",
        excepted: o["skipped"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["exception"]["name"] == "legacy-web")
            .map(|s| s["rule"].as_str().unwrap().to_owned())
            .collect(),
    }
}

fn files_say(dir: &std::path::Path, now: Timestamp) -> (Said, Said) {
    let pod_file = dir.join("pod.json");
    let now = now.to_string();
    let args = |cmd: &str| -> Vec<String> {
        let mut a = vec![cmd.to_owned()];
        if cmd == "report" {
            a.push("--from-file".into());
        }
        a.extend([
            pod_file.display().to_string(),
            "--exceptions".into(),
            dir.join("exceptions").display().to_string(),
            "--now".into(),
            now.clone(),
            "--format".into(),
            "json".into(),
        ]);
        a
    };
    let lint = winadmit(&args("lint"));
    let v: Value = serde_json::from_slice(&lint.stdout).unwrap();
    let lint_said = Said {
        allowed: lint.status.code() == Some(0),
        excepted: v["excepted"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["rule"].as_str().unwrap().to_owned())
            .collect(),
    };
    let report = winadmit(&args("report"));
    let v: Value = serde_json::from_slice(&report.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&report.stderr)));
    (lint_said, report_says(&v["objects"][0]))
}

fn audit_says(policy: &Policy, set: &ExceptionSet, pod: &Value) -> Said {
    let cx = Context {
        exceptions: Some(set),
        ..Context::default()
    };
    let reports = winadmit::entry::audit::judge(policy, &cx, None, [pod]);
    let judged = winadmit::entry::audit::results(
        &reports,
        winadmit::entry::audit::Options {
            api: winadmit::entry::audit::ReportApi::OpenReports,
            info: false,
        },
    );
    Said {
        allowed: !judged
            .results
            .iter()
            .any(|r| r["properties"]["verdict"] == "deny"),
        excepted: judged
            .results
            .iter()
            .filter(|r| r["result"] == "skip")
            .map(|r| r["rule"].as_str().unwrap().to_owned())
            .collect(),
    }
}

#[tokio::test]
async fn every_entry_point_honours_an_exception_the_same_way() {
    let policy = Policy::default_policy();
    let now = winadmit::entry::exceptions::clock();
    let created = Timestamp(now.0 - DAY);
    let cases = [
        (
            "granted",
            Some(exception("winadmit", created, Timestamp(now.0 + 30 * DAY))),
            true,
        ),
        (
            "unlisted",
            Some(exception("web", created, Timestamp(now.0 + 30 * DAY))),
            false,
        ),
        (
            "ended",
            Some(exception(
                "winadmit",
                Timestamp(now.0 - 3 * DAY),
                Timestamp(now.0 - DAY),
            )),
            false,
        ),
        ("none", None, false),
    ];
    let pod = pod();
    for (case, object, honoured) in cases {
        let objects: Vec<Value> = object.iter().cloned().collect();
        let (set, _) = winadmit::entry::exceptions::sort(&policy, "winadmit", &objects, now);
        let set = Arc::new(set);
        let view = policy.pod_templates.read(&pod).unwrap();
        let w = Workload::from_view(&view).unwrap();
        let cx = Context {
            exceptions: Some(&set),
            ..Context::default()
        };
        let request = Request {
            reach: true,
            ..Request::manifest(PatchSource::None)
        };
        let d = decide::decide(&policy, &cx, &w, &request);
        let core = Said {
            allowed: d.validation != Verdict::Deny,
            excepted: d
                .evaluation
                .skipped
                .iter()
                .filter(|s| s.exception.is_some())
                .map(|s| s.rule.clone())
                .collect(),
        };
        let expected = Said {
            allowed: honoured,
            excepted: if honoured {
                vec!["WIN-HOSTNETWORK".into()]
            } else {
                Vec::new()
            },
        };
        assert_eq!(core, expected, "{case}: the core");
        let (validate, report) = server_says(&policy, &set, &pod).await;
        assert_eq!(validate, core, "{case}: /validate");
        assert_eq!(report, core, "{case}: /report");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("exceptions")).unwrap();
        std::fs::write(dir.path().join("pod.json"), pod.to_string()).unwrap();
        if let Some(o) = &object {
            std::fs::write(dir.path().join("exceptions/e.json"), o.to_string()).unwrap();
        }
        let (lint, report_files) = files_say(dir.path(), now);
        assert_eq!(lint, core, "{case}: lint");
        assert_eq!(report_files, core, "{case}: report --from-file");
        assert_eq!(audit_says(&policy, &set, &pod), core, "{case}: the audit");
    }
}
