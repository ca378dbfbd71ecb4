//! WIN-POD-RESOURCES: pod-level `spec.resources` on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};
use crate::decision::version::KubeVersion;
use crate::decision::view::{ResourcesView, StrMap};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-POD-RESOURCES",
        title: "pod-level resources are refused by the Windows kubelet",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Pod-level `spec.resources` with a request or limit of `cpu`, `memory` or a `hugepages-*` size on a Windows-targeted pod (an empty `resources: {}` is not refused by the kubelet; with `spec.os.name: windows` the API server refuses any `resources`, WIN-OS-FIELDS).",
        why: "From Kubernetes 1.34 the Windows kubelet refuses pods with pod-level resources at admission, so the pod never starts; with `spec.os.name: windows` the API server refuses it first (WIN-OS-FIELDS).",
        source: "The Windows kubelet: kubernetes/kubernetes pkg/kubelet/lifecycle/features_windows.go (PR #133046, 1.34), which refuses a pod when IsPodLevelResourcesSet (k8s.io/component-helpers/resource) holds; the API server's validatePodResources. Kubernetes documentation 'Resource Management for Windows nodes'.",
        doc_url: "https://kubernetes.io/docs/concepts/configuration/windows-resource-management/",
        fix: "Move the requests and limits into each container's `resources`.",
        example: "spec:\n  resources:\n    limits:\n      memory: 1Gi",
        since: Some(KubeVersion::new(1, 34)),
        until: None,
    },
    check,
    export,
};

/// Whether pod-level resources are set as the kubelet counts them
/// (`IsPodLevelResourcesSet` in k8s.io/component-helpers): a request or
/// limit of cpu, memory or a hugepages size. An empty `resources: {}`, or
/// only other names, is not.
fn is_set(resources: &ResourcesView<'_>) -> bool {
    [&resources.requests, &resources.limits]
        .into_iter()
        .flatten()
        .flat_map(StrMap::iter)
        .any(|(name, _)| matches!(name, "cpu" | "memory") || name.starts_with("hugepages-"))
}

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.spec.resources.as_ref().is_some_and(is_set) {
        out.report(
            cx.spec_field(&["resources"]),
            format!(
                "pod-level resources are refused by the Windows kubelet from Kubernetes 1.34 (target: {}); set resources per container",
                cx.cluster.version_fact()
            ),
        );
    }
}

/// WIN-POD-RESOURCES as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            // As the kubelet's IsPodLevelResourcesSet: cpu, memory or hugepages.
            "has(variables.spec.resources) && ((has(variables.spec.resources.requests) && variables.spec.resources.requests.exists(k, k == 'cpu' || k == 'memory' || k.startsWith('hugepages-'))) || (has(variables.spec.resources.limits) && variables.spec.resources.limits.exists(k, k == 'cpu' || k == 'memory' || k.startsWith('hugepages-'))))",
            &["resources"],
        )],
        "pod-level resources are refused by the Windows kubelet from Kubernetes 1.34; set resources per container",
    )
}
