//! `report` against a live cluster: paginated list calls through kube-rs,
//! owners before the objects they own, each page parsed as raw JSON (no
//! typed structs, so no field is dropped) and handed to the builder item by
//! item. Memory is bounded by the page size (`--page-size`, default 500).

use crate::errors::error_chain;
use std::path::Path;

use anyhow::{Context as _, anyhow};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Request;
use kube::{Client, Config};
use serde_json::Value;

use super::{Driver, Progress};
use crate::cli::{ApiDeadlines, ApiLimits};
use crate::gmsa::{self, Authz, AuthzKey};
use crate::report::Origin;
use crate::report::stream::{self, StopError, StreamError};

/// A listable resource.
#[derive(Debug, Clone, Copy)]
pub(super) struct Resource {
    /// `/api/v1` or `/apis/<group>/<version>`.
    pub base: &'static str,
    pub plural: &'static str,
    /// `pods`, `deployments.apps`: how `kubectl auth can-i` names it.
    pub display: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
}

/// Workload kinds, owners before what they own (CronJob before Job,
/// Deployment before ReplicaSet, every controller before Pod), so owned
/// objects fold as they stream by.
pub(super) const WORKLOADS: [Resource; 8] = [
    Resource {
        base: "/apis/batch/v1",
        plural: "cronjobs",
        display: "cronjobs.batch",
        api_version: "batch/v1",
        kind: "CronJob",
    },
    Resource {
        base: "/apis/apps/v1",
        plural: "deployments",
        display: "deployments.apps",
        api_version: "apps/v1",
        kind: "Deployment",
    },
    Resource {
        base: "/apis/batch/v1",
        plural: "jobs",
        display: "jobs.batch",
        api_version: "batch/v1",
        kind: "Job",
    },
    Resource {
        base: "/apis/apps/v1",
        plural: "replicasets",
        display: "replicasets.apps",
        api_version: "apps/v1",
        kind: "ReplicaSet",
    },
    Resource {
        base: "/apis/apps/v1",
        plural: "statefulsets",
        display: "statefulsets.apps",
        api_version: "apps/v1",
        kind: "StatefulSet",
    },
    Resource {
        base: "/apis/apps/v1",
        plural: "daemonsets",
        display: "daemonsets.apps",
        api_version: "apps/v1",
        kind: "DaemonSet",
    },
    Resource {
        base: "/api/v1",
        plural: "replicationcontrollers",
        display: "replicationcontrollers",
        api_version: "v1",
        kind: "ReplicationController",
    },
    Resource {
        base: "/api/v1",
        plural: "pods",
        display: "pods",
        api_version: "v1",
        kind: "Pod",
    },
];

const NAMESPACES: Resource = Resource {
    base: "/api/v1",
    plural: "namespaces",
    display: "namespaces",
    api_version: "v1",
    kind: "Namespace",
};
const NODES: Resource = Resource {
    base: "/api/v1",
    plural: "nodes",
    display: "nodes",
    api_version: "v1",
    kind: "Node",
};
const RUNTIME_CLASSES: Resource = Resource {
    base: "/apis/node.k8s.io/v1",
    plural: "runtimeclasses",
    display: "runtimeclasses.node.k8s.io",
    api_version: "node.k8s.io/v1",
    kind: "RuntimeClass",
};

const GMSA_CREDENTIAL_SPECS: Resource = Resource {
    base: "/apis/windows.k8s.io/v1",
    plural: gmsa::RESOURCE,
    display: "gmsacredentialspecs.windows.k8s.io",
    api_version: "windows.k8s.io/v1",
    kind: gmsa::KIND,
};

/// A connected cluster, access checked.
pub(super) struct Live {
    /// Shared with the gMSA lookup, which asks as the report goes.
    runtime: std::sync::Arc<tokio::runtime::Runtime>,
    client: Client,
    server: String,
    deadlines: ApiDeadlines,
    limits: ApiLimits,
    /// `None`: all namespaces.
    namespaces: Vec<Option<String>>,
    page_size: u32,
    /// Custom resources with a pod template that the cluster serves and the
    /// identity may list, owners first ([`Live::discover`]).
    custom: Vec<Resource>,
    /// Custom resource groups whose discovery failed (not a 404): their
    /// kinds are left out of the report, which says so.
    undiscovered: Vec<String>,
    /// The cluster serves gmsacredentialspecs.windows.k8s.io/v1.
    gmsa: bool,
    /// `--registry-pull-secrets`: images are looked up with the
    /// credentials of the Secrets their workload's `imagePullSecrets` names.
    pull_secrets: bool,
}

