//! WIN-SUBPATH: subPath volume mounts.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Field, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SUBPATH",
        title: "subPath mounts fail on Docker Windows nodes; several per container can hang termination",
        level: super::level::error_on_docker,
        intent_lost: false,
        scope: Scope::Windows,
        what: "On Docker: every `volumeMounts[].subPath` or `subPathExpr`. On containerd: two or more subPath mounts in one container (one is fine).",
        why: "Docker-era Windows nodes could only mount a whole volume: a subPath mount fails and the pod never starts. containerd mounts directories and single files by subPath, but with two or more in one container the kubelet can keep file handles open and leave the pod stuck Terminating until the kubelet has the fix of kubernetes#138367.",
        source: "Docker-era Windows nodes could not mount subpaths (Kubernetes 1.5-1.19 Windows documentation, 'Storage'); containerd mounts directories and single files (pkg/volume/util/subpath/subpath_windows.go). Two or more subPath mounts in one container can leave the pod stuck Terminating on kubelets without kubernetes/kubernetes PR #138367 (issue #112630; test/e2e/windows/subpath_cleanup.go). Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Mount the whole volume at a directory and read the file from it (e.g. mount the ConfigMap at C:\\config), or select keys with `items`. On containerd, keep one subPath mount per container or upgrade the kubelet.",
        example: "volumeMounts:\n- name: config\n  mountPath: C:\\app\\appsettings.json\n  subPath: appsettings.json",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let docker = cx.cluster.is_docker();
    for c in cx.containers() {
        let mounts: Vec<(usize, &str)> = c
            .container
            .volume_mounts
            .iter()
            .flatten()
            .enumerate()
            .filter_map(|(j, m)| {
                let key = if m.sub_path.as_deref().is_some_and(|v| !v.is_empty()) {
                    "subPath"
                } else if m.sub_path_expr.as_deref().is_some_and(|v| !v.is_empty()) {
                    "subPathExpr"
                } else {
                    return None;
                };
                Some((j, key))
            })
            .collect();
        // containerd mounts one subPath per container fine.
        if !docker && mounts.len() < 2 {
            continue;
        }
        for &(j, key) in &mounts {
            let path = cx.container_field(&c, &["volumeMounts"]).index(j).key(key);
            if docker {
                out.report(
                    path,
                    format!(
                        "{key} mounts fail on Docker Windows nodes ({}); mount the whole volume",
                        cx.cluster.runtime_fact()
                    ),
                );
            } else {
                out.report(
                    path,
                    format!(
                        "{} subPath mounts in one container can leave the pod stuck Terminating on Windows kubelets without the subPath handle fix (kubernetes#138367)",
                        mounts.len()
                    ),
                );
            }
        }
    }
}

/// WIN-SUBPATH as CEL, for `winadmit admission-policy`.
fn export(cx: &ExportContext<'_>) -> Export {
    let docker = cx.cluster.is_docker();
    let container_hit = if docker {
        format!("has(c.volumeMounts) && c.volumeMounts.exists(m, {SUBPATH})")
    } else {
        format!("has(c.volumeMounts) && size(c.volumeMounts.filter(m, {SUBPATH})) >= 2")
    };
    Export::cel(
        vec![Probe {
            scope: ProbeScope::Mount,
            container_hit: Some(container_hit),
            hit: SUBPATH.to_owned(),
            field: Field::Suffixes(SUBPATH_KEY.to_owned()),
            removable: false,
        }],
        if docker {
            "subPath mounts fail on Docker Windows nodes; mount the whole volume"
        } else {
            "two or more subPath mounts in one container can leave the pod stuck Terminating on Windows kubelets without the subPath handle fix (kubernetes#138367)"
        },
    )
}

/// The mount `m` has a subPath or a subPathExpr.
const SUBPATH: &str =
    "((has(m.subPath) && m.subPath != '') || (has(m.subPathExpr) && m.subPathExpr != ''))";
/// The field of `m` that holds it.
const SUBPATH_KEY: &str = "[(has(m.subPath) && m.subPath != '' ? '.subPath' : '.subPathExpr')]";
