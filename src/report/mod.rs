//! Dry-run reports: what the webhook would deny, warn about or change, for
//! every workload in a cluster, a file, or a `POST /report` body.
//!
//! This module is the pure part (no I/O, no clock, no client): objects in,
//! [`ObjectReport`]s and a [`ReportSummary`] out. It calls the same
//! [`engine::evaluate`] and [`patch::mutation`] as `lint` and the webhook,
//! and decides with [`crate::decide::decide`] (the settled patch, then the
//! verdict after it), so a report says
//! exactly what admission would do.
//!
//! The [`ReportBuilder`] takes objects one at a time and hands back the
//! per-object results for the caller to write out at once, so memory is
//! bounded by what the output format must keep, not by the input size.
//!
//! # Folding owned objects
//!
//! A Pod owned (controller `ownerReference`) by a ReplicaSet, Job, DaemonSet,
//! StatefulSet or ReplicationController, a ReplicaSet owned by a Deployment
//! and a Job owned by a CronJob are *folded* into their owner: not reported
//! (likewise for the custom resources of [`crate::workload::CUSTOM_RESOURCES`]:
//! a ReplicaSet of an Argo Rollout, a Job of a KEDA ScaledJob or OpenKruise
//! AdvancedCronJob, a Pod of a CloneSet or BroadcastJob)
//! on their own, only counted in `summary.folded`. They are reported anyway
//! when they *differ* from the owner, meaning the report would say something
//! different about them: a different set of findings (rule, severity and
//! field relative to the pod spec), a different Windows targeting, a
//! different exemption or different skipped rules. Objects whose owner does
//! not appear in the input are reported with `owner` set. An owned object
//! that arrives before its owner is held until the end of the input (the
//! live mode lists owners first, so this only happens with files that list
//! Pods first).

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::KnownCluster;
use crate::decide;
use crate::engine::{Context, Evaluation, Skipped};
use crate::finding::{PatchOperation, Severity};
use crate::output::{InputProblem, LintFinding, ObjectId};
use crate::policy::{Mode, Policy};
use crate::workload::{Kind, Workload, type_of};

pub mod body;
mod files;
pub mod format;
pub mod run;
/// JSON objects as a stream: the manifest reader's ([`crate::source::json`]).
pub use crate::source::json as stream;

pub use crate::decide::Verdict;
pub use run::{Driver, Input, Progress, run};

/// Where an object came from, for the `file`/`line`/`column`/`document`
/// fields of its findings.
pub struct Origin<'a> {
    /// A file name, `<stdin>`, `<cluster>` or `<request>`.
    pub file: &'a str,
    /// Index of the object in its input.
    pub document: usize,
}

/// One workload's dry-run result: the `objects[]` entries of `/report` and
/// `report --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    /// The controller that owns this object (`ReplicaSet/web-7d4f`), when
    /// it was not folded into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Why there was nothing to check (an Argo Rollout whose pod template
    /// is another workload's, through `spec.workloadRef`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub targets_windows: bool,
    /// Why the object is (or is not) taken for a Windows workload, e.g.
    /// `nodeSelector kubernetes.io/os=windows`; `null` when nothing pins an OS.
    pub target_reason: Option<String>,
    pub verdict: Verdict,
    /// The mode the verdict was decided in (before per-rule modes).
    pub mode: Mode,
    /// Why policy exempts the whole object, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exempt: Option<String>,
    /// Rules the object opted out of by annotation, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// Why the verdict is not what the findings alone would give: the
    /// exemption and its reason, the mode that admits errors, the patch
    /// operations that remove errors or warnings. Empty when the findings
    /// speak for themselves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
    /// Same fields as `lint --format json` findings; `line`/`column` are 0
    /// when the object did not come from a file with positions.
    pub findings: Vec<LintFinding>,
    /// The JSON Patch (RFC 6902) `/mutate` would return; empty when none.
    pub patch: Vec<PatchOperation>,
    /// One line per patch operation saying what it does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub patch_reasons: Vec<String>,
    /// The object with the patch applied, when there is a patch and the
    /// caller asked for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patched_object: Option<Value>,
    /// JSON Pointer of each finding's field (for locating it in a file).
    #[serde(skip)]
    pub pointers: Vec<String>,
}

