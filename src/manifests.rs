//! The install manifests, rendered without kustomize.
//!
//! `manifests/` is the single source: its files are embedded here verbatim
//! and [`build`] interprets the small kustomize subset they use
//! (`resources`, `components`, JSON 6902 `patches` with a `target`,
//! `secretGenerator` from files without a hash suffix, and `replacements`
//! between plain or `[key]`/`*` field paths). Anything else in a
//! kustomization is an error, so the files cannot drift into features this
//! renderer would silently get wrong; `tests/manifests.rs` checks the result
//! equals `kubectl kustomize` for every overlay.
//!
//! [`customize`] then applies the `winadmit manifests` options (namespace,
//! image, caBundle). Pure: file contents come from the embedded table or a
//! caller-supplied lookup.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The namespace every file in `manifests/` names.
pub const DEFAULT_NAMESPACE: &str = "winadmit";
/// The Deployment's container that runs the server.
pub const CONTAINER: &str = "winadmit";
/// cert-manager's cainjector annotation.
pub const INJECT_CA_ANNOTATION: &str = "cert-manager.io/inject-ca-from";

/// Embeds `manifests/<path>` as `(path, contents)`.
macro_rules! manifest {
    ($path:literal) => {
        ($path, include_str!(concat!("../manifests/", $path)))
    };
}

/// Every file under `manifests/` (path relative to it) and its contents.
/// `tests/manifests.rs` checks this list against the directory.
pub static FILES: &[(&str, &str)] = &[
    manifest!("kustomization.yaml"),
    manifest!("base/kustomization.yaml"),
    manifest!("base/namespace.yaml"),
    manifest!("base/rbac.yaml"),
    manifest!("base/policy.yaml"),
    manifest!("base/deployment.yaml"),
    manifest!("base/service.yaml"),
    manifest!("base/networkpolicy.yaml"),
    manifest!("base/webhooks.yaml"),
    manifest!("components/cert-manager/kustomization.yaml"),
    manifest!("components/cert-manager/certificates.yaml"),
    manifest!("components/audit/kustomization.yaml"),
    manifest!("components/no-match-conditions/kustomization.yaml"),
    manifest!("components/custom-resources/kustomization.yaml"),
    manifest!("overlays/cert-manager/kustomization.yaml"),
    manifest!("overlays/self-signed/kustomization.yaml"),
    manifest!("overlays/audit/kustomization.yaml"),
    manifest!("overlays/no-match-conditions/kustomization.yaml"),
    manifest!("overlays/custom-resources/kustomization.yaml"),
    manifest!("overlays/admission-policy/kustomization.yaml"),
    manifest!("overlays/admission-policy/admission-policy.yaml"),
];

#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// A path that is not among the embedded files.
    #[error("{0}: no such file in manifests/")]
    NoSuchFile(String),
    /// A file a secretGenerator reads that the caller did not supply.
    #[error("{kustomization}: secretGenerator {secret} needs the file {file}")]
    MissingGeneratorFile {
        kustomization: String,
        secret: String,
        file: String,
    },
    /// A YAML file that does not parse, or uses kustomize features this
    /// renderer does not implement.
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    /// A patch that does not apply.
    #[error("{file}: patch for {target}: {message}")]
    Patch {
        file: String,
        target: String,
        message: String,
    },
    /// A replacement whose source or target is missing.
    #[error("{file}: replacement: {message}")]
    Replacement { file: String, message: String },
    /// A `--ca-bundle` file without a PEM certificate.
    #[error("the caBundle file holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)")]
    NotPem,
    /// `--ca-bundle` on an install whose caBundle cert-manager injects.
    #[error(
        "this overlay gets its caBundle from cert-manager's cainjector; drop --ca-bundle, or use --overlay base or self-signed"
    )]
    CaBundleWithCertManager,
    /// A `--namespace` value Kubernetes would not accept.
    #[error(
        "namespace {0:?} is not a valid name: use 1-63 lowercase letters, digits and '-', starting and ending with a letter or digit"
    )]
    InvalidNamespace(String),
}

