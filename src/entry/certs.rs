//! TLS material for installs without cert-manager: a throwaway CA and an
//! ECDSA P-256 serving certificate for the webhook Service's DNS names.
//!
//! The CA's private key is dropped once it has signed the serving
//! certificate, so nothing else can ever be signed with it; rotating means
//! generating a new pair. Pure: the caller passes the current time and
//! writes the files.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use time::{Duration, OffsetDateTime};

/// File names inside the output directory, as the Secret keys and the
/// `self-signed` overlay expect them.
pub const CA_FILE: &str = "ca.crt";
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// PEM-encoded output of [`generate`].
#[derive(Clone)]
pub struct Bundle {
    /// The CA certificate: the webhooks' caBundle and the clients' trust root.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    /// A Service or namespace name that Kubernetes would not accept.
    #[error(
        "{what} {value:?} is not a valid name: use 1-63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
    )]
    InvalidName { what: &'static str, value: String },
    /// A validity of zero days.
    #[error("--days must be at least 1")]
    ZeroValidity,
    /// rcgen refused the parameters or failed to sign.
    #[error("generating the certificate")]
    Generate(#[source] rcgen::Error),
}

/// The names the API server may use for `service` in `namespace`: it dials
/// `<service>.<namespace>.svc`; the others cover in-cluster clients.
#[must_use]
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Generates a CA and a serving certificate for `service.namespace`, valid
/// from an hour before `now` (clock skew) for `days` days.
///
/// # Errors
/// An invalid Service or namespace name, zero days, or a signing failure.
pub fn generate(
    service: &str,
    namespace: &str,
    now: OffsetDateTime,
    days: u32,
) -> Result<Bundle, CertsError> {
    check_name("Service name", service, true)?;
    check_name("namespace", namespace, false)?;
    if days == 0 {
        return Err(CertsError::ZeroValidity);
    }
    let not_before = now - Duration::hours(1);
    let not_after = now + Duration::days(i64::from(days));

    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CertsError::Generate)?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name = name(&format!("winadmit CA for {service}.{namespace}"));
    // Path length 0: this CA signs the serving certificate and nothing below it.
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key).map_err(CertsError::Generate)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(CertsError::Generate)?;
    let mut leaf = CertificateParams::new(service_dns_names(service, namespace))
        .map_err(CertsError::Generate)?;
    leaf.distinguished_name = name(&format!("{service}.{namespace}.svc"));
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let cert = leaf
        .signed_by(&key, &issuer)
        .map_err(CertsError::Generate)?;

    Ok(Bundle {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Service names are RFC 1035 labels (start with a letter); namespaces are
/// RFC 1123 labels (may start with a digit).
fn check_name(what: &'static str, value: &str, letter_first: bool) -> Result<(), CertsError> {
    let bytes = value.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && (bytes[0].is_ascii_lowercase() || (!letter_first && bytes[0].is_ascii_digit()))
        && bytes[bytes.len() - 1] != b'-';
    if ok {
        Ok(())
    } else {
        Err(CertsError::InvalidName {
            what,
            value: value.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_cover_every_service_form() {
        assert_eq!(
            service_dns_names("winadmit", "ops"),
            [
                "winadmit",
                "winadmit.ops",
                "winadmit.ops.svc",
                "winadmit.ops.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn rejects_names_kubernetes_rejects() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::days(20_000);
        for (svc, ns) in [
            ("Winadmit", "ops"),
            ("1svc", "ops"),
            ("svc-", "ops"),
            ("svc", "a.b"),
            ("", "ops"),
            ("svc", ""),
        ] {
            assert!(
                matches!(
                    generate(svc, ns, now, 1),
                    Err(CertsError::InvalidName { .. })
                ),
                "{svc}.{ns}"
            );
        }
        assert!(generate("svc", "1ops", now, 1).is_ok());
        assert!(matches!(
            generate("svc", "ops", now, 0),
            Err(CertsError::ZeroValidity)
        ));
    }

    #[test]
    fn writes_pem() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::days(20_000);
        let b = generate("winadmit", "winadmit", now, 30).unwrap();
        assert!(b.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(b.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(b.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(!format!("{b:?}").contains("PRIVATE KEY"));
    }
}
