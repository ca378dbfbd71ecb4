//! WIN-HYPERV: the experimental Hyper-V isolation annotation.

use super::{Cx, Rule, RuleInfo, Scope, Sink};

pub use crate::targeting::ISOLATION_ANNOTATION;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HYPERV",
        title: "Hyper-V isolation by annotation allows one container per pod",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`experimental.windows.kubernetes.io/isolation-type: hyperv` on a pod (template) with more than one container.",
        why: "The experimental Hyper-V isolation (feature gate HyperVContainer) is limited to one container per pod. On clusters that removed the feature (1.21+) the annotation is ignored and the pod silently runs process-isolated, so a multi-container pod never gets the isolation it asks for.",
        source: "Kubernetes Windows docs, 'Hyper-V isolation': the pod should include the annotation experimental.windows.kubernetes.io/isolation-type=hyperv; in the experimental release, this feature is limited to 1 container per Pod (Kubernetes 1.9 documentation, 'Windows Server Containers'; Kubernetes 1.18 documentation, 'Intro to Windows support in Kubernetes').",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#windows-os-version-support",
        fix: "Run one container per Hyper-V isolated pod, or use a RuntimeClass whose handler runs Hyper-V isolated containers (containerd `runhcs-wcow-hypervisor`).",
        example: "metadata:\n  annotations:\n    experimental.windows.kubernetes.io/isolation-type: hyperv\nspec:\n  containers:\n  - name: iis\n  - name: sidecar",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let value = cx
        .workload
        .pod_annotations()
        .and_then(|a| a.get(ISOLATION_ANNOTATION));
    let count = cx.spec.containers.as_ref().map_or(0, Vec::len);
    if value == Some("hyperv") && count > 1 {
        let path = cx
            .workload
            .pod_metadata_path()
            .key("annotations")
            .map_key(ISOLATION_ANNOTATION);
        out.report(
            path,
            format!("Hyper-V isolation by annotation supports one container per pod; this pod has {count}"),
        );
    }
}
