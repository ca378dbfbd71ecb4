//! The install in `manifests/`: the committed renders in
//! `manifests/rendered/` equal `kubectl kustomize` for every overlay, every
//! object is a valid Kubernetes object, the webhooks call the server's
//! routes, `winadmit lint` passes on the install, `winadmit manifests`
//! renders the same objects as kustomize, and the webhooks'
//! matchConditions never skip an object winadmit would act on.
//!
//! Needs `kubectl` (client only, no cluster) for the kustomize tests: v1.37
//! built from `tests/apiserver/` when Go is installed, else the one on PATH.
//! Without either they print why and pass, unless `WINADMIT_REQUIRE_KUBECTL` is
//! set (CI sets it), in which case they fail. The other tests read the
//! committed renders through `winadmit manifests` and need no kubectl.

use crate::controlplane;
use crate::corpus_dir as corpus_location;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use serde_json::Value;
use winadmit::decision::policy::{Mode, Policy};
use winadmit::entry::manifests;

const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

/// (name for `winadmit manifests --overlay`, directory under `manifests/`).
const OVERLAYS: &[(&str, &str)] = &[
    ("base", ""),
    ("cert-manager", "overlays/cert-manager"),
    ("self-signed", "overlays/self-signed"),
    ("audit", "overlays/audit"),
    ("no-match-conditions", "overlays/no-match-conditions"),
    ("custom-resources", "overlays/custom-resources"),
    ("gmsa", "overlays/gmsa"),
    ("one-call", "overlays/one-call"),
];

fn manifests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// A copy of `manifests/` with `winadmit certs` output where the
/// self-signed overlay reads it.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        let tree = Self::copy();
        let certs = tree.certs();
        let out = Command::new(BIN)
            .args(["certs", "--force", "--out"])
            .arg(&certs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tree
    }

    /// The tree `manifests/rendered/self-signed.yaml` is rendered from: the
    /// placeholder files where the self-signed overlay reads its certificates.
    fn with_placeholder_certs() -> Self {
        let tree = Self::copy();
        std::fs::create_dir_all(tree.certs()).unwrap();
        for (name, text) in manifests::CERT_PLACEHOLDERS {
            std::fs::write(tree.certs().join(name), text).unwrap();
        }
        tree
    }

    fn copy() -> Self {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&manifests_dir(), &dir.path().join("manifests"));
        Self { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("manifests")
    }

    fn certs(&self) -> PathBuf {
        self.root().join("overlays/self-signed/certs")
    }

    fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.certs().join("ca.crt")).unwrap()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(from).unwrap();
        // Never copy a developer's real keys into the test tree.
        if rel.starts_with("overlays/self-signed/certs") {
            continue;
        }
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Checks that kubectl runs; the tests that call this are ignored when
/// `build.rs` finds no way to get kubectl (`cfg(no_kubectl)`).
fn require_kubectl() {
    let program = controlplane::kubectl_program();
    let out = Command::new(&program)
        .args(["version", "--client"])
        .output();
    assert!(
        out.as_ref().is_ok_and(|o| o.status.success()),
        "{} does not run ({out:?}); run tests/apiserver/build.sh (it builds kubectl v1.37) or put kubectl on PATH",
        program.display()
    );
}

fn parse_yaml(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn kustomize_text(tree: &Tree, dir: &str) -> String {
    let out = Command::new(controlplane::kubectl_program())
        .arg("kustomize")
        .arg(tree.root().join(dir))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize manifests/{dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kustomize(tree: &Tree, dir: &str) -> Vec<Value> {
    parse_yaml(&kustomize_text(tree, dir))
}

fn winadmit(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn render(tree: &Tree, overlay: &str, extra: &[&str]) -> Vec<Value> {
    let certs = tree.certs();
    let mut args = vec!["manifests", "--overlay", overlay];
    if overlay == "self-signed" {
        args.extend(["--certs", certs.to_str().unwrap()]);
    }
    args.extend(extra);
    let out = winadmit(&args);
    assert!(
        out.status.success(),
        "winadmit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_yaml(&String::from_utf8(out.stdout).unwrap())
}

fn kind(obj: &Value) -> &str {
    obj["kind"].as_str().unwrap_or_default()
}

/// The one object of kind `k` (of the webhook configurations, the one
/// named `winadmit`: components/gmsa adds `winadmit-gmsa`, [`gmsa_registration`]).
fn one<'a>(objects: &'a [Value], k: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| kind(o) == k)
        .filter(|o| !k.ends_with("WebhookConfiguration") || o["metadata"]["name"] == "winadmit")
        .collect();
    assert_eq!(found.len(), 1, "expected one {k}");
    found[0]
}

/// The webhook registrations of a render and the path each calls: both
/// (`/validate`, `/mutate`), or for the one-call install the mutating one
/// alone, at `/admit`.
fn registrations(objects: &[Value]) -> Vec<(&'static str, &'static str)> {
    let validating = objects.iter().any(|o| {
        kind(o) == "ValidatingWebhookConfiguration" && o["metadata"]["name"] == "winadmit"
    });
    if validating {
        vec![
            ("ValidatingWebhookConfiguration", "/validate"),
            ("MutatingWebhookConfiguration", "/mutate"),
        ]
    } else {
        vec![("MutatingWebhookConfiguration", "/admit")]
    }
}

/// The Windows webhook of a configuration: the validating one's only
/// webhook, the mutating one's first (its second, when the install has it,
/// is [`pin_linux`]).
fn webhook(objects: &[Value], k: &str) -> Value {
    let webhooks = one(objects, k)["webhooks"].as_array().unwrap();
    let expected = if k == "MutatingWebhookConfiguration" && pin_linux(objects).is_some() {
        2
    } else {
        1
    };
    assert_eq!(webhooks.len(), expected, "{k} has {expected} webhooks");
    webhooks[0].clone()
}

/// The mutating configuration's `pin-linux.winadmit.io`, when the install
/// has it (every install but no-match-conditions).
fn pin_linux(objects: &[Value]) -> Option<Value> {
    one(objects, "MutatingWebhookConfiguration")["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "pin-linux.winadmit.io")
        .cloned()
}

/// The `gmsa.winadmit.io` webhook of components/gmsa's `winadmit-gmsa`, when
/// the install has it.
fn gmsa_registration(objects: &[Value]) -> Option<Value> {
    let configs: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            kind(o) == "ValidatingWebhookConfiguration" && o["metadata"]["name"] == "winadmit-gmsa"
        })
        .collect();
    assert!(configs.len() <= 1, "one winadmit-gmsa at most");
    let hooks = configs.first()?["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), 1, "winadmit-gmsa has one webhook");
    assert_eq!(hooks[0]["name"], "gmsa.winadmit.io");
    Some(hooks[0].clone())
}

/// The gMSA boundary's registration: `/validate` on the install's Service,
/// with its TLS, failurePolicy Fail whatever the install's, pods only, and
/// no namespace label in its namespaceSelector (only kube-system and the
/// install's own namespace are left out, by name).
fn check_gmsa_registration(name: &str, ns: &str, gmsa: &Value, mwh: &Value) {
    let svc = &gmsa["clientConfig"]["service"];
    assert_eq!(svc["path"], "/validate", "{name}");
    assert_eq!(svc["namespace"], ns, "{name}");
    assert_eq!(
        svc["name"], mwh["clientConfig"]["service"]["name"],
        "{name}"
    );
    assert_eq!(
        gmsa.pointer("/clientConfig/caBundle"),
        mwh.pointer("/clientConfig/caBundle"),
        "{name}: winadmit-gmsa caBundle"
    );
    assert_eq!(gmsa["failurePolicy"], "Fail", "{name}");
    assert_eq!(
        gmsa["namespaceSelector"],
        serde_json::json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
            "operator": "NotIn", "values": ["kube-system", ns]}]}),
        "{name}: only namespaces excluded by name"
    );
    assert_eq!(
        gmsa["rules"],
        serde_json::json!([{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["pods", "pods/ephemeralcontainers"],
            "scope": "Namespaced"}]),
        "{name}"
    );
}

