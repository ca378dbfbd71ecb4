//! Linting text: parse, evaluate every workload, locate findings.
//!
//! Pure (text in, results out): the `lint` command adds the file system and
//! output; reports and tests call this directly.

use serde::Deserialize;

use crate::engine::{self, Context, Evaluation};
use crate::output::{Checked, InputProblem, LintFinding, LintReport};
use crate::policy::Policy;
use crate::rules;
use crate::source::{self, Document};
use crate::targeting::RuntimeClasses;
use crate::view::ObjectView;
use crate::workload::{Kind, Workload};

/// Source positions to look up once a file's documents are evaluated:
/// (YAML document, JSON Pointer), in the order the problems and findings
/// were added to the report.
#[derive(Default)]
struct Wants {
    problems: Vec<(usize, String)>,
    findings: Vec<(usize, String)>,
}

/// One workload's verdict, with what identifies it.
#[derive(Debug)]
pub struct ObjectVerdict {
    pub document: usize,
    pub evaluation: Evaluation,
}

/// Collects the RuntimeClasses in a text (for Windows targeting by
/// `runtimeClassName` within the same input).
pub fn collect_runtime_classes(text: &str, into: &mut RuntimeClasses) {
    if !text.contains("RuntimeClass") {
        return;
    }
    if let Ok(docs) = source::parse(text) {
        for d in docs {
            if let Some((name, os)) = RuntimeClasses::from_object(&d.value) {
                into.insert(name, os);
            }
        }
    }
}

/// Lints one file's text and appends to `report`. `file` is the name shown.
pub fn lint_text(
    file: &str,
    text: &str,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut LintReport,
) {
    report.summary.files += 1;
    let first_problem = report.input_errors.len();
    let docs = match source::parse(text) {
        Ok(d) => d,
        Err(e) => {
            report.summary.input_errors += 1;
            report.input_errors.push(InputProblem {
                file: file.to_owned(),
                line: e.line,
                column: e.column,
                message: format!("invalid YAML: {}", e.message),
            });
            return;
        }
    };
    let first = report.findings.len();
    let mut wants = Wants::default();
    for doc in &docs {
        lint_document(file, doc, policy, cx, report, &mut wants);
    }
    // One more pass over the file finds every position at once, only for
    // files with something to report.
    if !wants.problems.is_empty() || !wants.findings.is_empty() {
        let refs: Vec<(usize, &str)> = wants
            .problems
            .iter()
            .chain(&wants.findings)
            .map(|(d, p)| (*d, p.as_str()))
            .collect();
        let mut at = source::locate_many(text, &refs).into_iter();
        for p in &mut report.input_errors[first_problem..] {
            if let Some(at) = at.next().flatten() {
                p.line = Some(at.line);
                p.column = Some(at.column);
            }
        }
        for f in &mut report.findings[first..] {
            if let Some(at) = at.next().flatten() {
                f.line = at.line;
                f.column = at.column;
            }
        }
    }
    // Compiler order: by position within the file.
    report.findings[first..].sort_by_key(|f| (f.line, f.column));
}

/// Evaluates one document; positions are filled in later from `wants`
/// (document, pointer), in the order problems and then findings were added.
fn lint_document(
    file: &str,
    doc: &Document,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut LintReport,
    wants: &mut Wants,
) {
    let has_type = doc
        .value
        .get("apiVersion")
        .is_some_and(serde_json::Value::is_string)
        && doc
            .value
            .get("kind")
            .is_some_and(serde_json::Value::is_string);
    if !has_type {
        report.summary.skipped += 1;
        return;
    }
    report.summary.objects += 1;
    let api_version = doc.value["apiVersion"].as_str().unwrap_or_default();
    let kind = doc.value["kind"].as_str().unwrap_or_default();
    if Kind::from_type(api_version, kind).is_none() {
        return;
    }
    let view = match ObjectView::deserialize(&doc.value) {
        Ok(v) => v,
        Err(e) => {
            report.summary.input_errors += 1;
            wants.problems.push((doc.yaml_doc, doc.pointer.clone()));
            report.input_errors.push(InputProblem {
                file: file.to_owned(),
                line: None,
                column: None,
                message: format!("document {}: not a valid Kubernetes object: {e}", doc.index),
            });
            return;
        }
    };
    let Some(workload) = Workload::from_view(&view) else {
        return;
    };
    report.summary.workloads += 1;
    let eval = engine::evaluate(policy, &workload, cx);
    if eval.target.is_windows() {
        report.summary.windows_workloads += 1;
    }
    report.checked.push(Checked {
        file: file.to_owned(),
        document: doc.index,
        kind: workload.kind.as_str().to_owned(),
        namespace: workload.namespace.map(str::to_owned),
        name: workload.name.to_owned(),
    });
    for f in eval.findings {
        wants.findings.push((
            doc.yaml_doc,
            format!("{}{}", doc.pointer, f.field.pointer()),
        ));
        let info = &rules::find(f.rule)
            .expect("findings name catalogued rules")
            .info;
        match f.severity {
            crate::finding::Severity::Error => report.summary.errors += 1,
            crate::finding::Severity::Warning => report.summary.warnings += 1,
        }
        report.findings.push(LintFinding {
            file: file.to_owned(),
            line: 0,
            column: 0,
            document: doc.index,
            api_version: workload.api_version.to_owned(),
            kind: workload.kind.as_str().to_owned(),
            namespace: workload.namespace.map(str::to_owned),
            name: workload.name.to_owned(),
            rule: f.rule,
            severity: f.severity,
            field: f.field.to_string(),
            message: f.message,
            title: info.title,
            doc_url: info.doc_url,
            fix: info.fix,
            patch: f.fix.map(|fix| fix.ops),
        });
    }
}
