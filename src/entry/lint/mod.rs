//! Linting text: parse, evaluate every workload, locate findings.
//!
//! The functions over a text are pure (text in, results out); reports and
//! tests call them directly. [`run`] is `lint` over files and stdin (what
//! the `lint` command calls before it renders the report); its inputs are
//! read by [`crate::input::source::files`], the reader `report --from-file` uses.

mod cross;
pub mod rendered;
mod run;

use std::borrow::Cow;

use crate::decision::cluster::ClusterObjects;
use crate::decision::decide;
use crate::decision::engine::Context;
use crate::decision::policy::Policy;
use crate::decision::services;
use crate::decision::targeting::RuntimeClasses;
use crate::decision::workload::{Workload, type_of};
use crate::input::source::{self, Document};
use crate::render::compact::{CompactReport, Record, Shared};
use crate::render::{InputProblem, LintReport, ObjectId};

pub use cross::CrossObject;
use cross::keep_service;

pub use run::{Exceptions, Linted, Options, ResolveImages, run, run_with};

/// Source positions to look up once a YAML document's objects are
/// evaluated: (YAML document, JSON Pointer), in the order the problems and
/// findings were added to the report.
#[derive(Default)]
struct PositionsToFind {
    problems: Vec<(usize, String)>,
    findings: Vec<(usize, String)>,
    /// The findings a `PolicyException` covers, placed after the others.
    excepted: Vec<(usize, String)>,
    /// [`services::REPORTED_POINTERS`] of each Service recorded, in order.
    services: Vec<(usize, String)>,
}

/// Collects the RuntimeClasses in a text (for Windows targeting by
/// `runtimeClassName` within the same input, and their handlers for
/// Hyper-V isolation).
pub fn collect_runtime_classes(text: &str, into: &mut RuntimeClasses) {
    let mut known = ClusterObjects::default();
    source::prescan::cluster_objects(&mut Cow::Borrowed(text), &mut known);
    into.extend(known.runtime_classes);
}

/// Lints one file's text and appends to `report`. `file` is the name shown.
/// Services are checked against the Windows workloads of this text only;
/// to check across files use [`lint_text_with`] and [`CrossObject::finish`].
pub fn lint_text(
    file: &str,
    text: &str,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut LintReport,
) {
    let mut part = CompactReport::new(true);
    let mut cross = CrossObject::default();
    lint_text_with(file, Cow::Borrowed(text), policy, cx, &mut part, &mut cross);
    cross.finish(policy, cx, &mut part);
    report.absorb(part.into_report());
}

/// Lints one file's text, recording in `cross` what the cross-object checks
/// need; call [`CrossObject::finish`] once every file is linted. An owned
/// text is not copied when the tab retry needs it changed
/// ([`source::for_each_document_in`]).
pub fn lint_text_with(
    file: &str,
    mut text: Cow<'_, str>,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut CompactReport,
    cross: &mut CrossObject,
) {
    report.summary.files += 1;
    let name = report.strings.get(file);
    let file = &name;
    match lint_part(file, &mut text, Offsets::default(), policy, cx, report) {
        Ok((part_cross, duplicates)) => {
            cross.absorb(part_cross);
            warn_duplicates(file, &duplicates, 0, report);
        }
        Err(e) => {
            let chunks = source::split_documents(&text);
            if chunks.len() < 2 {
                report.summary.input_errors += 1;
                report.input_errors.push(InputProblem {
                    file: file.to_string(),
                    line: e.line,
                    column: e.column,
                    message: format!("invalid YAML: {}", e.message),
                });
                return;
            }
            // A broken document does not hide the others: each `---`
            // document is read on its own, the broken one reported.
            let mut index = 0;
            for (lines_before, chunk) in chunks {
                let at = Offsets {
                    lines: lines_before,
                    index,
                };
                let before = report.summary.objects + report.summary.skipped;
                match lint_part(file, &mut Cow::Borrowed(chunk), at, policy, cx, report) {
                    Ok((part_cross, duplicates)) => {
                        index += report.summary.objects + report.summary.skipped - before;
                        cross.absorb(part_cross);
                        warn_duplicates(file, &duplicates, lines_before, report);
                    }
                    Err(e) => {
                        report.summary.input_errors += 1;
                        report.input_errors.push(InputProblem {
                            file: file.to_string(),
                            line: e.line.map(|l| l + lines_before),
                            column: e.column,
                            message: format!(
                                "invalid YAML: {} (this document is skipped; the file's other documents are linted)",
                                e.message
                            ),
                        });
                    }
                }
            }
        }
    }
}

