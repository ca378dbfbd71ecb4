//! The API server's static admission configuration: the files
//! `winadmit manifests --static DIR` and `winadmit admission-policy --static
//! DIR` write for the `staticManifestsDir` of kube-apiserver's admission
//! plugins (manifest-based admission control, Kubernetes 1.37 and later),
//! and the `AdmissionConfiguration` that points the plugins at them.
//!
//! kube-apiserver loads these files before it serves a request and reloads
//! them when they change; their objects are named with [`SUFFIX`], which no
//! API request can create, change or delete. A file that fails to load at
//! start keeps kube-apiserver from starting, so [`check`] holds the
//! loader's rules (`k8s.io/apiserver/pkg/admission/plugin/manifest`,
//! `.../webhook/manifest/loader`, `.../policy/manifest/loader`) and the
//! commands write nothing that breaks one.
//!
//! Pure: the objects in, the files' contents out; the commands read and
//! write the directories.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::{Value, json};

/// The name suffix kube-apiserver reserves for objects loaded from files.
pub const SUFFIX: &str = ".static.k8s.io";

/// The file, in the output directory, that holds the `AdmissionConfiguration`.
pub const ADMISSION_CONFIGURATION: &str = "admission-configuration.yaml";

/// Namespace labels the API-object install reads that the static form does
/// not: a label on a Namespace is an API call, and the static guard is the
/// one no API call turns off.
pub const IGNORED_NAMESPACE_LABELS: [&str; 2] = ["winadmit.io/ignore", "winadmit.io/mode"];

const NAME_LABEL: &str = "kubernetes.io/metadata.name";
const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// One admission plugin with a `staticManifestsDir`, and its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Plugin {
    MutatingWebhook,
    ValidatingWebhook,
    MutatingPolicy,
    ValidatingPolicy,
}

impl Plugin {
    pub const ALL: [Self; 4] = [
        Self::MutatingWebhook,
        Self::ValidatingWebhook,
        Self::MutatingPolicy,
        Self::ValidatingPolicy,
    ];

    /// The plugin's name in an `AdmissionConfiguration`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::MutatingWebhook => "MutatingAdmissionWebhook",
            Self::ValidatingWebhook => "ValidatingAdmissionWebhook",
            Self::MutatingPolicy => "MutatingAdmissionPolicy",
            Self::ValidatingPolicy => "ValidatingAdmissionPolicy",
        }
    }

    /// Its directory under the output directory.
    #[must_use]
    pub fn dir(self) -> &'static str {
        match self {
            Self::MutatingWebhook => "mutating-webhooks",
            Self::ValidatingWebhook => "validating-webhooks",
            Self::MutatingPolicy => "mutating-policies",
            Self::ValidatingPolicy => "validating-policies",
        }
    }

    /// The kind of its plugin configuration (`apiserver.config.k8s.io/v1`).
    fn configuration_kind(self) -> &'static str {
        match self {
            Self::MutatingWebhook | Self::ValidatingWebhook => "WebhookAdmissionConfiguration",
            Self::MutatingPolicy => "MutatingAdmissionPolicyConfiguration",
            Self::ValidatingPolicy => "ValidatingAdmissionPolicyConfiguration",
        }
    }

    /// The plugin that loads objects of `kind`, and whether they are
    /// bindings.
    #[must_use]
    pub fn of_kind(kind: &str) -> Option<(Self, bool)> {
        Some(match kind {
            "MutatingWebhookConfiguration" => (Self::MutatingWebhook, false),
            "ValidatingWebhookConfiguration" => (Self::ValidatingWebhook, false),
            "MutatingAdmissionPolicy" => (Self::MutatingPolicy, false),
            "MutatingAdmissionPolicyBinding" => (Self::MutatingPolicy, true),
            "ValidatingAdmissionPolicy" => (Self::ValidatingPolicy, false),
            "ValidatingAdmissionPolicyBinding" => (Self::ValidatingPolicy, true),
            _ => return None,
        })
    }
}

