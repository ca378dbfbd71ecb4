//! The requests of a lookup, over the OCI distribution protocol: a
//! manifest or image index, an image config blob, and the token a
//! registry's `WWW-Authenticate: Bearer` challenge asks for.
//!
//! What a registry sends back is bounded and never repeated:
//!
//! - every body is read as it streams, up to a cap ([`MAX_MANIFEST_BYTES`],
//!   [`MAX_CONFIG_BYTES`], [`MAX_TOKEN_BYTES`]); `Content-Length` is not
//!   trusted, the read stops at the cap whatever the header says;
//! - an error answer is named by its status class, its body is not read;
//! - a failure to connect, a TLS failure and silence are one
//!   [`Failure::Unreachable`], whose cause goes to the log only;
//! - a token realm is asked only over HTTPS, on the registry's own host and port, or
//!   on a host `--registry-token-realm` names: a registry cannot make the
//!   server GET an arbitrary plain-HTTP address;
//! - requests in flight are capped for the whole process
//!   ([`CONCURRENT_REQUESTS`]), whatever the number of images, registries
//!   or credentials.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use sha2::Digest as _;
use tokio::sync::Semaphore;

/// The largest manifest or image index read. The distribution registry
/// accepts manifests up to 4 MiB; an index of every platform Windows and
/// Linux images publish is a few kilobytes.
pub const MAX_MANIFEST_BYTES: usize = 1 << 20;
/// The largest image config read (a config is a few kilobytes).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;
/// The largest token answer read.
pub const MAX_TOKEN_BYTES: usize = 64 << 10;
/// Registry requests in flight at once, in the whole process.
pub const CONCURRENT_REQUESTS: usize = 32;
/// Authorizations kept (per registry and repository); all forgotten past it.
const MAX_TOKENS: usize = 1024;

/// The manifest types asked for, indexes first.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.v2+json";

/// Why a request failed: a class a caller may see. Nothing the registry
/// wrote is kept, except in [`Failure::Unreachable`]'s cause, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection, a TLS failure, or no answer in time. The cause is
    /// for the log ([`Failure::cause`]), never for a caller.
    Unreachable(String),
    /// An answer other than 200.
    Status(u16),
    /// A body longer than the cap.
    TooLarge { what: &'static str, limit: usize },
    /// A body that is not what was asked for.
    Malformed { what: &'static str, why: String },
    /// A body whose digest is not the one asked for.
    Digest { what: &'static str },
    /// A token realm not on HTTPS, not on the registry's host and not
    /// allowed by `--registry-token-realm`.
    Realm,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreachable(_) => f.write_str(UNREACHABLE),
            Self::Status(401) => {
                f.write_str("401 Unauthorized: give credentials with --registry-config")
            }
            Self::Status(403) => f.write_str("403 Denied: the credentials may not pull this image"),
            Self::Status(404) => f.write_str("404: no such image or tag"),
            Self::Status(429) => f.write_str("429 Too Many Requests: the registry's rate limit"),
            Self::Status(code @ 500..=599) => write!(f, "HTTP {code}: a server error"),
            Self::Status(code) => write!(f, "HTTP {code}: not an answer to a pull"),
            Self::TooLarge { what, limit } => {
                write!(f, "the {what} is larger than the {limit} bytes read")
            }
            Self::Malformed { what, why } => write!(f, "malformed {what}: {why}"),
            Self::Digest { what } => write!(f, "the {what} does not have the digest asked for"),
            Self::Realm => f.write_str(
                "the token realm is plain HTTP elsewhere than the registry's host and port: not asked (allow it with --registry-token-realm)",
            ),
        }
    }
}

/// What a caller sees of every failure to reach a registry.
pub const UNREACHABLE: &str = "unreachable: no connection, TLS session or answer in time";

impl Failure {
    /// The log's words: the cause of an unreachable registry too.
    #[must_use]
    pub fn cause(&self) -> String {
        match self {
            Self::Unreachable(cause) => format!("unreachable: {cause}"),
            other => other.to_string(),
        }
    }

    fn unreachable(e: &reqwest::Error) -> Self {
        let mut why = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            why = s.to_string();
            source = s.source();
        }
        Self::Unreachable(why)
    }
}

/// A JSON parse error without the bytes it quotes: the class and the
/// position.
pub fn json_error(e: &serde_json::Error) -> String {
    let class = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "not the expected fields",
        serde_json::error::Category::Eof => "cut short",
    };
    format!("{class} at line {} column {}", e.line(), e.column())
}

/// Makes the requests of lookups with one set of credentials.
pub struct Fetcher {
    http: reqwest::Client,
    /// Registries reached over plain HTTP.
    insecure: Vec<String>,
    /// Hosts a plain-HTTP token realm may name besides the registry's.
    realms: Vec<String>,
    /// Requests in flight, shared by every fetcher of the process.
    requests: Arc<Semaphore>,
    /// The `Authorization` last answered to a challenge (a Bearer token,
    /// or Basic credentials), by registry and repository.
    tokens: Mutex<HashMap<(String, String), String>>,
}

