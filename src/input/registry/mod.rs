//! Looks images up in their registries: each reference's digest and the
//! platforms it publishes, from its image index, or from a single
//! manifest's config. The client is `oci-client` (the OCI distribution
//! protocol, with Docker Hub's token flow); the configuration types are
//! `oci-spec`'s.
//!
//! An entry point resolves the images it is about to judge, then passes the
//! [`KnownImages`] to the decision: the decision itself never waits on a
//! registry. Fail-open: a lookup that fails or passes its deadline is an
//! [`Lookup::Unknown`] with the reason, never an error of the command.
//!
//! The credentials lookups use, by registry host, are in `credentials`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt as _;
use oci_client::Reference;
use oci_client::manifest::OciManifest;

use crate::decision::images::{ImageFacts, KnownImages, Lookup, Platform};

mod credentials;
mod fetch;

pub use credentials::Credentials;
pub use fetch::{CONCURRENT_REQUESTS, MAX_CONFIG_BYTES, MAX_MANIFEST_BYTES, UNREACHABLE};

/// The default deadline of one lookup.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);
/// Lookups in flight at once.
pub const CONCURRENT_LOOKUPS: usize = 8;
/// Distinct platforms kept of one image index (the rest are dropped): an
/// index lists each platform once, and Windows images publish a handful.
pub const MAX_PLATFORMS: usize = 64;

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Registries (`host[:port]` as images name them) reached over plain
    /// HTTP. Every other registry is reached over HTTPS.
    pub insecure: Vec<String>,
    /// A Docker `config.json` (`auths`): credentials per registry.
    /// Registries it does not name are accessed anonymously.
    pub config: Option<PathBuf>,
    /// PEM files of CAs to trust besides the system's.
    pub ca_files: Vec<PathBuf>,
    /// The deadline of one lookup (connection, token, manifest and config).
    pub deadline: Option<Duration>,
    /// Mirrors asked first, in order, for the images of a registry.
    pub mirrors: Vec<Mirror>,
    /// Hosts (`host[:port]`) a registry's token realm may name over plain
    /// HTTP, besides the registry's own host and port (`--registry-token-realm`).
    pub token_realms: Vec<String>,
}

/// A registry mirror (`--registry-mirror HOST=MIRROR`), as containerd's
/// `hosts.toml` configures one: the images of `upstream` are looked up at
/// `host` (under `prefix`, when given) first, and at `upstream` when the
/// mirror fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// The registry mirrored, as [`Reference::resolve_registry`] names it
    /// (`index.docker.io` for Docker Hub).
    pub upstream: String,
    /// `host[:port]` of the mirror.
    pub host: String,
    /// A path the mirror serves the upstream's repositories under
    /// (`dockerhub` in `harbor.example/dockerhub`).
    pub prefix: Option<String>,
    /// Reached over plain HTTP (`http://` in the flag).
    pub plain_http: bool,
}

impl std::str::FromStr for Mirror {
    type Err = String;

    /// `docker.io=mirror.example:5000`, `registry.example=harbor.example/proxy`,
    /// `registry.example=http://10.0.0.5:5000`.
    fn from_str(text: &str) -> Result<Self, String> {
        let expected = "expected HOST=MIRROR, e.g. docker.io=mirror.example:5000 or registry.example=http://10.0.0.5:5000/cache";
        let (upstream, mirror) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: {expected}"))?;
        let upstream = upstream.trim();
        let (plain_http, rest) = match mirror.trim() {
            m if m.starts_with("http://") => (true, &m["http://".len()..]),
            m if m.starts_with("https://") => (false, &m["https://".len()..]),
            m => (false, m),
        };
        let (host, prefix) = match rest.split_once('/') {
            Some((host, prefix)) => (host, Some(prefix.trim_matches('/'))),
            None => (rest, None),
        };
        let valid = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
        };
        if !valid(upstream) || !valid(host) {
            return Err(format!("{text:?}: {expected}"));
        }
        let upstream = if is_docker_hub(upstream) {
            "index.docker.io".to_owned()
        } else {
            upstream.to_owned()
        };
        Ok(Self {
            upstream,
            host: host.to_owned(),
            prefix: prefix.filter(|p| !p.is_empty()).map(str::to_owned),
            plain_http,
        })
    }
}

