//! The real-world corpus in `../shared/corpus/`: every file's verdict and
//! flagged fields (Kind/name + field path, error findings) must match the
//! labels in `INDEX.tsv`, under the default rule set.
//!
//! The corpus lives beside the repository (`WINADMIT_CORPUS` overrides the
//! location); a copy of its index is not committed, so the test fails
//! loudly when the corpus is missing rather than passing vacuously.

use std::collections::BTreeSet;

use winadmit::engine::Context;
use winadmit::finding::Severity;
use winadmit::lint::{collect_runtime_classes, lint_text};
use winadmit::output::LintReport;
use winadmit::policy::Policy;
use winadmit::targeting::RuntimeClasses;

#[path = "support/corpus_dir.rs"]
mod corpus_location;
use corpus_location::corpus_dir;

struct Label {
    file: String,
    verdict: String,
    /// `doc#N Kind/name: field.path` for each expected error finding.
    flagged: BTreeSet<String>,
}

fn labels() -> Vec<Label> {
    let index = std::fs::read_to_string(corpus_dir().join("INDEX.tsv")).expect(
        "the corpus index ../shared/corpus/INDEX.tsv (set WINADMIT_CORPUS to its directory)",
    );
    let mut rows = index.lines();
    let header: Vec<&str> = rows.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (file, verdict, flagged) = (
        col("file"),
        col("expected_verdict"),
        col("flagged_field_paths"),
    );
    rows.filter(|l| !l.trim().is_empty())
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            Label {
                file: cells[file].to_owned(),
                verdict: cells[verdict].to_owned(),
                flagged: parse_flagged(cells[flagged]),
            }
        })
        .collect()
}

/// `"[reject] doc#1 DaemonSet/x: spec.hostPID (no hostProcess); [reject] ..."`
/// -> {"doc#1 DaemonSet/x: spec.hostPID", ...}
fn parse_flagged(cell: &str) -> BTreeSet<String> {
    let cell = cell.trim_matches('"').replace("\"\"", "\"");
    cell.split("; ")
        .filter_map(|item| item.trim().strip_prefix("[reject] "))
        .map(|item| {
            let (head, field) = item.split_once(": ").unwrap();
            let field = field.split(" (").next().unwrap();
            format!("{head}: {field}")
        })
        .collect()
}

fn lint_file(name: &str) -> LintReport {
    let path = corpus_dir().join(name);
    let bytes = std::fs::read(&path).unwrap();
    let policy = Policy::default_policy();
    let mut report = LintReport::default();
    match winadmit::source::decode(&bytes) {
        Ok(text) => {
            let mut rc = RuntimeClasses::default();
            collect_runtime_classes(text, &mut rc);
            let cx = Context {
                runtime_classes: Some(&rc),
                ..Context::default()
            };
            lint_text(name, text, &policy, &cx, &mut report);
        }
        Err(e) => panic!("{name}: {e}"),
    }
    report
}

#[test]
fn every_corpus_file_gets_its_labelled_verdict_and_fields() {
    let labels = labels();
    assert!(
        labels.len() >= 90,
        "expected the full corpus, found {} rows",
        labels.len()
    );
    let mut mismatches = Vec::new();
    for label in &labels {
        let report = lint_file(&label.file);
        let verdict = if !report.input_errors.is_empty() {
            "error"
        } else if report
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error)
        {
            "reject"
        } else {
            "pass"
        };
        let flagged: BTreeSet<String> = report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| format!("doc#{} {}/{}: {}", f.document, f.kind, f.name, f.field))
            .collect();
        if verdict != label.verdict || flagged != label.flagged {
            mismatches.push(format!(
                "{}\n  expected {} {:?}\n  got      {verdict} {flagged:?}\n  input errors: {:?}",
                label.file, label.verdict, label.flagged, report.input_errors
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} corpus mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn every_finding_has_a_source_position() {
    for label in labels().iter().filter(|l| l.verdict == "reject") {
        for f in lint_file(&label.file).findings {
            assert!(
                f.line > 0 && f.column > 0,
                "{}: {} has no position",
                label.file,
                f.field
            );
        }
    }
}

#[test]
fn the_broken_file_is_reported_with_its_line() {
    let label = labels()
        .into_iter()
        .find(|l| l.verdict == "error")
        .expect("the corpus has an unparseable file");
    let report = lint_file(&label.file);
    let problem = &report.input_errors[0];
    assert!(problem.line.is_some(), "{problem:?}");
    assert!(problem.message.contains("invalid YAML"), "{problem:?}");
}
