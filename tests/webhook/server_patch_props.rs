//! Property tests on the mutating webhook's patches, through the admission
//! entry point (`admission::review`), over many shapes of Windows workloads: every
//! patch applies cleanly to the request's JSON, is reinvocation-safe, keeps
//! what was there, and leaves no fixable finding behind. Non-Windows
//! workloads are never patched. Patched objects still deserialize as the
//! typed Kubernetes object, and never hold `spec.os` beside a field the
//! API server refuses with it, whatever rules the pod opts out of. And on
//! every generated workload, lint, `/validate` and `/report` agree.

use crate::admission::admission_review;
use proptest::prelude::*;
use serde_json::{Value, json};
use winadmit::decision::engine::{self, Context};
use winadmit::decision::finding::FixKind;
use winadmit::decision::policy::Policy;
use winadmit::decision::view::ObjectView;
use winadmit::decision::workload::Workload;
use winadmit::entry::admission::{self, Admission, Endpoint};

const FULL_MUTATION: &str = "mutation:
  injectNodeSelector: true
  setOsName: true
  removeNoOpFields: true
  emptyDirOffMemory: true
  inferFromImages: false
  isolation: process
  isolationNamespaceLabel: null
  tolerations:
  - {key: os, operator: Equal, value: windows, effect: NoSchedule}
";

/// The webhook's view of `policy`, on the default cluster.
fn admission(policy: Policy) -> Admission {
    Admission {
        policy,
        target: winadmit::decision::cluster::TargetCluster::default(),
        lookup: None,
    }
}

fn admissions() -> Vec<Admission> {
    [
        Policy::default_policy(),
        Policy::from_yaml("full.yaml", FULL_MUTATION).unwrap(),
    ]
    .into_iter()
    .map(admission)
    .collect()
}

/// [`admissions`] and the strict stance, where `/mutate` keeps the fields
/// whose intent Windows loses (privileged, capabilities, ...).
fn admissions_and_strict() -> Vec<Admission> {
    let strict =
        Policy::from_yaml("strict.yaml", &format!("stance: strict\n{FULL_MUTATION}")).unwrap();
    let mut all = admissions();
    all.push(admission(strict));
    all
}

fn opt<T: Clone + std::fmt::Debug + 'static>(values: Vec<T>) -> impl Strategy<Value = Option<T>> {
    prop_oneof![Just(None), proptest::sample::select(values).prop_map(Some)]
}

fn container_sc() -> impl Strategy<Value = Option<Value>> {
    opt(vec![
        json!({}),
        json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        json!({"capabilities": {"drop": ["ALL"]}}),
        json!({"capabilities": {"drop": ["NET_RAW"], "add": []}}),
        json!({"allowPrivilegeEscalation": false}),
        json!({"privileged": false}),
        json!({"seccompProfile": {"type": "RuntimeDefault"}, "capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": false}),
        json!({"windowsOptions": {"runAsUserName": "ContainerUser"}, "seccompProfile": {"type": "RuntimeDefault"}}),
        json!({"procMount": "Default", "readOnlyRootFilesystem": false}),
    ])
}

fn container(i: usize, sc: Option<Value>, prefix: &str) -> Value {
    let mut c = json!({
        "name": format!("{prefix}{i}"),
        "image": "mcr.microsoft.com/windows/servercore:ltsc2022",
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    });
    if let Some(sc) = sc {
        c["securityContext"] = sc;
    }
    c
}

