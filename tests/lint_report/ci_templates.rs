//! The CI templates of `docs/ci/` and the pre-commit hook work as written:
//! the GitHub Actions workflow passes actionlint (built by
//! `tests/image/build.sh`), the GitLab job's script runs as a shell step
//! on a repository with manifests and a chart (helm from
//! `tests/helm/build.sh`), and the pre-commit hook passes a chart's
//! changed files, which lint judges by rendering their chart once. The
//! hook runs as pre-commit runs it for a user, with pre-commit's own
//! `pre-commit try-repo` (pre-commit from `tests/precommit/install.sh`),
//! and the README's `.pre-commit-config.yaml` names it.

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

#[test]
fn the_readme_pre_commit_config_names_the_hook() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme
        .split("```yaml\nrepos:")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README shows a .pre-commit-config.yaml starting with `repos:`");
    let config: Value = serde_saphyr::from_str(&format!("repos:{block}")).unwrap();
    let repo = &config["repos"][0];
    assert_eq!(repo["repo"], env!("CARGO_PKG_REPOSITORY"));
    assert!(repo["rev"].as_str().is_some_and(|r| r.starts_with('v')));
    assert_eq!(
        repo["hooks"][0]["id"],
        yaml(".pre-commit-hooks.yaml")[0]["id"]
    );
}

/// A committed git repository with a chart and a plain manifest, with
/// Windows problems or without.
fn chart_repository(problems: bool) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    let chart = repo.path().join("charts/web");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::create_dir_all(repo.path().join("deploy")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    )
    .unwrap();
    // A Windows pod that asks for the host's network when the values say so.
    std::fs::write(
        chart.join("templates/pod.yaml"),
        "apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-iis
spec:
  hostNetwork: {{ .Values.hostNetwork }}
  nodeSelector:
    kubernetes.io/os: windows
  securityContext:
    runAsNonRoot: true
    windowsOptions:
      runAsUserName: ContainerUser
  containers:
  - name: iis
    image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022
    resources:
      limits:
        memory: 1Gi
",
    )
    .unwrap();
    git(repo.path(), &["init", "--quiet"]);
    commit(repo.path(), problems);
    repo
}

/// Writes the chart's values and the manifest, with Windows problems or
/// without, and commits everything.
fn commit(repo: &Path, problems: bool) {
    std::fs::write(
        repo.join("charts/web/values.yaml"),
        format!("hostNetwork: {problems}\n"),
    )
    .unwrap();
    let manifest = if problems {
        "windows-bad.yaml"
    } else {
        "clean.yaml"
    };
    std::fs::copy(
        root().join("tests/fixtures/lint").join(manifest),
        repo.join("deploy/app.yaml"),
    )
    .unwrap();
    git(repo, &["add", "--all"]);
    git(repo, &["commit", "--quiet", "--message", manifest]);
}

fn git(repo: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "winadmit tests")
        .env("GIT_AUTHOR_EMAIL", "tests@winadmit.invalid")
        .env("GIT_COMMITTER_NAME", "winadmit tests")
        .env("GIT_COMMITTER_EMAIL", "tests@winadmit.invalid")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pre-commit try-repo <this repository> winadmit-lint ARGS` run in `repo`:
/// pre-commit clones this repository at HEAD (with its uncommitted
/// changes), installs the hook's environment as it does for a user
/// (`language: rust`: `cargo install --bins --root <env> --path <clone>`)
/// and runs the hook on the files ARGS select. Its output, with the
/// hook's, is on stdout.
///
/// try-repo installs the environment into a temporary store every time
/// (`PRE_COMMIT_HOME` only keeps pre-commit's own files out of the
/// user's), so what keeps the test to minutes is cargo's side:
/// - `CARGO_TARGET_DIR` under `target/precommit/cargo` keeps the compiled
///   dependencies from one run to the next; only winadmit itself, in a
///   fresh clone each time, is compiled again;
/// - `CARGO_PROFILE_RELEASE_OPT_LEVEL=0`: `cargo install` builds the
///   release profile, whose optimisation changes how fast the hook runs,
///   not what it finds; unoptimised it compiles several times faster.
///   The rest of the release profile (no debug assertions, no overflow
///   checks) is kept.
fn try_repo(repo: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let pre_commit = target().join("precommit/venv/bin/pre-commit");
    assert!(
        pre_commit.is_file(),
        "pre-commit is not installed: run tests/precommit/install.sh"
    );
    // helm for the chart, and the cargo running the tests for the hook's
    // environment (without cargo on PATH, pre-commit would download
    // rustup and a toolchain).
    let mut dirs = vec![target().join("helm/bin")];
    if let Some(cargo) = std::env::var_os("CARGO") {
        dirs.extend(Path::new(&cargo).parent().map(Path::to_path_buf));
    }
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    helm_homes(
        Command::new(pre_commit)
            .args(["try-repo"])
            .arg(root())
            .arg("winadmit-lint")
            .args(args)
            .current_dir(repo)
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env("PRE_COMMIT_HOME", home.join("pre-commit"))
            .env("PRE_COMMIT_COLOR", "never")
            .env("CARGO_TARGET_DIR", target().join("precommit/cargo"))
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
            .env_remove("WINADMIT_HELM")
            .stdin(std::process::Stdio::null()),
        home,
    )
    .output()
    .unwrap()
}

#[test]
#[cfg_attr(
    all(no_precommit, no_helm),
    ignore = "needs pre-commit, which is not installed: run tests/precommit/install.sh; needs helm, which is not built: run tests/helm/build.sh"
)]
#[cfg_attr(
    all(no_precommit, not(no_helm)),
    ignore = "needs pre-commit, which is not installed: run tests/precommit/install.sh"
)]
#[cfg_attr(
    all(not(no_precommit), no_helm),
    ignore = "needs helm, which is not built: run tests/helm/build.sh"
)]
fn pre_commit_try_repo_runs_the_hook_on_a_chart_and_a_manifest() {
    let home = tempfile::tempdir().unwrap();
    let repo = chart_repository(true);
    let out = try_repo(
        repo.path(),
        home.path(),
        &[
            "--files",
            "charts/web/templates/pod.yaml",
            "deploy/app.yaml",
        ],
    );
    let text = output(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(hook_result(&text).ends_with("Failed"), "{text}");
    // The hook failed with findings (lint's exit code 1, not 2 for a
    // missing helm or a bad argument), naming the rule and the template.
    assert!(text.contains("- exit code: 1"), "{text}");
    for file in ["charts/web/templates/pod.yaml:", "deploy/app.yaml:"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(file) && l.contains("error[WIN-HOSTNETWORK]")),
            "no WIN-HOSTNETWORK finding in {file}\n{text}"
        );
    }
    assert!(
        text.contains("helm template release-name charts/web"),
        "{text}"
    );

    // The same repository with the chart and the manifest fixed passes,
    // every file given.
    commit(repo.path(), false);
    let out = try_repo(repo.path(), home.path(), &["--all-files"]);
    let text = output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(hook_result(&text).ends_with("Passed"), "{text}");
}

fn output(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// pre-commit's line for the hook: its name, dots, and `Passed`, `Failed`
/// or `(no files to check)Skipped`.
fn hook_result(output: &str) -> &str {
    let name = yaml(".pre-commit-hooks.yaml")[0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    output
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_default()
}