impl ObjectReport {
    /// `Kind namespace/name`.
    #[must_use]
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    #[must_use]
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }
}

/// The labels of the cluster's namespaces, when a door knows them (the
/// webhook's cache for `POST /report`), and the gMSA facts of a workload
/// when the door can ask the cluster ([`crate::cluster::ClusterView::gmsa`]:
/// the live `report`, the webhook's `POST /report`).
#[derive(Clone)]
pub struct NamespaceLookup(pub std::sync::Arc<dyn crate::cluster::ClusterView>);

impl std::fmt::Debug for NamespaceLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NamespaceLookup")
    }
}

/// Options that change what a report says.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Preview every object in this mode (`--mode`); per-rule modes from the
    /// policy still apply. `None`: the policy's mode, or the namespace's
    /// mode label when the namespace is known.
    pub mode: Option<Mode>,
    /// Include `patchedObject` (costs a copy of each patched object).
    pub patched_objects: bool,
    /// Fold owned objects into their owners (see the module docs).
    pub fold: bool,
    /// Only report objects in these namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// Namespace labels (mode, opt-out) for namespaces the input does not
    /// carry as objects.
    pub namespace_lookup: Option<NamespaceLookup>,
}

/// Counts for one namespace (`namespace: null` for objects without one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSummary {
    pub namespace: Option<String>,
    pub objects: usize,
    pub windows_workloads: usize,
    pub folded: usize,
    pub deny: usize,
    pub warn: usize,
    pub allow: usize,
    pub errors: usize,
    pub warnings: usize,
}

/// Counts for one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSummary {
    pub rule: String,
    pub title: String,
    pub severity: Severity,
    /// Findings of this rule in reported objects.
    pub findings: usize,
    /// Reported objects with at least one finding of this rule.
    pub objects: usize,
}

/// Verdict counts over reported objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictCounts {
    pub deny: usize,
    pub warn: usize,
    pub allow: usize,
}

/// The `summary` of a report. Counts of findings and verdicts are over
/// reported objects (folded objects are counted in `folded` only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportSummary {
    /// The target cluster the verdicts are about, with where each fact came from.
    pub target: crate::cluster::Cluster,
    /// `--mode`, when the report previews one.
    pub mode: Option<Mode>,
    /// Workloads evaluated (reported + folded).
    pub objects: usize,
    /// Workloads reported in `objects`.
    pub reported: usize,
    /// Owned workloads folded into their owner.
    pub folded: usize,
    pub windows_workloads: usize,
    /// Objects read that are not workloads (ConfigMaps, Namespaces, ...).
    pub other_objects: usize,
    pub verdicts: VerdictCounts,
    pub errors: usize,
    pub warnings: usize,
    /// Advice (level info): never changes a verdict.
    pub infos: usize,
    pub input_errors: usize,
    /// Per namespace, in name order (objects without a namespace first).
    pub namespaces: Vec<NamespaceSummary>,
    /// Per rule with findings, most findings first.
    pub rules: Vec<RuleSummary>,
}

/// Where an object in the owner registry ended up.
#[derive(Debug, Clone)]
struct OwnerEntry {
    signature: u64,
}

/// An owned object whose owner has not been seen yet.
struct Pending {
    owner_key: String,
    signature: u64,
    self_key: Option<String>,
    report: ObjectReport,
}

/// At most this many input problems are kept with their messages (all are counted).
pub const MAX_INPUT_PROBLEMS: usize = 1000;

/// Builds a report one object at a time. See the module docs.
pub struct ReportBuilder<'p> {
    policy: &'p Policy,
    cluster: crate::cluster::Cluster,
    /// Namespaces, RuntimeClasses and Windows nodes seen in the input.
    known: KnownCluster,
    /// What registries say of the images (`--image-facts`).
    images: Option<crate::images::KnownImages>,
    options: ReportOptions,
    owners: HashMap<String, OwnerEntry>,
    pending: Vec<Pending>,
    namespaces: BTreeMap<Option<String>, NamespaceSummary>,
    rules: HashMap<&'static str, RuleSummary>,
    summary: ReportSummary,
    input_problems: Vec<InputProblem>,
    /// The operation is a CREATE (fields immutable on pods may be set by
    /// the patch). Reports of existing objects preview a fresh apply: `true`.
    pub create: bool,
    /// The requesting user and groups (an AdmissionReview body): an exempt
    /// user's objects are allowed untouched, as `/validate` would.
    pub user: Option<(String, Vec<String>)>,
    /// Learn from the cluster objects given to [`ReportBuilder::add`], for
    /// the objects after them (`false` for an input whose cluster objects
    /// a first pass gave to [`ReportBuilder::learnt`]).
    pub learn_in_order: bool,
}

