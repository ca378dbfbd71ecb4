//! The webhook router, driven with `oneshot` on AdmissionReview fixtures
//! shaped like what the API server sends (tests/fixtures/admission).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;
use winadmit::decision::cluster::ClusterLookup;
use winadmit::decision::policy::Policy;
use winadmit::entry::admission::Admission;
use winadmit::entry::server::{self, Limits, ServerState};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/admission/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

fn state_with(policy: Policy, namespaces: Option<Box<dyn ClusterLookup>>) -> Arc<ServerState> {
    let state = ServerState::new(
        Admission {
            policy,
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: namespaces,
        },
        Limits::default(),
    );
    state.set_ready(true);
    state
}

fn app() -> Router {
    server::router(state_with(Policy::default_policy(), None))
}

fn app_with_policy(yaml: &str) -> Router {
    server::router(state_with(
        Policy::from_yaml("test.yaml", yaml).unwrap(),
        None,
    ))
}

async fn send(
    app: Router,
    method: &str,
    path: &str,
    ct: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Bytes) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(ct) = ct {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let resp = app
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, bytes)
}

/// POSTs an AdmissionReview and returns the parsed review answer (HTTP 200).
async fn review(app: Router, path: &str, body: Vec<u8>) -> Value {
    let (status, bytes) = send(app, "POST", path, Some("application/json"), body).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["kind"], "AdmissionReview");
    for w in v["response"]["warnings"].as_array().into_iter().flatten() {
        let w = w.as_str().unwrap();
        assert!(w.chars().count() <= 120, "warning over 120 chars: {w}");
    }
    v
}

fn response(v: &Value) -> &Value {
    &v["response"]
}

fn patch_of(v: &Value) -> Option<Vec<Value>> {
    let p = v["response"]["patch"].as_str()?;
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    let bytes = base64_decode(p);
    Some(serde_json::from_slice(&bytes).unwrap())
}

fn base64_decode(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = A.iter().position(|a| *a == c).expect("base64") as u32;
        buf = (buf << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    out
}

fn with_object(mut review: Value, object: Value) -> Vec<u8> {
    review["request"]["object"] = object;
    serde_json::to_vec(&review).unwrap()
}

fn apply(object: &Value, patch: &[Value]) -> Value {
    let mut doc = object.clone();
    let p: json_patch::Patch = serde_json::from_value(Value::Array(patch.to_vec())).unwrap();
    json_patch::patch(&mut doc, &p).expect("the patch applies to the request's object");
    doc
}

#[tokio::test]
async fn clean_windows_pod_is_allowed_without_patch() {
    let body = fixture("pod-windows-create.json");
    let v = review(app(), "/validate", body.clone()).await;
    let r = response(&v);
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(r["uid"], "7d0c8a4e-2f51-4b3c-9e8d-1a2b3c4d5e6f");
    assert_eq!(r["allowed"], true);
    assert!(r.get("warnings").is_none(), "{r}");
    let m = review(app(), "/mutate", body).await;
    assert_eq!(response(&m)["allowed"], true);
    assert!(patch_of(&m).is_none(), "{m}");
}

#[tokio::test]
async fn denial_names_every_field_rule_and_fix() {
    let v = review(app(), "/validate", fixture("pod-windows-denied.json")).await;
    let r = response(&v);
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 403);
    assert_eq!(r["status"]["reason"], "Forbidden");
    let msg = r["status"]["message"].as_str().unwrap();
    for needle in [
        "spec.hostNetwork",
        "spec.securityContext.sysctls",
        "[WIN-HOSTNETWORK]",
        "[WIN-SYSCTLS]",
        "How to fix:",
        "hostProcess: true",
    ] {
        assert!(msg.contains(needle), "{needle} missing from:\n{msg}");
    }
    // Ignored settings are warnings, not reasons to deny.
    assert!(!msg.contains("[WIN-PRIVILEGED]"), "{msg}");
    let w = r["warnings"].as_array().unwrap();
    assert!(
        w.iter()
            .any(|w| w.as_str().unwrap().starts_with("WIN-PRIVILEGED")),
        "{w:?}"
    );
    insta::assert_snapshot!("denial_message", msg);
}

