//! `lint` on Helm charts and kustomize overlays that no one here wrote,
//! from the Go module cache (`tests/charts/fetch.sh`: Kyverno 1.19.1's
//! `charts/kyverno`, Gatekeeper 3.23.1's `charts/gatekeeper`, KWOK 0.8.0's
//! `charts/kwok` and `kustomize/kwok`): every object the tool renders is
//! judged (as many as the tool prints), each finding names its template or
//! resource file; the baseline on a rendered chart; and a chart with no
//! helm (and an overlay with neither kustomize nor kubectl) on `PATH`
//! exits 2 naming the tool, the command and where to get it.
//!
//! helm is the one `tests/helm/build.sh` builds into `target/helm/bin`
//! (given to lint as `WINADMIT_HELM`); the overlay is built with the
//! `kubectl` of `target/controlplane/bin` or `PATH`. Without them, or
//! without Go to download the modules, the tests are ignored with the
//! command that provides them (`build.rs`: `no_helm`, `no_kubectl`,
//! `no_chart_modules`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::binary;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/charts").join(name)
}

/// The modules' folders, by name (`tests/charts/fetch.sh`).
fn modules() -> BTreeMap<String, PathBuf> {
    let out = Command::new(root().join("tests/charts/fetch.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/charts/fetch.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), PathBuf::from(v)))
        .collect()
}

fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), |t| root().join(t))
}

/// helm, as `tests/helm/build.sh` builds it.
fn helm_bin() -> PathBuf {
    let bin = target().join("helm/bin/helm");
    assert!(bin.is_file(), "helm is not built: run tests/helm/build.sh");
    bin
}

/// `PATH` with the control plane's kubectl first.
fn path_with_kubectl() -> std::ffi::OsString {
    let mut dirs = vec![target().join("controlplane/bin")];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// `winadmit lint args` with helm from `target/`, its own helm home.
fn lint(args: &[&std::ffi::OsStr], home: &Path) -> Output {
    helm_homes(
        binary::command(args)
            .env("WINADMIT_HELM", helm_bin())
            .env("PATH", path_with_kubectl())
            .stdin(std::process::Stdio::null()),
        home,
    )
    .output()
    .unwrap()
}

/// helm's cache, configuration and data under `home`, so that a test
/// neither reads nor writes the user's.
pub(crate) fn helm_homes<'c>(cmd: &'c mut Command, home: &Path) -> &'c mut Command {
    cmd.env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The objects in a tool's output (documents with a `kind`).
fn objects_in(output: &[u8]) -> usize {
    let text = String::from_utf8_lossy(output);
    text.split("\n---")
        .filter(|doc| doc.lines().any(|l| l.starts_with("kind: ")))
        .count()
}

/// `helm template` run directly: how many objects it prints.
fn helm_objects(chart: &Path, home: &Path, extra: &[&str]) -> usize {
    let out = helm_homes(
        Command::new(helm_bin())
            .args(["template", "release-name"])
            .arg(chart)
            .args(["--namespace", "default", "--kube-version", "v1.37.0"])
            .args(extra),
        home,
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    objects_in(&out.stdout)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every finding's file is under `dir`, and each file is a template.
fn findings_name_files_under(report: &Value, dir: &Path, part: &str) -> Vec<String> {
    let findings = report["findings"].as_array().unwrap();
    for f in findings {
        let file = f["file"].as_str().unwrap();
        assert!(
            file.starts_with(&dir.display().to_string()) && file.contains(part),
            "{file} is not a file of {} under {part}",
            dir.display()
        );
    }
    findings
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["rule"].as_str().unwrap(),
                f["file"].as_str().unwrap()
            )
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
            // The module cache is read-only; the copy is the test's.
            let mut perms = std::fs::metadata(&dest).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)] // a scratch copy
            perms.set_readonly(false);
            std::fs::set_permissions(&dest, perms).unwrap();
        }
    }
}

#[test]
fn without_helm_or_kustomize_on_path_lint_exits_2_naming_the_tool() {
    let empty = tempfile::tempdir().unwrap();
    for (input, tool, command, get) in [
        (
            fixture("tiny"),
            "helm is not on PATH",
            "helm template release-name",
            "https://helm.sh/docs/intro/install/",
        ),
        (
            fixture("overlay"),
            "neither kustomize nor kubectl is on PATH",
            "kubectl kustomize",
            "https://kubectl.docs.kubernetes.io/installation/kustomize/",
        ),
        // A file of a chart renders its chart (what the pre-commit hook
        // passes).
        (
            fixture("tiny/templates/pod.yaml"),
            "helm is not on PATH",
            "helm template release-name",
            "https://helm.sh/docs/intro/install/",
        ),
    ] {
        let out = binary::command(&[os("lint"), input.as_os_str()])
            .env("PATH", empty.path())
            .env_remove("WINADMIT_HELM")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", input.display());
        for want in [tool, command, get] {
            assert!(
                err.contains(want),
                "{}: no {want:?} in: {err}",
                input.display()
            );
        }
        assert!(out.stdout.is_empty(), "no report for a chart not judged");
    }
}