// ---------------------------------------------------------------------------
// The kustomize subset.

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Kustomization {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    components: Vec<String>,
    #[serde(default)]
    patches: Vec<PatchEntry>,
    #[serde(default)]
    secret_generator: Vec<SecretGenerator>,
    #[serde(default)]
    replacements: Vec<Replacement>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchEntry {
    path: Option<String>,
    patch: Option<String>,
    target: Selector,
}

/// Selects objects; every field given must match exactly.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Selector {
    group: Option<String>,
    version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SecretGenerator {
    name: String,
    namespace: Option<String>,
    #[serde(rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    files: Vec<String>,
    options: Option<GeneratorOptions>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GeneratorOptions {
    #[serde(default)]
    disable_name_suffix_hash: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Replacement {
    source: ReplacementSource,
    targets: Vec<ReplacementTarget>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplacementSource {
    #[serde(flatten)]
    select: Selector,
    field_path: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplacementTarget {
    select: Selector,
    field_paths: Vec<String>,
    #[serde(default)]
    options: ReplacementOptions,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplacementOptions {
    #[serde(default)]
    create: bool,
}

/// Renders the kustomization in `dir` (relative to `manifests/`, e.g.
/// `overlays/audit`; `""` for the base install) from the embedded files.
/// `generator_file` supplies the files secretGenerators read (path relative
/// to `manifests/`).
///
/// # Errors
/// A missing file, a parse error, a patch or replacement that does not
/// apply, or a kustomize feature outside the supported subset.
pub fn build(
    dir: &str,
    generator_file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Vec<Value>, ManifestsError> {
    let mut objects = Vec::new();
    accumulate(dir, "Kustomization", &mut objects, generator_file)?;
    objects.sort_by_key(order_key);
    Ok(objects)
}

fn embedded(path: &str) -> Result<&'static str, ManifestsError> {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
        .ok_or_else(|| ManifestsError::NoSuchFile(path.to_owned()))
}

/// kustomize's order of work: resources, components (each applied to
/// everything accumulated so far), generators, patches, replacements.
fn accumulate(
    dir: &str,
    expected_kind: &str,
    objects: &mut Vec<Value>,
    generator_file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<(), ManifestsError> {
    let file = join(dir, "kustomization.yaml");
    let parse_err = |message: String| ManifestsError::Parse {
        file: file.clone(),
        message,
    };
    let k: Kustomization =
        serde_saphyr::from_str(embedded(&file)?).map_err(|e| parse_err(e.to_string()))?;
    let expected_api = if expected_kind == "Component" {
        "kustomize.config.k8s.io/v1alpha1"
    } else {
        "kustomize.config.k8s.io/v1beta1"
    };
    if k.kind != expected_kind || k.api_version != expected_api {
        return Err(parse_err(format!(
            "expected {expected_api} {expected_kind}, found {} {}",
            k.api_version, k.kind
        )));
    }

    for res in &k.resources {
        let path = join(dir, res);
        if path.ends_with(".yaml") || path.ends_with(".yml") {
            objects.extend(parse_objects(&path)?);
        } else {
            let mut sub = Vec::new();
            accumulate(&path, "Kustomization", &mut sub, generator_file)?;
            objects.extend(sub);
        }
    }
    for comp in &k.components {
        accumulate(&join(dir, comp), "Component", objects, generator_file)?;
    }
    for generator in &k.secret_generator {
        objects.push(generate_secret(&file, dir, generator, generator_file)?);
    }
    for entry in &k.patches {
        apply_patch(&file, dir, entry, objects)?;
    }
    for replacement in &k.replacements {
        replace(&file, replacement, objects)?;
    }
    Ok(())
}

fn parse_objects(path: &str) -> Result<Vec<Value>, ManifestsError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(embedded(path)?).map_err(|e| ManifestsError::Parse {
            file: path.to_owned(),
            message: e.to_string(),
        })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn generate_secret(
    file: &str,
    dir: &str,
    generator: &SecretGenerator,
    generator_file: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Result<Value, ManifestsError> {
    if !generator
        .options
        .as_ref()
        .is_some_and(|o| o.disable_name_suffix_hash)
    {
        return Err(ManifestsError::Parse {
            file: file.to_owned(),
            message: format!(
                "secretGenerator {}: only options.disableNameSuffixHash: true is supported",
                generator.name
            ),
        });
    }
    let mut data = Map::new();
    for entry in &generator.files {
        // `key=path`, or `path` whose file name is the key.
        let (key, rel) = match entry.split_once('=') {
            Some((k, p)) => (k.to_owned(), p),
            None => (
                entry.rsplit('/').next().unwrap_or(entry).to_owned(),
                entry.as_str(),
            ),
        };
        let bytes = generator_file(&join(dir, rel)).ok_or_else(|| {
            ManifestsError::MissingGeneratorFile {
                kustomization: file.to_owned(),
                secret: generator.name.clone(),
                file: rel.to_owned(),
            }
        })?;
        data.insert(
            key,
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        );
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), generator.name.clone().into());
    if let Some(ns) = &generator.namespace {
        metadata.insert("namespace".into(), ns.clone().into());
    }
    let mut secret = Map::new();
    secret.insert("apiVersion".into(), "v1".into());
    secret.insert("kind".into(), "Secret".into());
    secret.insert("metadata".into(), Value::Object(metadata));
    secret.insert(
        "type".into(),
        generator
            .type_
            .clone()
            .unwrap_or_else(|| "Opaque".into())
            .into(),
    );
    secret.insert("data".into(), Value::Object(data));
    Ok(Value::Object(secret))
}

fn apply_patch(
    file: &str,
    dir: &str,
    entry: &PatchEntry,
    objects: &mut [Value],
) -> Result<(), ManifestsError> {
    let (source, text) = match (&entry.path, &entry.patch) {
        (Some(path), None) => {
            let p = join(dir, path);
            let text = embedded(&p)?;
            (p, text)
        }
        (None, Some(inline)) => (file.to_owned(), inline.as_str()),
        _ => {
            return Err(ManifestsError::Parse {
                file: file.to_owned(),
                message: "a patch needs exactly one of `path` and `patch`".into(),
            });
        }
    };
    let ops: json_patch::Patch =
        serde_saphyr::from_str(text).map_err(|e| ManifestsError::Parse {
            file: source.clone(),
            message: format!("only JSON 6902 patches (a list of operations) are supported: {e}"),
        })?;
    let target = describe(&entry.target);
    let mut matched = false;
    for obj in objects.iter_mut().filter(|o| selects(&entry.target, o)) {
        matched = true;
        json_patch::patch(obj, &ops.0).map_err(|e| ManifestsError::Patch {
            file: source.clone(),
            target: target.clone(),
            message: e.to_string(),
        })?;
    }
    if matched {
        Ok(())
    } else {
        Err(ManifestsError::Patch {
            file: source,
            target,
            message: "no object matches the target".into(),
        })
    }
}

fn replace(file: &str, r: &Replacement, objects: &mut [Value]) -> Result<(), ManifestsError> {
    let err = |message: String| ManifestsError::Replacement {
        file: file.to_owned(),
        message,
    };
    let source = objects
        .iter()
        .find(|o| selects(&r.source.select, o))
        .ok_or_else(|| err(format!("no source object {}", describe(&r.source.select))))?;
    let path = parse_field_path(&r.source.field_path);
    let value = get_path(source, &path)
        .ok_or_else(|| err(format!("source has no field {}", r.source.field_path)))?
        .clone();
    for target in &r.targets {
        let mut matched = false;
        for obj in objects.iter_mut().filter(|o| selects(&target.select, o)) {
            matched = true;
            for fp in &target.field_paths {
                if !set_path(obj, &parse_field_path(fp), &value, target.options.create) {
                    return Err(err(format!(
                        "{} has no field {fp} (set options.create to add it)",
                        describe(&target.select)
                    )));
                }
            }
        }
        if !matched {
            return Err(err(format!(
                "no target object {}",
                describe(&target.select)
            )));
        }
    }
    Ok(())
}

/// One step of a kustomize field path: a map key, or `*` for every element
/// of a list.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Every,
}

/// `webhooks.*.clientConfig.caBundle`, `data.[ca.crt]`.
fn parse_field_path(path: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        let (step, tail) = if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']').unwrap_or(inner.len());
            (&inner[..end], inner.get(end + 1..).unwrap_or(""))
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        steps.push(if step == "*" {
            Step::Every
        } else {
            Step::Key(step.to_owned())
        });
        rest = tail.strip_prefix('.').unwrap_or(tail);
    }
    steps
}

fn get_path<'v>(value: &'v Value, path: &[Step]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, step| match step {
        Step::Key(k) => v.get(k),
        Step::Every => None,
    })
}

/// Sets `path` in `value`; false when a step is missing and `create` is off.
fn set_path(value: &mut Value, path: &[Step], new: &Value, create: bool) -> bool {
    let Some((step, rest)) = path.split_first() else {
        *value = new.clone();
        return true;
    };
    match step {
        Step::Every => value
            .as_array_mut()
            .is_some_and(|items| items.iter_mut().all(|i| set_path(i, rest, new, create))),
        Step::Key(k) => {
            let Some(map) = value.as_object_mut() else {
                return false;
            };
            if !map.contains_key(k) {
                if !create {
                    return false;
                }
                map.insert(k.clone(), Value::Object(Map::new()));
            }
            map.get_mut(k)
                .is_some_and(|child| set_path(child, rest, new, create))
        }
    }
}

fn selects(sel: &Selector, obj: &Value) -> bool {
    let api = str_at(obj, "/apiVersion").unwrap_or_default();
    let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
    let matches = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    matches(&sel.group, group)
        && matches(&sel.version, version)
        && matches(&sel.kind, str_at(obj, "/kind").unwrap_or_default())
        && matches(&sel.name, str_at(obj, "/metadata/name").unwrap_or_default())
        && matches(
            &sel.namespace,
            str_at(obj, "/metadata/namespace").unwrap_or_default(),
        )
}

fn describe(sel: &Selector) -> String {
    let parts: Vec<String> = [
        ("group", &sel.group),
        ("version", &sel.version),
        ("kind", &sel.kind),
        ("name", &sel.name),
        ("namespace", &sel.namespace),
    ]
    .iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
    .collect();
    format!("[{}]", parts.join(" "))
}

fn str_at<'v>(obj: &'v Value, pointer: &str) -> Option<&'v str> {
    obj.pointer(pointer).and_then(Value::as_str)
}

