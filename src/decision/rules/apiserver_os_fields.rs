//! WIN-OS-FIELDS: what the API server itself rejects on pods with
//! `spec.os.name: windows` (`validateWindows`), field for field.
//!
//! There, a field that is merely set is rejected whatever its value (even
//! `privileged: false`), so this rule reports every such field that a more
//! specific rule has not already reported, with the API server's own path
//! and message so users can cross-reference. The list grew by release.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::path::FieldPath;
use crate::decision::rules::cel::{
    Export, ExportContext, Probe, ProbeScope, Removal, c_sc, pod_sc,
};
use crate::decision::version::KubeVersion;
use crate::decision::view::{SeccompView, SecurityContextView};

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-OS-FIELDS";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "field forbidden by the API server for spec.os.name: windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "On pods with `spec.os.name: windows`, any of these fields set to any value: pod `securityContext.{seLinuxOptions, seccompProfile, fsGroup, fsGroupChangePolicy, sysctls, runAsUser, runAsGroup, supplementalGroups}`, `hostPID`/`hostIPC: true`, `shareProcessNamespace`; container `securityContext.{seLinuxOptions, seccompProfile, capabilities, readOnlyRootFilesystem, privileged, allowPrivilegeEscalation, procMount, runAsUser, runAsGroup}`; since 1.25 `hostUsers`; since 1.30 `appArmorProfile`; since 1.31 `supplementalGroupsPolicy`; since 1.32 `seLinuxChangePolicy`; since 1.34 pod-level `resources`.",
        why: "The API server refuses such pods (`Forbidden: cannot be set for a windows pod`), so the workload's controller can never create them. Values that have no effect on Windows (`privileged: false`, `allowPrivilegeEscalation: false`, drop-only capabilities, `seccompProfile: RuntimeDefault`) are removed by the mutating webhook.",
        source: "Kubernetes docs, 'Pod OS' (spec.os.name: windows forbids these fields); API server validateWindows (pkg/apis/core/validation). The Kubernetes 1.5-1.19 Windows documentation ('API') lists the same fields as unsupported on Windows.",
        doc_url: "https://kubernetes.io/docs/concepts/workloads/pods/#pod-os",
        fix: "Remove the field from the Windows pod spec.",
        example: "spec:\n  os:\n    name: windows\n  containers:\n  - name: app\n    securityContext:\n      privileged: false",
        since: Some(KubeVersion::new(1, 23)),
        until: None,
    },
    check,
    export,
};

const MESSAGE: &str = "cannot be set for a windows pod";

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let os_windows = cx.spec.os.as_ref().and_then(|o| o.name.as_deref()) == Some("windows");
    if !os_windows {
        return;
    }
    let v = cx.version;
    check_pod(cx, out);
    if let Some(p) = cx.pod_security_context() {
        for (key, set, no_op) in pod_fields(p, v) {
            if set {
                forbid(cx.spec_field(&["securityContext", key]), no_op, out);
            }
        }
    }
    for c in cx.containers() {
        let Some(sc) = c.security_context() else {
            continue;
        };
        for (key, set, no_op) in container_fields(sc, v) {
            if set {
                forbid(
                    cx.container_field(&c, &["securityContext", key]),
                    no_op,
                    out,
                );
            }
        }
    }
}

/// Reports a forbidden field, removable when its value is a no-op. Reported
/// whatever other rule also reports the field: the API server refuses the
/// pod, so this is an error even where another rule warns.
fn forbid(path: FieldPath, no_op: bool, out: &mut RuleFindings) {
    if no_op {
        out.report_removable(
            path,
            MESSAGE,
            "remove a setting that has no effect on Windows",
        );
    } else {
        out.report(path, MESSAGE);
    }
}

/// The forbidden pod-spec fields outside the security context.
fn check_pod(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let v = cx.version;
    let spec = cx.spec;
    if spec.host_users.is_some() && v >= KubeVersion::new(1, 25) {
        forbid(cx.spec_field(&["hostUsers"]), false, out);
    }
    if spec.host_pid == Some(true) {
        forbid(cx.spec_field(&["hostPID"]), false, out);
    }
    if spec.host_ipc == Some(true) {
        forbid(cx.spec_field(&["hostIPC"]), false, out);
    }
    if spec.share_process_namespace.is_some() {
        forbid(
            cx.spec_field(&["shareProcessNamespace"]),
            spec.share_process_namespace == Some(false),
            out,
        );
    }
    if spec.resources.is_some() && v >= KubeVersion::new(1, 34) {
        // Checked with the pod-level resources (validatePodResources),
        // in the API server's own words.
        out.report(
            cx.spec_field(&["resources"]),
            "may not be set for a windows pod",
        );
    }
}