/// One file of a plugin's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub plugin: Plugin,
    /// The file name (`<first object's name>.yaml`).
    pub name: String,
    pub objects: Vec<Value>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StaticError {
    /// An object kube-apiserver would refuse to load (and then not start).
    #[error("{file}: {what}")]
    Rule { file: String, what: String },
    #[error(
        "--webhook-url {url:?}: {why}; the API server calls https://HOST[:PORT][/PATH] with the path of each webhook (/mutate, /validate) appended"
    )]
    Url { url: String, why: &'static str },
    #[error(
        "--ca-bundle: no PEM certificate (-----BEGIN CERTIFICATE-----) found; give the CA that signed winadmit's serving certificate"
    )]
    CaBundle,
    #[error("--exempt-namespace {0:?}: not a namespace name (a DNS label)")]
    Namespace(String),
    #[error("{0}: nothing to write (no {1} in the output)")]
    Empty(&'static str, &'static str),
}

/// Where the static webhooks reach winadmit.
#[derive(Debug, Clone, Copy)]
pub struct WebhookTarget<'a> {
    /// `https://HOST[:PORT][/PATH]`; each webhook's path is appended.
    pub url: &'a str,
    /// PEM CA certificate(s) that signed winadmit's serving certificate.
    pub ca_pem: &'a [u8],
}

/// Namespaces every static registration leaves out besides those the
/// install already leaves out (kube-system, and winadmit's own for the
/// webhooks): those whose pods must start for winadmit to run (the network
/// plugin's, when it is not kube-system).
pub fn check_namespaces(exempt: &[String]) -> Result<(), StaticError> {
    match exempt.iter().find(|ns| !is_dns_label(ns)) {
        Some(ns) => Err(StaticError::Namespace(ns.clone())),
        None => Ok(()),
    }
}

/// The webhook configurations of `objects` (an install's render) in their
/// static form: named with [`SUFFIX`], calling `target.url` with
/// `target.ca_pem`, the namespaces in `exempt` left out, and the namespace
/// labels of [`IGNORED_NAMESPACE_LABELS`] not read. One file per
/// configuration, checked ([`check`]).
///
/// # Errors
/// A URL the API server would not call, a CA bundle without a certificate,
/// no webhook configuration in `objects`, or a file that breaks a loader
/// rule.
pub fn webhook_files(
    objects: &[Value],
    target: WebhookTarget<'_>,
    exempt: &[String],
) -> Result<Vec<File>, StaticError> {
    let base = check_url(target.url)?;
    if !String::from_utf8_lossy(target.ca_pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(StaticError::CaBundle);
    }
    check_namespaces(exempt)?;
    let ca = base64::engine::general_purpose::STANDARD.encode(target.ca_pem);
    let mut files = Vec::new();
    for obj in objects {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let Some((plugin @ (Plugin::MutatingWebhook | Plugin::ValidatingWebhook), _)) =
            Plugin::of_kind(kind)
        else {
            continue;
        };
        let name = format!("{}{SUFFIX}", obj["metadata"]["name"].as_str().unwrap_or(""));
        let mut webhooks = obj["webhooks"].as_array().cloned().unwrap_or_default();
        for w in &mut webhooks {
            let path = w["clientConfig"]["service"]["path"]
                .as_str()
                .or_else(|| path_of(w["clientConfig"]["url"].as_str()?))
                .unwrap_or("/")
                .to_owned();
            w["clientConfig"] = json!({"url": format!("{base}{path}"), "caBundle": ca});
            for selector in ["namespaceSelector", "objectSelector"] {
                if let Some(s) = w.get_mut(selector) {
                    static_selector(s, exempt);
                }
            }
        }
        let mut metadata = json!({"name": name});
        if let Some(labels) = obj["metadata"].get("labels") {
            metadata["labels"] = labels.clone();
        }
        files.push(File {
            plugin,
            name: format!("{name}.yaml"),
            objects: vec![json!({
                "apiVersion": API_VERSION,
                "kind": kind,
                "metadata": metadata,
                "webhooks": webhooks,
            })],
        });
    }
    if files.is_empty() {
        return Err(StaticError::Empty(
            "winadmit manifests --static",
            "webhook configuration",
        ));
    }
    check(&files)?;
    Ok(files)
}

