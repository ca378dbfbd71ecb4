//! Writing the reports: server-side apply (field manager
//! [`FIELD_MANAGER`]) of each report whose content hash differs from the
//! one in the cluster, deletes of reports no longer wanted, at most
//! `--report-writes-per-second`, and only while this replica leads.
//!
//! On taking the lead the writer lists the reports already in the cluster
//! (label `app.kubernetes.io/managed-by=winadmit`) with their content
//! hashes, so a new leader rewrites only what changed and deletes what a
//! killed leader left behind: nothing is lost, the reports converge.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;
use tokio::sync::watch;

use crate::entry::audit::{MANAGED_BY, ReportApi, hash_of};
use crate::entry::server::audit_metrics::AuditMetrics;

/// The field manager of the audit's server-side applies.
pub const FIELD_MANAGER: &str = "winadmit-audit";

/// A report: its namespace (`None`: the cluster report) and name.
pub type Key = (Option<String>, String);

pub struct Writer {
    client: Client,
    api: ReportApi,
    /// The reports in the cluster and their content hashes, as far as
    /// known (`None`: to be listed before writing).
    written: Option<BTreeMap<Key, String>>,
    gap: Duration,
    metrics: AuditMetrics,
    /// The last failure logged, to say each once.
    failing: Option<String>,
}

impl Writer {
    #[must_use]
    pub fn new(client: Client, api: ReportApi, per_second: u32, metrics: AuditMetrics) -> Self {
        Self {
            client,
            api,
            written: None,
            gap: Duration::from_secs(1) / per_second.max(1),
            metrics,
            failing: None,
        }
    }

    fn resource(&self, namespaced: bool) -> ApiResource {
        let api = self.api;
        ApiResource {
            group: api.group().to_owned(),
            version: api.version().to_owned(),
            api_version: format!("{}/{}", api.group(), api.version()),
            kind: api.kind(namespaced).to_owned(),
            plural: api.plural(namespaced).to_owned(),
        }
    }

    fn api_for(&self, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource(true)),
            None => Api::all_with(self.client.clone(), &self.resource(false)),
        }
    }

    /// Forget what is written (the lead was lost): list again before the
    /// next write.
    pub fn forget(&mut self) {
        self.written = None;
    }

    /// The reports in the cluster with the audit's label.
    async fn list(&self) -> Result<BTreeMap<Key, String>, kube::Error> {
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let mut out = BTreeMap::new();
        for namespaced in [true, false] {
            let api: Api<DynamicObject> =
                Api::all_with(self.client.clone(), &self.resource(namespaced));
            let list = api.list(&ListParams::default().labels(&selector)).await?;
            for item in list.items {
                let Some(name) = item.metadata.name.clone() else {
                    continue;
                };
                let hash = item
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(crate::entry::audit::HASH_ANNOTATION))
                    .cloned()
                    .unwrap_or_default();
                out.insert((item.metadata.namespace.clone(), name), hash);
            }
        }
        Ok(out)
    }

    /// Makes the cluster's reports `desired`, while `leader` says so.
    /// Returns how many reports the cluster holds as far as known.
    pub async fn reconcile(
        &mut self,
        desired: &BTreeMap<Key, Value>,
        leader: &watch::Receiver<bool>,
    ) -> usize {
        if !*leader.borrow() {
            self.written = None;
            return 0;
        }
        if self.written.is_none() {
            match self.list().await {
                Ok(w) => {
                    tracing::info!(
                        reports = w.len(),
                        "audit: leading; {} reports of winadmit in the cluster",
                        w.len()
                    );
                    self.written = Some(w);
                }
                Err(e) => {
                    self.failed(&e, "list");
                    return 0;
                }
            }
        }
        let Some(mut written) = self.written.take() else {
            return 0;
        };
        // The namespaces' reports first, the cluster's summary of them last.
        let ordered = desired
            .iter()
            .filter(|(k, _)| k.0.is_some())
            .chain(desired.iter().filter(|(k, _)| k.0.is_none()));
        for (key, report) in ordered {
            if !*leader.borrow() {
                return 0;
            }
            let hash = hash_of(report).unwrap_or_default();
            if written.get(key).map(String::as_str) == Some(hash) {
                continue;
            }
            let params = PatchParams::apply(FIELD_MANAGER).force();
            match self
                .api_for(key.0.as_deref())
                .patch(&key.1, &params, &Patch::Apply(report))
                .await
            {
                Ok(_) => {
                    self.metrics.write("applied");
                    written.insert(key.clone(), hash.to_owned());
                    self.failing = None;
                }
                Err(e) => self.failed(&e, "apply"),
            }
            tokio::time::sleep(self.gap).await;
        }
        let stale: Vec<Key> = written
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .cloned()
            .collect();
        for key in stale {
            if !*leader.borrow() {
                return 0;
            }
            match self
                .api_for(key.0.as_deref())
                .delete(&key.1, &DeleteParams::default())
                .await
            {
                Ok(_) => {
                    self.metrics.write("deleted");
                    written.remove(&key);
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    written.remove(&key);
                }
                Err(e) => self.failed(&e, "delete"),
            }
            tokio::time::sleep(self.gap).await;
        }
        let n = written.len();
        self.written = Some(written);
        n
    }

    fn failed(&mut self, e: &kube::Error, verb: &'static str) {
        self.metrics.write("failed");
        let resource = format!("{}.{}", self.api.plural(true), self.api.group());
        let hint = match e {
            kube::Error::Api(s) if s.code == 404 => format!(
                "the API server does not serve {resource}: install the CRDs (the chart's crds.install value, or charts/winadmit/crds/)"
            ),
            kube::Error::Api(s) if s.code == 403 => format!(
                "forbidden: grant get, list, create, patch and delete on {resource} to the audit's service account"
            ),
            _ => "retrying on the next pass".to_owned(),
        };
        let message = format!(
            "audit: cannot {verb} {resource}: {}; {hint}",
            crate::entry::errors::error_chain(e)
        );
        // Once per kind of failure, not per report.
        let kind = match e {
            kube::Error::Api(s) => format!("{verb} {}", s.code),
            _ => format!("{verb} connection"),
        };
        if self.failing.as_deref() != Some(kind.as_str()) {
            tracing::warn!("{message}");
            self.failing = Some(kind);
        }
    }
}