/// The API server decodes base64 ignoring line breaks, and kustomize wraps
/// long values; compare and type-check the unwrapped form.
fn unwrap_base64(objects: &mut [Value]) {
    let strip = |v: &mut Value| {
        if let Some(s) = v.as_str() {
            *v = s.replace(['\n', '\r'], "").into();
        }
    };
    for obj in objects {
        if kind(obj) == "Secret"
            && let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut)
        {
            data.values_mut().for_each(strip);
        }
        if let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) {
            for h in hooks {
                if let Some(ca) = h.pointer_mut("/clientConfig/caBundle") {
                    strip(ca);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------

/// Every kustomization under `manifests/` (not the components, which only
/// render inside one) has a committed render, and `manifests/rendered/`
/// holds nothing else.
#[test]
fn every_kustomization_has_a_committed_render() {
    let root = manifests_dir();
    let kustomizations: BTreeSet<String> = walkdir::WalkDir::new(&root)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_name() == "kustomization.yaml")
        .filter(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap();
            text.lines().any(|l| l == "kind: Kustomization")
        })
        .map(|e| {
            let dir = e.path().parent().unwrap().strip_prefix(&root).unwrap();
            dir.to_string_lossy().into_owned()
        })
        // `base/` is rendered as `manifests/` (its only resource, below).
        .filter(|dir| dir != "base")
        .collect();
    let top = std::fs::read_to_string(root.join("kustomization.yaml")).unwrap();
    assert!(
        top.ends_with("resources:\n  - base\n"),
        "manifests/kustomization.yaml renders base/ and nothing else"
    );
    let rendered: BTreeSet<String> = manifests::Render::ALL
        .iter()
        .map(|r| r.kustomization().to_owned())
        .collect();
    assert_eq!(
        kustomizations, rendered,
        "every kustomization needs a manifests::Render and a file in manifests/rendered/"
    );
    let files: BTreeSet<String> = std::fs::read_dir(root.join("rendered"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut want: BTreeSet<String> = manifests::Render::ALL
        .iter()
        .map(|r| format!("{}.yaml", r.name()))
        .collect();
    want.insert("README.md".into());
    assert_eq!(files, want);
    // The names `--overlay` takes are the renders' names.
    let overlays: BTreeSet<&str> = OVERLAYS
        .iter()
        .map(|(name, _)| *name)
        .chain(["admission-policy"])
        .collect();
    let names: BTreeSet<&str> = manifests::Render::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(overlays, names);
}

/// Each file of `manifests/rendered/` as `kubectl kustomize` renders its
/// kustomization today (the self-signed one with the placeholder
/// certificates), and whether the committed file, parsed, has the same
/// objects (another kubectl's line wrapping or quoting does not count;
/// order and content do). `winadmit manifests` embeds these files: after
/// they change, the next build carries them.
pub fn renders() -> Vec<(PathBuf, String, bool)> {
    require_kubectl();
    let tree = Tree::with_placeholder_certs();
    manifests::Render::ALL
        .iter()
        .map(|render| {
            let text = kustomize_text(&tree, render.kustomization());
            let path = manifests_dir().join(format!("rendered/{}.yaml", render.name()));
            let same = parse_yaml(&text) == render.objects();
            (path, text, same)
        })
        .collect()
}

/// The TLS and rollout stage of each overlay, as `winadmit manifests`
/// prints it (the committed render, checked against kustomize above, with
/// real certificates for self-signed).
#[test]
fn every_overlay_renders_its_tls_and_stage() {
    let tree = Tree::new();
    for (name, _) in OVERLAYS {
        let objects = render(&tree, name, &[]);
        let kinds: BTreeSet<&str> = objects.iter().map(kind).collect();
        for k in [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Service",
            "Deployment",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "MutatingWebhookConfiguration",
        ] {
            assert!(kinds.contains(k), "{name}: no {k}");
        }
        let hooks = registrations(&objects);
        assert_eq!(hooks.len() == 1, *name == "one-call", "{name}: {hooks:?}");
        let first = hooks[0].0;
        let vwh = webhook(&objects, first);
        let ca_bundle = vwh.pointer("/clientConfig/caBundle");
        let injected = one(&objects, first)
            .pointer("/metadata/annotations/cert-manager.io~1inject-ca-from")
            .and_then(Value::as_str);
        let secret = objects.iter().find(|o| kind(o) == "Secret");
        match *name {
            "base" => {
                assert!(ca_bundle.is_none() && injected.is_none() && secret.is_none());
            }
            "self-signed" => {
                assert!(injected.is_none());
                let want = base64::engine::general_purpose::STANDARD.encode(tree.ca_pem());
                let mut objects = objects.clone();
                unwrap_base64(&mut objects);
                for (k, _) in &hooks {
                    assert_eq!(
                        webhook(&objects, k)["clientConfig"]["caBundle"],
                        want.as_str()
                    );
                }
                let secret = one(&objects, "Secret");
                assert_eq!(secret["type"], "kubernetes.io/tls");
                let keys: BTreeSet<&str> = secret["data"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .collect();
                assert_eq!(keys, BTreeSet::from(["ca.crt", "tls.crt", "tls.key"]));
            }
            _ => {
                // cert-manager and the overlays built on it.
                assert_eq!(injected, Some("winadmit/winadmit-serving"), "{name}");
                assert_eq!(
                    one(&objects, "MutatingWebhookConfiguration")
                        .pointer("/metadata/annotations/cert-manager.io~1inject-ca-from")
                        .and_then(Value::as_str),
                    injected
                );
                let serving = objects
                    .iter()
                    .find(|o| {
                        kind(o) == "Certificate" && o["metadata"]["name"] == "winadmit-serving"
                    })
                    .expect("the serving Certificate");
                assert_eq!(serving["metadata"]["namespace"], "winadmit");
                assert!(ca_bundle.is_none() && secret.is_none());
            }
        }
        let has_conditions = vwh.get("matchConditions").is_some();
        assert_eq!(has_conditions, *name != "no-match-conditions", "{name}");
        let expected_failure = if *name == "audit" { "Ignore" } else { "Fail" };
        for (k, _) in &hooks {
            assert_eq!(
                webhook(&objects, k)["failurePolicy"],
                expected_failure,
                "{name} {k}"
            );
        }
        let policy = load_policy(&objects);
        let expected_mode = if *name == "audit" {
            Mode::Audit
        } else {
            Mode::Enforce
        };
        assert_eq!(policy.mode, expected_mode, "{name}");
    }
}

/// The ConfigMap's policy passes the server's strict loader.
fn load_policy(objects: &[Value]) -> Policy {
    let cm = objects
        .iter()
        .find(|o| kind(o) == "ConfigMap" && o["metadata"]["name"] == "winadmit-policy")
        .expect("the policy ConfigMap");
    let text = cm["data"]["policy.yaml"]
        .as_str()
        .expect("data.policy.yaml");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, text).unwrap();
    winadmit::input::policy::load(&[path])
        .unwrap_or_else(|e| panic!("the ConfigMap's policy does not load: {e}"))
}

/// Deserializes into the k8s-openapi type and back; a field the type does
/// not know (a typo, a wrong level) is dropped on the way and fails the
/// comparison.
fn roundtrip<T>(obj: &Value) -> Result<(), String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: T = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if &back == obj {
        Ok(())
    } else {
        Err(format!(
            "fields lost or changed in a round trip:\n  rendered: {obj}\n  typed:    {back}"
        ))
    }
}

fn check_type(obj: &Value) -> Result<(), String> {
    use k8s_openapi::api::{admissionregistration, apps, core, networking, policy, rbac};
    match kind(obj) {
        "Namespace" => roundtrip::<core::v1::Namespace>(obj),
        "ServiceAccount" => roundtrip::<core::v1::ServiceAccount>(obj),
        "ConfigMap" => roundtrip::<core::v1::ConfigMap>(obj),
        "Secret" => roundtrip::<core::v1::Secret>(obj),
        "Service" => roundtrip::<core::v1::Service>(obj),
        "ClusterRole" => roundtrip::<rbac::v1::ClusterRole>(obj),
        "ClusterRoleBinding" => roundtrip::<rbac::v1::ClusterRoleBinding>(obj),
        "Deployment" => roundtrip::<apps::v1::Deployment>(obj),
        "PodDisruptionBudget" => roundtrip::<policy::v1::PodDisruptionBudget>(obj),
        "NetworkPolicy" => roundtrip::<networking::v1::NetworkPolicy>(obj),
        "ValidatingWebhookConfiguration" => {
            roundtrip::<admissionregistration::v1::ValidatingWebhookConfiguration>(obj)
        }
        "MutatingWebhookConfiguration" => {
            roundtrip::<admissionregistration::v1::MutatingWebhookConfiguration>(obj)
        }
        "ValidatingAdmissionPolicy" => {
            roundtrip::<admissionregistration::v1::ValidatingAdmissionPolicy>(obj)
        }
        "ValidatingAdmissionPolicyBinding" => {
            roundtrip::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>(obj)
        }
        "CustomResourceDefinition" => roundtrip::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(obj),
        // cert-manager's CRDs are not in k8s-openapi: check the fields used
        // against cert-manager.io/v1.
        "Issuer" | "Certificate" => check_cert_manager(obj),
        other => Err(format!("unexpected kind {other}")),
    }
}

fn check_cert_manager(obj: &Value) -> Result<(), String> {
    if obj["apiVersion"] != "cert-manager.io/v1" {
        return Err("cert-manager objects are cert-manager.io/v1".into());
    }
    let allowed: &[&str] = if kind(obj) == "Issuer" {
        &["selfSigned", "ca"]
    } else {
        &[
            "isCA",
            "commonName",
            "secretName",
            "duration",
            "renewBefore",
            "dnsNames",
            "privateKey",
            "usages",
            "issuerRef",
        ]
    };
    let spec = obj["spec"].as_object().ok_or("no spec")?;
    if let Some(unknown) = spec.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("unknown spec field {unknown}"));
    }
    Ok(())
}

