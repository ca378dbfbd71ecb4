//! WIN-SUPPLEMENTAL-GROUPS: supplementalGroups are not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-SUPPLEMENTAL-GROUPS",
        title: "supplementalGroups are not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "Pod `securityContext.supplementalGroups` (non-empty) or `supplementalGroupsPolicy`.",
        why: "Supplemental groups are GIDs; Windows has no GIDs.",
        source: "Kubernetes Windows docs, 'API' > V1.PodSecurityContext: `supplementalGroups` - provides GID, not supported on Windows; none of the PodSecurityContext options work on Windows (seed 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `supplementalGroups` and `supplementalGroupsPolicy`.",
        example: "securityContext:\n  supplementalGroups: [4000]",
        since: None,
        until: None,
    },
    check,
};

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "supplementalGroups is not supported on Windows nodes (no group ids)";
    // An empty list is what some generators emit by default; it asks for nothing.
    let pod = |p: &PodSecurityContextView<'_>| Hit::from(p.supplemental_groups.is_some());
    security_field(
        cx,
        out,
        "supplementalGroups",
        message,
        Some(&pod),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Hit>,
        "",
    );
    let message = "supplementalGroupsPolicy is not supported on Windows nodes (no group ids)";
    let policy = |p: &PodSecurityContextView<'_>| Hit::from(p.supplemental_groups_policy.is_some());
    security_field(
        cx,
        out,
        "supplementalGroupsPolicy",
        message,
        Some(&policy),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Hit>,
        "",
    );
}
