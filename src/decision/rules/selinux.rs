//! WIN-SELINUX: seLinuxOptions are not supported on Windows.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope, removable_if, security_field};
use crate::decision::rules::cel::{Export, ExportContext, container_field, pod_field};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SELINUX",
        title: "seLinuxOptions are ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`seLinuxOptions` in the pod or any container security context.",
        why: "Windows has no SELinux.",
        source: "Ignored by the Windows kubelet and runtime (no SELinux; pkg/kubelet/kuberuntime/kuberuntime_container_windows.go); forbidden with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.Container securityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `seLinuxOptions` from the Windows pod spec.",
        example: "securityContext:\n  seLinuxOptions:\n    level: s0:c123,c456",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "seLinuxOptions is ignored on Windows nodes (no SELinux)";
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.se_linux_options.is_some());
    let container = |c: &SecurityContextView<'_>| removable_if(c.se_linux_options.is_some());
    security_field(
        cx,
        out,
        "seLinuxOptions",
        message,
        Some(&pod),
        Some(&container),
        "remove a setting Windows ignores",
    );
}

/// WIN-SELINUX as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            pod_field("seLinuxOptions", &["securityContext", "seLinuxOptions"]).removable(true),
            container_field("seLinuxOptions", &["securityContext", "seLinuxOptions"])
                .removable(true),
        ],
        "seLinuxOptions is ignored on Windows nodes (no SELinux)",
    )
}