#[test]
fn rendered_objects_deserialize_into_their_types() {
    let tree = Tree::new();
    for (name, _) in OVERLAYS {
        let mut objects = render(&tree, name, &[]);
        unwrap_base64(&mut objects);
        for obj in &objects {
            if let Err(e) = check_type(obj) {
                panic!(
                    "{name}: {} {}: {e}",
                    kind(obj),
                    obj["metadata"]["name"].as_str().unwrap_or_default()
                );
            }
        }
    }
}

#[test]
fn webhooks_call_the_servers_routes() {
    let tree = Tree::new();
    for (name, _) in OVERLAYS {
        let objects = render(&tree, name, &[]);
        check_wiring(name, &objects);
    }
}

fn arg_value<'a>(args: &'a [Value], flag: &str) -> &'a str {
    let prefix = format!("{flag}=");
    args.iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {flag}= in the container args"))
}

#[allow(clippy::too_many_lines)] // one walk through the wiring, in order
fn check_wiring(name: &str, objects: &[Value]) {
    let ns = one(objects, "Namespace")["metadata"]["name"]
        .as_str()
        .unwrap();
    let service = one(objects, "Service");
    let deployment = one(objects, "Deployment");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["name"], manifests::CONTAINER);

    // The Service selects the pods and maps 443 to the container's https port, 8443.
    let labels = pod["metadata"]["labels"].as_object().unwrap();
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(labels.get(k), Some(v), "{name}: Service selector {k}");
    }
    let https = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == 443)
        .expect("Service port 443");
    let port_named = |port_name: &Value| -> i64 {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| &p["name"] == port_name)
            .and_then(|p| p["containerPort"].as_i64())
            .unwrap_or_else(|| panic!("{name}: no container port named {port_name}"))
    };
    assert_eq!(port_named(&https["targetPort"]), 8443, "{name}");

    // The server is started as the contract says.
    let args = container["args"].as_array().unwrap();
    assert_eq!(args[0], "serve");
    assert_eq!(arg_value(args, "--listen"), "0.0.0.0:8443");
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{name} {probe}");
        assert_eq!(get["scheme"], "HTTPS", "{name} {probe}");
        assert_eq!(port_named(&get["port"]), 8443, "{name} {probe}");
    }

    // Certificate and policy files come from the mounted Secret and ConfigMap.
    let mount_of = |volume: &str| -> String {
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == volume)
            .and_then(|m| m["mountPath"].as_str())
            .unwrap_or_else(|| panic!("{name}: no mount for volume {volume}"))
            .to_owned()
    };
    let volume = |volume: &str| -> &Value {
        pod["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == volume)
            .unwrap_or_else(|| panic!("{name}: no volume {volume}"))
    };
    let tls_dir = mount_of("tls");
    assert_eq!(arg_value(args, "--tls-cert"), format!("{tls_dir}/tls.crt"));
    assert_eq!(arg_value(args, "--tls-key"), format!("{tls_dir}/tls.key"));
    let secret_name = volume("tls")["secret"]["secretName"].as_str().unwrap();
    if let Some(secret) = objects.iter().find(|o| kind(o) == "Secret") {
        assert_eq!(secret["metadata"]["name"], secret_name, "{name}");
        assert_eq!(secret["metadata"]["namespace"], ns, "{name}");
    }
    if let Some(cert) = objects
        .iter()
        .find(|o| kind(o) == "Certificate" && o["metadata"]["name"] == "winadmit-serving")
    {
        assert_eq!(cert["spec"]["secretName"], secret_name, "{name}");
    }
    let policy_dir = mount_of("policy");
    let cm_name = volume("policy")["configMap"]["name"].as_str().unwrap();
    let key = arg_value(args, "--policy")
        .strip_prefix(&format!("{policy_dir}/"))
        .expect("--policy points into the policy mount");
    let cm = objects
        .iter()
        .find(|o| kind(o) == "ConfigMap" && o["metadata"]["name"] == cm_name)
        .expect("the mounted ConfigMap");
    assert!(
        cm["data"].get(key).is_some(),
        "{name}: ConfigMap has no key {key}"
    );

    // Hardening of the webhook's own Deployment.
    let spec = &pod["spec"];
    assert!(deployment["spec"]["replicas"].as_i64().unwrap() >= 2);
    assert_eq!(spec["nodeSelector"]["kubernetes.io/os"], "linux");
    assert!(
        !spec["topologySpreadConstraints"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    for r in ["requests", "limits"] {
        assert!(
            container["resources"][r]["memory"].is_string(),
            "{name}: {r}"
        );
    }
    let pdb = one(objects, "PodDisruptionBudget");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );

    // Both webhooks: the right path on the Service, shared scope.
    for (k, path) in registrations(objects) {
        let hook = &webhook(objects, k);
        let svc = &hook["clientConfig"]["service"];
        assert_eq!(svc["name"], service["metadata"]["name"], "{name} {path}");
        assert_eq!(svc["namespace"], ns, "{name} {path}");
        assert_eq!(svc["path"], path, "{name}");
        assert_eq!(svc["port"], 443, "{name} {path}");
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(
            hook["admissionReviewVersions"],
            serde_json::json!(["v1", "v1beta1"])
        );
        assert!(hook["timeoutSeconds"].as_i64().unwrap() <= 5);
        let covered: BTreeSet<String> =
            hook["rules"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| {
                    let group = r["apiGroups"][0].as_str().unwrap().to_owned();
                    let ops: Vec<String> = r["operations"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|o| o.as_str().unwrap().to_owned())
                        .collect();
                    r["resources"].as_array().unwrap().iter().map(move |res| {
                        format!("{group}/{} {}", res.as_str().unwrap(), ops.join(","))
                    })
                })
                .collect();
        let both = "CREATE,UPDATE";
        let wanted: BTreeSet<String> = if path == "/validate" {
            [
                "/pods",
                "/pods/ephemeralcontainers",
                "/replicationcontrollers",
                "apps/deployments",
                "apps/replicasets",
                "apps/statefulsets",
                "apps/daemonsets",
                "batch/jobs",
                "batch/cronjobs",
            ]
            .iter()
            .map(|r| format!("{r} {both}"))
            .collect()
        } else {
            // No ReplicaSets (their pods are mutated; see webhooks.yaml) and
            // Jobs only on CREATE (immutable template).
            [
                "/pods",
                "/pods/ephemeralcontainers",
                "/replicationcontrollers",
                "apps/deployments",
                "apps/statefulsets",
                "apps/daemonsets",
                "batch/cronjobs",
            ]
            .iter()
            .map(|r| format!("{r} {both}"))
            .chain(["batch/jobs CREATE".to_owned()])
            .collect()
        };
        // The custom-resources overlay adds the built-in table of custom
        // resources, every one of them (BroadcastJobs are mutated on CREATE
        // only, like Jobs).
        let mut wanted = wanted;
        if name == "custom-resources" {
            for r in winadmit::decision::workload::CUSTOM_RESOURCES {
                let ops = if path != "/validate" && r.plural == "broadcastjobs" {
                    "CREATE"
                } else {
                    both
                };
                wanted.insert(format!("{}/{} {ops}", r.group, r.plural));
            }
            for rule in hook["rules"].as_array().unwrap() {
                if rule["apiGroups"][0] != ""
                    && !["apps", "batch"].contains(&rule["apiGroups"][0].as_str().unwrap())
                {
                    assert_eq!(
                        rule["apiVersions"],
                        serde_json::json!(["*"]),
                        "{name} {path}: every served version"
                    );
                }
            }
        }
        assert_eq!(covered, wanted, "{name} {path}");
        let excluded: BTreeMap<&str, (&str, Vec<&str>)> =
            hook["namespaceSelector"]["matchExpressions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["key"].as_str().unwrap(),
                        (
                            e["operator"].as_str().unwrap(),
                            e["values"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|v| v.as_str().unwrap())
                                .collect(),
                        ),
                    )
                })
                .collect();
        assert_eq!(
            excluded["kubernetes.io/metadata.name"],
            ("NotIn", vec!["kube-system", ns])
        );
        assert_eq!(excluded["winadmit.io/ignore"], ("NotIn", vec!["true"]));
    }
    let mwh = webhook(objects, "MutatingWebhookConfiguration");
    assert_eq!(mwh["reinvocationPolicy"], "IfNeeded");
    // The Linux side fails open, calls what the mutating registration calls
    // (`/admit` in the one-call install, where no validating registration
    // judges a pod it pins to Windows), and is scoped like the rest.
    if let Some(pin) = pin_linux(objects) {
        assert_eq!(pin["failurePolicy"], "Ignore", "{name}: pin-linux");
        assert!(
            pin["timeoutSeconds"].as_i64().unwrap() <= 2,
            "{name}: pin-linux"
        );
        assert_eq!(
            pin["clientConfig"]["service"]["path"], mwh["clientConfig"]["service"]["path"],
            "{name}"
        );
        assert_eq!(pin["clientConfig"]["service"]["namespace"], ns, "{name}");
        assert_eq!(pin["namespaceSelector"], mwh["namespaceSelector"], "{name}");
        assert_eq!(
            pin.pointer("/clientConfig/caBundle"),
            mwh.pointer("/clientConfig/caBundle"),
            "{name}: pin-linux caBundle"
        );
    } else {
        assert_eq!(
            name, "no-match-conditions",
            "only that install has no pin-linux"
        );
    }
    if let Some(gmsa) = gmsa_registration(objects) {
        check_gmsa_registration(name, ns, &gmsa, &mwh);
    } else {
        assert_ne!(name, "gmsa", "the gmsa install registers winadmit-gmsa");
    }
    if let Some(vwh) = objects
        .iter()
        .any(|o| kind(o) == "ValidatingWebhookConfiguration" && o["metadata"]["name"] == "winadmit")
        .then(|| webhook(objects, "ValidatingWebhookConfiguration"))
    {
        for field in [
            "namespaceSelector",
            "matchConditions",
            "failurePolicy",
            "timeoutSeconds",
            "clientConfig/caBundle",
        ] {
            let pointer = format!("/{field}");
            assert_eq!(
                vwh.pointer(&pointer),
                mwh.pointer(&pointer),
                "{name}: the webhooks differ in {field}"
            );
        }
    }

    // The NetworkPolicy admits the webhook port and the metrics port only.
    let np = one(objects, "NetworkPolicy");
    let ports: BTreeSet<i64> = np["spec"]["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["ports"].as_array().unwrap().iter())
        .map(|p| p["port"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, BTreeSet::from([8443, 9090]));
    let metrics: i64 = arg_value(args, "--metrics-listen")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(metrics, 9090);
}

#[test]
fn lint_passes_on_the_rendered_install() {
    for render in manifests::Render::ALL {
        let name = render.name();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, render.text()).unwrap();
        let lint = Command::new(BIN)
            .args(["lint", "--fail-on", "warning", "--color", "never"])
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(
            lint.status.code(),
            Some(0),
            "{name}: winadmit lint failed:\n{}{}",
            String::from_utf8_lossy(&lint.stdout),
            String::from_utf8_lossy(&lint.stderr)
        );
    }
}

