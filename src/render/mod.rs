//! The renderers: `lint`'s results as text, JSON, SARIF 2.1.0 and JUnit
//! XML, the escaping and colouring the text formats share, and the
//! dry-run report's pure part ([`report`]: what a report says, its builder
//! and its formats). Modules here import only `decision`, `input` and
//! `render`.
//!
//! The JSON shape is a contract other tools rely on: a top-level object
//! with `findings` (each with at least `file`, `line`, `column`, `kind`,
//! `namespace`, `name`, `rule`, `severity`, `field`, `message`) and
//! `summary` with counts. Fields are only ever added.

use serde::Serialize;

use crate::decision::exceptions::ExceptionRef;
use crate::decision::finding::{PatchOperation, Severity};

pub mod ansi;
pub mod baseline;
pub mod compact;
pub mod escape;
pub mod json;
pub mod junit;
pub mod report;
pub mod sarif;
pub mod text;

/// One finding, located in its source file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LintFinding {
    pub file: String,
    pub line: u64,
    pub column: u64,
    /// Index of the object in its file (empty documents skipped, List items expanded).
    pub document: usize,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub rule: &'static str,
    pub severity: Severity,
    pub field: String,
    pub message: String,
    pub title: &'static str,
    pub doc_url: &'static str,
    /// How to fix it.
    pub fix: &'static str,
    /// The automatic fix, when one exists: RFC 6902 operations on the object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Vec<PatchOperation>>,
}

/// One finding as the renderers read it, from either form of the report
/// ([`LintReport`], [`compact::CompactReport`]). Serialized as
/// [`LintFinding`] is.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingRef<'a> {
    pub file: &'a str,
    pub line: u64,
    pub column: u64,
    pub document: usize,
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub rule: &'static str,
    pub severity: Severity,
    pub field: &'a str,
    pub message: &'a str,
    pub title: &'static str,
    pub doc_url: &'static str,
    pub fix: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<&'a [PatchOperation]>,
}

impl<'a> From<&'a LintFinding> for FindingRef<'a> {
    fn from(f: &'a LintFinding) -> Self {
        Self {
            file: &f.file,
            line: f.line,
            column: f.column,
            document: f.document,
            api_version: &f.api_version,
            kind: &f.kind,
            namespace: f.namespace.as_deref(),
            name: &f.name,
            rule: f.rule,
            severity: f.severity,
            field: &f.field,
            message: &f.message,
            title: f.title,
            doc_url: f.doc_url,
            fix: f.fix,
            patch: f.patch.as_deref(),
        }
    }
}

/// A checked workload as the renderers read it.
#[derive(Debug, Clone, Copy)]
pub struct CheckedRef<'a> {
    pub file: &'a str,
    pub document: usize,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

/// What the renderers read: findings and checked workloads in output
/// order, the input problems and the counts.
pub trait Report {
    fn finding_count(&self) -> usize;
    /// The `i`th finding in output order.
    fn finding(&self, i: usize) -> FindingRef<'_>;
    fn checked_count(&self) -> usize;
    /// The `i`th checked workload in input order.
    fn checked(&self, i: usize) -> CheckedRef<'_>;
    fn input_errors(&self) -> &[InputProblem];
    fn notes(&self) -> &[InputProblem];
    fn input_warnings(&self) -> &[InputProblem];
    fn summary(&self) -> &LintSummary;

    /// The findings in output order.
    fn findings(&self) -> impl Iterator<Item = FindingRef<'_>> {
        (0..self.finding_count()).map(|i| self.finding(i))
    }

    /// How many findings a `PolicyException` covers (not counted above).
    fn excepted_count(&self) -> usize {
        0
    }

    /// The `i`th finding an exception covers, with the exception.
    fn excepted(&self, _i: usize) -> Option<(FindingRef<'_>, &ExceptionRef)> {
        None
    }

    /// The findings exceptions cover, in output order.
    fn excepted_findings(&self) -> impl Iterator<Item = (FindingRef<'_>, &ExceptionRef)> {
        (0..self.excepted_count()).filter_map(|i| self.excepted(i))
    }
}

impl Report for LintReport {
    fn finding_count(&self) -> usize {
        self.findings.len()
    }

    fn finding(&self, i: usize) -> FindingRef<'_> {
        FindingRef::from(&self.findings[i])
    }

    fn checked_count(&self) -> usize {
        self.checked.len()
    }

    fn checked(&self, i: usize) -> CheckedRef<'_> {
        let c = &self.checked[i];
        CheckedRef {
            file: &c.file,
            document: c.document,
            kind: &c.kind,
            namespace: c.namespace.as_deref(),
            name: &c.name,
        }
    }

    fn input_errors(&self) -> &[InputProblem] {
        &self.input_errors
    }

    fn notes(&self) -> &[InputProblem] {
        &self.notes
    }

    fn input_warnings(&self) -> &[InputProblem] {
        &self.input_warnings
    }

    fn summary(&self) -> &LintSummary {
        &self.summary
    }
}