#[derive(Debug, Clone)]
struct Shape {
    kind: usize,
    node_selector: Option<Value>,
    os_name: bool,
    pod_sc: Option<Value>,
    tolerations: Option<Value>,
    annotations: Option<Value>,
    volumes: Option<Value>,
    containers: Vec<Option<Value>>,
    init: Vec<Option<Value>>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        0..4usize,
        opt(vec![
            json!({}),
            json!({"pool": "win"}),
            json!({"kubernetes.io/os": "windows"}),
            json!({"kubernetes.io/os": "windows", "pool": "a"}),
            json!({"beta.kubernetes.io/os": "windows"}),
        ]),
        any::<bool>(),
        opt(vec![
            json!({}),
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            json!({"windowsOptions": {"runAsUserName": "ContainerUser"}}),
        ]),
        opt(vec![
            json!([]),
            json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]),
            json!([{"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}]),
        ]),
        opt(vec![json!({}), json!({"a": "b"})]),
        opt(vec![
            json!([]),
            json!([{"name": "cache", "emptyDir": {"medium": "Memory"}}]),
            json!([{"name": "cache", "emptyDir": {}}, {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]),
            json!([{"name": "cfg", "configMap": {"name": "x"}}]),
        ]),
        proptest::collection::vec(container_sc(), 1..4),
        proptest::collection::vec(container_sc(), 0..2),
    )
        .prop_map(
            |(kind, node_selector, os_name, pod_sc, tolerations, annotations, volumes, containers, init)| Shape {
                kind,
                node_selector,
                os_name,
                pod_sc,
                tolerations,
                annotations,
                volumes,
                containers,
                init,
            },
        )
}

fn pod_spec(s: &Shape, windows: bool) -> Value {
    let mut spec = json!({
        "containers": s.containers.iter().enumerate().map(|(i, sc)| container(i, sc.clone(), "c")).collect::<Vec<_>>(),
    });
    if !s.init.is_empty() {
        spec["initContainers"] = s
            .init
            .iter()
            .enumerate()
            .map(|(i, sc)| container(i, sc.clone(), "init"))
            .collect();
    }
    if let Some(ns) = &s.node_selector {
        spec["nodeSelector"] = ns.clone();
    }
    let pinned = s.node_selector.as_ref().is_some_and(|n| {
        n.get("kubernetes.io/os").is_some() || n.get("beta.kubernetes.io/os").is_some()
    });
    if windows && (s.os_name || !pinned) {
        spec["os"] = json!({"name": "windows"});
    }
    if !windows {
        spec["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
        spec.as_object_mut().unwrap().remove("os");
    }
    for (key, v) in [
        ("securityContext", &s.pod_sc),
        ("tolerations", &s.tolerations),
        ("volumes", &s.volumes),
    ] {
        if let Some(v) = v {
            spec[key] = v.clone();
        }
    }
    spec
}

fn object(s: &Shape, windows: bool) -> Value {
    let spec = pod_spec(s, windows);
    let mut pod_meta = json!({"labels": {"app": "x"}});
    if let Some(a) = &s.annotations {
        pod_meta["annotations"] = a.clone();
    }
    let template = json!({"metadata": pod_meta.clone(), "spec": spec.clone()});
    match s.kind {
        0 => {
            let mut meta = pod_meta;
            meta["name"] = json!("p");
            meta["namespace"] = json!("ns");
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        }
        1 => {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"},
                    "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}})
        }
        2 => {
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "ns"},
                    "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}})
        }
        _ => {
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "ns"},
                    "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}})
        }
    }
}

/// The JSON Patch the mutating webhook returns, if any.
fn mutate(adm: &Admission, object: &Value) -> Option<json_patch::Patch> {
    let out = admission::review(adm, Endpoint::Mutate, &admission_review(object)).unwrap();
    let v: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(v["response"]["allowed"], true);
    let p = v["response"]["patch"].as_str()?;
    let bytes = base64_decode(p);
    Some(serde_json::from_slice(&bytes).unwrap())
}

