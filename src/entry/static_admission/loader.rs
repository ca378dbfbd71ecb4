//! The rules kube-apiserver's loaders hold a `staticManifestsDir` to
//! (`k8s.io/apiserver/pkg/admission/plugin/manifest`,
//! `.../webhook/manifest/loader`, `.../policy/manifest/loader`): a file that
//! breaks one keeps the API server from starting.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::Value;

use super::{API_VERSION, File, Plugin, SUFFIX, StaticError};

/// The base of `url`, checked as the API server checks a webhook's URL:
/// `https`, a host, no user, query or fragment. The trailing `/` is taken
/// off (the webhooks' paths start with one).
pub(super) fn check_url(url: &str) -> Result<&str, StaticError> {
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
    let mut seen = Seen::default();
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
            check_object(file, obj, &mut seen).map_err(fail)?;
        }
    }
    for (plugin, policy, what, file) in seen.references {
        if !seen
            .policies
            .get(&plugin)
            .is_some_and(|p| p.contains(&policy))
        {
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

/// What the files checked so far hold: each object's name and file, the
/// policies of each plugin, and the bindings' policy names to look up once
/// every file is read.
#[derive(Default)]
struct Seen {
    names: BTreeMap<(Plugin, bool, String), String>,
    policies: BTreeMap<Plugin, BTreeSet<String>>,
    /// (plugin, policy named, the binding, its file)
    references: Vec<(Plugin, String, String, String)>,
}

/// One object of `file` against the loader's rules.
fn check_object(file: &File, obj: &Value, seen: &mut Seen) -> Result<(), String> {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let what = format!("{kind} {name:?}");
    let Some((plugin, binding)) = Plugin::of_kind(kind) else {
        return Err(format!("{what}: not a kind any admission plugin loads"));
    };
    if plugin != file.plugin {
        return Err(format!(
            "{what}: the {} plugin loads it, not {}",
            plugin.name(),
            file.plugin.name()
        ));
    }
    if obj["apiVersion"] != API_VERSION {
        return Err(format!("{what}: apiVersion must be {API_VERSION}"));
    }
    if !name.ends_with(SUFFIX) {
        return Err(format!("{what}: metadata.name must end with {SUFFIX}"));
    }
    if !is_dns_subdomain(name) {
        return Err(format!(
            "{what}: metadata.name must be a DNS subdomain of at most 253 characters"
        ));
    }
    if let Some(before) = seen
        .names
        .insert((plugin, binding, name.to_owned()), file.name.clone())
    {
        return Err(format!("{what}: the name is also used in {before}"));
    }
    let spec = &obj["spec"];
    match (plugin, binding) {
        (Plugin::MutatingWebhook | Plugin::ValidatingWebhook, _) => {
            check_webhooks(obj).map_err(|w| format!("{what}: {w}"))?;
        }
        (_, false) => {
            if spec.get("paramKind").is_some_and(|p| !p.is_null()) {
                return Err(format!(
                    "{what}: spec.paramKind: a static policy has no parameters"
                ));
            }
            seen.policies
                .entry(plugin)
                .or_default()
                .insert(name.to_owned());
        }
        (_, true) => {
            if spec.get("paramRef").is_some_and(|p| !p.is_null()) {
                return Err(format!(
                    "{what}: spec.paramRef: a static binding has no parameters"
                ));
            }
            let policy = spec["policyName"].as_str().unwrap_or_default();
            if !policy.ends_with(SUFFIX) {
                return Err(format!(
                    "{what}: spec.policyName {policy:?} must end with {SUFFIX}"
                ));
            }
            seen.references.push((
                plugin,
                policy.to_owned(),
                what.clone(),
                format!("{}/{}", file.plugin.dir(), file.name),
            ));
        }
    }
    check_selectors(obj).map_err(|w| format!("{what}: {w}"))
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

pub(super) fn is_dns_label(s: &str) -> bool {
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