#[test]
#[cfg_attr(
    any(no_kubectl, no_chart_modules),
    ignore = "needs kubectl (run tests/apiserver/build.sh, or one on PATH) and Go to download KWOK's module (tests/charts/fetch.sh)"
)]
fn kwok_overlay_every_object_judged_findings_name_resource_files() {
    let kwok = &modules()["kwok"];
    let overlay = kwok.join("kustomize/kwok");
    let built = Command::new("kubectl")
        .arg("kustomize")
        .arg(&overlay)
        .env("PATH", path_with_kubectl())
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let home = tempfile::tempdir().unwrap();
    let node = fixture("windows-node.yaml");
    let facts = fixture("kwok-image-facts.json");
    let args = [
        os("lint"),
        overlay.as_os_str(),
        node.as_os_str(),
        os("--image-facts"),
        facts.as_os_str(),
        os("--format"),
        os("json"),
    ];
    let out = lint(&args, home.path());
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The built objects and the Windows node.
    assert_eq!(
        report["summary"]["objects"],
        objects_in(&built.stdout) + 1,
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("kubectl kustomize") || stderr(&out).contains("kustomize build"));
    let found = findings_name_files_under(&report, &kwok.join("kustomize"), ".yaml");
    assert_eq!(
        found,
        [format!(
            "WIN-LINUX-UNPINNED {}",
            overlay.join("deployment.yaml").display()
        )]
    );
    // The user's kustomization is never edited.
    let original = std::fs::read_to_string(overlay.join("kustomization.yaml")).unwrap();
    assert!(!original.contains("buildMetadata"));
}

#[test]
#[cfg_attr(
    any(no_helm, no_chart_modules),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; and Go for the charts' modules (tests/charts/fetch.sh)"
)]
fn kwok_chart_is_unpinned_until_a_values_set_adds_the_node_selector() {
    let chart = modules()["kwok"].join("charts/kwok");
    let home = tempfile::tempdir().unwrap();
    let node = fixture("windows-node.yaml");
    let facts = fixture("kwok-image-facts.json");
    let pinned = fixture("kwok-linux-values.yaml");
    let empty = home.path().join("defaults.yaml");
    std::fs::write(&empty, "{}\n").unwrap();
    let out = lint(
        &[
            os("lint"),
            chart.as_os_str(),
            node.as_os_str(),
            os("--image-facts"),
            facts.as_os_str(),
            os("--values-set"),
            empty.as_os_str(),
            os("--values-set"),
            pinned.as_os_str(),
            os("--format"),
            os("json"),
        ],
        home.path(),
    );
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Every object of both renders, and the node.
    let rendered = helm_objects(&chart, home.path(), &[]);
    assert_eq!(
        report["summary"]["objects"],
        2 * rendered + 1,
        "{}",
        stderr(&out)
    );
    let found = findings_name_files_under(&report, &chart, "/templates/");
    assert_eq!(
        found,
        [format!(
            "WIN-LINUX-UNPINNED {}",
            chart.join("templates/deployment.yaml").display()
        )],
        "only the render without the node selector"
    );
    let message = report["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.ends_with(&format!("[helm template, values set {}]", empty.display())),
        "{message}"
    );
    assert_eq!(report["findings"][0]["kind"], "Deployment");
    assert_eq!(report["findings"][0]["name"], "kwok-controller");
    // The same finding in every format, naming the template.
    let template = chart
        .join("templates/deployment.yaml")
        .display()
        .to_string();
    for (format, want) in [
        ("text", template.clone()),
        ("junit", template.clone()),
        (
            "sarif",
            template.trim_start_matches('/').replace('@', "%40"),
        ),
    ] {
        let out = lint(
            &[
                os("lint"),
                chart.as_os_str(),
                node.as_os_str(),
                os("--image-facts"),
                facts.as_os_str(),
                os("--format"),
                os(format),
            ],
            home.path(),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&want) && text.contains("WIN-LINUX-UNPINNED"),
            "{format}: {text}"
        );
    }
}

#[test]
#[cfg_attr(
    any(no_helm, no_chart_modules),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; and Go for the charts' modules (tests/charts/fetch.sh)"
)]
fn kyverno_chart_missing_subcharts_exit_2_then_renders_once_present() {
    let m = modules();
    let chart = m["kyverno"].join("charts/kyverno");
    let home = tempfile::tempdir().unwrap();
    let out = lint(&[os("lint"), chart.as_os_str()], home.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for want in [
        "kyverno-api 0.0.1-alpha.4 from https://kyverno.github.io/api",
        "openreports 0.1.0 from https://openreports.github.io/reports-api",
        "reports-server 0.1.6 from https://kyverno.github.io/reports-server/",
        "helm dependency build",
    ] {
        assert!(err.contains(want), "no {want:?} in: {err}");
    }
    // A copy with its subcharts: kyverno-api and openreports from their Go
    // modules, reports-server (in no Go module) a stub.
    let copy = home.path().join("kyverno");
    copy_dir(&chart, &copy);
    copy_dir(
        &m["kyverno-api"].join("charts/kyverno-api"),
        &copy.join("charts/kyverno-api"),
    );
    copy_dir(
        &m["openreports"].join("charts/openreports"),
        &copy.join("charts/openreports"),
    );
    std::fs::create_dir_all(copy.join("charts/reports-server")).unwrap();
    std::fs::write(
        copy.join("charts/reports-server/Chart.yaml"),
        "apiVersion: v2\nname: reports-server\nversion: 0.1.6\ndescription: A stub, the chart is in no Go module\n",
    )
    .unwrap();
    judged_as_rendered(&copy, home.path());
}

#[test]
#[cfg_attr(
    any(no_helm, no_chart_modules),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; and Go for the charts' modules (tests/charts/fetch.sh)"
)]
fn gatekeeper_chart_every_object_judged() {
    let chart = modules()["gatekeeper"].join("charts/gatekeeper");
    let home = tempfile::tempdir().unwrap();
    judged_as_rendered(&chart, home.path());
}

