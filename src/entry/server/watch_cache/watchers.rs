//! The watchers that keep the cache current: list, then watch; relist on
//! desync; retry with kube's default backoff (0.8 s doubling to 30 s).
//! Every call has a deadline ([`Deadlines`]), and every failure is logged
//! once with the verb, the resource, why, what the webhook does meanwhile
//! and what to do.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::backoff::{RelistBackoff, is_expected};
use super::{Change, ClusterMetrics, WatchCache};
use crate::decision::gmsa::CredSpec;
use crate::entry::errors::error_chain;

/// A resource the cache watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    Namespaces,
    RuntimeClasses,
    /// Windows nodes only (label selector `kubernetes.io/os=windows`).
    Nodes,
    /// The other nodes (label selector `kubernetes.io/os!=windows`): their
    /// names, labels and taints.
    LinuxNodes,
    /// `gmsacredentialspecs.windows.k8s.io` (with `serve --gmsa`).
    GmsaCredentialSpecs,
    /// `policyexceptions.winadmit.io`, every namespace's.
    PolicyExceptions,
}

impl Watched {
    /// The name `kubectl auth can-i` and RBAC rules use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::RuntimeClasses => "runtimeclasses.node.k8s.io",
            Self::Nodes | Self::LinuxNodes => "nodes",
            Self::GmsaCredentialSpecs => "gmsacredentialspecs.windows.k8s.io",
            Self::PolicyExceptions => "policyexceptions.winadmit.io",
        }
    }

    /// The metric label.
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::RuntimeClasses => "runtimeclasses",
            Self::Nodes => "nodes",
            Self::LinuxNodes => "linux_nodes",
            Self::GmsaCredentialSpecs => "gmsacredentialspecs",
            Self::PolicyExceptions => "policyexceptions",
        }
    }

    /// What the webhook does without this resource.
    fn without(self) -> &'static str {
        match self {
            Self::Namespaces => {
                "namespace labels (per-namespace mode, isolation) are ignored until this succeeds"
            }
            Self::RuntimeClasses => {
                "runtimeClassName only marks a pod as Windows through the policy's windowsRuntimeClasses until this succeeds"
            }
            Self::Nodes => {
                "verdicts use the flags', the policy's or the default Kubernetes version and runtime, and no Windows builds are known, until this succeeds"
            }
            Self::LinuxNodes => {
                "no pod is taken for a Windows pod by a node name, selector or affinity that only Windows nodes match, until this succeeds"
            }
            Self::GmsaCredentialSpecs => {
                "each review reads the credential specs it names with a get until this succeeds"
            }
            Self::PolicyExceptions => {
                "no PolicyException is honoured until this succeeds (install the CRD: docs/exceptions.md)"
            }
        }
    }
}

/// How long the cache waits on the API server. Every call has a deadline,
/// so a silent or trickling API server makes the watcher fail and retry
/// (logged, counted in `cluster_cache_errors`), never hang for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Time to connect (TCP and TLS) to the API server.
    pub connect: Duration,
    /// Longest silence accepted from the API server within one call (and
    /// the write deadline): above `watch_seconds`, so only a stalled server
    /// hits it.
    pub read: Duration,
    /// The server-side timeout of each watch call (`timeoutSeconds`).
    pub watch_seconds: u32,
    /// Longest wait for one page of a list, however the server trickles it.
    pub list_page: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            connect: CONNECT_TIMEOUT,
            read: READ_TIMEOUT,
            watch_seconds: WATCH_SECONDS,
            list_page: LIST_PAGE,
        }
    }
}

impl Deadlines {
    /// Sets the client-side deadlines on the configuration the cache's
    /// client is built from.
    pub fn apply_to(&self, config: &mut kube::Config) {
        config.connect_timeout = Some(self.connect);
        config.read_timeout = Some(self.read);
        config.write_timeout = Some(self.read);
    }
}