/// Pod security-context fields the API server forbids: (key, is set, value
/// is a no-op on Windows).
fn pod_fields(
    p: &crate::decision::view::PodSecurityContextView<'_>,
    v: KubeVersion,
) -> [(&'static str, bool, bool); 11] {
    [
        (
            "appArmorProfile",
            p.app_armor_profile.is_some() && v >= KubeVersion::new(1, 30),
            false,
        ),
        ("seLinuxOptions", p.se_linux_options.is_some(), false),
        (
            "seccompProfile",
            p.seccomp_profile.is_some(),
            runtime_default(p.seccomp_profile.as_ref()),
        ),
        ("fsGroup", p.fs_group.is_some(), false),
        (
            "fsGroupChangePolicy",
            p.fs_group_change_policy.is_some(),
            false,
        ),
        ("sysctls", p.sysctls.is_some(), false),
        ("runAsUser", p.run_as_user.is_some(), false),
        ("runAsGroup", p.run_as_group.is_some(), false),
        ("supplementalGroups", p.supplemental_groups.is_some(), false),
        (
            "supplementalGroupsPolicy",
            p.supplemental_groups_policy.is_some() && v >= KubeVersion::new(1, 31),
            false,
        ),
        (
            "seLinuxChangePolicy",
            p.se_linux_change_policy.is_some() && v >= KubeVersion::new(1, 32),
            false,
        ),
    ]
}

/// Container fields the API server forbids: (key, is set, value is a no-op on Windows).
fn container_fields(
    sc: &SecurityContextView<'_>,
    v: KubeVersion,
) -> [(&'static str, bool, bool); 10] {
    let drop_only = sc
        .capabilities
        .as_ref()
        .is_some_and(|c| c.add.as_ref().is_none_or(Vec::is_empty));
    // The API server refuses procMount on a windows pod whatever its value,
    // `Default` included; `Default` is a no-op, so /mutate
    // removes it, which also covers a value the API server defaulted.
    let proc_mount = sc.proc_mount.is_some();
    let proc_mount_default = sc.proc_mount.as_deref() == Some("Default");
    [
        (
            "appArmorProfile",
            sc.app_armor_profile.is_some() && v >= KubeVersion::new(1, 30),
            false,
        ),
        ("seLinuxOptions", sc.se_linux_options.is_some(), false),
        (
            "seccompProfile",
            sc.seccomp_profile.is_some(),
            runtime_default(sc.seccomp_profile.as_ref()),
        ),
        ("capabilities", sc.capabilities.is_some(), drop_only),
        (
            "readOnlyRootFilesystem",
            sc.read_only_root_filesystem.is_some(),
            sc.read_only_root_filesystem == Some(false),
        ),
        (
            "privileged",
            sc.privileged.is_some(),
            sc.privileged == Some(false),
        ),
        (
            "allowPrivilegeEscalation",
            sc.allow_privilege_escalation.is_some(),
            sc.allow_privilege_escalation == Some(false),
        ),
        ("procMount", proc_mount, proc_mount_default),
        ("runAsUser", sc.run_as_user.is_some(), false),
        ("runAsGroup", sc.run_as_group.is_some(), false),
    ]
}

fn runtime_default(s: Option<&SeccompView<'_>>) -> bool {
    s.and_then(|s| s.kind.as_deref()) == Some("RuntimeDefault")
}

/// WIN-OS-FIELDS as CEL, for `winadmit admission-policy`: the API server's
/// `validateWindows` list at the target.
fn export(cx: &ExportContext<'_>) -> Export {
    let v = cx.version();
    if v < KubeVersion::new(1, 23) {
        return Export::Gap("spec.os does not exist before Kubernetes 1.23");
    }
    let mut probes = pod_probes(v);
    probes.extend(container_probes(v));
    Export::cel(
        probes,
        "cannot be set for a windows pod (the API server refuses it with spec.os.name: windows)",
    )
    // Fields other rules remove too: after their removals.
    .removed(Removal::AfterOthers)
    // The API server's validateWindows refuses these pods and pod
    // templates before validating admission runs (kube-apiserver v1.37
    // pkg/apis/core/validation ValidatePodSpec, which ValidatePodTemplateSpec
    // calls): only the mutation's removals of no-op values can change the
    // outcome.
    .partly("the API server refuses these fields itself, before any validating admission policy runs; the mutating policy removes the values that do nothing on Windows")
    .refused_by_api_server()
}

/// Only on pods with `spec.os.name: windows`.
const OS: &str = "variables.osWindows && ";

/// A probe of the pod spec.
fn pod(cond: String, keys: &'static [&'static str], removable: bool) -> Probe {
    Probe::new(ProbeScope::Pod, format!("{OS}{cond}"), keys).removable(removable)
}

/// A probe of each container.
fn container(cond: String, keys: &'static [&'static str], removable: bool) -> Probe {
    Probe::new(ProbeScope::Container, format!("{OS}{cond}"), keys).removable(removable)
}

/// The security-context field `key`: its presence test and its keys.
macro_rules! sc_field {
    ($present:ident, $key:literal) => {
        (
            $present($key),
            &["securityContext", $key] as &'static [&'static str],
        )
    };
}