/// Joins a relative path onto a directory, resolving `.` and `..`.
fn join(dir: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// kustomize's default ("legacy") output order: namespaces and other
/// prerequisites first, webhooks last, then by group/version/kind,
/// namespace and name.
fn order_key(obj: &Value) -> (usize, String, String, String) {
    const FIRST: &[&str] = &[
        "Namespace",
        "ResourceQuota",
        "StorageClass",
        "CustomResourceDefinition",
        "ServiceAccount",
        "PodSecurityPolicy",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "ConfigMap",
        "Secret",
        "Endpoints",
        "Service",
        "LimitRange",
        "PriorityClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Deployment",
        "StatefulSet",
        "CronJob",
        "PodDisruptionBudget",
    ];
    const LAST: &[&str] = &[
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    let kind = str_at(obj, "/kind").unwrap_or_default();
    let rank = FIRST
        .iter()
        .position(|k| *k == kind)
        .or_else(|| LAST.iter().position(|k| *k == kind).map(|i| 1000 + i))
        .unwrap_or(FIRST.len());
    let api = str_at(obj, "/apiVersion").unwrap_or_default();
    let (group, version) = api.rsplit_once('/').unwrap_or(("", api));
    (
        rank,
        format!("{group}_{version}_{kind}"),
        str_at(obj, "/metadata/namespace")
            .unwrap_or_default()
            .to_owned(),
        str_at(obj, "/metadata/name").unwrap_or_default().to_owned(),
    )
}

// ---------------------------------------------------------------------------
// `winadmit manifests` options.

/// What `winadmit manifests` changes in a built install.
#[derive(Debug, Default, Clone)]
pub struct Customization<'a> {
    /// Install into this namespace instead of `winadmit`.
    pub namespace: Option<&'a str>,
    /// The server image.
    pub image: Option<&'a str>,
    /// PEM CA certificate(s) for both webhooks' caBundle.
    pub ca_bundle: Option<&'a [u8]>,
}

/// Applies the options to a built install.
///
/// # Errors
/// An invalid namespace, a caBundle that is not PEM, or a caBundle for an
/// install whose caBundle cert-manager injects.
pub fn customize(objects: &mut [Value], c: &Customization<'_>) -> Result<(), ManifestsError> {
    if let Some(ns) = c.namespace {
        if !is_dns_label(ns) {
            return Err(ManifestsError::InvalidNamespace(ns.to_owned()));
        }
        for obj in objects.iter_mut() {
            set_namespace(obj, ns);
        }
    }
    if let Some(image) = c.image {
        for obj in objects.iter_mut().filter(|o| is_kind(o, "Deployment")) {
            let containers = obj
                .pointer_mut("/spec/template/spec/containers")
                .and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                if str_at(container, "/name") == Some(CONTAINER) {
                    container["image"] = image.into();
                }
            }
        }
    }
    if let Some(pem) = c.ca_bundle {
        if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(ManifestsError::NotPem);
        }
        let encoded = base64::engine::general_purpose::STANDARD.encode(pem);
        for obj in objects.iter_mut().filter(|o| is_webhook_configuration(o)) {
            if obj
                .pointer(&format!(
                    "/metadata/annotations/{}",
                    crate::path::escape_pointer(INJECT_CA_ANNOTATION)
                ))
                .is_some()
            {
                return Err(ManifestsError::CaBundleWithCertManager);
            }
            for webhook in webhooks_mut(obj) {
                webhook["clientConfig"]["caBundle"] = encoded.clone().into();
            }
        }
    }
    Ok(())
}

