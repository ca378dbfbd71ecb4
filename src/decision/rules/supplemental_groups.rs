//! WIN-SUPPLEMENTAL-GROUPS: supplementalGroups are not supported on Windows.

use super::{
    Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, removable_if, security_field,
};
use crate::decision::rules::cel::{Export, ExportContext, pod_field};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SUPPLEMENTAL-GROUPS",
        title: "supplementalGroups are ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Pod `securityContext.supplementalGroups` (non-empty) or `supplementalGroupsPolicy`.",
        why: "Supplemental groups are GIDs; Windows has no GIDs.",
        source: "Ignored on Windows (no numeric groups; pkg/kubelet/kuberuntime/kuberuntime_container_windows.go); forbidden with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.PodSecurityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `supplementalGroups` and `supplementalGroupsPolicy`.",
        example: "securityContext:\n  supplementalGroups: [4000]",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "supplementalGroups is ignored on Windows nodes (no group ids)";
    // An empty list is what some generators emit by default; it asks for nothing.
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.supplemental_groups.is_some());
    security_field(
        cx,
        out,
        "supplementalGroups",
        message,
        Some(&pod),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
        "remove a setting Windows ignores",
    );
    let message = "supplementalGroupsPolicy is ignored on Windows nodes (no group ids)";
    let policy =
        |p: &PodSecurityContextView<'_>| removable_if(p.supplemental_groups_policy.is_some());
    security_field(
        cx,
        out,
        "supplementalGroupsPolicy",
        message,
        Some(&policy),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
        "remove a setting Windows ignores",
    );
}

/// WIN-SUPPLEMENTAL-GROUPS as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            pod_field(
                "supplementalGroups",
                &["securityContext", "supplementalGroups"],
            )
            .removable(true),
            pod_field(
                "supplementalGroupsPolicy",
                &["securityContext", "supplementalGroupsPolicy"],
            )
            .removable(true),
        ],
        "supplementalGroups and supplementalGroupsPolicy are ignored on Windows nodes (no group ids)",
    )
}