#[tokio::test]
async fn v1beta1_and_dry_run_are_answered_identically_in_their_version() {
    let v1 = review(app(), "/validate", fixture("pod-windows-denied.json")).await;
    let beta = review(app(), "/validate", fixture("pod-windows-v1beta1.json")).await;
    assert_eq!(beta["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(
        response(&beta)["uid"],
        "f1a2c3d4-0000-4000-8000-000000000006"
    );
    let mut a = response(&v1).clone();
    let mut b = response(&beta).clone();
    a["uid"] = json!("");
    b["uid"] = json!("");
    assert_eq!(a, b, "dryRun and v1beta1 change nothing but the envelope");
}

#[tokio::test]
async fn delete_linux_unpinned_and_other_kinds_pass_untouched() {
    for name in [
        "pod-delete.json",
        "pod-linux-create.json",
        "pod-unpinned-create.json",
        "configmap-create.json",
    ] {
        for path in ["/validate", "/mutate"] {
            let v = review(app(), path, fixture(name)).await;
            let r = response(&v);
            assert_eq!(r["allowed"], true, "{name} {path}: {r}");
            assert!(r.get("patch").is_none(), "{name} {path}: {r}");
            assert!(r.get("warnings").is_none(), "{name} {path}: {r}");
        }
    }
}

#[tokio::test]
async fn ephemeral_container_update_only_checks_what_it_adds() {
    let v = review(app(), "/validate", fixture("pod-ephemeral-update.json")).await;
    let r = response(&v);
    assert_eq!(r["allowed"], false);
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("spec.ephemeralContainers[0].securityContext")
            && msg.contains("[WIN-NONROOT-ADMIN]"),
        "{msg}"
    );
    assert!(
        !msg.contains("spec.securityContext.sysctls"),
        "a pre-existing problem must not block kubectl debug: {msg}"
    );
    // The mutating webhook never touches the immutable pod spec on UPDATE.
    let m = review(app(), "/mutate", fixture("pod-ephemeral-update.json")).await;
    assert!(patch_of(&m).is_none(), "{m}");
}

#[tokio::test]
async fn large_update_is_allowed() {
    let v = review(app(), "/validate", fixture("pod-update-30k.json")).await;
    assert_eq!(response(&v)["allowed"], true);
}

#[tokio::test]
async fn update_does_not_enforce_problems_the_old_object_had() {
    // A controller relabels a pod that was admitted before the policy changed.
    let mut r = fixture_json("pod-windows-denied.json");
    r["request"]["operation"] = json!("UPDATE");
    r["request"]["oldObject"] = r["request"]["object"].clone();
    r["request"]["object"]["metadata"]["labels"]["new"] = json!("label");
    let v = review(app(), "/validate", serde_json::to_vec(&r).unwrap()).await;
    assert_eq!(response(&v)["allowed"], true, "{v}");
    // ...but a new problem in the update is denied.
    r["request"]["object"]["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "share", "nfs": {"server": "nfs.example.com", "path": "/export"}}));
    let v = review(app(), "/validate", serde_json::to_vec(&r).unwrap()).await;
    assert_eq!(response(&v)["allowed"], false, "{v}");
}

/// Mutates, applies the patch, validates the result, and mutates again:
/// the patched object must pass and yield no second patch.
async fn mutate_then_revalidate(name: &str) -> Vec<Value> {
    let original = fixture_json(name);
    let m = review(app(), "/mutate", fixture(name)).await;
    let patch = patch_of(&m).unwrap_or_else(|| panic!("{name}: expected a patch: {m}"));
    let warnings = response(&m)["warnings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        warnings.len(),
        patch.len(),
        "every change is explained: {m}"
    );
    let patched = apply(&original["request"]["object"], &patch);
    let again = review(
        app(),
        "/mutate",
        with_object(original.clone(), patched.clone()),
    )
    .await;
    assert!(
        patch_of(&again).is_none(),
        "reinvocation must not patch again: {again}"
    );
    let v = review(app(), "/validate", with_object(original, patched)).await;
    assert_eq!(
        response(&v)["allowed"],
        true,
        "the patched object passes: {v}"
    );
    patch
}

#[tokio::test]
async fn mutate_fixes_a_pod_and_is_reinvocation_safe() {
    let patch = mutate_then_revalidate("pod-windows-fixable.json").await;
    let paths: Vec<&str> = patch.iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/spec/nodeSelector"), "{paths:?}");
    assert!(
        paths.contains(&"/spec/securityContext/seccompProfile"),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"/spec/containers/0/securityContext/capabilities"),
        "{paths:?}"
    );
    let ns = patch
        .iter()
        .find(|p| p["path"] == "/spec/nodeSelector")
        .unwrap();
    assert_eq!(ns["value"], json!({"kubernetes.io/os": "windows"}));
}

