//! `cargo test` builds no Go tool: the tests that need one (the control
//! plane, KWOK, the older API servers, helm, crane, actionlint and
//! promtool) find it already built under `target/`, and otherwise are
//! compiled as ignored with the command that builds it (`build.rs`). These
//! checks keep the test sources to that: no test runs a tool's build
//! script, and every ignore reason of a Go-built tool names its script,
//! which exists.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `tests/`, with its text.
fn test_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root().join("tests")).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.path().extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            out.push((entry.into_path(), text));
        }
    }
    out
}

/// The cfg flags `build.rs` sets when a Go-built tool is not built.
const TOOL_FLAGS: &[&str] = &[
    "no_control_plane",
    "no_kwok",
    "no_apiserver_1_34",
    "no_apiserver_1_35",
    "no_apiserver_1_36",
    "no_helm",
    "no_image_tools",
    "no_promtool",
];

#[test]
fn no_test_runs_a_go_build_script() {
    let mut found = Vec::new();
    for (path, text) in test_sources() {
        // This file names the scripts it looks for.
        if path.ends_with("tests/install/test_tools.rs") {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            let runs = line.contains("Command::new(") || line.contains(".join(\"build.sh\")");
            let script = [
                "tests/apiserver",
                "tests/kwok",
                "tests/helm",
                "tests/image",
                "tests/promtool",
                "join(\"build.sh\")",
                "go-build.sh",
            ]
            .iter()
            .any(|s| line.contains(s));
            if runs && script {
                found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "tests that run a Go build (use the built tool, or ignore the test with its build command):\n{}",
        found.join("\n")
    );
}

#[test]
fn ignore_reasons_of_go_tools_name_their_build_script() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (path, text) in test_sources() {
        // `#[cfg_attr(PREDICATE, ignore = "REASON")]`, over one or more
        // lines, outside comments.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut rest = code.as_str();
        while let Some(at) = rest.find("cfg_attr(") {
            rest = &rest[at + "cfg_attr(".len()..];
            let Some(end) = rest.find(")]") else { break };
            let attr = &rest[..end];
            let Some(reason_at) = attr.find("ignore = \"") else {
                continue;
            };
            let predicate = &attr[..reason_at];
            let reason = &attr[reason_at + "ignore = \"".len()..];
            let reason = &reason[..reason.find('"').unwrap_or(reason.len())];
            // Only where a tool is missing (not under `not(..)` alone).
            let missing: Vec<&str> = TOOL_FLAGS
                .iter()
                .copied()
                .filter(|f| predicate.contains(f) && !predicate.contains(&format!("not({f})")))
                .collect();
            if missing.is_empty() {
                continue;
            }
            checked += 1;
            let scripts: Vec<&str> = reason
                .split_whitespace()
                .map(|w| w.trim_end_matches([',', ';', ')', '.']))
                .filter(|w| w.starts_with("tests/") && w.ends_with("build.sh"))
                .collect();
            if !reason.contains("run tests/") || scripts.is_empty() {
                wrong.push(format!("{}: {missing:?}: {reason}", path.display()));
            }
            for script in scripts {
                if !root().join(script).is_file() {
                    wrong.push(format!("{}: no such script {script}", path.display()));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} ignore reasons found");
    assert!(
        wrong.is_empty(),
        "ignore reasons that do not name the build command:\n{}",
        wrong.join("\n")
    );
}
