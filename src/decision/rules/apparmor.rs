//! WIN-APPARMOR: AppArmor is not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope, removable_if, security_field};
use crate::decision::finding::Severity;
use crate::decision::rules::cel::{
    Export, ExportContext, Field, Probe, ProbeScope, container_field, pod_field,
};
use crate::decision::version::KubeVersion;
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-APPARMOR",
        title: "AppArmor is ignored on Windows (blocked pods up to 1.19)",
        level: |c| {
            Some(if c.version_at_least(1, 20) {
                Severity::Warning
            } else {
                Severity::Error
            })
        },
        intent_lost: false,
        scope: Scope::Windows,
        what: "`appArmorProfile` in the pod or any container security context, and the legacy `container.apparmor.security.beta.kubernetes.io/*` pod annotations.",
        why: "AppArmor is a Linux security module; Windows has none.",
        source: "Up to Kubernetes 1.19 the kubelet's AppArmor admit handler blocked such pods on Windows nodes; since 1.20 it is Linux-only and the setting is ignored (pkg/security/apparmor, kubernetes/kubernetes PR #93220). Forbidden with spec.os.name: windows from 1.30 (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Security.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `appArmorProfile` (and the AppArmor annotations) from the Windows pod.",
        example: "securityContext:\n  appArmorProfile:\n    type: RuntimeDefault",
        since: None,
        until: None,
    },
    check,
    export,
};

/// The pre-1.30 per-container AppArmor annotation prefix.
const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "appArmorProfile is ignored on Windows nodes (no AppArmor; up to Kubernetes 1.19 the kubelet blocks the pod)";
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.app_armor_profile.is_some());
    let container = |c: &SecurityContextView<'_>| removable_if(c.app_armor_profile.is_some());
    security_field(
        cx,
        out,
        "appArmorProfile",
        message,
        Some(&pod),
        Some(&container),
        "remove a setting Windows ignores",
    );
    for (key, _) in cx
        .workload
        .pod_annotations()
        .into_iter()
        .flat_map(super::super::view::StrMap::iter)
    {
        if key.starts_with(ANNOTATION_PREFIX) {
            let mut path = cx.workload.pod_metadata_path();
            path = path.key("annotations").map_key(key);
            out.report(
                path,
                "AppArmor annotations have no effect on Windows nodes (no AppArmor)",
            );
        }
    }
}

/// WIN-APPARMOR as CEL, for `winadmit admission-policy`.
fn export(cx: &ExportContext<'_>) -> Export {
    let annotation = "k.startsWith('container.apparmor.security.beta.kubernetes.io/')";
    Export::cel(
        vec![
            pod_field("appArmorProfile", &["securityContext", "appArmorProfile"]).removable(true),
            container_field("appArmorProfile", &["securityContext", "appArmorProfile"])
                .removable(true),
            Probe {
                scope: ProbeScope::Pod,
                container_hit: None,
                hit: format!("variables.podAnnotations.exists(k, {annotation})"),
                field: Field::Absolute(format!(
                    "variables.podAnnotations.filter(k, {annotation}).map(k, variables.metaPrefix + '.annotations[' + k + ']')"
                )),
                removable: false,
            },
        ],
        if cx.version() >= KubeVersion::new(1, 20) {
            "AppArmor is ignored on Windows nodes (no AppArmor)"
        } else {
            "AppArmor is not supported on Windows nodes: up to Kubernetes 1.19 the kubelet blocks the pod"
        },
    )
}
