//! The Helm chart (`charts/winadmit/`), with helm v3.22 built from
//! `tests/helm/` and the real kube-apiserver v1.37 of the end-to-end tests:
//!
//! - `helm lint --strict` on the chart and each of its `ci/*-values.yaml`;
//! - `helm template` equals the kustomize install (`manifests/rendered/`, or
//!   `winadmit manifests` with its options) object by object, for every
//!   certificate mode, the rollout stages, the custom resources, another
//!   namespace and the admission-policy install; [`normalise`] lists the
//!   few differences and why each must exist;
//! - bad values are refused by helm with the field named;
//! - `helm install`, `helm upgrade` (audit to enforce, with a certificate
//!   rotation, polled throughout) and `helm uninstall` against the API
//!   server, with `winadmit serve` as a local process in the place of the
//!   pods (there is no kubelet): the chart's `webhook.url` points the
//!   webhook configurations at it, and the test does the kubelet's part
//!   (mounting the chart's Secret and ConfigMap into the process) and the
//!   Deployment's (a rolling replacement behind one address).
//!
//! The tests of the chart's own files (appVersion, README, the generated
//! admission policies) need neither helm nor the API server. The others are
//! compiled as ignored while helm or the control plane is not built
//! (build.rs's `no_helm` and `no_control_plane`: `tests/helm/build.sh`,
//! `tests/apiserver/build.sh`), and run and fail instead when `WINADMIT_REQUIRE_HELM`
//! (and, for the cluster tests, `WINADMIT_REQUIRE_APISERVER`) is set, as
//! `.ci/run` does.

use crate::controlplane;
use crate::e2e;
use crate::helm_support as helm;
use crate::server;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::binary;
use controlplane::{Answer, ControlPlane};
use helm::Helm;
use server::Server;

const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("not base64 ({e}): {text}"))
}

// ---------------------------------------------------------------------------
// The chart's own files: no helm needed.

/// The chart's appVersion, and its version, are the crate's: the default
/// image tag (`image.tag` empty) is the appVersion.
#[test]
fn chart_versions_are_the_crate_version() {
    let chart: Value = serde_saphyr::from_str(&read(&helm::chart().join("Chart.yaml"))).unwrap();
    assert_eq!(
        chart["appVersion"],
        env!("CARGO_PKG_VERSION"),
        "Chart.yaml appVersion"
    );
    assert_eq!(
        chart["version"],
        env!("CARGO_PKG_VERSION"),
        "Chart.yaml version"
    );
    let values: Value = serde_saphyr::from_str(&read(&helm::chart().join("values.yaml"))).unwrap();
    assert_eq!(
        values["image"]["tag"], "",
        "the image tag defaults to appVersion"
    );
}

/// `files/admission-policy/<mode>.yaml`, which the chart installs with
/// `admissionPolicy.enabled`, as `winadmit admission-policy --no-mutating
/// --mode <mode>` prints it today (the enforce one is also the
/// admission-policy overlay's file).
pub fn chart_admission_policies() -> Vec<(PathBuf, String)> {
    let dir = helm::chart().join("files/admission-policy");
    ["enforce", "warn", "audit"]
        .into_iter()
        .map(|mode| {
            let out = std::process::Command::new(BIN)
                .args(["admission-policy", "--no-mutating", "--mode", mode])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let fresh = String::from_utf8(out.stdout).unwrap();
            (dir.join(format!("{mode}.yaml")), fresh)
        })
        .collect()
}

/// The chart's `may-target-windows` expression (written once, in
/// `_helpers.tpl`, for both webhooks) is the text of
/// `manifests/base/webhooks.yaml`, which tests/install/manifests.rs evaluates against
/// the corpus and generated objects. Checked without helm; with helm,
/// `helm_template_equals_kustomize` compares every object.
#[test]
fn chart_match_condition_is_the_base_one() {
    let base = e2e::parse_yaml(&read(&root().join("manifests/base/webhooks.yaml")));
    let expected = base[0]["webhooks"][0]["matchConditions"][0]["expression"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        base[1]["webhooks"][0]["matchConditions"][0]["expression"],
        expected.as_str()
    );
    let helpers = read(&helm::chart().join("templates/_helpers.tpl"));
    let start = helpers
        .find("    expression: |\n")
        .expect("_helpers.tpl holds the matchCondition")
        + "    expression: |\n".len();
    let chart: String = helpers[start..]
        .lines()
        .take_while(|l| l.starts_with("      "))
        .map(|l| format!("{}\n", &l[6..]))
        .collect();
    assert_eq!(
        chart, expected,
        "charts/winadmit/templates/_helpers.tpl's matchCondition differs from manifests/base/webhooks.yaml"
    );
}

/// One row of the chart README's values table.
#[derive(Debug)]
struct ValueDoc {
    key: String,
    default: Value,
    doc: String,
}

/// The values documented in values.yaml: a key preceded by a `# --`
/// comment (helm-docs' convention), its text running on over the following
/// `#` lines. A documented map is one row; its keys are not listed apart.
fn documented_values(text: &str, values: &Value) -> Vec<ValueDoc> {
    let mut rows = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut doc: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(rest) = trimmed.strip_prefix("# --") {
            doc = Some(rest.trim().to_owned());
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            if let Some(d) = doc.as_mut() {
                d.push(' ');
                d.push_str(rest.trim());
            }
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else {
            continue;
        };
        if trimmed.starts_with('-') || key.contains(' ') || key.is_empty() {
            continue;
        }
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key.to_owned()));
        let path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
        let key = path.join(".");
        let inside_documented = rows
            .iter()
            .any(|r: &ValueDoc| key.starts_with(&format!("{}.", r.key)));
        if let Some(text) = doc.take()
            && !inside_documented
        {
            let pointer = format!("/{}", path.join("/"));
            rows.push(ValueDoc {
                default: values.pointer(&pointer).cloned().unwrap_or(Value::Null),
                key,
                doc: text,
            });
        }
    }
    rows
}

