//! WIN-MEMORY-LIMITS: Windows has no OOM killer; set memory limits equal to
//! requests.

use super::{Rule, RuleContext, RuleFindings, RuleInfo, Scope};
use crate::decision::rules::cel::Export;
use crate::decision::view::ContainerList;

pub static RULE: Rule = Rule {
    info: RuleInfo {
        id: "WIN-MEMORY-LIMITS",
        title: "Windows containers should set a memory limit equal to the request",
        level: super::level::info,
        intent_lost: false,
        scope: Scope::Windows,
        what: "A container or init container of a Windows pod with no `resources.limits.memory`, or with a `resources.requests.memory` that differs from the limit (compared as quantities: `1Gi` equals `1024Mi`). Ephemeral containers cannot set resources and are skipped.",
        why: "Windows has no out-of-memory process killer: when a node overcommits memory, processes page to disk instead of being killed, and every workload on the node slows down. Kubelet memory eviction is not implemented either. Only limits (with requests equal to them) keep a Windows node from overcommitting.",
        source: "Layer: the Windows kernel and the Windows kubelet, every Kubernetes version and runtime (advice, no refusal): Windows has no out-of-memory killer, so a container over its limit pages to disk instead of being killed, node memory can be overcommitted, and the kubelet does no memory eviction. The Docker-era Windows documentation says the same ('Intro to Windows support in Kubernetes': 'Windows does not have an out-of-memory process killer as Linux does'). Kubernetes documentation 'Resource Management for Windows nodes'.",
        doc_url: "https://kubernetes.io/docs/concepts/configuration/windows-resource-management/#resource-management-memory",
        fix: "Set `resources.limits.memory`, and set `resources.requests.memory` to the same value (or leave it out: it defaults to the limit).",
        example: "containers:\n- name: iis\n  image: mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022\n  resources:\n    requests:\n      memory: 256Mi\n    limits:\n      memory: 1Gi",
        since: None,
        until: None,
    },
    check,
    export: |_| Export::Gap("left to the webhook in this version"),
};

fn check(cx: &RuleContext<'_, '_, '_>, out: &mut RuleFindings) {
    for c in cx.containers() {
        if c.list == ContainerList::EphemeralContainers {
            continue;
        }
        let resources = c.container.resources.as_ref();
        let limit = resources
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"));
        let request = resources
            .and_then(|r| r.requests.as_ref())
            .and_then(|l| l.get("memory"));
        let Some(limit) = limit else {
            out.report(
                cx.container_field(&c, &["resources"]),
                format!(
                    "container {} has no memory limit; Windows has no OOM killer and pages to disk when the node overcommits",
                    c.name()
                ),
            );
            continue;
        };
        // The same text is the same quantity: most pods write both alike,
        // and parsing is the costly part of this rule.
        if let Some(request) = request
            && request != limit
            && quantity(request) != quantity(limit)
        {
            out.report(
                cx.container_field(&c, &["resources", "requests"]).map_key("memory"),
                format!(
                    "memory request {request} differs from the limit {limit}; on Windows set requests equal to limits so the node never overcommits memory"
                ),
            );
        }
    }
}

/// A resource quantity's value (`512Mi`, `1G`, `1e9`, `1500m`), or `None`
/// when it is not one; unparsable values compare by text.
#[must_use]
pub fn quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let n: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * scale)
}

#[cfg(test)]
mod tests {
    use super::quantity;

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(quantity("1Gi"), quantity("1024Mi"));
        assert_eq!(quantity("1G"), quantity("1000M"));
        assert_eq!(quantity("1e9"), quantity("1G"));
        assert_eq!(quantity("1500m"), Some(1.5));
        assert_ne!(quantity("1Gi"), quantity("1G"));
        assert_eq!(quantity("lots"), None);
        assert_eq!(quantity("1Zi"), None);
    }
}