impl Live {
    /// Loads the kubeconfig (or in-cluster config), and checks with one
    /// small list call per resource that the cluster answers and allows
    /// listing, so a refusal is reported before any output is written.
    ///
    /// `custom` are the (group, kind) pairs of custom resources with a pod
    /// template (the built-in table and the policy's `podTemplates`); the
    /// ones the cluster serves are listed too, before the built-in kinds.
    /// `bounds` are how long each call may take and how much of an answer
    /// is read.
    pub fn connect(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
        namespaces: &[String],
        page_size: u32,
        custom: &[(String, String)],
        (deadlines, limits): (ApiDeadlines, ApiLimits),
        progress: &Progress,
    ) -> anyhow::Result<Self> {
        // kube's rustls needs a process-wide provider; another door may have
        // installed one already, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = std::sync::Arc::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?,
        );
        let mut config = runtime.block_on(load_config(kubeconfig, context))?;
        config.connect_timeout = Some(deadlines.connect_timeout);
        config.read_timeout = Some(deadlines.read_timeout);
        config.write_timeout = Some(deadlines.read_timeout);
        let server = config.cluster_url.to_string();
        // The client spawns its buffer task on the current runtime.
        let guard = runtime.enter();
        let client = Client::try_from(config)
            .with_context(|| format!("cannot create a Kubernetes client for {server}"))?;
        drop(guard);
        let mut live = Self {
            runtime,
            client,
            server,
            deadlines,
            limits,
            namespaces: if namespaces.is_empty() {
                vec![None]
            } else {
                namespaces.iter().cloned().map(Some).collect()
            },
            page_size,
            custom: Vec::new(),
            undiscovered: Vec::new(),
            gmsa: false,
            pull_secrets: false,
        };
        progress.note(&format!(
            "connecting to {} (checking that each workload kind may be listed)",
            live.server
        ));
        for ns in &live.namespaces {
            for r in WORKLOADS {
                live.runtime
                    .block_on(live.page(r, ns.as_deref(), 1, None, progress))
                    .map_err(|e| live.describe(e, r, ns.as_deref()))?;
            }
        }
        (live.custom, live.undiscovered) = live.discover(custom, progress);
        live.gmsa = live.gmsa_served(progress);
        let listed: Vec<&str> = live
            .custom
            .iter()
            .map(|r| r.display)
            .chain(WORKLOADS.iter().map(|r| r.plural))
            .collect();
        progress.note(&format!(
            "connected to {}; listing {} in {}",
            live.server,
            listed.join(", "),
            scope_list(&live.namespaces)
        ));
        Ok(live)
    }

    /// Finds which of the `(group, kind)` custom resources the cluster
    /// serves, through the discovery API (`/apis/GROUP` for the preferred
    /// version, then its resource list), and keeps those the identity may
    /// list. A group or kind the cluster does not serve is skipped quietly:
    /// most clusters have no Argo Rollouts, OpenKruise or KEDA. A list the
    /// identity may not make is a note, and the report goes on without it.
    /// A group whose discovery fails otherwise (no answer within
    /// --api-timeout, an error, an answer too large) is returned second:
    /// its kinds are skipped, and the report says so and exits 2 unless
    /// --allow-partial.
    fn discover(
        &self,
        custom: &[(String, String)],
        progress: &Progress,
    ) -> (Vec<Resource>, Vec<String>) {
        let mut found = Vec::new();
        let mut undiscovered = Vec::new();
        let mut groups: Vec<&str> = Vec::new();
        for (g, _) in custom {
            if !groups.contains(&g.as_str()) {
                groups.push(g);
            }
        }
        for group in groups {
            let mut document = |path: &str| match self.get_json(path) {
                Ok(doc) => doc,
                Err(why) => {
                    progress.note(&format!(
                        "warning: cannot discover {group} at {} ({path}): {why}; its kinds are skipped",
                        self.server
                    ));
                    undiscovered.push(group.to_owned());
                    None
                }
            };
            let Some(group_version) = document(&format!("/apis/{group}")).and_then(|g| {
                g.pointer("/preferredVersion/groupVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }) else {
                continue;
            };
            let Some(list) = document(&format!("/apis/{group_version}")) else {
                continue;
            };
            let served = list
                .get("resources")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for (_, kind) in custom.iter().filter(|(g, _)| g == group) {
                let Some(plural) = served
                    .iter()
                    .filter(|r| r.get("kind").and_then(Value::as_str) == Some(kind))
                    .filter_map(|r| r.get("name").and_then(Value::as_str))
                    .find(|name| !name.contains('/'))
                else {
                    continue;
                };
                // Once per discovered kind, for the life of this short CLI
                // process: leaking keeps `Resource` a plain `Copy` value
                // like the built-in table's.
                let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
                let r = Resource {
                    base: leak(format!("/apis/{group_version}")),
                    plural: leak(plural.to_owned()),
                    display: leak(format!("{plural}.{group}")),
                    api_version: leak(group_version.clone()),
                    kind: leak(kind.clone()),
                };
                let allowed = self.namespaces.iter().try_for_each(|ns| {
                    self.runtime
                        .block_on(self.page(r, ns.as_deref(), 1, None, progress))
                        .map(drop)
                        .map_err(|e| self.describe(e, r, ns.as_deref()))
                });
                match allowed {
                    Ok(()) => found.push(r),
                    Err(e) => progress.note(&format!(
                        "note: {e:#} (the report goes on without {})",
                        r.display
                    )),
                }
            }
        }
        (found, undiscovered)
    }

    /// Whether the cluster serves GMSACredentialSpecs (`windows.k8s.io/v1`);
    /// says on stderr when it does not, or cannot tell.
    fn gmsa_served(&self, progress: &Progress) -> bool {
        let path = format!("/apis/{}/{}", gmsa::GROUP, gmsa::VERSION);
        let served = match self.get_json(&path) {
            Ok(doc) => doc
                .as_ref()
                .and_then(|d| d.get("resources"))
                .and_then(Value::as_array)
                .is_some_and(|rs| {
                    rs.iter()
                        .any(|r| r.get("name").and_then(Value::as_str) == Some(gmsa::RESOURCE))
                }),
            Err(why) => {
                progress.note(&format!(
                    "note: cannot tell whether {} serves {}.{} ({path}): {why}; gMSA credential specs are not checked",
                    self.server,
                    gmsa::RESOURCE,
                    gmsa::GROUP
                ));
                return false;
            }
        };
        if !served {
            progress.note(&format!(
                "note: {} does not serve {}.{}/{} (no GMSACredentialSpec CRD): gMSA credential specs and who may use them are not checked",
                self.server,
                gmsa::RESOURCE,
                gmsa::GROUP,
                gmsa::VERSION
            ));
        }
        served
    }

    /// The lookup that asks, with a SubjectAccessReview per distinct
    /// (namespace, service account, credential spec), whether a pod's
    /// service account may `use` the credential specs it names: `None` when
    /// the cluster serves no GMSACredentialSpecs.
    pub fn gmsa_lookup(&self, quiet: bool) -> Option<crate::report::NamespaceLookup> {
        self.gmsa.then(|| {
            crate::report::NamespaceLookup(std::sync::Arc::new(LiveGmsa {
                runtime: std::sync::Arc::clone(&self.runtime),
                client: self.client.clone(),
                server: self.server.clone(),
                timeout: self.deadlines.call_timeout,
                quiet,
                answers: std::sync::Mutex::new(std::collections::HashMap::new()),
                refused: std::sync::Mutex::new(None),
            }))
        })
    }

    /// A discovery document, `None` when the cluster does not serve it
    /// (404), or why it could not be read, within --api-timeout and
    /// --max-response-bytes.
    fn get_json(&self, path: &str) -> Result<Option<Value>, String> {
        let req = axum::http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let call = async {
            tokio::time::timeout(self.deadlines.call_timeout, self.bounded_text(req)).await
        };
        match self.runtime.block_on(call) {
            Err(_) => Err(format!(
                "no complete answer within {:?} (--api-timeout)",
                self.deadlines.call_timeout
            )),
            Ok(Err(CallError::Kube(kube::Error::Api(status)))) if status.code == 404 => Ok(None),
            Ok(Err(CallError::TooLarge(limit))) => Err(format!(
                "the answer is larger than {limit} bytes (--max-response-bytes)"
            )),
            Ok(Err(CallError::Kube(e))) => Err(error_chain(&e)),
            Ok(Err(CallError::Timeout(t))) => {
                Err(format!("no complete answer within {t:?} (--api-timeout)"))
            }
            Ok(Ok(text)) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| format!("not a discovery document: {e}")),
        }
    }

    /// `--registry-pull-secrets`.
    pub fn with_pull_secrets(mut self, on: bool) -> Self {
        self.pull_secrets = on;
        self
    }

    /// The credentials of the Secrets `names` in `namespace`, in order (the
    /// first naming a registry gives its credentials), each read once per
    /// report (`read`). A Secret that cannot be read is a note on stderr,
    /// and the images are looked up with `--registry-config`'s credentials.
    fn pull_credentials(
        &self,
        namespace: &str,
        names: &[String],
        read: &mut std::collections::HashMap<
            (String, String),
            Option<crate::registry::Credentials>,
        >,
        progress: &Progress,
    ) -> crate::registry::Credentials {
        let mut credentials = crate::registry::Credentials::default();
        for name in names {
            let key = (namespace.to_owned(), name.clone());
            let found =
                read.entry(key)
                    .or_insert_with(|| match self.secret_credentials(namespace, name) {
                        Ok(c) => Some(c),
                        Err(why) => {
                            progress.note(&format!(
                                "note: imagePullSecrets {namespace}/{name} not used: {why}"
                            ));
                            None
                        }
                    });
            if let Some(c) = found {
                credentials.absorb(c.clone());
            }
        }
        credentials
    }

    /// One Secret's registry credentials, within --api-timeout.
    fn secret_credentials(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<crate::registry::Credentials, String> {
        use k8s_openapi::api::core::v1::Secret;
        let api: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), namespace);
        let call = async { tokio::time::timeout(self.deadlines.call_timeout, api.get(name)).await };
        let secret = match self.runtime.block_on(call) {
            Ok(Ok(s)) => s,
            Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
                return Err(format!(
                    "the report's identity may not get secrets in namespace {namespace} (grant `get` on secrets, or leave out --registry-pull-secrets)"
                ));
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 404 => {
                return Err("no such Secret".to_owned());
            }
            Ok(Err(e)) => return Err(error_chain(&e)),
            Err(_) => {
                return Err(format!(
                    "no answer within {:?} (--api-timeout)",
                    self.deadlines.call_timeout
                ));
            }
        };
        let data: std::collections::BTreeMap<String, Vec<u8>> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        crate::registry::Credentials::from_secret(
            secret.type_.as_deref().unwrap_or_default(),
            &data,
        )
    }

    /// Custom resource groups the report had to leave out.
    pub fn undiscovered(&self) -> &[String] {
        &self.undiscovered
    }

    /// One call's answer as text, read up to --max-response-bytes (a
    /// larger answer is `TooLarge`); an error status is the API server's
    /// `Status`, as kube's own `request_text` gives it.
    async fn bounded_text(&self, req: axum::http::Request<Vec<u8>>) -> Result<String, CallError> {
        let limit = self.limits.max_response_bytes;
        let res = self
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(CallError::Kube)?;
        let code = res.status();
        let cap = if code.is_success() {
            usize::try_from(limit).unwrap_or(usize::MAX)
        } else {
            // An error's Status is small; more is not worth reading.
            64 * 1024
        };
        let bytes = axum::body::to_bytes(axum::body::Body::new(res.into_body()), cap)
            .await
            .map_err(|e| {
                if code.is_success() && error_chain(&e).contains("length limit exceeded") {
                    CallError::TooLarge(limit)
                } else {
                    CallError::Kube(kube::Error::Service(e.into()))
                }
            })?;
        if !code.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let status = serde_json::from_str::<kube::core::Status>(&text).unwrap_or_else(|_| {
                kube::core::Status::failure(text.trim(), "Failed to parse error data")
                    .with_code(code.as_u16())
            });
            return Err(CallError::Kube(kube::Error::Api(status.boxed())));
        }
        // Without a copy when the buffer is unshared.
        String::from_utf8(Vec::from(bytes)).map_err(|e| CallError::Kube(kube::Error::FromUtf8(e)))
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// Lists everything into the driver.
    pub fn run(self, driver: &mut Driver<'_>) -> anyhow::Result<()> {
        self.learn_cluster(driver);
        // `--registry-pull-secrets`: each Secret is read once per report.
        let mut secrets = std::collections::HashMap::new();
        let mut document = 0usize;
        let resources: Vec<Resource> = self.custom.iter().copied().chain(WORKLOADS).collect();
        for ns in &self.namespaces {
            for &r in &resources {
                let mut token: Option<String> = None;
                let mut pages = 0usize;
                let mut items = 0usize;
                loop {
                    let text = self
                        .runtime
                        .block_on(self.page(
                            r,
                            ns.as_deref(),
                            self.page_size,
                            token.as_deref(),
                            &driver.progress,
                        ))
                        .map_err(|e| self.describe(e, r, ns.as_deref()))?;
                    pages += 1;
                    // `--registry`: the page's images are looked up
                    // together (a page read twice: one object in memory at
                    // a time, as without it), then its objects judged.
                    if driver.wants_images() {
                        let mut wanted = std::collections::BTreeSet::new();
                        let mut own = std::collections::BTreeMap::new();
                        let _ = stream::for_each_item_of_type(
                            text.as_bytes(),
                            r.api_version,
                            r.kind,
                            &mut |value| {
                                let mut images = std::collections::BTreeSet::new();
                                driver.builder.unknown_images(&value, &mut images);
                                if self.pull_secrets && !images.is_empty() {
                                    self.pod_credentials(
                                        &value,
                                        &images,
                                        &mut secrets,
                                        driver,
                                        &mut own,
                                    );
                                }
                                wanted.extend(images);
                                Ok(())
                            },
                        );
                        driver.resolve_images_with(wanted, own);
                    }
                    let info = stream::for_each_item_of_type(text.as_bytes(), r.api_version, r.kind, &mut |value| {
                        let origin = Origin {
                            file: "<cluster>",
                            document,
                                    };
                        document += 1;
                        driver.add(&value, &origin)
                    })
                    .map_err(|e| match e {
                        StreamError::Stopped(StopError(m)) => anyhow!(m),
                        other => anyhow!(
                            "the API server at {} answered the list of {} with something that is not a list: {other}",
                            self.server,
                            r.display
                        ),
                    })?;
                    items += info.objects;
                    token = self.next_page(r, ns.as_deref(), pages, token, info.continue_token)?;
                    if token.is_none() {
                        break;
                    }
                    if pages.is_multiple_of(20) {
                        driver.progress.note(&format!(
                            "{}: {items} listed so far ({pages} pages)",
                            r.display
                        ));
                    }
                }
                driver.progress.note(&format!(
                    "{} in {}: {items} listed in {pages} page(s)",
                    r.display,
                    scope(ns.as_deref())
                ));
            }
        }
        Ok(())
    }

    /// For `--registry-pull-secrets`: adds to `own` the credentials the
    /// workload `value`'s `imagePullSecrets` give for the registry of each
    /// of its `images` (the first workload naming an image gives them).
    fn pod_credentials(
        &self,
        value: &Value,
        images: &std::collections::BTreeSet<String>,
        secrets: &mut std::collections::HashMap<
            (String, String),
            Option<crate::registry::Credentials>,
        >,
        driver: &Driver<'_>,
        own: &mut std::collections::BTreeMap<String, crate::registry::Credentials>,
    ) {
        let names = crate::images::pull_secret_names(driver.builder.policy(), value);
        let Some(namespace) = value.pointer("/metadata/namespace").and_then(Value::as_str) else {
            return;
        };
        if names.is_empty() {
            return;
        }
        let credentials = self.pull_credentials(namespace, &names, secrets, &driver.progress);
        for image in images {
            if let Some(c) = crate::registry::registry_of(image).and_then(|r| credentials.only(&r))
            {
                own.entry(image.clone()).or_insert(c);
            }
        }
    }

    /// Namespace labels (mode, isolation, opt-out), RuntimeClasses (with
    /// their handlers) and the Windows nodes (versions, builds), when the
    /// identity may list them; the report is still right without them,
    /// only less precise, so a refusal is a note, not an error.
    fn learn_cluster(&self, driver: &mut Driver<'_>) {
        let gmsa = self.gmsa.then_some(GMSA_CREDENTIAL_SPECS);
        for r in [NAMESPACES, RUNTIME_CLASSES, NODES].into_iter().chain(gmsa) {
            let mut token: Option<String> = None;
            let mut pages = 0u32;
            loop {
                let text = match self.runtime.block_on(self.page(
                    r,
                    None,
                    self.page_size,
                    token.as_deref(),
                    &driver.progress,
                )) {
                    Ok(t) => t,
                    Err(e) => {
                        driver.progress.note(&format!(
                            "note: {} (the report goes on without them)",
                            self.describe(e, r, None)
                        ));
                        break;
                    }
                };
                // The same reader as for files: a RuntimeClass keeps its
                // handler (Hyper-V relaxes the build rules), a Node is kept
                // only if it is a Windows node.
                let mut learn = |v: Value| {
                    driver.builder.learn_from(&v);
                    Ok(())
                };
                pages += 1;
                let next = match stream::for_each_item_of_type(
                    text.as_bytes(),
                    r.api_version,
                    r.kind,
                    &mut learn,
                ) {
                    Ok(info) => self.next_page(r, None, pages, token.take(), info.continue_token),
                    Err(_) => break,
                };
                match next {
                    Ok(Some(t)) => token = Some(t),
                    Ok(None) => {
                        // Listed in full: a name not seen does not exist.
                        if r.plural == gmsa::RESOURCE {
                            driver.builder.credential_specs_listed();
                        }
                        break;
                    }
                    Err(e) => {
                        driver
                            .progress
                            .note(&format!("note: {e:#} (the report goes on without them)"));
                        break;
                    }
                }
            }
        }
    }

    /// One list call, bounded by `--api-timeout` as a whole (the client
    /// bounds connecting and each silence by `--connect-timeout` and
    /// `--read-timeout`); says on stderr when it is slow.
    async fn page(
        &self,
        r: Resource,
        namespace: Option<&str>,
        limit: u32,
        token: Option<&str>,
        progress: &Progress,
    ) -> Result<String, CallError> {
        let call = self.list_call(r, namespace, limit, token);
        tokio::pin!(call);
        let deadline = tokio::time::Instant::now() + self.deadlines.call_timeout;
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + SLOW_CALL, SLOW_CALL);
        loop {
            tokio::select! {
                r = &mut call => return r,
                () = tokio::time::sleep_until(deadline) => {
                    return Err(CallError::Timeout(self.deadlines.call_timeout));
                }
                _ = tick.tick() => progress.note(&format!(
                    "still waiting for {} to list {} in {} ({}s; gives up after {:?}, --api-timeout)",
                    self.server,
                    r.display,
                    scope(namespace),
                    started.elapsed().as_secs(),
                    self.deadlines.call_timeout
                )),
            }
        }
    }

    async fn list_call(
        &self,
        r: Resource,
        namespace: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<String, CallError> {
        let path = match namespace {
            Some(ns) => format!("{}/namespaces/{ns}/{}", r.base, r.plural),
            None => format!("{}/{}", r.base, r.plural),
        };
        let mut lp = ListParams::default().limit(limit);
        if let Some(t) = token {
            lp = lp.continue_token(t);
        }
        let req = Request::new(path)
            .list(&lp)
            .map_err(|e| CallError::Kube(kube::Error::BuildRequest(e)))?;
        self.bounded_text(req).await
    }

    /// The token for the next page of `r` after `pages` pages, `None` when
    /// the list is complete. A token the API server repeats, or more than
    /// --max-pages pages, would never end: both stop the report.
    fn next_page(
        &self,
        r: Resource,
        namespace: Option<&str>,
        pages: impl TryInto<u32>,
        previous: Option<String>,
        next: Option<String>,
    ) -> anyhow::Result<Option<String>> {
        let Some(next) = next else {
            return Ok(None);
        };
        let what = r.display;
        let scope = scope(namespace);
        if previous.as_deref() == Some(next.as_str()) {
            return Err(anyhow!(
                "the API server at {} answered the list of {what} in {scope} with the same continue token twice; a list that repeats itself never ends",
                self.server
            ));
        }
        let pages = pages.try_into().unwrap_or(u32::MAX);
        if pages >= self.limits.max_pages {
            return Err(anyhow!(
                "the list of {what} in {scope} at {} did not end within {pages} pages (--max-pages); raise --max-pages or --page-size if the cluster really holds that many",
                self.server
            ));
        }
        Ok(Some(next))
    }

    /// A list call failed: say which verb on which resource, and what to do.
    fn describe(&self, err: CallError, r: Resource, namespace: Option<&str>) -> anyhow::Error {
        let scope = scope(namespace);
        let what = r.display;
        let err = match err {
            CallError::Kube(e) => e,
            CallError::TooLarge(limit) => {
                return anyhow!(
                    "too large: the API server at {} answered the list of {what} in {scope} with more than {limit} bytes (--max-response-bytes); lower --page-size, or raise --max-response-bytes if the objects really are that large",
                    self.server
                );
            }
            CallError::Timeout(t) => {
                return anyhow!(
                    "timed out: the API server at {} did not finish answering within {t:?} (--api-timeout) when asked to list {what} in {scope}; check that the cluster is healthy, or raise --api-timeout / lower --page-size",
                    self.server
                );
            }
        };
        match err {
            kube::Error::Api(status) => {
                let detail = if status.message.is_empty() {
                    String::new()
                } else {
                    format!(" (API server: {})", status.message)
                };
                match status.code {
                    403 => anyhow!(
                        "forbidden: cannot list {what} in {scope}{detail}; grant `list` on {what} to the kubeconfig's user, or narrow the report with --namespace"
                    ),
                    401 => anyhow!(
                        "unauthorized: the API server at {} rejected the credentials when asked to list {what} in {scope}{detail}; check the kubeconfig's user (an expired token?) or pick another --context",
                        self.server
                    ),
                    404 => anyhow!(
                        "not found: the API server at {} does not serve {what} ({}/{}){detail}; is the cluster older than the Kubernetes versions winadmit supports?",
                        self.server,
                        r.base,
                        r.plural
                    ),
                    410 => anyhow!(
                        "expired: the list of {what} in {scope} changed too much while it was being paged (continue token expired){detail}; run the report again"
                    ),
                    code => anyhow!(
                        "the API server at {} refused to list {what} in {scope}: HTTP {code} {}{detail}",
                        self.server,
                        status.reason
                    ),
                }
            }
            other => {
                let chain = error_chain(&other);
                if chain.contains("timed out") {
                    return anyhow!(
                        "timed out: the API server at {} did not answer when asked to list {what} in {scope} (no data within --read-timeout {:?}, or no connection within --connect-timeout {:?}): {chain:#}; check that the cluster is up and reachable",
                        self.server,
                        self.deadlines.read_timeout,
                        self.deadlines.connect_timeout
                    );
                }
                anyhow!(
                    "cannot reach the Kubernetes API server at {} to list {what} in {scope}: {chain:#}; check the kubeconfig's server address and that the cluster is up",
                    self.server
                )
            }
        }
    }
}

