//! WIN-OS-INVALID: `spec.os` as the API server validates it (`validateOS`).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;
use crate::decision::version::KubeVersion;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-OS-INVALID",
        title: "spec.os is malformed",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "`spec.os` present without a `name` (`os: {}` or an empty name), or with a name other than `linux` or `windows`.",
        why: "The API server refuses the pod: `spec.os.name: Required value` or `Unsupported value` (the only supported values are linux and windows). The workload's controller can never create it.",
        source: "The API server: kubernetes/kubernetes pkg/apis/core/validation/validation.go (validateOS). Kubernetes documentation 'Pods' > Pod OS. Before 1.23 the API server drops `spec.os`, so the rule starts there.",
        doc_url: "https://kubernetes.io/docs/concepts/workloads/pods/#pod-os",
        fix: "Set `spec.os.name: windows` (or `linux`), or remove `spec.os`.",
        example: "spec:\n  os: {}",
        since: Some(KubeVersion::new(1, 23)),
        until: None,
    },
    check,
    export: |_| {
        Export::Gap(
            "the API server validates spec.os itself (Required / NotSupported); nothing to add",
        )
    },
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let Some(os) = cx.spec.os.as_ref() else {
        return;
    };
    match os.name.as_deref() {
        None | Some("") => out.report(cx.spec_field(&["os", "name"]), "Required value"),
        Some("linux" | "windows") => {}
        Some(other) => out.report(
            cx.spec_field(&["os", "name"]),
            format!("Unsupported value: {other:?}: supported values: \"linux\", \"windows\""),
        ),
    }
}
