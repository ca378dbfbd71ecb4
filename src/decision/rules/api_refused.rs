//! WIN-API-REFUSED: combinations of the settings other rules report that
//! the API server refuses on a pod of any OS, so a Windows rule that calls
//! one of them "ignored" never stands alone on a pod that cannot be created.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;
use crate::decision::version::KubeVersion;
use crate::decision::view::ContainerRef;

/// From this release the API server keeps `hostUsers` and `procMount` by
/// default (the UserNamespacesSupport and ProcMountType gates are on), so
/// its checks on them apply; before, it dropped both fields.
const USER_NAMESPACES_BY_DEFAULT: KubeVersion = KubeVersion::new(1, 33);

/// From 1.33 the API server keeps `seLinuxChangePolicy` (the
/// SELinuxChangePolicy gate is on) but, until the SELinuxMount gate is on by
/// default in 1.37, accepts only `Recursive` on a new pod.
const SELINUX_CHANGE_POLICY_KEPT: KubeVersion = KubeVersion::new(1, 33);
const SELINUX_MOUNT_BY_DEFAULT: KubeVersion = KubeVersion::new(1, 37);

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-API-REFUSED",
        title: "settings the API server refuses on a pod of any OS",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "`mountPropagation: Bidirectional` in a container that is not `privileged: true`; `procMount: Unmasked` without `hostUsers: false`; `hostNetwork`, `hostPID`, `hostIPC` or `volumeDevices` with `hostUsers: false` (those two from 1.33, when the API server keeps `hostUsers` and `procMount` by default); `shareProcessNamespace` with `hostPID`; `allowPrivilegeEscalation: false` with `privileged: true` or `capabilities.add: [CAP_SYS_ADMIN]`; from 1.33 to 1.36, pod `securityContext.seLinuxChangePolicy` other than `Recursive`.",
        why: "The API server's validation refuses these pods whatever their OS, so no controller can create them. Windows ignores each of these settings on its own (WIN-MOUNT-PROPAGATION, WIN-PROCMOUNT, WIN-HOSTPID, ...), which is why they are warnings there; together they are an error. The mutating webhook never removes `privileged` from a container with a Bidirectional mount, so its patch cannot create such a pod.",
        source: "kube-apiserver v1.37 validation (pkg/apis/core/validation/validation.go): validateMountPropagation ('Bidirectional mount propagation is available only to privileged containers'), the security context's procMount check ('`hostUsers` must be false to use `Unmasked`'), validateHostUsers ('when `hostUsers` is false'), validateShareProcessNamespace ('ShareProcessNamespace and HostPID cannot both be enabled'), the security context's allowPrivilegeEscalation check ('cannot set `allowPrivilegeEscalation` to false and `privileged` to true', '... and `capabilities.Add` CAP_SYS_ADMIN'). The procMount check dates from 1.30 (kubernetes/kubernetes PR #123520; 'Kubernetes v1.12 to v1.29 did not enforce that requirement', docs 'Configure a Security Context'); the UserNamespacesSupport and ProcMountType feature gates are on by default from 1.33. validateSELinuxChangePolicy accepts only `Recursive` (`Unsupported value: \"MountOption\": supported values: \"Recursive\"`) while the SELinuxMount gate is off (pkg/api/pod/util.go useOnlyRecursiveSELinuxChangePolicy), which it is by default until 1.37 (pkg/features/kube_features.go: beta off from 1.33, GA on in 1.37); before 1.33 the SELinuxChangePolicy gate is off and the field is dropped. Checked against real v1.34, v1.35, v1.36 and v1.37 API servers by tests/cluster/version_matrix.rs.",
        doc_url: "https://kubernetes.io/docs/concepts/storage/volumes/#mount-propagation",
        fix: "Remove the Linux-only setting: on Windows nodes it has no effect (remove `mountPropagation`, `procMount`, `hostUsers`, `shareProcessNamespace`, `allowPrivilegeEscalation` or `seLinuxChangePolicy`).",
        example: "containers:\n- name: csi\n  volumeMounts:\n  - name: plugins\n    mountPath: C:\\var\\lib\\kubelet\n    mountPropagation: Bidirectional",
        since: None,
        until: None,
    },
    check,
    export: |_| {
        Export::Gap("the API server refuses these pods itself, for every OS; nothing to add")
    },
};

