//! WIN-APPARMOR: AppArmor is not supported on Windows.

use super::{Cx, Hit, Rule, RuleInfo, Scope, Sink, security_field};
use crate::finding::Severity;
use crate::view::{PodSecurityContextView, SecurityContextView};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-APPARMOR",
        title: "AppArmor is not supported on Windows",
        severity: Severity::Error,
        containerd: None,
        scope: Scope::Windows,
        what: "`appArmorProfile` in the pod or any container security context, and the legacy `container.apparmor.security.beta.kubernetes.io/*` pod annotations.",
        why: "AppArmor is a Linux security module; Windows has none.",
        source: "Kubernetes Windows docs, 'Security': Linux-specific pod security context privileges such as SELinux, AppArmor, Seccomp, or capabilities are not supported (seeds 001, 004).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Remove `appArmorProfile` (and the AppArmor annotations) from the Windows pod.",
        example: "securityContext:\n  appArmorProfile:\n    type: RuntimeDefault",
        since: None,
        until: None,
    },
    check,
};

/// The pre-1.30 per-container AppArmor annotation prefix.
const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn check(cx: &Cx<'_, '_, '_>, out: &mut Sink) {
    let message = "appArmorProfile is not supported on Windows nodes (no AppArmor)";
    let pod = |p: &PodSecurityContextView<'_>| Hit::from(p.app_armor_profile.is_some());
    let container = |c: &SecurityContextView<'_>| Hit::from(c.app_armor_profile.is_some());
    security_field(
        cx,
        out,
        "appArmorProfile",
        message,
        Some(&pod),
        Some(&container),
        "",
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
