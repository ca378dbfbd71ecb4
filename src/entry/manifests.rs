//! The install manifests `winadmit manifests` prints.
//!
//! kustomize is the only renderer of `manifests/`: `manifests/rendered/`
//! holds the output of `kubectl kustomize` for the base install and every
//! overlay, committed, and `tests/install/generated.rs` checks each file
//! still equals what kubectl renders today (`WINADMIT_REGENERATE=1`
//! rewrites them). Those files are embedded here; [`customize`] parses one and
//! applies the `winadmit manifests` options (the self-signed certificates,
//! namespace, image, caBundle) to it. Pure: the caller reads any files.
//!
//! The self-signed overlay's secretGenerator reads `certs/ca.crt`,
//! `certs/tls.crt` and `certs/tls.key`, which are secret and never
//! committed. Its render is made with the [`CERT_PLACEHOLDERS`] in their
//! place; [`customize`] swaps the base64 of each placeholder (in the Secret
//! and, through the overlay's replacement, in both caBundles) for the base64
//! of the real file.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::Value;

/// The namespace every file in `manifests/` names.
pub const DEFAULT_NAMESPACE: &str = "winadmit";
/// The Deployment's container that runs the server.
pub const CONTAINER: &str = "winadmit";
/// cert-manager's cainjector annotation.
pub const INJECT_CA_ANNOTATION: &str = "cert-manager.io/inject-ca-from";

/// The files of `winadmit certs` the self-signed overlay reads (under its
/// `certs/` directory) and the placeholder text its committed render was made
/// with. Not PEM, so a render that escaped substitution cannot be mistaken
/// for a working install; short, so kustomize keeps each base64 value on one
/// line (it wraps longer ones).
pub const CERT_PLACEHOLDERS: [(&str, &str); 3] = [
    ("ca.crt", "winadmit placeholder: certs/ca.crt\n"),
    ("tls.crt", "winadmit placeholder: certs/tls.crt\n"),
    ("tls.key", "winadmit placeholder: certs/tls.key\n"),
];

/// One committed render: the output of `kubectl kustomize` for a
/// kustomization under `manifests/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// `manifests/`: everything but the TLS Secret and the caBundle.
    Base,
    /// `manifests/overlays/cert-manager`.
    CertManager,
    /// `manifests/overlays/self-signed`, rendered with [`CERT_PLACEHOLDERS`].
    SelfSigned,
    /// `manifests/overlays/audit`.
    Audit,
    /// `manifests/overlays/no-match-conditions`.
    NoMatchConditions,
    /// `manifests/overlays/custom-resources`.
    CustomResources,
    /// `manifests/overlays/admission-policy`.
    AdmissionPolicy,
    /// `manifests/overlays/gmsa`.
    Gmsa,
    /// `manifests/overlays/one-call`.
    OneCall,
}

/// Embeds `manifests/rendered/<name>.yaml`.
macro_rules! rendered {
    ($name:literal) => {
        include_str!(concat!("../../manifests/rendered/", $name, ".yaml"))
    };
}

impl Render {
    pub const ALL: [Self; 9] = [
        Self::Base,
        Self::CertManager,
        Self::SelfSigned,
        Self::Audit,
        Self::NoMatchConditions,
        Self::CustomResources,
        Self::AdmissionPolicy,
        Self::Gmsa,
        Self::OneCall,
    ];

