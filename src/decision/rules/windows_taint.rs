//! WIN-TAINT-TOLERATION and WIN-LINUX-TOLERATES-WINDOWS: the policy's
//! Windows node taint (`params.windowsTaint`).

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::finding::{Fix, FixKind};
use crate::decision::rules::cel::{Export, ExportContext, Probe, ProbeScope, cel_str};
use crate::decision::tolerations::{Taint, Tolerates, tolerates};

pub static MISSING: Rule = Rule {
    info: RuleInfo {
        id: "WIN-TAINT-TOLERATION",
        title: "Windows workload does not tolerate the Windows node taint",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A Windows-targeted workload with no toleration for the taint of the cluster's Windows nodes: the one the policy declares (`params.windowsTaint`, e.g. `{key: os, value: windows, effect: NoSchedule}`), else, when the cluster's nodes are known (the webhook's cluster cache, a live `report`, Node objects in the input), each `NoSchedule` taint that every Windows node carries and no other node carries (Kubernetes' own `node.kubernetes.io/*` taints aside). A taint only some Windows nodes carry (a dedicated or quarantined pool) or a `NoExecute` taint is never taken for the Windows taint: a pod that names such a node gets no toleration for it. Silent when neither is known.",
        why: "Tainting Windows nodes keeps workloads that do not select an OS off them. A Windows workload that does not tolerate the taint cannot be scheduled anywhere: Pending forever.",
        source: "Layer: the scheduler, every Kubernetes version: a pod without the toleration is never placed on the tainted Windows nodes (Pending, FailedScheduling); a warning, as the taint is the policy's `params.windowsTaint` or the nodes'. Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host': taint Windows nodes (e.g. os=windows:NoSchedule) and give Windows pods a matching toleration.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Add the toleration, e.g. `tolerations: [{key: os, operator: Equal, value: windows, effect: NoSchedule}]`. The mutating webhook adds it when `mutation.tolerateWindowsTaint` is true (the default).",
        example: "# policy: params: {windowsTaint: {key: os, value: windows, effect: NoSchedule}}\nspec:\n  nodeSelector:\n    kubernetes.io/os: windows\n  containers:\n  - name: iis\n    image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022",
        since: None,
        until: None,
    },
    check: check_missing,
    export: export_missing,
};

pub static LINUX_TOLERATES: Rule = Rule {
    info: RuleInfo {
        id: "WIN-LINUX-TOLERATES-WINDOWS",
        title: "Non-Windows workload tolerates the Windows node taint",
        level: super::level::warning,
        intent_lost: false,
        scope: Scope::Any,
        what: "A workload that does not target Windows but tolerates the Windows node taint by its key: the policy's `params.windowsTaint`, else, when the cluster's nodes are known, the `NoSchedule` taints every Windows node carries and no other node carries (reported when the pod tolerates them all). A tolerate-everything toleration (`operator: Exists` without a key) is reported only when nothing pins the workload to Linux.",
        why: "The taint is what keeps OS-unaware pods off Windows nodes. A workload that tolerates it and does not pin Linux can land on a Windows node and fail to start; one pinned to Linux gains nothing from the toleration and copies of it spread the mistake.",
        source: "Layer: the scheduler, every Kubernetes version: a Linux pod that tolerates the taint and selects no OS may be placed on a Windows node, where it cannot run. Kubernetes Windows docs, 'Ensuring OS-specific workloads land on the appropriate container host': the taint keeps Linux pods off Windows nodes unless they tolerate it; Linux pods should select kubernetes.io/os: linux.",
        doc_url: "https://kubernetes.io/docs/concepts/windows/user-guide/#ensuring-os-specific-workloads-land-on-the-appropriate-container-host",
        fix: "Remove the toleration of the Windows taint, and select Linux nodes with `nodeSelector: {kubernetes.io/os: linux}`.",
        example: "# policy: params: {windowsTaint: {key: os, value: windows, effect: NoSchedule}}\nspec:\n  tolerations:\n  - key: os\n    operator: Equal\n    value: windows\n    effect: NoSchedule\n  containers:\n  - name: web\n    image: nginx:1.27",
        since: None,
        until: None,
    },
    check: check_linux,
    export: |_| {
        Export::Gap(
            "judges the tolerations of workloads that do not target Windows against params.windowsTaint; not exported in this version",
        )
    },
};

fn best(cx: &RuleContext<'_, '_, '_>, taint: &Taint) -> Tolerates {
    let mut best = Tolerates::No;
    for t in cx.spec.tolerations.iter().flatten() {
        match tolerates(t, taint) {
            Tolerates::ByKey => return Tolerates::ByKey,
            Tolerates::Wildcard => best = Tolerates::Wildcard,
            Tolerates::No => {}
        }
    }
    best
}

