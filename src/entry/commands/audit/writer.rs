//! Writing the reports: server-side apply (field manager
//! [`FIELD_MANAGER`]) of each report whose content differs from the one in
//! the cluster, deletes of reports no longer wanted, at most
//! `--report-writes-per-second`, and only while this replica leads.
//! Applies start at that pace with up to [`IN_FLIGHT`] at once, so the
//! pace, not one write's round trip, bounds how fast a first audit of many
//! namespaces is written; the cluster's report is written after every
//! namespace's has been answered.
//!
//! A wanted report is kept as its JSON text with what it says already
//! hashed ([`Wanted`]): the audit holds every namespace's report between
//! passes, and a report's results as a `serde_json::Value` take several
//! times their text (docs/BENCHMARKS.md, the audit's memory).
//!
//! On taking the lead, and again every `--report-verify-interval`, the
//! writer lists the reports in the cluster (label
//! `app.kubernetes.io/managed-by=winadmit`) and hashes what each says
//! ([`content_hash`]), so a new leader rewrites only what differs, deletes
//! what a killed leader left behind, and a report edited by anyone else
//! (its results emptied, its content-hash annotation kept) is put back
//! within that interval.
//!
//! Every write names its writer ([`WRITER_ANNOTATION`], this replica's name
//! in the Lease): the ValidatingAdmissionPolicy installed with the audit
//! refuses a write whose writer is not the Lease's holder, so a replica
//! paused past its Lease cannot finish a write once another leads. A
//! delete carries no object, so the writer first stamps the report with
//! its name (an update the policy checks), then deletes that version of it
//! (a precondition on its resourceVersion; the policy checks the stamped
//! writer again).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::failure::Failure;
use crate::entry::audit::{MANAGED_BY, ReportApi, WRITER_ANNOTATION, content_hash, hash_of};
use crate::entry::server::audit_metrics::AuditMetrics;

/// The field manager of the audit's server-side applies.
pub const FIELD_MANAGER: &str = "winadmit-audit";
/// The name of the ValidatingAdmissionPolicy that refuses a stale writer.
pub const WRITER_POLICY: &str = "winadmit-audit-writer";
/// Reports listed per call when verifying.
const PAGE: u32 = 50;
/// Applies in flight at most.
pub const IN_FLIGHT: usize = 8;

/// A report: its namespace (`None`: the cluster report) and name.
pub type Key = (Option<String>, String);

/// What a report in the cluster says: its content-hash annotation and the
/// hash of its content.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    annotation: String,
    content: u64,
}

impl Held {
    fn of(report: &Value) -> Self {
        Self {
            annotation: hash_of(report).unwrap_or_default().to_owned(),
            content: content_hash(report),
        }
    }
}

/// A report the audit wants in the cluster: its JSON text and what it
/// says, hashed once when it is built.
#[derive(Debug, Clone)]
pub struct Wanted {
    text: std::sync::Arc<str>,
    held: Held,
}

impl Wanted {
    #[must_use]
    pub fn new(report: &Value) -> Self {
        Self {
            text: serde_json::to_string(report).unwrap_or_default().into(),
            held: Held::of(report),
        }
    }