/// The leaves of `values` (scalars, lists, empty maps), as dotted keys.
fn leaves(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&key, v, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

const VALUES_BEGIN: &str = "<!-- values: generated from values.yaml by tests/install/helm.rs -->\n";
const VALUES_END: &str = "<!-- end of values -->\n";

fn values_table(rows: &[ValueDoc]) -> String {
    let mut table = String::from("| Key | Default | Description |\n|---|---|---|\n");
    for r in rows {
        let default = r.default.to_string().replace('|', "\\|");
        let doc = r.doc.replace('|', "\\|");
        table.push_str(&format!("| `{}` | `{default}` | {doc} |\n", r.key));
    }
    table
}

/// Every value in values.yaml is documented (`# --`), and the chart's
/// README lists each with its default (the table between the markers is
/// generated from values.yaml: `generated.rs`).
#[test]
fn chart_readme_lists_every_value() {
    let text = read(&helm::chart().join("values.yaml"));
    let values: Value = serde_saphyr::from_str(&text).unwrap();
    let rows = documented_values(&text, &values);
    let mut all = Vec::new();
    leaves("", &values, &mut all);
    let undocumented: Vec<&String> = all
        .iter()
        .filter(|leaf| {
            !rows
                .iter()
                .any(|r| **leaf == r.key || leaf.starts_with(&format!("{}.", r.key)))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "values.yaml: give these values a `# --` comment: {undocumented:?}"
    );
    for r in &rows {
        assert!(
            !r.default.is_null(),
            "values.yaml: {} has no default",
            r.key
        );
    }
}

/// The chart's README with the table between the markers as values.yaml
/// gives it today.
pub fn chart_readme_with_values_table() -> (PathBuf, String) {
    let text = read(&helm::chart().join("values.yaml"));
    let values: Value = serde_saphyr::from_str(&text).unwrap();
    let rows = documented_values(&text, &values);
    let path = helm::chart().join("README.md");
    let readme = read(&path);
    let start = readme
        .find(VALUES_BEGIN)
        .expect("README.md has the values marker")
        + VALUES_BEGIN.len();
    let end = readme
        .find(VALUES_END)
        .expect("README.md has the end-of-values marker");
    let table = values_table(&rows);
    let fresh = format!("{}{table}{}", &readme[..start], &readme[end..]);
    (path, fresh)
}

// ---------------------------------------------------------------------------
// helm lint, helm template and the values schema: helm without a cluster.

/// `helm template winadmit charts/winadmit -n <ns> <args>`, parsed.
fn template(helm: &Helm, ns: &str, args: &[&str]) -> Vec<Value> {
    let chart = helm::chart();
    let mut all = vec![
        "template",
        "winadmit",
        chart.to_str().unwrap(),
        "--namespace",
        ns,
    ];
    // With the chart's crds/ (the PolicyException CRD), as the kustomize
    // base renders it; the policy-only overlay has no exceptions (helm
    // installs the CRD there too, unused: `--skip-crds` leaves it out).
    if !args.contains(&"admissionPolicy.enabled=true") {
        all.push("--include-crds");
    }
    all.extend(args);
    e2e::parse_yaml(&helm.ok(&all))
}

/// `helm lint --strict` passes on the chart with its defaults and with
/// each `ci/*-values.yaml` (the variants chart-testing lints and installs).
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn helm_lint_strict() {
    let helm = helm::helm("helm_lint_strict");
    let chart = helm::chart();
    let chart = chart.to_str().unwrap();
    let out = helm.ok(&["lint", "--strict", chart]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let mut variants: Vec<PathBuf> = std::fs::read_dir(helm::chart().join("ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
        .collect();
    variants.sort();
    assert!(
        variants.len() >= 4,
        "ci/ has too few variants: {variants:?}"
    );
    for v in &variants {
        let out = helm.ok(&["lint", "--strict", chart, "-f", v.to_str().unwrap()]);
        assert!(out.contains("0 chart(s) failed"), "{}: {out}", v.display());
    }
}

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or_default()
}

fn by_id(objects: &[Value]) -> BTreeMap<String, Value> {
    winadmit::entry::manifests::by_id(objects)
        .into_iter()
        .map(|(k, v)| (k, v.clone()))
        .collect()
}

/// The placeholder the self-signed render holds for `file`.
fn placeholder(file: &str) -> String {
    let (_, text) = winadmit::entry::manifests::CERT_PLACEHOLDERS
        .iter()
        .find(|(name, _)| *name == file)
        .unwrap();
    b64(text.as_bytes())
}

/// What must differ between the chart's objects and kustomize's, made
/// equal after checking it; nothing else is touched.
///
/// - The Namespace: kustomize creates it; helm needs it before it can store
///   the release (`helm install --create-namespace`), so the chart has none
///   (NOTES.txt gives the `kubectl label` for its Pod Security labels).
/// - The policy file of ConfigMap `winadmit-policy` is compared as the
///   server reads it (parsed YAML): the overlays' copies carry comments.
/// - The Deployment's pod template annotation `checksum/policy`: the server
///   reads the policy at start-up, so helm rolls the pods when it changes
///   (kustomize users re-apply and restart).
/// - With `tls.mode=self-signed`, helm generates the CA and certificate at
///   install (kustomize reads `winadmit certs` output; its render holds
///   placeholders): the Secret must hold a PEM CA, certificate and key,
///   both caBundles must be its CA, and the Secret's `winadmit.io/rotation`
///   annotation is the rotation value and its `winadmit.io/hosts` the
///   Service's names; then they are replaced by the placeholders.
fn normalise(helm_objects: &mut [Value], kustomize: &mut Vec<Value>) {
    kustomize.retain(|o| kind(o) != "Namespace");
    for o in helm_objects.iter_mut().chain(kustomize.iter_mut()) {
        if kind(o) == "ConfigMap" && o["metadata"]["name"] == "winadmit-policy" {
            let text = o["data"]["policy.yaml"].as_str().unwrap().to_owned();
            let parsed: Value = serde_saphyr::from_str(&text).unwrap();
            o["data"]["policy.yaml"] = parsed;
        }
    }
    for o in helm_objects.iter_mut() {
        if kind(o) == "Deployment" {
            let meta = o["spec"]["template"]["metadata"].as_object_mut().unwrap();
            let annotations = meta
                .remove("annotations")
                .expect("the pod template has annotations");
            let checksum = annotations["checksum/policy"].as_str().unwrap();
            assert!(
                checksum.len() == 64 && checksum.bytes().all(|b| b.is_ascii_hexdigit()),
                "checksum/policy: {checksum}"
            );
            assert_eq!(annotations.as_object().unwrap().len(), 1, "{annotations}");
        }
        if kind(o) == "Secret" && o["metadata"]["name"] == "winadmit-tls" {
            let data = o["data"].as_object_mut().unwrap();
            let keys: Vec<&String> = data.keys().collect();
            assert_eq!(
                keys,
                ["ca.crt", "tls.crt", "tls.key"],
                "the generated Secret's keys"
            );
            for (file, begin) in [
                ("ca.crt", "-----BEGIN CERTIFICATE-----"),
                ("tls.crt", "-----BEGIN CERTIFICATE-----"),
                ("tls.key", "PRIVATE KEY-----"),
            ] {
                let pem = String::from_utf8(unb64(data[file].as_str().unwrap())).unwrap();
                assert!(pem.contains(begin), "{file} is not PEM: {pem}");
                data.insert(file.into(), placeholder(file).into());
            }
            let ns = o["metadata"]["namespace"].as_str().unwrap().to_owned();
            let annotations = o["metadata"].as_object_mut().unwrap().remove("annotations");
            assert_eq!(
                annotations,
                Some(json!({
                    "winadmit.io/rotation": "1",
                    "winadmit.io/hosts": format!("winadmit,winadmit.{ns},winadmit.{ns}.svc,winadmit.{ns}.svc.cluster.local"),
                }))
            );
        }
    }
}

/// The self-signed install's caBundles are the generated Secret's CA; both
/// are then replaced by the placeholder for the comparison.
fn normalise_generated_ca_bundles(helm_objects: &mut [Value]) {
    let secret = helm_objects
        .iter()
        .find(|o| kind(o) == "Secret" && o["metadata"]["name"] == "winadmit-tls")
        .expect("tls.mode=self-signed renders Secret winadmit-tls");
    let ca = secret["data"]["ca.crt"].clone();
    for o in helm_objects
        .iter_mut()
        .filter(|o| kind(o).ends_with("WebhookConfiguration"))
    {
        for hook in o["webhooks"].as_array_mut().unwrap() {
            assert_eq!(
                hook["clientConfig"]["caBundle"], ca,
                "{} caBundle",
                hook["name"]
            );
            hook["clientConfig"]["caBundle"] = placeholder("ca.crt").into();
        }
    }
}

fn committed_render(name: &str) -> Vec<Value> {
    e2e::parse_yaml(&read(
        &root().join(format!("manifests/rendered/{name}.yaml")),
    ))
}

/// `winadmit manifests <args>`, parsed.
fn winadmit_manifests(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["manifests"];
    all.extend(args);
    let out = binary::winadmit(&all);
    assert!(
        out.status.success(),
        "winadmit {all:?}: {}",
        e2e::stderr(&out)
    );
    e2e::parse_yaml(&String::from_utf8(out.stdout).unwrap())
}

fn assert_same_objects(case: &str, mut chart: Vec<Value>, mut kustomize: Vec<Value>) {
    // With gmsa.mode on, both render the `winadmit-gmsa` registration (pods
    // naming a credential spec, failurePolicy Fail whatever `mode` and
    // `failurePolicy` say), compared below with the rest.
    for o in &chart {
        if kind(o) == "ValidatingWebhookConfiguration" && o["metadata"]["name"] == "winadmit-gmsa" {
            assert_eq!(case, "gmsa", "winadmit-gmsa rendered in {case}");
            assert_eq!(o["webhooks"][0]["failurePolicy"], "Fail", "{o}");
        }
    }
    if chart.iter().any(|o| kind(o) == "Secret") {
        normalise_generated_ca_bundles(&mut chart);
    }
    normalise(&mut chart, &mut kustomize);
    let chart = by_id(&chart);
    let kustomize = by_id(&kustomize);
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        kustomize.keys().collect::<Vec<_>>(),
        "{case}: the chart and kustomize render different objects"
    );
    for (id, object) in &chart {
        assert!(
            *object == kustomize[id],
            "{case}: {id} differs\nchart:\n{}\nkustomize:\n{}",
            serde_json::to_string_pretty(object).unwrap(),
            serde_json::to_string_pretty(&kustomize[id]).unwrap()
        );
    }
}

/// `helm template` renders the objects of the kustomize install for the
/// same settings, for every certificate mode and overlay.
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn helm_template_equals_kustomize() {
    let helm = helm::helm("helm_template_equals_kustomize");
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let out = binary::winadmit(&["certs", "--out", certs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    let ca = certs.join("ca.crt");
    let ca_file = format!("tls.caBundle={}", ca.display());
    let enforce = ["--set", "mode=enforce"];
    let cert_manager = ["--set", "tls.mode=cert-manager"];
    let cases: Vec<(&str, &str, Vec<&str>, Vec<Value>)> = vec![
        (
            "cert-manager",
            "winadmit",
            [&cert_manager[..], &enforce].concat(),
            committed_render("cert-manager"),
        ),
        (
            "audit",
            "winadmit",
            cert_manager.to_vec(),
            committed_render("audit"),
        ),
        (
            "custom-resources",
            "winadmit",
            [
                &cert_manager[..],
                &enforce,
                &["--set", "webhook.customResources=true"],
            ]
            .concat(),
            committed_render("custom-resources"),
        ),
        (
            "no-match-conditions",
            "winadmit",
            [
                &cert_manager[..],
                &enforce,
                &["--set", "webhook.matchConditions=false"],
            ]
            .concat(),
            committed_render("no-match-conditions"),
        ),
        (
            "self-signed",
            "winadmit",
            enforce.to_vec(),
            committed_render("self-signed"),
        ),
        (
            "secret (base with --ca-bundle)",
            "winadmit",
            [
                &enforce[..],
                &["--set", "tls.mode=secret", "--set-file", &ca_file],
            ]
            .concat(),
            winadmit_manifests(&["--ca-bundle", ca.to_str().unwrap()]),
        ),
        (
            "cert-manager in namespace win-ops",
            "win-ops",
            [&cert_manager[..], &enforce].concat(),
            winadmit_manifests(&["--overlay", "cert-manager", "--namespace", "win-ops"]),
        ),
        (
            "admission-policy",
            "winadmit",
            [&enforce[..], &["--set", "admissionPolicy.enabled=true"]].concat(),
            committed_render("admission-policy"),
        ),
        (
            "gmsa",
            "winadmit",
            [&cert_manager[..], &enforce, &["--set", "gmsa.mode=auto"]].concat(),
            committed_render("gmsa"),
        ),
        (
            "one-call",
            "winadmit",
            [
                &cert_manager[..],
                &enforce,
                &["--set", "webhook.oneCall=true"],
            ]
            .concat(),
            committed_render("one-call"),
        ),
    ];
    for (case, ns, args, kustomize) in cases {
        assert_same_objects(case, template(&helm, ns, &args), kustomize);
    }
}

/// Two releases in one cluster (release `winadmit` in namespace winadmit,
/// release `team-b` in namespace team-b, each with the webhook, gMSA and the
/// audit): no cluster-scoped object of one has the name of one of the
/// other's, but the CustomResourceDefinitions, which are the cluster's. The
/// release named winadmit keeps the kustomize install's names, and each
/// server manages its own release's mutating configuration.
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn two_releases_share_no_cluster_scoped_name() {
    let helm = helm::helm("two_releases_share_no_cluster_scoped_name");
    let chart = helm::chart();
    let render = |release: &str, ns: &str| {
        e2e::parse_yaml(&helm.ok(&[
            "template",
            release,
            chart.to_str().unwrap(),
            "--namespace",
            ns,
            "--set",
            "gmsa.mode=auto",
            "--set",
            "audit.enabled=true",
        ]))
    };
    let cluster_scoped = |objects: &[Value]| -> BTreeMap<String, String> {
        objects
            .iter()
            .filter(|o| o["metadata"].get("namespace").is_none())
            .filter(|o| !matches!(kind(o), "CustomResourceDefinition" | "Namespace"))
            .map(|o| {
                (
                    format!("{}/{}", kind(o), o["metadata"]["name"].as_str().unwrap()),
                    kind(o).to_owned(),
                )
            })
            .collect()
    };
    let first = render("winadmit", "winadmit");
    let second = render("team-b", "team-b");
    let (a, b) = (cluster_scoped(&first), cluster_scoped(&second));
    for k in [
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        assert!(
            a.values().any(|v| v == k),
            "release winadmit has no {k}: {a:?}"
        );
    }
    let shared: Vec<&String> = a.keys().filter(|k| b.contains_key(*k)).collect();
    assert!(shared.is_empty(), "both releases render {shared:?}");
    for name in [
        "ClusterRole/winadmit",
        "ClusterRoleBinding/winadmit",
        "ValidatingWebhookConfiguration/winadmit",
        "ValidatingWebhookConfiguration/winadmit-gmsa",
        "MutatingWebhookConfiguration/winadmit",
        "ClusterRole/winadmit-audit",
    ] {
        assert!(a.contains_key(name), "release winadmit: no {name} in {a:?}");
    }
    assert!(
        b.contains_key("MutatingWebhookConfiguration/team-b-winadmit"),
        "{b:?}"
    );
    // Each server manages (and may update) its own release's configuration.
    for (objects, own) in [(&first, "winadmit"), (&second, "team-b-winadmit")] {
        let text = serde_json::to_string(objects).unwrap();
        assert!(text.contains(&format!("--manage-pin-linux={own}")), "{own}");
        let role = objects
            .iter()
            .find(|o| kind(o) == "ClusterRole" && o["metadata"]["name"] == own)
            .unwrap();
        let rule = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resources"] == json!(["mutatingwebhookconfigurations"]))
            .unwrap();
        assert_eq!(rule["resourceNames"], json!([own]));
        let binding = objects
            .iter()
            .find(|o| kind(o) == "ClusterRoleBinding" && o["metadata"]["name"] == own)
            .unwrap();
        assert_eq!(binding["roleRef"]["name"], own);
    }
}

/// `gmsa.mode` with the cluster cache off (no kustomize counterpart): the
/// ClusterRole grants only what the gMSA checks need, the ServiceAccount
/// keeps its token (the server reads credential specs with a get), and the
/// flags say so.
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn helm_template_gmsa_without_the_cluster_cache() {
    let helm = helm::helm("helm_template_gmsa_without_the_cluster_cache");
    let objects = template(
        &helm,
        "winadmit",
        &["--set", "clusterCache.mode=off", "--set", "gmsa.mode=on"],
    );
    let find = |k: &str| objects.iter().find(|o| kind(o) == k).cloned();
    let role = find("ClusterRole").expect("a ClusterRole");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["windows.k8s.io"], "resources": ["gmsacredentialspecs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
        ])
    );
    assert!(find("ClusterRoleBinding").is_some());
    let account = find("ServiceAccount").unwrap();
    assert!(
        account.get("automountServiceAccountToken").is_none(),
        "{account}"
    );
    let args =
        find("Deployment").unwrap()["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    let args: Vec<&str> = args
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"--cluster-cache=off"), "{args:?}");
    assert!(args.contains(&"--gmsa=on"), "{args:?}");
    // Off (the default): no gMSA rule, no flag.
    let objects = template(&helm, "winadmit", &[]);
    let text = serde_json::to_string(&objects).unwrap();
    assert!(!text.contains("gmsacredentialspecs") && !text.contains("--gmsa"));
}

/// `registry.*`: the arguments, mount and volume of
/// `manifests/components/registry`, `registry-credentials` and
/// `registry-pull-secrets` (the same strings), the Secrets rule only with
/// `pullSecrets` (also with the cluster cache off), and nothing by default
/// or with `pullSecrets` alone.
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn helm_template_registry_values() {
    use clap::Parser as _;
    let helm = helm::helm("helm_template_registry_values");
    let objects = template(
        &helm,
        "winadmit",
        &[
            "--set",
            "clusterCache.mode=off",
            "--set",
            "registry.enabled=true",
            "--set",
            "registry.credentialsSecret=winadmit-registry-credentials",
            "--set",
            "registry.pullSecrets=true",
        ],
    );
    let find = |k: &str| objects.iter().find(|o| kind(o) == k).cloned();
    let role = find("ClusterRole").expect("a ClusterRole");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])
    );
    let account = find("ServiceAccount").unwrap();
    assert!(
        account.get("automountServiceAccountToken").is_none(),
        "{account}"
    );
    let spec = find("Deployment").unwrap()["spec"]["template"]["spec"].clone();
    let args: Vec<&str> = spec["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // What the kustomize components add, word for word.
    let components = root().join("manifests/components");
    for (component, flag) in [
        ("registry", "--registry"),
        (
            "registry-credentials",
            "--registry-config=/etc/winadmit/registry/.dockerconfigjson",
        ),
        ("registry-pull-secrets", "--registry-pull-secrets"),
    ] {
        let text = read(&components.join(component).join("kustomization.yaml"));
        assert!(text.contains(&format!("value: {flag}\n")), "{component}");
        assert!(args.contains(&flag), "{flag}: {args:?}");
    }
    let mount = spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "registry-credentials")
        .cloned()
        .expect("the credentials are mounted");
    assert_eq!(
        mount,
        json!({"name": "registry-credentials", "mountPath": "/etc/winadmit/registry", "readOnly": true})
    );
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "registry-credentials")
        .cloned()
        .expect("the Secret is a volume");
    assert_eq!(
        volume["secret"],
        json!({"secretName": "winadmit-registry-credentials", "defaultMode": 288})
    );
    let cli = winadmit::entry::cli::Cli::try_parse_from(
        std::iter::once("winadmit").chain(args.iter().copied()),
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let winadmit::entry::cli::Command::Serve(serve) = cli.command else {
        panic!("{args:?} is not `serve`");
    };
    assert!(serve.images.registry && serve.images.registry_pull_secrets);

    // Off (the default), and pullSecrets without enabled: nothing.
    for extra in [&[][..], &["--set", "registry.pullSecrets=true"][..]] {
        let text = serde_json::to_string(&template(&helm, "winadmit", extra)).unwrap();
        assert!(
            !text.contains("--registry")
                && !text.contains("\"secrets\"")
                && !text.contains("registry-credentials"),
            "{extra:?}"
        );
    }
}

