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

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Value, json};

mod loader;

pub use loader::check;
use loader::{check_url, is_dns_label};

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

/// The path of an `https://host/path` URL.
fn path_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    rest.find('/').map(|i| &rest[i..])
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

// Beside the folder, not in it: the tests build the export through the
// commands, which use this module.
#[cfg(test)]
#[path = "../static_admission_tests.rs"]
mod tests;
