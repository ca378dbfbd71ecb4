//! WIN-HYPERV: the experimental Hyper-V isolation annotation.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Field, Probe, ProbeScope, cel_str};

pub use crate::decision::targeting::ISOLATION_ANNOTATION;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HYPERV",
        title: "Hyper-V isolation by annotation allows one container per pod",
        level: docker_before_1_21,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`experimental.windows.kubernetes.io/isolation-type: hyperv` on a pod (template) with more than one container.",
        why: "The experimental Hyper-V isolation (feature gate HyperVContainer) is limited to one container per pod: on the Docker nodes where it works, a second container makes the pod fail. Where the annotation is ignored (Kubernetes 1.21 and later, or containerd) the pod runs, process-isolated: WIN-HYPERV-ANNOTATION says so, and this rule is silent.",
        source: "Layer: the Windows kubelet with dockershim, Kubernetes 1.10 to 1.20 with the HyperVContainer feature gate; the gate was removed in 1.21 and containerd never read the annotation (it uses RuntimeClass handlers). Error on Docker before 1.21; no finding elsewhere. Kubernetes Windows docs, 'Hyper-V isolation': in the experimental release, this feature is limited to 1 container per Pod (Kubernetes 1.9 documentation, 'Windows Server Containers'; Kubernetes 1.18 documentation, 'Intro to Windows support in Kubernetes'); Kubernetes 1.21 release notes (HyperVContainer removed).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#windows-os-version-support",
        fix: "Run one container per Hyper-V isolated pod, or use a RuntimeClass whose handler runs Hyper-V isolated containers (containerd `runhcs-wcow-hypervisor`).",
        example: "metadata:\n  annotations:\n    experimental.windows.kubernetes.io/isolation-type: hyperv\nspec:\n  containers:\n  - name: iis\n  - name: sidecar",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The annotation works only through dockershim with the HyperVContainer
/// gate (Kubernetes 1.10-1.20): only there does a second container break
/// the pod.
fn docker_before_1_21(
    c: &crate::decision::cluster::TargetCluster,
) -> Option<crate::decision::finding::Severity> {
    (c.is_docker() && !c.version_at_least(1, 21))
        .then_some(crate::decision::finding::Severity::Error)
}

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
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

/// WIN-HYPERV as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    annotation_export(
        true,
        "Hyper-V isolation by annotation supports one container per pod",
    )
}

/// The isolation annotation set to `hyperv` (on a pod with more than one
/// container, when `many_containers`), reported at the annotation: the
/// export of this rule and of WIN-HYPERV-ANNOTATION.
pub(super) fn annotation_export(many_containers: bool, message: &'static str) -> Export {
    let key = cel_str(ISOLATION_ANNOTATION);
    let mut hit =
        format!("{key} in variables.podAnnotations && variables.podAnnotations[{key}] == 'hyperv'");
    if many_containers {
        hit.push_str(" && size(variables.containers) > 1");
    }
    Export::cel(
        vec![Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit,
            field: Field::Absolute(format!(
                "[variables.metaPrefix + '.annotations[' + {key} + ']']"
            )),
            removable: false,
        }],
        message,
    )
}
