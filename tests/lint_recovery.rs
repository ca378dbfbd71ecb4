//! `lint` on a multi-document file with a broken YAML document in the
//! middle (issue 13): the broken one is reported at its line, the
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