/// Lints a text (a file, or one `---` part of it) document by document as
/// it is parsed, into `report`, placing what it reports from the positions
/// recorded in the same parse. All or nothing: on a parse error, what the
/// documents before it added is taken out of `report` again (the caller
/// then reads the `---` parts one by one).
fn lint_part(
    file: &Shared,
    text: &mut Cow<'_, str>,
    at: Offsets,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut CompactReport,
) -> Result<(CrossObject, Vec<crate::input::yaml::DuplicateKey>), source::InputError> {
    let mark = report.mark();
    let mut cross = CrossObject::default();
    let parsed = source::for_each_document_in(text, |p| match p {
        source::Part::Documents(docs, positions) => {
            lint_documents(file, docs, positions, at, policy, cx, report, &mut cross);
        }
        source::Part::Restart => {
            report.rollback(&mark);
            cross = CrossObject::default();
        }
    });
    let duplicates = match parsed {
        Ok(duplicates) => duplicates,
        Err(e) => {
            report.rollback(&mark);
            return Err(e);
        }
    };
    // Compiler order: by position within the file. Each document's are
    // sorted already, and documents come in order: usually nothing to do.
    let mine = &mut report.findings[mark.findings..];
    if !mine.is_sorted_by_key(Record::at) {
        mine.sort_by_key(Record::at);
    }
    Ok((cross, duplicates))
}

/// Where a part of a file starts: lines before it, objects before it.
#[derive(Debug, Clone, Copy, Default)]
struct Offsets {
    lines: u64,
    index: usize,
}

/// An input warning per key that appears twice in a map.
fn warn_duplicates(
    file: &str,
    duplicates: &[crate::input::yaml::DuplicateKey],
    lines_before: u64,
    report: &mut CompactReport,
) {
    for d in duplicates {
        report.input_warnings.push(InputProblem {
            file: file.to_owned(),
            line: Some(d.line + lines_before),
            column: Some(d.column),
            message: format!(
                "duplicate key `{}`: the last value is used, as kubectl does, but the API server refuses duplicate fields in JSON and warns on YAML; keep one",
                d.key
            ),
        });
    }
}

/// Lints the objects of one YAML document and places what it reports,
/// from the positions of the document's nodes.
#[allow(clippy::too_many_arguments)] // the lint state, passed through
fn lint_documents(
    file: &Shared,
    mut docs: Vec<source::Document>,
    positions: &crate::input::yaml::Positions,
    at: Offsets,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut CompactReport,
    cross: &mut CrossObject,
) {
    for d in &mut docs {
        d.index += at.index;
    }
    let first_problem = report.input_errors.len();
    let first = report.findings.len();
    let first_excepted = report.excepted.len();
    let first_service = cross.services.len();
    let mut to_find = PositionsToFind::default();
    for doc in &docs {
        lint_document(file, doc, policy, cx, report, &mut to_find, cross);
    }
    drop(docs);
    if to_find.problems.is_empty()
        && to_find.findings.is_empty()
        && to_find.excepted.is_empty()
        && to_find.services.is_empty()
    {
        return;
    }
    // All of one YAML document (a `List`'s items share theirs).
    let refs: Vec<&str> = to_find
        .problems
        .iter()
        .chain(&to_find.findings)
        .chain(&to_find.excepted)
        .chain(&to_find.services)
        .map(|(_, p)| p.as_str())
        .collect();
    let mut found = positions.locate(&refs).into_iter();
    for p in &mut report.input_errors[first_problem..] {
        if let Some(pos) = found.next().flatten() {
            p.line = Some(pos.line + at.lines);
            p.column = Some(pos.column);
        }
    }
    for f in &mut report.findings[first..] {
        if let Some(pos) = found.next().flatten() {
            f.place(pos.line + at.lines, pos.column);
        }
    }
    report.findings[first..].sort_by_key(Record::at);
    for (f, _) in &mut report.excepted[first_excepted..] {
        if let Some(pos) = found.next().flatten() {
            f.place(pos.line + at.lines, pos.column);
        }
    }
    for s in &mut cross.services[first_service..] {
        s.positions = (&mut found)
            .take(services::REPORTED_POINTERS.len())
            .map(|p| p.map(|p| (p.line + at.lines, p.column)))
            .collect();
    }
}