/// The values the kustomize install has no counterpart for render what
/// they say, and nothing when off.
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn helm_template_extra_values() {
    let helm = helm::helm("helm_template_extra_values");
    let find = |objects: &[Value], k: &str| -> Option<Value> {
        objects.iter().find(|o| kind(o) == k).cloned()
    };
    let defaults = template(&helm, "winadmit", &[]);
    assert!(find(&defaults, "ServiceMonitor").is_none());
    let pod_spec = |objects: &[Value]| {
        find(objects, "Deployment").unwrap()["spec"]["template"]["spec"].clone()
    };
    assert!(pod_spec(&defaults).get("priorityClassName").is_none());

    let objects = template(
        &helm,
        "winadmit",
        &[
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "metrics.serviceMonitor.labels.release=prom",
            "--set",
            "priorityClassName=system-cluster-critical",
            "--set",
            "replicas=3",
            "--set",
            "image.tag=9.9.9",
            "--set",
            "podDisruptionBudget.enabled=false",
            "--set",
            "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.10/32",
            "--set",
            "clusterCache.mode=off",
            "--set",
            "clusterCache.syncTimeout=30s",
            "--set",
            "policy.rules.WIN-HOSTNETWORK.severity=warning",
        ],
    );
    let monitor = find(&objects, "ServiceMonitor").expect("a ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let deployment = find(&objects, "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    let spec = pod_spec(&objects);
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        spec["containers"][0]["image"],
        "ghcr.io/winadmit/winadmit:9.9.9"
    );
    let args = spec["containers"][0]["args"].as_array().unwrap();
    assert!(args.contains(&json!("--cluster-cache=off")), "{args:?}");
    assert!(
        args.contains(&json!("--cluster-cache-sync-timeout=30s")),
        "{args:?}"
    );
    assert!(find(&objects, "PodDisruptionBudget").is_none());
    assert!(
        find(&objects, "ClusterRole").is_none(),
        "clusterCache.mode=off needs no RBAC"
    );
    let netpol = find(&objects, "NetworkPolicy").unwrap();
    assert_eq!(
        netpol["spec"]["ingress"][0],
        json!({"ports": [{"port": 8443, "protocol": "TCP"}], "from": [{"ipBlock": {"cidr": "10.0.0.10/32"}}]})
    );
    // The policy file: the chart's mode, and the extra keys, and the
    // server's strict loader accepts it.
    let policy = find(&objects, "ConfigMap").unwrap()["data"]["policy.yaml"]
        .as_str()
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let file = e2e::write(dir.path(), "policy.yaml", &policy);
    let manifest = e2e::write(
        dir.path(),
        "pod.yaml",
        &e2e::pod("x", "web", json!({})).to_string(),
    );
    let out = binary::winadmit(&[
        "lint",
        "--policy",
        file.to_str().unwrap(),
        manifest.to_str().unwrap(),
    ]);
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "the chart's policy does not load: {}\n{policy}",
        e2e::stderr(&out)
    );
    let parsed: Value = serde_saphyr::from_str(&policy).unwrap();
    assert_eq!(parsed["mode"], "audit");
    assert_eq!(parsed["rules"]["WIN-HOSTNETWORK"]["severity"], "warning");

    // A new policy rolls the pods; the same policy does not.
    let checksum = |objects: &[Value]| {
        find(objects, "Deployment").unwrap()["spec"]["template"]["metadata"]["annotations"]
            ["checksum/policy"]
            .clone()
    };
    let enforce = template(&helm, "winadmit", &["--set", "mode=enforce"]);
    assert_ne!(checksum(&defaults), checksum(&enforce));
    assert_eq!(
        checksum(&defaults),
        checksum(&template(&helm, "winadmit", &[]))
    );
}