/// How [`Fetcher`]s reach registries.
pub struct Setup {
    pub insecure: Vec<String>,
    pub realms: Vec<String>,
    pub roots: Vec<reqwest::Certificate>,
    pub deadline: Duration,
    pub requests: Arc<Semaphore>,
}

impl Setup {
    /// # Errors
    /// The HTTP client cannot be built (its TLS configuration).
    pub fn fetcher(&self) -> Result<Fetcher, String> {
        let http = reqwest::Client::builder()
            .tls_certs_merge(self.roots.iter().cloned())
            .connect_timeout(self.deadline)
            .read_timeout(self.deadline)
            .timeout(self.deadline)
            .pool_max_idle_per_host(2)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("winadmit/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot set up the registry client: {e}"))?;
        Ok(Fetcher {
            http,
            insecure: self.insecure.clone(),
            realms: self.realms.clone(),
            requests: Arc::clone(&self.requests),
            tokens: Mutex::new(HashMap::new()),
        })
    }
}

impl Fetcher {
    /// The same client, without the tokens this one holds (for other
    /// credentials).
    #[must_use]
    pub fn without_tokens(&self) -> Self {
        Self {
            http: self.http.clone(),
            insecure: self.insecure.clone(),
            realms: self.realms.clone(),
            requests: Arc::clone(&self.requests),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    fn scheme(&self, host: &str) -> &'static str {
        if self.insecure.iter().any(|h| h == host) {
            "http"
        } else {
            "https"
        }
    }

    /// The manifest or index `reference` names and its digest (of the
    /// bytes read, checked against the reference's own).
    ///
    /// # Errors
    /// The request fails, or the answer is too large or not the digest.
    pub async fn manifest(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<(Vec<u8>, String), Failure> {
        let host = reference.resolve_registry();
        let tag = reference
            .digest()
            .or_else(|| reference.tag())
            .unwrap_or("latest");
        let url = format!(
            "{}://{host}/v2/{}/manifests/{tag}",
            self.scheme(host),
            reference.repository()
        );
        let body = self
            .get(
                reference,
                auth,
                &url,
                Some(MANIFEST_TYPES),
                "manifest",
                MAX_MANIFEST_BYTES,
            )
            .await?;
        let digest = sha256(&body);
        match reference.digest() {
            Some(want) if want.starts_with("sha256:") && want != digest => {
                Err(Failure::Digest { what: "manifest" })
            }
            _ => Ok((body, digest)),
        }
    }

    /// The blob `digest` of `reference`'s repository, up to `limit` bytes.
    ///
    /// # Errors
    /// The request fails, or the answer is too large or not the digest.
    pub async fn blob(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        digest: &str,
        limit: usize,
    ) -> Result<Vec<u8>, Failure> {
        let host = reference.resolve_registry();
        let url = format!(
            "{}://{host}/v2/{}/blobs/{digest}",
            self.scheme(host),
            reference.repository()
        );
        let body = self
            .get(reference, auth, &url, None, "image config", limit)
            .await?;
        if digest.starts_with("sha256:") && sha256(&body) != digest {
            return Err(Failure::Digest {
                what: "image config",
            });
        }
        Ok(body)
    }

    /// GET `url`, answering one authentication challenge.
    async fn get(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        url: &str,
        accept: Option<&str>,
        what: &'static str,
        limit: usize,
    ) -> Result<Vec<u8>, Failure> {
        let key = (
            reference.resolve_registry().to_owned(),
            reference.repository().to_owned(),
        );
        let mut authorization = match auth {
            RegistryAuth::Bearer(token) => Some(format!("Bearer {token}")),
            _ => self
                .tokens
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key)
                .cloned(),
        };
        for attempt in 0..2 {
            let mut request = self.http.get(url);
            if let Some(a) = accept {
                request = request.header(reqwest::header::ACCEPT, a);
            }
            if let Some(a) = &authorization {
                request = request.header(reqwest::header::AUTHORIZATION, a);
            }
            match self.exchange(request, what, limit).await? {
                Answer::Body(body) => return Ok(body),
                Answer::Challenge(challenge) if attempt == 0 => {
                    let answer = self.authorize(reference, auth, &challenge).await?;
                    // Kept for the next request to this repository (this
                    // fetcher's credentials only): one request, not two.
                    let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
                    if tokens.len() >= MAX_TOKENS {
                        tokens.clear();
                    }
                    tokens.insert(key.clone(), answer.clone());
                    drop(tokens);
                    authorization = Some(answer);
                }
                Answer::Challenge(_) => return Err(Failure::Status(401)),
            }
        }
        Err(Failure::Status(401))
    }

    /// The `Authorization` a challenge asks for: Basic with the
    /// credentials, or a Bearer token from its realm.
    async fn authorize(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        challenge: &str,
    ) -> Result<String, Failure> {
        let basic = match auth {
            RegistryAuth::Basic(user, password) => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )),
            _ => None,
        };
        let Some((realm, service)) = bearer(challenge) else {
            // A Basic challenge, or none we know.
            return basic.ok_or(Failure::Status(401));
        };
        let realm = reqwest::Url::parse(&realm).map_err(|_| Failure::Status(401))?;
        // The registry's own host and port, as its scheme gives them.
        let registry = reference.resolve_registry();
        let home = reqwest::Url::parse(&format!("{}://{registry}/", self.scheme(registry)))
            .ok()
            .map(|u| (u.host_str().map(str::to_owned), u.port_or_known_default()));
        let realm_host = realm.host_str().unwrap_or_default();
        let named = |h: &String| {
            h == realm_host
                || realm
                    .port()
                    .is_some_and(|p| *h == format!("{realm_host}:{p}"))
        };
        let at_home = home
            == Some((
                realm.host_str().map(str::to_owned),
                realm.port_or_known_default(),
            ));
        if realm.scheme() != "https" && !at_home && !self.realms.iter().any(named) {
            tracing::warn!(
                registry = reference.resolve_registry(),
                realm = %realm,
                "registry: token realm refused (plain HTTP elsewhere than the registry's host and port; --registry-token-realm allows it)"
            );
            return Err(Failure::Realm);
        }
        let mut request = self.http.get(realm).query(&[(
            "scope",
            format!("repository:{}:pull", reference.repository()),
        )]);
        if let Some(s) = service {
            request = request.query(&[("service", s)]);
        }
        if let Some(b) = &basic {
            request = request.header(reqwest::header::AUTHORIZATION, b);
        }
        let body = match self.exchange(request, "token", MAX_TOKEN_BYTES).await? {
            Answer::Body(body) => body,
            Answer::Challenge(_) => return Err(Failure::Status(401)),
        };
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token: Token = serde_json::from_slice(&body).map_err(|e| Failure::Malformed {
            what: "token",
            why: json_error(&e),
        })?;
        token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}"))
            .ok_or(Failure::Malformed {
                what: "token",
                why: "no token".to_owned(),
            })
    }

    /// Sends `request` and reads its body up to `limit`, within the
    /// process's cap of requests in flight.
    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
        what: &'static str,
        limit: usize,
    ) -> Result<Answer, Failure> {
        let _permit = self
            .requests
            .acquire()
            .await
            .map_err(|_| Failure::Unreachable("shutting down".to_owned()))?;
        let mut response = request.send().await.map_err(|e| Failure::unreachable(&e))?;
        let status = response.status().as_u16();
        if status == 401 {
            let challenge = response
                .headers()
                .get_all(reqwest::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect::<Vec<_>>()
                .join(", ");
            return Ok(Answer::Challenge(challenge));
        }
        if status != 200 {
            // The body is the registry's words: not read, not repeated.
            return Err(Failure::Status(status));
        }
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(Failure::TooLarge { what, limit });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| Failure::unreachable(&e))?
        {
            if body.len() + chunk.len() > limit {
                return Err(Failure::TooLarge { what, limit });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer::Body(body))
    }
}