impl Mirror {
    /// The reference of `image` at this mirror: the same repository (under
    /// the prefix), tag and digest.
    fn reference(&self, image: &Reference) -> Reference {
        let repository = match &self.prefix {
            Some(p) => format!("{p}/{}", image.repository()),
            None => image.repository().to_owned(),
        };
        match (image.tag(), image.digest()) {
            (Some(tag), Some(digest)) => Reference::with_tag_and_digest(
                self.host.clone(),
                repository,
                tag.to_owned(),
                digest.to_owned(),
            ),
            (None, Some(digest)) => {
                Reference::with_digest(self.host.clone(), repository, digest.to_owned())
            }
            (tag, None) => Reference::with_tag(
                self.host.clone(),
                repository,
                tag.unwrap_or("latest").to_owned(),
            ),
        }
    }
}

/// The registry host `image` is pulled from, as [`Reference::resolve_registry`]
/// names it (`index.docker.io` for Docker Hub), or `None` for a reference
/// that does not parse.
#[must_use]
pub fn registry_of(image: &str) -> Option<String> {
    Reference::try_from(image.trim())
        .ok()
        .map(|r| r.resolve_registry().to_owned())
}

/// Docker Hub's names.
fn is_docker_hub(registry: &str) -> bool {
    matches!(
        registry,
        "index.docker.io" | "docker.io" | "registry-1.docker.io"
    )
}

/// A registry could not be set up (before any lookup).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("cannot read registry credentials {path}: {source}")]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "invalid registry credentials {path}: {message} (expected a Docker config.json: {{\"auths\": {{\"<registry>\": {{\"auth\": \"<base64 user:password>\"}}}}}})"
    )]
    Config { path: PathBuf, message: String },
    #[error("cannot read registry CA {path}: {source}")]
    ReadCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid registry CA {path}: {message}")]
    Ca { path: PathBuf, message: String },
    #[error("{0}")]
    Client(String),
}

/// Looks images up.
pub struct Resolver {
    fetcher: fetch::Fetcher,
    credentials: Credentials,
    deadline: Duration,
    /// Mirrors by the registry they mirror, in the order given.
    mirrors: BTreeMap<String, Vec<Mirror>>,
}

