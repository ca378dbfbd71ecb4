//! WIN-SYSCTLS: sysctls are not supported on Windows.

use super::{Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, security_field};
use crate::decision::finding::Severity;
use crate::decision::rules::cel::{Export, ExportContext, pod_field};
use crate::decision::version::KubeVersion;
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SYSCTLS",
        title: "sysctls are refused by the Windows kubelet from 1.27",
        level: |c| {
            Some(if c.version_at_least(1, 27) {
                Severity::Error
            } else {
                Severity::Warning
            })
        },
        intent_lost: false,
        scope: Scope::Windows,
        what: "Pod `securityContext.sysctls`.",
        why: "sysctls are part of the Linux kernel interface; Windows has no equivalent mechanism.",
        source: "From Kubernetes 1.27 the kubelet's sysctl allowlist is empty off Linux, so it refuses the pod with SysctlForbidden (pkg/kubelet/sysctl/safe_sysctls.go, kubernetes/kubernetes PR #116792); before that the setting was ignored. Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.PodSecurityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `sysctls`; configure the equivalent through Windows registry settings in the image.",
        example: "securityContext:\n  sysctls:\n  - name: net.core.somaxconn\n    value: \"1024\"",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = if cx.cluster.version_at_least(1, 27) {
        "sysctls are refused by the Windows kubelet (SysctlForbidden): the pod fails"
    } else {
        "sysctls are ignored on Windows nodes (no sysctl interface)"
    };
    let pod = |p: &PodSecurityContextView<'_>| Reported::from(p.sysctls.is_some());
    security_field(
        cx,
        out,
        "sysctls",
        message,
        Some(&pod),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
        "",
    );
}

/// WIN-SYSCTLS as CEL, for `winadmit admission-policy`.
fn export(cx: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![pod_field("sysctls", &["securityContext", "sysctls"])],
        if cx.version() >= KubeVersion::new(1, 27) {
            "sysctls are refused by the Windows kubelet (SysctlForbidden): the pod fails"
        } else {
            "sysctls are ignored on Windows nodes (no sysctl interface)"
        },
    )
}