/// The admission policies and bindings of `documents` (the output of the
/// API-object export) in their static form: every name with [`SUFFIX`],
/// each binding naming its policy's static name, the namespaces in
/// `exempt` left out, and one binding per policy with the export's mode:
/// the per-namespace bindings chosen by the labels of
/// [`IGNORED_NAMESPACE_LABELS`] are left out and the others no longer read
/// them. One file per policy holding it and its bindings, checked
/// ([`check`]).
///
/// # Errors
/// No policy in `documents`, or a file that breaks a loader rule (a
/// policy with `paramKind`, a binding with `paramRef`).
pub fn policy_files(documents: &[Value], exempt: &[String]) -> Result<Vec<File>, StaticError> {
    check_namespaces(exempt)?;
    let mut files: BTreeMap<String, File> = BTreeMap::new();
    let mut bindings = Vec::new();
    for doc in documents {
        let kind = doc["kind"].as_str().unwrap_or_default();
        match Plugin::of_kind(kind) {
            Some((plugin @ (Plugin::MutatingPolicy | Plugin::ValidatingPolicy), false)) => {
                let name = doc["metadata"]["name"].as_str().unwrap_or("").to_owned();
                let mut policy = doc.clone();
                policy["metadata"]["name"] = json!(format!("{name}{SUFFIX}"));
                files.insert(
                    name.clone(),
                    File {
                        plugin,
                        name: format!("{name}{SUFFIX}.yaml"),
                        objects: vec![policy],
                    },
                );
            }
            Some((_, true)) => bindings.push(doc),
            _ => {}
        }
    }
    for doc in bindings {
        let selector = &doc["spec"]["matchResources"]["namespaceSelector"];
        if chosen_by_mode_label(selector) {
            continue;
        }
        let policy = doc["spec"]["policyName"].as_str().unwrap_or("").to_owned();
        let mut binding = doc.clone();
        let name = doc["metadata"]["name"].as_str().unwrap_or("");
        binding["metadata"]["name"] = json!(format!("{name}{SUFFIX}"));
        binding["spec"]["policyName"] = json!(format!("{policy}{SUFFIX}"));
        if let Some(s) = binding["spec"]["matchResources"].get_mut("namespaceSelector") {
            static_selector(s, exempt);
        }
        match files.get_mut(&policy) {
            Some(file) => file.objects.push(binding),
            // A binding of a policy the export left out: the loader refuses
            // it, and so does check() below.
            None => {
                let plugin = Plugin::of_kind(doc["kind"].as_str().unwrap_or_default())
                    .map_or(Plugin::ValidatingPolicy, |(p, _)| p);
                files.insert(
                    format!("{policy} (binding {name})"),
                    File {
                        plugin,
                        name: format!("{name}{SUFFIX}.yaml"),
                        objects: vec![binding],
                    },
                );
            }
        }
    }
    let files: Vec<File> = files.into_values().collect();
    if files.is_empty() {
        return Err(StaticError::Empty(
            "winadmit admission-policy --static",
            "admission policy",
        ));
    }
    check(&files)?;
    Ok(files)
}

/// Whether a binding's namespaceSelector picks the namespaces labelled
/// `winadmit.io/mode In [...]`: a per-namespace mode, not in the static form.
fn chosen_by_mode_label(selector: &Value) -> bool {
    selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["key"] == "winadmit.io/mode" && e["operator"] == "In")
}

/// A namespace (or object) selector without the expressions on
/// [`IGNORED_NAMESPACE_LABELS`], and with `exempt` added to the
/// `kubernetes.io/metadata.name NotIn` list (made if absent).
fn static_selector(selector: &mut Value, exempt: &[String]) {
    let Some(exprs) = selector
        .get_mut("matchExpressions")
        .and_then(Value::as_array_mut)
    else {
        if !exempt.is_empty() {
            selector["matchExpressions"] =
                json!([{"key": NAME_LABEL, "operator": "NotIn", "values": exempt}]);
        }
        return;
    };
    exprs.retain(|e| {
        !IGNORED_NAMESPACE_LABELS
            .iter()
            .any(|l| e["key"].as_str() == Some(l))
    });
    if exempt.is_empty() {
        return;
    }
    let existing = exprs
        .iter_mut()
        .find(|e| e["key"] == NAME_LABEL && e["operator"] == "NotIn");
    match existing.and_then(|e| e["values"].as_array_mut()) {
        Some(values) => {
            for ns in exempt {
                if !values.iter().any(|v| v == ns.as_str()) {
                    values.push(json!(ns));
                }
            }
        }
        None => exprs.push(json!({"key": NAME_LABEL, "operator": "NotIn", "values": exempt})),
    }
}

