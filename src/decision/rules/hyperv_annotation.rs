//! WIN-HYPERV-ANNOTATION: the experimental isolation annotation does
//! nothing on current clusters.

use super::hyperv::ISOLATION_ANNOTATION;
use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext};
use crate::decision::version::KubeVersion;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HYPERV-ANNOTATION",
        title: "The Hyper-V isolation annotation has no effect; use a RuntimeClass",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Any,
        what: "`experimental.windows.kubernetes.io/isolation-type: hyperv` on a pod (template), on Kubernetes 1.21 and later. (WIN-HYPERV separately reports the one-container limit the annotation had where it worked.)",
        why: "Hyper-V isolation by annotation was an alpha feature of the dockershim (feature gate HyperVContainer, 1.10-1.20). The gate was removed in 1.21 and dockershim in 1.24, so the annotation is ignored: the pod silently runs process-isolated, with none of the isolation it asks for, and its images must match the node's build.",
        source: "Layer: the Windows kubelet with dockershim (HyperVContainer gate, 1.10 to 1.20); ignored from 1.21 and by containerd, which isolates by RuntimeClass handler. Kubernetes Windows docs, 'Hyper-V isolation' (Kubernetes 1.18 documentation, 'Intro to Windows support in Kubernetes'; Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes'): the annotation needs the kubelet feature gate HyperVContainer=true and will be deprecated in favour of the CRI-ContainerD and RuntimeClass features. Kubernetes 1.21 release notes: the HyperVContainer feature gate was removed.",
        doc_url: "https://kubernetes.io/docs/concepts/containers/runtime-class/",
        fix: "Remove the annotation and set `runtimeClassName` to a RuntimeClass whose handler runs Hyper-V isolated containers (containerd `runhcs-wcow-hypervisor`); list it in the policy's `params.hypervRuntimeClasses` so winadmit knows.",
        example: "metadata:\n  annotations:\n    experimental.windows.kubernetes.io/isolation-type: hyperv",
        since: Some(KubeVersion::new(1, 21)),
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let value = cx
        .workload
        .pod_annotations()
        .and_then(|a| a.get(ISOLATION_ANNOTATION));
    if value != Some("hyperv") {
        return;
    }
    let path = cx
        .workload
        .pod_metadata_path()
        .key("annotations")
        .map_key(ISOLATION_ANNOTATION);
    let also = if cx.hyperv {
        "; the pod's Hyper-V RuntimeClass already isolates it, so remove the annotation"
    } else {
        "; use a RuntimeClass with a Hyper-V handler (runhcs-wcow-hypervisor) instead"
    };
    out.report(
        path,
        format!(
            "{ISOLATION_ANNOTATION}: hyperv has no effect on Kubernetes {} (the HyperVContainer feature gate was removed in 1.21): the pod runs process-isolated{also}",
            cx.version
        ),
    );
}

/// WIN-HYPERV-ANNOTATION as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    super::hyperv::annotation_export(
        false,
        "the Hyper-V isolation annotation has no effect (the HyperVContainer feature gate was removed in 1.21): the pod runs process-isolated; use a RuntimeClass with a Hyper-V handler",
    )
}