/// The live report's gMSA lookup: whether a pod's service account may
/// `use` the credential specs it names, asked with SubjectAccessReviews
/// (the answer cached for the run). When the report's identity may not
/// create them, or a call fails, the answer is unknown
/// (WIN-GMSA-AUTHZ-UNKNOWN), never "not authorized".
struct LiveGmsa {
    runtime: std::sync::Arc<tokio::runtime::Runtime>,
    client: Client,
    server: String,
    /// `--api-timeout`, per call.
    timeout: std::time::Duration,
    quiet: bool,
    answers: std::sync::Mutex<std::collections::HashMap<AuthzKey, Result<Authz, String>>>,
    /// Why SubjectAccessReviews may not be created (asked once).
    refused: std::sync::Mutex<Option<String>>,
}

impl crate::cluster::ClusterView for LiveGmsa {
    /// Namespace labels come from the listed Namespaces.
    fn label(&self, _namespace: &str, _key: &str) -> Option<String> {
        None
    }

    fn gmsa(&self, namespace: Option<&str>, account: &str, names: &[&str]) -> Option<gmsa::Facts> {
        let namespace = namespace?;
        let mut facts = gmsa::Facts::default();
        for name in names {
            let key = (namespace.to_owned(), account.to_owned(), (*name).to_owned());
            let known = self
                .answers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&key)
                .cloned();
            let answer = known.unwrap_or_else(|| {
                let answer = self.ask(namespace, account, name);
                self.answers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(key.clone(), answer.clone());
                answer
            });
            match answer {
                Ok(a) => {
                    facts.authz.insert(key, a);
                }
                Err(why) => {
                    facts.unasked.insert(key, why);
                }
            }
        }
        Some(facts)
    }
}