/// What happened to one object given to [`ReportBuilder::add`].
#[derive(Debug)]
pub enum Added {
    /// Report this now (already counted in the summary).
    Report(Box<ObjectReport>),
    /// Folded into its owner, or held until its owner shows up.
    Held,
    /// Not a workload (counted in `otherObjects`), or not a valid object
    /// (counted in `inputErrors`).
    Other,
}

impl<'p> ReportBuilder<'p> {
    #[must_use]
    pub fn new(policy: &'p Policy, cx: &Context<'_>, options: ReportOptions) -> Self {
        let summary = ReportSummary {
            target: cx.cluster.clone(),
            mode: options.mode,
            ..ReportSummary::default()
        };
        Self {
            policy,
            cluster: cx.cluster.clone(),
            known: KnownCluster {
                runtime_classes: cx.runtime_classes.cloned().unwrap_or_default(),
                nodes: cx.nodes.cloned().unwrap_or_default(),
                ..KnownCluster::default()
            },
            images: cx.images.cloned(),
            options,
            owners: HashMap::new(),
            pending: Vec::new(),
            namespaces: BTreeMap::new(),
            rules: HashMap::new(),
            summary,
            input_problems: Vec::new(),
            create: true,
            user: None,
            learn_in_order: true,
        }
    }

    #[must_use]
    pub fn options(&self) -> &ReportOptions {
        &self.options
    }

    /// Learns that RuntimeClass `name` pins `os` (for targeting by
    /// `runtimeClassName`).
    pub fn runtime_class(&mut self, name: impl Into<String>, os: crate::targeting::Os) {
        self.known.runtime_classes.insert(name, os);
    }

    /// The cluster's GMSACredentialSpecs have been listed in full (the live
    /// report): a name not among those learnt does not exist, even when
    /// the cluster has none.
    pub fn credential_specs_listed(&mut self) {
        self.known
            .gmsa
            .get_or_insert_with(crate::gmsa::Facts::default)
            .complete = true;
    }

    /// Records an input problem (a document that could not be read).
    pub fn input_problem(&mut self, problem: InputProblem) {
        self.summary.input_errors += 1;
        if self.input_problems.len() < MAX_INPUT_PROBLEMS {
            self.input_problems.push(problem);
        }
    }

    /// Adds one object. Namespaces and RuntimeClasses in the input are
    /// remembered for the objects after them.
    pub fn add(&mut self, value: &Value, origin: &Origin<'_>) -> Added {
        let (api_version, kind) = type_of(value).unwrap_or_default();
        let Some(_) = self.policy.pod_templates.kind_of(api_version, kind) else {
            if self.learn_in_order {
                self.learn(value);
            }
            self.summary.other_objects += 1;
            return Added::Other;
        };
        if !self.options.namespaces.is_empty() {
            let ns = value.pointer("/metadata/namespace").and_then(Value::as_str);
            if !ns.is_some_and(|ns| self.options.namespaces.iter().any(|n| n == ns)) {
                return Added::Other;
            }
        }
        let view = match self.policy.pod_templates.read(value) {
            Ok(v) => v,
            Err(e) => {
                self.input_problem(InputProblem {
                    file: origin.file.to_owned(),
                    line: None,
                    column: None,
                    message: format!("document {}: {e}", origin.document),
                });
                return Added::Other;
            }
        };
        let Some(workload) = Workload::from_view(&view) else {
            self.summary.other_objects += 1;
            return Added::Other;
        };
        self.summary.objects += 1;
        let (report, signature) = self.evaluate(value, &workload, origin);
        let self_key = owner_capable(workload.kind)
            .then(|| object_key(workload.namespace, workload.kind_name, workload.name));
        let owner = self
            .options
            .fold
            .then(|| controller_of(value, workload.kind))
            .flatten();
        match owner {
            Some((owner_kind, owner_name)) => {
                let owner_key = object_key(workload.namespace, &owner_kind, &owner_name);
                let mut report = report;
                report.owner = Some(format!("{owner_kind}/{owner_name}"));
                match self.owners.get(&owner_key) {
                    Some(entry) => {
                        let same = entry.signature == signature;
                        self.fold_or_report(report, signature, self_key, same)
                    }
                    None => {
                        self.pending.push(Pending {
                            owner_key,
                            signature,
                            self_key,
                            report,
                        });
                        Added::Held
                    }
                }
            }
            None => self.fold_or_report(report, signature, self_key, false),
        }
    }

