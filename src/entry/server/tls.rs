//! TLS: load and check the certificate and key, serve them through a
//! resolver that can be swapped while running (rotation), watch the files,
//! and generate a self-signed pair for trying the server out.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

/// A TLS set-up problem. Each variant names the flag and file to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the TLS certificate {path} (--tls-cert): {source}")]
    ReadCert {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the TLS key {path} (--tls-key): {source}")]
    ReadKey {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the TLS certificate {path} (--tls-cert) holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)"
    )]
    NoCert { path: PathBuf },
    #[error("the TLS certificate {path} (--tls-cert) is not valid PEM: {message}")]
    BadCert { path: PathBuf, message: String },
    #[error(
        "the TLS key {path} (--tls-key) holds no PEM private key (expected PKCS#8, PKCS#1 or SEC1: -----BEGIN PRIVATE KEY-----): {message}"
    )]
    BadKey { path: PathBuf, message: String },
    #[error(
        "the TLS key {path} (--tls-key) is not a usable key (ECDSA P-256/P-384, Ed25519 or RSA): {message}"
    )]
    UnsupportedKey { path: PathBuf, message: String },
    #[error(
        "the TLS key {key} (--tls-key) does not belong to the certificate {cert} (--tls-cert): {message}"
    )]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        message: String,
    },
    #[error("cannot use the client CA {path} (--client-ca): {message}")]
    ClientCa { path: PathBuf, message: String },
    #[error("cannot generate the self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("cannot write the self-signed CA to {path} (--self-signed-dir): {source}")]
    WriteCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The certificate and key files, as given on the command line.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Reads, parses and checks a certificate chain and its key.