/// Whether the container asks for `privileged: true` (the API server's test
/// for Bidirectional mounts and `allowPrivilegeEscalation: false`).
pub fn is_privileged(c: &ContainerRef<'_, '_>) -> bool {
    c.security_context().and_then(|s| s.privileged) == Some(true)
}

/// Whether the container has a mount with Bidirectional propagation.
pub fn has_bidirectional_mount(c: &ContainerRef<'_, '_>) -> bool {
    c.container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_propagation.as_deref() == Some("Bidirectional"))
}

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let spec = cx.spec;
    // Before 1.33 the API server drops hostUsers and procMount by default.
    let user_namespaces = cx.version >= USER_NAMESPACES_BY_DEFAULT;
    let no_host_users = user_namespaces && spec.host_users == Some(false);
    for (set, key) in [
        (spec.host_network == Some(true), "hostNetwork"),
        (spec.host_pid == Some(true), "hostPID"),
        (spec.host_ipc == Some(true), "hostIPC"),
    ] {
        if set && no_host_users {
            out.report(
                cx.spec_field(&[key]),
                format!("{key}: true with hostUsers: false is refused by the API server for every pod (\"when `hostUsers` is false\")"),
            );
        }
    }
    check_selinux_change_policy(cx, out);
    if spec.host_pid == Some(true) && spec.share_process_namespace == Some(true) {
        out.report(
            cx.spec_field(&["shareProcessNamespace"]),
            "shareProcessNamespace with hostPID is refused by the API server for every pod (\"ShareProcessNamespace and HostPID cannot both be enabled\")",
        );
    }
    for c in cx.containers() {
        let privileged = is_privileged(&c);
        for (j, m) in c.container.volume_mounts.iter().flatten().enumerate() {
            if m.mount_propagation.as_deref() == Some("Bidirectional") && !privileged {
                out.report(
                    cx.container_field(&c, &["volumeMounts"])
                        .index(j)
                        .key("mountPropagation"),
                    "mountPropagation Bidirectional in a container that is not privileged is refused by the API server for every pod (\"Bidirectional mount propagation is available only to privileged containers\")",
                );
            }
        }
        if c.container.volume_devices.is_some() && no_host_users {
            out.report(
                cx.container_field(&c, &["volumeDevices"]),
                "volumeDevices with hostUsers: false is refused by the API server for every pod (\"when `hostUsers` is false\")",
            );
        }
        let Some(sc) = c.security_context() else {
            continue;
        };
        if user_namespaces && sc.proc_mount.as_deref() == Some("Unmasked") && !no_host_users {
            out.report(
                cx.container_field(&c, &["securityContext", "procMount"]),
                "procMount Unmasked without hostUsers: false is refused by the API server for every pod (\"`hostUsers` must be false to use `Unmasked`\")",
            );
        }
        if sc.allow_privilege_escalation == Some(false) {
            let sys_admin = sc
                .capabilities
                .as_ref()
                .and_then(|caps| caps.add.as_ref())
                .is_some_and(|add| add.iter().any(|a| a.as_ref() == "CAP_SYS_ADMIN"));
            if privileged || sys_admin {
                let with = if privileged {
                    "privileged: true"
                } else {
                    "capabilities.add CAP_SYS_ADMIN"
                };
                out.report(
                    cx.container_field(&c, &["securityContext", "allowPrivilegeEscalation"]),
                    format!("allowPrivilegeEscalation: false with {with} is refused by the API server for every pod"),
                );
            }
        }
    }
}

/// `seLinuxChangePolicy` other than `Recursive` while the API server accepts
/// only `Recursive` by default (1.33 to 1.36).
fn check_selinux_change_policy(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    let change_policy = cx
        .spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.se_linux_change_policy.as_deref());
    if let Some(policy) = change_policy.filter(|p| *p != "Recursive")
        && (SELINUX_CHANGE_POLICY_KEPT..SELINUX_MOUNT_BY_DEFAULT).contains(&cx.version)
    {
        out.report(
            cx.spec_field(&["securityContext", "seLinuxChangePolicy"]),
            format!("seLinuxChangePolicy: {policy} is refused by the API server for every new pod before {SELINUX_MOUNT_BY_DEFAULT}: it accepts only Recursive while the SELinuxMount feature gate is off, its default"),
        );
    }
}