    /// The `--overlay` value, and the file name under `manifests/rendered/`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Base => "base",
            Self::CertManager => "cert-manager",
            Self::SelfSigned => "self-signed",
            Self::Audit => "audit",
            Self::NoMatchConditions => "no-match-conditions",
            Self::CustomResources => "custom-resources",
            Self::AdmissionPolicy => "admission-policy",
            Self::Gmsa => "gmsa",
            Self::OneCall => "one-call",
        }
    }

    /// The kustomization directory it renders, relative to `manifests/`.
    #[must_use]
    pub fn kustomization(self) -> &'static str {
        match self {
            Self::Base => "",
            Self::CertManager => "overlays/cert-manager",
            Self::SelfSigned => "overlays/self-signed",
            Self::Audit => "overlays/audit",
            Self::NoMatchConditions => "overlays/no-match-conditions",
            Self::CustomResources => "overlays/custom-resources",
            Self::AdmissionPolicy => "overlays/admission-policy",
            Self::Gmsa => "overlays/gmsa",
            Self::OneCall => "overlays/one-call",
        }
    }

    /// The committed `kubectl kustomize` output.
    #[must_use]
    pub fn text(self) -> &'static str {
        match self {
            Self::Base => rendered!("base"),
            Self::CertManager => rendered!("cert-manager"),
            Self::SelfSigned => rendered!("self-signed"),
            Self::Audit => rendered!("audit"),
            Self::NoMatchConditions => rendered!("no-match-conditions"),
            Self::CustomResources => rendered!("custom-resources"),
            Self::AdmissionPolicy => rendered!("admission-policy"),
            Self::Gmsa => rendered!("gmsa"),
            Self::OneCall => rendered!("one-call"),
        }
    }

    /// The committed objects, in kustomize's order. The self-signed render
    /// still holds the [`CERT_PLACEHOLDERS`]; [`customize`] fills them.
    ///
    /// # Panics
    /// Never in a released binary: a test parses every render.
    #[must_use]
    pub fn objects(self) -> Vec<Value> {
        serde_saphyr::from_multiple::<Value>(self.text())
            .unwrap_or_else(|e| panic!("manifests/rendered/{}.yaml: {e}", self.name()))
            .into_iter()
            .filter(|v| !v.is_null())
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// The self-signed overlay without the files of `winadmit certs`.
    #[error(
        "the self-signed overlay's Secret needs ca.crt, tls.crt and tls.key: pass --certs DIR with the output of `winadmit certs --namespace NS --out DIR`"
    )]
    MissingCerts,
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
    /// `--certs` whose tls.crt is not a readable certificate.
    #[error("--certs: tls.crt is not a PEM certificate ({0}); use the output of `winadmit certs`")]
    BadCertificate(String),
    /// `--certs` made for another Service name than the one the webhooks
    /// call: the API server's TLS check would fail every call.
    #[error(
        "--certs: tls.crt is for {names}, but the webhooks call the Service {wanted}, so the API server would refuse its certificate on every call (and with failurePolicy Fail refuse every Windows pod). Make certificates for this namespace with `winadmit certs --namespace {namespace} --out DIR`, or render the namespace the certificates were made for with `--namespace`"
    )]
    CertificateNameMismatch {
        /// `<service>.<namespace>.svc`, what the API server checks.
        wanted: String,
        /// The certificate's DNS names, comma-separated.
        names: String,
        namespace: String,
    },
}

/// The output of `winadmit certs`, for the self-signed overlay.
#[derive(Debug, Clone)]
pub struct Certs {
    pub ca_crt: Vec<u8>,
    pub tls_crt: Vec<u8>,
    pub tls_key: Vec<u8>,
}

impl Certs {
    /// Each file's contents with its name in [`CERT_PLACEHOLDERS`].
    fn by_name(&self, name: &str) -> &[u8] {
        match name {
            "ca.crt" => &self.ca_crt,
            "tls.crt" => &self.tls_crt,
            _ => &self.tls_key,
        }
    }
}

/// What `winadmit manifests` changes in a render.
#[derive(Debug, Default, Clone)]
pub struct Customization<'a> {
    /// The files the self-signed overlay's Secret holds; needed for that
    /// overlay, ignored by the others.
    pub certs: Option<&'a Certs>,
    /// Install into this namespace instead of `winadmit`.
    pub namespace: Option<&'a str>,
    /// The server image.
    pub image: Option<&'a str>,
    /// PEM CA certificate(s) for both webhooks' caBundle.
    pub ca_bundle: Option<&'a [u8]>,
}

/// The objects of `render` with the options applied.
///
/// # Errors
/// The self-signed overlay without certificates, an invalid namespace, a
/// caBundle that is not PEM, or a caBundle for an install whose caBundle
/// cert-manager injects.
pub fn customize(render: Render, c: &Customization<'_>) -> Result<Vec<Value>, ManifestsError> {
    let mut objects = render.objects();
    if render == Render::SelfSigned {
        fill_certs(&mut objects, c.certs.ok_or(ManifestsError::MissingCerts)?);
    }
    if let Some(ns) = c.namespace {
        if !is_dns_label(ns) {
            return Err(ManifestsError::InvalidNamespace(ns.to_owned()));
        }
        for obj in &mut objects {
            set_namespace(obj, ns);
        }
    }
    if render == Render::SelfSigned
        && let Some(certs) = c.certs
    {
        check_serving_name(&objects, certs)?;
    }
    if let Some(image) = c.image {
        set_image(&mut objects, image);
    }
    if let Some(pem) = c.ca_bundle {
        set_ca_bundle(&mut objects, pem)?;
    }
    Ok(objects)
}

