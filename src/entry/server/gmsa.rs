//! `serve --gmsa`: the gMSA facts of one review, resolved before the
//! decision. For a pod that names GMSACredentialSpecs it reads each one
//! (from the cluster cache's watch of `gmsacredentialspecs.windows.k8s.io`
//! once listed, else with a `get`) and, on
//! CREATE (and for the `ephemeralcontainers` subresource), asks the API
//! server with a LocalSubjectAccessReview per distinct (namespace, service
//! account, name) whether the pod's service account may `use` it. Answers
//! are kept briefly (bounded) so a Deployment's replicas cost one call.
//!
//! Every call shares one deadline, well under the webhook's timeout. On a
//! failure: a credential spec that cannot be read is `Unavailable` (the
//! rules refuse only contents they cannot check); an authorization that
//! cannot be asked is refused, as the upstream gMSA webhook does, since it
//! is the security boundary.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::LocalSubjectAccessReview;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::decision::gmsa::{self, Authz, AuthzKey, CredSpec, Facts};
use crate::entry::admission::GmsaWanted;

/// Default of [`Resolver::deadline`]: the manifests' `timeoutSeconds` is 5.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// How long an answer is kept.
pub const TTL: Duration = Duration::from_secs(10);
/// Answers kept at most (of each kind); all are forgotten when full.
pub const MAX_ENTRIES: usize = 4096;

/// The gMSA lookups' metrics (shared handles; no samples until used).
#[derive(Clone, Default)]
pub struct GmsaMetrics {
    reviews: Family<[(&'static str, &'static str); 1], Counter>,
    cached: Counter,
    gets: Family<[(&'static str, &'static str); 1], Counter>,
}

impl GmsaMetrics {
    /// Registers the gMSA metrics.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "gmsa_local_subject_access_reviews",
            "LocalSubjectAccessReviews created to ask whether a pod's service account may use a GMSACredentialSpec, by result (allowed, denied, error)",
            m.reviews.clone(),
        );
        registry.register(
            "gmsa_local_subject_access_review_cache_hits",
            "Authorization answers for GMSACredentialSpecs served from the short-lived cache, without a LocalSubjectAccessReview",
            m.cached.clone(),
        );
        registry.register(
            "gmsa_credential_spec_gets",
            "GMSACredentialSpecs read with a get (not from the watch cache), by result (found, not_found, error)",
            m.gets.clone(),
        );
        m
    }

    fn review(&self, result: &'static str) {
        self.reviews.get_or_create(&[("result", result)]).inc();
    }

    fn get(&self, result: &'static str) {
        self.gets.get_or_create(&[("result", result)]).inc();
    }
}

/// A small map whose entries expire.
struct Recent<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Recent<K, V> {
    fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (at, _)| at.elapsed() < TTL);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }
}

/// Resolves the gMSA facts of reviews.
pub struct Resolver {
    client: Client,
    /// The watch cache of GMSACredentialSpecs, when `--cluster-cache` is
    /// on: once listed, credential specs are read there, not with a get.
    cache: Option<std::sync::Arc<crate::entry::server::watch_cache::WatchCache>>,
    /// All the calls of one review end within this.
    pub deadline: Duration,
    specs: Recent<String, CredSpec>,
    authz: Recent<AuthzKey, Authz>,
    metrics: GmsaMetrics,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// The API resource of `GMSACredentialSpec` at the version the webhook reads.
#[must_use]
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: gmsa::GROUP.to_owned(),
        version: gmsa::VERSION.to_owned(),
        api_version: format!("{}/{}", gmsa::GROUP, gmsa::VERSION),
        kind: gmsa::KIND.to_owned(),
        plural: gmsa::RESOURCE.to_owned(),
    }
}

/// Whether the API server serves `gmsacredentialspecs.windows.k8s.io/v1`.
///
/// # Errors
/// The discovery call failed (not a 404).
pub async fn served(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(&format!("{}/{}", gmsa::GROUP, gmsa::VERSION))
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == gmsa::RESOURCE)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

impl Resolver {
    #[must_use]
    pub fn new(
        client: Client,
        cache: Option<std::sync::Arc<crate::entry::server::watch_cache::WatchCache>>,
        deadline: Duration,
    ) -> Self {
        Self {
            client,
            cache,
            deadline,
            specs: Recent::new(),
            authz: Recent::new(),
            metrics: GmsaMetrics::default(),
        }
    }

