//! `report` against a live cluster: paginated list calls through kube-rs,
//! owners before the objects they own, each page parsed as raw JSON (no
//! typed structs, so no field is dropped) and handed to the builder item by
//! item. Memory is bounded by the page size (`--page-size`, default 500).
//!
//! The list calls and their errors are in `calls`, finding custom resources
//! in `discover`, the gMSA lookup in `gmsa_lookup`, `--registry-pull-secrets` in
//! `pull_secrets` and the kubeconfig in `config`.

mod calls;
pub(crate) mod config;
mod discover;
mod exceptions;
mod gmsa_lookup;
mod pull_secrets;

use std::path::Path;

use anyhow::{Context as _, anyhow};
use kube::Client;
use serde_json::Value;

use super::{Driver, Progress};
use crate::decision::gmsa;
use crate::entry::cli::{ApiDeadlines, ApiLimits};
use crate::input::source::json::{self, StopError, StreamError};
use crate::render::report::Origin;
use config::load_config;

/// A listable resource.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resource {
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
pub(crate) const WORKLOADS: [Resource; 8] = [
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
    /// `--windows-build`: the build every Windows node is taken to run.
    windows_build: Option<String>,
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
        // kube's rustls needs a process-wide provider; another entry point may have
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
            windows_build: None,
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

    /// `--registry-pull-secrets`.
    pub fn with_pull_secrets(mut self, on: bool) -> Self {
        self.pull_secrets = on;
        self
    }

    /// `--windows-build`.
    pub fn with_windows_build(mut self, build: Option<String>) -> Self {
        if let Some(b) = &build {
            tracing::debug!(build = %b, "what-if: the Windows nodes' build replaced");
        }
        self.windows_build = build;
        self
    }

    /// Custom resource groups the report had to leave out.
    pub fn undiscovered(&self) -> &[String] {
        &self.undiscovered
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
                    self.resolve_page_images(&text, r, &mut secrets, driver);
                    let info = json::for_each_item_of_type(text.as_bytes(), r.api_version, r.kind, &mut |value| {
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

    /// `--registry`: the page's images are looked up together (a page read
    /// twice: one object in memory at a time, as without it), before its
    /// objects are judged.
    fn resolve_page_images(
        &self,
        text: &str,
        r: Resource,
        secrets: &mut std::collections::HashMap<
            (String, String),
            Option<crate::input::registry::Credentials>,
        >,
        driver: &mut Driver<'_>,
    ) {
        if !driver.wants_images() {
            return;
        }
        let mut wanted = std::collections::BTreeSet::new();
        let mut own = std::collections::BTreeMap::new();
        let _ = json::for_each_item_of_type(text.as_bytes(), r.api_version, r.kind, &mut |value| {
            let mut images = std::collections::BTreeSet::new();
            driver.builder.unknown_images(&value, &mut images);
            if self.pull_secrets && !images.is_empty() {
                self.pod_credentials(&value, &images, secrets, driver, &mut own);
            }
            wanted.extend(images);
            Ok(())
        });
        driver.resolve_images_with(wanted, own);
    }

    /// Namespace labels (mode, isolation, opt-out), RuntimeClasses (with
    /// their handlers) and the Windows nodes (versions, builds), when the
    /// identity may list them; the report is still right without them,
    /// only less precise, so a refusal is a note, not an error.
    fn learn_cluster(&self, driver: &mut Driver<'_>) {
        let gmsa = self.gmsa.then_some(GMSA_CREDENTIAL_SPECS);
        let mut windows_nodes = 0usize;
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
                let build = self.windows_build.as_deref();
                let mut learn = |mut v: Value| {
                    if let Some(b) = build
                        && what_if_build(&mut v, b)
                    {
                        windows_nodes += 1;
                    }
                    driver.builder.learn_from(&v);
                    Ok(())
                };
                pages += 1;
                let next = match json::for_each_item_of_type(
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
        if let Some(build) = &self.windows_build {
            if windows_nodes == 0 {
                // No Windows node to replace: one of the build is assumed.
                let mut node = serde_json::json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "what-if", "labels": {"kubernetes.io/os": "windows"}}
                });
                what_if_build(&mut node, build);
                driver.builder.learn_from(&node);
            }
            driver.progress.note(&format!(
                "what-if: the Windows nodes' build is {build} (--windows-build; {windows_nodes} Windows node(s) in the cluster)"
            ));
        }
    }
}

/// `--windows-build`: sets the build label of a Windows Node; true when
/// `node` is one.
fn what_if_build(node: &mut Value, build: &str) -> bool {
    if node.get("kind").and_then(Value::as_str) != Some("Node") {
        return false;
    }
    let Some(labels) = node
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let windows = ["kubernetes.io/os", "beta.kubernetes.io/os"]
        .iter()
        .any(|k| labels.get(*k).and_then(Value::as_str) == Some("windows"));
    if windows {
        labels.insert(
            crate::decision::windows_builds::WINDOWS_BUILD_LABEL.to_owned(),
            build.into(),
        );
    }
    windows
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