enum Answer {
    Body(Vec<u8>),
    /// 401 with its `WWW-Authenticate` values.
    Challenge(String),
}

/// The realm and service of a Bearer challenge.
fn bearer(challenge: &str) -> Option<(String, Option<String>)> {
    http_auth::ChallengeParser::new(challenge)
        .filter_map(Result::ok)
        .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        .and_then(|c| {
            let param = |name: &str| {
                c.params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            Some((param("realm")?, param("service")))
        })
}

/// `sha256:<hex>` of `data`.
fn sha256(data: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("sha256:");
    for b in sha2::Sha256::digest(data) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges() {
        assert_eq!(
            bearer(r#"Bearer realm="https://auth.example/token",service="registry.example""#),
            Some((
                "https://auth.example/token".to_owned(),
                Some("registry.example".to_owned())
            ))
        );
        assert_eq!(bearer(r#"Basic realm="x""#), None);
    }

    #[test]
    fn failures_never_repeat_the_registry() {
        let refused = Failure::Unreachable("Connection refused (os error 111)".to_owned());
        let eof = Failure::Unreachable(
            "peer closed connection without sending TLS close_notify".to_owned(),
        );
        assert_eq!(refused.to_string(), eof.to_string());
        assert!(refused.cause().contains("refused"));
        let e = serde_json::from_slice::<Vec<u8>>(b"{\"secret\": \"alice,bob\"}").unwrap_err();
        assert!(!json_error(&e).contains("alice"), "{}", json_error(&e));
    }
}