fn describe(taint: &Taint) -> String {
    match &taint.value {
        Some(v) => format!("{}={v}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

/// The Windows node taints a rule judges against, each with what the
/// message says of where it comes from: the policy's `params.windowsTaint`;
/// else, when the cluster's nodes are known, the `NoSchedule` taints every
/// Windows node carries and no other node does
/// ([`WindowsNodes::windows_taints`](crate::decision::cluster::WindowsNodes::windows_taints)). A taint of a dedicated or fenced pool
/// is not the Windows nodes' taint, whatever node the pod names.
fn windows_taints(cx: &RuleContext<'_, '_, '_>) -> Vec<(Taint, String)> {
    if let Some(taint) = &cx.params.windows_taint {
        return vec![(
            taint.clone(),
            format!("the Windows node taint {}", describe(taint)),
        )];
    }
    let Some(nodes) = cx.nodes else {
        return Vec::new();
    };
    let several = nodes.nodes.len() > 1;
    nodes
        .windows_taints()
        .into_iter()
        .map(|(taint, node)| {
            (
                taint.clone(),
                format!(
                    "the taint {} of the Windows nodes (node {node}{})",
                    describe(taint),
                    if several { " and the others" } else { "" }
                ),
            )
        })
        .collect()
}

fn check_missing(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for (taint, which) in windows_taints(cx) {
        if best(cx, &taint) != Tolerates::No {
            continue;
        }
        let path = cx.spec_field(&["tolerations"]);
        let op = match &cx.spec.tolerations {
            Some(_) => crate::decision::finding::append_op(&path, taint.toleration()),
            None => crate::decision::finding::add_op(
                &path,
                serde_json::Value::Array(vec![taint.toleration()]),
            ),
        };
        let fix = Fix {
            kind: FixKind::Scheduling,
            description: format!("tolerate the Windows node taint {}", describe(&taint)),
            ops: vec![op],
        };
        out.report_with_fix(
            path,
            format!("no toleration for {which}: the pod cannot be scheduled onto Windows nodes"),
            fix,
        );
    }
}

fn check_linux(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    if cx.target.is_windows() {
        return;
    }
    let pinned = cx.target.is_linux();
    let taints = windows_taints(cx);
    // A pod that tolerates none of a taint the Windows nodes share is kept
    // off them by it.
    if taints.is_empty() || taints.iter().any(|(t, _)| best(cx, t) == Tolerates::No) {
        return;
    }
    for (i, t) in cx.spec.tolerations.iter().flatten().enumerate() {
        for (taint, which) in &taints {
            let message = match (tolerates(t, taint), pinned) {
                (Tolerates::ByKey, true) => format!(
                    "tolerates {which} on a Linux workload; the toleration has no use here, remove it"
                ),
                (Tolerates::ByKey, false) => format!(
                    "tolerates {which} and nothing pins the pod to Linux: it may be scheduled onto a Windows node"
                ),
                (Tolerates::Wildcard, false) => format!(
                    "tolerates every taint, including {which}, and nothing pins the pod to Linux: it may be scheduled onto a Windows node"
                ),
                _ => continue,
            };
            out.report(cx.spec_field(&["tolerations"]).index(i), message);
            break;
        }
    }
}

/// WIN-TAINT-TOLERATION as CEL, for `winadmit admission-policy`.
fn export_missing(cx: &ExportContext<'_>) -> Export {
    let Some(taint) = &cx.params.windows_taint else {
        return Export::Gap(
            "needs the Windows node taint: set params.windowsTaint (the webhook, lint and report also learn it from the Windows nodes they know)",
        );
    };
    let (key, value, effect) = (
        cel_str(&taint.key),
        cel_str(taint.value.as_deref().unwrap_or_default()),
        cel_str(&taint.effect),
    );
    let tolerates = format!(
        "(!has(t.effect) || t.effect == '' || t.effect == {effect}) && (((!has(t.key) || t.key == '') && has(t.operator) && t.operator == 'Exists') || (has(t.key) && t.key == {key} && ((has(t.operator) && t.operator == 'Exists') || ((!has(t.operator) || t.operator in ['Equal', '']) && (has(t.value) ? t.value : '') == {value}))))"
    );
    Export::cel(
        vec![Probe::new(
            ProbeScope::Pod,
            format!(
                "!(has(variables.spec.tolerations) && variables.spec.tolerations.exists(t, {tolerates}))"
            ),
            &["tolerations"],
        )],
        "no toleration for the Windows node taint: the pod cannot be scheduled onto Windows nodes",
    )
}