/// helm refuses bad values, naming the value and what it accepts.
#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn bad_values_are_refused_with_the_field() {
    let helm = helm::helm("bad_values_are_refused_with_the_field");
    let chart = helm::chart();
    let cases: &[(&[&str], &str)] = &[
        (
            &["mode=enforcing"],
            "at '/mode': value must be one of 'enforce', 'warn', 'audit'",
        ),
        (
            &["failurePolicy=Never"],
            "at '/failurePolicy': value must be one of '', 'Fail', 'Ignore'",
        ),
        (&["replicas=0"], "at '/replicas': minimum: got 0, want 1"),
        (
            &["tls.mode=vault"],
            "at '/tls/mode': value must be one of 'self-signed', 'cert-manager', 'secret'",
        ),
        (
            &["imag.tag=1.0"],
            "additional properties 'imag' not allowed",
        ),
        (
            &["webhook.url=http://winadmit.example"],
            "at '/webhook/url'",
        ),
        (
            &["clusterCache.syncTimeout=ten"],
            "at '/clusterCache/syncTimeout'",
        ),
        (
            &["gmsa.mode=yes"],
            "at '/gmsa/mode': value must be one of 'auto', 'on', 'off'",
        ),
        (
            &["policy.mode=warn"],
            "policy.mode: set the chart value `mode`",
        ),
        (
            &["tls.mode=secret"],
            "tls.caBundle: tls.mode=secret needs the PEM CA certificate",
        ),
        (
            &["admissionPolicy.enabled=true", "failurePolicy=Ignore"],
            "failurePolicy: applies to the webhook",
        ),
    ];
    for (sets, message) in cases {
        let mut args = vec!["template", "winadmit", chart.to_str().unwrap()];
        for s in *sets {
            args.extend(["--set", s]);
        }
        let out = helm.run(&args);
        let stderr = e2e::stderr(&out);
        assert!(!out.status.success(), "{sets:?} was accepted");
        assert!(
            stderr.contains(message),
            "{sets:?}: expected {message:?} in:\n{stderr}"
        );
    }
    // Too old a cluster for what the values ask.
    let out = helm.run(&[
        "template",
        "winadmit",
        chart.to_str().unwrap(),
        "--kube-version",
        "1.27",
    ]);
    assert!(
        e2e::stderr(&out).contains("webhook.matchConditions needs Kubernetes 1.28 or newer (this cluster: v1.27): set webhook.matchConditions=false"),
        "{}",
        e2e::stderr(&out)
    );
    let out = helm.run(&[
        "template",
        "winadmit",
        chart.to_str().unwrap(),
        "--kube-version",
        "1.27",
        "--set",
        "webhook.matchConditions=false",
    ]);
    assert!(out.status.success(), "{}", e2e::stderr(&out));
}