/// Every object helm renders is judged, and every workload checked is
/// named by its template (JUnit's test cases), hooks included.
fn judged_as_rendered(chart: &Path, home: &Path) {
    let rendered = helm_objects(chart, home, &[]);
    assert!(rendered > 5, "{rendered} objects");
    let node = fixture("windows-node.yaml");
    let out = lint(
        &[
            os("lint"),
            chart.as_os_str(),
            node.as_os_str(),
            os("--format"),
            os("json"),
        ],
        home,
    );
    let report = json(&out);
    assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        report["summary"]["objects"],
        rendered + 1,
        "{}",
        stderr(&out)
    );
    assert_eq!(report["summary"]["inputErrors"], 0);
    findings_name_files_under(&report, chart, "/templates/");
    let out = lint(
        &[os("lint"), chart.as_os_str(), os("--format"), os("junit")],
        home,
    );
    let junit = String::from_utf8_lossy(&out.stdout);
    let cases: Vec<&str> = junit.lines().filter(|l| l.contains("<testcase ")).collect();
    assert_eq!(
        cases.len(),
        report["summary"]["workloads"].as_u64().unwrap() as usize
    );
    for case in cases {
        assert!(
            case.contains(&format!("classname=\"{}/", chart.display()))
                && case.contains("/templates/"),
            "{case}"
        );
    }
}

#[test]
#[cfg_attr(
    any(no_helm, no_chart_modules),
    ignore = "needs helm, which is not built: run tests/helm/build.sh; and Go for the charts' modules (tests/charts/fetch.sh)"
)]
fn a_baseline_on_a_rendered_chart_fails_only_on_a_new_finding() {
    let home = tempfile::tempdir().unwrap();
    let chart = home.path().join("kwok");
    copy_dir(&modules()["kwok"].join("charts/kwok"), &chart);
    let baseline = home.path().join("baseline.json");
    let node = fixture("windows-node.yaml");
    let facts = fixture("kwok-image-facts.json");
    let base = |extra: &[&std::ffi::OsStr]| {
        let mut args = vec![
            os("lint"),
            chart.as_os_str(),
            node.as_os_str(),
            os("--image-facts"),
            facts.as_os_str(),
            os("--fail-on"),
            os("warning"),
        ];
        args.extend_from_slice(extra);
        lint(&args, home.path())
    };
    let out = base(&[os("--write-baseline"), baseline.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = base(&[os("--baseline"), baseline.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Without the baseline the warning fails.
    assert_eq!(base(&[]).status.code(), Some(1));

    std::fs::copy(
        fixture("win-hostnetwork.yaml"),
        chart.join("templates/added.yaml"),
    )
    .unwrap();
    let out = base(&[
        os("--baseline"),
        baseline.as_os_str(),
        os("--format"),
        os("json"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    let rules: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["WIN-HOSTNETWORK"], "only the new finding");
    assert_eq!(
        report["findings"][0]["file"],
        chart.join("templates/added.yaml").display().to_string()
    );
    let out = base(&[
        os("--baseline"),
        baseline.as_os_str(),
        os("--format"),
        os("sarif"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let sarif = json(&out);
    let states: BTreeMap<String, String> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap().to_owned(),
                r["baselineState"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(states["WIN-HOSTNETWORK"], "new");
    assert_eq!(states["WIN-LINUX-UNPINNED"], "unchanged");
    for r in sarif["runs"][0]["results"].as_array().unwrap() {
        assert!(r["partialFingerprints"]["winadmit/v1"].is_string(), "{r}");
    }
    // The old finding fixed: its entry is listed as gone.
    std::fs::write(chart.join("values.yaml"), {
        let v = std::fs::read_to_string(chart.join("values.yaml")).unwrap();
        v.replace(
            "nodeSelector: {}",
            "nodeSelector: {kubernetes.io/os: linux}",
        )
    })
    .unwrap();
    let out = base(&[os("--baseline"), baseline.as_os_str()]);
    assert!(stderr(&out).contains("1 entry is gone"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("WIN-LINUX-UNPINNED Deployment kwok-controller"),
        "{}",
        stderr(&out)
    );
}
