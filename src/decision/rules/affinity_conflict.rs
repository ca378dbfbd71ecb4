//! WIN-OS-CONFLICT: a pod spec that pins itself to Windows and Linux at once.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::path::FieldPath;
use crate::decision::rules::cel::{
    Export, ExportContext, Field, Probe, ProbeScope, cel_list, cel_str,
};
use crate::decision::targeting::Signal;

/// The rule's id, for the modules that name it.
pub const ID: &str = "WIN-OS-CONFLICT";

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: ID,
        title: "contradictory OS targeting",
        level: super::level::error,
        intent_lost: false,
        scope: Scope::Any,
        what: "A pod spec with both a Windows signal and a Linux signal among `nodeSelector` `kubernetes.io/os` (or the beta label), `spec.os.name`, required node affinity on the OS label, and a RuntimeClass that pins an OS.",
        why: "No node is both: the pod stays Pending forever, or lands on the OS its settings were not written for (`spec.os.name` is not a scheduling constraint).",
        source: "Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host' (use nodeSelector kubernetes.io/os); Pod OS field (spec.os.name) documentation.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Make every OS signal name the same OS.",
        example: "spec:\n  os:\n    name: windows\n  nodeSelector:\n    kubernetes.io/os: linux",
        since: None,
        until: None,
    },
    check,
    export,
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if !cx.target.is_conflicting() {
        return;
    }
    let windows: Vec<String> = cx.target.windows.iter().map(ToString::to_string).collect();
    for signal in &cx.target.linux {
        out.report(
            signal_path(cx, signal),
            format!(
                "{signal} targets linux, but {} target windows: no node matches both",
                windows.join(" and ")
            ),
        );
    }
}

/// Where a signal is written in the manifest.
pub(crate) fn signal_path(cx: &RuleContext<'_, '_, '_>, signal: &Signal) -> FieldPath {
    let affinity = || {
        cx.spec_field(&[
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        ])
    };
    let selector_or_affinity = |key: &str| {
        if cx
            .spec
            .node_selector
            .as_ref()
            .is_some_and(|s| s.get(key).is_some())
        {
            cx.spec_field(&["nodeSelector"]).map_key(key)
        } else {
            affinity()
        }
    };
    match signal {
        Signal::NodeSelector { key } => cx.spec_field(&["nodeSelector"]).map_key(key),
        Signal::OsName => cx.spec_field(&["os", "name"]),
        Signal::NodeAffinity => affinity(),
        Signal::RuntimeClass { .. } => cx.spec_field(&["runtimeClassName"]),
        Signal::WindowsBuild => cx
            .spec_field(&["nodeSelector"])
            .map_key(crate::decision::windows_builds::WINDOWS_BUILD_LABEL),
        Signal::OsSku { .. } => selector_or_affinity(crate::decision::targeting::OS_SKU_LABEL),
        Signal::GkeOsDistribution { .. } => {
            selector_or_affinity(crate::decision::targeting::GKE_OS_LABEL)
        }
        Signal::Placement { .. } if cx.spec.node_name.is_some() => cx.spec_field(&["nodeName"]),
        Signal::Placement { .. } if cx.spec.node_selector.is_some() => {
            cx.spec_field(&["nodeSelector"])
        }
        Signal::Placement { .. } => affinity(),
        Signal::HostProcess => cx.spec_field(&["securityContext", "windowsOptions", "hostProcess"]),
    }
}

/// WIN-OS-CONFLICT as CEL, for `winadmit admission-policy`: a Linux signal
/// on a pod the match conditions found Windows-targeted. Each Linux signal
/// is reported at its field.
fn export(cx: &ExportContext<'_>) -> Export {
    let selector = |key: &str| {
        let k = cel_str(key);
        Probe {
            scope: ProbeScope::Pod,
            container_hit: None,
            hit: format!(
                "has(variables.spec.nodeSelector) && {k} in variables.spec.nodeSelector && variables.spec.nodeSelector[{k}] == 'linux'"
            ),
            field: Field::Suffixes(format!("[{}]", cel_str(&format!(".nodeSelector[{key}]")))),
            removable: false,
        }
    };
    let mut probes = vec![
        selector(crate::decision::targeting::OS_LABEL),
        selector(crate::decision::targeting::BETA_OS_LABEL),
    ];
    if cx.cluster.version_at_least(1, 23) {
        probes.push(Probe::new(
            ProbeScope::Pod,
            "has(variables.spec.os) && has(variables.spec.os.name) && variables.spec.os.name == 'linux'",
            &["os", "name"],
        ));
    }
    let terms = "variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    probes.push(Probe::new(
        ProbeScope::Pod,
        format!(
            "has(variables.spec.affinity) && has(variables.spec.affinity.nodeAffinity) && has(variables.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && has({terms}) && size({terms}) > 0 && {terms}.all(t, has(t.matchExpressions) && t.matchExpressions.exists(r, r.key in ['kubernetes.io/os', 'beta.kubernetes.io/os'] && r.operator == 'In' && has(r.values) && size(r.values) > 0 && r.values.all(x, x == 'linux')))"
        ),
        &["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"],
    ));
    let linux_classes = cx
        .runtime_classes
        .names_for(crate::decision::targeting::Os::Linux);
    if !linux_classes.is_empty() {
        probes.push(Probe::new(
            ProbeScope::Pod,
            format!(
                "has(variables.spec.runtimeClassName) && variables.spec.runtimeClassName in {}",
                cel_list(&linux_classes)
            ),
            &["runtimeClassName"],
        ));
    }
    Export::cel(
        probes,
        "targets linux, but the pod also targets windows: no node matches both",
    )
    .partly(
        "RuntimeClasses are known by the policy's lists only; the webhook also reads the cluster's RuntimeClasses",
    )
    .with_windows_signal()
}