/// Starts the watchers on the current tokio runtime, with the server-side
/// watch timeout and list-page deadline of `deadlines` (its client-side
/// ones belong on `client`: [`Deadlines::apply_to`]), and the
/// PolicyExceptions' when the cache tracks them. They run until the
/// runtime stops.
pub fn spawn(
    client: Client,
    cache: Arc<WatchCache>,
    metrics: ClusterMetrics,
    deadlines: Deadlines,
) {
    if let Some(exceptions) = cache.exception_cache() {
        tracing::info!("cluster cache: watching policyexceptions.winadmit.io");
        super::spawn_exceptions(client.clone(), exceptions, metrics.clone(), deadlines);
    }
    {
        let cache = Arc::clone(&cache);
        let metrics = metrics.clone();
        let api: Api<Namespace> = Api::all(client.clone());
        tokio::spawn(async move {
            let c = Arc::clone(&cache);
            let start = objects(api, Watched::Namespaces, deadlines);
            run(start, Watched::Namespaces, &metrics, deadlines, move |ev| {
                Change::from_event(ev, |ns| c.namespace_entry(ns)).map(|ch| c.apply_namespace(ch))
            })
            .await;
        });
    }
    {
        let cache = Arc::clone(&cache);
        let metrics = metrics.clone();
        let api: Api<RuntimeClass> = Api::all(client.clone());
        tokio::spawn(async move {
            run(
                objects(api, Watched::RuntimeClasses, deadlines),
                Watched::RuntimeClasses,
                &metrics,
                deadlines,
                move |ev| {
                    Change::from_event(ev, WatchCache::runtime_class_entry)
                        .map(|ch| cache.apply_runtime_class(ch))
                },
            )
            .await;
        });
    }
    {
        let cache = Arc::clone(&cache);
        let metrics = metrics.clone();
        let api: Api<Node> = Api::all(client.clone());
        tokio::spawn(async move {
            let start = objects(api, Watched::Nodes, deadlines);
            let counted = metrics.clone();
            run(start, Watched::Nodes, &metrics, deadlines, move |ev| {
                let n =
                    Change::from_event(ev, WatchCache::node_entry).map(|ch| cache.apply_node(ch));
                counted.os_conflicts(cache.os_conflicts());
                n
            })
            .await;
        });
    }
    // The other nodes, whole: their taints and reported OS count too.
    let api: Api<Node> = Api::all(client);
    tokio::spawn(async move {
        let start = objects(api, Watched::LinuxNodes, deadlines);
        let counted = metrics.clone();
        run(start, Watched::LinuxNodes, &metrics, deadlines, move |ev| {
            let n = Change::from_event(ev, WatchCache::linux_node_entry)
                .map(|ch| cache.apply_linux_node(ch));
            counted.os_conflicts(cache.os_conflicts());
            n
        })
        .await;
    });
}

/// Starts a watch of the objects of `api`: for [`Watched::Nodes`], the
/// nodes labelled Windows only; for [`Watched::LinuxNodes`], the others.
fn objects<K>(
    api: Api<K>,
    what: Watched,
    deadlines: Deadlines,
) -> impl Fn() -> BoxStream<'static, watcher::Result<watcher::Event<K>>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    move || {
        let config = watcher::Config::default().timeout(deadlines.watch_seconds);
        let config = match what {
            Watched::Nodes => config.labels("kubernetes.io/os=windows"),
            Watched::LinuxNodes => config.labels("kubernetes.io/os!=windows"),
            _ => config,
        };
        watcher(api.clone(), config).boxed()
    }
}

/// A `GMSACredentialSpec` as the watch reads it: its name and contents.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct GmsaCredentialSpecObject {
    pub metadata: kube::api::ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credspec: Option<serde_json::Value>,
}

impl Resource for GmsaCredentialSpecObject {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind((): &()) -> std::borrow::Cow<'_, str> {
        crate::decision::gmsa::KIND.into()
    }
    fn group((): &()) -> std::borrow::Cow<'_, str> {
        crate::decision::gmsa::GROUP.into()
    }
    fn version((): &()) -> std::borrow::Cow<'_, str> {
        crate::decision::gmsa::VERSION.into()
    }
    fn plural((): &()) -> std::borrow::Cow<'_, str> {
        crate::decision::gmsa::RESOURCE.into()
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

