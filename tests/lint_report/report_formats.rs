//! PolicyReport output against the wgpolicyk8s.io/v1alpha2 schema's shape,
//! the HTML report in headless Chromium, and `POST /report` through the router.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::binary::winadmit;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tower::ServiceExt as _;

const KUBECTL_JSON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/report/kubectl-get-all.json"
);

// --- wgpolicyk8s.io/v1alpha2, written from the CRD schema, strict. ---

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyReport {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    #[serde(default)]
    scope: Option<ObjectReference>,
    #[serde(default)]
    scope_selector: Option<Value>,
    summary: Option<ReportSummary>,
    #[serde(default)]
    results: Vec<PolicyReportResult>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectMeta {
    name: String,
    namespace: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportSummary {
    pass: Option<i64>,
    fail: Option<i64>,
    warn: Option<i64>,
    error: Option<i64>,
    skip: Option<i64>,
}

#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum ResultKind {
    Pass,
    Fail,
    Warn,
    Error,
    Skip,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Severity {
    Critical,
    High,
    Medium,
    Low,
    Info,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PolicyReportResult {
    source: Option<String>,
    policy: String,
    rule: Option<String>,
    category: Option<String>,
    severity: Option<Severity>,
    timestamp: Option<Value>,
    result: Option<ResultKind>,
    scored: Option<bool>,
    #[serde(default)]
    resources: Vec<ObjectReference>,
    resource_selector: Option<Value>,
    message: Option<String>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ObjectReference {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    field_path: Option<String>,
}

#[test]
fn policy_reports_match_the_wgpolicy_schema() {
    let out = winadmit(&[
        "report",
        "--from-file",
        KUBECTL_JSON,
        "--format",
        "policyreport",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let reports: Vec<PolicyReport> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let by_ns: BTreeMap<String, &PolicyReport> = reports
        .iter()
        .map(|r| (r.metadata.namespace.clone().unwrap_or_default(), r))
        .collect();
    assert_eq!(
        by_ns.keys().map(String::as_str).collect::<Vec<_>>(),
        ["batch", "kube-system", "ops", "shop", "web"]
    );
    for r in &reports {
        assert_eq!(r.api_version, "wgpolicyk8s.io/v1alpha2");
        assert_eq!(r.kind, "PolicyReport");
        assert!(r.scope.is_none() && r.scope_selector.is_none());
        assert_eq!(
            r.metadata.name,
            format!("winadmit-{}", r.metadata.namespace.as_deref().unwrap())
        );
        assert_eq!(
            r.metadata.labels["app.kubernetes.io/managed-by"],
            "winadmit"
        );
        let s = r.summary.as_ref().unwrap();
        let count = |k: ResultKind| r.results.iter().filter(|x| x.result == Some(k)).count() as i64;
        assert_eq!(s.pass, Some(count(ResultKind::Pass)));
        assert_eq!(s.fail, Some(count(ResultKind::Fail)));
        assert_eq!(s.warn, Some(count(ResultKind::Warn)));
        assert_eq!(s.error, Some(count(ResultKind::Error)));
        assert_eq!(s.skip, Some(count(ResultKind::Skip)));
        for res in &r.results {
            assert_eq!(res.source.as_deref(), Some("winadmit"));
            assert_eq!(res.policy, "winadmit");
            assert!(res.category.is_some() && res.scored == Some(true) && res.message.is_some());
            assert!(res.timestamp.is_none() && res.resource_selector.is_none());
            assert_eq!(res.resources.len(), 1);
            let obj = &res.resources[0];
            assert_eq!(obj.namespace, r.metadata.namespace);
            assert!(obj.api_version.is_some() && obj.kind.is_some() && obj.name.is_some());
            assert!(
                obj.uid.is_none() && obj.resource_version.is_none() && obj.field_path.is_none()
            );
        }
    }
    // Findings come in file order (JSON inputs have positions too).
    let ops = by_ns["ops"]
        .results
        .iter()
        .find(|r| r.rule.as_deref() == Some("WIN-HOSTNETWORK"))
        .unwrap();
    assert_eq!(
        (ops.result, &ops.severity),
        (Some(ResultKind::Fail), &Some(Severity::High))
    );
    assert_eq!(ops.properties["verdict"], "deny");
    assert_eq!(ops.properties["field"], "spec.hostNetwork");
    assert_eq!(by_ns["shop"].results[0].result, Some(ResultKind::Pass));
    let _ = (
        Severity::Critical,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    );
}

#[test]
fn objects_without_a_namespace_go_to_a_cluster_policy_report() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.yaml");
    std::fs::write(
        &f,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  os: {name: windows}\n  hostPID: true\n  containers: [{name: c, image: i}]\n",
    )
    .unwrap();
    let out = winadmit(&[
        "report",
        "--from-file",
        f.to_str().unwrap(),
        "--format",
        "policyreport",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let reports: Vec<PolicyReport> = serde_saphyr::from_multiple(&text).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].kind, "ClusterPolicyReport");
    assert_eq!(reports[0].metadata.namespace, None);
    assert_eq!(reports[0].metadata.name, "winadmit-cluster");
}

#[test]
fn linux_workloads_are_no_results_of_windows_rules() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.yaml");
    std::fs::write(
        &f,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx, namespace: shop}\nspec:\n  selector: {matchLabels: {app: n}}\n  template:\n    metadata: {labels: {app: n}}\n    spec:\n      nodeSelector: {kubernetes.io/os: linux}\n      containers: [{name: c, image: nginx}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: iis, namespace: shop}\nspec:\n  os: {name: windows}\n  nodeSelector: {kubernetes.io/os: windows}\n  containers: [{name: c, image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022, resources: {limits: {memory: 1Gi, cpu: 1}}}]\n",
    )
    .unwrap();
    let out = winadmit(&[
        "report",
        "--from-file",
        f.to_str().unwrap(),
        "--format",
        "policyreport",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let reports: Vec<PolicyReport> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let results: Vec<&PolicyReportResult> = reports.iter().flat_map(|r| &r.results).collect();
    let of = |name: &str| -> Vec<&PolicyReportResult> {
        results
            .iter()
            .copied()
            .filter(|r| r.resources[0].name.as_deref() == Some(name))
            .collect()
    };
    let windows_rules: Vec<&str> = winadmit::decision::rules::ALL
        .iter()
        .filter(|r| r.info.scope == winadmit::decision::rules::Scope::Windows)
        .map(|r| r.info.id)
        .collect();
    let linux = of("nginx");
    assert!(!linux.is_empty(), "{text}");
    for r in &linux {
        let rule = r.rule.as_deref().unwrap_or_default();
        assert_ne!(
            rule, "all-rules",
            "a Linux workload passes only the rules that apply to it: {text}"
        );
        assert!(
            !windows_rules.contains(&rule),
            "{rule} is a Windows rule: {text}"
        );
        if let Some(listed) = r.properties.get("rules") {
            for id in listed.split(',') {
                assert!(
                    !windows_rules.contains(&id),
                    "{id} listed for a Linux workload"
                );
            }
        }
    }
    // A Windows workload without findings still passes every rule.
    let windows = of("iis");
    if windows.iter().all(|r| r.result == Some(ResultKind::Pass)) {
        assert_eq!(windows[0].rule.as_deref(), Some("all-rules"), "{text}");
    }
}

// --- HTML in headless Chromium ---

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

fn headless(browser: &str, profile: &Path, width: u32, height: u32) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--window-size={width},{height}"));
    c
}

fn dump_dom(browser: &str, page: &Path, profile: &Path) -> String {
    let out = headless(browser, profile, 1280, 1000)
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The page's layout at `width` CSS pixels, measured by a script appended
/// to a copy of the page: `(scrollWidth, innerWidth, cells wider than
/// their column or past the window, width of the first message cell)`.
fn layout(browser: &str, page: &Path, profile: &Path, width: u32) -> (i64, i64, i64, i64) {
    let probe = page.with_extension(format!("probe-{width}.html"));
    let html = std::fs::read_to_string(page).unwrap();
    let script = "<script>(function(){var de=document.documentElement,w=window.innerWidth,bad=0;\
document.querySelectorAll('#findings td, #top-rules td').forEach(function(td){var b=td.getBoundingClientRect();\
if(b.right>w+1||td.scrollWidth>td.clientWidth+1)bad++;});\
var m=document.querySelector('#findings tbody tr td:nth-child(5)');\
document.body.setAttribute('data-layout',[de.scrollWidth,w,bad,m?Math.round(m.getBoundingClientRect().width):0].join(' '));})();</script>";
    std::fs::write(&probe, html.replace("</body>", &format!("{script}</body>"))).unwrap();
    let out = headless(browser, profile, width, 1000)
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom
        .find("data-layout=\"")
        .unwrap_or_else(|| panic!("no layout measured at {width}px"))
        + "data-layout=\"".len();
    let v: Vec<i64> = dom[at..]
        .split('"')
        .next()
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    (v[0], v[1], v[2], v[3])
}

/// A full-page screenshot at `width`, kept under the target directory for
/// a person to look at.
fn screenshot(browser: &str, page: &Path, profile: &Path, width: u32) -> std::path::PathBuf {
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("html-report-{width}.png"));
    let _ = std::fs::remove_file(&png);
    let out = headless(browser, profile, width, 2200)
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        png.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    png
}

#[test]
#[cfg_attr(
    no_chromium,
    ignore = "needs headless Chromium on PATH (the Debian package `chromium`)"
)]
fn html_report_renders_its_chart_and_table_in_chromium() {
    let browser = chromium().expect("chromium, chromium-browser or google-chrome on PATH");
    let dir = tempfile::tempdir().unwrap();
    // Hostile data must stay data: a pod whose name and field values look like markup.
    let extra = dir.path().join("hostile.yaml");
    std::fs::write(
        &extra,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: \"x</script><img src=x onerror=alert(1)>\", namespace: evil}\nspec:\n  os: {name: windows}\n  hostIPC: true\n  containers: [{name: c, image: i}]\n",
    )
    .unwrap();
    let page = dir.path().join("report.html");
    // The counts below predate WIN-MEMORY-LIMITS (a warning on most pods of
    // the fixture); keep it out of this rendering test.
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "rules:\n  WIN-MEMORY-LIMITS: off\n").unwrap();
    let out = winadmit(&[
        "report",
        "--policy",
        policy.to_str().unwrap(),
        "--from-file",
        KUBECTL_JSON,
        "--from-file",
        extra.to_str().unwrap(),
        "--format",
        "html",
        "--output",
        page.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http") && !html.contains("<link"),
        "external asset"
    );
    assert!(
        !html.contains("<img src=x"),
        "unescaped data in the page source"
    );

    let dom = dump_dom(&browser, &page, &dir.path().join("profile"));
    assert!(dom.contains("id=\"findings\""), "no table in {dom}");
    // One table row per finding (7: six from the cluster, one hostile).
    let rows = dom.matches("<tr data-rule=").count();
    assert_eq!(rows, 7, "{dom}");
    for rule in ["WIN-PRIVILEGED", "WIN-HOSTNETWORK", "WIN-RUNASUSER"] {
        assert!(
            dom.contains(&format!("<tr data-rule=\"{rule}\"")),
            "{rule} row missing"
        );
    }
    // Charts: a bar per namespace with findings and per rule, with counts.
    assert!(dom.contains("aria-label=\"chart-namespaces\""), "{dom}");
    assert!(
        dom.contains("class=\"bar\" data-label=\"web\" data-count=\"4\""),
        "{dom}"
    );
    assert!(
        dom.contains("class=\"bar\" data-label=\"WIN-PRIVILEGED\" data-count=\"3\""),
        "{dom}"
    );
    assert!(
        dom.contains("showing 7 of 7 matching (7 findings)"),
        "{dom}"
    );
    // The hostile name is shown as text, escaped, and no <img> element was created.
    assert!(
        dom.contains("x&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "{dom}"
    );
    assert!(!dom.contains("<img"), "markup from data was rendered");

    // The page an operator sends: a short title, the facts judged against,
    // verdicts first, a legend, fixes, doc links, file:line, patches.
    assert!(
        html.contains("<title>winadmit dry-run report: 2 files</title>"),
        "the title counts files instead of listing them"
    );
    assert!(
        dom.contains("Kubernetes 1.") && dom.contains("--kubernetes-version"),
        "target facts"
    );
    let summary_at = dom.find("id=\"verdicts\"").expect("verdict cards");
    assert!(
        summary_at < dom.find("id=\"findings\"").unwrap(),
        "summary first"
    );
    assert!(dom.contains("class=\"card deny\""), "{dom}");
    assert!(dom.contains("id=\"legend\""));
    assert!(dom.contains("class=\"fix\""), "fix text");
    assert!(
        dom.contains("href=\"https://kubernetes.io/docs/concepts/windows/"),
        "doc links"
    );
    assert!(
        dom.contains("hostile.yaml:6"),
        "file:line of a YAML source: {dom}"
    );
    assert!(dom.contains("<details><summary>"), "patches per object");
    assert!(html.contains("@media print"), "print styles");
    // Errors first: the first row is an error.
    let first_row = &dom[dom.find("<tr data-rule=").unwrap()..];
    assert!(
        first_row[..200].contains("row-error"),
        "{}",
        &first_row[..200]
    );

    // Layout at two widths: no horizontal scroll, no clipped cell, and the
    // message column wide enough to read.
    for width in [1280, 1920] {
        let (scroll, inner, clipped, message) =
            layout(&browser, &page, &dir.path().join("profile"), width);
        assert_eq!(inner, i64::from(width), "window size");
        assert!(
            scroll <= inner,
            "horizontal scroll at {width}px: {scroll} > {inner}"
        );
        assert_eq!(clipped, 0, "cells clipped at {width}px");
        assert!(
            message >= 250,
            "message column only {message}px at {width}px"
        );
        let png = screenshot(&browser, &page, &dir.path().join("profile"), width);
        eprintln!("screenshot: {}", png.display());
    }
}

// --- POST /report through the webhook's router ---

fn app() -> axum::Router {
    let state = winadmit::entry::server::ServerState::new(
        winadmit::entry::admission::Admission {
            policy: winadmit::decision::policy::Policy::default_policy(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        },
        winadmit::entry::server::Limits::default(),
    );
    winadmit::entry::server::router(state)
}

async fn post(uri: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let req = Request::post(uri)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap();
    let resp = app().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// A Windows pod with one finding, `hostNetwork`.
fn probe_pod() -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "nodeSelector": {"kubernetes.io/os": "windows"},
            "hostNetwork": true,
            "containers": [{"name": "c", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022",
                "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}}]
        }
    })
}

#[tokio::test]
async fn report_endpoint_answers_json_and_yaml_and_refuses_bad_input() {
    let yaml = b"apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: n}\nspec:\n  os: {name: windows}\n  containers: [{name: c, image: i, resources: {limits: {memory: 1Gi}}}]\n".to_vec();
    let (status, v) = post("/report", "application/yaml", yaml.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let o = &v["objects"][0];
    // No finding, but /mutate adds the node selector and says so.
    assert_eq!(o["verdict"], "warn");
    assert_eq!(o["patch"][0]["path"], "/spec/nodeSelector");
    assert_eq!(
        o["patchedObject"]["spec"]["nodeSelector"]["kubernetes.io/os"],
        "windows"
    );
    assert_eq!(v["summary"]["objects"], 1);

    let (status, v) = post(
        "/report",
        "application/json",
        std::fs::read(KUBECTL_JSON).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["summary"]["folded"], 8);
    // JSON bodies have positions too: the line and column of the field in
    // the request body.
    let body = std::fs::read_to_string(KUBECTL_JSON).unwrap();
    let probe = v["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "win-probe")
        .unwrap();
    let f = probe["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "WIN-HOSTNETWORK")
        .unwrap();
    assert_eq!(f["file"], "<request>");
    let (line, column) = (f["line"].as_u64().unwrap(), f["column"].as_u64().unwrap());
    assert!(
        body.lines().nth(line as usize - 1).unwrap()[column as usize - 1..]
            .starts_with("\"hostNetwork\""),
        "{f}"
    );
    // An AdmissionReview: positions in the review's text.
    let review = serde_json::to_vec_pretty(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "n", "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": probe_pod(),
        }
    }))
    .unwrap();
    let (status, v) = post("/report", "application/json", review.clone()).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let f = v["objects"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "WIN-HOSTNETWORK")
        .unwrap_or_else(|| panic!("{v}"));
    let text = String::from_utf8(review).unwrap();
    let (line, column) = (f["line"].as_u64().unwrap(), f["column"].as_u64().unwrap());
    assert!(line > 0, "{v}");
    assert!(
        text.lines().nth(line as usize - 1).unwrap()[column as usize - 1..]
            .starts_with("\"hostNetwork\""),
        "{f}"
    );
    let (_, v) = post(
        "/report?mode=audit",
        "application/json",
        std::fs::read(KUBECTL_JSON).unwrap(),
    )
    .await;
    assert_eq!(v["summary"]["verdicts"]["deny"], 0);

    let (status, v) = post("/report", "text/plain", yaml).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(v["error"].as_str().unwrap().contains("application/json"));
    let (status, v) = post("/report", "application/json", b"{\"kind\":".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON body"),
        "{v}"
    );
    let (status, v) = post("/report?mode=loud", "application/json", b"{}".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("unknown mode"), "{v}");
}

/// Runs `script` (which sets `document.body`'s `data-probe` attribute) on a
/// copy of `page` at `width` CSS pixels and returns the attribute.
fn probe(browser: &str, page: &Path, profile: &Path, width: u32, script: &str) -> String {
    let copy = page.with_extension(format!("probe-why-{width}.html"));
    let html = std::fs::read_to_string(page).unwrap();
    std::fs::write(
        &copy,
        html.replace("</body>", &format!("<script>{script}</script></body>")),
    )
    .unwrap();
    let out = headless(browser, profile, width, 1000)
        .arg("--dump-dom")
        .arg(format!("file://{}", copy.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom
        .find("data-probe=\"")
        .unwrap_or_else(|| panic!("nothing measured at {width}px"))
        + "data-probe=\"".len();
    dom[at..].split('"').next().unwrap().to_owned()
}

/// Every row whose verdict is not what its finding alone would give says
/// why (exempt and the exemption; the patch operation that removes the
/// error; warn mode), the legend explains each badge, the counts include
/// info, and paths wrap only between their parts.
#[test]
fn html_report_says_why_a_verdict_differs_from_its_findings() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("WINADMIT_REQUIRE_CHROMIUM").is_none(),
            "chromium is required (WINADMIT_REQUIRE_CHROMIUM is set) but was not found"
        );
        eprintln!(
            "SKIPPED: no chromium on PATH (install the Debian package `chromium` to run this test)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = "why.yaml";
    std::fs::write(
        dir.path().join(input),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: legacy, labels: {winadmit.io/mode: warn}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: in-warn-mode, namespace: legacy}\nspec:\n  nodeSelector: {kubernetes.io/os: windows}\n  hostNetwork: true\n  containers: [{name: c, image: mcr.microsoft.com/windows/nanoserver:ltsc2022, resources: {limits: {memory: 1Gi}, requests: {memory: 1Gi}}}]\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: outside-the-webhook, namespace: kube-system}\nspec:\n  nodeSelector: {kubernetes.io/os: windows}\n  hostNetwork: true\n  containers: [{name: c, image: mcr.microsoft.com/windows/nanoserver:ltsc2022, resources: {limits: {memory: 1Gi}, requests: {memory: 1Gi}}}]\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: patched, namespace: web}\nspec:\n  os: {name: windows}\n  containers:\n  - name: a-container-with-a-rather-long-name\n    image: mcr.microsoft.com/windows/nanoserver:ltsc2022\n    resources: {limits: {memory: 1Gi}, requests: {memory: 1Gi}}\n    securityContext: {allowPrivilegeEscalation: false, seccompProfile: {type: RuntimeDefault}}\n",
    )
    .unwrap();
    // A relative path: the header names the folder (".").
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .current_dir(dir.path())
        .args(["report", "--from-file", input, "--from-file", input])
        .args(["--format", "html", "-o", "report.html"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = dir.path().join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<dt>Input</dt><dd>why.yaml</dd>"), "{html}");
    std::fs::copy(dir.path().join(input), dir.path().join("again.yaml")).unwrap();
    let two = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .current_dir(dir.path())
        .args(["report", "--from-file", input, "--from-file", "again.yaml"])
        .args(["--format", "html", "-o", "two.html"])
        .output()
        .unwrap();
    assert!(two.status.code().is_some());
    let two = std::fs::read_to_string(dir.path().join("two.html")).unwrap();
    assert!(
        two.contains("<dt>Input</dt><dd>2 files in .</dd>"),
        "{}",
        &two[..two.find("</header>").unwrap_or(two.len())]
    );

    let profile = dir.path().join("profile");
    // Per row: verdict badge, severity, and the why lines.
    let rows = probe(
        &browser,
        &page,
        &profile,
        1280,
        "document.body.setAttribute('data-probe', Array.prototype.map.call(document.querySelectorAll('#findings tbody tr'), function (tr) {\
           var why = Array.prototype.map.call(tr.querySelectorAll('.why'), function (w) { return w.textContent; }).join(' / ');\
           return tr.className + ' ' + tr.querySelector('.v').textContent + ' ' + tr.getAttribute('data-rule') + ' :: ' + why; }).join(' | ') +\
           ' || ' + document.getElementById('totals').textContent + ' || ' + document.getElementById('legend').textContent);",
    );
    let (rows, rest) = rows.split_once(" || ").unwrap();
    let (totals, legend) = rest.split_once(" || ").unwrap();
    let rows: Vec<&str> = rows.split(" | ").collect();
    // Each error row that is not denied says why.
    let errors: Vec<&&str> = rows.iter().filter(|r| r.starts_with("row-error")).collect();
    assert_eq!(errors.len(), 4, "{rows:#?}");
    for r in &errors {
        assert!(!r.contains(" deny "), "{r}");
        assert!(!r.ends_with(":: "), "no reason given: {r}");
    }
    let row = |rule: &str, verdict: &str| {
        errors
            .iter()
            .find(|r| r.contains(&format!(" {verdict} {rule} ")))
            .unwrap_or_else(|| panic!("{rule} {verdict}: {rows:#?}"))
    };
    assert!(
        row("WIN-HOSTNETWORK", "warn")
            .contains("mode warn: WIN-HOSTNETWORK at spec.hostNetwork admitted with a warning")
    );
    assert!(row("WIN-HOSTNETWORK", "allow").contains(
        "the webhook is not called for namespace kube-system (reach.excludedNamespaces)"
    ));
    // Each patched row names the operation that removes its own error.
    let patched: Vec<&&&str> = errors
        .iter()
        .filter(|r| r.contains(" warn WIN-OS-FIELDS "))
        .collect();
    assert_eq!(patched.len(), 2, "{rows:#?}");
    for field in ["allowPrivilegeEscalation", "seccompProfile"] {
        let mine = patched
            .iter()
            .filter(|r| r.contains(&format!("patched: remove /spec/containers/0/securityContext/{field} removes the error WIN-OS-FIELDS at spec.containers[0].securityContext.{field}")))
            .count();
        assert_eq!(mine, 1, "{field}: {rows:#?}");
    }
    assert!(
        patched.iter().all(|r| r.matches("patched: ").count() == 1),
        "{rows:#?}"
    );
    // The counts include info; the legend explains each badge and level.
    assert!(totals.contains("info finding"), "{totals}");
    for words in [
        "deny the API server refuses the object",
        "warn admitted, with admission warnings",
        "allow admitted without a warning",
        "info: advice; never changes the verdict",
        "its row then says why",
    ] {
        assert!(legend.contains(words), "{words}: {legend}");
    }

    // Field paths and file names wrap only between their parts: no text
    // node between two break points spans two lines; and nothing overflows.
    for width in [1000, 1280] {
        let measured = probe(
            &browser,
            &page,
            &profile,
            width,
            "var split = 0, nodes = 0, over = 0;\
             document.querySelectorAll('#findings td.field code, #findings .src, #findings .why').forEach(function (host) {\
               host.childNodes.forEach(function (n) { if (n.nodeType !== 3) return; nodes++;\
                 var r = document.createRange(); r.selectNodeContents(n);\
                 var lines = {}; Array.prototype.forEach.call(r.getClientRects(), function (b) { if (b.width > 0) lines[Math.round(b.top)] = 1; });\
                 if (Object.keys(lines).length > 1) split++; }); });\
             document.querySelectorAll('#findings td').forEach(function (td) { if (td.scrollWidth > td.clientWidth + 1) over++; });\
             document.body.setAttribute('data-probe', [nodes, split, over, document.documentElement.scrollWidth, window.innerWidth].join(' '));",
        );
        let v: Vec<i64> = measured.split(' ').map(|n| n.parse().unwrap()).collect();
        assert!(v[0] > 10, "path parts measured at {width}px: {measured}");
        assert_eq!(
            v[1], 0,
            "a path wrapped inside a name at {width}px: {measured}"
        );
        assert_eq!(v[2], 0, "cells overflow at {width}px: {measured}");
        assert!(v[3] <= v[4], "horizontal scroll at {width}px: {measured}");
    }
}
