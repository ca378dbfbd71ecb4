use super::*;
use crate::decision::finding::Severity;
use crate::render::{LintFinding, LintReport};

fn finding(file: &str, line: u64, name: &str, field: &str) -> LintFinding {
    LintFinding {
        file: file.into(),
        line,
        column: 9,
        document: 0,
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some("kube-system".into()),
        name: name.into(),
        rule: "WIN-LINUX-UNPINNED",
        severity: Severity::Warning,
        field: field.into(),
        message: "m".into(),
        title: "t",
        doc_url: "u",
        fix: "f",
        patch: None,
    }
}

fn report(findings: Vec<LintFinding>) -> LintReport {
    LintReport {
        findings,
        ..LintReport::default()
    }
}

const IMAGE: &str = "spec.template.spec.containers[0].image";

#[test]
fn findings_are_matched_by_what_they_are_not_by_line_or_file() {
    let today = report(vec![
        finding("a.yaml", 10, "kwok", IMAGE),
        finding("a.yaml", 40, "kwok", IMAGE),
    ]);
    let baseline = Baseline::of(&today);
    assert_eq!(baseline.findings.len(), 1, "one entry per identity");
    let text = baseline.to_text();
    let read = Baseline::parse(&text).unwrap();
    assert_eq!(read, baseline);
    // Other lines edited, the object moved to another file: unchanged.
    let later = report(vec![
        finding("b.yaml", 77, "kwok", IMAGE),
        finding("b.yaml", 90, "other", IMAGE),
    ]);
    let compared = read.compare(&later);
    assert_eq!(compared.states, [State::Unchanged, State::New]);
    assert!(compared.gone.is_empty());
    // Fixed: the entry is gone.
    let fixed = read.compare(&report(vec![]));
    assert_eq!(fixed.gone, baseline.findings);
    assert_eq!(
        fixed.gone[0].to_string(),
        "WIN-LINUX-UNPINNED Deployment kube-system/kwok spec.template.spec.containers[0].image (was in a.yaml)"
    );
}

#[test]
fn the_identity_is_the_sarif_fingerprint() {
    let r = report(vec![finding("a.yaml", 1, "kwok", IMAGE)]);
    let f = crate::render::Report::finding(&r, 0);
    assert_eq!(
        identity(&f),
        "WIN-LINUX-UNPINNED|Deployment|kube-system/kwok|spec.template.spec.containers[0].image"
    );
}

#[test]
fn a_bad_baseline_names_the_key() {
    let e = Baseline::parse(r#"{"winadmitBaseline": 1, "findings": [{"rule": "X", "kind": "Pod", "name": "p", "field": "spec", "file": "a", "line": 3}]}"#).unwrap_err();
    assert!(e.contains("findings[0]") && e.contains("line"), "{e}");
    let e = Baseline::parse(r#"{"winadmitBaseline": 2, "findings": []}"#).unwrap_err();
    assert!(e.contains("version 1"), "{e}");
    assert!(Baseline::parse("not json").is_err());
}