/// The API server calls a webhook Service at `<service>.<namespace>.svc`
/// and checks that name against the serving certificate's DNS names: the
/// certificate must name the Service the rendered webhooks call.
fn check_serving_name(objects: &[Value], certs: &Certs) -> Result<(), ManifestsError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName};
    let service = objects
        .iter()
        .filter(|o| is_webhook_configuration(o))
        .filter_map(|o| o.get("webhooks").and_then(Value::as_array))
        .flatten()
        .find_map(|w| {
            let s = w.pointer("/clientConfig/service")?;
            Some((s.get("name")?.as_str()?, s.get("namespace")?.as_str()?))
        });
    let Some((name, namespace)) = service else {
        return Ok(());
    };
    let wanted = format!("{name}.{namespace}.svc");
    let der = CertificateDer::from_pem_slice(&certs.tls_crt)
        .map_err(|e| ManifestsError::BadCertificate(e.to_string()))?;
    let cert = webpki::EndEntityCert::try_from(&der)
        .map_err(|e| ManifestsError::BadCertificate(e.to_string()))?;
    let server = ServerName::try_from(wanted.as_str())
        .map_err(|e| ManifestsError::BadCertificate(e.to_string()))?;
    if cert.verify_is_valid_for_subject_name(&server).is_ok() {
        return Ok(());
    }
    let names: Vec<&str> = cert.valid_dns_names().collect();
    Err(ManifestsError::CertificateNameMismatch {
        wanted,
        names: if names.is_empty() {
            "no DNS name".to_owned()
        } else {
            names.join(", ")
        },
        namespace: namespace.to_owned(),
    })
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Replaces every string that is the base64 of a placeholder (the Secret's
/// data and the caBundles kustomize copied from it) with the base64 of the
/// real file.
fn fill_certs(objects: &mut [Value], certs: &Certs) {
    let swaps: Vec<(String, String)> = CERT_PLACEHOLDERS
        .iter()
        .map(|(name, text)| (base64(text.as_bytes()), base64(certs.by_name(name))))
        .collect();
    for obj in objects {
        for_each_string(obj, &mut |s| {
            if let Some((_, real)) = swaps.iter().find(|(placeholder, _)| placeholder == s) {
                s.clone_from(real);
            }
        });
    }
}

fn for_each_string(value: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| for_each_string(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| for_each_string(v, f)),
        _ => {}
    }
}

fn set_image(objects: &mut [Value], image: &str) {
    for obj in objects.iter_mut().filter(|o| is_kind(o, "Deployment")) {
        let containers = obj
            .pointer_mut("/spec/template/spec/containers")
            .and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            if container["name"] == CONTAINER {
                container["image"] = image.into();
            }
        }
    }
}

fn set_ca_bundle(objects: &mut [Value], pem: &[u8]) -> Result<(), ManifestsError> {
    if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ManifestsError::NotPem);
    }
    let encoded = base64(pem);
    for obj in objects.iter_mut().filter(|o| is_webhook_configuration(o)) {
        if inject_ca_annotation(obj).is_some() {
            return Err(ManifestsError::CaBundleWithCertManager);
        }
        for webhook in webhooks_mut(obj) {
            webhook["clientConfig"]["caBundle"] = encoded.clone().into();
        }
    }
    Ok(())
}

/// cert-manager's injection annotation (a key with a `/`, so looked up in
/// the map rather than through a JSON pointer).
fn inject_ca_annotation(obj: &mut Value) -> Option<&mut Value> {
    obj.get_mut("metadata")?
        .get_mut("annotations")?
        .get_mut(INJECT_CA_ANNOTATION)
}