/// The base of `url`, checked as the API server checks a webhook's URL:
/// `https`, a host, no user, query or fragment. The trailing `/` is taken
/// off (the webhooks' paths start with one).
fn check_url(url: &str) -> Result<&str, StaticError> {
    let bad = |why| StaticError::Url {
        url: url.to_owned(),
        why,
    };
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| bad("the scheme must be https"))?;
    if url.contains(['?', '#']) {
        return Err(bad("a webhook URL has no query or fragment"));
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.contains('@') {
        return Err(bad("a webhook URL has no user information"));
    }
    if host.is_empty() || host.starts_with(':') {
        return Err(bad("no host"));
    }
    if url.chars().any(char::is_whitespace) {
        return Err(bad("a URL has no spaces"));
    }
    Ok(url.trim_end_matches('/'))
}

/// The path of an `https://host/path` URL.
fn path_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    rest.find('/').map(|i| &rest[i..])
}

/// Checks `files` against the rules kube-apiserver's loaders hold a
/// `staticManifestsDir` to: kinds each plugin loads
/// (`admissionregistration.k8s.io/v1`), names that are DNS subdomains ending
/// with [`SUFFIX`] and unique among the plugin's policies, bindings or
/// configurations, webhooks called by URL (`https`) with a CA bundle and no
/// Service, no parameters (`paramKind`, `paramRef`), and bindings naming a
/// policy of the same directory.
///
/// # Errors
/// The first rule broken, with the file and the object.
pub fn check(files: &[File]) -> Result<(), StaticError> {
    let mut seen: BTreeMap<(Plugin, bool, String), String> = BTreeMap::new();
    let mut policies: BTreeMap<Plugin, BTreeSet<String>> = BTreeMap::new();
    let mut references: Vec<(Plugin, String, String, String)> = Vec::new();
    let mut file_names = BTreeSet::new();
    for file in files {
        let fail = |what: String| StaticError::Rule {
            file: format!("{}/{}", file.plugin.dir(), file.name),
            what,
        };
        if !file_names.insert((file.plugin, file.name.clone())) {
            return Err(fail("written twice".into()));
        }
        if !file.name.ends_with(".yaml") || file.name.contains('/') {
            return Err(fail("not a .yaml file name".into()));
        }
        for obj in &file.objects {
            let kind = obj["kind"].as_str().unwrap_or_default();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default();
            let what = format!("{kind} {name:?}");
            let Some((plugin, binding)) = Plugin::of_kind(kind) else {
                return Err(fail(format!(
                    "{what}: not a kind any admission plugin loads"
                )));
            };
            if plugin != file.plugin {
                return Err(fail(format!(
                    "{what}: the {} plugin loads it, not {}",
                    plugin.name(),
                    file.plugin.name()
                )));
            }
            if obj["apiVersion"] != API_VERSION {
                return Err(fail(format!("{what}: apiVersion must be {API_VERSION}")));
            }
            if !name.ends_with(SUFFIX) {
                return Err(fail(format!(
                    "{what}: metadata.name must end with {SUFFIX}"
                )));
            }
            if !is_dns_subdomain(name) {
                return Err(fail(format!(
                    "{what}: metadata.name must be a DNS subdomain of at most 253 characters"
                )));
            }
            if let Some(before) = seen.insert((plugin, binding, name.to_owned()), file.name.clone())
            {
                return Err(fail(format!("{what}: the name is also used in {before}")));
            }
            let spec = &obj["spec"];
            match (plugin, binding) {
                (Plugin::MutatingWebhook | Plugin::ValidatingWebhook, _) => {
                    check_webhooks(obj).map_err(|w| fail(format!("{what}: {w}")))?;
                }
                (_, false) => {
                    if spec.get("paramKind").is_some_and(|p| !p.is_null()) {
                        return Err(fail(format!(
                            "{what}: spec.paramKind: a static policy has no parameters"
                        )));
                    }
                    policies.entry(plugin).or_default().insert(name.to_owned());
                }
                (_, true) => {
                    if spec.get("paramRef").is_some_and(|p| !p.is_null()) {
                        return Err(fail(format!(
                            "{what}: spec.paramRef: a static binding has no parameters"
                        )));
                    }
                    let policy = spec["policyName"].as_str().unwrap_or_default();
                    if !policy.ends_with(SUFFIX) {
                        return Err(fail(format!(
                            "{what}: spec.policyName {policy:?} must end with {SUFFIX}"
                        )));
                    }
                    references.push((
                        plugin,
                        policy.to_owned(),
                        what.clone(),
                        format!("{}/{}", file.plugin.dir(), file.name),
                    ));
                }
            }
            check_selectors(obj).map_err(|w| fail(format!("{what}: {w}")))?;
        }
    }
    for (plugin, policy, what, file) in references {
        if !policies.get(&plugin).is_some_and(|p| p.contains(&policy)) {
            return Err(StaticError::Rule {
                file,
                what: format!(
                    "{what}: spec.policyName {policy:?} is no policy of {}/",
                    plugin.dir()
                ),
            });
        }
    }
    Ok(())
}

