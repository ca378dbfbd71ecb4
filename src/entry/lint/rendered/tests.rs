use std::path::{Path, PathBuf};

use super::kustomize as k;
use super::{Kind, classify, command_line, helm, sort_paths};

const HELM_OUTPUT: &str = "---
# Source: kwok/templates/service.yaml
apiVersion: v1
kind: Service
---
# Source: kwok/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
---
# Source: kwok/templates/service.yaml
apiVersion: v1
kind: Service
metadata: {name: second}
---
# Source: kwok/charts/sub/templates/job.yaml
apiVersion: batch/v1
kind: Job
";

#[test]
fn helm_output_is_split_by_source_into_one_text_per_template() {
    let parts = helm::split(Path::new("charts/kwok"), HELM_OUTPUT);
    let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "charts/kwok/templates/service.yaml",
            "charts/kwok/templates/deployment.yaml",
            "charts/kwok/charts/sub/templates/job.yaml"
        ]
    );
    assert_eq!(
        parts[0].1,
        "apiVersion: v1\nkind: Service\n---\napiVersion: v1\nkind: Service\nmetadata: {name: second}\n"
    );
    assert_eq!(parts[1].1, "apiVersion: apps/v1\nkind: Deployment\n");
}

#[test]
fn a_document_separator_inside_a_template_part_is_kept() {
    let parts = helm::split(
        Path::new("c"),
        "# Source: c/templates/a.yaml\na: 1\n---\nb: 2\n",
    );
    assert_eq!(
        parts,
        [(
            "c/templates/a.yaml".to_owned(),
            "a: 1\n---\nb: 2\n".to_owned()
        )]
    );
}

const KUSTOMIZE_OUTPUT: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  annotations:
    config.kubernetes.io/origin: |
      configuredIn: ../../repo/overlay/kustomization.yaml
      configuredBy:
        apiVersion: builtin
        kind: ConfigMapGenerator
  name: kwok
---
apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    config.kubernetes.io/origin: |
      path: ../../repo/base/deployment.yaml
    other: x
  name: kwok
";

#[test]
fn kustomize_output_is_split_by_origin_into_resource_files() {
    let parts = k::split(
        Path::new("/tmp/w"),
        Path::new("/repo/overlay"),
        Path::new("deploy/overlay"),
        KUSTOMIZE_OUTPUT,
    );
    let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "deploy/overlay/kustomization.yaml",
            "deploy/base/deployment.yaml"
        ]
    );
    assert!(
        parts[1]
            .1
            .starts_with("apiVersion: apps/v1\nkind: Deployment\n")
    );
    assert_eq!(k::origin_of("kind: Pod\n"), None);
}

#[test]
fn the_wrapper_names_the_overlay_by_a_relative_path() {
    assert_eq!(
        k::relative_to(Path::new("/tmp/w1"), Path::new("/work/repo/overlay")),
        PathBuf::from("../../work/repo/overlay")
    );
}

#[test]
fn charts_overlays_and_files_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("charts/app");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::create_dir_all(chart.join("charts/sub/templates")).unwrap();
    std::fs::write(chart.join("Chart.yaml"), "name: app\n").unwrap();
    std::fs::write(chart.join("templates/d.yaml"), "{{ x }}\n").unwrap();
    std::fs::write(chart.join("charts/sub/Chart.yaml"), "name: sub\n").unwrap();
    std::fs::write(chart.join("charts/sub/templates/j.yaml"), "{{ y }}\n").unwrap();
    let overlay = dir.path().join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(overlay.join("kustomization.yaml"), "resources: []\n").unwrap();
    std::fs::write(dir.path().join("plain.yaml"), "kind: Pod\n").unwrap();

    assert_eq!(classify(&chart), Kind::Chart(chart.clone()));
    assert_eq!(
        classify(&chart.join("templates/d.yaml")),
        Kind::Chart(chart.clone())
    );
    // A subchart's file renders the chart it belongs to.
    assert_eq!(
        classify(&chart.join("charts/sub/templates/j.yaml")),
        Kind::Chart(chart.clone())
    );
    assert_eq!(classify(&overlay), Kind::Kustomization(overlay.clone()));
    let plain = dir.path().join("plain.yaml");
    assert_eq!(classify(&plain), Kind::Plain(plain.clone()));
    // A directory walked: its charts rendered once, its files read, an
    // overlay below it read as files.
    let sorted = sort_paths(
        &[dir.path().to_path_buf(), chart.join("templates/d.yaml")],
        &[],
    );
    assert!(sorted.contains(&Kind::Chart(chart.clone())), "{sorted:?}");
    assert_eq!(
        sorted
            .iter()
            .filter(|k| matches!(k, Kind::Chart(_)))
            .count(),
        1,
        "{sorted:?}"
    );
    assert!(sorted.contains(&Kind::Plain(plain)), "{sorted:?}");
    assert!(
        !sorted
            .iter()
            .any(|k| matches!(k, Kind::Plain(p) if p.starts_with(&chart))),
        "{sorted:?}"
    );
}

#[test]
fn command_lines_quote_what_a_shell_would_split() {
    let line = command_line("helm", &["template".into(), "a b".into(), "it's".into()]);
    assert_eq!(line, r"helm template 'a b' 'it'\''s'");
}
