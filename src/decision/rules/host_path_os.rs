//! WIN-HOSTPATH-LINUX-PATH and WIN-HOSTPATH-WINDOWS-PATH: hostPath volumes
//! that name the other OS's file system.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::{
    self, Export, ExportContext, Probe, ProbeScope, cel_str, regex_escape,
};

pub static LINUX_PATH: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPATH-LINUX-PATH",
        title: "hostPath on a Windows pod names a Linux-only host location",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A `hostPath` volume of a Windows pod whose path is, or lies under, a location that only exists on Linux hosts (`params.linuxHostPaths`: /proc, /sys, /dev, /lib/modules, /var/lib/docker, /etc/ssl, Linux runtime sockets under /run and /var/run, ...). Paths like `/var/lib/kubelet` or `/etc/cni` are not reported: Windows resolves them on the system drive (C:\\var\\lib\\kubelet), where Windows node components do keep those directories.",
        why: "A Windows node resolves `/proc` as `C:\\proc`: no kernel interface lives there. With `type: Directory` the pod fails to start; without a type the kubelet creates an empty directory and the container reads nothing. The manifest was almost certainly written for Linux.",
        source: "Kubernetes Windows docs, 'Storage': Windows hostPath volumes map host directories and named pipes (\\\\.\\pipe\\...) into containers; Linux kernel interfaces (/proc, /sys, /dev) and Linux runtime sockets do not exist on Windows nodes (Kubernetes 1.19 documentation, 'Intro to Windows support in Kubernetes', 'Compute': mounting named pipes from the host).",
        doc_url: "https://kubernetes.io/docs/concepts/windows/intro/#storage",
        fix: "Use the Windows location (e.g. `\\\\.\\pipe\\containerd-containerd` instead of /run/containerd/containerd.sock, `C:\\var\\log` instead of /var/log), or move the workload to Linux nodes.",
        example: "volumes:\n- name: proc\n  hostPath:\n    path: /proc",
        since: None,
        until: None,
    },
    check: check_linux_path,
    export: export_linux_path,
};

pub static LINUX_DEVICE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPATH-LINUX-DEVICE",
        title: "hostPath socket or device on a Linux path fails to mount on Windows",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A hostPath volume of `type: Socket`, `CharDevice` or `BlockDevice` whose path is a Linux path (not a drive letter, UNC path or named pipe).",
        why: "The kubelet checks the type before mounting; a Windows node has no Unix socket or device file at that path, so the mount fails (FailedMount) and the pod stays in ContainerCreating.",
        source: "The kubelet's hostPath type check (kubernetes/kubernetes pkg/volume/hostpath/host_path.go) and the Windows mounter (staging/src/k8s.io/mount-utils/mount_windows.go). Kubernetes documentation 'Windows Storage'.",
        doc_url: "https://kubernetes.io/docs/concepts/storage/windows-storage/",
        fix: "Use the Windows equivalent: a named pipe (`\\\\.\\pipe\\containerd-containerd`) or a Windows path, or drop the volume from the Windows pod.",
        example: "volumes:\n- name: sock\n  hostPath:\n    path: /run/containerd/containerd.sock\n    type: Socket",
        since: None,
        until: None,
    },
    check: check_linux_device,
    export: export_linux_device,
};

pub static WINDOWS_PATH: Rule = Rule {
    info: RuleInfo {
        id: "WIN-HOSTPATH-WINDOWS-PATH",
        title: "hostPath on a Linux pod names a Windows path",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Linux,
        what: "A `hostPath` volume of a Linux-targeted pod whose path is a Windows path: a drive (`C:\\...`, `C:/...`), a named pipe (`\\\\.\\pipe\\...`, `//./pipe/...`) or another UNC/device path (`\\\\server\\share`).",
        why: "Linux has no drives, backslash separators or named pipes: the kubelet treats `C:\\var\\log` as a relative file name and a named pipe does not exist, so the volume is wrong or the pod fails to start. This is never right on a Linux node, hence an error.",
        source: "Kubernetes Windows docs, 'Storage' and 'Container runtime' (named pipes such as \\\\.\\pipe\\containerd-containerd exist only on Windows nodes); Kubernetes 1.9 documentation, 'Windows Server Containers' > 'Volume Support' (Windows mount paths like C:\\etc\\foo).",
        doc_url: "https://kubernetes.io/docs/concepts/storage/volumes/#hostpath",
        fix: "Use the Linux path (e.g. /var/log, /run/containerd/containerd.sock), or, if the workload is meant for Windows, select Windows nodes instead of Linux.",
        example: "nodeSelector:\n  kubernetes.io/os: linux\nvolumes:\n- name: pipe\n  hostPath:\n    path: \\\\.\\pipe\\containerd-containerd",
        since: None,
        until: None,
    },
    check: check_windows_path,
    export: export_windows_path,
};

/// Is this a Windows path: a drive letter, a UNC or device path, or a
/// named pipe (in either slash style)?
#[must_use]
pub fn is_windows_path(p: &str) -> bool {
    let b = p.as_bytes();
    let drive = b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[1] == b':'
        && (b.len() == 2 || b[2] == b'\\' || b[2] == b'/');
    drive || p.starts_with("\\\\") || p.starts_with("//./") || p.starts_with("//?/")
}