    /// Counts the resolver's calls in `metrics` (the server's registry).
    #[must_use]
    pub fn with_metrics(mut self, metrics: GmsaMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The gMSA facts of one review: always some (the switch is on), with
    /// the credential specs the object names looked up and, when the
    /// request gives the pod an identity, the authorization of its service
    /// account to use them.
    pub async fn facts(&self, wanted: Option<&GmsaWanted>) -> Facts {
        match wanted {
            Some(w) => {
                self.resolve(&w.namespace, &w.service_account, &w.names, w.authorize)
                    .await
            }
            None => Facts::default(),
        }
    }

    /// The facts of credential specs `names` and, when `ask`, whether
    /// `account` in `namespace` may use each, within [`Resolver::deadline`].
    /// An authorization that cannot be asked is a refusal (the webhook's
    /// security boundary).
    pub async fn resolve(
        &self,
        namespace: &str,
        account: &str,
        names: &[String],
        ask: bool,
    ) -> Facts {
        let mut facts = Facts::default();
        let work = async {
            let specs = futures::future::join_all(names.iter().map(|n| self.spec(n)));
            let answers = futures::future::join_all(
                names
                    .iter()
                    .filter(|_| ask)
                    .map(|n| self.may_use(namespace, account, n)),
            );
            futures::future::join(specs, answers).await
        };
        match tokio::time::timeout(self.deadline, work).await {
            Ok((specs, answers)) => {
                for (name, spec) in names.iter().zip(specs) {
                    facts.specs.insert(name.clone(), spec);
                }
                for (name, answer) in names.iter().zip(answers) {
                    facts.authz.insert(
                        (namespace.to_owned(), account.to_owned(), name.clone()),
                        answer,
                    );
                }
            }
            Err(_) => {
                let why = format!("no answer from the API server within {:?}", self.deadline);
                tracing::warn!(namespace = %namespace, "gmsa: {why}");
                for name in names {
                    facts
                        .specs
                        .insert(name.clone(), CredSpec::Unavailable(why.clone()));
                    if ask {
                        facts.authz.insert(
                            (namespace.to_owned(), account.to_owned(), name.clone()),
                            Authz {
                                allowed: false,
                                reason: format!("error when checking authz access: {why}"),
                            },
                        );
                    }
                }
            }
        }
        facts
    }

    /// What the cluster has under `name`.
    async fn spec(&self, name: &str) -> CredSpec {
        if let Some(listed) = self.cache.as_ref().map(|c| c.gmsa_snapshot())
            && let Some(specs) = listed.as_ref()
        {
            return specs.get(name).cloned().unwrap_or(CredSpec::Missing);
        }
        if let Some(known) = self.specs.get(&name.to_owned()) {
            return known;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &api_resource());
        let found = match api.get_opt(name).await {
            Ok(Some(object)) => {
                self.metrics.get("found");
                serde_json::to_value(&object)
                    .ok()
                    .and_then(|v| CredSpec::from_object(&v))
                    .map_or(CredSpec::Found(None), |(_, s)| s)
            }
            Ok(None) => {
                self.metrics.get("not_found");
                CredSpec::Missing
            }
            Err(e) => {
                self.metrics.get("error");
                let why = crate::entry::errors::error_chain(&e);
                tracing::warn!(name, "gmsa: cannot get gmsacredentialspecs {name}: {why}");
                // Failures are not kept: the next review asks again.
                return CredSpec::Unavailable(why);
            }
        };
        self.specs.put(name.to_owned(), found.clone());
        found
    }

    /// Whether `account` in `namespace` may `use` credential spec `name`.
    async fn may_use(&self, namespace: &str, account: &str, name: &str) -> Authz {
        let key = (namespace.to_owned(), account.to_owned(), name.to_owned());
        if let Some(known) = self.authz.get(&key) {
            self.metrics.cached.inc();
            return known;
        }
        let review = LocalSubjectAccessReview {
            metadata: kube::api::ObjectMeta {
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            spec: gmsa::use_review(namespace, account, name),
            status: None,
        };
        let api: Api<LocalSubjectAccessReview> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &review).await {
            Ok(answer) => {
                let status = answer.status.unwrap_or_default();
                let authz = Authz {
                    allowed: status.allowed && !status.denied.unwrap_or(false),
                    reason: status
                        .reason
                        .filter(|r| !r.is_empty())
                        .or(status.evaluation_error)
                        .unwrap_or_default(),
                };
                self.metrics
                    .review(if authz.allowed { "allowed" } else { "denied" });
                self.authz.put(key, authz.clone());
                authz
            }
            Err(e) => {
                self.metrics.review("error");
                let why = crate::entry::errors::error_chain(&e);
                tracing::warn!(
                    namespace,
                    "gmsa: cannot create a localsubjectaccessreviews in {namespace}: {why}"
                );
                Authz {
                    allowed: false,
                    reason: format!("error when checking authz access: {why}"),
                }
            }
        }
    }
}