#[test]
#[cfg_attr(
    no_kubectl,
    ignore = "needs kubectl: run tests/apiserver/build.sh (it builds kubectl v1.37) or put kubectl on PATH"
)]
fn winadmit_manifests_matches_kustomize() {
    require_kubectl();
    let tree = Tree::new();
    for (name, dir) in OVERLAYS {
        let mut want = kustomize(&tree, dir);
        let mut got = render(&tree, name, &[]);
        unwrap_base64(&mut want);
        unwrap_base64(&mut got);
        let ids = |objs: &[Value]| -> Vec<String> { manifests::by_id(objs).into_keys().collect() };
        assert_eq!(ids(&got), ids(&want), "{name}: different objects");
        let want_by_id = manifests::by_id(&want);
        for (id, obj) in manifests::by_id(&got) {
            assert_eq!(
                obj, want_by_id[&id],
                "{name}: {id} differs from kubectl kustomize"
            );
        }
        let order = |objs: &[Value]| -> Vec<String> {
            objs.iter()
                .map(|o| format!("{}/{}", kind(o), o["metadata"]["name"]))
                .collect()
        };
        assert_eq!(order(&got), order(&want), "{name}: different order");
    }
}

#[test]
fn winadmit_manifests_options() {
    let tree = Tree::new();
    let ca = tree.certs().join("ca.crt");
    let objects = render(
        &tree,
        "base",
        &[
            "--namespace",
            "win-ops",
            "--image",
            "registry.example.com/winadmit@sha256:0123",
            "--ca-bundle",
            ca.to_str().unwrap(),
        ],
    );
    check_wiring("base --namespace win-ops", &objects);
    let deployment = one(&objects, "Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/winadmit@sha256:0123"
    );
    let want = base64::engine::general_purpose::STANDARD.encode(tree.ca_pem());
    for k in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        assert_eq!(
            webhook(&objects, k)["clientConfig"]["caBundle"],
            want.as_str()
        );
    }
    assert_no_default_namespace(&objects);

    // cert-manager: DNS names and the injection annotation move too.
    let objects = render(&tree, "audit", &["--namespace", "win-ops"]);
    check_wiring("audit --namespace win-ops", &objects);
    assert_no_default_namespace(&objects);
    let serving = objects
        .iter()
        .find(|o| kind(o) == "Certificate" && o["metadata"]["name"] == "winadmit-serving")
        .unwrap();
    assert_eq!(
        serving["spec"]["dnsNames"],
        serde_json::json!(winadmit::entry::certs::service_dns_names(
            "winadmit", "win-ops"
        ))
    );
    assert_eq!(
        one(&objects, "ValidatingWebhookConfiguration")["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "win-ops/winadmit-serving"
    );

    // Mistakes are usage errors (exit 2) that say what to do.
    for (args, hint) in [
        (vec!["manifests", "--overlay", "self-signed"], "--certs"),
        (
            vec![
                "manifests",
                "--overlay",
                "cert-manager",
                "--ca-bundle",
                ca.to_str().unwrap(),
            ],
            "drop --ca-bundle",
        ),
        (
            vec!["manifests", "--namespace", "Not_A_Name"],
            "not a valid name",
        ),
        // Certificates made for `winadmit` do not serve `platform`: both
        // names, and the command that makes the right ones.
        (
            vec![
                "manifests",
                "--overlay",
                "self-signed",
                "--certs",
                tree.certs().to_str().unwrap(),
                "--namespace",
                "platform",
            ],
            "tls.crt is for winadmit, winadmit.winadmit, winadmit.winadmit.svc, winadmit.winadmit.svc.cluster.local, but the webhooks call the Service winadmit.platform.svc",
        ),
    ] {
        let out = winadmit(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(hint), "{args:?}: {stderr}");
    }
}