/// Which object a finding is about.
#[derive(Debug, Clone, Copy)]
pub struct ObjectId<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

impl LintFinding {
    /// A finding about `object`, document `document` of `file`, with its
    /// rule's documentation; line and column are 0 until located.
    ///
    /// # Panics
    /// If the finding names a rule outside the catalogue (a bug: findings
    /// only come from catalogued rules).
    #[must_use]
    pub fn new(
        file: &str,
        document: usize,
        object: ObjectId<'_>,
        f: &crate::decision::finding::Finding,
    ) -> Self {
        let info = &crate::decision::rules::find(f.rule)
            .expect("findings name catalogued rules")
            .info;
        Self {
            file: file.to_owned(),
            line: 0,
            column: 0,
            document,
            api_version: object.api_version.to_owned(),
            kind: object.kind.to_owned(),
            namespace: object.namespace.map(str::to_owned),
            name: object.name.to_owned(),
            rule: f.rule,
            severity: f.severity,
            field: f.field.to_string(),
            message: f.message.clone(),
            title: info.title,
            doc_url: info.doc_url,
            fix: info.fix,
            patch: f.fix.as_ref().map(|fix| fix.ops.clone()),
        }
    }
}

/// A file or document that could not be read (the manifest reader's).
pub use crate::input::source::InputProblem;

/// Counts for the summary line and the JSON `summary`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LintSummary {
    pub files: usize,
    /// Kubernetes objects read.
    pub objects: usize,
    /// Objects of a workload kind.
    pub workloads: usize,
    pub windows_workloads: usize,
    /// Documents that are not Kubernetes objects (no apiVersion/kind).
    pub skipped: usize,
    pub errors: usize,
    pub warnings: usize,
    /// Advice (level info): shown, never a failure.
    #[serde(skip_serializing_if = "is_zero")]
    pub infos: usize,
    pub input_errors: usize,
    /// Fixes written back with `--fix`.
    pub fixed: usize,
}

impl LintSummary {
    /// Adds the counts of a later part of the input.
    pub fn absorb(&mut self, other: &Self) {
        // Destructured so that a new field cannot be forgotten here.
        let Self {
            files,
            objects,
            workloads,
            windows_workloads,
            skipped,
            errors,
            warnings,
            infos,
            input_errors,
            fixed,
        } = other;
        self.files += files;
        self.objects += objects;
        self.workloads += workloads;
        self.windows_workloads += windows_workloads;
        self.skipped += skipped;
        self.errors += errors;
        self.warnings += warnings;
        self.infos += infos;
        self.input_errors += input_errors;
        self.fixed += fixed;
    }
}

impl LintReport {
    /// Appends the report of a later part of the input, keeping input order.
    pub fn absorb(&mut self, other: Self) {
        let Self {
            findings,
            checked,
            input_errors,
            notes,
            input_warnings,
            summary,
        } = other;
        append(&mut self.findings, findings);
        append(&mut self.checked, checked);
        append(&mut self.input_errors, input_errors);
        append(&mut self.notes, notes);
        append(&mut self.input_warnings, input_warnings);
        self.summary.absorb(&summary);
    }
}

/// `to.extend(from)`, without a copy when `to` is empty (one large file).
fn append<T>(to: &mut Vec<T>, mut from: Vec<T>) {
    if to.is_empty() {
        *to = from;
    } else {
        to.append(&mut from);
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if signature
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A workload that was checked (for JUnit's passing test cases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub file: String,
    pub document: usize,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl LintSummary {
    /// Counts one finding.
    pub fn count(&mut self, severity: crate::decision::finding::Severity) {
        match severity {
            crate::decision::finding::Severity::Error => self.errors += 1,
            crate::decision::finding::Severity::Warning => self.warnings += 1,
            crate::decision::finding::Severity::Info => self.infos += 1,
        }
    }
}

/// Everything `lint` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LintReport {
    pub findings: Vec<LintFinding>,
    #[serde(skip)]
    pub checked: Vec<Checked>,
    pub input_errors: Vec<InputProblem>,
    /// Things worth knowing that are neither findings nor errors (an Argo
    /// Rollout whose pod template is another workload's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<InputProblem>,
    /// Readable input with a problem worth a warning (a duplicate key).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_warnings: Vec<InputProblem>,
    pub summary: LintSummary,
}