impl GmsaCredentialSpecObject {
    /// Its name and what winadmit reads of it: the reader `lint` uses.
    #[must_use]
    pub fn entry(&self) -> Option<(String, CredSpec)> {
        let mut value = serde_json::to_value(self).ok()?;
        value["apiVersion"] = format!(
            "{}/{}",
            crate::decision::gmsa::GROUP,
            crate::decision::gmsa::VERSION
        )
        .into();
        value["kind"] = crate::decision::gmsa::KIND.into();
        CredSpec::from_object(&value)
    }
}

/// Starts the watch of the cluster's GMSACredentialSpecs (`serve --gmsa`).
pub fn spawn_gmsa(
    client: Client,
    cache: Arc<WatchCache>,
    metrics: ClusterMetrics,
    deadlines: Deadlines,
) {
    let api: Api<GmsaCredentialSpecObject> = Api::all(client);
    tokio::spawn(async move {
        run(
            objects(api, Watched::GmsaCredentialSpecs, deadlines),
            Watched::GmsaCredentialSpecs,
            &metrics,
            deadlines,
            move |ev| {
                Change::from_event(ev, GmsaCredentialSpecObject::entry)
                    .map(|ch| cache.apply_gmsa(ch))
            },
        )
        .await;
    });
}

/// One watcher loop: events into `apply` (which returns the object count),
/// errors logged once per distinct failure and retried with backoff.
///
/// `start` opens the list-then-watch stream. The API server ends each watch
/// after `watch_seconds`, so a healthy watch is never silent for the read
/// deadline; a silent server is cut off. The stream has no backoff of the
/// watcher's own: it resets on every event, so a list whose first page
/// succeeds and whose second fails (an endless continue token) would be
/// retried every 0.8 s. This loop backs off instead ([`RelistBackoff`]).
pub(super) async fn run<K>(
    start: impl Fn() -> BoxStream<'static, watcher::Result<watcher::Event<K>>>,
    what: Watched,
    metrics: &ClusterMetrics,
    deadlines: Deadlines,
    mut apply: impl FnMut(watcher::Event<K>) -> Option<usize>,
) {
    let mut stream = start();
    let mut log = Progress::new(what, metrics);
    let mut relist = RelistBackoff::default();
    loop {
        // While a list is in progress each page must arrive within
        // `list_page`: a server that trickles bytes defeats the read
        // timeout, not this.
        let item = if relist.listing() {
            if let Ok(item) = tokio::time::timeout(deadlines.list_page, stream.next()).await {
                item
            } else {
                log.list_page_late(deadlines.list_page);
                // Not at once: a server that keeps the list going
                // (an endless continue token) is retried with backoff.
                tokio::time::sleep(relist.delay()).await;
                stream = start();
                continue;
            }
        } else {
            stream.next().await
        };
        let Some(item) = item else { break };
        match item {
            Ok(event) => {
                relist.saw(&event);
                let done = matches!(event, watcher::Event::InitDone);
                if let Some(n) = apply(event) {
                    log.applied(n, done);
                }
            }
            Err(err) => {
                log.failed(&err);
                // The stream is not polled meanwhile.
                tokio::time::sleep(relist.delay()).await;
            }
        }
    }
}

/// What one watcher loop has reported: metrics, and logs that say each
/// failure once (a repeat at debug level, with a reminder at warn level
/// every [`REWARN`]) and each recovery.
struct Progress<'m> {
    what: Watched,
    metrics: &'m ClusterMetrics,
    /// The last failure logged at warn level, and when.
    failing: Option<String>,
    warned: Instant,
    synced_once: bool,
}

impl<'m> Progress<'m> {
    fn new(what: Watched, metrics: &'m ClusterMetrics) -> Self {
        Self {
            what,
            metrics,
            failing: None,
            warned: Instant::now(),
            synced_once: false,
        }
    }

    /// A page of a list did not arrive within `list_page`.
    fn list_page_late(&self, list_page: Duration) {
        let what = self.what;
        self.metrics.error(what, "list");
        tracing::warn!(
            resource = what.as_str(),
            verb = "list",
            "cluster cache: cannot list {}: the API server sent no complete page within {:?}; {}; listing again",
            what.as_str(),
            list_page,
            what.without()
        );
    }