    /// The report as a tree, to write it.
    fn value(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

/// How one apply ended.
enum Applied {
    Done,
    Failed(kube::Error),
    /// Not sent: the lead was lost before its turn.
    NotLeading,
}

pub struct Writer {
    client: Client,
    api: ReportApi,
    /// This replica's name, written on every report.
    identity: String,
    /// The reports in the cluster as far as known (`None`: to be listed
    /// before writing).
    written: Option<BTreeMap<Key, Held>>,
    /// When `written` was listed; listed again after `verify_every`.
    listed: Instant,
    verify_every: Duration,
    gap: Duration,
    metrics: AuditMetrics,
    /// The last failure logged, to say each once.
    failing: Option<String>,
}

impl Writer {
    #[must_use]
    pub fn new(
        client: Client,
        api: ReportApi,
        identity: String,
        per_second: u32,
        verify_every: Duration,
        metrics: AuditMetrics,
    ) -> Self {
        Self {
            client,
            api,
            identity,
            written: None,
            listed: Instant::now(),
            verify_every,
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

    /// The reports in the cluster with the audit's label, and what each
    /// says, a page at a time.
    async fn list(&self) -> Result<BTreeMap<Key, Held>, kube::Error> {
        let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
        let mut out = BTreeMap::new();
        for namespaced in [true, false] {
            let api: Api<DynamicObject> =
                Api::all_with(self.client.clone(), &self.resource(namespaced));
            let mut params = ListParams::default().labels(&selector).limit(PAGE);
            loop {
                let list = api.list(&params).await?;
                for item in list.items {
                    let key = (item.metadata.namespace.clone(), item.metadata.name.clone());
                    let (ns, Some(name)) = key else { continue };
                    let Ok(value) = serde_json::to_value(&item) else {
                        continue;
                    };
                    out.insert((ns, name), Held::of(&value));
                }
                match list.metadata.continue_ {
                    Some(next) if !next.is_empty() => params = params.continue_token(&next),
                    _ => break,
                }
            }
        }
        Ok(out)
    }

    /// Makes the cluster's reports `desired`, while this replica leads:
    /// `leading` (the Lease, read before this round) and `leader` (the
    /// lease manager's flag, checked before each write). Returns how many
    /// reports the cluster holds as far as known.
    pub async fn reconcile(
        &mut self,
        desired: &BTreeMap<Key, Wanted>,
        leading: bool,
        leader: &watch::Receiver<bool>,
    ) -> usize {
        if !leading || !*leader.borrow() {
            self.written = None;
            return 0;
        }
        if self.written.is_some() && self.listed.elapsed() >= self.verify_every {
            self.written = None;
        }
        if self.written.is_none() {
            match self.list().await {
                Ok(w) => {
                    tracing::debug!(
                        reports = w.len(),
                        "audit: {} reports of winadmit in the cluster",
                        w.len()
                    );
                    self.written = Some(w);
                    self.listed = Instant::now();
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
        // The namespaces' reports first, the cluster's summary of them
        // last, once every namespace's write has been answered.
        let stale = |written: &BTreeMap<Key, Held>, (key, wanted): (&Key, &Wanted)| {
            (written.get(key) != Some(&wanted.held)).then(|| (key.clone(), wanted.clone()))
        };
        let namespaces: Vec<(Key, Wanted)> = desired
            .iter()
            .filter(|(k, _)| k.0.is_some())
            .filter_map(|entry| stale(&written, entry))
            .collect();
        if !self.apply_all(namespaces, &mut written, leader).await {
            return 0;
        }
        let cluster: Vec<(Key, Wanted)> = desired
            .iter()
            .filter(|(k, _)| k.0.is_none())
            .filter_map(|entry| stale(&written, entry))
            .collect();
        if !self.apply_all(cluster, &mut written, leader).await {
            return 0;
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
            match self.delete(&key).await {
                Ok(deleted) => {
                    if deleted {
                        self.metrics.write("deleted");
                    }
                    written.remove(&key);
                }
                Err(e) => {
                    if self.failed(&e, "delete") {
                        return 0;
                    }
                }
            }
            tokio::time::sleep(self.gap).await;
        }
        let n = written.len();
        self.written = Some(written);
        n
    }

    /// Applies `todo`, starting one every `gap` with at most [`IN_FLIGHT`]
    /// in flight, and records each success in `written`. `false`: the lead
    /// was lost or a write was fenced; the round stops (writes in flight
    /// are dropped, and written again next round if they did not land).
    async fn apply_all(
        &mut self,
        todo: Vec<(Key, Wanted)>,
        written: &mut BTreeMap<Key, Held>,
        leader: &watch::Receiver<bool>,
    ) -> bool {
        let start = tokio::time::Instant::now();
        let gap = self.gap;
        let sends = todo.into_iter().enumerate().map(|(i, (key, wanted))| {
            // Its annotation says it is current, its content says not:
            // edited by someone else.
            let tampered = written
                .get(&key)
                .is_some_and(|h| h.annotation == wanted.held.annotation);
            let api = self.api_for(key.0.as_deref());
            let identity = self.identity.clone();
            let leader = leader.clone();
            let after = gap.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
            let at = start.checked_add(after).unwrap_or(start);
            async move {
                tokio::time::sleep_until(at).await;
                if !*leader.borrow() {
                    return (key, wanted, tampered, Applied::NotLeading);
                }
                let mut report = wanted.value();
                report["metadata"]["annotations"][WRITER_ANNOTATION] = identity.into();
                let params = PatchParams::apply(FIELD_MANAGER).force();
                let done = match api.patch(&key.1, &params, &Patch::Apply(&report)).await {
                    Ok(_) => Applied::Done,
                    Err(e) => Applied::Failed(e),
                };
                (key, wanted, tampered, done)
            }
        });
        // Made now (each owns what it sends), started as they are polled.
        let sends: Vec<_> = sends.collect();
        let mut answers = futures::stream::iter(sends).buffer_unordered(IN_FLIGHT);
        while let Some((key, wanted, tampered, done)) = answers.next().await {
            match done {
                Applied::NotLeading => return false,
                Applied::Done => {
                    if tampered {
                        tracing::warn!(
                            report = %key.1,
                            namespace = key.0.as_deref().unwrap_or_default(),
                            "audit: the report {} was changed by someone else (its content no longer matches its {} annotation); written again",
                            key.1,
                            crate::entry::audit::HASH_ANNOTATION
                        );
                    }
                    self.metrics
                        .write(if tampered { "repaired" } else { "applied" });
                    written.insert(key, wanted.held);
                    self.failing = None;
                }
                Applied::Failed(e) => {
                    if self.failed(&e, "apply") {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Deletes a report as its writer: stamps it with this replica's name,
    /// then deletes that version. `false`: it was gone already.
    async fn delete(&self, key: &Key) -> Result<bool, kube::Error> {
        let api = self.api_for(key.0.as_deref());
        let stamp = json!({"metadata": {"annotations": {WRITER_ANNOTATION: self.identity}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let stamped = match api.patch(&key.1, &params, &Patch::Merge(&stamp)).await {
            Ok(o) => o,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => return Err(e),
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: stamped.metadata.resource_version,
                uid: stamped.metadata.uid,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&key.1, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Logs and counts a failed write or list. `true`: the write was
    /// refused because another replica holds the Lease; this round stops
    /// and the reports are listed again before the next.
    fn failed(&mut self, e: &kube::Error, verb: &'static str) -> bool {
        self.metrics.write("failed");
        let resource = format!("{}.{}", self.api.plural(true), self.api.group());
        if fenced(e) {
            // Once until a write succeeds, not per report or per pass.
            if self.failing.as_deref() != Some("fenced") {
                tracing::warn!(
                    identity = %self.identity,
                    "audit: cannot {verb} {resource}: refused by the ValidatingAdmissionPolicy {WRITER_POLICY}: another replica holds the Lease ({}); standing by",
                    Failure::detail(e)
                );
                self.failing = Some("fenced".to_owned());
            }
            self.written = None;
            return true;
        }
        let failure = Failure::of(e);
        let fix = match failure {
            // The resource itself, not one object, is not served.
            Failure::NotFound if not_served(e) => format!(
                "the API server does not serve {resource}: install the report CRDs (the chart value audit.installCRDs=true, or kubectl apply --server-side -f charts/winadmit/files/crds/)"
            ),
            _ => failure.fix(&resource, "get, list, create, patch and delete"),
        };
        let message = format!(
            "audit: cannot {verb} {resource}: {} ({}); {fix}; retrying on the next pass",
            failure.what(),
            Failure::detail(e)
        );
        // Once per kind of failure, not per report.
        let kind = format!("{verb} {failure:?}");
        if self.failing.as_deref() != Some(kind.as_str()) {
            tracing::warn!("{message}");
            self.failing = Some(kind);
        }
        false
    }
}

/// A write refused by the policy that admits only the Lease's holder.
fn fenced(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.message.contains(WRITER_POLICY))
}

/// A 404 for the resource rather than for one object: the API server
/// does not serve it (its CRD is not installed).
fn not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404
        && s.message.contains("could not find the requested resource"))
}