/// A problem with one document, placed later from `to_find` (if at all).
fn document_problem(file: &Shared, doc: &Document, message: String) -> InputProblem {
    InputProblem {
        file: file.to_string(),
        line: None,
        column: None,
        message: format!("document {}: {message}", doc.index),
    }
}

/// Evaluates one document; positions are filled in later from `to_find`
/// (document, pointer), in the order problems and then findings were added.
fn lint_document(
    file: &Shared,
    doc: &Document,
    policy: &Policy,
    cx: &Context<'_>,
    report: &mut CompactReport,
    to_find: &mut PositionsToFind,
    cross: &mut CrossObject,
) {
    let Some((api_version, kind)) = type_of(&doc.value) else {
        report.summary.skipped += 1;
        return;
    };
    report.summary.objects += 1;
    if services::is_service(&doc.value) {
        keep_service(file, doc, to_find, cross);
        return;
    }
    if policy.pod_templates.kind_of(api_version, kind).is_none() {
        return;
    }
    let view = match policy.pod_templates.read(&doc.value) {
        Ok(v) => v,
        Err(e) => {
            report.summary.input_errors += 1;
            to_find.problems.push((doc.yaml_doc, doc.pointer.clone()));
            report
                .input_errors
                .push(document_problem(file, doc, e.to_string()));
            return;
        }
    };
    let Some(workload) = Workload::from_view(&view) else {
        return;
    };
    report.summary.workloads += 1;
    if let Some(note) = workload.note() {
        report
            .notes
            .push(document_problem(file, doc, note.to_string()));
    }
    // The same decision the webhook makes; lint reports every finding of
    // the manifest as written (the webhook's reach does not apply).
    let decision = decide::decide(
        policy,
        cx,
        &workload,
        &decide::Request::manifest(decide::PatchSource::None),
    );
    let eval = decision.evaluation;
    if eval.target.is_windows() {
        report.summary.windows_workloads += 1;
        cross.add_windows_workload(&workload);
    }
    let object = report.object(
        file,
        doc.index,
        ObjectId {
            api_version: workload.api_version,
            kind: workload.kind_name,
            namespace: workload.namespace,
            name: workload.name,
        },
    );
    report.add_checked(&object);
    for f in eval.findings {
        let mut pointer = doc.pointer.clone();
        f.field.push_pointer(&mut pointer);
        to_find.findings.push((doc.yaml_doc, pointer));
        report.summary.count(f.severity);
        let record = report.record(&object, f);
        report.findings.push(record);
    }
    keep_excepted(doc, &object, eval.excepted, report, to_find);
}

/// The findings PolicyExceptions cover, kept apart, to be placed after the
/// others.
fn keep_excepted(
    doc: &Document,
    object: &std::sync::Arc<crate::render::compact::Object>,
    excepted: Vec<crate::decision::engine::Excepted>,
    report: &mut CompactReport,
    to_find: &mut PositionsToFind,
) {
    for e in excepted {
        let mut pointer = doc.pointer.clone();
        e.finding.field.push_pointer(&mut pointer);
        to_find.excepted.push((doc.yaml_doc, pointer));
        let record = report.record(object, e.finding);
        report
            .excepted
            .push((record, std::sync::Arc::new(e.exception)));
    }
}
