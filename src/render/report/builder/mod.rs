//! The [`ReportBuilder`]: objects in, one at a time, [`ObjectReport`]s and
//! the summary out. Each object is decided with [`crate::decision::decide::decide`]
//! (the settled patch, then the verdict after it), with the cluster objects
//! the input showed and what the entry point can look up; owned objects are
//! folded into their owners ([`super::fold`]).
//!
//! Each object report is counted into the summary in `tally`.

mod tally;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::fold::{controller_of, object_key, owner_capable, rollout_history, signature};
use super::why::verdict_reasons;
use super::{
    Finished, NamespaceSummary, ObjectReport, Origin, ReportOptions, ReportSummary, RuleSummary,
};
use crate::decision::cluster::ClusterObjects;
use crate::decision::decide;
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::decision::workload::{Workload, type_of};
use crate::render::{InputProblem, LintFinding, ObjectId};

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
    cluster: crate::decision::cluster::TargetCluster,
    /// Namespaces, RuntimeClasses and Windows nodes seen in the input.
    known: ClusterObjects,
    /// What registries say of the images (`--image-facts`).
    images: Option<crate::decision::images::KnownImages>,
    /// The PolicyExceptions in force (the entry point's, at its "now").
    exceptions: Option<crate::decision::exceptions::ExceptionSet>,
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
            known: ClusterObjects {
                runtime_classes: cx.runtime_classes.cloned().unwrap_or_default(),
                nodes: cx.nodes.cloned().unwrap_or_default(),
                ..ClusterObjects::default()
            },
            images: cx.images.cloned(),
            exceptions: cx.exceptions.cloned(),
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
    pub fn runtime_class(&mut self, name: impl Into<String>, os: crate::decision::targeting::Os) {
        self.known.runtime_classes.insert(name, os);
    }

    /// The cluster's GMSACredentialSpecs have been listed in full (the live
    /// report): a name not among those learnt does not exist, even when
    /// the cluster has none.
    pub fn credential_specs_listed(&mut self) {
        self.known
            .gmsa
            .get_or_insert_with(crate::decision::gmsa::Facts::default)
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
        if !self.in_namespaces(value) {
            return Added::Other;
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
        // Folded into its Deployment without being judged: what it says
        // is history.
        if self.options.fold && rollout_history(value, workload.kind) {
            self.summary.folded += 1;
            self.namespace_entry(workload.namespace).folded += 1;
            return Added::Held;
        }
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

    /// The object is in the namespaces the report is limited to (or it is
    /// not limited).
    fn in_namespaces(&self, value: &Value) -> bool {
        if self.options.namespaces.is_empty() {
            return true;
        }
        let ns = value.pointer("/metadata/namespace").and_then(Value::as_str);
        ns.is_some_and(|ns| self.options.namespaces.iter().any(|n| n == ns))
    }

    /// The policy the report judges by.
    #[must_use]
    pub fn policy(&self) -> &'p Policy {
        self.policy
    }

    /// Adds to `into` the images of the workload `value` whose facts are
    /// not known yet: what an entry point with `--registry` looks up before it adds
    /// the object. Nothing for an object the report leaves out.
    pub fn unknown_images(&self, value: &Value, into: &mut BTreeSet<String>) {
        if !self.in_namespaces(value) {
            return;
        }
        let mut images = BTreeSet::new();
        crate::decision::lookups::workload_images(self.policy, value, &mut images);
        let known = |image: &String| self.images.as_ref().is_some_and(|k| k.get(image).is_some());
        into.extend(images.into_iter().filter(|i| !known(i)));
    }

    /// Learns the facts of images looked up in their registries, for the
    /// objects added after (facts already known stay).
    pub fn learn_images(&mut self, found: crate::decision::images::KnownImages) {
        let known = self.images.get_or_insert_with(Default::default);
        for (image, lookup) in found.images {
            known.images.entry(image).or_insert(lookup);
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
    /// [`crate::input::source::prescan`]), for every object of it.
    pub fn learnt(&mut self, known: ClusterObjects) {
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
            let all: Vec<&crate::decision::cluster::WindowsNode> =
                self.known.nodes.nodes.iter().collect();
            self.summary.target = self
                .cluster
                .narrowed(&crate::decision::cluster::WindowsNodes::observed(&all));
        }
    }

    /// What the entry point looks up of the credential specs `workload` names
    /// (over what the input showed), when it can; `None` otherwise.
    fn gmsa_looked_up(&self, workload: &Workload<'_, '_>) -> Option<crate::decision::gmsa::Facts> {
        let lookup = self.options.namespace_lookup.as_ref()?;
        let spec = workload.spec?;
        let names: Vec<&str> = crate::decision::gmsa::names(spec).into_iter().collect();
        if names.is_empty() {
            return None;
        }
        let looked = lookup.0.gmsa(
            workload.namespace,
            crate::decision::gmsa::service_account(spec),
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
            nodes: self.known.nodes.any_known().then_some(&self.known.nodes),
            images: self.images.as_ref(),
            gmsa: looked.as_ref().or(self.known.gmsa.as_ref()),
            exceptions: self.exceptions.as_ref(),
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
        let report = object_report(
            decision,
            workload,
            origin,
            self.policy.mode,
            self.options.patched_objects,
        );
        (report, signature)
    }
}

/// What the report says of one decided workload.
fn object_report(
    decision: decide::Decision,
    workload: &Workload<'_, '_>,
    origin: &Origin<'_>,
    policy_mode: crate::decision::policy::Mode,
    patched_objects: bool,
) -> ObjectReport {
    let why = verdict_reasons(&decision);
    let verdict = decision.verdict;
    let mode = decision.mode.unwrap_or(policy_mode);
    let exempt = decision.exemption.as_ref().map(|e| e.reason().to_owned());
    let eval = decision.evaluation;
    let mutation = decision.patch;
    let patched_object = decision.patched.filter(|_| patched_objects);
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
    ObjectReport {
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
    }
}