/// The Linux-only location a path lies under, if any.
fn linux_only<'p>(path: &str, prefixes: &'p [String]) -> Option<&'p str> {
    let path = path.trim_end_matches('/');
    prefixes.iter().map(String::as_str).find(|p| {
        let p = p.trim_end_matches('/');
        path == p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

fn host_paths<'v>(cx: &RuleContext<'_, 'v, '_>) -> impl Iterator<Item = (usize, &'v str)> {
    cx.spec
        .volumes
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, v)| v.host_path.as_ref()?.path.as_deref().map(|p| (i, p)))
}

fn check_linux_path(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, path) in host_paths(cx) {
        if let Some(location) = linux_only(path, &cx.params.linux_host_paths) {
            out.report(
                cx.spec_field(&["volumes"]).index(i).key("hostPath").key("path"),
                format!(
                    "hostPath {path} is under {location}, which exists only on Linux hosts; a Windows node resolves it to C:{} and finds nothing there",
                    path.replace('/', "\\")
                ),
            );
        }
    }
}

fn check_linux_device(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, v) in cx.spec.volumes.iter().flatten().enumerate() {
        let Some(hp) = v.host_path.as_ref() else {
            continue;
        };
        let (Some(path), Some(kind)) = (hp.path.as_deref(), hp.kind.as_deref()) else {
            continue;
        };
        if matches!(kind, "Socket" | "CharDevice" | "BlockDevice") && !is_windows_path(path) {
            out.report(
                cx.spec_field(&["volumes"]).index(i).key("hostPath").key("type"),
                format!(
                    "hostPath {path} of type {kind} does not exist on a Windows node: the mount fails (FailedMount)"
                ),
            );
        }
    }
}

fn check_windows_path(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (i, path) in host_paths(cx) {
        if is_windows_path(path) {
            out.report(
                cx.spec_field(&["volumes"])
                    .index(i)
                    .key("hostPath")
                    .key("path"),
                format!("hostPath {path} is a Windows path but the pod targets Linux nodes"),
            );
        }
    }
}

/// WIN-HOSTPATH-LINUX-PATH as CEL, for `winadmit admission-policy`.
fn export_linux_path(cx: &ExportContext<'_>) -> Export {
    let prefixes: Vec<String> = cx
        .params
        .linux_host_paths
        .iter()
        .map(|p| regex_escape(p.trim_end_matches('/')))
        .collect();
    if prefixes.is_empty() {
        return Export::Gap("params.linuxHostPaths is empty: nothing to check");
    }
    // The path, or the path under a prefix, with trailing slashes allowed.
    let re = format!("^({})(/.*)?$", prefixes.join("|"));
    Export::cel(
        vec![Probe::new(
            ProbeScope::Volume,
            format!(
                "has(v.hostPath) && has(v.hostPath.path) && v.hostPath.path.matches({})",
                cel_str(&format!("(?s){re}"))
            ),
            &["hostPath", "path"],
        )],
        "hostPath names a location that exists only on Linux hosts; a Windows node resolves it to an empty directory on C:",
    )
}

/// WIN-HOSTPATH-LINUX-DEVICE as CEL, for `winadmit admission-policy`.
fn export_linux_device(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Volume,
            format!(
                "has(v.hostPath) && has(v.hostPath.path) && has(v.hostPath.type) && v.hostPath.type in ['Socket', 'CharDevice', 'BlockDevice'] && !v.hostPath.path.matches({})",
                cel_str(cel::WINDOWS_PATH)
            ),
            &["hostPath", "type"],
        )],
        "a hostPath socket or device on a Linux path does not exist on a Windows node: the mount fails (FailedMount)",
    )
}

/// WIN-HOSTPATH-WINDOWS-PATH as CEL, for `winadmit admission-policy`.
fn export_windows_path(_: &ExportContext<'_>) -> Export {
    Export::cel(
        vec![Probe::new(
            ProbeScope::Volume,
            format!(
                "has(v.hostPath) && has(v.hostPath.path) && v.hostPath.path.matches({})",
                cel_str(cel::WINDOWS_PATH)
            ),
            &["hostPath", "path"],
        )],
        "hostPath is a Windows path but the pod targets Linux nodes",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_paths() {
        for p in [
            "C:\\var\\log",
            "c:/k",
            "D:",
            "\\\\.\\pipe\\docker_engine",
            "//./pipe/x",
            "\\\\srv\\share",
        ] {
            assert!(is_windows_path(p), "{p}");
        }
        for p in ["/var/log", "var", "C", "RuleContext:/", "/c:/x", ""] {
            assert!(!is_windows_path(p), "{p}");
        }
    }

    #[test]
    fn linux_prefixes_match_whole_segments() {
        let prefixes = vec!["/proc".to_owned(), "/var/run/".to_owned()];
        assert_eq!(linux_only("/proc", &prefixes), Some("/proc"));
        assert_eq!(linux_only("/proc/1/ns", &prefixes), Some("/proc"));
        assert_eq!(
            linux_only("/var/run/docker.sock", &prefixes),
            Some("/var/run/")
        );
        assert_eq!(linux_only("/processes", &prefixes), None);
        assert_eq!(linux_only("/var/lib/kubelet", &prefixes), None);
    }
}