///
/// # Errors
/// A file is missing or unreadable, not PEM, an unsupported key, or the key
/// does not match the certificate.
pub fn load_pair(files: &CertFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let cert_pem = std::fs::read(&files.cert).map_err(|source| TlsError::ReadCert {
        path: files.cert.clone(),
        source,
    })?;
    let key_pem = std::fs::read(&files.key).map_err(|source| TlsError::ReadKey {
        path: files.key.clone(),
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCert {
            path: files.cert.clone(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert {
            path: files.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::BadKey {
        path: files.key.clone(),
        message: e.to_string(),
    })?;
    certified_key(certs, key, provider).map_err(|e| match e {
        KeyProblem::Unsupported(message) => TlsError::UnsupportedKey {
            path: files.key.clone(),
            message,
        },
        KeyProblem::Mismatch(message) => TlsError::Mismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
            message,
        },
    })
}

enum KeyProblem {
    Unsupported(String),
    Mismatch(String),
}

fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, KeyProblem> {
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| KeyProblem::Unsupported(e.to_string()))?;
    let ck = CertifiedKey::new(certs, signer);
    match ck.keys_match() {
        // `Unknown`: the key type cannot say; the handshake will tell.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(ck),
        Err(e) => Err(KeyProblem::Mismatch(e.to_string())),
    }
}

/// Serves the current certificate; [`CertResolver::set`] swaps it for new
/// connections while existing ones keep theirs.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    #[must_use]
    pub fn new(key: CertifiedKey) -> Self {
        Self {
            current: RwLock::new(Arc::new(key)),
        }
    }

    pub fn set(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
    }

    #[must_use]
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The cipher suites the server offers: TLS 1.3's AEAD suites, and for
/// TLS 1.2 only ephemeral ECDHE key exchange with AES-GCM or
/// ChaCha20-Poly1305 (forward secrecy, authenticated encryption; no CBC,
/// no RSA key exchange, no SHA-1 MACs). rustls implements nothing weaker,
/// but the list is spelled out so a provider change cannot widen it.
pub const CIPHER_SUITES: &[rustls::CipherSuite] = &[
    rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
    rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
    rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
];

/// `provider` with only [`CIPHER_SUITES`].
#[must_use]
pub fn restrict_cipher_suites(provider: &CryptoProvider) -> CryptoProvider {
    let mut p = provider.clone();
    p.cipher_suites
        .retain(|s| CIPHER_SUITES.contains(&s.suite()));
    p
}

/// The rustls server configuration: TLS 1.3 and 1.2 only with
/// [`CIPHER_SUITES`], ALPN `h2` and `http/1.1`, optional
/// client-certificate verification.
///
/// # Errors
/// The client CA file cannot be read or holds no usable certificate.
pub fn server_config(
    resolver: Arc<CertResolver>,
    client_ca: Option<&Path>,
    provider: &Arc<CryptoProvider>,
) -> Result<ServerConfig, TlsError> {
    let provider = &Arc::new(restrict_cipher_suites(provider));
    if provider.cipher_suites.is_empty() {
        return Err(TlsError::Config(
            "the crypto provider offers none of the allowed cipher suites".into(),
        ));
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let ca_err = |message: String| TlsError::ClientCa {
                path: path.to_owned(),
                message,
            };
            let pem = std::fs::read(path).map_err(|e| ca_err(e.to_string()))?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| ca_err(e.to_string()))?;
                roots.add(cert).map_err(|e| ca_err(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(ca_err("no PEM certificate in the file".into()));
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| ca_err(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// What identifies a version of the files: modification time and length.
type Stamp = Option<(SystemTime, u64, SystemTime, u64)>;

fn stamp(files: &CertFiles) -> Stamp {
    let c = std::fs::metadata(&files.cert).ok()?;
    let k = std::fs::metadata(&files.key).ok()?;
    Some((c.modified().ok()?, c.len(), k.modified().ok()?, k.len()))
}

/// Polls the files every `interval` and swaps in the new pair when they
/// change (cert-manager and kubelet secret volumes replace them in place).
/// A pair that fails to load is logged and the current certificate kept;
/// the next change is tried again. Runs until the task is dropped.
pub async fn watch(
    resolver: Arc<CertResolver>,
    files: CertFiles,
    provider: Arc<CryptoProvider>,
    interval: Duration,
) {
    let mut last = stamp(&files);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = stamp(&files);
        if now == last || now.is_none() {
            continue;
        }
        last = now;
        match load_pair(&files, &provider) {
            Ok(key) => {
                resolver.set(key);
                tracing::info!(
                    cert = %files.cert.display(),
                    key = %files.key.display(),
                    "reloaded the TLS certificate; new connections use it"
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS certificate changed but cannot be loaded; keeping the current one");
            }
        }
    }
}

/// A generated certificate for `localhost`, with the CA that signed it.
pub struct SelfSigned {
    pub key: CertifiedKey,
    /// PEM of the CA to trust (`curl --cacert`).
    pub ca_pem: String,
    /// Where the CA was written.
    pub ca_path: PathBuf,
}

/// Generates an ECDSA P-256 CA and a server certificate for `localhost`,
/// `127.0.0.1` and `::1`, keeps the keys in memory, and writes the CA
/// certificate to `dir/ca.pem`.
///
/// # Errors
/// Key generation fails, or the CA cannot be written.
pub fn self_signed(dir: &Path, provider: &CryptoProvider) -> Result<SelfSigned, TlsError> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let err = |e: rcgen::Error| TlsError::SelfSigned(e.to_string());
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "winadmit self-signed CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(err)?).map_err(err)?;
    let mut leaf = CertificateParams::new(vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ])
    .map_err(err)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let leaf_key = KeyPair::generate().map_err(err)?;
    let cert = leaf.signed_by(&leaf_key, &ca).map_err(err)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let key = certified_key(vec![cert.der().clone()], key, provider).map_err(|e| match e {
        KeyProblem::Unsupported(m) | KeyProblem::Mismatch(m) => TlsError::SelfSigned(m),
    })?;
    let ca_pem = ca.pem();
    let ca_path = dir.join("ca.pem");
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&ca_path, &ca_pem))
        .map_err(|source| TlsError::WriteCa {
            path: ca_path.clone(),
            source,
        })?;
    Ok(SelfSigned {
        key,
        ca_pem,
        ca_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_modern_aead_suites_with_forward_secrecy() {
        let p = restrict_cipher_suites(&rustls::crypto::ring::default_provider());
        assert!(!p.cipher_suites.is_empty());
        for s in &p.cipher_suites {
            let name = format!("{:?}", s.suite());
            assert!(
                (name.starts_with("TLS13_") || name.starts_with("TLS_ECDHE_"))
                    && (name.contains("_GCM_") || name.contains("CHACHA20_POLY1305")),
                "{name}"
            );
        }
    }
}
