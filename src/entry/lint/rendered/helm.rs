//! Helm charts: `helm template` once per values set, its output split at
//! helm's `# Source:` lines into one text per template.
//!
//! What is judged: everything `helm template` prints, hooks (and chart
//! tests, which are hooks) included, since their pods run on the same
//! nodes; `crds/` is not rendered (`--include-crds` is not passed):
//! CustomResourceDefinitions hold no pod template.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use super::{RenderOptions, Rendered, Sources, command_line};
use crate::decision::version::KubeVersion;

/// The helm to run: `WINADMIT_HELM`, or `helm` on `PATH`.
fn program() -> String {
    std::env::var("WINADMIT_HELM").unwrap_or_else(|_| "helm".to_owned())
}

/// The values sets: each file given, and each `.yaml`/`.yml` file of
/// each directory given (sorted by name).
///
/// # Errors
/// A values set cannot be read, or a directory holds no values file.
pub fn values_sets(given: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut sets = Vec::new();
    for p in given {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| {
                    format!("--values-set {}: cannot read the directory", p.display())
                })?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|f| f.is_file() && f.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect();
            if files.is_empty() {
                bail!(
                    "--values-set {}: no .yaml or .yml values file in this directory",
                    p.display()
                );
            }
            files.sort();
            sets.extend(files);
        } else if p.is_file() {
            sets.push(p.clone());
        } else {
            bail!(
                "--values-set {}: no such file or directory: give a values file or a directory of them",
                p.display()
            );
        }
    }
    Ok(sets)
}

/// `helm template`'s arguments for `chart` with `values_set`.
fn arguments(
    chart: &Path,
    args: &RenderOptions,
    version: KubeVersion,
    values_set: Option<&Path>,
) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        "template".into(),
        args.release_name.clone().into(),
        chart.as_os_str().to_owned(),
        "--namespace".into(),
        args.namespace.clone().into(),
        "--kube-version".into(),
        format!("v{}.{}.0", version.major, version.minor).into(),
    ];
    for v in &args.api_versions {
        a.push("--api-versions".into());
        a.push(v.into());
    }
    for f in args.values.iter().map(PathBuf::as_path).chain(values_set) {
        a.push("--values".into());
        a.push(f.as_os_str().to_owned());
    }
    for s in &args.set {
        a.push("--set".into());
        a.push(s.into());
    }
    a
}

/// Renders `chart` once per values set (once with its defaults when there
/// is none) into `sources`.
///
/// # Errors
/// helm is missing, fails, or the chart's subcharts are missing.
pub fn render(
    chart: &Path,
    args: &RenderOptions,
    version: KubeVersion,
    values_sets: &[PathBuf],
    sources: &mut Sources,
) -> anyhow::Result<()> {
    let defaults = [None];
    let sets: Vec<Option<&Path>> = if values_sets.is_empty() {
        defaults.to_vec()
    } else {
        values_sets.iter().map(|p| Some(p.as_path())).collect()
    };
    for set in sets {
        let program = program();
        let argv = arguments(chart, args, version, set);
        let line = command_line(&program, &argv);
        let output = run(&program, &argv, chart, &line)?;
        let note = match set {
            Some(s) => format!("helm template, values set {}", s.display()),
            None => "helm template".to_owned(),
        };
        sources.commands.push(line);
        for (name, text) in split(chart, &output) {
            sources.rendered.push(Rendered {
                name,
                note: note.clone(),
                text,
            });
        }
    }
    Ok(())
}

/// Runs helm; its output, or the error lint exits 2 with.
fn run(program: &str, argv: &[OsString], chart: &Path, line: &str) -> anyhow::Result<String> {
    let output = match Command::new(program).args(argv).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{}: a Helm chart, rendered with helm before it is judged, but helm is not on PATH ({program}: not found); the command: {line}\n\
             Install helm (https://helm.sh/docs/intro/install/) or name it with WINADMIT_HELM; or render the chart yourself: `helm template ... | winadmit lint -`",
            chart.display()
        ),
        Err(e) => bail!(
            "{}: cannot run helm ({e}); the command: {line}",
            chart.display()
        ),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        if let Some(missing) = missing_dependencies(&stderr) {
            bail!(
                "{}: the chart lists subcharts that are not in its charts/ folder: {}\n\
                 Fetch them with `helm dependency build {}` (it downloads them from the repositories Chart.yaml names), then lint again; helm said: {}",
                chart.display(),
                describe_missing(chart, &missing),
                chart.display(),
                stderr.trim()
            );
        }
        bail!(
            "{}: helm could not render the chart ({}); the command: {line}\nhelm said: {}",
            chart.display(),
            output.status,
            stderr.trim()
        );
    }
    String::from_utf8(output.stdout).with_context(|| {
        format!(
            "{}: helm's output is not UTF-8; the command: {line}",
            chart.display()
        )
    })
}

/// The subcharts helm names in "found in Chart.yaml, but missing in
/// charts/ directory: a, b".
fn missing_dependencies(stderr: &str) -> Option<Vec<String>> {
    let (_, list) = stderr.split_once("missing in charts/ directory:")?;
    let list = list.lines().next().unwrap_or_default();
    let names: Vec<String> = list
        .split(',')
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    (!names.is_empty()).then_some(names)
}

#[derive(serde::Deserialize)]
struct ChartFile {
    #[serde(default)]
    dependencies: Vec<Dependency>,
}

#[derive(serde::Deserialize)]
struct Dependency {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    repository: Option<String>,
}

/// Each missing subchart with its version and repository from Chart.yaml.
fn describe_missing(chart: &Path, missing: &[String]) -> String {
    let deps: Vec<Dependency> = std::fs::read_to_string(chart.join("Chart.yaml"))
        .ok()
        .and_then(|t| serde_saphyr::from_str::<ChartFile>(&t).ok())
        .map(|c| c.dependencies)
        .unwrap_or_default();
    missing
        .iter()
        .map(|name| match deps.iter().find(|d| &d.name == name) {
            Some(d) => format!(
                "{name} {} from {}",
                d.version.as_deref().unwrap_or("(any version)"),
                d.repository.as_deref().unwrap_or("(no repository)")
            ),
            None => name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Splits helm's output at its `# Source: <chart>/<path>` lines: one text
/// per template, named `<chart dir>/<path>`, in the order first printed.
#[must_use]
pub fn split(chart: &Path, output: &str) -> Vec<(String, String)> {
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut current: Option<usize> = None;
    // A `---` line is the previous document's end: dropped when a
    // `# Source:` line follows (the part gets its own separator).
    let mut separator = false;
    for line in output.split_inclusive('\n') {
        if line.trim_end() == "---" {
            separator = true;
            continue;
        }
        if let Some(source) = line.strip_prefix("# Source: ") {
            separator = false;
            let name = template_file(chart, source.trim_end());
            let i = parts
                .iter()
                .position(|(n, _)| *n == name)
                .unwrap_or_else(|| {
                    parts.push((name, String::new()));
                    parts.len() - 1
                });
            if !parts[i].1.is_empty() {
                parts[i].1.push_str("---\n");
            }
            current = Some(i);
            continue;
        }
        if let Some(i) = current {
            if std::mem::take(&mut separator) {
                parts[i].1.push_str("---\n");
            }
            parts[i].1.push_str(line);
        }
    }
    parts
}

/// `<chart name>/templates/x.yaml` as a path under the chart given.
fn template_file(chart: &Path, source: &str) -> String {
    let rest = source.split_once('/').map_or(source, |(_, rest)| rest);
    chart.join(rest).display().to_string()
}