    /// Registers an object as a possible owner and either folds or reports it.
    fn fold_or_report(
        &mut self,
        report: ObjectReport,
        signature: u64,
        self_key: Option<String>,
        fold: bool,
    ) -> Added {
        if let Some(key) = self_key {
            self.owners.insert(key, OwnerEntry { signature });
        }
        if fold {
            self.summary.folded += 1;
            self.namespace_entry(report.namespace.as_deref()).folded += 1;
            return Added::Held;
        }
        self.count(&report);
        Added::Report(Box::new(report))
    }

    /// Ends the input: owned objects whose owner came after them are folded
    /// or reported now. Returns those to report, and the summary.
    pub fn finish(mut self) -> Finished {
        let mut out = self.resolve_pending();
        for p in std::mem::take(&mut self.pending) {
            if let Added::Report(r) = self.fold_or_report(p.report, p.signature, p.self_key, false)
            {
                out.push(*r);
            }
        }
        let mut summary = self.summary;
        summary.namespaces = self.namespaces.into_values().collect();
        let mut rules: Vec<RuleSummary> = self.rules.into_values().collect();
        rules.sort_by(|a, b| {
            b.findings
                .cmp(&a.findings)
                .then_with(|| a.rule.cmp(&b.rule))
        });
        summary.rules = rules;
        Finished {
            objects: out,
            summary,
            input_errors: self.input_problems,
        }
    }

    /// Folds or reports the held objects whose owner has shown up (an
    /// input read whole calls this at its end, so its reports get their
    /// positions); the others stay held until [`ReportBuilder::finish`].
    pub fn resolve_pending(&mut self) -> Vec<ObjectReport> {
        let mut out = Vec::new();
        // Owners may themselves have been pending (Pod -> ReplicaSet -> Deployment).
        loop {
            let before = self.pending.len();
            let pending = std::mem::take(&mut self.pending);
            for p in pending {
                match self.owners.get(&p.owner_key) {
                    Some(entry) => {
                        let same = entry.signature == p.signature;
                        if let Added::Report(r) =
                            self.fold_or_report(p.report, p.signature, p.self_key, same)
                        {
                            out.push(*r);
                        }
                    }
                    None => self.pending.push(p),
                }
            }
            if self.pending.len() == before || self.pending.is_empty() {
                break;
            }
        }
        out
    }

    /// Learns from a Namespace (its mode and isolation labels) or a
    /// RuntimeClass (the OS it pins) in the input.
    pub fn learn_from(&mut self, value: &Value) {
        self.learn(value);
    }

    /// Learns what a first pass found in the input (the manifest reader's,
    /// [`crate::source::prescan`]), for every object of it.
    pub fn learnt(&mut self, known: KnownCluster) {
        let nodes_before = self.known.nodes.nodes.len();
        self.known.absorb(known);
        self.nodes_changed(nodes_before);
    }

    fn learn(&mut self, value: &Value) {
        let nodes_before = self.known.nodes.nodes.len();
        self.known.learn(value);
        self.nodes_changed(nodes_before);
    }

    fn nodes_changed(&mut self, nodes_before: usize) {
        if self.known.nodes.nodes.len() != nodes_before {
            // The report's header names the facts the verdicts used.
            let all: Vec<&crate::cluster::WindowsNode> = self.known.nodes.nodes.iter().collect();
            self.summary.target = self
                .cluster
                .narrowed(&crate::cluster::WindowsNodes::observed(&all));
        }
    }