// ---------------------------------------------------------------------------
// install, upgrade, uninstall against the API server.

/// The cluster tests share one API server and install cluster-wide
/// objects: one at a time.
static CLUSTER: Mutex<()> = Mutex::new(());

/// A TCP forwarder on one address to a backend that can be switched: what a
/// Service does for the API server. Connections stay with the backend they
/// were opened to; new ones go to the current backend.
struct Forwarder {
    backend: Arc<Mutex<SocketAddr>>,
}

impl Forwarder {
    fn start(listener: TcpListener, backend: SocketAddr) -> Self {
        let backend = Arc::new(Mutex::new(backend));
        let current = backend.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let to = *current.lock().unwrap();
                std::thread::spawn(move || {
                    let Ok(server) = TcpStream::connect(to) else {
                        let _ = client.shutdown(Shutdown::Both);
                        return;
                    };
                    pipe(client, server);
                });
            }
        });
        Self { backend }
    }

    fn switch(&self, to: SocketAddr) {
        *self.backend.lock().unwrap() = to;
    }
}

fn pipe(a: TcpStream, b: TcpStream) {
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    let one = std::thread::spawn(move || copy(a, b));
    copy(b2, a2);
    let _ = one.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// What the kubelet does for a winadmit pod: the chart's Secret and
/// ConfigMap as files (replaced atomically, like a projected volume).
fn mount(cp: &ControlPlane, ns: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let secret = cp.get("secret", ns, "winadmit-tls");
    let file = |k: &str| String::from_utf8(unb64(secret["data"][k].as_str().unwrap())).unwrap();
    server::write_pair(dir, &file("tls.crt"), &file("tls.key"));
    let config = cp.get("configmap", ns, "winadmit-policy");
    let tmp = dir.join("policy.yaml.tmp");
    std::fs::write(&tmp, config["data"]["policy.yaml"].as_str().unwrap()).unwrap();
    std::fs::rename(tmp, dir.join("policy.yaml")).unwrap();
}

/// A winadmit "pod": `winadmit serve` on the files `mount` wrote, with the
/// cluster cache reading as the chart's ServiceAccount.
fn start_pod(dir: &Path, kubeconfig: &Path) -> Server {
    let s = |p: PathBuf| p.display().to_string();
    let args = [
        "--tls-cert".to_owned(),
        s(dir.join("tls.crt")),
        "--tls-key".to_owned(),
        s(dir.join("tls.key")),
        "--policy".to_owned(),
        s(dir.join("policy.yaml")),
        "--tls-reload-interval".to_owned(),
        "1s".to_owned(),
        "--cluster-cache".to_owned(),
        "on".to_owned(),
        "--kubeconfig".to_owned(),
        s(kubeconfig.to_path_buf()),
    ];
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Server::start(&refs)
}

/// Waits (30 s at most) for the cluster cache's first list of namespaces,
/// which `/readyz` (the readiness probe) waits for.
fn wait_ready(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server.logs_contain("cluster cache: namespaces listed") {
        assert!(
            Instant::now() < deadline,
            "not ready:\n{}",
            server.all_logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Windows pod; `bad` adds hostNetwork without HostProcess
/// (WIN-HOSTNETWORK, an error).
fn windows_pod(ns: &str, name: &str, bad: bool) -> Value {
    let mut spec = json!({"nodeSelector": {"kubernetes.io/os": "windows"}});
    if bad {
        spec["hostNetwork"] = json!(true);
    }
    e2e::pod(ns, name, spec)
}

/// The validating review lines of `name` in the servers' logs.
fn validated(servers: &[&Server], name: &str) -> Vec<Value> {
    servers
        .iter()
        .flat_map(|s| s.stdout.lock().unwrap().clone())
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|v| v["message"] == "admission review" && v["name"] == name)
        .filter(|v| {
            v["endpoint"]
                .as_str()
                .is_some_and(|e| e.contains("validate"))
        })
        .collect()
}

fn webhook_configurations(cp: &ControlPlane) -> Vec<String> {
    cp.kubectl_ok(&[
        "get",
        "validatingwebhookconfigurations,mutatingwebhookconfigurations",
        "-o",
        "name",
    ])
    .lines()
    .map(str::to_owned)
    .collect()
}

fn ca_bundle_certs(cp: &ControlPlane) -> usize {
    let config = cp.get("validatingwebhookconfiguration", "", "winadmit");
    let pem = String::from_utf8(unb64(
        config["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .unwrap(),
    ))
    .unwrap();
    pem.matches("-----BEGIN CERTIFICATE-----").count()
}

/// `helm install`, `helm upgrade` and `helm uninstall` of the webhook,
/// with the chart's own certificates and policy:
///
/// 1. install (defaults: audit, Ignore, self-signed): a Windows
///    hostNetwork pod is denied through kubectl in a namespace labelled
///    `winadmit.io/mode=enforce` and admitted (and reviewed) elsewhere;
/// 2. upgrade to `mode=enforce` with a new certificate
///    (`tls.selfSigned.rotation`), then the kubelet's file update and the
///    Deployment's rolling replacement, while pods are created (dry run)
///    throughout: every good pod is admitted and every bad one denied by
///    winadmit or, under the old audit policy, admitted after its review;
///    never a failed call, never an unreviewed admission. Afterwards the
///    bad pod is denied everywhere;
/// 3. uninstall: no webhook configuration is left, and nothing of the
///    release in its namespace.
#[test]
#[cfg_attr(
    all(no_helm, no_control_plane),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
#[cfg_attr(
    all(no_helm, not(no_control_plane)),
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
#[cfg_attr(
    all(not(no_helm), no_control_plane),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn helm_install_upgrade_uninstall_webhook() {
    let test = "helm_install_upgrade_uninstall_webhook";
    let helm = helm::helm(test);
    let cp = controlplane::shared(test);
    let _cluster = CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let helm = helm.with_kubeconfig(&cp.kubeconfig);
    let chart = helm::chart();
    let chart = chart.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();

    // The Service: a forwarder on a fixed address, the webhook URL.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let url_value = format!("webhook.url={url}");

    // Bad values are refused at install, and nothing is installed.
    let out = helm.run(&[
        "install",
        "winadmit",
        chart,
        "-n",
        "winadmit",
        "--create-namespace",
        "--set",
        "mode=block",
    ]);
    assert!(!out.status.success());
    let err = e2e::stderr(&out);
    assert!(
        err.starts_with(
            "Error: INSTALLATION FAILED: values don't meet the specifications of the schema(s)"
        ) && err.contains("- at '/mode': value must be one of 'enforce', 'warn', 'audit'"),
        "{err}"
    );
    assert!(
        webhook_configurations(cp)
            .iter()
            .all(|n| !n.ends_with("/winadmit"))
    );

    // 1. install.
    let notes = helm.ok(&[
        "install",
        "winadmit",
        chart,
        "-n",
        "winadmit",
        "--create-namespace",
        "--set",
        &url_value,
    ]);
    assert!(
        notes.contains("winadmit report"),
        "NOTES.txt names the dry run:\n{notes}"
    );
    assert!(
        notes.contains("winadmit.io/mode=warn"),
        "NOTES.txt gives the audit rollout:\n{notes}"
    );
    assert_eq!(ca_bundle_certs(cp), 1);
    cp.namespace("helm-enforced", &[("winadmit.io/mode", "enforce")]);
    cp.namespace("helm-apps", &[]);
    let pod_a = dir.path().join("pod-a");
    mount(cp, "winadmit", &pod_a);
    let kubeconfig = cp.service_account_kubeconfig(dir.path(), "winadmit", "winadmit");
    let a = start_pod(&pod_a, &kubeconfig);
    wait_ready(&a);
    let forwarder = Forwarder::start(listener, a.addr);
    let probe = e2e::Webhook {
        server: a,
        ca_pem: Vec::new(),
        dir: tempfile::tempdir().unwrap(),
    };
    e2e::wait_registered(cp, &probe, "helm-apps", 2);
    let a = probe.server;

    // `kubectl apply -f pod.yaml` of a Windows hostNetwork pod named `name`.
    let apply = |ns: &str, name: &str| {
        let mut bad = windows_pod("", name, true);
        bad["metadata"].as_object_mut().unwrap().remove("namespace");
        let file = e2e::write(dir.path(), &format!("{name}.yaml"), &bad.to_string());
        cp.kubectl(&["apply", "-n", ns, "-f", file.to_str().unwrap()])
    };
    let out = apply("helm-enforced", "iis-enforced");
    assert!(
        !out.status.success(),
        "the hostNetwork pod was admitted where the namespace enforces"
    );
    let err = e2e::stderr(&out);
    assert!(
        err.contains("admission webhook \"validate.winadmit.io\" denied the request")
            && err.contains("[WIN-HOSTNETWORK]"),
        "{err}"
    );
    let out = apply("helm-apps", "iis-audited");
    assert!(
        out.status.success(),
        "audit mode denied: {}",
        e2e::stderr(&out)
    );

    // 2. upgrade, polled throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Vec<(String, Answer)>>> = Arc::default();
    let poller = {
        let (stop, answers) = (stop.clone(), answers.clone());
        std::thread::spawn(move || {
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let names = [format!("good-{i}"), format!("bad-{i}")];
                let pods = [
                    windows_pod("helm-apps", &names[0], false),
                    windows_pod("helm-apps", &names[1], true),
                ];
                let got = cp.dry_run_create_all(&pods);
                answers.lock().unwrap().extend(names.into_iter().zip(got));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let answered = || answers.lock().unwrap().len();
    let wait_for_answers = |n: usize| {
        let target = answered() + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while answered() < target {
            assert!(Instant::now() < deadline, "the poller stalled");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for_answers(6);
    helm.ok(&[
        "upgrade",
        "winadmit",
        chart,
        "-n",
        "winadmit",
        "--reuse-values",
        "--set",
        "mode=enforce",
        "--set",
        "tls.selfSigned.rotation=2",
    ]);
    assert_eq!(
        ca_bundle_certs(cp),
        2,
        "the webhooks trust the new and the previous CA"
    );
    let config = cp.get("validatingwebhookconfiguration", "", "winadmit");
    assert_eq!(config["webhooks"][0]["failurePolicy"], "Fail");
    wait_for_answers(6);
    // The kubelet updates the mounted Secret: pod A reloads the certificate.
    mount(cp, "winadmit", &pod_a);
    let reloaded = Instant::now() + Duration::from_secs(30);
    while !a.logs_contain("reloaded the TLS certificate") {
        assert!(
            Instant::now() < reloaded,
            "pod A did not reload its certificate:\n{}",
            a.all_logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_answers(6);
    // The Deployment rolls (checksum/policy changed): pod B starts on the
    // new files, turns ready and takes the new connections; pod A drains.
    let pod_b = dir.path().join("pod-b");
    mount(cp, "winadmit", &pod_b);
    let mut b = start_pod(&pod_b, &kubeconfig);
    wait_ready(&b);
    forwarder.switch(b.addr);
    let mut a = a;
    a.sigterm();
    a.wait_exit(Duration::from_secs(30));
    let denied_by_b =
        || {
            answers.lock().unwrap().iter().any(|(n, ans)| {
                n.starts_with("bad-") && !ans.ok() && !validated(&[&b], n).is_empty()
            })
        };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !denied_by_b() {
        assert!(
            Instant::now() < deadline,
            "pod B never denied a bad pod:\n{}",
            b.all_logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for_answers(6);
    stop.store(true, Ordering::SeqCst);
    poller.join().unwrap();

    let answers = answers.lock().unwrap().clone();
    let mut audited = 0;
    let mut denied = 0;
    for (name, answer) in &answers {
        let message = answer.message();
        assert!(
            !message.contains("failed calling webhook") && answer.code != 0,
            "{name}: a failed call during the upgrade: {} {message}",
            answer.code
        );
        if answer.ok() {
            // The log line may trail the answer.
            let deadline = Instant::now() + Duration::from_secs(10);
            while validated(&[&a, &b], name).is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "{name} was admitted without a review"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            if name.starts_with("bad-") {
                audited += 1;
            }
        } else {
            assert!(
                name.starts_with("bad-"),
                "{name}, a good pod, was refused: {message}"
            );
            assert!(
                message.contains("admission webhook \"validate.winadmit.io\" denied the request")
                    && message.contains("[WIN-HOSTNETWORK]"),
                "{name}: {message}"
            );
            denied += 1;
        }
    }
    assert!(
        audited > 0 && denied > 0,
        "audited {audited}, denied {denied} of {}",
        answers.len()
    );
    eprintln!(
        "{test}: {} pods created during the upgrade: {audited} bad ones audited, {denied} denied",
        answers.len()
    );

    // An upgrade without a new rotation value keeps the certificate and
    // both CAs.
    let before = cp.get("secret", "winadmit", "winadmit-tls")["data"].clone();
    helm.ok(&[
        "upgrade",
        "winadmit",
        chart,
        "-n",
        "winadmit",
        "--reuse-values",
    ]);
    assert_eq!(cp.get("secret", "winadmit", "winadmit-tls")["data"], before);
    assert_eq!(ca_bundle_certs(cp), 2);

    // Enforce everywhere now.
    let out = apply("helm-apps", "iis-enforced");
    assert!(
        !out.status.success(),
        "the hostNetwork pod was admitted after the upgrade to enforce"
    );
    assert!(
        e2e::stderr(&out).contains("[WIN-HOSTNETWORK]"),
        "{}",
        e2e::stderr(&out)
    );

    // 3. uninstall.
    helm.ok(&["uninstall", "winadmit", "-n", "winadmit", "--wait"]);
    let left = webhook_configurations(cp);
    assert!(
        left.iter().all(|n| !n.ends_with("/winadmit")),
        "left behind: {left:?}"
    );
    let left = cp.kubectl_ok(&[
        "get",
        "deployment,service,configmap,secret,serviceaccount,networkpolicy,poddisruptionbudget",
        "-n",
        "winadmit",
        "-o",
        "name",
    ]);
    let left: Vec<&str> = left
        .lines()
        .filter(|l| l.contains("winadmit") && !l.contains("kube-root-ca"))
        .collect();
    assert!(left.is_empty(), "left in namespace winadmit: {left:?}");
    for cluster_wide in ["clusterrole", "clusterrolebinding"] {
        let out = cp.kubectl(&["get", cluster_wide, "winadmit"]);
        assert!(!out.status.success(), "{cluster_wide} winadmit is left");
    }
    // Nothing calls winadmit any more: the pod is admitted unreviewed.
    let out = apply("helm-apps", "iis-uninstalled");
    assert!(out.status.success(), "{}", e2e::stderr(&out));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        validated(&[&b], "iis-uninstalled").is_empty(),
        "winadmit was still called"
    );
    b.sigterm();
    b.wait_exit(Duration::from_secs(30));
}

/// Whether the PEM certificate `cert` (base64, as in a Secret) is valid for
/// `host` (a DNS name or an IP address).
fn names_host(cert: &str, host: &str) -> bool {
    use rustls::pki_types::pem::PemObject as _;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(&unb64(cert)).unwrap();
    let cert = webpki::EndEntityCert::try_from(&der).unwrap();
    let name = rustls::pki_types::ServerName::try_from(host).unwrap();
    cert.verify_is_valid_for_subject_name(&name).is_ok()
}

/// `helm upgrade` with a new `webhook.url` host makes a certificate that
/// names it (a new CA; the webhooks trust it and the previous one, as for a
/// rotation), and an upgrade that keeps the host keeps the certificate.
#[test]
#[cfg_attr(
    all(no_helm, no_control_plane),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
#[cfg_attr(
    all(no_helm, not(no_control_plane)),
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
#[cfg_attr(
    all(not(no_helm), no_control_plane),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn helm_upgrade_to_a_new_webhook_url_renews_the_certificate() {
    let test = "helm_upgrade_to_a_new_webhook_url_renews_the_certificate";
    let helm = helm::helm(test);
    let cp = controlplane::shared(test);
    let _cluster = CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let helm = helm.with_kubeconfig(&cp.kubeconfig);
    let chart = helm::chart();
    let chart = chart.to_str().unwrap();
    let ns = "winadmit-url";
    let secret = || cp.get("secret", ns, "winadmit-tls");
    let upgrade = |extra: &[&str]| {
        let mut args = vec!["upgrade", "winadmit", chart, "-n", ns, "--reuse-values"];
        args.extend_from_slice(extra);
        helm.ok(&args);
    };

    helm.ok(&[
        "install",
        "winadmit",
        chart,
        "-n",
        ns,
        "--create-namespace",
        "--set",
        "webhook.url=https://webhook-a.example.test:8443",
    ]);
    let first = secret();
    let crt = first["data"]["tls.crt"].as_str().unwrap().to_owned();
    for host in ["webhook-a.example.test", &format!("winadmit.{ns}.svc")] {
        assert!(
            names_host(&crt, host),
            "the certificate does not name {host}"
        );
    }
    assert_eq!(ca_bundle_certs(cp), 1);

    // Another host: a certificate for it, trusted along with the previous CA.
    upgrade(&["--set", "webhook.url=https://webhook-b.example.test:8443"]);
    let second = secret();
    let crt = second["data"]["tls.crt"].as_str().unwrap().to_owned();
    assert!(
        names_host(&crt, "webhook-b.example.test"),
        "the upgrade kept a certificate that does not name the new host"
    );
    assert!(!names_host(&crt, "webhook-a.example.test"));
    assert_eq!(second["data"]["previous-ca.crt"], first["data"]["ca.crt"]);
    assert_eq!(
        second["metadata"]["annotations"]["winadmit.io/hosts"],
        format!(
            "winadmit,winadmit.{ns},winadmit.{ns}.svc,winadmit.{ns}.svc.cluster.local,webhook-b.example.test"
        )
    );
    assert_eq!(
        ca_bundle_certs(cp),
        2,
        "the webhooks trust the new and the previous CA"
    );

    // The same host on another port, and an IP address.
    upgrade(&["--set", "webhook.url=https://webhook-b.example.test:9443/"]);
    assert_eq!(
        secret()["data"],
        second["data"],
        "same host, same certificate"
    );
    upgrade(&["--set", "webhook.url=https://192.0.2.7:8443"]);
    let third = secret();
    let crt = third["data"]["tls.crt"].as_str().unwrap().to_owned();
    assert!(
        names_host(&crt, "192.0.2.7"),
        "the certificate does not name the address"
    );
    assert_eq!(third["data"]["previous-ca.crt"], second["data"]["ca.crt"]);

    helm.ok(&["uninstall", "winadmit", "-n", ns, "--wait"]);
}

/// The admission-policy install: helm installs the ValidatingAdmissionPolicies
/// and their bindings, the API server itself denies a Windows hostNetwork
/// pod, and `helm uninstall` leaves no policy or binding behind.
#[test]
#[cfg_attr(
    all(no_helm, no_control_plane),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
#[cfg_attr(
    all(no_helm, not(no_control_plane)),
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
#[cfg_attr(
    all(not(no_helm), no_control_plane),
    ignore = "needs kube-apiserver, etcd and kubectl v1.37, which are not built: run tests/apiserver/build.sh"
)]
fn helm_install_uninstall_admission_policy() {
    let test = "helm_install_uninstall_admission_policy";
    let helm = helm::helm(test);
    let cp = controlplane::shared(test);
    let _cluster = CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let helm = helm.with_kubeconfig(&cp.kubeconfig);
    let chart = helm::chart();
    let chart = chart.to_str().unwrap();
    let policies = || -> Vec<String> {
        cp.kubectl_ok(&[
            "get",
            "validatingadmissionpolicies,validatingadmissionpolicybindings",
            "-o",
            "name",
        ])
        .lines()
        .filter(|l| l.contains("/winadmit-"))
        .map(str::to_owned)
        .collect()
    };
    let notes = helm.ok(&[
        "install",
        "winadmit-policies",
        chart,
        "-n",
        "winadmit-policies",
        "--create-namespace",
        "--set",
        "admissionPolicy.enabled=true",
        "--set",
        "mode=enforce",
    ]);
    assert!(
        notes.contains("kubectl get validatingadmissionpolicies,validatingadmissionpolicybindings"),
        "NOTES.txt names the installed policies:\n{notes}"
    );
    let installed = policies();
    let expected: Vec<String> = committed_render("admission-policy")
        .iter()
        .map(|o| {
            format!(
                "{}.admissionregistration.k8s.io/{}",
                kind(o).to_lowercase(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let mut sorted = expected.clone();
    sorted.sort();
    let mut got = installed.clone();
    got.sort();
    assert_eq!(got, sorted);

    cp.namespace("helm-policies", &[]);
    let pod = windows_pod("helm-policies", "iis", true);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = e2e::create(cp, &pod, true);
        let err = e2e::stderr(&out);
        if !out.status.success() {
            assert!(
                err.contains("ValidatingAdmissionPolicy 'winadmit-errors'"),
                "{err}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the policies never denied the hostNetwork pod"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    helm.ok(&[
        "uninstall",
        "winadmit-policies",
        "-n",
        "winadmit-policies",
        "--wait",
    ]);
    assert_eq!(
        policies(),
        Vec::<String>::new(),
        "left behind after helm uninstall"
    );
}