fn check_webhooks(obj: &Value) -> Result<(), String> {
    let webhooks = obj["webhooks"].as_array().map_or(&[][..], Vec::as_slice);
    if webhooks.is_empty() {
        return Err("no webhooks".into());
    }
    let mut names = BTreeSet::new();
    for w in webhooks {
        let name = w["name"].as_str().unwrap_or_default();
        if !names.insert(name) {
            return Err(format!("webhook {name:?} twice"));
        }
        if name.split('.').count() < 3 || !is_dns_subdomain(name) {
            return Err(format!(
                "webhook {name:?}: a webhook's name is a fully qualified DNS subdomain"
            ));
        }
        let cc = &w["clientConfig"];
        if cc.get("service").is_some_and(|s| !s.is_null()) {
            return Err(format!(
                "webhook {name:?}: clientConfig.service: a static webhook is called by clientConfig.url"
            ));
        }
        let url = cc["url"].as_str().unwrap_or_default();
        if url.is_empty() {
            return Err(format!("webhook {name:?}: clientConfig.url is required"));
        }
        check_url(url).map_err(|e| format!("webhook {name:?}: {e}"))?;
        let ca = cc["caBundle"].as_str().unwrap_or_default();
        let pem = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .map_err(|_| format!("webhook {name:?}: clientConfig.caBundle is not base64"))?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(format!(
                "webhook {name:?}: clientConfig.caBundle holds no PEM certificate"
            ));
        }
    }
    Ok(())
}

/// Label selectors the loader parses at start (`validateAccessors`): each
/// expression's operator and values.
fn check_selectors(obj: &Value) -> Result<(), String> {
    let mut selectors = Vec::new();
    for w in obj["webhooks"].as_array().into_iter().flatten() {
        selectors.push(("namespaceSelector", &w["namespaceSelector"]));
        selectors.push(("objectSelector", &w["objectSelector"]));
    }
    let mr = &obj["spec"]["matchResources"];
    selectors.push(("matchResources.namespaceSelector", &mr["namespaceSelector"]));
    selectors.push(("matchResources.objectSelector", &mr["objectSelector"]));
    for (field, s) in selectors {
        for e in s["matchExpressions"].as_array().into_iter().flatten() {
            let values = e["values"].as_array().map_or(0, Vec::len);
            let ok = match e["operator"].as_str().unwrap_or_default() {
                "In" | "NotIn" => values > 0,
                "Exists" | "DoesNotExist" => values == 0,
                _ => false,
            };
            if !ok || e["key"].as_str().unwrap_or_default().is_empty() {
                return Err(format!("{field}: invalid expression {e}"));
            }
        }
    }
    Ok(())
}

/// The `AdmissionConfiguration` (`--admission-control-config-file`) that
/// gives each plugin of `plugins` its directory under `host_dir`, the
/// directory as the API server sees it.
#[must_use]
pub fn admission_configuration(host_dir: &str, plugins: &[Plugin]) -> Value {
    let host_dir = host_dir.trim_end_matches('/');
    let plugins: Vec<Value> = plugins
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": p.configuration_kind(),
                    "staticManifestsDir": format!("{host_dir}/{}", p.dir()),
                },
            })
        })
        .collect();
    json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": plugins,
    })
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
#[path = "static_admission_tests.rs"]
mod tests;