    /// What the door looks up of the credential specs `workload` names
    /// (over what the input showed), when it can; `None` otherwise.
    fn gmsa_looked_up(&self, workload: &Workload<'_, '_>) -> Option<crate::gmsa::Facts> {
        let lookup = self.options.namespace_lookup.as_ref()?;
        let spec = workload.spec?;
        let names: Vec<&str> = crate::gmsa::names(spec).into_iter().collect();
        if names.is_empty() {
            return None;
        }
        let looked = lookup.0.gmsa(
            workload.namespace,
            crate::gmsa::service_account(spec),
            &names,
        )?;
        let mut facts = self.known.gmsa.clone().unwrap_or_default();
        facts.absorb(looked);
        Some(facts)
    }

    fn evaluate(
        &self,
        value: &Value,
        workload: &Workload<'_, '_>,
        origin: &Origin<'_>,
    ) -> (ObjectReport, u64) {
        let looked = self.gmsa_looked_up(workload);
        let cx = Context {
            cluster: self.cluster.clone(),
            runtime_classes: Some(&self.known.runtime_classes),
            nodes: (!self.known.nodes.is_empty()).then_some(&self.known.nodes),
            images: self.images.as_ref(),
            gmsa: looked.as_ref().or(self.known.gmsa.as_ref()),
        };
        // What the input showed, then what the webhook's cache knows.
        let labels = |ns: &str, key: &str| {
            self.known
                .label(ns, key)
                .or_else(|| self.options.namespace_lookup.as_ref()?.0.label(ns, key))
        };
        // The same settled patch /mutate returns, and the verdict /validate
        // gives once it is applied (mutating admission runs first).
        let request = decide::Request {
            labels: &labels,
            mode: self.options.mode,
            user: self
                .user
                .as_ref()
                .map(|(name, groups)| (name.as_str(), groups.as_slice())),
            operation: if self.create {
                decide::Operation::Create
            } else {
                decide::Operation::Update {
                    old: None,
                    ephemeral: false,
                }
            },
            patch: decide::PatchSource::Preview(value),
            reach: true,
        };
        let decision = decide::decide(self.policy, &cx, workload, &request);
        let signature = signature(workload, &decision.evaluation);
        let why = verdict_reasons(&decision);
        let verdict = decision.verdict;
        let mode = decision.mode.unwrap_or(self.policy.mode);
        let exempt = decision.exemption.as_ref().map(|e| e.reason().to_owned());
        let eval = decision.evaluation;
        let mutation = decision.patch;
        let patched_object = decision.patched.filter(|_| self.options.patched_objects);
        let findings = eval
            .findings
            .iter()
            .map(|f| {
                let id = ObjectId {
                    api_version: workload.api_version,
                    kind: workload.kind_name,
                    namespace: workload.namespace,
                    name: workload.name,
                };
                LintFinding::new(origin.file, origin.document, id, f)
            })
            .collect();
        let report = ObjectReport {
            api_version: workload.api_version.to_owned(),
            kind: workload.kind_name.to_owned(),
            namespace: workload.namespace.map(str::to_owned),
            name: workload.name.to_owned(),
            owner: None,
            note: workload.note(),
            targets_windows: eval.target.is_windows(),
            target_reason: eval.target.reason(),
            verdict,
            mode,
            exempt,
            skipped: eval.skipped,
            why,
            findings,
            patch: mutation.ops,
            patch_reasons: mutation.explanations,
            patched_object,
            pointers: eval.findings.iter().map(|f| f.field.pointer()).collect(),
        };
        (report, signature)
    }

    fn namespace_entry(&mut self, namespace: Option<&str>) -> &mut NamespaceSummary {
        let key = namespace.map(str::to_owned);
        self.namespaces
            .entry(key.clone())
            .or_insert_with(|| NamespaceSummary {
                namespace: key,
                ..NamespaceSummary::default()
            })
    }

