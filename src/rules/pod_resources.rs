//! WIN-POD-RESOURCES: pod-level `spec.resources` on Windows.

use super::{Cx, Rule, RuleInfo, Scope, Sink};
use crate::version::KubeVersion;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-POD-RESOURCES",
        title: "pod-level resources are refused by the Windows kubelet",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Pod-level `spec.resources` (requests or limits for the whole pod) on a Windows-targeted pod.",
        why: "From Kubernetes 1.34 the Windows kubelet refuses pods with pod-level resources at admission, so the pod never starts; with `spec.os.name: windows` the API server refuses it first (WIN-OS-FIELDS).",
        source: "The Windows kubelet: kubernetes/kubernetes pkg/kubelet/lifecycle/features_windows.go (PR #133046, 1.34); the API server's validateWindows. Kubernetes documentation 'Resource Management for Windows nodes'.",
        doc_url: "https://kubernetes.io/docs/concepts/configuration/windows-resource-management/",
        fix: "Move the requests and limits into each container's `resources`.",
        example: "spec:\n  resources:\n    limits:\n      memory: 1Gi",
        since: Some(KubeVersion::new(1, 34)),
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    if cx.spec.resources.is_some() {
        out.report(
            cx.spec_field(&["resources"]),
            format!(
                "pod-level resources are refused by the Windows kubelet from Kubernetes 1.34 (target: {}); set resources per container",
                cx.cluster.version_fact()
            ),
        );
    }
}