impl LiveGmsa {
    /// One SubjectAccessReview: may `account` in `namespace` use `name`?
    fn ask(&self, namespace: &str, account: &str, name: &str) -> Result<Authz, String> {
        use k8s_openapi::api::authorization::v1::SubjectAccessReview;
        if let Some(why) = self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return Err(why);
        }
        let review = SubjectAccessReview {
            spec: gmsa::use_review(namespace, account, name),
            ..Default::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let params = kube::api::PostParams::default();
        let call = async { tokio::time::timeout(self.timeout, api.create(&params, &review)).await };
        match self.runtime.block_on(call) {
            Ok(Ok(answer)) => {
                let status = answer.status.unwrap_or_default();
                Ok(Authz {
                    allowed: status.allowed && !status.denied.unwrap_or(false),
                    reason: status
                        .reason
                        .filter(|r| !r.is_empty())
                        .or(status.evaluation_error)
                        .unwrap_or_default(),
                })
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 403 || status.code == 401 => {
                let why = format!(
                    "the report's identity may not create subjectaccessreviews.authorization.k8s.io at {} (API server: {})",
                    self.server, status.message
                );
                if !self.quiet {
                    eprintln!(
                        "winadmit: note: {why}; whether service accounts may use the GMSACredentialSpecs their pods name is unknown (WIN-GMSA-AUTHZ-UNKNOWN)"
                    );
                }
                *self
                    .refused
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why.clone());
                Err(why)
            }
            Ok(Err(e)) => Err(format!(
                "the SubjectAccessReview failed at {}: {}",
                self.server,
                error_chain(&e)
            )),
            Err(_) => Err(format!(
                "no answer to the SubjectAccessReview from {} within {:?} (--api-timeout)",
                self.server, self.timeout
            )),
        }
    }
}