/// Moves the install from `winadmit` to `ns`: object namespaces, the
/// Namespace itself, the ServiceAccount subject, the webhooks' service
/// reference and own-namespace exclusion, and cert-manager's DNS names and
/// injection annotation.
fn set_namespace(obj: &mut Value, ns: &str) {
    let swap = |v: &mut Value| {
        if *v == DEFAULT_NAMESPACE {
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
        if let Some(v) = inject_ca_annotation(obj)
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
                if expr["key"] == "kubernetes.io/metadata.name" {
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
    obj["kind"] == kind
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
    let field = |o: &Value, pointer: &str| -> String {
        o.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    objects
        .iter()
        .map(|o| {
            let id = format!(
                "{}/{}/{}",
                field(o, "/kind"),
                field(o, "/metadata/namespace"),
                field(o, "/metadata/name")
            );
            (id, o)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certs() -> Certs {
        certs_for("winadmit")
    }

    /// What `winadmit certs --namespace NS` writes.
    fn certs_for(namespace: &str) -> Certs {
        let b = crate::entry::certs::generate(
            "winadmit",
            namespace,
            time::OffsetDateTime::now_utc(),
            30,
        )
        .unwrap();
        Certs {
            ca_crt: b.ca_pem.into_bytes(),
            tls_crt: b.cert_pem.into_bytes(),
            tls_key: b.key_pem.into_bytes(),
        }
    }

    #[test]
    fn self_signed_certs_must_name_the_service_the_webhooks_call() {
        let c = certs_for("winadmit");
        let custom = |namespace| Customization {
            certs: Some(&c),
            namespace,
            ..Customization::default()
        };
        assert!(customize(Render::SelfSigned, &custom(None)).is_ok());
        let err = customize(Render::SelfSigned, &custom(Some("platform"))).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ManifestsError::CertificateNameMismatch { .. })
                && text.contains("winadmit.platform.svc")
                && text.contains("winadmit.winadmit.svc")
                && text.contains("--namespace platform"),
            "{text}"
        );
        let platform = certs_for("platform");
        let ok = Customization {
            certs: Some(&platform),
            namespace: Some("platform"),
            ..Customization::default()
        };
        assert!(customize(Render::SelfSigned, &ok).is_ok());
        let garbage = Certs {
            tls_crt: b"not a certificate".to_vec(),
            ..c.clone()
        };
        let bad = Customization {
            certs: Some(&garbage),
            ..Customization::default()
        };
        assert!(matches!(
            customize(Render::SelfSigned, &bad),
            Err(ManifestsError::BadCertificate(_))
        ));
    }

    #[test]
    fn every_render_parses() {
        for render in Render::ALL {
            let least = if render == Render::AdmissionPolicy {
                5
            } else {
                10
            };
            assert!(render.objects().len() >= least, "{}", render.name());
        }
    }

    /// Every placeholder is in the self-signed render (so the substitution
    /// has something to do) and none is left after it.
    #[test]
    fn self_signed_certs_replace_every_placeholder() {
        let text = Render::SelfSigned.text();
        for (name, placeholder) in CERT_PLACEHOLDERS {
            assert!(
                text.contains(&base64(placeholder.as_bytes())),
                "the self-signed render lacks the placeholder for {name}"
            );
        }
        let c = certs();
        let objects = customize(
            Render::SelfSigned,
            &Customization {
                certs: Some(&c),
                ..Customization::default()
            },
        )
        .unwrap();
        let yaml = to_yaml(&objects).unwrap();
        assert!(!yaml.contains("placeholder"), "{yaml}");
        let secret = objects.iter().find(|o| is_kind(o, "Secret")).unwrap();
        assert_eq!(secret["data"]["ca.crt"], base64(&c.ca_crt));
        assert_eq!(secret["data"]["tls.crt"], base64(&c.tls_crt));
        assert_eq!(secret["data"]["tls.key"], base64(&c.tls_key));
        for obj in objects.iter().filter(|o| is_webhook_configuration(o)) {
            assert_eq!(
                obj["webhooks"][0]["clientConfig"]["caBundle"],
                base64(&c.ca_crt)
            );
        }
    }

    #[test]
    fn self_signed_needs_certs_and_the_others_ignore_them() {
        assert!(matches!(
            customize(Render::SelfSigned, &Customization::default()),
            Err(ManifestsError::MissingCerts)
        ));
        let c = certs();
        let with = Customization {
            certs: Some(&c),
            ..Customization::default()
        };
        assert_eq!(
            customize(Render::Base, &with).unwrap(),
            Render::Base.objects()
        );
    }

    #[test]
    fn ca_bundle_is_refused_where_cert_manager_injects_it() {
        let c = certs();
        let with = Customization {
            ca_bundle: Some(&c.ca_crt),
            ..Customization::default()
        };
        assert!(matches!(
            customize(Render::CertManager, &with),
            Err(ManifestsError::CaBundleWithCertManager)
        ));
        assert!(customize(Render::Base, &with).is_ok());
    }

    #[test]
    fn namespaces_must_be_dns_labels() {
        for bad in ["", "Not_A_Name", "-a", "a-", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        for good in ["a", "win-ops", "x1", &"a".repeat(63)] {
            assert!(is_dns_label(good), "{good:?}");
        }
    }
}
