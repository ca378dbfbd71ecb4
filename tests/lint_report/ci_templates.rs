//! The CI templates of `docs/ci/` and the pre-commit hook work as written:
//! the GitHub Actions workflow passes actionlint (built by
//! `tests/image/build.sh`), the GitLab job's script runs as a shell step
//! on a repository with manifests and a chart (helm from
//! `tests/helm/build.sh`), and the pre-commit hook passes a chart's
//! changed files, which lint judges by rendering their chart once.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::binary;
use crate::charts::helm_homes;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), |t| root().join(t))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// A repository with a manifest Windows cannot run and a chart.
fn repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join("deploy")).unwrap();
    std::fs::copy(
        root().join("tests/fixtures/lint/windows-bad.yaml"),
        repo.path().join("deploy/web.yaml"),
    )
    .unwrap();
    copy_dir(
        &root().join("tests/fixtures/charts/tiny"),
        &repo.path().join("charts/tiny"),
    );
    repo
}

/// `PATH` with winadmit and the built helm first.
fn tools_path() -> std::ffi::OsString {
    let winadmit = Path::new(binary::BIN).parent().unwrap().to_path_buf();
    let mut dirs = vec![winadmit, target().join("helm/bin")];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

#[test]
#[cfg_attr(
    no_image_tools,
    ignore = "needs actionlint, which is not built: run tests/image/build.sh"
)]
fn the_github_actions_workflow_passes_actionlint() {
    let actionlint = target().join("image/bin/actionlint");
    assert!(
        actionlint.is_file(),
        "actionlint is not built: run tests/image/build.sh"
    );
    let out = Command::new(actionlint)
        .args(["-no-color", "docs/ci/github-actions.yml"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "actionlint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // It uploads SARIF to code scanning, and fails the job after the upload.
    let text = std::fs::read_to_string(root().join("docs/ci/github-actions.yml")).unwrap();
    for want in [
        "--format sarif",
        "github/codeql-action/upload-sarif",
        "security-events: write",
        "steps.lint.outcome == 'failure'",
    ] {
        assert!(text.contains(want), "no {want:?}");
    }
}

#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn the_gitlab_job_script_runs_as_a_shell_step() {
    let ci = yaml("docs/ci/gitlab-ci.yml");
    let job = &ci["winadmit-lint"];
    assert_eq!(job["artifacts"]["reports"]["junit"], "winadmit-junit.xml");
    let script: Vec<&str> = job["script"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let paths = job["variables"]["PATHS"].as_str().unwrap();
    let repo = repository();
    let home = tempfile::tempdir().unwrap();
    let run = || {
        helm_homes(
            Command::new("sh")
                .args(["-e", "-c", &script.join("\n")])
                .current_dir(repo.path())
                .env("PATH", tools_path())
                .env("PATHS", paths)
                .env_remove("WINADMIT_HELM"),
            home.path(),
        )
        .output()
        .unwrap()
    };
    let out = run();
    let junit = std::fs::read_to_string(repo.path().join("winadmit-junit.xml")).unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(junit.contains("<failure"), "{junit}");
    assert!(junit.contains("deploy/web.yaml"), "{junit}");
    assert!(
        junit.contains("classname=\"charts/tiny/templates/pod.yaml\""),
        "the chart rendered: {junit}"
    );
    // With a baseline in the repository, the same findings pass.
    let written = helm_homes(
        binary::command(&[
            "lint",
            "--write-baseline",
            ".winadmit-baseline.json",
            "deploy/",
            "charts/",
        ])
        .current_dir(repo.path())
        .env("PATH", tools_path()),
        home.path(),
    )
    .output()
    .unwrap();
    assert_eq!(
        written.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let out = run();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    no_helm,
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn the_pre_commit_hook_passes_chart_files_and_lint_renders_their_chart() {
    let hooks = yaml(".pre-commit-hooks.yaml");
    let hook = &hooks[0];
    assert_eq!(hook["id"], "winadmit-lint");
    assert_eq!(hook["entry"], "winadmit lint");
    let files = regex::Regex::new(hook["files"].as_str().unwrap()).unwrap();
    let exclude = regex::Regex::new(hook["exclude"].as_str().unwrap()).unwrap();
    let passed = |f: &str| files.is_match(f) && !exclude.is_match(f);
    for f in [
        "deploy/web.yaml",
        "charts/tiny/templates/pod.yaml",
        "charts/tiny/templates/_helpers.tpl",
        "charts/tiny/values.yaml",
        "charts/tiny/Chart.yaml",
    ] {
        assert!(passed(f), "{f} is not passed to the hook");
    }
    assert!(!passed(".github/workflows/release.yml"));
    assert!(!passed("README.md"));
    // What pre-commit runs for a commit that changes a template and the
    // chart's values: the chart rendered once, with the manifest.
    let repo = repository();
    let home = tempfile::tempdir().unwrap();
    let out = helm_homes(
        binary::command(&[
            "lint",
            "charts/tiny/templates/pod.yaml",
            "charts/tiny/Chart.yaml",
            "deploy/web.yaml",
        ])
        .current_dir(repo.path())
        .env("PATH", tools_path()),
        home.path(),
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("rendered with: ").count(),
        1,
        "the chart once: {err}"
    );
    assert!(
        err.contains("helm template release-name charts/tiny"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("deploy/web.yaml:"), "{stdout}");
}
