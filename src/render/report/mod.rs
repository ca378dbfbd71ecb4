//! Dry-run reports: what the webhook would deny, warn about or change, for
//! every workload in a cluster, a file, or a `POST /report` body.
//!
//! This module is the pure part (no I/O, no clock, no client): objects in,
//! [`ObjectReport`]s and a [`ReportSummary`] out. It calls the same
//! [`engine::evaluate`] and [`patch::mutation`] as `lint` and the webhook,
//! and decides with [`crate::decision::decide::decide`] (the settled patch, then the
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
//! (likewise for the custom resources of [`crate::decision::workload::CUSTOM_RESOURCES`]:
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

//!
//! # The parts
//!
//! - this module: what a report says ([`ObjectReport`], [`ReportSummary`],
//!   [`Report`]) and what changes it ([`ReportOptions`]);
//! - `builder`: the [`ReportBuilder`], objects in, reports and counts out;
//! - `fold`: which owners fold which objects, and when an owned object
//!   differs from its owner;
//! - `why`: why a verdict is not what the findings alone say;
//! - [`format`]: the output formats.
//!
//! Reading the input and driving the builder (files, a live cluster, a
//! `POST /report` body) is `crate::entry::report`'s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decision::engine::Skipped;
use crate::decision::finding::{PatchOperation, Severity};
use crate::decision::policy::Mode;
use crate::render::{InputProblem, LintFinding};

mod builder;
mod fold;
pub mod format;
mod why;

pub use crate::decision::decide::Verdict;
pub use builder::{Added, MAX_INPUT_PROBLEMS, ReportBuilder};
pub use why::op_name;

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

/// The labels of the cluster's namespaces, when an entry point knows them (the
/// webhook's cache for `POST /report`), and the gMSA facts of a workload
/// when the entry point can ask the cluster ([`crate::decision::cluster::ClusterLookup::gmsa`]:
/// the live `report`, the webhook's `POST /report`).
#[derive(Clone)]
pub struct NamespaceLookup(pub std::sync::Arc<dyn crate::decision::cluster::ClusterLookup>);

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
    pub target: crate::decision::cluster::TargetCluster,
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

pub use crate::decision::decide::plural;