fn base64_decode(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buf, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        buf = (buf << 6) | A.iter().position(|a| *a == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    out
}

fn fixable_left(adm: &Admission, object: &Value) -> Vec<String> {
    let text = serde_json::to_string(object).unwrap();
    let view: ObjectView<'_> = serde_json::from_str(&text).unwrap();
    let w = Workload::from_view(&view).unwrap();
    let cx = Context {
        cluster: adm.target.clone(),
        runtime_classes: None,
        nodes: None,
        images: None,
        gmsa: None,
        exceptions: None,
    };
    let m = &adm.policy.mutation;
    engine::evaluate(&adm.policy, &w, &cx)
        .findings
        .into_iter()
        .filter(|f| {
            f.fix.as_ref().is_some_and(|fix| match fix.kind {
                FixKind::RemoveNoOp => m.remove_no_op_fields,
                FixKind::EmptyDirOffMemory => m.empty_dir_off_memory,
                FixKind::Scheduling | FixKind::PinByImages => false,
                // Only with gMSA facts, which these pods are judged without.
                FixKind::InlineCredentialSpec => true,
            })
        })
        .map(|f| format!("{} {}", f.rule, f.field))
        .collect()
}

/// The object holding the pod's `metadata` and `spec`: the Pod itself, or
/// the workload's pod template.
fn pod_template_mut(o: &mut Value) -> &mut Value {
    match o["kind"].as_str().unwrap() {
        "Pod" => o,
        "CronJob" => &mut o["spec"]["jobTemplate"]["spec"]["template"],
        _ => &mut o["spec"]["template"],
    }
}

/// `o` with `winadmit.io/skip.<RULE>` annotations on its pod template.
fn with_skips(mut o: Value, skips: &[&str]) -> Value {
    let meta = &mut pod_template_mut(&mut o)["metadata"];
    for rule in skips {
        meta["annotations"][format!("winadmit.io/skip.{rule}")] = json!("kept on purpose");
    }
    o
}

/// `/mutate`'s patch for `original`, if any, and the object with it applied.
fn mutated(adm: &Admission, original: &Value) -> (Option<json_patch::Patch>, Value) {
    let mut patched = original.clone();
    let patch = mutate(adm, original);
    if let Some(patch) = &patch {
        json_patch::patch(&mut patched, patch)
            .unwrap_or_else(|e| panic!("patch {patch:?} does not apply to {original}: {e}"));
    }
    (patch, patched)
}

fn pod_spec_of(o: &Value) -> &Value {
    match o["kind"].as_str().unwrap() {
        "Pod" => &o["spec"],
        "CronJob" => &o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &o["spec"]["template"]["spec"],
    }
}

/// The object deserializes as its typed Kubernetes kind (k8s-openapi), as
/// the API server would decode it after the patch.
fn assert_typed_object(o: &Value) {
    use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
    let r = match o["kind"].as_str().unwrap() {
        "Pod" => serde_json::from_value::<core::Pod>(o.clone()).map(drop),
        "Deployment" => serde_json::from_value::<apps::Deployment>(o.clone()).map(drop),
        "DaemonSet" => serde_json::from_value::<apps::DaemonSet>(o.clone()).map(drop),
        "CronJob" => serde_json::from_value::<batch::CronJob>(o.clone()).map(drop),
        other => panic!("unexpected kind {other}"),
    };
    r.unwrap_or_else(|e| panic!("patched object is not a valid {}: {e}: {o}", o["kind"]));
}

/// Fields that trip rules of every severity, added to a generated object's
/// pod spec (and first container) so the agreement property sees denials,
/// warnings and fixable findings, not only clean workloads.
fn risks() -> impl Strategy<Value = Vec<(bool, &'static str, Value)>> {
    proptest::sample::subsequence(
        vec![
            (false, "hostNetwork", json!(true)),
            (false, "hostPID", json!(true)),
            (false, "hostIPC", json!(true)),
            (false, "shareProcessNamespace", json!(true)),
            (
                false,
                "securityContext",
                json!({"runAsUser": 1000, "fsGroup": 2000, "seLinuxOptions": {"level": "s0"}}),
            ),
            (
                false,
                "volumes",
                json!([{"name": "h", "hostPath": {"path": "/var/run"}}, {"name": "m", "emptyDir": {"medium": "Memory"}}]),
            ),
            (
                false,
                "dnsConfig",
                json!({"searches": ["a", "b", "c", "d", "e", "f", "g"]}),
            ),
            (
                true,
                "securityContext",
                json!({"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}, "readOnlyRootFilesystem": true}),
            ),
            (
                true,
                "securityContext",
                json!({"windowsOptions": {"hostProcess": true, "runAsUserName": "NT AUTHORITY\\SYSTEM"}}),
            ),
            (
                true,
                "resources",
                json!({"limits": {"hugepages-2Mi": "1Gi", "memory": "1Gi"}}),
            ),
            (true, "image", json!("nginx:1.25")),
            (
                true,
                "volumeDevices",
                json!([{"name": "d", "devicePath": "/dev/xvda"}]),
            ),
        ],
        0..5,
    )
}

fn with_risks(mut o: Value, risks: &[(bool, &'static str, Value)]) -> Value {
    let spec = &mut pod_template_mut(&mut o)["spec"];
    for (container, key, value) in risks {
        let at = if *container {
            &mut spec["containers"][0]
        } else {
            &mut *spec
        };
        at[*key] = value.clone();
    }
    o
}

/// (rule field) -> severity, from a lint report or a /report object.
type FindingSet = std::collections::BTreeMap<String, String>;

async fn post(app: axum::Router, path: &str, body: Vec<u8>) -> (u16, Value) {
    use tower::ServiceExt as _;
    let req = axum::http::Request::post(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body))
        .unwrap();
    let resp = app.oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// lint, `/validate` and `/report` on one object: the same findings and
/// the same verdict, and `/validate` names every denied field.
fn assert_entry_points_agree(rt: &tokio::runtime::Runtime, policy: &Policy, object: &Value) {
    let state = winadmit::entry::server::ServerState::new(
        admission(policy.clone()),
        winadmit::entry::server::Limits::default(),
    );
    let app = winadmit::entry::server::router(state);
    let body = admission_review(object);
    let ((vs, validated), (rs, report)) = rt.block_on(async {
        (
            post(app.clone(), "/validate", body.clone()).await,
            post(app, "/report", body).await,
        )
    });
    assert_eq!((vs, rs), (200, 200), "{validated} {report}");
    let reported = &report["objects"][0];
    // The report's verdict is the one after the settled patch (mutating
    // admission runs first): /validate on the patched object agrees.
    let after = if reported["patchedObject"].is_null() {
        validated.clone()
    } else {
        let app = winadmit::entry::server::router(winadmit::entry::server::ServerState::new(
            admission(policy.clone()),
            winadmit::entry::server::Limits::default(),
        ));
        let body = admission_review(&reported["patchedObject"]);
        let (status, v) = rt.block_on(post(app, "/validate", body));
        assert_eq!(status, 200, "{v}");
        v
    };
    let allowed = after["response"]["allowed"].as_bool().unwrap();
    assert_eq!(
        reported["verdict"] == "deny",
        !allowed,
        "{reported}\n{after}\n{object}"
    );

    let mut lint = winadmit::render::LintReport::default();
    winadmit::entry::lint::lint_text(
        "gen.json",
        &object.to_string(),
        policy,
        &Context::default(),
        &mut lint,
    );
    assert!(lint.input_errors.is_empty(), "{:?}", lint.input_errors);
    let from_lint: FindingSet = lint
        .findings
        .iter()
        .map(|f| {
            (
                format!("{} {}", f.rule, f.field),
                f.severity.as_str().to_owned(),
            )
        })
        .collect();
    let from_report: FindingSet = reported["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                format!(
                    "{} {}",
                    f["rule"].as_str().unwrap(),
                    f["field"].as_str().unwrap()
                ),
                f["severity"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(from_lint, from_report, "{object}");
    let message = validated["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    for (key, severity) in &from_lint {
        let (rule, field) = key.split_once(' ').unwrap();
        if severity == "error" {
            assert!(
                message.contains(rule) && message.contains(field),
                "/validate does not name {key}:\n{message}\n{object}"
            );
        }
    }
}

/// The entry points agree on the API-server-shaped fixtures too (denied, fixable,
/// a Deployment, a Linux pod), not only on generated objects.
#[test]
fn lint_validate_and_report_agree_on_fixtures() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for name in [
        "pod-windows-denied.json",
        "pod-windows-fixable.json",
        "deployment-windows-create.json",
        "pod-linux-create.json",
    ] {
        let path = format!(
            "{}/tests/fixtures/admission/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let review: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_entry_points_agree(&rt, &Policy::default_policy(), &review["request"]["object"]);
    }
}

proptest! {
    // Each case runs three entry points over two policies: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lint_validate_and_report_agree(s in shape(), windows in any::<bool>(), risks in risks()) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let object = with_risks(object(&s, windows), &risks);
        for adm in admissions() {
            assert_entry_points_agree(&rt, &adm.policy, &object);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn windows_patches_apply_are_idempotent_and_fix_everything_fixable(s in shape()) {
        let original = object(&s, true);
        for adm in admissions() {
            let (_, patched) = mutated(&adm, &original);
            assert_typed_object(&patched);
            prop_assert!(mutate(&adm, &patched).is_none(), "second patch for {}", patched);
            let left = fixable_left(&adm, &patched);
            prop_assert!(left.is_empty(), "fixable findings left {:?} in {}", left, patched);
            // Existing node selectors are kept; the OS label is there.
            let ns = &pod_spec_of(&patched)["nodeSelector"];
            if let Some(before) = s.node_selector.as_ref().and_then(Value::as_object) {
                for (k, v) in before {
                    prop_assert_eq!(&ns[k], v);
                }
            }
            prop_assert_eq!(&ns["kubernetes.io/os"], "windows");
        }
    }

    #[test]
    fn linux_workloads_are_never_patched(s in shape()) {
        let linux = object(&s, false);
        for adm in admissions() {
            prop_assert!(mutate(&adm, &linux).is_none(), "patched a Linux workload: {}", linux);
        }
    }
}

/// Fields the API server refuses next to `spec.os.name: windows`
/// (Kubernetes `validateWindows`, pod and container security contexts),
/// written out here rather than read from WIN-OS-FIELDS, so the property
/// below does not check the rule against itself.
const REFUSED_IN_POD_SC: &[&str] = &[
    "seLinuxOptions",
    "seccompProfile",
    "fsGroup",
    "fsGroupChangePolicy",
    "sysctls",
    "runAsUser",
    "runAsGroup",
    "supplementalGroups",
];
const REFUSED_IN_CONTAINER_SC: &[&str] = &[
    "seLinuxOptions",
    "seccompProfile",
    "capabilities",
    "readOnlyRootFilesystem",
    "privileged",
    "allowPrivilegeEscalation",
    "procMount",
    "runAsUser",
    "runAsGroup",
];

fn refused_next_to_os(spec: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in REFUSED_IN_POD_SC {
        if !spec["securityContext"][key].is_null() {
            out.push(format!("securityContext.{key}"));
        }
    }
    for list in ["initContainers", "containers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            for key in REFUSED_IN_CONTAINER_SC {
                if !c["securityContext"][key].is_null() {
                    out.push(format!("{list}[{i}].securityContext.{key}"));
                }
            }
        }
    }
    out
}

/// Opt-outs of the rules whose fixes remove refused fields, and of
/// WIN-OS-FIELDS itself.
fn skips() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(
        vec![
            "WIN-OS-FIELDS",
            "WIN-RUNASUSER",
            "WIN-SECCOMP",
            "WIN-CAPABILITIES",
            "WIN-PRIV-ESCALATION",
            "WIN-PRIVILEGED",
            "WIN-PROCMOUNT",
            "WIN-READONLY-ROOTFS",
        ],
        0..=8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `/mutate` never turns a pod the API server admits into one it
    /// refuses: whatever the pod opts out of, it sets `spec.os` only when
    /// no refused field is left beside it.
    #[test]
    fn spec_os_is_never_set_beside_a_field_the_api_server_refuses(
        s in shape(),
        skips in skips(),
        run_as_user in any::<bool>(),
    ) {
        let mut original = with_skips(object(&s, true), &skips);
        if pod_spec_of(&original)["os"].is_object() {
            return Ok(()); // set by the user: not the patch's doing
        }
        if run_as_user {
            pod_template_mut(&mut original)["spec"]["securityContext"]["runAsUser"] = json!(1000);
        }
        for adm in admissions_and_strict() {
            let (_, patched) = mutated(&adm, &original);
            let spec = pod_spec_of(&patched);
            if spec["os"]["name"] == "windows" {
                let refused = refused_next_to_os(spec);
                prop_assert!(refused.is_empty(), "spec.os set beside {:?} in {}", refused, patched);
            }
        }
    }
}

/// Does `/validate` allow the object?
fn validate_allows(adm: &Admission, object: &Value) -> bool {
    let out = admission::review(adm, Endpoint::Validate, &admission_review(object)).unwrap();
    let v: Value = serde_json::from_slice(&out.body).unwrap();
    v["response"]["allowed"].as_bool().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A patch never makes `/validate` deny an object it allowed: mutating
    /// admission runs first, so such a patch would be an outage of
    /// winadmit's making.
    #[test]
    fn a_patch_never_turns_an_allowed_object_into_a_denied_one(
        s in shape(),
        risks in risks(),
        skips in skips(),
    ) {
        let original = with_skips(with_risks(object(&s, true), &risks), &skips);
        for adm in admissions_and_strict() {
            if !validate_allows(&adm, &original) {
                continue;
            }
            let (Some(patch), patched) = mutated(&adm, &original) else { continue };
            prop_assert!(validate_allows(&adm, &patched), "patch {:?} denies {}", patch, patched);
        }
    }
}