/// No reference to the `winadmit` namespace survives `--namespace`.
fn assert_no_default_namespace(objects: &[Value]) {
    fn walk(v: &Value, path: &str, found: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let here = format!("{path}.{k}");
                    if k == "namespace" && child == "winadmit" {
                        found.push(here.clone());
                    }
                    walk(child, &here, found);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{path}[{i}]"), found);
                }
            }
            // `<svc>.winadmit.svc`, `winadmit/<certificate>`; not the webhook
            // names (`validate.winadmit.io`).
            Value::String(s)
                if s.replace(".winadmit.io", "").contains(".winadmit")
                    || s.starts_with("winadmit/") =>
            {
                found.push(format!("{path}: {s}"));
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for obj in objects {
        walk(
            obj,
            &format!("{}/{}", kind(obj), obj["metadata"]["name"]),
            &mut found,
        );
    }
    assert!(
        found.is_empty(),
        "left in the winadmit namespace: {found:#?}"
    );
}

#[test]
fn image_tag_is_the_crate_version() {
    let objects = manifests::Render::Base.objects();
    let image = one(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        image.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))),
        "bump the image tag in manifests/base/deployment.yaml with the crate version: {image}"
    );
}

// ---------------------------------------------------------------------------
// matchConditions

/// The `may-target-windows` expression, compiled; one per webhook, and the
/// two must be the same text.
fn match_condition() -> cel::Program {
    let objects = manifests::Render::Base.objects();
    let expressions: Vec<String> = [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ]
    .iter()
    .map(|k| {
        let conditions = webhook(&objects, k)["matchConditions"].clone();
        assert_eq!(conditions.as_array().unwrap().len(), 1);
        assert_eq!(conditions[0]["name"], "may-target-windows");
        conditions[0]["expression"].as_str().unwrap().to_owned()
    })
    .collect();
    assert_eq!(expressions[0], expressions[1]);
    cel::Program::compile(&expressions[0])
        .unwrap_or_else(|e| panic!("the matchCondition is not valid CEL: {e}"))
}

fn sends(program: &cel::Program, object: &Value) -> bool {
    let mut cx = cel::Context::default();
    cx.add_variable_from_value("object", cel::to_value(object).unwrap());
    match program.execute(&cx) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("the matchCondition must give a bool, gave {other:?} for {object}"),
    }
}

fn pod(spec: &Value) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
}

fn templated(api: &str, k: &str, spec: &Value) -> Value {
    serde_json::json!({"apiVersion": api, "kind": k, "metadata": {"name": "w"},
        "spec": {"template": {"metadata": {}, "spec": spec}}})
}

fn cronjob(spec: &Value) -> Value {
    serde_json::json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": spec}}}}})
}

