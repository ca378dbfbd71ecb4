//! The real-world corpus in `../shared/corpus/`: every file's verdict and
//! flagged fields must match the labels in `INDEX.tsv`, at the default
//! target (`expected_verdict`, `flagged_field_paths`) and at Kubernetes 1.19
//! with Docker (`expected_verdict_docker_1.19`).
//!
//! The corpus lives beside the repository (`WINADMIT_CORPUS` overrides the
//! location). Without it these tests are ignored, with the reason (see
//! `build.rs`), unless `WINADMIT_REQUIRE_CORPUS` is set (as `.ci/run`
//! does), which makes them run and fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use winadmit::decision::cluster::TargetCluster;
use winadmit::decision::engine::Context;
use winadmit::decision::finding::Severity;
use winadmit::decision::policy::Policy;
use winadmit::decision::targeting::RuntimeClasses;
use winadmit::decision::version::KubeVersion;
use winadmit::entry::lint::{collect_runtime_classes, lint_text};
use winadmit::render::LintReport;

use crate::corpus_dir as corpus_location;

struct Label {
    file: String,
    verdict: String,
    docker_verdict: String,
    /// `doc#N Kind/name: field.path` for each expected error finding.
    rejects: BTreeSet<String>,
    /// The same for each expected warning (met by a warning or info).
    warns: BTreeSet<String>,
}

fn labels(dir: &Path) -> Vec<Label> {
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("the corpus index");
    let mut rows = index.lines();
    let header: Vec<&str> = rows.next().unwrap().split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("INDEX.tsv has no column {name}"))
    };
    let (file, verdict, flagged, docker) = (
        col("file"),
        col("expected_verdict"),
        col("flagged_field_paths"),
        col("expected_verdict_docker_1.19"),
    );
    rows.filter(|l| !l.trim().is_empty())
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            Label {
                file: cells[file].to_owned(),
                verdict: cells[verdict].to_owned(),
                docker_verdict: cells[docker].trim().to_owned(),
                rejects: parse_flagged(cells[flagged], "[reject] "),
                warns: parse_flagged(cells[flagged], "[warn] "),
            }
        })
        .collect()
}

/// `"[reject] doc#1 DaemonSet/x: spec.hostPID (no hostProcess); [warn] ..."`
/// -> {"doc#1 DaemonSet/x: spec.hostPID", ...} for the entries with `tag`.
fn parse_flagged(cell: &str, tag: &str) -> BTreeSet<String> {
    let cell = cell.trim_matches('"').replace("\"\"", "\"");
    cell.split("; ")
        .filter_map(|item| item.trim().strip_prefix(tag))
        .map(|item| {
            let (head, field) = item.split_once(": ").unwrap();
            let field = field.split(" (").next().unwrap();
            format!("{head}: {field}")
        })
        .collect()
}

fn lint_file(path: &Path, cluster: &TargetCluster) -> LintReport {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let bytes = std::fs::read(path).unwrap();
    let policy = Policy::default_policy();
    let mut report = LintReport::default();
    match winadmit::input::source::decode(&bytes) {
        Ok(text) => {
            let mut rc = RuntimeClasses::default();
            collect_runtime_classes(text, &mut rc);
            let cx = Context {
                cluster: cluster.clone(),
                runtime_classes: Some(&rc),
                nodes: None,
                images: None,
                gmsa: None,
                exceptions: None,
            };
            lint_text(&name, text, &policy, &cx, &mut report);
        }
        Err(e) => panic!("{name}: {e}"),
    }
    report
}

fn verdict(report: &LintReport) -> &'static str {
    if !report.input_errors.is_empty() {
        "error"
    } else if report
        .findings
        .iter()
        .any(|f| f.severity == Severity::Error)
    {
        "reject"
    } else {
        "pass"
    }
}

fn fields(report: &LintReport, keep: impl Fn(Severity) -> bool) -> BTreeSet<String> {
    report
        .findings
        .iter()
        .filter(|f| keep(f.severity))
        .map(|f| format!("doc#{} {}/{}: {}", f.document, f.kind, f.name, f.field))
        .collect()
}

fn corpus(test: &str) -> (PathBuf, Vec<Label>) {
    let dir = corpus_location::corpus_dir(test);
    let labels = labels(&dir);
    assert!(
        labels.len() >= 90,
        "expected the full corpus, found {} rows",
        labels.len()
    );
    (dir, labels)
}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn every_corpus_file_gets_its_labelled_verdict_and_fields_at_the_default_target() {
    let (dir, labels) = corpus("every_corpus_file_gets_its_labelled_verdict_and_fields");
    let mut mismatches = Vec::new();
    for label in &labels {
        let report = lint_file(&dir.join(&label.file), &TargetCluster::default());
        let got = verdict(&report);
        let errors = fields(&report, |s| s == Severity::Error);
        let advisories = fields(&report, |s| s < Severity::Error);
        let missing_warns: Vec<&String> = label.warns.difference(&advisories).collect();
        if got != label.verdict || errors != label.rejects || !missing_warns.is_empty() {
            mismatches.push(format!(
                "{}\n  expected {} {:?}\n  got      {got} {errors:?}\n  warnings expected but missing: {missing_warns:?}\n  input errors: {:?}",
                label.file, label.verdict, label.rejects, report.input_errors
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} corpus mismatches at the default target:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn every_corpus_file_gets_its_labelled_verdict_at_1_19_with_docker() {
    let (dir, labels) = corpus("every_corpus_file_gets_its_labelled_verdict_at_1_19");
    let docker = TargetCluster::at(KubeVersion::new(1, 19));
    assert!(docker.is_docker());
    let mut mismatches = Vec::new();
    for label in &labels {
        let report = lint_file(&dir.join(&label.file), &docker);
        let got = verdict(&report);
        if got != label.docker_verdict {
            mismatches.push(format!(
                "{}: expected {}, got {got} {:?}",
                label.file,
                label.docker_verdict,
                fields(&report, |s| s == Severity::Error)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} corpus mismatches at 1.19 + docker:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn every_finding_has_a_source_position() {
    let (dir, labels) = corpus("every_finding_has_a_source_position");
    for label in labels.iter().filter(|l| l.verdict == "reject") {
        for f in lint_file(&dir.join(&label.file), &TargetCluster::default()).findings {
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
#[cfg_attr(
    no_corpus,
    ignore = "needs the real-world manifests in ../shared/corpus (or set WINADMIT_CORPUS)"
)]
fn the_broken_file_is_reported_with_its_line() {
    let (dir, labels) = corpus("the_broken_file_is_reported_with_its_line");
    let label = labels
        .into_iter()
        .find(|l| l.verdict == "error")
        .expect("the corpus has an unparseable file");
    let report = lint_file(&dir.join(&label.file), &TargetCluster::default());
    let problem = &report.input_errors[0];
    assert!(problem.line.is_some(), "{problem:?}");
    assert!(problem.message.contains("invalid YAML"), "{problem:?}");
}