#[tokio::test]
async fn mutate_fixes_a_deployment_template() {
    let before = review(
        app(),
        "/validate",
        fixture("deployment-windows-create.json"),
    )
    .await;
    // runAsUser is ignored on Windows: a warning, and /mutate removes it;
    // seccompProfile RuntimeDefault stays (Pod Security Admission needs it).
    assert_eq!(response(&before)["allowed"], true);
    assert!(response(&before)["warnings"].is_array(), "{before}");
    let patch = mutate_then_revalidate("deployment-windows-create.json").await;
    assert_eq!(patch.len(), 1, "{patch:?}");
    assert_eq!(
        patch[0]["path"],
        "/spec/template/spec/containers/0/securityContext/runAsUser"
    );
}

#[tokio::test]
async fn mutate_adds_to_an_existing_node_selector_with_escaping() {
    let mut r = fixture_json("pod-windows-fixable.json");
    r["request"]["object"]["spec"]["nodeSelector"] = json!({"pool": "win"});
    let v = review(app(), "/mutate", serde_json::to_vec(&r).unwrap()).await;
    let patch = patch_of(&v).unwrap();
    assert!(
        patch
            .iter()
            .any(|p| p["path"] == "/spec/nodeSelector/kubernetes.io~1os" && p["value"] == "windows"),
        "{patch:?}"
    );
    let patched = apply(&r["request"]["object"], &patch);
    assert_eq!(patched["spec"]["nodeSelector"]["pool"], "win");
}

#[tokio::test]
async fn warn_and_audit_modes_allow() {
    let warn = review(
        app_with_policy("mode: warn\n"),
        "/validate",
        fixture("pod-windows-denied.json"),
    )
    .await;
    let r = response(&warn);
    assert_eq!(r["allowed"], true);
    let w = r["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 4, "{w:?}");
    assert!(w.iter().any(|w| {
        w.as_str()
            .unwrap()
            .starts_with("WIN-HOSTNETWORK spec.hostNetwork")
    }));

    let audit = review(
        app_with_policy("mode: audit\n"),
        "/validate",
        fixture("pod-windows-denied.json"),
    )
    .await;
    let r = response(&audit);
    assert_eq!(r["allowed"], true);
    assert!(r.get("warnings").is_none());
    assert_eq!(
        r["auditAnnotations"]["winadmit.io/audit"],
        "WIN-PRIVILEGED,WIN-RUNASUSER,WIN-HOSTNETWORK,WIN-SYSCTLS"
    );
}

#[tokio::test]
async fn per_rule_mode_overrides() {
    let v = review(
        app_with_policy(
            "rules:\n  WIN-HOSTNETWORK: {mode: warn}\n  WIN-PRIVILEGED: {mode: audit}\n",
        ),
        "/validate",
        fixture("pod-windows-denied.json"),
    )
    .await;
    let r = response(&v);
    assert_eq!(r["allowed"], false);
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("[WIN-SYSCTLS]") && !msg.contains("[WIN-HOSTNETWORK]"),
        "{msg}"
    );
    let w = r["warnings"].as_array().unwrap();
    // hostNetwork (its rule is in warn mode) and runAsUser; privileged is audited.
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w.iter()
            .any(|w| w.as_str().unwrap().starts_with("WIN-HOSTNETWORK"))
    );
    assert!(
        !w.iter()
            .any(|w| w.as_str().unwrap().starts_with("WIN-PRIVILEGED"))
    );
}