/// The pod-level fields at `v`.
fn pod_probes(v: KubeVersion) -> Vec<Probe> {
    let at = |maj_min: (u16, u16)| v >= KubeVersion::new(maj_min.0, maj_min.1);
    let mut probes = Vec::new();
    if at((1, 25)) {
        probes.push(pod(
            "has(variables.spec.hostUsers)".into(),
            &["hostUsers"],
            false,
        ));
    }
    probes.push(pod(
        "has(variables.spec.hostPID) && variables.spec.hostPID == true".into(),
        &["hostPID"],
        false,
    ));
    probes.push(pod(
        "has(variables.spec.hostIPC) && variables.spec.hostIPC == true".into(),
        &["hostIPC"],
        false,
    ));
    probes.push(pod(
        "has(variables.spec.shareProcessNamespace) && variables.spec.shareProcessNamespace == true"
            .into(),
        &["shareProcessNamespace"],
        false,
    ));
    probes.push(pod(
        "has(variables.spec.shareProcessNamespace) && variables.spec.shareProcessNamespace == false"
            .into(),
        &["shareProcessNamespace"],
        true,
    ));
    if at((1, 34)) {
        probes.push(pod(
            "has(variables.spec.resources)".into(),
            &["resources"],
            false,
        ));
    }
    let mut pod_fields = vec![
        sc_field!(pod_sc, "seLinuxOptions"),
        sc_field!(pod_sc, "fsGroup"),
        sc_field!(pod_sc, "fsGroupChangePolicy"),
        sc_field!(pod_sc, "sysctls"),
        sc_field!(pod_sc, "runAsUser"),
        sc_field!(pod_sc, "runAsGroup"),
        sc_field!(pod_sc, "supplementalGroups"),
    ];
    if at((1, 30)) {
        pod_fields.push(sc_field!(pod_sc, "appArmorProfile"));
    }
    if at((1, 31)) {
        pod_fields.push(sc_field!(pod_sc, "supplementalGroupsPolicy"));
    }
    if at((1, 32)) {
        pod_fields.push(sc_field!(pod_sc, "seLinuxChangePolicy"));
    }
    for (cond, keys) in pod_fields {
        probes.push(pod(cond, keys, false));
    }
    let rd = "has(variables.spec.securityContext.seccompProfile.type) && variables.spec.securityContext.seccompProfile.type == 'RuntimeDefault'";
    probes.push(pod(
        format!("{} && {rd}", pod_sc("seccompProfile")),
        &["securityContext", "seccompProfile"],
        true,
    ));
    probes.push(pod(
        format!("{} && !({rd})", pod_sc("seccompProfile")),
        &["securityContext", "seccompProfile"],
        false,
    ));
    probes
}

/// The container fields at `v`.
fn container_probes(v: KubeVersion) -> Vec<Probe> {
    let mut probes = Vec::new();
    let mut plain = vec![
        sc_field!(c_sc, "seLinuxOptions"),
        sc_field!(c_sc, "runAsUser"),
        sc_field!(c_sc, "runAsGroup"),
    ];
    if v >= KubeVersion::new(1, 30) {
        plain.push(sc_field!(c_sc, "appArmorProfile"));
    }
    for (cond, keys) in plain {
        probes.push(container(cond, keys, false));
    }
    // Fields whose no-op value the mutation removes: (key, CEL no-op test).
    let split: [(&'static str, &'static [&'static str], &str); 5] = [
        (
            "seccompProfile",
            &["securityContext", "seccompProfile"],
            "has(c.securityContext.seccompProfile.type) && c.securityContext.seccompProfile.type == 'RuntimeDefault'",
        ),
        (
            "capabilities",
            &["securityContext", "capabilities"],
            "!(has(c.securityContext.capabilities.add) && size(c.securityContext.capabilities.add) > 0)",
        ),
        (
            "readOnlyRootFilesystem",
            &["securityContext", "readOnlyRootFilesystem"],
            "c.securityContext.readOnlyRootFilesystem == false",
        ),
        (
            "privileged",
            &["securityContext", "privileged"],
            "c.securityContext.privileged == false",
        ),
        (
            "allowPrivilegeEscalation",
            &["securityContext", "allowPrivilegeEscalation"],
            "c.securityContext.allowPrivilegeEscalation == false",
        ),
    ];
    for (key, keys, no_op) in split {
        probes.push(container(format!("{} && {no_op}", c_sc(key)), keys, true));
        probes.push(container(
            format!("{} && !({no_op})", c_sc(key)),
            keys,
            false,
        ));
    }
    probes.push(container(
        format!(
            "{} && c.securityContext.procMount == 'Default'",
            c_sc("procMount")
        ),
        &["securityContext", "procMount"],
        true,
    ));
    probes.push(container(
        format!(
            "{} && c.securityContext.procMount != 'Default'",
            c_sc("procMount")
        ),
        &["securityContext", "procMount"],
        false,
    ));
    probes
}