/// How often a slow call is reported on stderr.
const SLOW_CALL: std::time::Duration = std::time::Duration::from_secs(5);

/// Why one API call failed.
pub(super) enum CallError {
    Kube(kube::Error),
    /// `--api-timeout` passed before the whole answer arrived.
    Timeout(std::time::Duration),
    /// The answer was larger than `--max-response-bytes`.
    TooLarge(u64),
}

fn scope(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("namespace {ns}"),
        None => "all namespaces".to_owned(),
    }
}

fn scope_list(namespaces: &[Option<String>]) -> String {
    let names: Vec<String> = namespaces.iter().map(|n| scope(n.as_deref())).collect();
    names.join(", ")
}

async fn load_config(kubeconfig: Option<&Path>, context: Option<&str>) -> anyhow::Result<Config> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    // kube's errors repeat their cause at every level (and quote the path
    // twice): say once what was tried and the root cause.
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read kubeconfig {}: {}",
                    path.display(),
                    root_cause(&e)
                )
            })?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| anyhow::anyhow!("cannot use kubeconfig {}: {}", path.display(), root_cause(&e)))
        }
        None if context.is_some() => Config::from_kubeconfig(&options).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot load {} for --context: {}",
                default_kubeconfig(),
                root_cause(&e)
            )
        }),
        None => Config::infer().await.map_err(|e| {
            anyhow::anyhow!(
                "no cluster configuration found (not in a pod, and {}: {}): pass --kubeconfig, set $KUBECONFIG, or report from files with --from-file",
                default_kubeconfig(),
                root_cause(&e)
            )
        }),
    }
}

/// Where kube looks for a kubeconfig without --kubeconfig.
fn default_kubeconfig() -> String {
    match std::env::var_os("KUBECONFIG") {
        Some(k) => format!("$KUBECONFIG ({})", k.to_string_lossy()),
        None => std::env::var_os("HOME").map_or_else(
            || "~/.kube/config".to_owned(),
            |h| format!("{}/.kube/config", h.to_string_lossy()),
        ),
    }
}

/// The innermost cause of an error (kube wraps an I/O error in several
/// layers that each print it again).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut e = e;
    while let Some(next) = e.source() {
        e = next;
    }
    e.to_string()
}