/// Moves the install from `winadmit` to `ns`: object namespaces, the
/// Namespace itself, the ServiceAccount subject, the webhooks' service
/// reference and own-namespace exclusion, and cert-manager's DNS names and
/// injection annotation.
fn set_namespace(obj: &mut Value, ns: &str) {
    let swap = |v: &mut Value| {
        if v.as_str() == Some(DEFAULT_NAMESPACE) {
            *v = ns.into();
        }
    };
    if is_kind(obj, "Namespace") {
        if let Some(name) = obj.pointer_mut("/metadata/name") {
            swap(name);
        }
        return;
    }
    if let Some(v) = obj.pointer_mut("/metadata/namespace") {
        swap(v);
    }
    if let Some(subjects) = obj.pointer_mut("/subjects").and_then(Value::as_array_mut) {
        for s in subjects {
            if let Some(v) = s.get_mut("namespace") {
                swap(v);
            }
        }
    }
    if is_webhook_configuration(obj) {
        let key = format!(
            "/metadata/annotations/{}",
            crate::path::escape_pointer(INJECT_CA_ANNOTATION)
        );
        if let Some(v) = obj.pointer_mut(&key)
            && let Some((old_ns, cert)) = v.as_str().and_then(|s| s.split_once('/'))
            && old_ns == DEFAULT_NAMESPACE
        {
            *v = format!("{ns}/{cert}").into();
        }
        for webhook in webhooks_mut(obj) {
            if let Some(v) = webhook.pointer_mut("/clientConfig/service/namespace") {
                swap(v);
            }
            let exprs = webhook
                .pointer_mut("/namespaceSelector/matchExpressions")
                .and_then(Value::as_array_mut);
            for expr in exprs.into_iter().flatten() {
                if str_at(expr, "/key") == Some("kubernetes.io/metadata.name") {
                    let values = expr.get_mut("values").and_then(Value::as_array_mut);
                    values.into_iter().flatten().for_each(swap);
                }
            }
        }
    }
    if is_kind(obj, "Certificate") {
        // `svc.winadmit`, `svc.winadmit.svc`, ...: the second label is the namespace.
        let rename = |v: &mut Value| {
            if let Some(name) = v.as_str() {
                let mut labels: Vec<&str> = name.split('.').collect();
                if labels.get(1) == Some(&DEFAULT_NAMESPACE) {
                    labels[1] = ns;
                    *v = labels.join(".").into();
                }
            }
        };
        if let Some(v) = obj.pointer_mut("/spec/commonName") {
            rename(v);
        }
        let names = obj
            .pointer_mut("/spec/dnsNames")
            .and_then(Value::as_array_mut);
        names.into_iter().flatten().for_each(rename);
    }
}