#[test]
fn match_conditions_send_what_may_target_windows() {
    use serde_json::json;
    let program = match_condition();
    let linux_app = json!({"containers": [{"name": "app", "image": "nginx:1.27"}]});
    let os_affinity = |key: &str, values: &[&str]| {
        json!({"containers": [{"name": "app", "image": "app:1"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": key, "operator": "In", "values": values}]}]}}}})
    };
    let cases: Vec<(&str, Value, bool)> = vec![
        ("plain linux pod", pod(&linux_app), false),
        (
            "nodeSelector windows",
            pod(
                &json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "beta nodeSelector windows",
            pod(
                &json!({"nodeSelector": {"beta.kubernetes.io/os": "windows"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "nodeSelector linux",
            pod(
                &json!({"nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            false,
        ),
        (
            "os.name windows",
            pod(
                &json!({"os": {"name": "windows"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "os.name linux",
            pod(&json!({"os": {"name": "linux"}, "containers": [{"name": "a", "image": "app:1"}]})),
            false,
        ),
        (
            "any runtimeClassName",
            pod(
                &json!({"runtimeClassName": "gvisor", "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "required affinity on the OS label",
            pod(&os_affinity("kubernetes.io/os", &["windows"])),
            true,
        ),
        (
            "required affinity on the beta OS label",
            pod(&os_affinity("beta.kubernetes.io/os", &["windows"])),
            true,
        ),
        (
            "required affinity on a zone",
            pod(&os_affinity("topology.kubernetes.io/zone", &["a"])),
            false,
        ),
        (
            "preferred affinity only",
            pod(&json!({"containers": [{"name": "a", "image": "app:1"}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]}}]}}})),
            false,
        ),
        (
            "pod windowsOptions",
            pod(
                &json!({"securityContext": {"windowsOptions": {"runAsUserName": "ContainerUser"}},
                "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "container hostProcess",
            pod(&json!({"containers": [{"name": "a", "image": "app:1",
                "securityContext": {"windowsOptions": {"hostProcess": true}}}]})),
            true,
        ),
        (
            "init container windowsOptions",
            pod(&json!({"containers": [{"name": "a", "image": "app:1"}],
                "initContainers": [{"name": "i", "image": "app:1",
                    "securityContext": {"windowsOptions": {"runAsUserName": "ContainerUser"}}}]})),
            true,
        ),
        (
            "servercore image",
            pod(
                &json!({"containers": [{"name": "iis", "image": "mcr.microsoft.com/windows/servercore/iis:latest"}]}),
            ),
            true,
        ),
        (
            "nanoserver init image",
            pod(&json!({"containers": [{"name": "a", "image": "app:1"}],
                "initContainers": [{"name": "i", "image": "mcr.microsoft.com/powershell:lts-nanoserver-ltsc2022"}]})),
            true,
        ),
        (
            "windows ephemeral container",
            pod(&json!({"containers": [{"name": "a", "image": "app:1"}],
                "ephemeralContainers": [{"name": "d", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022"}]})),
            true,
        ),
        (
            "container without image",
            pod(&json!({"containers": [{"name": "a"}]})),
            false,
        ),
        (
            "deployment nodeSelector windows",
            templated(
                "apps/v1",
                "Deployment",
                &json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "deployment linux",
            templated("apps/v1", "Deployment", &linux_app),
            false,
        ),
        (
            "daemonset runtimeClassName",
            templated(
                "apps/v1",
                "DaemonSet",
                &json!({"runtimeClassName": "windows-2022", "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "replicationcontroller windows image",
            templated(
                "v1",
                "ReplicationController",
                &json!({"containers": [{"name": "a", "image": "microsoft/iis"}]}),
            ),
            true,
        ),
        (
            "job os.name windows",
            templated(
                "batch/v1",
                "Job",
                &json!({"os": {"name": "windows"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        (
            "cronjob nodeSelector windows",
            cronjob(
                &json!({"nodeSelector": {"kubernetes.io/os": "windows"}, "containers": [{"name": "a", "image": "app:1"}]}),
            ),
            true,
        ),
        ("cronjob linux", cronjob(&linux_app), false),
        (
            "cronjob without a job spec",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"jobTemplate": {}}}),
            false,
        ),
        (
            "deployment without a template spec",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {}}}),
            false,
        ),
        (
            "object without spec",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            false,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, object, expected) in &cases {
        if sends(&program, object) != *expected {
            wrong.push(format!("{name}: expected {expected}"));
        }
    }
    assert!(wrong.is_empty(), "matchCondition mistakes: {wrong:#?}");
}

/// The custom resources' fixtures: the Windows ones (named `win-*`) are
/// sent, wherever their kind keeps the pod template; the Linux ones are not.
#[test]
fn match_conditions_find_the_pod_template_of_custom_resources() {
    let program = match_condition();
    let dir = format!("{}/tests/fixtures/crd", env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for file in [
        "rollout-windows.yaml",
        "rollout-linux.yaml",
        "cloneset.yaml",
        "advanced-statefulset.yaml",
        "advanced-daemonset.yaml",
        "broadcastjob.yaml",
        "advancedcronjob.yaml",
        "scaledjob.yaml",
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        for doc in winadmit::input::source::parse(&text).unwrap() {
            let name = doc.value["metadata"]["name"].as_str().unwrap();
            assert_eq!(
                sends(&program, &doc.value),
                name.starts_with("win-"),
                "{file} {name}"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 15);
}

/// The safety property: every object of the real-world corpus that the
/// engine treats as Windows or finds anything in is sent to the webhook.
/// (A skipped object is one the webhook never sees.)
#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn match_conditions_never_skip_what_winadmit_acts_on() {
    use serde::Deserialize as _;
    use winadmit::decision::engine::{Context, evaluate};
    use winadmit::decision::view::ObjectView;
    use winadmit::decision::workload::Workload;

    let corpus = corpus_location::corpus_dir("match_conditions_never_skip_what_winadmit_acts_on");
    let program = match_condition();
    let policy = Policy::default_policy();
    let cx = Context::default();
    let (mut acted_on, mut skipped) = (0, 0);
    let mut missed = Vec::new();
    let files = walkdir::WalkDir::new(&corpus)
        .sort_by_file_name()
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| {
            e.path()
                .extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        });
    for entry in files {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let Ok(docs) = winadmit::input::source::parse(&text) else {
            continue;
        };
        for doc in docs {
            let Ok(view) = ObjectView::deserialize(&doc.value) else {
                continue;
            };
            let Some(workload) = Workload::from_view(&view) else {
                continue;
            };
            let eval = evaluate(&policy, &workload, &cx);
            let sent = sends(&program, &doc.value);
            if eval.target.is_windows() || !eval.findings.is_empty() {
                acted_on += 1;
                if !sent {
                    missed.push(format!(
                        "{} doc {}: {} {}",
                        entry.file_name().to_string_lossy(),
                        doc.index,
                        workload.kind.as_str(),
                        workload.name
                    ));
                }
            } else if !sent {
                skipped += 1;
            }
        }
    }
    assert!(
        acted_on > 20,
        "the corpus at {} gave only {acted_on} Windows workloads; set WINADMIT_CORPUS",
        corpus.display()
    );
    assert!(
        missed.is_empty(),
        "matchConditions skip objects winadmit acts on: {missed:#?}"
    );
    // The conditions are worth having: they skip most Linux workloads.
    assert!(
        skipped > 0,
        "the matchCondition skipped nothing in the corpus"
    );
}

/// The evaluator used above is as strict as the API server's cel-go: reading
/// an absent field is an error, not null. So the guard tests above really
/// test the `has()` guards.
#[test]
fn cel_evaluator_errors_on_absent_fields() {
    let program = cel::Program::compile("object.spec.nodeSelector.size() == 0").unwrap();
    let mut cx = cel::Context::default();
    cx.add_variable_from_value(
        "object",
        cel::to_value(serde_json::json!({"spec": {}})).unwrap(),
    );
    assert!(program.execute(&cx).is_err());
    let guarded = cel::Program::compile("has(object.spec.nodeSelector)").unwrap();
    assert!(matches!(guarded.execute(&cx), Ok(cel::Value::Bool(false))));
}

/// The image (image/build.sh, built and run by tests/webhook/image.rs) has what
/// the Deployment relies on: its user, entrypoint and port.
#[test]
fn image_fits_the_deployment() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("image/build.sh")).unwrap();
    let objects = manifests::Render::Base.objects();
    let pod = &one(&objects, "Deployment")["spec"]["template"]["spec"];
    let uid = pod["securityContext"]["runAsUser"].as_i64().unwrap();
    assert!(
        script.contains(&format!("--user {uid}:{uid}")),
        "the image runs as {uid}, like the Deployment"
    );
    assert!(script.contains("--entrypoint /usr/local/bin/winadmit --cmd serve"));
    assert!(script.contains("--exposed-ports 8443,9090"));
    assert!(script.contains("cargo build --profile dist --locked --bin winadmit"));
}

/// Does the engine act on this object (any finding, or Windows targeting)?
fn engine_acts_on(object: &Value) -> bool {
    use serde::Deserialize as _;
    let view = winadmit::decision::view::ObjectView::deserialize(object).unwrap();
    let workload = winadmit::decision::workload::Workload::from_view(&view).unwrap();
    let eval = winadmit::decision::engine::evaluate(
        &Policy::default_policy(),
        &workload,
        &winadmit::decision::engine::Context::default(),
    );
    eval.target.is_windows() || !eval.findings.is_empty()
}

/// The objects the matchCondition used to keep from the webhook although
/// the engine gives them a finding (among them the proptest's Hyper-V
/// annotation counterexample).
#[test]
fn match_conditions_send_the_objects_they_used_to_skip() {
    let program = match_condition();
    let hyperv = serde_json::json!({"experimental.windows.kubernetes.io/isolation-type": "hyperv"});
    let linux_spec = serde_json::json!({"containers": [{"name": "c0", "image": "nginx"}]});
    let mut hyperv_pod = pod(&linux_spec);
    hyperv_pod["metadata"]["annotations"] = hyperv.clone();
    let mut hyperv_deployment = templated("apps/v1", "Deployment", &linux_spec);
    hyperv_deployment["spec"]["template"]["metadata"]["annotations"] = hyperv.clone();
    let mut hyperv_cronjob = cronjob(&linux_spec);
    hyperv_cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"] =
        serde_json::json!({"annotations": hyperv});
    for (what, object) in [
        (
            "a Linux pod with a C:\\ hostPath (WIN-HOSTPATH-WINDOWS-PATH)",
            pod(
                &serde_json::json!({"nodeSelector": {"kubernetes.io/os": "linux"},
                "containers": [{"name": "a", "image": "busybox:1.36"}],
                "volumes": [{"name": "c", "hostPath": {"path": "C:\\k"}}]}),
            ),
        ),
        (
            "a pod selecting only node.kubernetes.io/windows-build",
            pod(
                &serde_json::json!({"nodeSelector": {"node.kubernetes.io/windows-build": "10.0.20348"},
                "containers": [{"name": "a", "image": "contoso/app:2.0"}]}),
            ),
        ),
        (
            "an ltsc2022 image beside nginx (WIN-MIXED-OS)",
            pod(&serde_json::json!({"containers": [
                {"name": "a", "image": "contoso/app:1.0-ltsc2022"},
                {"name": "b", "image": "nginx"}]})),
        ),
        (
            "a pod with only the Hyper-V isolation annotation (WIN-HYPERV-ANNOTATION; found by the proptest below)",
            hyperv_pod,
        ),
        (
            "a Deployment whose template has only that annotation",
            hyperv_deployment,
        ),
        (
            "a CronJob whose template has only that annotation",
            hyperv_cronjob,
        ),
        (
            "an AKS os-sku selector",
            pod(
                &serde_json::json!({"nodeSelector": {"kubernetes.azure.com/os-sku": "Windows2022"},
                "containers": [{"name": "a", "image": "contoso/app:2.0"}]}),
            ),
        ),
    ] {
        assert!(engine_acts_on(&object), "{what}: the engine acts on it");
        assert!(
            sends(&program, &object),
            "{what} is not sent to the webhook"
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Over generated pods: whenever the engine gives any finding or takes
    /// the pod for a Windows pod, the matchCondition sends it.
    #[test]
    fn match_conditions_cover_the_engine_on_generated_pods(
        selector in proptest::sample::select(vec![
            None,
            Some(("kubernetes.io/os", "windows")),
            Some(("kubernetes.io/os", "linux")),
            Some(("beta.kubernetes.io/os", "windows")),
            Some(("node.kubernetes.io/windows-build", "10.0.17763")),
            Some(("kubernetes.azure.com/os-sku", "Windows2022")),
            Some(("kubernetes.azure.com/os-sku", "Ubuntu")),
            Some(("pool", "win")),
        ]),
        images in proptest::collection::vec(proptest::sample::select(vec![
            "nginx", "busybox:1.36", "contoso/app:1.0-ltsc2022", "contoso/app:2.0",
            "mcr.microsoft.com/windows/servercore:ltsc2019", "registry.k8s.io/pause:3.9",
            "example.com/tool:10.0.20348.2527", "python:3.12-alpine",
            "mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0",
        ]), 1..3),
        host_path in proptest::sample::select(vec![None, Some("/proc"), Some("C:\\var\\log"), Some("\\\\.\\pipe\\x"), Some("/var/log")]),
        host_process in proptest::bool::ANY,
        host_network in proptest::bool::ANY,
        os in proptest::sample::select(vec![None, Some("windows"), Some("linux")]),
        runtime_class in proptest::bool::ANY,
    ) {
        let mut spec = serde_json::json!({
            "containers": images.iter().enumerate()
                .map(|(i, image)| serde_json::json!({"name": format!("c{i}"), "image": image}))
                .collect::<Vec<_>>(),
        });
        if let Some((k, v)) = selector {
            spec["nodeSelector"] = serde_json::json!({k: v});
        }
        if let Some(p) = host_path {
            spec["volumes"] = serde_json::json!([{"name": "h", "hostPath": {"path": p}}]);
        }
        if host_process {
            spec["securityContext"] = serde_json::json!({"windowsOptions": {"hostProcess": true}});
        }
        if host_network {
            spec["hostNetwork"] = serde_json::json!(true);
        }
        if let Some(os) = os {
            spec["os"] = serde_json::json!({"name": os});
        }
        if runtime_class {
            spec["runtimeClassName"] = serde_json::json!("windows-2022");
        }
        let object = pod(&spec);
        if engine_acts_on(&object) {
            proptest::prop_assert!(
                MATCH_CONDITION.with(|program| sends(program, &object)),
                "not sent: {}", object
            );
        }
    }
}

/// Where a generated pod spec carries `windowsOptions`.
#[derive(Debug, Clone, Copy)]
enum WindowsOptionsAt {
    Pod,
    Container,
    InitContainer,
    EphemeralContainer,
}

/// A pod spec from generated parts (see the proptest below).
#[allow(clippy::too_many_arguments)] // one argument per generated part
fn generated_spec(
    selector: &[(&str, &str)],
    os: Option<&str>,
    runtime_class: Option<&str>,
    affinity: Option<(bool, &str, &str)>,
    host_paths: &[&str],
    windows_options: Option<(WindowsOptionsAt, bool)>,
    images: &[&str],
    init_image: Option<&str>,
    ephemeral_image: Option<&str>,
    linux_only: (bool, bool, bool),
) -> Value {
    use serde_json::json;
    let container = |name: String, image: &str| json!({"name": name, "image": image});
    let mut spec = json!({
        "containers": images.iter().enumerate()
            .map(|(i, image)| container(format!("c{i}"), image))
            .collect::<Vec<_>>(),
    });
    if let Some(image) = init_image {
        spec["initContainers"] = json!([container("init".into(), image)]);
    }
    if let Some(image) = ephemeral_image {
        spec["ephemeralContainers"] = json!([container("debug".into(), image)]);
    }
    if !selector.is_empty() {
        let map: serde_json::Map<String, Value> = selector
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).into()))
            .collect();
        spec["nodeSelector"] = Value::Object(map);
    }
    if let Some(os) = os {
        spec["os"] = json!({"name": os});
    }
    if let Some(rc) = runtime_class {
        spec["runtimeClassName"] = rc.into();
    }
    if let Some((required, key, value)) = affinity {
        let expr = json!({"key": key, "operator": "In", "values": [value]});
        spec["affinity"] = if required {
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}})
        } else {
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                [{"weight": 1, "preference": {"matchExpressions": [expr]}}]}})
        };
    }
    if !host_paths.is_empty() {
        spec["volumes"] = host_paths
            .iter()
            .enumerate()
            .map(|(i, p)| json!({"name": format!("h{i}"), "hostPath": {"path": p}}))
            .collect();
    }
    let (privileged, host_network, host_pid) = linux_only;
    if privileged {
        spec["containers"][0]["securityContext"] = json!({"privileged": true});
    }
    if host_network {
        spec["hostNetwork"] = true.into();
    }
    if host_pid {
        spec["hostPID"] = true.into();
    }
    if let Some((at, host_process)) = windows_options {
        let options = json!({"windowsOptions": {"hostProcess": host_process, "runAsUserName": "ContainerUser"}});
        let target = match at {
            WindowsOptionsAt::Pod => Some(&mut spec["securityContext"]),
            WindowsOptionsAt::Container => spec["containers"]
                .get_mut(0)
                .map(|c| &mut c["securityContext"]),
            WindowsOptionsAt::InitContainer => spec
                .get_mut("initContainers")
                .and_then(|cs| cs.get_mut(0))
                .map(|c| &mut c["securityContext"]),
            WindowsOptionsAt::EphemeralContainer => spec
                .get_mut("ephemeralContainers")
                .and_then(|cs| cs.get_mut(0))
                .map(|c| &mut c["securityContext"]),
        };
        if let Some(sc) = target {
            if sc.is_null() {
                *sc = options;
            } else {
                sc["windowsOptions"] = options["windowsOptions"].clone();
            }
        }
    }
    spec
}

thread_local! {
    /// Compiled once per test thread: the proptests run it thousands of times.
    static MATCH_CONDITION: cel::Program = match_condition();
}

/// The selector keys and values the generated pods choose from.
const SELECTOR_PARTS: &[(&str, &str)] = &[
    ("kubernetes.io/os", "windows"),
    ("kubernetes.io/os", "Windows"),
    ("kubernetes.io/os", "linux"),
    ("beta.kubernetes.io/os", "windows"),
    ("beta.kubernetes.io/os", "linux"),
    ("node.kubernetes.io/windows-build", "10.0.20348"),
    ("node.kubernetes.io/windows-build", "10.0.17763"),
    ("kubernetes.azure.com/os-sku", "Windows2022"),
    ("kubernetes.azure.com/os-sku", "Ubuntu"),
    ("agentpool", "win22"),
];

const IMAGES: &[&str] = &[
    "nginx",
    "busybox:1.36",
    "python:3.12-alpine",
    "registry.k8s.io/pause:3.9",
    "contoso/app:1.0-ltsc2022",
    "contoso/app:2.0",
    "mcr.microsoft.com/windows/nanoserver:ltsc2022",
    "mcr.microsoft.com/windows/servercore:ltsc2019",
    "mcr.microsoft.com/windows/servercore/iis",
    "mcr.microsoft.com/dotnet/framework/aspnet:4.8",
    "mcr.microsoft.com/powershell:lts-nanoserver-1809",
    "example.com/tool:10.0.20348.2527",
    "mcr.microsoft.com/oss/kubernetes/windows-host-process-containers-base-image:v1.0.0",
    "contoso/WINDOWS-agent:1",
];

const HOST_PATHS: &[&str] = &[
    "C:\\",
    "C:\\var\\log",
    "c:/k",
    "D:\\data",
    "\\\\server\\share",
    "\\\\.\\pipe\\docker_engine",
    "//./pipe/containerd-containerd",
    "/var/log",
    "/proc",
    "/var/run/docker.sock",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
    /// Over generated Pods, Deployments and CronJobs: whenever the engine
    /// (default policy, default cluster) gives any finding or takes the
    /// object for a Windows workload, the matchCondition sends it.
    #[test]
    fn match_conditions_cover_the_engine_on_generated_workloads(
        kind in 0..3usize,
        selector in proptest::sample::subsequence(SELECTOR_PARTS, 0..3),
        os in proptest::sample::select(vec![None, Some("windows"), Some("linux")]),
        runtime_class in proptest::sample::select(vec![None, Some("windows-2022"), Some("runc"), Some("")]),
        affinity in proptest::option::of((
            proptest::bool::ANY,
            proptest::sample::select(vec![
                "kubernetes.io/os", "beta.kubernetes.io/os",
                "node.kubernetes.io/windows-build", "kubernetes.azure.com/os-sku",
                "topology.kubernetes.io/zone",
            ]),
            proptest::sample::select(vec!["windows", "linux", "10.0.20348", "Windows2022"]),
        )),
        host_paths in proptest::sample::subsequence(HOST_PATHS, 0..3),
        windows_options in proptest::option::of((
            proptest::sample::select(vec![
                WindowsOptionsAt::Pod, WindowsOptionsAt::Container,
                WindowsOptionsAt::InitContainer, WindowsOptionsAt::EphemeralContainer,
            ]),
            proptest::bool::ANY,
        )),
        images in proptest::collection::vec(proptest::sample::select(IMAGES), 1..3),
        init_image in proptest::option::of(proptest::sample::select(IMAGES)),
        ephemeral_image in proptest::option::of(proptest::sample::select(IMAGES)),
        linux_only in (proptest::bool::ANY, proptest::bool::ANY, proptest::bool::ANY),
        annotation in proptest::option::of(proptest::sample::select(vec![
            ("experimental.windows.kubernetes.io/isolation-type", "hyperv"),
            ("experimental.windows.kubernetes.io/isolation-type", "process"),
            ("container.apparmor.security.beta.kubernetes.io/c0", "runtime/default"),
            ("example.com/team", "payments"),
        ])),
        tolerate_windows in proptest::bool::ANY,
    ) {
        // Ephemeral containers exist on Pods only.
        let ephemeral_image = ephemeral_image.filter(|_| kind == 0);
        let spec = generated_spec(
            &selector, os, runtime_class, affinity, &host_paths, windows_options,
            &images, init_image, ephemeral_image, linux_only,
        );
        let mut spec = spec;
        if tolerate_windows {
            spec["tolerations"] = serde_json::json!([
                {"key": "os", "operator": "Equal", "value": "windows", "effect": "NoSchedule"}]);
        }
        let mut object = match kind {
            0 => pod(&spec),
            1 => templated("apps/v1", "Deployment", &spec),
            _ => cronjob(&spec),
        };
        if let Some((key, value)) = annotation {
            let metadata = match kind {
                0 => &mut object["metadata"],
                1 => &mut object["spec"]["template"]["metadata"],
                _ => &mut object["spec"]["jobTemplate"]["spec"]["template"]["metadata"],
            };
            metadata["annotations"] = serde_json::json!({key: value});
        }
        if engine_acts_on(&object) {
            proptest::prop_assert!(
                MATCH_CONDITION.with(|program| sends(program, &object)),
                "the engine acts on it, the matchCondition skips it: {}", object
            );
        }
    }
}

/// The namespaceSelector of both webhooks as (excluded names, opt-out labels).
fn selector_reach(objects: &[Value], what: &str) -> (Vec<String>, BTreeMap<String, String>) {
    let mut found = Vec::new();
    for (kind, _) in registrations(objects) {
        let exprs = webhook(objects, kind)["namespaceSelector"]["matchExpressions"].clone();
        let mut names = Vec::new();
        let mut labels = BTreeMap::new();
        for e in exprs.as_array().unwrap() {
            assert_eq!(e["operator"], "NotIn", "{what} {kind}: {e}");
            let values: Vec<String> = e["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            if e["key"] == "kubernetes.io/metadata.name" {
                names = values;
            } else {
                assert_eq!(values.len(), 1, "{what} {kind}: {e}");
                labels.insert(e["key"].as_str().unwrap().to_owned(), values[0].clone());
            }
        }
        found.push((names, labels));
    }
    assert!(
        found.windows(2).all(|w| w[0] == w[1]),
        "{what}: the webhooks' reach differs"
    );
    found.swap_remove(0)
}

/// The namespace the Deployment tells the server it runs in: the
/// downward API's `metadata.namespace` in `WINADMIT_NAMESPACE`, read as the
/// Deployment's own namespace.
fn own_namespace(objects: &[Value]) -> String {
    let d = one(objects, "Deployment");
    let env = d
        .pointer("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array)
        .expect("the Deployment sets env");
    assert!(
        env.iter().any(|e| e["name"] == "WINADMIT_NAMESPACE"
            && e.pointer("/valueFrom/fieldRef/fieldPath")
                == Some(&Value::from("metadata.namespace"))),
        "WINADMIT_NAMESPACE from the downward API: {env:?}"
    );
    d["metadata"]["namespace"].as_str().unwrap().to_owned()
}

/// The webhooks' namespaceSelector is the policy's reach: in every
/// committed render, the namespaces and opt-out labels of the policy its
/// ConfigMap loads (the default's `reach`, kube-system, winadmit and
/// winadmit.io/ignore=true), so lint and report say "exempt" exactly for
/// what the webhook never sees.
#[test]
fn namespace_selector_matches_the_policy_exemptions() {
    let default = Policy::default_policy();
    // No built-in policy names winadmit's namespace: the server adds the
    // one it runs in (--own-namespace, WINADMIT_NAMESPACE).
    assert_eq!(default.reach.excluded_namespaces, ["kube-system"]);
    assert_eq!(
        default.reach.opt_out_namespace_labels,
        BTreeMap::from([("winadmit.io/ignore".to_owned(), "true".to_owned())])
    );
    let mut checked = 0;
    for render in manifests::Render::ALL {
        let objects = render.objects();
        if !objects
            .iter()
            .any(|o| kind(o).ends_with("WebhookConfiguration"))
        {
            continue;
        }
        let mut policy = load_policy(&objects);
        policy.add_own_namespace(&own_namespace(&objects)).unwrap();
        let (names, labels) = selector_reach(&objects, render.name());
        assert_eq!(names, policy.reach.excluded_namespaces, "{}", render.name());
        assert_eq!(
            labels,
            policy.reach.opt_out_namespace_labels,
            "{}",
            render.name()
        );
        checked += 1;
    }
    assert_eq!(
        checked,
        manifests::Render::ALL.len() - 1,
        "all but admission-policy"
    );
}

/// Under `--namespace NS` the selector excludes NS instead of winadmit, and
/// the server, told its namespace by the downward API, excludes NS too: the
/// policy's reach is the selector's, and a namespace a tenant names
/// `winadmit` is inside both.
#[test]
fn moved_install_stays_outside_the_policy_reach() {
    let tree = Tree::new();
    let objects = render(&tree, "cert-manager", &["--namespace", "win-ops"]);
    let mut policy = load_policy(&objects);
    assert_eq!(own_namespace(&objects), "win-ops");
    policy.add_own_namespace("win-ops").unwrap();
    let (names, labels) = selector_reach(&objects, "--namespace win-ops");
    assert_eq!(names, policy.reach.excluded_namespaces);
    assert_eq!(labels, policy.reach.opt_out_namespace_labels);
    assert!(
        policy.outside_reach("winadmit", |_| None).is_none(),
        "a namespace named winadmit is checked when winadmit runs elsewhere"
    );
    let ns = one(&objects, "Namespace");
    assert_eq!(ns["metadata"]["name"], "win-ops");
    let ns_labels = ns["metadata"]["labels"].as_object().unwrap();
    let label = |k: &str| ns_labels.get(k).and_then(Value::as_str).map(str::to_owned);
    assert!(
        policy.outside_reach("win-ops", label).is_some(),
        "the moved install namespace must be outside the policy's reach"
    );
}

/// `components/registry`, `components/registry-credentials` and
/// `components/registry-pull-secrets`, added to an overlay as the comments
/// in them say: the Deployment's arguments turn `--registry` on, read the
/// mounted config.json and the pods' own Secrets, and parse as `winadmit
/// serve`'s; the ClusterRole may `get` Secrets (and nothing more of them)
/// only with the last.
#[test]
#[cfg_attr(
    no_kubectl,
    ignore = "needs kubectl: run tests/apiserver/build.sh (it builds kubectl v1.37) or put kubectl on PATH"
)]
fn registry_components_turn_lookups_on_with_mounted_credentials() {
    use clap::Parser as _;
    require_kubectl();
    let tree = Tree::new();
    let dir = tree.root().join("overlays/registry-test");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../cert-manager\ncomponents:\n  - ../../components/registry\n  - ../../components/registry-credentials\n  - ../../components/registry-pull-secrets\n",
    )
    .unwrap();
    let objects = kustomize(&tree, "overlays/registry-test");
    let secrets: Vec<&Value> = one(&objects, "ClusterRole")["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .contains(&"secrets".into())
        })
        .collect();
    assert_eq!(secrets.len(), 1, "{secrets:?}");
    assert_eq!(secrets[0]["verbs"], serde_json::json!(["get"]));
    assert_eq!(secrets[0]["apiGroups"], serde_json::json!([""]));
    for render in manifests::Render::ALL {
        let text = serde_json::to_string(&render.objects()).unwrap();
        assert!(
            !text.contains("\"secrets\""),
            "{} reads Secrets",
            render.name()
        );
    }
    let deployment = one(&objects, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--registry"), "{args:?}");
    let config = "--registry-config=/etc/winadmit/registry/.dockerconfigjson";
    assert!(args.contains(&config), "{args:?}");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "registry-credentials")
        .expect("the credentials are mounted");
    assert_eq!(mount["mountPath"], "/etc/winadmit/registry");
    assert_eq!(mount["readOnly"], true);
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "registry-credentials")
        .expect("the Secret is a volume");
    assert_eq!(
        volume["secret"]["secretName"],
        "winadmit-registry-credentials"
    );
    let cli = winadmit::entry::cli::Cli::try_parse_from(
        std::iter::once("winadmit").chain(args.iter().copied()),
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let winadmit::entry::cli::Command::Serve(serve) = cli.command else {
        panic!("{args:?} is not `serve`");
    };
    assert!(serve.images.registry);
    assert!(serve.images.registry_pull_secrets);
    assert_eq!(
        serve.images.registry_args.registry_config.as_deref(),
        Some(Path::new("/etc/winadmit/registry/.dockerconfigjson"))
    );
}
