//! WIN-WINDOWSOPTIONS-LINUX and WIN-WINDOWSOPTIONS-LINUX-IGNORED:
//! `windowsOptions` on a pod that targets Linux.
//!
//! The API server refuses `windowsOptions` only on pods with
//! `spec.os.name: linux` (an error); a pod that targets Linux by node
//! selection alone is admitted, and the Linux kubelet ignores the options
//! (a warning).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, c_sc, pod_sc};
use crate::decision::version::KubeVersion;

/// `spec.os` exists from this version; before it the API server drops it.
const OS_FIELD_SINCE: KubeVersion = KubeVersion::new(1, 23);

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-WINDOWSOPTIONS-LINUX",
        title: "windowsOptions on a pod with spec.os.name: linux",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "`securityContext.windowsOptions` (pod or container) on a pod with `spec.os.name: linux`.",
        why: "The API server refuses the pod (`Forbidden: windows options cannot be set for a linux pod`), so the workload's controller can never create it.",
        source: "Kubernetes API reference, PodSecurityContext and SecurityContext `windowsOptions`: 'Note that this field cannot be set when spec.os.name is linux'; API server validateLinux (pkg/apis/core/validation), which checks only spec.os.name. Kubernetes docs, 'Pod OS'.",
        doc_url: "https://kubernetes.io/docs/concepts/workloads/pods/#pod-os",
        fix: "Remove `windowsOptions`, or target the pod at Windows nodes (`spec.os.name: windows`).",
        example: "spec:\n  os:\n    name: linux\n  securityContext:\n    windowsOptions:\n      runAsUserName: ContainerUser",
        since: Some(OS_FIELD_SINCE),
        until: None,
    },
    check: check_refused,
    export: export_rule,
};

pub static IGNORED: Rule = Rule {
    info: RuleInfo {
        id: "WIN-WINDOWSOPTIONS-LINUX-IGNORED",
        title: "windowsOptions on a Linux-targeted pod is ignored",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Linux,
        what: "`securityContext.windowsOptions` (pod or container) on a pod that targets Linux nodes by node selector, node affinity or RuntimeClass, without `spec.os.name: linux`.",
        why: "The API server admits the pod and the Linux kubelet ignores windowsOptions, so the identity (runAsUserName, gMSA) or HostProcess mode it asks for never applies. With `spec.os.name: linux` the API server refuses it instead (WIN-WINDOWSOPTIONS-LINUX).",
        source: "API server validateLinux (pkg/apis/core/validation) refuses windowsOptions only when spec.os.name is linux (Kubernetes API reference, `windowsOptions`: 'cannot be set when spec.os.name is linux'); without it the pod is admitted, and the Linux kubelet builds the container's Linux security context without the Windows-specific options (WindowsSecurityContextOptions: 'Windows-specific options and credentials'). Kubernetes docs 'Configure RunAsUserName for Windows pods and containers'.",
        doc_url: "https://kubernetes.io/docs/tasks/configure-pod-container/configure-runasusername/",
        fix: "Remove `windowsOptions`, or target the pod at Windows nodes.",
        example: "spec:\n  nodeSelector:\n    kubernetes.io/os: linux\n  securityContext:\n    windowsOptions:\n      runAsUserName: ContainerUser",
        since: None,
        until: None,
    },
    check: check_ignored,
    export: export_ignored,
};

/// A finding's message, in the check and in the export.
const IGNORED_MESSAGE: &str = "windowsOptions is ignored on Linux nodes, where this pod runs";

/// A finding's message, in the check and in the export.
const REFUSED_MESSAGE: &str = "windows options cannot be set for a linux pod";

/// The pod says `spec.os.name: linux` where the API server reads it.
fn os_linux(cx: &RuleContext<'_, '_, '_>) -> bool {
    cx.version >= OS_FIELD_SINCE
        && cx.spec.os.as_ref().and_then(|o| o.name.as_deref()) == Some("linux")
}

fn check_refused(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if os_linux(cx) {
        report(cx, out, REFUSED_MESSAGE);
    }
}

fn check_ignored(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if !os_linux(cx) {
        report(cx, out, IGNORED_MESSAGE);
    }
}

fn report(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings, message: &str) {
    if cx
        .pod_security_context()
        .is_some_and(|p| p.windows_options.is_some())
    {
        out.report(
            cx.spec_field(&["securityContext", "windowsOptions"]),
            message,
        );
    }
    for c in cx.containers() {
        if c.security_context()
            .is_some_and(|s| s.windows_options.is_some())
        {
            out.report(
                cx.container_field(&c, &["securityContext", "windowsOptions"]),
                message,
            );
        }
    }
}

/// WIN-WINDOWSOPTIONS-LINUX as CEL, for `winadmit admission-policy`.
fn export_rule(_: &ExportContext<'_>) -> Export {
    // The API server's validateLinux refuses these pods and pod templates
    // before validating admission runs (kube-apiserver v1.37
    // pkg/apis/core/validation ValidatePodSpec): a policy would test every
    // request and never fire.
    Export::Gap(
        "the API server refuses windowsOptions with spec.os.name: linux itself, before any admission policy runs; nothing to add",
    )
}

/// WIN-WINDOWSOPTIONS-LINUX-IGNORED as CEL, for `winadmit admission-policy`.
fn export_ignored(cx: &ExportContext<'_>) -> Export {
    Export::cel(
        windows_options(cx.cluster.version_at_least(1, 23).then_some(false)),
        IGNORED_MESSAGE,
    )
}

/// `windowsOptions` on the pod or a container; with `os_linux`, only where
/// `spec.os.name` is (`Some(true)`) or is not (`Some(false)`) `linux`.
fn windows_options(os_linux: Option<bool>) -> Vec<Probe> {
    const OS_LINUX: &str = "(has(variables.spec.os) && has(variables.spec.os.name) && variables.spec.os.name == 'linux')";
    let os = match os_linux {
        None => String::new(),
        Some(true) => format!("{OS_LINUX} && "),
        Some(false) => format!("!{OS_LINUX} && "),
    };
    let keys: &'static [&'static str] = &["securityContext", "windowsOptions"];
    vec![
        Probe::new(
            ProbeScope::Pod,
            format!("{os}{}", pod_sc("windowsOptions")),
            keys,
        ),
        Probe::new(
            ProbeScope::Container,
            format!("{os}{}", c_sc("windowsOptions")),
            keys,
        ),
    ]
}
