//! `lint` on a multi-document file with a broken YAML document in the
//! middle: the broken one is reported at its line, the
//! documents before and after it are still linted; duplicate keys give an
//! input warning naming the line and the key.

use std::process::Command;

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/lint/recovery/broken-middle.yaml"
);

#[test]
fn documents_around_a_broken_one_are_linted_and_duplicate_keys_warned() {
    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", "--format", "json", FILE])
        .output()
        .unwrap();
    // An input error: exit 2, as for any unreadable input.
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: std::collections::BTreeSet<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "WIN-PRIVILEGED")
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first", "third"].into(), "{v:#}");
    // Positions are in the whole file, not in the document.
    let third = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "third" && f["rule"] == "WIN-PRIVILEGED")
        .unwrap();
    assert_eq!(third["line"], 34);
    let errors = v["inputErrors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{v:#}");
    assert_eq!(errors[0]["line"], 18);
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("other documents are linted")
    );
    let warnings = v["inputWarnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{v:#}");
    assert_eq!(warnings[0]["line"], 26);
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key `app`")
    );

    let out = Command::new(env!("CARGO_BIN_EXE_winadmit"))
        .args(["lint", FILE])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("broken-middle.yaml:26:5: input warning: duplicate key `app`"),
        "{text}"
    );
    assert!(
        text.contains("broken-middle.yaml:18:9: input error: invalid YAML"),
        "{text}"
    );
}

/// A file read again with the tabs of a quoted scalar's continuation
/// lines made spaces (YAML allows them there; the parser does not) places
/// the findings after that tab at their line, not at 0:0 as when a second
/// parse of the original text stopped at the tab.
#[test]
fn findings_after_a_tab_in_a_quoted_scalar_have_their_position() {
    let text = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: script
data:
  run: \"line one
\t  line two\"
---
apiVersion: v1
kind: Pod
metadata:
  name: after-tab
spec:
  nodeSelector:
    kubernetes.io/os: windows
  containers:
  - name: c
    image: mcr.microsoft.com/windows/nanoserver:ltsc2022
    securityContext:
      privileged: true
";
    let policy = winadmit::decision::policy::Policy::default_policy();
    let cx = winadmit::decision::engine::Context::default();
    let mut report = winadmit::render::LintReport::default();
    winadmit::entry::lint::lint_text("tab.yaml", text, &policy, &cx, &mut report);
    assert!(report.input_errors.is_empty(), "{:?}", report.input_errors);
    let privileged = report
        .findings
        .iter()
        .find(|f| f.rule == "WIN-PRIVILEGED")
        .unwrap_or_else(|| panic!("{:#?}", report.findings));
    assert_eq!((privileged.line, privileged.column), (20, 7));
    assert!(report.findings.iter().all(|f| f.line > 8), "{report:#?}");
}
