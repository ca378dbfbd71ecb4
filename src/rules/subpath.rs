//! WIN-SUBPATH: subPath volume mounts.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::finding::Severity;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SUBPATH",
        title: "subPath and subPathExpr mounts are not supported on Windows",
        severity: Severity::Error,
        containerd: Some(Severity::Warning),
        scope: Scope::Windows,
        what: "`volumeMounts[].subPath` or `subPathExpr` (non-empty) in any container.",
        why: "The Windows storage documentation lists subpath mounts as unsupported: only a whole volume can be mounted into a Windows container, and file-level mapping is not available. Newer containerd-based nodes do implement subPath, so the `containerd` profile downgrades this to a warning.",
        source: "Kubernetes Windows docs, 'Storage': subpath volume mounting - only the entire volume can be mounted in a Windows container; subpath volume mounting for Secrets (seed 004 'Storage').",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Mount the whole volume at a directory and read the file from it (e.g. mount the ConfigMap at C:\\config and point the app at C:\\config\\app.json), or select keys with `items`. On containerd 1.7+ nodes, set `profile: containerd` in the policy.",
        example: "volumeMounts:\n- name: config\n  mountPath: C:\\app\\appsettings.json\n  subPath: appsettings.json",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    for c in cx.containers() {
        for (j, m) in c.container.volume_mounts.iter().flatten().enumerate() {
            for (key, value) in [("subPath", &m.sub_path), ("subPathExpr", &m.sub_path_expr)] {
                if value.as_deref().is_some_and(|v| !v.is_empty()) {
                    let mut path = cx.container_field(&c, &["volumeMounts"]).index(j);
                    path = path.key(key);
                    out.report(path, format!("{key} mounts are not supported on Windows nodes; mount the whole volume"));
                }
            }
        }
    }
}