    fn count(&mut self, r: &ObjectReport) {
        let s = &mut self.summary;
        s.reported += 1;
        let errors = r.errors();
        let infos = r
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Info)
            .count();
        let warnings = r.findings.len() - errors - infos;
        s.errors += errors;
        s.warnings += warnings;
        s.infos += infos;
        if r.targets_windows {
            s.windows_workloads += 1;
        }
        match r.verdict {
            Verdict::Deny => s.verdicts.deny += 1,
            Verdict::Warn => s.verdicts.warn += 1,
            Verdict::Allow => s.verdicts.allow += 1,
        }
        let ns = self.namespace_entry(r.namespace.as_deref());
        ns.objects += 1;
        ns.errors += errors;
        ns.warnings += warnings;
        if r.targets_windows {
            ns.windows_workloads += 1;
        }
        match r.verdict {
            Verdict::Deny => ns.deny += 1,
            Verdict::Warn => ns.warn += 1,
            Verdict::Allow => ns.allow += 1,
        }
        let mut seen: Vec<&'static str> = Vec::new();
        for f in &r.findings {
            let entry = self.rules.entry(f.rule).or_insert_with(|| RuleSummary {
                rule: f.rule.to_owned(),
                title: f.title.to_owned(),
                severity: f.severity,
                findings: 0,
                objects: 0,
            });
            entry.findings += 1;
            // A rule's severity is one per policy; keep the strongest seen.
            entry.severity = entry.severity.max(f.severity);
            if !seen.contains(&f.rule) {
                seen.push(f.rule);
                entry.objects += 1;
            }
        }
    }
}

/// The end of a report: objects still to write, the summary, and the input
/// problems.
#[derive(Debug)]
pub struct Finished {
    pub objects: Vec<ObjectReport>,
    pub summary: ReportSummary,
    pub input_errors: Vec<InputProblem>,
}

/// A whole report in memory: the `/report` answer, and the shape of
/// `report --format json` (which streams the same fields).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub objects: Vec<ObjectReport>,
    pub input_errors: Vec<InputProblem>,
    pub summary: ReportSummary,
}

/// `apiVersion` of the JSON report.
pub const REPORT_API_VERSION: &str = "winadmit.io/v1alpha1";
/// `kind` of the JSON report.
pub const REPORT_KIND: &str = "Report";

/// Why a decision's verdict is not what its findings alone say (errors
/// deny, warnings warn): see [`ObjectReport::why`].
fn verdict_reasons(d: &decide::Decision) -> Vec<String> {
    use decide::{Exemption, Outcome};
    let mut out = Vec::new();
    match &d.exemption {
        Some(Exemption::User(r)) => out.push(format!("allowed: {r}, so nothing is checked")),
        Some(Exemption::Policy(r)) => out.push(format!(
            "allowed: exempt ({r}), so no rule applies to it"
        )),
        Some(Exemption::Reach(r)) => out.push(format!(
            "allowed: {r}, so admission never checks it; the findings are what the webhook would say if it did"
        )),
        None => {}
    }
    // The findings the patch removes: /validate sees the patched object.
    let removed = |f: &crate::finding::Finding| {
        d.after.as_ref().is_some_and(|after| {
            let field = f.field.to_string();
            !after
                .findings
                .iter()
                .any(|a| a.rule == f.rule && a.field.to_string() == field)
        })
    };
    let listed = |outcome: Outcome, severity: Option<Severity>| -> Vec<String> {
        d.counted_findings()
            .filter(|(f, c)| {
                c.outcome == outcome && severity.is_none_or(|s| f.severity == s) && !removed(f)
            })
            .map(|(f, _)| format!("{} at {}", f.rule, f.field))
            .collect()
    };
    let warned = listed(Outcome::Warn, Some(Severity::Error));
    if !warned.is_empty() {
        out.push(format!(
            "mode warn: {} admitted with a warning instead of denied",
            warned.join(", ")
        ));
    }
    let audited = listed(Outcome::Audit, None);
    if !audited.is_empty() {
        out.push(format!(
            "mode audit: {} admitted without a warning, recorded in the audit annotation, logs and metrics",
            audited.join(", ")
        ));
    }
    for (f, c) in d.counted_findings() {
        // A warning the patch removes leaves a warning (the patch's own).
        if c.outcome != Outcome::Deny || !removed(f) {
            continue;
        }
        let marker = format!("({}: {})", f.rule, f.field);
        let rule_marker = format!("({}: ", f.rule);
        let by_field: Vec<String> = operations(&d.patch, |why| why.contains(&marker));
        let ops = if by_field.is_empty() {
            operations(&d.patch, |why| why.contains(&rule_marker))
        } else {
            by_field
        };
        out.push(format!(
            "patched: {} removes the {} {} at {}",
            if ops.is_empty() {
                "the patch".to_owned()
            } else {
                ops.join(", ")
            },
            f.severity.as_str(),
            f.rule,
            f.field
        ));
    }
    let still_warned = d
        .counted_findings()
        .any(|(f, c)| c.outcome == Outcome::Warn && !removed(f));
    if d.verdict == Verdict::Warn && !d.patch.is_empty() && !still_warned {
        out.push(
            "warn: the mutating webhook changes the object and returns one admission warning per change"
                .to_owned(),
        );
    }
    out
}

