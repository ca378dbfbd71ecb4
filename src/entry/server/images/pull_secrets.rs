//! `--registry-pull-secrets`: the credentials of the Secrets a pod names in
//! `imagePullSecrets`, read with a `get` in its namespace and kept briefly,
//! and a registry resolver per credential.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::input::registry::Resolver;

/// `--registry-pull-secrets`: the Secrets a pod names in
/// `imagePullSecrets`, read with a `get` in the pod's namespace (kept
/// briefly), and a resolver per credential.
pub(super) struct PullSecrets {
    client: kube::Client,
    /// `(namespace, name)` -> the Secret's credentials, or why not.
    secrets:
        moka::future::Cache<(String, String), Result<crate::input::registry::Credentials, String>>,
    /// Credential identity -> a resolver with a client of its own (at
    /// most [`MAX_RESOLVERS`]; all dropped past it).
    resolvers: Mutex<HashMap<u64, Arc<Resolver>>>,
    /// The keys of credential identities (random per process).
    identity: std::hash::RandomState,
}

/// Resolvers kept for pods' credentials at most.
const MAX_RESOLVERS: usize = 256;

/// Secrets of one pod's `imagePullSecrets` read at most (a review must not
/// cost the API server more than a few gets).
pub(super) const MAX_PULL_SECRETS: usize = 8;

/// How long a Secret read for `--registry-pull-secrets` is kept.
const SECRET_TTL: Duration = Duration::from_secs(30);

impl PullSecrets {
    /// Reads Secrets with `client`.
    pub(super) fn new(client: kube::Client) -> Self {
        Self {
            client,
            secrets: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(SECRET_TTL)
                .build(),
            resolvers: Mutex::new(HashMap::new()),
            identity: std::hash::RandomState::new(),
        }
    }

    /// The credentials of the Secrets `names` in `namespace`, in order
    /// (the first naming a registry gives its credentials), read by
    /// `deadline`. A Secret that cannot be read or is not a Docker config
    /// is left out, logged: its images are looked up with the server's
    /// credentials, and are unknown if those may not pull them.
    pub(super) async fn credentials(
        &self,
        namespace: &str,
        names: &[String],
        deadline: tokio::time::Instant,
    ) -> crate::input::registry::Credentials {
        let reads = names.iter().map(|name| async move {
            let key = (namespace.to_owned(), name.clone());
            let read = self.secrets.get_with(key, self.read(namespace, name));
            match tokio::time::timeout_at(deadline, read).await {
                Ok(found) => found,
                Err(_) => {
                    Err("no answer from the API server within --registry-review-timeout".to_owned())
                }
            }
        });
        let mut credentials = crate::input::registry::Credentials::default();
        for (name, found) in names.iter().zip(futures::future::join_all(reads).await) {
            match found {
                Ok(c) => credentials.absorb(c),
                Err(why) => tracing::warn!(
                    namespace,
                    secret = name.as_str(),
                    "registry: imagePullSecrets not used: {why}"
                ),
            }
        }
        credentials
    }

    /// One Secret's credentials, or why not.
    async fn read(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<crate::input::registry::Credentials, String> {
        use k8s_openapi::api::core::v1::Secret;
        let api: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), namespace);
        let secret = api.get(name).await.map_err(|e| match e {
            kube::Error::Api(status) if status.code == 403 => format!(
                "may not get secrets in namespace {namespace} (the install's components/registry-pull-secrets grants it): {}",
                status.message
            ),
            kube::Error::Api(status) if status.code == 404 => "no such Secret".to_owned(),
            other => crate::entry::errors::error_chain(&other),
        })?;
        crate::input::registry::Credentials::of_secret(secret)
    }

    /// The resolver for `credentials` (a pod's, for one registry), and
    /// their identity.
    pub(super) fn resolver(
        &self,
        base: &Resolver,
        credentials: crate::input::registry::Credentials,
    ) -> (u64, Arc<Resolver>) {
        let id = credentials.identity(&self.identity);
        let mut resolvers = self
            .resolvers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !resolvers.contains_key(&id) && resolvers.len() >= MAX_RESOLVERS {
            resolvers.clear();
        }
        let resolver = resolvers
            .entry(id)
            .or_insert_with(|| Arc::new(base.with_credentials(credentials)));
        (id, Arc::clone(resolver))
    }
}
