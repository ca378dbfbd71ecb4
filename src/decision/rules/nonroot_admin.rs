//! WIN-NONROOT-ADMIN: `runAsNonRoot: true` contradicts running as ContainerAdministrator.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope};

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-NONROOT-ADMIN",
        title: "runAsNonRoot cannot run as ContainerAdministrator",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A container whose effective `runAsNonRoot` is true and whose effective `windowsOptions.runAsUserName` is `ContainerAdministrator` (any case). `runAsNonRoot` on its own is fine: on Windows it means \"not ContainerAdministrator\".",
        why: "On Windows the closest equivalent of root is ContainerAdministrator; the kubelet refuses to start a container that must be non-root but is configured to run as ContainerAdministrator (CreateContainerConfigError).",
        source: "Kubernetes Windows docs, 'API' > V1.Container/V1.PodSecurityContext: `runAsNonRoot` - Windows does not have a root user; the closest equivalent is ContainerAdministrator (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes').",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#compatibility-v1-pod-spec-containers-securitycontext",
        fix: "Run as `ContainerUser` (`windowsOptions.runAsUserName: ContainerUser`), or drop `runAsNonRoot`.",
        example: "securityContext:\n  runAsNonRoot: true\n  windowsOptions:\n    runAsUserName: ContainerAdministrator",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let pod = cx.pod_security_context();
    let pod_non_root = pod.and_then(|p| p.run_as_non_root);
    let pod_user = pod
        .and_then(|p| p.windows_options.as_ref())
        .and_then(|w| w.run_as_user_name.as_deref());
    for c in cx.containers() {
        let sc = c.security_context();
        let own_user = sc
            .and_then(|s| s.windows_options.as_ref())
            .and_then(|w| w.run_as_user_name.as_deref());
        let non_root = sc.and_then(|s| s.run_as_non_root).or(pod_non_root);
        let user = own_user.or(pod_user);
        if non_root == Some(true)
            && user.is_some_and(|u| u.eq_ignore_ascii_case("ContainerAdministrator"))
        {
            let path = if own_user.is_some() {
                cx.container_field(&c, &["securityContext", "windowsOptions", "runAsUserName"])
            } else {
                cx.spec_field(&["securityContext", "windowsOptions", "runAsUserName"])
            };
            out.report(
                path,
                format!("container {:?} must run as non-root but runAsUserName is ContainerAdministrator", c.name()),
            );
        }
    }
}

/// WIN-NONROOT-ADMIN as CEL, for `winadmit admission-policy`.
fn export(_: &ExportContext<'_>) -> Export {
    let non_root = "(has(c.securityContext) && has(c.securityContext.runAsNonRoot) ? c.securityContext.runAsNonRoot : (has(variables.spec.securityContext) && has(variables.spec.securityContext.runAsNonRoot) && variables.spec.securityContext.runAsNonRoot)) == true";
    let own_set = "has(c.securityContext) && has(c.securityContext.windowsOptions) && has(c.securityContext.windowsOptions.runAsUserName)";
    let admin = "matches('^(?i)containeradministrator$')";
    let pod_user = "variables.spec.securityContext.windowsOptions.runAsUserName";
    let pod_set = "has(variables.spec.securityContext) && has(variables.spec.securityContext.windowsOptions) && has(variables.spec.securityContext.windowsOptions.runAsUserName)";
    let inherits = format!("{non_root} && !({own_set})");
    Export::cel(
        vec![
            Probe::new(
                ProbeScope::Container,
                format!(
                    "{non_root} && {own_set} && c.securityContext.windowsOptions.runAsUserName.{admin}"
                ),
                &["securityContext", "windowsOptions", "runAsUserName"],
            ),
            Probe::new(
                ProbeScope::Pod,
                format!(
                    "{pod_set} && {pod_user}.{admin} && (variables.initContainers.exists(c, {inherits}) || variables.containers.exists(c, {inherits}) || variables.ephemeralContainers.exists(c, {inherits}))"
                ),
                &["securityContext", "windowsOptions", "runAsUserName"],
            ),
        ],
        "a container that must run as non-root has runAsUserName ContainerAdministrator: the kubelet refuses to start it",
    )
}