/// The operations of `m` whose explanation `wanted` accepts, as
/// `remove /spec/...`.
fn operations(m: &crate::patch::Mutation, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    m.ops
        .iter()
        .zip(&m.explanations)
        .filter(|(_, why)| wanted(why))
        .map(|(op, _)| format!("{} {}", op_name(op), op.path()))
        .collect()
}

/// The RFC 6902 name of an operation.
#[must_use]
pub fn op_name(op: &PatchOperation) -> &'static str {
    match op {
        PatchOperation::Add(_) => "add",
        PatchOperation::Remove(_) => "remove",
        PatchOperation::Replace(_) => "replace",
        PatchOperation::Move(_) => "move",
        PatchOperation::Copy(_) => "copy",
        PatchOperation::Test(_) => "test",
    }
}

pub use crate::decide::plural;

/// Kinds that own other workloads, and so are remembered for folding.
fn owner_capable(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Deployment
            | Kind::ReplicaSet
            | Kind::StatefulSet
            | Kind::DaemonSet
            | Kind::Job
            | Kind::CronJob
            | Kind::ReplicationController
            | Kind::Rollout
            | Kind::CloneSet
            | Kind::KruiseStatefulSet
            | Kind::KruiseDaemonSet
            | Kind::BroadcastJob
            | Kind::AdvancedCronJob
            | Kind::ScaledJob
    )
}

fn object_key(namespace: Option<&str>, kind: &str, name: &str) -> String {
    format!("{}/{kind}/{name}", namespace.unwrap_or_default())
}

/// The controller owner of an object, when it is a workload kind that
/// creates objects of this kind.
fn controller_of(value: &Value, kind: Kind) -> Option<(String, String)> {
    let refs = value.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let owner_kind = r.get("kind")?.as_str()?;
    let owner_name = r.get("name")?.as_str()?;
    let owns = match kind {
        Kind::Pod => matches!(
            owner_kind,
            "ReplicaSet"
                | "Job"
                | "DaemonSet"
                | "StatefulSet"
                | "ReplicationController"
                | "CloneSet"
                | "BroadcastJob"
        ),
        // Argo Rollouts make ReplicaSets; KEDA ScaledJobs and OpenKruise
        // AdvancedCronJobs make Jobs (the latter BroadcastJobs too).
        Kind::ReplicaSet => matches!(owner_kind, "Deployment" | "Rollout"),
        Kind::Job => matches!(owner_kind, "CronJob" | "ScaledJob" | "AdvancedCronJob"),
        Kind::BroadcastJob => owner_kind == "AdvancedCronJob",
        _ => false,
    };
    owns.then(|| (owner_kind.to_owned(), owner_name.to_owned()))
}

/// What the report says about a workload, independent of where its pod spec
/// sits: findings with fields relative to the pod spec (or pod metadata),
/// targeting, exemption and skipped rules.
fn signature(workload: &Workload<'_, '_>, eval: &Evaluation) -> u64 {
    let spec = workload.spec_path.to_string();
    let meta = workload.pod_metadata_path().to_string();
    let mut items: Vec<(&str, Severity, String)> = eval
        .findings
        .iter()
        .map(|f| {
            let field = f.field.to_string();
            let rel = field
                .strip_prefix(&spec)
                .map(|r| format!("spec{r}"))
                .or_else(|| field.strip_prefix(&meta).map(|r| format!("metadata{r}")))
                .unwrap_or(field);
            (f.rule, f.severity, rel)
        })
        .collect();
    items.sort();
    let mut h = DefaultHasher::new();
    items.hash(&mut h);
    eval.target.is_windows().hash(&mut h);
    eval.exempt.hash(&mut h);
    for s in &eval.skipped {
        s.rule.hash(&mut h);
        s.reason.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests;