    /// An event was applied; `n` objects are cached; `done`: a (re)list
    /// completed.
    fn applied(&mut self, n: usize, done: bool) {
        let what = self.what;
        self.metrics.objects(what, n);
        if !done {
            return;
        }
        self.metrics.synced(what);
        if self.failing.take().is_some() {
            tracing::info!(
                resource = what.as_str(),
                objects = n,
                "cluster cache: {} listed after earlier failures; the cache is current",
                what.as_str()
            );
        } else if !self.synced_once {
            tracing::info!(
                resource = what.as_str(),
                objects = n,
                "cluster cache: {} listed",
                what.as_str()
            );
        }
        self.synced_once = true;
    }

    /// A list or watch call failed; the watcher retries with backoff.
    fn failed(&mut self, err: &watcher::Error) {
        let what = self.what;
        let (verb, message) = describe(what, err);
        self.metrics.error(what, verb);
        if is_expected(err) {
            // A watch older than the API server's history: the
            // watcher relists, as designed.
            tracing::debug!(resource = what.as_str(), verb, "{message}");
        } else if self.failing.as_deref() == Some(message.as_str())
            && self.warned.elapsed() < REWARN
        {
            tracing::debug!(resource = what.as_str(), verb, "{message}");
        } else {
            tracing::warn!(resource = what.as_str(), verb, "{message}");
            self.failing = Some(message);
            self.warned = Instant::now();
        }
    }
}

/// Default of [`Deadlines::connect`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`Deadlines::read`].
pub const READ_TIMEOUT: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 30);
/// Default of [`Deadlines::watch_seconds`].
pub const WATCH_SECONDS: u32 = 60;
/// Default of [`Deadlines::list_page`].
pub const LIST_PAGE: Duration = Duration::from_secs(60);

/// How often a failure that persists is logged again at warn level.
const REWARN: Duration = Duration::from_secs(300);

/// The verb that failed and a message naming it, the resource, why, what
/// the webhook does meanwhile and what to do.
fn describe(what: Watched, err: &watcher::Error) -> (&'static str, String) {
    let (verb, source) = match err {
        watcher::Error::InitialListFailed(e) => ("list", Some(e)),
        watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => ("watch", Some(e)),
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => ("watch", None),
    };
    let resource = what.as_str();
    let why = match (source, err) {
        (Some(kube::Error::Api(status)), _) | (None, watcher::Error::WatchError(status)) => {
            let detail = if status.message.is_empty() {
                String::new()
            } else {
                format!(" ({})", status.message)
            };
            match status.code {
                403 => format!(
                    "forbidden{detail}; grant get, list and watch on {resource} to the webhook's service account (manifests/base/rbac.yaml)"
                ),
                401 => format!(
                    "unauthorized{detail}; check the service account token or kubeconfig user"
                ),
                404 => format!("not found{detail}; the API server does not serve {resource}"),
                410 => format!("expired{detail}; relisting"),
                code => format!("HTTP {code} {}{detail}", status.reason),
            }
        }
        (Some(e), _) => format!("cannot reach the API server: {}", error_chain(e)),
        (None, e) => e.to_string(),
    };
    (
        verb,
        format!(
            "cluster cache: cannot {verb} {resource}: {why}; {}; retrying with backoff",
            what.without()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_verb_and_resource() {
        let status = kube::core::Status::failure(
            "namespaces is forbidden: User \"x\" cannot watch resource \"namespaces\"",
            "Forbidden",
        )
        .with_code(403);
        let err = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status)));
        let (verb, msg) = describe(Watched::Namespaces, &err);
        assert_eq!(verb, "watch");
        assert!(
            msg.starts_with("cluster cache: cannot watch namespaces: forbidden ("),
            "{msg}"
        );
        assert!(msg.contains("rbac.yaml"), "{msg}");
        let status = kube::core::Status::failure("nope", "Forbidden").with_code(403);
        let err = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        let (verb, msg) = describe(Watched::RuntimeClasses, &err);
        assert_eq!(verb, "list");
        assert!(
            msg.starts_with("cluster cache: cannot list runtimeclasses.node.k8s.io: forbidden"),
            "{msg}"
        );
        assert!(!is_expected(&err));
        let gone =
            kube::core::Status::failure("too old resource version", "Expired").with_code(410);
        assert!(is_expected(&watcher::Error::WatchError(Box::new(gone))));
    }
}
