//! Charts and overlays as lint's input: which paths are Helm charts or
//! kustomize overlays, rendered by their tool ([`helm`], [`kustomize`])
//! into texts named after the file each object came from (a chart's
//! template, an overlay's resource file), then judged as files are.
//!
//! A tool that is missing or fails is an input problem (exit 2) naming the
//! tool, the command and how to get it: a chart is never passed over.

mod helm;
mod kustomize;

use std::path::{Path, PathBuf};

use crate::decision::version::KubeVersion;

/// A text a tool rendered, named after the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The template or resource file the objects came from.
    pub name: String,
    /// How it was rendered, added to each of its findings' messages
    /// (`helm template`, the values set; `kubectl kustomize DIR`).
    pub note: String,
    pub text: String,
}

/// How charts are rendered: `helm template`'s arguments (the command
/// line's `RenderArgs`).
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Charts named by `--helm-chart`.
    pub helm_charts: Vec<PathBuf>,
    pub release_name: String,
    pub namespace: String,
    /// Values files for every render.
    pub values: Vec<PathBuf>,
    /// `--set` values for every render.
    pub set: Vec<String>,
    /// Values sets: one render each (files, or directories of them).
    pub values_sets: Vec<PathBuf>,
    pub api_versions: Vec<String>,
}

/// The inputs once charts and overlays are rendered.
#[derive(Debug, Default)]
pub struct Sources {
    /// Files, directories and `-`, read as they are.
    pub plain: Vec<PathBuf>,
    pub rendered: Vec<Rendered>,
    /// The commands that ran, one line each (shown on stderr).
    pub commands: Vec<String>,
}

/// What a path given to lint is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Chart(PathBuf),
    Kustomization(PathBuf),
    Plain(PathBuf),
}

/// The file names kustomize reads as a kustomization.
const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

fn is_chart_dir(dir: &Path) -> bool {
    dir.join("Chart.yaml").is_file()
}

fn is_packaged_chart(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "tgz")
}

fn is_kustomization_dir(dir: &Path) -> bool {
    KUSTOMIZATION_FILES.iter().any(|f| dir.join(f).is_file())
}

/// The chart a file is part of: its nearest folder with `Chart.yaml`
/// (a template, a values file, a subchart's file all render their chart).
fn chart_of_file(file: &Path) -> Option<PathBuf> {
    let mut dir = file.parent();
    while let Some(d) = dir {
        let here = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        if is_chart_dir(here) {
            // A subchart (`charts/<name>/` of a chart) renders with its
            // parent.
            return Some(outermost_chart(here));
        }
        dir = d.parent();
    }
    None
}

/// `dir`, or the chart it is a subchart of (`<parent>/charts/<dir>`).
fn outermost_chart(dir: &Path) -> PathBuf {
    let mut chart = dir.to_path_buf();
    while let Some(charts) = chart
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "charts"))
    {
        match charts.parent() {
            Some(parent) if is_chart_dir(parent) => chart = parent.to_path_buf(),
            _ => break,
        }
    }
    chart
}

fn classify(path: &Path) -> Kind {
    if path.as_os_str() == "-" {
        Kind::Plain(path.to_path_buf())
    } else if path.is_dir() && is_chart_dir(path) {
        Kind::Chart(outermost_chart(path))
    } else if is_packaged_chart(path) {
        Kind::Chart(path.to_path_buf())
    } else if path.is_dir() && is_kustomization_dir(path) {
        Kind::Kustomization(path.to_path_buf())
    } else if path.is_file() {
        chart_of_file(path).map_or_else(|| Kind::Plain(path.to_path_buf()), Kind::Chart)
    } else {
        Kind::Plain(path.to_path_buf())
    }
}

/// A directory walked for manifests: the charts below it are rendered,
/// its other files read (a chart's templates are not YAML until
/// rendered).
fn expand_dir(dir: &Path, out: &mut Vec<Kind>) {
    let mut charts: Vec<PathBuf> = Vec::new();
    let mut walk = walkdir::WalkDir::new(dir).sort_by_file_name().into_iter();
    while let Some(Ok(entry)) = walk.next() {
        if entry.file_type().is_dir() && is_chart_dir(entry.path()) {
            charts.push(entry.path().to_path_buf());
            walk.skip_current_dir();
        }
    }
    if charts.is_empty() {
        out.push(Kind::Plain(dir.to_path_buf()));
        return;
    }
    let (files, _) = crate::input::source::manifest_paths(&[dir.to_path_buf()]);
    out.extend(
        files
            .into_iter()
            .filter(|f| !charts.iter().any(|c| f.starts_with(c)))
            .map(Kind::Plain),
    );
    out.extend(charts.into_iter().map(Kind::Chart));
}

/// Sorts `paths` into charts, overlays and the rest, each chart and
/// overlay once, in the order given.
fn sort_paths(paths: &[PathBuf], helm_charts: &[PathBuf]) -> Vec<Kind> {
    let mut kinds = Vec::new();
    for p in paths {
        match classify(p) {
            Kind::Plain(dir) if dir.is_dir() => expand_dir(&dir, &mut kinds),
            k => kinds.push(k),
        }
    }
    kinds.extend(helm_charts.iter().cloned().map(Kind::Chart));
    let mut seen = std::collections::HashSet::new();
    kinds.retain(|k| match k {
        Kind::Chart(p) | Kind::Kustomization(p) => {
            seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        }
        Kind::Plain(_) => true,
    });
    kinds
}

/// Renders the charts and overlays among `paths` (and `args.helm_charts`)
/// for a cluster at `version`.
///
/// # Errors
/// helm or kustomize is missing or fails, a chart's subcharts are
/// missing, or a values set cannot be read: the message names the tool,
/// the command and what to do.
pub fn prepare(
    paths: &[PathBuf],
    args: &RenderOptions,
    version: KubeVersion,
) -> anyhow::Result<Sources> {
    let mut sources = Sources::default();
    let values_sets = helm::values_sets(&args.values_sets)?;
    for kind in sort_paths(paths, &args.helm_charts) {
        match kind {
            Kind::Plain(p) => sources.plain.push(p),
            Kind::Chart(chart) => {
                helm::render(&chart, args, version, &values_sets, &mut sources)?;
            }
            Kind::Kustomization(dir) => kustomize::build(&dir, &mut sources)?,
        }
    }
    Ok(sources)
}

/// A command as a shell line, for messages.
fn command_line(program: &str, args: &[std::ffi::OsString]) -> String {
    let mut line = program.to_owned();
    for a in args {
        let a = a.to_string_lossy();
        line.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
            line.push('\'');
            line.push_str(&a.replace('\'', r"'\''"));
            line.push('\'');
        } else {
            line.push_str(&a);
        }
    }
    line
}

#[cfg(test)]
mod tests;
