//! WIN-FSGROUP and WIN-FSGROUP-CHANGE-POLICY: volume ownership by GID.

use super::{
    Reported, Rule, RuleContext, RuleFindings, RuleInfo, Scope, removable_if, security_field,
};
use crate::decision::rules::cel::{Export, ExportContext, pod_field};
use crate::decision::view::{PodSecurityContextView, SecurityContextView};

pub static FS_GROUP: Rule = Rule {
    info: RuleInfo {
        id: "WIN-FSGROUP",
        title: "fsGroup is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Pod `securityContext.fsGroup`.",
        why: "fsGroup changes volume ownership to a GID; Windows uses SID-based ACLs, has no GIDs, and does not support volume user masks or permissions.",
        source: "Ignored on Windows: volume ownership is not changed (pkg/volume/volume_windows.go); forbidden with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.PodSecurityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `fsGroup`; grant access through ACLs for the user in `windowsOptions.runAsUserName`.",
        example: "securityContext:\n  fsGroup: 2000",
        since: None,
        until: None,
    },
    check: check_fs_group,
    export: export_fs_group,
};

pub static FS_GROUP_CHANGE_POLICY: Rule = Rule {
    info: RuleInfo {
        id: "WIN-FSGROUP-CHANGE-POLICY",
        title: "fsGroupChangePolicy is ignored on Windows",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "Pod `securityContext.fsGroupChangePolicy`.",
        why: "It controls how fsGroup ownership is applied, which Windows does not support at all.",
        source: "Ignored on Windows (no fsGroup ownership change); forbidden with spec.os.name: windows (validateWindows). Kubernetes documentation 'Windows containers in Kubernetes' > Compatibility v1.PodSecurityContext.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod",
        fix: "Remove `fsGroupChangePolicy`.",
        example: "securityContext:\n  fsGroupChangePolicy: OnRootMismatch",
        since: None,
        until: None,
    },
    check: check_change_policy,
    export: export_fs_group_change_policy,
};

/// A finding's message, in the check and in the export.
const FS_GROUP_MESSAGE: &str =
    "fsGroup is ignored on Windows nodes (no group ids or POSIX volume ownership)";

fn check_fs_group(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = FS_GROUP_MESSAGE;
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.fs_group.is_some());
    security_field(
        cx,
        out,
        "fsGroup",
        message,
        Some(&pod),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
        "remove a setting Windows ignores",
    );
}

fn check_change_policy(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let message = "fsGroupChangePolicy is ignored on Windows nodes (no POSIX volume ownership)";
    let pod = |p: &PodSecurityContextView<'_>| removable_if(p.fs_group_change_policy.is_some());
    security_field(
        cx,
        out,
        "fsGroupChangePolicy",
        message,
        Some(&pod),
        None::<&dyn Fn(&SecurityContextView<'_>) -> Reported>,
        "remove a setting Windows ignores",
    );
}

/// WIN-FSGROUP as CEL, for `winadmit admission-policy`.
fn export_fs_group(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![pod_field("fsGroup", &["securityContext", "fsGroup"]).removable(true)],
        FS_GROUP_MESSAGE,
    )
}

/// WIN-FSGROUP-CHANGE-POLICY as CEL, for `winadmit admission-policy`.
fn export_fs_group_change_policy(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![
            pod_field(
                "fsGroupChangePolicy",
                &["securityContext", "fsGroupChangePolicy"],
            )
            .removable(true),
        ],
        "fsGroupChangePolicy is ignored on Windows nodes (no POSIX volume ownership)",
    )
}