#[tokio::test]
async fn namespace_mode_label_through_namespace_lookup() {
    let mut labels = BTreeMap::new();
    labels.insert(
        "web".to_owned(),
        BTreeMap::from([("winadmit.io/mode".to_owned(), "warn".to_owned())]),
    );
    let app = server::router(state_with(Policy::default_policy(), Some(Box::new(labels))));
    let v = review(app, "/validate", fixture("pod-windows-denied.json")).await;
    assert_eq!(response(&v)["allowed"], true, "{v}");
    assert_eq!(response(&v)["warnings"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn exemptions_by_user_group_namespace_and_annotation() {
    for policy in [
        "exemptions:\n  groups: [system:serviceaccounts:kube-system]\n",
        "exemptions:\n  users: [system:serviceaccount:kube-system:replicaset-controller]\n",
        "exemptions:\n  namespaces: [web]\n",
        "exemptions:\n  labelSelectors:\n  - matchLabels: {app: iis}\n",
    ] {
        for path in ["/validate", "/mutate"] {
            let v = review(
                app_with_policy(policy),
                path,
                fixture("pod-windows-denied.json"),
            )
            .await;
            assert_eq!(response(&v)["allowed"], true, "{policy}: {v}");
            assert!(response(&v).get("patch").is_none());
        }
    }
    let mut r = fixture_json("pod-windows-denied.json");
    r["request"]["object"]["metadata"]["annotations"]["winadmit.io/skip.WIN-SYSCTLS"] =
        json!("the sysctl is set by the node image");
    let v = review(app(), "/validate", serde_json::to_vec(&r).unwrap()).await;
    let msg = response(&v)["status"]["message"].as_str().unwrap();
    assert!(
        !msg.contains("[WIN-SYSCTLS]") && msg.contains("[WIN-HOSTNETWORK]"),
        "{msg}"
    );
}

#[tokio::test]
async fn bad_requests_get_clear_4xx() {
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, StatusCode, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("POST", Some("application/json"), b"{not json".to_vec(), StatusCode::BAD_REQUEST, "not a valid AdmissionReview"),
        ("POST", Some("text/plain"), fixture("pod-windows-create.json"), StatusCode::UNSUPPORTED_MEDIA_TYPE, "application/json"),
        ("POST", None, fixture("pod-windows-create.json"), StatusCode::UNSUPPORTED_MEDIA_TYPE, "application/json"),
        ("POST", Some("application/json"), br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(), StatusCode::BAD_REQUEST, "no `request`"),
        ("POST", Some("application/json"), br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#.to_vec(), StatusCode::BAD_REQUEST, "uid"),
        ("POST", Some("application/json"), br#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"x"}}"#.to_vec(), StatusCode::BAD_REQUEST, "unsupported AdmissionReview apiVersion"),
        ("POST", Some("application/json"), b"[]".to_vec(), StatusCode::BAD_REQUEST, "no apiVersion"),
        ("GET", None, Vec::new(), StatusCode::METHOD_NOT_ALLOWED, ""),
    ];
    for (method, ct, body, want, needle) in cases {
        let (status, bytes) = send(app(), method, "/validate", ct, body).await;
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(status, want, "{text}");
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    let (status, bytes) = send(
        app(),
        "POST",
        "/nope",
        Some("application/json"),
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&bytes).contains("POST /validate"));
}

#[tokio::test]
async fn unusable_object_with_known_uid_is_an_invalid_response() {
    for object in [
        Value::Null,
        json!("a string"),
        json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": 7}}),
    ] {
        let mut r = fixture_json("pod-windows-create.json");
        r["request"]["object"] = object.clone();
        let v = review(app(), "/validate", serde_json::to_vec(&r).unwrap()).await;
        let resp = response(&v);
        assert_eq!(
            resp["uid"], "7d0c8a4e-2f51-4b3c-9e8d-1a2b3c4d5e6f",
            "{object}"
        );
        assert_eq!(resp["allowed"], false);
        assert_eq!(resp["status"]["reason"], "InvalidRequest");
        assert!(
            resp["status"]["message"]
                .as_str()
                .unwrap()
                .contains("request.object")
        );
    }
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let mut body = fixture("pod-windows-create.json");
    body.resize(3 * 1024 * 1024 + 1, b' ');
    let (status, bytes) = send(app(), "POST", "/validate", Some("application/json"), body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&bytes).contains("--max-body-bytes"));
    // Just under the limit (trailing whitespace is valid JSON) is fine.
    let mut body = fixture("pod-windows-create.json");
    body.resize(3 * 1024 * 1024, b' ');
    let (status, _) = send(app(), "POST", "/validate", Some("application/json"), body).await;
    assert_eq!(status, StatusCode::OK);
}

/// A body that never sends anything.
struct Stalled;

impl http_body::Body for Stalled {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Pending
    }
}

#[tokio::test]
async fn stalled_body_times_out() {
    let state = ServerState::new(
        Admission {
            policy: Policy::default_policy(),
            target: winadmit::decision::cluster::TargetCluster::default(),
            lookup: None,
        },
        Limits {
            request_timeout: Duration::from_millis(200),
            ..Limits::default()
        },
    );
    let req = Request::post("/validate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::new(Stalled))
        .unwrap();
    let resp = server::router(state).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::REQUEST_TIMEOUT);
}

async fn boom_handler() -> &'static str {
    let fail = std::env::var_os("NEVER_SET_IN_TESTS").is_none();
    assert!(!fail, "kaboom");
    "unreachable"
}

#[tokio::test]
async fn a_panicking_handler_is_a_500_and_the_router_keeps_serving() {
    let boom: Router = Router::new()
        .route("/boom", axum::routing::get(boom_handler))
        .route("/fine", axum::routing::get(|| async { "fine" }));
    let app = server::layers(boom, &Limits::default());
    let (status, body) = send(app.clone(), "GET", "/boom", None, Vec::new()).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(String::from_utf8_lossy(&body).contains("internal error"));
    let (status, _) = send(app, "GET", "/fine", None, Vec::new()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let state = state_with(Policy::default_policy(), None);
    let app = server::router(state.clone());
    let (s, _) = send(app.clone(), "GET", "/healthz", None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = send(app.clone(), "GET", "/readyz", None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    state.set_ready(false);
    let (s, _) = send(app.clone(), "GET", "/readyz", None, Vec::new()).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    state.set_ready(true);

    review(app.clone(), "/validate", fixture("pod-windows-denied.json")).await;
    review(app.clone(), "/mutate", fixture("pod-windows-fixable.json")).await;
    send(
        app.clone(),
        "POST",
        "/validate",
        Some("text/plain"),
        b"x".to_vec(),
    )
    .await;
    let (s, body) = send(app, "GET", "/metrics", None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8_lossy(&body);
    for needle in [
        r#"winadmit_admission_requests_total{endpoint="validate",verdict="denied"} 1"#,
        r#"winadmit_admission_requests_total{endpoint="mutate",verdict="patched"} 1"#,
        r#"winadmit_admission_findings_total{rule="WIN-HOSTNETWORK",severity="error",mode="enforce"} 1"#,
        r#"winadmit_admission_duration_seconds_bucket{le="0.00001",endpoint="validate"}"#,
        "winadmit_admission_in_flight_requests 0",
        r#"winadmit_http_rejected_requests_total{endpoint="validate",status="415"} 1"#,
    ] {
        assert!(text.contains(needle), "{needle} not in:\n{text}");
    }
}

#[tokio::test]
async fn spec_os_is_not_set_where_old_pod_security_restricted_would_refuse_it() {
    let policy = Policy::from_yaml("p.yaml", "mutation: {setOsName: true}\n").unwrap();
    let labels = |version: &str| {
        BTreeMap::from([(
            "web".to_owned(),
            BTreeMap::from([
                (
                    "pod-security.kubernetes.io/enforce".to_owned(),
                    "restricted".to_owned(),
                ),
                (
                    "pod-security.kubernetes.io/enforce-version".to_owned(),
                    version.to_owned(),
                ),
            ]),
        )])
    };
    let mutate = |version: &'static str| {
        let app = server::router(state_with(policy.clone(), Some(Box::new(labels(version)))));
        async move { review(app, "/mutate", fixture("pod-windows-create.json")).await }
    };
    let old = mutate("v1.24").await;
    let r = response(&old);
    assert!(
        patch_of(&old).is_none_or(|p| !p.iter().any(|op| op["path"] == "/spec/os")),
        "{old}"
    );
    let warnings = r["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("Pod Security")),
        "{warnings:?}"
    );
    // From v1.25 Pod Security exempts Windows pods: spec.os is set.
    let new = mutate("v1.25").await;
    let patch = patch_of(&new).unwrap();
    assert!(patch.iter().any(|op| op["path"] == "/spec/os"), "{patch:?}");
}

/// A path the listener does not serve gets 404 naming every route it does
/// serve, `POST /report` included where it is on.
#[tokio::test]
async fn not_found_lists_the_routes_of_this_listener() {
    let state = state_with(Policy::default_policy(), None);
    let all = server::Endpoints {
        metrics: true,
        report: true,
    };
    let (status, body) = send(
        server::router_with(state.clone(), all),
        "GET",
        "/nope",
        None,
        Vec::new(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(
            "POST /validate, POST /mutate, POST /admit, POST /report, GET /healthz, GET /readyz, GET /readyz/pin-linux, GET /metrics"
        ),
        "{text}"
    );
    let none = server::Endpoints {
        metrics: false,
        report: false,
    };
    let (_, body) = send(
        server::router_with(state, none),
        "POST",
        "/report",
        None,
        Vec::new(),
    )
    .await;
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(
            "serves POST /validate, POST /mutate, POST /admit, GET /healthz, GET /readyz, GET /readyz/pin-linux\n"
        ),
        "{text}"
    );
}