impl Resolver {
    /// # Errors
    /// The credentials or a CA file cannot be read.
    pub fn new(options: &RegistryOptions) -> Result<Self, RegistryError> {
        // reqwest is built without a crypto provider of its own: the
        // process's is ring, as for the webhook's TLS.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let credentials = match &options.config {
            Some(path) => Credentials::read(path)?,
            None => Credentials::default(),
        };
        let mut roots = Vec::new();
        for path in &options.ca_files {
            let data = std::fs::read(path).map_err(|source| RegistryError::ReadCa {
                path: path.clone(),
                source,
            })?;
            let certs =
                reqwest::Certificate::from_pem_bundle(&data).map_err(|e| RegistryError::Ca {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            roots.extend(certs);
        }
        let deadline = options.deadline.unwrap_or(DEFAULT_DEADLINE);
        let mut insecure = options.insecure.clone();
        let mut mirrors: BTreeMap<String, Vec<Mirror>> = BTreeMap::new();
        for m in &options.mirrors {
            if m.plain_http && !insecure.contains(&m.host) {
                insecure.push(m.host.clone());
            }
            mirrors
                .entry(m.upstream.clone())
                .or_default()
                .push(m.clone());
        }
        let setup = fetch::Setup {
            insecure,
            realms: options.token_realms.clone(),
            roots,
            deadline,
            requests: std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT_REQUESTS)),
        };
        Ok(Self {
            fetcher: setup.fetcher().map_err(RegistryError::Client)?,
            credentials,
            deadline,
            mirrors,
        })
    }

    /// A resolver that asks with `first` (a pod's `imagePullSecrets`)
    /// where they name the registry, and with this one's credentials
    /// elsewhere. It has a client and tokens of its own, which never serve
    /// a lookup made with other credentials; its requests count against
    /// the same process-wide cap.
    #[must_use]
    pub fn with_credentials(&self, first: Credentials) -> Self {
        let mut credentials = first;
        credentials.absorb(self.credentials.clone());
        Self {
            fetcher: self.fetcher.without_tokens(),
            credentials,
            deadline: self.deadline,
            mirrors: self.mirrors.clone(),
        }
    }

    /// Looks every image up, [`CONCURRENT_LOOKUPS`] at a time.
    pub async fn resolve_all(&self, images: &BTreeSet<String>) -> KnownImages {
        let lookups = futures::stream::iter(images.iter().cloned())
            .map(|image| async move {
                let lookup = self.lookup(&image).await;
                (image, lookup)
            })
            .buffer_unordered(CONCURRENT_LOOKUPS)
            .collect::<Vec<_>>()
            .await;
        let mut known = KnownImages::default();
        for (image, lookup) in lookups {
            known.insert(image, lookup);
        }
        known
    }

    /// Looks one image up, within the deadline. Never fails: a failure is
    /// [`Lookup::Unknown`] with the reason.
    pub async fn lookup(&self, image: &str) -> Lookup {
        self.lookup_explained(image).await.0
    }

    /// [`Resolver::lookup`], and for a failure the words for the log: the
    /// lookup says only the failure's class (an unreachable registry, a
    /// status, a size); the log also says why a registry was unreachable.
    pub async fn lookup_explained(&self, image: &str) -> (Lookup, String) {
        let reference = match Reference::try_from(image.trim()) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("not an image reference: {e}");
                return (Lookup::Unknown(why.clone()), why);
            }
        };
        let registry = reference.resolve_registry().to_owned();
        let end = tokio::time::Instant::now() + self.deadline;
        let silent = |within: Duration| {
            fetch::Failure::Unreachable(format!("no answer within {:.1}s", within.as_secs_f64()))
        };
        // Mirrors first, in order, each within half the time left; then
        // the registry itself, within the rest.
        let mut mirrors_failed: Vec<(String, fetch::Failure)> = Vec::new();
        for mirror in self.mirrors.get(&registry).into_iter().flatten() {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            let at = mirror.reference(&reference);
            match tokio::time::timeout(left / 2, self.facts(&at, &mirror.host)).await {
                Ok(Ok(facts)) => return (Lookup::Known(facts), String::new()),
                Ok(Err(why)) => mirrors_failed.push((mirror.host.clone(), why)),
                Err(_) => mirrors_failed.push((mirror.host.clone(), silent(left / 2))),
            }
        }
        let failure = match tokio::time::timeout_at(end, self.facts(&reference, &registry)).await {
            Ok(Ok(facts)) => return (Lookup::Known(facts), String::new()),
            Ok(Err(why)) => why,
            Err(_) => silent(self.deadline),
        };
        let words = |cause: fn(&fetch::Failure) -> String| {
            let after = if mirrors_failed.is_empty() {
                String::new()
            } else {
                let each: Vec<String> = mirrors_failed
                    .iter()
                    .map(|(host, why)| format!("mirror {host}: {}", cause(why)))
                    .collect();
                format!(" (after {})", each.join("; "))
            };
            format!("registry {registry}: {}{after}", cause(&failure))
        };
        (
            Lookup::Unknown(words(fetch::Failure::to_string)),
            words(fetch::Failure::cause),
        )
    }

    async fn facts(
        &self,
        reference: &Reference,
        registry: &str,
    ) -> Result<ImageFacts, fetch::Failure> {
        let auth = self.credentials.auth_for(registry);
        let (manifest, digest) = self.fetcher.manifest(reference, &auth).await?;
        let manifest: OciManifest =
            serde_json::from_slice(&manifest).map_err(|e| fetch::Failure::Malformed {
                what: "manifest",
                why: fetch::json_error(&e),
            })?;
        let mut platforms = match manifest {
            OciManifest::ImageIndex(index) => index
                .manifests
                .iter()
                .filter_map(|m| m.platform.as_ref())
                .map(|p| Platform {
                    os: p.os.to_string(),
                    architecture: p.architecture.to_string(),
                    variant: p.variant.clone().filter(|v| !v.is_empty()),
                    os_version: p.os_version.clone().filter(|v| !v.is_empty()),
                    os_features: p.os_features.clone().unwrap_or_default(),
                })
                // Attestations and other artefacts are `unknown/unknown`.
                .filter(|p| p.os != "unknown")
                .collect::<Vec<_>>(),
            OciManifest::Image(image) => {
                if usize::try_from(image.config.size).unwrap_or(usize::MAX) > MAX_CONFIG_BYTES {
                    return Err(fetch::Failure::TooLarge {
                        what: "image config",
                        limit: MAX_CONFIG_BYTES,
                    });
                }
                let config = self
                    .fetcher
                    .blob(reference, &auth, &image.config.digest, MAX_CONFIG_BYTES)
                    .await?;
                let config: oci_spec::image::ImageConfiguration =
                    serde_json::from_slice(&config).map_err(|e| fetch::Failure::Malformed {
                        what: "image config",
                        why: fetch::json_error(&e),
                    })?;
                vec![Platform {
                    os: config.os().to_string(),
                    architecture: config.architecture().to_string(),
                    variant: config.variant().clone().filter(|v| !v.is_empty()),
                    os_version: config.os_version().clone().filter(|v| !v.is_empty()),
                    os_features: config.os_features().clone().unwrap_or_default(),
                }]
            }
        };
        // Each platform once, at most MAX_PLATFORMS: what the facts cache
        // keeps of an image is bounded whatever its index lists.
        let mut kept: Vec<Platform> = Vec::new();
        for p in platforms.drain(..) {
            if kept.len() < MAX_PLATFORMS && !kept.contains(&p) {
                kept.push(p);
            }
        }
        let platforms = kept;
        if platforms.is_empty() {
            return Err(fetch::Failure::Malformed {
                what: "image index",
                why: "it lists no platform".to_owned(),
            });
        }
        Ok(ImageFacts {
            digest: Some(digest).filter(|d| crate::decision::images::is_digest(d)),
            platforms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::secrets::RegistryAuth;

    #[test]
    fn docker_config_credentials_by_registry() {
        let creds = Credentials::parse(
            r#"{"auths": {
                "https://index.docker.io/v1/": {"auth": "dXNlcjpwYXNz"},
                "registry.example:5000": {"username": "u", "password": "p"}
            }}"#,
        )
        .unwrap();
        assert!(
            matches!(creds.auth_for("index.docker.io"), RegistryAuth::Basic(u, p) if u == "user" && p == "pass")
        );
        assert!(
            matches!(creds.auth_for("registry.example:5000"), RegistryAuth::Basic(u, _) if u == "u")
        );
        assert!(matches!(
            creds.auth_for("other.example"),
            RegistryAuth::Anonymous
        ));
        for (text, want) in [
            (r#"{"auths": {"r": {"auth": "!!"}}}"#, "auths[\"r\"].auth"),
            (r#"{"auths": {"r": {"auth": "dXNlcg=="}}}"#, "no `:`"),
            (r#"{"auths": {"r": {"username": "u"}}}"#, "needs `auth`"),
        ] {
            let err = Credentials::parse(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn mirrors_parse_and_map_references() {
        let m: Mirror = "docker.io=mirror.example:5000".parse().unwrap();
        assert_eq!(m.upstream, "index.docker.io");
        assert_eq!(
            (m.host.as_str(), m.prefix.as_deref(), m.plain_http),
            ("mirror.example:5000", None, false)
        );
        let nginx = Reference::try_from("nginx:1.27").unwrap();
        assert_eq!(
            m.reference(&nginx).to_string(),
            "mirror.example:5000/library/nginx:1.27"
        );
        let m: Mirror = "registry.example=http://10.0.0.5:5000/cache/"
            .parse()
            .unwrap();
        assert_eq!(m.upstream, "registry.example");
        assert_eq!(
            (m.host.as_str(), m.prefix.as_deref(), m.plain_http),
            ("10.0.0.5:5000", Some("cache"), true)
        );
        let pinned = Reference::try_from(
            "registry.example/team/app@sha256:4f2c1b0e5d6a7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708",
        )
        .unwrap();
        assert_eq!(
            m.reference(&pinned).to_string(),
            "10.0.0.5:5000/cache/team/app@sha256:4f2c1b0e5d6a7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708"
        );
        for bad in [
            "mirror.example",
            "=mirror.example",
            "docker.io=",
            "docker.io=http://",
            "a b=c",
        ] {
            let err = bad.parse::<Mirror>().unwrap_err();
            assert!(err.contains("expected HOST=MIRROR"), "{bad}: {err}");
        }
    }
}