fn is_kind(obj: &Value, kind: &str) -> bool {
    str_at(obj, "/kind") == Some(kind)
}

fn is_webhook_configuration(obj: &Value) -> bool {
    is_kind(obj, "ValidatingWebhookConfiguration") || is_kind(obj, "MutatingWebhookConfiguration")
}

fn webhooks_mut(obj: &mut Value) -> impl Iterator<Item = &mut Value> {
    obj.get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The install as a multi-document YAML stream.
///
/// # Errors
/// Serialization failures (none expected for JSON values).
pub fn to_yaml(objects: &[Value]) -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for (i, obj) in objects.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_saphyr::to_string(obj)?);
    }
    Ok(out)
}

/// Objects by `kind/namespace/name`, for comparisons.
#[must_use]
pub fn by_id(objects: &[Value]) -> BTreeMap<String, &Value> {
    objects
        .iter()
        .map(|o| {
            let id = format!(
                "{}/{}/{}",
                str_at(o, "/kind").unwrap_or_default(),
                str_at(o, "/metadata/namespace").unwrap_or_default(),
                str_at(o, "/metadata/name").unwrap_or_default()
            );
            (id, o)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_relative_paths() {
        assert_eq!(
            join("overlays/audit", "../cert-manager"),
            "overlays/cert-manager"
        );
        assert_eq!(join("overlays/audit", "../../base"), "base");
        assert_eq!(join("", "base"), "base");
        assert_eq!(join("base", "./rbac.yaml"), "base/rbac.yaml");
    }

    #[test]
    fn parses_field_paths() {
        assert_eq!(
            parse_field_path("data.[ca.crt]"),
            [Step::Key("data".into()), Step::Key("ca.crt".into())]
        );
        assert_eq!(
            parse_field_path("webhooks.*.clientConfig.caBundle"),
            [
                Step::Key("webhooks".into()),
                Step::Every,
                Step::Key("clientConfig".into()),
                Step::Key("caBundle".into())
            ]
        );
    }

    #[test]
    fn set_path_creates_only_when_asked() {
        let mut v = serde_json::json!({"webhooks": [{"clientConfig": {}}, {"clientConfig": {}}]});
        let path = parse_field_path("webhooks.*.clientConfig.caBundle");
        assert!(!set_path(&mut v, &path, &"Q0E=".into(), false));
        assert!(set_path(&mut v, &path, &"Q0E=".into(), true));
        assert_eq!(v["webhooks"][1]["clientConfig"]["caBundle"], "Q0E=");
    }

    #[test]
    fn unknown_kustomize_features_are_errors() {
        let err = serde_saphyr::from_str::<Kustomization>(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: x-\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("namePrefix"), "{err}");
    }

    #[test]
    fn every_embedded_kustomization_builds() {
        let none = |_: &str| None;
        for (path, _) in FILES {
            let Some(dir) = path.strip_suffix("kustomization.yaml") else {
                continue;
            };
            let dir = dir.trim_end_matches('/');
            if dir.starts_with("components/") || dir == "overlays/self-signed" {
                continue;
            }
            let objects = build(dir, &none).unwrap_or_else(|e| panic!("{dir}: {e}"));
            // The admission-policy overlay has only the policies and their bindings.
            let least = if dir == "overlays/admission-policy" {
                5
            } else {
                10
            };
            assert!(objects.len() >= least, "{dir}");
        }
        assert!(matches!(
            build("overlays/self-signed", &none),
            Err(ManifestsError::MissingGeneratorFile { .. })
        ));
    }
}
