//! kustomize overlays: built with `kustomize build`, or `kubectl
//! kustomize` when kustomize is not on `PATH`, through a kustomization
//! generated in a temporary directory that takes the user's as its one
//! resource and asks for origin annotations (`buildMetadata:
//! [originAnnotations]`: no command-line flag does). The user's files are
//! never changed. Each object's `config.kubernetes.io/origin` names the
//! resource file it came from (or the kustomization whose generator made
//! it): the objects are grouped into one text per file.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use super::{Rendered, Sources, command_line};

/// The builders tried, in order: the program and its arguments before the
/// directory.
const TOOLS: [(&str, &[&str]); 2] = [("kustomize", &["build"]), ("kubectl", &["kustomize"])];

/// Builds the overlay in `dir` into `sources`.
///
/// # Errors
/// Neither kustomize nor kubectl is on `PATH`, the build fails, or the
/// temporary kustomization cannot be written.
pub fn build(dir: &Path, sources: &mut Sources) -> anyhow::Result<()> {
    let root = std::fs::canonicalize(dir)
        .with_context(|| format!("{}: cannot resolve the directory", dir.display()))?;
    let wrapper = tempfile::Builder::new()
        .prefix("winadmit-kustomize-")
        .tempdir()
        .context(
            "creating a temporary directory for the kustomization that adds origin annotations",
        )?;
    let base = std::fs::canonicalize(wrapper.path())?;
    let relative = relative_to(&base, &root);
    std::fs::write(
        base.join("kustomization.yaml"),
        format!(
            "# Written by winadmit lint: {} with origin annotations.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\nbuildMetadata: [originAnnotations]\n",
            root.display(),
            serde_json::to_string(&relative.display().to_string())?
        ),
    )
    .context("writing the temporary kustomization")?;
    let (line, output) = run(dir, &base)?;
    sources.commands.push(format!(
        "{line}   (a kustomization around {} adding origin annotations)",
        dir.display()
    ));
    let note = format!(
        "built by {}",
        line.split(' ').take(2).collect::<Vec<_>>().join(" ")
    );
    for (name, text) in split(&base, &root, dir, &output) {
        sources.rendered.push(Rendered {
            name,
            note: note.clone(),
            text,
        });
    }
    Ok(())
}

/// Runs the first builder found; the command line and its output.
fn run(dir: &Path, wrapper: &Path) -> anyhow::Result<(String, String)> {
    let mut tried = Vec::new();
    for (program, before) in TOOLS {
        let mut argv: Vec<OsString> = before.iter().map(OsString::from).collect();
        argv.push(wrapper.as_os_str().to_owned());
        let line = command_line(program, &argv);
        let output = match Command::new(program).args(&argv).output() {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tried.push(line);
                continue;
            }
            Err(e) => bail!(
                "{}: cannot run {program} ({e}); the command: {line}",
                dir.display()
            ),
        };
        if !output.status.success() {
            bail!(
                "{}: {program} could not build the kustomization ({}); the command: {line}\n{program} said: {}",
                dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let text = String::from_utf8(output.stdout)
            .with_context(|| format!("{}: {program}'s output is not UTF-8", dir.display()))?;
        return Ok((line, text));
    }
    bail!(
        "{}: a kustomization, built with kustomize before it is judged, but neither kustomize nor kubectl is on PATH (tried: {})\n\
         Install kustomize (https://kubectl.docs.kubernetes.io/installation/kustomize/) or kubectl (https://kubernetes.io/docs/tasks/tools/); or build it yourself: `kubectl kustomize {} | winadmit lint -`",
        dir.display(),
        tried.join("; "),
        dir.display()
    )
}

/// `to` relative to `from` (both absolute, resolved): `../..` up to their
/// common ancestor, then down.
pub(super) fn relative_to(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for c in &to[common..] {
        out.push(c);
    }
    out
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The origin's file as it is shown: under the overlay given, as a path
/// beside `dir`; elsewhere, absolute.
fn origin_file(wrapper: &Path, root: &Path, dir: &Path, origin: &str) -> String {
    let absolute = normalize(&wrapper.join(origin));
    let shown = match absolute.strip_prefix(root) {
        Ok(inside) => dir.join(inside),
        Err(_) => match root.parent().map(|p| (p, absolute.strip_prefix(p))) {
            // A sibling base (`../base`) beside the overlay.
            Some((_, Ok(beside))) => dir.join("..").join(beside),
            _ => absolute,
        },
    };
    normalize_shown(&shown)
}

/// `a/b/../c` as `a/c`, keeping a leading `..` of a relative path.
fn normalize_shown(p: &Path) -> String {
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in p.components() {
        match (c, out.last()) {
            (Component::CurDir, _) if !out.is_empty() => {}
            (Component::ParentDir, Some(Component::Normal(_))) => {
                out.pop();
            }
            (c, _) => out.push(c),
        }
    }
    out.iter().collect::<PathBuf>().display().to_string()
}

/// The path (or, for a generated object, the kustomization) an origin
/// annotation names, read from the object's text as kustomize writes it.
pub(super) fn origin_of(doc: &str) -> Option<&str> {
    let mut lines = doc
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("config.kubernetes.io/origin:"));
    let head = lines.next()?;
    let indent = head.len() - head.trim_start().len();
    let mut configured_in = None;
    for l in lines.take_while(|l| l.len() - l.trim_start().len() > indent) {
        let t = l.trim();
        if let Some(p) = t.strip_prefix("path: ") {
            return Some(p.trim_matches('"'));
        }
        if let Some(p) = t.strip_prefix("configuredIn: ") {
            configured_in = Some(p.trim_matches('"'));
        }
    }
    configured_in
}

/// One text per origin file, in the order first built.
pub(super) fn split(
    wrapper: &Path,
    root: &Path,
    dir: &Path,
    output: &str,
) -> Vec<(String, String)> {
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut doc = String::new();
    let flush = |doc: &mut String, parts: &mut Vec<(String, String)>| {
        if doc.trim().is_empty() {
            doc.clear();
            return;
        }
        let name = origin_of(doc).map_or_else(
            || dir.join("kustomization.yaml").display().to_string(),
            |o| origin_file(wrapper, root, dir, o),
        );
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
        parts[i].1.push_str(doc);
        doc.clear();
    };
    for line in output.split_inclusive('\n') {
        if line.trim_end() == "---" {
            flush(&mut doc, &mut parts);
        } else {
            doc.push_str(line);
        }
    }
    flush(&mut doc, &mut parts);
    parts
}
