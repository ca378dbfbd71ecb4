//! Registry credentials by host: read from a Docker `config.json` or an
//! `imagePullSecrets` Secret (the formats the kubelet reads), merged, and
//! narrowed to one registry.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;

use oci_client::secrets::RegistryAuth;

use super::{RegistryError, is_docker_hub};

/// The credentials of a Docker `config.json`, by registry host.
#[derive(Debug, Clone, Default)]
pub struct Credentials(BTreeMap<String, (String, String)>);

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Credentials {
    /// Reads the `auths` of a Docker `config.json`, the format the kubelet
    /// reads for `imagePullSecrets` (`.dockerconfigjson`).
    ///
    /// # Errors
    /// The file cannot be read, or an entry is malformed (the error names
    /// the registry key).
    pub fn read(path: &Path) -> Result<Self, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::ReadConfig {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|message| RegistryError::Config {
            path: path.to_owned(),
            message,
        })
    }

    /// # Errors
    /// What is wrong, naming the entry.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: DockerConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        for (key, entry) in config.auths {
            let pair = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                        .ok_or_else(|| {
                            format!("auths[{key:?}].auth: not base64 of user:password")
                        })?;
                    let (user, password) = decoded.split_once(':').ok_or_else(|| {
                        format!("auths[{key:?}].auth: no `:` between user and password")
                    })?;
                    (user.to_owned(), password.to_owned())
                }
                (None, Some(user), Some(password)) => (user, password),
                _ => {
                    return Err(format!(
                        "auths[{key:?}]: needs `auth`, or `username` and `password`"
                    ));
                }
            };
            out.insert(host_of(&key), pair);
        }
        Ok(Self(out))
    }

    /// The credentials of an `imagePullSecrets` Secret as the API server
    /// returns it ([`Self::from_secret`] on its type and data).
    ///
    /// # Errors
    /// As [`Self::from_secret`].
    pub fn of_secret(secret: k8s_openapi::api::core::v1::Secret) -> Result<Self, String> {
        let data: BTreeMap<String, Vec<u8>> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        Self::from_secret(secret.type_.as_deref().unwrap_or_default(), &data)
    }

    /// The credentials of an `imagePullSecrets` Secret: its type
    /// (`kubernetes.io/dockerconfigjson` or `kubernetes.io/dockercfg`) and
    /// its decoded `data`.
    ///
    /// # Errors
    /// Another type, a missing key, or a malformed entry.
    pub fn from_secret(kind: &str, data: &BTreeMap<String, Vec<u8>>) -> Result<Self, String> {
        let (key, wrap) = match kind {
            "kubernetes.io/dockerconfigjson" => (".dockerconfigjson", false),
            "kubernetes.io/dockercfg" => (".dockercfg", true),
            other => {
                return Err(format!(
                    "type {other:?}: not kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg"
                ));
            }
        };
        let bytes = data.get(key).ok_or_else(|| format!("no data[{key:?}]"))?;
        let text = std::str::from_utf8(bytes).map_err(|_| format!("data[{key:?}]: not UTF-8"))?;
        if wrap {
            // `.dockercfg` is the `auths` map alone.
            let map: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("data[{key:?}]: {e}"))?;
            Self::parse(&serde_json::json!({ "auths": map }).to_string())
        } else {
            Self::parse(text)
        }
        .map_err(|e| format!("data[{key:?}]: {e}"))
    }

    /// The user and password for `registry`, if named.
    fn entry(&self, registry: &str) -> Option<&(String, String)> {
        if is_docker_hub(registry) {
            ["index.docker.io", "docker.io", "registry-1.docker.io"]
                .iter()
                .find_map(|k| self.0.get(*k))
        } else {
            self.0.get(registry)
        }
    }

    /// The credentials for `registry` (as `Reference::resolve_registry`
    /// names it), else anonymous access.
    #[must_use]
    pub fn auth_for(&self, registry: &str) -> RegistryAuth {
        match self.entry(registry) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    /// Only the credentials for `registry`, when these name it.
    #[must_use]
    pub fn only(&self, registry: &str) -> Option<Self> {
        let pair = self.entry(registry)?.clone();
        Some(Self(BTreeMap::from([(registry.to_owned(), pair)])))
    }

    /// Adds the registries `other` names that these do not (the first
    /// Secret naming a registry gives its credentials).
    pub fn absorb(&mut self, other: Self) {
        for (registry, pair) in other.0 {
            self.0.entry(registry).or_insert(pair);
        }
    }

    /// Names no registry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A key for these credentials, hashed with `state` (a process's own
    /// random keys): the same credentials give the same key, so facts
    /// looked up with them are shared only with lookups that hold them.
    #[must_use]
    pub fn identity(&self, state: &std::hash::RandomState) -> u64 {
        use std::hash::BuildHasher as _;
        state.hash_one(&self.0)
    }
}

/// `https://index.docker.io/v1/` -> `index.docker.io`.
fn host_of(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key).to_owned()
}
